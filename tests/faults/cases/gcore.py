"""Gcore: faults in the GPU flavor cassettes (fixtures/gcore/gpu-*-flavors__2026-12-02.json).

The target matches every flavor list (bare metal and virtual, each region; the refused region's
403 bodies hold no price, and the editors below raise only when no body they touch matches). The
bad row and the jump hit bare-metal flavors priced once (8x H100, 8x L40S in Luxembourg-2).
Offers map by `gpu_model` (gpu_aliases.csv), so `unknown_gpu` renames the H200 flavor's model.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, renaming, replace_once


def where_present(mutation: Mutation, marker: str) -> Mutation:
    """`mutation` on the bodies that contain `marker`; any other body of the target unchanged."""
    return lambda body: mutation(body) if marker.encode() in body else body


FAULTS = BodyFaults(
    target="/flavors?include_prices=true",
    bad_row=where_present(replace_once('"price_per_hour": 23.2,', '"price_per_hour": 0,'), '"H100"'),
    price_jump=where_present(replace_once('"price_per_hour": 10.4,', '"price_per_hour": 104.0,'), '"H100"'),
    unknown_gpu=where_present(replace_once('"gpu_model": "H200"', f'"gpu_model": "{UNKNOWN_GPU}"'), '"H200"'),
    renamed_key=where_present(renaming("price_per_hour"), "price_per_hour"),
)
