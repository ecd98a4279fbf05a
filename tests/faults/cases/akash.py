"""Akash: faults in the gpu-prices answer (tests/fixtures/akash/gpu-prices__2026-12-01.json)."""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="console-api.akash.network/v1/gpu-prices",
    bad_row=replace_once('"weightedAverage": 2.75', '"weightedAverage": 0'),
    price_jump=replace_once('"weightedAverage": 1.49', '"weightedAverage": 14.9'),
    unknown_gpu=replace_once('"model": "t4"', f'"model": "{UNKNOWN_GPU}"'),
    renamed_key=renaming("weightedAverage"),
)
