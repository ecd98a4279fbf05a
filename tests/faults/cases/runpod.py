"""RunPod: faults in the one GraphQL gpuTypes answer (H100 in both clouds, secure-only B200, RTX 3070)."""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, renaming, replace_once

FAULTS = BodyFaults(
    # One POST to one endpoint: the URL names the exchange.
    target="api.runpod.io/graphql",
    # B200's secure on-demand price made negative: its four pod sizes are quarantined.
    bad_row=replace_once('"securePrice": 6.39', '"securePrice": -6.39'),
    price_jump=replace_once('"communitySpotPrice": 0.07', '"communitySpotPrice": 0.7'),
    # RunPod names pods by the gpuTypes id, which is also what gpu_aliases matches.
    unknown_gpu=replace_once('"id": "NVIDIA GeForce RTX 3070"', f'"id": "NVIDIA {UNKNOWN_GPU}"'),
    renamed_key=renaming("securePrice"),
)
