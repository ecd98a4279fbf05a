"""IBM Cloud: faults in the 8x H100 plan's deployment pricing (fixtures/ibm/pricing-deployment-
gx3d-160x1792x8h100__2026-12-02.json).

Each metric names the profile it prices, and the offer's instance type and GPU are read from that
name, so `unknown_gpu` renames the eu-de on-demand metric's profile (instance type and GPU at
once). The first `"price"` of the body is eu-de's USA/USD on-demand rate (99.6); the jump is
us-east's on-demand rate (88.24), not a spot one, which would read as spot above on-demand.
`renamed_key` renames `metric_id` everywhere: no metric is readable, so the plan raises
`LayoutChanged` instead of reading as "nothing sold".
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="/99548819-fcbc-486c-8eeb-0355a56b035e/pricing/deployment",
    bad_row=replace_once('"price": 99.6', '"price": 0'),
    price_jump=replace_once('"price": 88.24', '"price": 882.4'),  # us-east on-demand
    unknown_gpu=replace_once(
        '"metric_id": "part-is.instance-hours-gx3d-160x1792x8h100"',
        f'"metric_id": "part-is.instance-hours-gx3d-160x1792x8{UNKNOWN_GPU}"',
    ),
    renamed_key=renaming("metric_id"),
)
