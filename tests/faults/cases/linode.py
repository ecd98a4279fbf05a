"""Linode: faults in page 1 of the type-list cassette (RTX 6000 plans, one with region prices)."""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

_rename_label = replace_once('"Dedicated 32GB + RTX6000 GPU x1"', f'"Dedicated 32GB + {UNKNOWN_GPU} GPU x1"')
# The instance_types seed maps Linode types by id, so the id is renamed with the label.
_rename_id = replace_once('"g1-gpu-rtx6000-1"', '"g1-gpu-zeta-z9-1"')

FAULTS = BodyFaults(
    target="linode/types?page=1",
    bad_row=replace_once('"hourly": 1.5', '"hourly": 0'),
    price_jump=replace_once('"hourly": 3.0', '"hourly": 30.0'),
    unknown_gpu=lambda body: _rename_id(_rename_label(body)),
    renamed_key=renaming("hourly"),
)
