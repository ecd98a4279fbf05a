"""TensorDock: faults in the v2 hostnodes answer (tests/fixtures/tensordock/hostnodes__2026-12-01.json).

The bad row and the price jump hit one-node segments (the A4000 node in Estonia, the H100 node in
Germany), so the segment's own price is what goes wrong.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="dashboard.tensordock.com/api/v2/hostnodes",
    bad_row=replace_once('"price_per_hr": 0.1', '"price_per_hr": -0.1'),
    price_jump=replace_once('"price_per_hr": 2.05', '"price_per_hr": 20.5'),
    unknown_gpu=replace_once('"v0Name": "geforcertx5090-pcie-32gb"', f'"v0Name": "{UNKNOWN_GPU}"'),
    renamed_key=renaming("price_per_hr"),
)
