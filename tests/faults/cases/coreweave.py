"""CoreWeave: faults in the pricing page (two region tables, per-instance prices)."""

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, replace_all, replace_once


def _both(first: Mutation, second: Mutation) -> Mutation:
    return lambda body: second(first(body))


FAULTS = BodyFaults(
    target="www.coreweave.com/pricing",
    # the desktop cell only: it then disagrees with the row's mobile copy, a wrong row either way
    bad_row=replace_once("<div>$49.24</div>", "<div>$0.00</div>"),
    # a real price change changes both copies of the price (desktop cell and mobile layout); the
    # connector checks one against the other, so a jump in one copy only is quarantined as wrong
    price_jump=_both(
        replace_once("<div>$68.80</div>", "<div>$688.00</div>"),
        replace_once('<span class="item-value">$68.80</span>', '<span class="item-value">$688.00</span>'),
    ),
    # instances resolve by their data-product slug (instance_types seed), so rename it too
    unknown_gpu=_both(
        replace_all('data-product="hgx-h200"', 'data-product="zeta-z9"'),
        replace_all("NVIDIA HGX H200", UNKNOWN_GPU),
    ),
    renamed_key=replace_all("On-Demand Price (Per Hour)", "Hourly Rate"),
)
