"""Massed Compute: faults in the gpu-inventory cassette (USD cents per instance-hour; products
named gpu_<n>x_<model>; tests/fixtures/massedcompute/gpu-inventory__2026-12-02.json)."""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="vm.massedcompute.com/api/v1/gpu-inventory",
    bad_row=replace_once('"price_cents_per_hour": 88,', '"price_cents_per_hour": 0,'),
    price_jump=replace_once('"price_cents_per_hour": 273,', '"price_cents_per_hour": 2730,'),
    # the product name carries the GPU model
    unknown_gpu=replace_once('"name": "gpu_1x_h100"', f'"name": "gpu_1x_{UNKNOWN_GPU}"'),
    renamed_key=renaming("price_cents_per_hour"),
)
