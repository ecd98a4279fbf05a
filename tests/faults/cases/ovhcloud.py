"""OVHcloud: faults in the order catalog cassette (hourly `pricings[].price` in 1e-8 EUR).

OVHcloud offers map by GPU model name (no instance_types rows), so `unknown_gpu` renames the
`blobs.technical.gpu.model` of one flavor only.
"""

from __future__ import annotations

from typing import Any

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, edit_json, renaming


def _h100(data: Any) -> dict[str, Any]:
    return next(a for a in data["addons"] if a["planCode"] == "h100-380.consumption")


def _zero_price(data: Any) -> None:
    _h100(data)["pricings"][0]["price"] = 0


def _ten_times(data: Any) -> None:
    _h100(data)["pricings"][0]["price"] *= 10


def _unknown_gpu(data: Any) -> None:
    _h100(data)["blobs"]["technical"]["gpu"]["model"] = UNKNOWN_GPU


FAULTS = BodyFaults(
    target="order/catalog/public/cloud",
    bad_row=edit_json(_zero_price),
    price_jump=edit_json(_ten_times),
    unknown_gpu=edit_json(_unknown_gpu),
    renamed_key=renaming("price"),
)
