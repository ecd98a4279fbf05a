"""Paperspace: faults in the pricing page cassette (www.paperspace.com/pricing, Webflow cards).

Offers map by instance type (the card's GPU type, `<type>x<n>` for multi-GPU machines, seeded in
instance_types.csv), so `unknown_gpu` renames the card heading, which is both. The price has no
column header: `renamed_key` renames the "/ hour" unit text that marks every price block, and the
page then raises `LayoutChanged` (no card has a price), so the run closes nothing.
"""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="www.paperspace.com/pricing",
    bad_row=replace_once(">0.76<", ">0.00<"),
    price_jump=replace_once(">1.89<", ">18.90<"),
    unknown_gpu=replace_once('"instance-names">A6000<', f'"instance-names">{UNKNOWN_GPU}<'),
    renamed_key=replace_all(">/ hour<", ">/ unit<"),
)
