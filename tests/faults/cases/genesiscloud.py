"""Genesis Cloud: faults in the hand-written genesiscloud.com/pricing page of the replay cassette.

`renamed_key` drops the time unit from every price line (the page has no column label: the unit
is what makes a line a price): no card keeps a readable price, so `LayoutChanged`, nothing closed.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="www.genesiscloud.com/pricing",
    bad_row=replace_once("$ 2.19/h", "$ 0.00/h"),  # 8x HGX H100
    price_jump=replace_once("$ 2.80/h", "$ 28.00/h"),  # 8x HGX H200
    unknown_gpu=replace_once("NVIDIA HGX&trade; H100", f"NVIDIA {UNKNOWN_GPU}"),
    renamed_key=replace_all("/h<", "<"),
)
