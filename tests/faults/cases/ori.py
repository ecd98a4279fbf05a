"""Ori: faults in the Serverless Kubernetes billing page cassette (docs.ori.co/kubernetes/billing).

The GPU table prints each rate per minute and per hour, and the two must agree, so the price
jump moves both cells of the H100 80GB row. Offers map by SKU, so `unknown_gpu` renames the L40S
row's resource and SKU together. A renamed `Price ($/hour)` header is a layout change: the page
raises `LayoutChanged` and the run closes nothing.
"""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, replace_all, replace_once


def both(first: Mutation, second: Mutation) -> Mutation:
    return lambda body: second(first(body))


FAULTS = BodyFaults(
    target="docs.ori.co/kubernetes/billing",
    bad_row=replace_once("<td>4.20</td>", "<td>0.00</td>"),
    price_jump=both(
        replace_once("<td>0.0575</td>", "<td>0.5750</td>"), replace_once("<td>3.45</td>", "<td>34.50</td>")
    ),
    unknown_gpu=both(
        replace_once("<td>NVIDIA L40S 48GB</td>", f"<td>NVIDIA {UNKNOWN_GPU} 48GB</td>"),
        replace_once("<td>ogx-k8s-l40s</td>", "<td>ogx-k8s-zeta</td>"),
    ),
    renamed_key=replace_all("Price ($/hour)", "Rate ($/hour)"),
)
