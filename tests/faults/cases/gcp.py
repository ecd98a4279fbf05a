"""GCP: faults in page 2 of the SKU listing (N1 + T4 in europe-west4, on-demand and Spot; an H100).

GCP prices a machine from three SKUs (vCPU, RAM, GPU), so one SKU's fault reaches every machine
built from it: the bad row flags the four N1+T4 on-demand machines, and the price jump raises all
three Spot parts of N1+T4 tenfold so each Spot machine moves by exactly ten.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, renaming, replace_once


def _all(*mutations: Mutation) -> Mutation:
    def mutate(body: bytes) -> bytes:
        for mutation in mutations:
            body = mutation(body)
        return body

    return mutate


FAULTS = BodyFaults(
    target="pageToken=fixture-page-2",
    # the T4's on-demand price as NaN: the case that used to fail the whole provider
    bad_row=replace_once('"nanos": 350000000', '"nanos": NaN'),
    price_jump=_all(
        replace_once('"nanos": 7000000\n', '"nanos": 70000000\n'),  # Spot N1 vCPU
        replace_once('"nanos": 900000\n', '"nanos": 9000000\n'),  # Spot N1 RAM
        replace_once(
            '"units": "0",\n         "nanos": 140000000', '"units": "1",\n         "nanos": 400000000'
        ),
    ),
    # A GPU SKU no GPU_LABELS entry knows: it lands as a GPU-only offer under its raw label. The
    # H100 SKU is the one to rename because it builds no machine here (no A3 core/RAM SKUs).
    unknown_gpu=replace_once(
        '"Nvidia H100 80GB GPU running in Netherlands"', f'"Nvidia {UNKNOWN_GPU} GPU running in Netherlands"'
    ),
    renamed_key=renaming("unitPrice"),
)
