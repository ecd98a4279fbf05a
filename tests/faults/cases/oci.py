"""OCI: faults in the price list (GPU parts per GPU-hour) and, for the unknown GPU, the shapes list.

OCI prices come from two bodies that only together make an offer: the price list carries the
per-GPU-hour rates, shapes.json the shape names (and so the GPU). `target` matches both
(apexapps.oracle.com and www.oracle.com); each mutation edits the body it is about and passes
the other through unchanged, and fails loudly when its text is missing from its own body.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, renaming, replace_once


def _is_shapes(body: bytes) -> bool:
    return b'"gpuQty"' in body


def _products(mutation: Mutation) -> Mutation:
    return lambda body: body if _is_shapes(body) else mutation(body)


def _shapes(mutation: Mutation) -> Mutation:
    return lambda body: mutation(body) if _is_shapes(body) else body


FAULTS = BodyFaults(
    target="oracle.com",
    bad_row=_products(replace_once('"value": 10\n', '"value": 0\n')),  # the H100 part, $0 per GPU-hour
    price_jump=_products(replace_once('"value": 2\n', '"value": 20\n')),  # the A10 part: list and estimate
    # The GPU is named only by the shape (BM.GPU.<model>.<count>), which the instance_types seed matches.
    unknown_gpu=_shapes(replace_once('"name": "BM.GPU.H100.8"', f'"name": "BM.GPU.{UNKNOWN_GPU}.8"')),
    renamed_key=_products(renaming("value")),
)
