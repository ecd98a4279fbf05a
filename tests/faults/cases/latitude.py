"""Latitude.sh: faults in the GPU VM plans cassette (plans-virtual-machines__2026-12-01.json).

Each VM plan is offered in one region, so the bad row and the jump hit one offer each. Offers map
by plan family (`vm.l40s.*` in instance_types.csv), so `unknown_gpu` renames the plan's GPU and
its name together. `renamed_key` renames `hour` in every price block: each offer is then a wrong
row (the monthly price alone is never read as "offered monthly only").
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, renaming, replace_once


def both(first: Mutation, second: Mutation) -> Mutation:
    return lambda body: second(first(body))


FAULTS = BodyFaults(
    target="api.latitude.sh/plans/virtual_machines",
    bad_row=replace_once('"hour": 0.65', '"hour": -0.65'),  # vm.l40s.small
    price_jump=replace_once('"hour": 1.6,', '"hour": 16.0,'),  # vm.h100.small
    unknown_gpu=both(
        replace_once('"name": "vm.l40s.small"', '"name": "vm.zeta.small"'),
        replace_once('"gpu": "NVIDIA L40S"', f'"gpu": "{UNKNOWN_GPU}"'),
    ),
    renamed_key=renaming("hour"),
)
