"""SF Compute: faults in the h100i quote cassette (fixtures/sfcompute/quote-h100i__2026-12-01.json).

One quote answer per instance type, one offer each: the bad row and the jump hit the h100i node
price (US cents for a one-node, one-hour block). Offers map by instance type, and the GPU word is
read from it, so `unknown_gpu` renames the quoted instance type. `renamed_key` renames `price`:
the quote is then a wrong row, never "nothing for sale".
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="instance_type=h100i",
    bad_row=replace_once('"price": 1792', '"price": 0'),
    price_jump=replace_once('"price": 1792', '"price": 17920'),
    unknown_gpu=replace_once('"instance_type": "h100i"', f'"instance_type": "{UNKNOWN_GPU}"'),
    renamed_key=renaming("price"),
)
