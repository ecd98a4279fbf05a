"""Lambda: faults in the hand-written lambda.ai/pricing page of the replay cassette (four tabs).

Offers map by instance-type pattern (`8x *v100*`), so `unknown_gpu` renames the plan, from which
both the GPU name and the instance type are built. `renamed_key` renames the price column header
in every tab: `LayoutChanged`, the run fails and every last good price stays current.
"""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="lambda.ai/pricing",
    bad_row=replace_once(">$0.55<", ">$0.00<"),  # 8x Tesla V100
    price_jump=replace_once(">$2.99<", ">$29.90<"),  # 8x H100 SXM
    unknown_gpu=replace_all("NVIDIA Tesla V100", f"NVIDIA {UNKNOWN_GPU}"),
    renamed_key=replace_all("PRICE/GPU/HR*", "COST*"),
)
