"""Hot Aisle: faults in the hand-written hotaisle.xyz/pricing page of the replay cassette.

A replay run has no API key and team, so it reads the pricing page (the API path has its own
tests in tests/test_hotaisle.py). The bad row hits the Small VM card, the price jump the Medium
card (its 2x and 4x offers); `unknown_gpu` renames the Small card's model span, from which the
GPU name and the instance type are built; `renamed_key` drops "/GPU" from every price line, so
no price states its basis: `LayoutChanged`, nothing closed.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, replace_all, replace_once

FAULTS = BodyFaults(
    target="hotaisle.xyz/pricing",
    bad_row=replace_once('text-3xl font-bold">$2.99/GPU/hr', 'text-3xl font-bold">$0.00/GPU/hr'),
    price_jump=replace_once('text-3xl font-bold">$2.95/GPU/hr', 'text-3xl font-bold">$29.50/GPU/hr'),
    unknown_gpu=replace_once(
        '<span class="font-bold">MI300x</span>', f'<span class="font-bold">{UNKNOWN_GPU}</span>'
    ),
    renamed_key=replace_all("/GPU/hr", "/hr"),
)
