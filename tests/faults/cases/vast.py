"""Vast.ai: faults in the bundles search answer (tests/fixtures/vast/bundles__2026-12-01.json).

The bad row and the price jump hit one-host segments (the RTX 3090 in CA, the RTX 5090 in DE), so
the segment's own price is what goes wrong; a wrong host in a many-host segment is left out of
that segment's statistics instead (see connectors.market).
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="console.vast.ai/api/v0/bundles/",
    bad_row=replace_once('"dph_total": 0.1839', '"dph_total": 0'),
    price_jump=replace_once('"dph_total": 0.5139', '"dph_total": 5.139'),
    unknown_gpu=replace_once('"gpu_name": "RTX 5090"', f'"gpu_name": "{UNKNOWN_GPU}"'),
    renamed_key=renaming("dph_total"),
)
