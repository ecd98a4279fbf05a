"""Azure: faults in page 2 of the Retail Prices listing (ND96isr H100 v5 in westeurope, on-demand and Spot).

Page 2's URL is page 1's plus `$skip=100`, so that is the substring that names it alone.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_all, replace_once

# Azure names no GPU: the instance_types seed maps the ARM size, so the size itself is renamed to a
# new N-series family (both of its meters), as a new GPU size would appear in the listing.
_zeta_size = "Standard_ND_" + UNKNOWN_GPU.replace(" ", "_")

FAULTS = BodyFaults(
    target="skip=100",
    bad_row=replace_once('"retailPrice": 98.32', '"retailPrice": 0'),
    price_jump=replace_once('"retailPrice": 40.271872', '"retailPrice": 402.71872'),
    unknown_gpu=replace_all('"Standard_ND96isr_H100_v5"', f'"{_zeta_size}"'),
    renamed_key=renaming("retailPrice"),
)
