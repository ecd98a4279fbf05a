"""Hot Aisle: faults in the virtual-machines availability answer of the replay cassette.

The bad row and the price jump hit one-listing shapes (the 2x MI300X on Xeon 8462Y+ and the 4x
MI300X VM), so the shape's own price is what goes wrong; the first 1x VM is listed twice.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="/virtual_machines/available/",
    bad_row=replace_once('"OnDemandPrice": 612', '"OnDemandPrice": 0'),
    price_jump=replace_once('"OnDemandPrice": 1196', '"OnDemandPrice": 11960'),
    unknown_gpu=replace_once('"model": "MI300X"', f'"model": "{UNKNOWN_GPU}"'),
    renamed_key=renaming("OnDemandPrice"),
)
