"""Lium: faults in the public nodes feed (tests/fixtures/lium/nodes__2026-12-01.json).

The bad row and the price jump hit one-node segments (the 8x H100 in FI, the 8x RTX 5090 spot
node in DE), so the segment's own price is what goes wrong.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="lium.io/api/public/v1/nodes",
    bad_row=replace_once('"price_per_gpu_hour": 1.89', '"price_per_gpu_hour": -1.89'),
    price_jump=replace_once('"price_per_gpu_hour": 0.41', '"price_per_gpu_hour": 4.1'),
    unknown_gpu=replace_once('"gpu_model": "H100 80GB HBM3"', f'"gpu_model": "{UNKNOWN_GPU}"'),
    renamed_key=renaming("price_per_gpu_hour"),
)
