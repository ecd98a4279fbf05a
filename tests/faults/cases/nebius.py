"""Nebius: faults in the hand-written nebius.com/prices page of the replay cassette.

The cassette is fetched on 2026-12-01 (after October 1, 2026), so the "Effective October 1,
2026" column holds the current prices: `bad_row` and `price_jump` edit that column. Offers map
by instance-type pattern (`1x *rtx pro 6000*`), so `unknown_gpu` renames the Item label, from which
the GPU name and the instance type are built (an unknown Item is offered as 1 GPU).
`renamed_key` renames the on-demand price header: `LayoutChanged`, nothing is closed.
"""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="nebius.com/prices",
    bad_row=replace_once("<p>$5.40</p>", "<p>$0.00</p>"),  # HGX H200, effective-October column
    price_jump=replace_once("<p>$9.50</p>", "<p>$95.00</p>"),  # HGX B300
    unknown_gpu=replace_once("NVIDIA RTX PRO 6000", f"NVIDIA {UNKNOWN_GPU}"),  # a 1-GPU-only row
    renamed_key=replace_all("On-demand, GPU-hour", "Pay as you go, GPU-hour"),
)
