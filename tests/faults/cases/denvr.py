"""Denvr: faults in the GetConfigurations cassette (fixtures/denvr/get-configurations__2026-12-01.json).

The bad row and the jump hit one-cluster configurations (8x H100 in Hou1, 8x A100 40GB in
Msc1). Offers map by configuration name first (`h100_*_sxm_8x`), so `unknown_gpu` renames the
H200 configuration's name and its GPU together.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, renaming, replace_all, replace_once


def both(first: Mutation, second: Mutation) -> Mutation:
    return lambda body: second(first(body))


FAULTS = BodyFaults(
    target="/api/v1/servers/virtual/GetConfigurations",
    bad_row=replace_once('"price": 17.6', '"price": 0'),
    price_jump=replace_once('"price": 9.6,', '"price": 96.0,'),
    unknown_gpu=both(
        replace_once('"text_name": "H200 141GB SXM"', f'"text_name": "{UNKNOWN_GPU}"'),
        replace_all("H200_141GB_SXM_8x", "Zeta_Z9_8x"),
    ),
    renamed_key=renaming("price"),
)
