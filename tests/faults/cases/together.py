"""Together AI: faults in the hand-written together.ai/pricing page of the replay cassette.

Offers map by instance-type pattern (`8x *hgx h100*`), so `unknown_gpu` renames a hardware row,
from which the GPU name and the instance type are built. `renamed_key` renames the "On-demand"
column label: `LayoutChanged`, nothing is closed.
"""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="together.ai/pricing",
    bad_row=replace_once("<td>$2.39</td>", "<td>$0.00</td>"),  # the H100 SXM Inference row
    price_jump=replace_once("SXM</td><td>$3.49</td>", "SXM</td><td>$34.90</td>"),  # HGX H100 SXM
    unknown_gpu=replace_once(">NVIDIA HGX H200<", f">NVIDIA HGX {UNKNOWN_GPU}<"),
    renamed_key=replace_all(">On-demand<", ">Pay as you go<"),
)
