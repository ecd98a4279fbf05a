"""Thunder Compute: faults in the /v1/pricing cassette (fixtures/thundercompute/pricing__2026-12-01.json).

The answer is one flat map of `<gpu>_x<n>_<mode>` keys to prices, so the "price key" is the
`pricing` object itself: renaming it (`renamed_key`) must raise `LayoutChanged`, never read as
"nothing offered". The GPU word is part of the instance type, so `unknown_gpu` renames both at once.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="api.thundercompute.com:8443/v1/pricing",
    bad_row=replace_once('"h100_x4_production": 8.2', '"h100_x4_production": 0'),
    price_jump=replace_once('"a100xl_x2_production": 2.6', '"a100xl_x2_production": 26.0'),
    unknown_gpu=replace_once('"a6000_x1_prototyping"', f'"{UNKNOWN_GPU}_x1_prototyping"'),
    renamed_key=renaming("pricing"),
)
