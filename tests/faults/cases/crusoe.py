"""Crusoe: faults in the hand-written crusoe.ai/cloud/pricing page of the replay cassette.

Offers map by instance-type pattern (`8x *mi300x*`), so `unknown_gpu` renames the card's model
heading, from which the GPU name and the instance type are built (an unknown model is offered as
1 GPU, as the one MI300X shape is). `renamed_key` renames the "On-demand" column label:
`LayoutChanged`, nothing is closed.
"""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="crusoe.ai/cloud/pricing",
    bad_row=replace_once("$3.45/GPU-hr", "$0.00/GPU-hr"),  # AMD MI300X, one 8-GPU shape
    price_jump=replace_once("$3.90/GPU-hr", "$39.00/GPU-hr"),  # NVIDIA H100 HGX
    unknown_gpu=replace_once(">AMD MI300X<", f">AMD {UNKNOWN_GPU}<"),
    renamed_key=replace_all(">On-demand<", ">Pay as you go<"),
)
