"""AWS: faults in us-east-1's on-demand CSV offer file (p5.48xlarge, g6.xlarge, a Boston g4dn.xlarge).

The offer file is CSV: one row per sku x term x rate, the price in the `PricePerUnit` column. AWS
names no GPU in it; the instance_types seed maps the instance type, so the unknown GPU is a new
instance family ("zeta9.48xlarge", every row of the p5 product) that states 8 GPUs.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

_zeta_family = UNKNOWN_GPU.lower().replace(" z", "")  # "zeta9"

FAULTS = BodyFaults(
    target="us-east-1/index.csv",
    bad_row=replace_once('"0.8048000000"', '"NaN"'),  # the g6.xlarge on-demand rate
    price_jump=replace_once('"55.0400000000"', '"550.4000000000"'),  # the p5.48xlarge on-demand rate
    unknown_gpu=replace_all("p5.48xlarge", f"{_zeta_family}.48xlarge"),
    # A CSV's price key is its header: renamed, the file cannot be read (LayoutChanged names it).
    renamed_key=replace_once('"PricePerUnit"', '"Price Per Unit"'),
)
