"""Verda: faults in the products page cassette (verda.com/products, two instance tables).

Offers map by instance type first (`*H100.80S.*` in instance_types.csv), so `unknown_gpu`
renames both the GPU model and the instance name of one row. A renamed On demand price header
is a layout change: the page raises `LayoutChanged` and the run closes nothing.
"""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="verda.com/products",
    bad_row=replace_once("$3.79/h", "$0.00/h"),
    price_jump=replace_once("$30.32/h", "$303.20/h"),
    unknown_gpu=replace_once(
        "<td>1H100.80S.30V</td><td> H100 SXM5 80GB </td>",
        f"<td>1ZETA9.80S.30V</td><td> {UNKNOWN_GPU} 80GB </td>",
    ),
    renamed_key=replace_all("On demand price", "Hourly rate"),
)
