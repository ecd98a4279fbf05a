"""Vultr: faults in the Bare Metal plans body (8x H100 with a preemptible rate, 8x MI300X)."""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="/v2/plans-metal",
    bad_row=replace_once('"hourly_cost": 23.92', '"hourly_cost": 0'),
    price_jump=replace_once('"hourly_cost": 17.52', '"hourly_cost": 175.2'),
    # The GPU is named only by the plan id, which is also what the instance_types seed matches.
    unknown_gpu=replace_once('"vbm-256c-2048gb-8-mi300x-gpu"', f'"vbm-256c-2048gb-8-{UNKNOWN_GPU}-gpu"'),
    renamed_key=renaming("hourly_cost"),
)
