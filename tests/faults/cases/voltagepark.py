"""Voltage Park: faults in the bare-metal locations cassette (per-GPU USD prices per fabric;
tests/fixtures/voltagepark/bare-metal-locations__2026-12-02.json)."""

from __future__ import annotations

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, renaming, replace_once


def _both(first: Mutation, second: Mutation) -> Mutation:
    return lambda body: second(first(body))


FAULTS = BodyFaults(
    target="bare-metal/locations",
    bad_row=replace_once('"gpu_price_ethernet": "1.99"', '"gpu_price_ethernet": "-1.99"'),
    price_jump=replace_once('"gpu_price_infiniband": "2.49"', '"gpu_price_infiniband": "24.9"'),
    unknown_gpu=replace_once('"gpu_model": "h100-sxm5-80gb"', f'"gpu_model": "{UNKNOWN_GPU}"'),
    # both price keys lose their name: no location states a price any more
    renamed_key=_both(
        renaming("gpu_price_ethernet", "price_ethernet"), renaming("gpu_price_infiniband", "price_infiniband")
    ),
)
