"""SaladCloud: faults in the GPU classes cassette (per-priority USD rates as decimal strings).

Offers map by the class name's model ("RTX 4090 (24 GB)" -> alias "RTX 4090"), so `unknown_gpu`
renames one class; `renamed_key` renames `price`, which flags every offer instead of reading
them as "not offered".
"""

from __future__ import annotations

from typing import Any

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, edit_json, renaming


def _rtx4090_high(data: Any) -> dict[str, Any]:
    rtx4090 = next(c for c in data["items"] if c["name"] == "RTX 4090 (24 GB)")
    return next(p for p in rtx4090["prices"] if p["priority"] == "high")


def _zero(data: Any) -> None:
    _rtx4090_high(data)["price"] = "0.000"


def _ten_times(data: Any) -> None:
    price = _rtx4090_high(data)
    price["price"] = f"{float(price['price']) * 10:.3f}"


def _unknown(data: Any) -> None:
    next(c for c in data["items"] if c["name"] == "RTX 3090 (24 GB)")["name"] = f"{UNKNOWN_GPU} (24 GB)"


FAULTS = BodyFaults(
    target="gpu-classes",
    bad_row=edit_json(_zero),
    price_jump=edit_json(_ten_times),
    unknown_gpu=edit_json(_unknown),
    renamed_key=renaming("price"),
)
