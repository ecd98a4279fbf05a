"""Seeweb: faults in the ECS plans cassette (fixtures/seeweb/plans__2026-12-02.json).

The target matches both exchanges (`/plans` is a prefix of `/plans/availables`), and the
availability list repeats each plan's fields, so every edit below lands in both bodies: only
`/plans` is read for prices. The bad row and the jump hit one-region plans (1x A100, 1x RTX PRO
6000 in it-fr2). Offers map by GPU label (gpu_aliases.csv), so `unknown_gpu` renames the MI300X
plan's label (in both lists).
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    target="api.seeweb.it/ecs/v2/plans",
    bad_row=replace_once('"hourly_price": 0.99,', '"hourly_price": 0,'),  # ECS1GPU3
    price_jump=replace_once('"hourly_price": 1.25,', '"hourly_price": 12.5,'),  # ECS1GPU12
    unknown_gpu=replace_once('"gpu_label": "MI300X"', f'"gpu_label": "{UNKNOWN_GPU}"'),
    renamed_key=renaming("hourly_price"),
)
