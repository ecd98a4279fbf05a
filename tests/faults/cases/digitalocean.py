"""DigitalOcean: faults in page 1 of the sizes cassette (1x and 8x H100 GPU Droplets)."""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

_rename_model = replace_once('"nvidia_h100"', f'"{UNKNOWN_GPU}"')
# The instance_types seed maps gpu-h100x1-80gb by slug, so the slug is renamed with the model.
_rename_slug = replace_once('"gpu-h100x1-80gb"', f'"gpu-{UNKNOWN_GPU}x1-80gb"')

FAULTS = BodyFaults(
    target="v2/sizes?per_page=200",
    bad_row=replace_once('"price_hourly": 3.39', '"price_hourly": -3.39'),
    price_jump=replace_once('"price_hourly": 23.92', '"price_hourly": 239.2'),
    unknown_gpu=lambda body: _rename_slug(_rename_model(body)),
    renamed_key=renaming("price_hourly"),
)
