"""CoreWeave: faults in the pricing page (two region tables, per-instance prices)."""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, replace_all, replace_once


def _both(first: Mutation, second: Mutation) -> Mutation:
    return lambda body: second(first(body))


FAULTS = BodyFaults(
    target="www.coreweave.com/pricing",
    # the desktop cell; the mobile copy of the same price sits in a <span> and is not read
    bad_row=replace_once("<div>$49.24</div>", "<div>$0.00</div>"),
    price_jump=replace_once("<div>$68.80</div>", "<div>$688.00</div>"),
    # instances resolve by their data-product slug (instance_types seed), so rename it too
    unknown_gpu=_both(
        replace_all('data-product="hgx-h200"', 'data-product="zeta-z9"'),
        replace_all("NVIDIA HGX H200", UNKNOWN_GPU),
    ),
    renamed_key=replace_all("On-Demand Price (Per Hour)", "Hourly Rate"),
)
