"""answers.estimate.billing_rules: the rule of each offer, worded once per distinct billing terms.

The ranking (CLI and `gpucost serve` alike) joins these words onto its offers, so they must be the
words answers.billing gives each offer on its own, whatever the order or repetition of terms."""

from __future__ import annotations

import polars as pl

from answers.billing import billing_rule
from answers.estimate import billing_rules

HETZNER = {
    "billing_granularity": "per_hour",
    "serverless": False,
    "currency": "EUR",
    "published_price_per_hour": 0.34,
    "setup_fee": 209.0,
    "monthly_price_cap": 212.3,
}
METERED = {
    "billing_granularity": "per_second",
    "serverless": False,
    "currency": "USD",
    "published_price_per_hour": 2.0,
    "setup_fee": None,
    "monthly_price_cap": None,
}
SERVERLESS = {**METERED, "serverless": True}


def offers(terms: list[dict[str, object]]) -> pl.DataFrame:
    # one offer per terms entry, in our own minimal shape of answers.prices.current_offers
    return pl.DataFrame(
        [
            {
                "provider": "p",
                "instance_type": f"t{i}",
                "region": "r",
                "zone": None,
                "pricing_type": "on_demand",
                **t,
            }
            for i, t in enumerate(terms)
        ]
    )


def test_each_offer_gets_the_words_billing_rule_gives_it_alone():
    terms = [HETZNER, METERED, HETZNER, SERVERLESS, METERED, HETZNER]
    rules = billing_rules(offers(terms)).sort("instance_type")
    assert rules.columns == ["provider", "instance_type", "region", "zone", "pricing_type", "billing_rule"]
    assert rules["instance_type"].to_list() == [f"t{i}" for i in range(len(terms))]
    assert rules["billing_rule"].to_list() == [billing_rule(t) for t in terms]
    # the words differ by terms, so the join on terms did not mix offers up
    assert len(set(rules["billing_rule"].to_list())) == 3


def test_null_terms_are_matched_to_their_own_words():
    # a cap and a fee unstated (null) must join like stated values: nulls_equal on the terms
    rules = billing_rules(offers([METERED, {**METERED, "setup_fee": 5.0}]))
    assert rules.height == 2
    assert rules.sort("instance_type")["billing_rule"].to_list() == [
        billing_rule(METERED),
        billing_rule({**METERED, "setup_fee": 5.0}),
    ]
