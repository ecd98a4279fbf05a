"""Fluidstack: faults in the pricing page cassette (www.fluidstack.io/pricing, one table).

Offers map by GPU name (the instance type is the model text, seeded per model), so `unknown_gpu`
renames the model cell of one row. A renamed On-Demand header is a layout change: the page
raises `LayoutChanged` and the run closes nothing.
"""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="www.fluidstack.io/pricing",
    bad_row=replace_once("<p>$2.69</p>", "<p>$0.00</p>"),
    price_jump=replace_once("<p>$1.69</p>", "<p>$16.90</p>"),
    unknown_gpu=replace_once(">Nvidia H100 SXM<", f">Nvidia {UNKNOWN_GPU}<"),
    renamed_key=replace_all("On-Demand Price (/hr)", "Hourly (/hr)"),
)
