"""Cudo Compute: faults in the machine-types cassette (component prices per hour, as strings).

Cudo offers map by `gpuModel` (no instance_types rows), so `unknown_gpu` renames the GPU model of
one machine type. `price_jump` multiplies every component of that type by ten, so each of its
shapes' whole-VM prices is ten times its last.
"""

from __future__ import annotations

from typing import Any

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, edit_json, renaming


def _h100(data: Any) -> dict[str, Any]:
    return next(m for m in data["machineTypes"] if m["gpuModel"] == "H100 SXM")


def _zero_gpu_price(data: Any) -> None:
    _h100(data)["gpuPriceHr"]["value"] = "0"


def _ten_times(data: Any) -> None:
    machine = _h100(data)
    for key in ("gpuPriceHr", "vcpuPriceHr", "memoryGibPriceHr"):
        machine[key]["value"] = f"{float(machine[key]['value']) * 10:.6f}"


def _unknown_gpu(data: Any) -> None:
    _h100(data)["gpuModel"] = UNKNOWN_GPU


FAULTS = BodyFaults(
    target="vms/machine-types-2",
    bad_row=edit_json(_zero_gpu_price),
    price_jump=edit_json(_ten_times),
    unknown_gpu=edit_json(_unknown_gpu),
    renamed_key=renaming("gpuPriceHr"),
)
