"""JarvisLabs: faults in the server_meta cassette (per-GPU rates of container, VM and legacy pools)."""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="/misc/server_meta",
    # The europe-01 H100 pool (1x and 8x offers): a $0 rate must be quarantined.
    bad_row=replace_once('"price_per_hour": 2.69', '"price_per_hour": 0'),
    price_jump=replace_once('"price_per_hour": 1.49', '"price_per_hour": 14.9'),
    # The GPU type is also the instance family the instance_types seed matches, so one rename does both.
    unknown_gpu=replace_once('"gpu_type": "H200"', f'"gpu_type": "{UNKNOWN_GPU}"'),
    renamed_key=renaming("price_per_hour"),
)
