"""Daytona: faults in the GPU price list cassette (per-GPU USD rates; GPUs map by `type`)."""

from __future__ import annotations

from typing import Any

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, edit_json, renaming


def _h100(data: Any) -> dict[str, Any]:
    return next(g for g in data["gpus"] if g["type"] == "H100")


def _zero(data: Any) -> None:
    _h100(data)["onDemandPricePerHour"] = 0


def _ten_times(data: Any) -> None:
    _h100(data)["onDemandPricePerHour"] *= 10


def _unknown(data: Any) -> None:
    _h100(data)["type"] = UNKNOWN_GPU


FAULTS = BodyFaults(
    target="gpu-pricing",
    bad_row=edit_json(_zero),
    price_jump=edit_json(_ten_times),
    unknown_gpu=edit_json(_unknown),
    renamed_key=renaming("onDemandPricePerHour"),
)
