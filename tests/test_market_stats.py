"""Marketplace statistics beyond tests/test_market.py: p10 on few hosts, ties, the nearest-rank
definition as a property, wrong prices of every kind, and what each published offer carries.

The host offers are made up here (a segment of RTX 4090 hosts, as Vast.ai and Lium list them).
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors import market
from connectors.base import Offer
from connectors.market import HostOffer

prices = st.floats(min_value=0.01, max_value=500, allow_nan=False, allow_infinity=False)
price_lists = st.lists(prices, min_size=1, max_size=80)


def host(price: object, **overrides: object) -> HostOffer:
    fields: dict[str, object] = {
        "gpu_name_raw": "RTX 4090",
        "gpu_count": 1.0,
        "region": "US",
        "tier": "community-verified",
        "pricing_type": "on_demand",
        "price_per_hour": price,
        "gpu_memory_gb_raw": 24.0,
    }
    return HostOffer(**(fields | overrides))  # type: ignore[arg-type]


def offers(hosts: list[HostOffer], **kwargs: object) -> list[Offer]:
    return list(market.aggregate("vast", hosts, **kwargs))  # type: ignore[arg-type]


# --- p10 on few hosts -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hosts", "rank"),
    [
        (1, 1),  # one host: every statistic is its price
        (2, 1),
        (10, 1),  # 0.1 * 10 = 1: up to ten hosts, p10 is the cheapest
        (11, 2),  # 1.1 rounds up: the second cheapest
        (20, 2),
        (21, 3),
        (100, 10),
    ],
)
def test_p10_is_the_host_at_rank_ceil_of_a_tenth(hosts: int, rank: int) -> None:
    values = [float(price) for price in range(1, hosts + 1)]  # host i asks $i: rank = price
    random.Random(hosts).shuffle(values)
    assert market.distribution(values).p10 == float(rank)


def test_one_host_is_every_statistic() -> None:
    assert market.distribution([0.42]) == market.Distribution(0.42, 0.42, 0.42, 0.42, 1)


def test_two_hosts_median_is_the_cheaper() -> None:
    # nearest rank: the median of two is the lower one, a price a host really asks
    assert market.distribution([0.50, 0.30]) == market.Distribution(0.30, 0.30, 0.30, 0.50, 2)


def test_ties_are_counted_once_per_host() -> None:
    # nine hosts at $0.30 and one at $0.10: p10 is the cheap one, the median among the ties
    dist = market.distribution([0.30] * 9 + [0.10])
    assert (dist.min, dist.p10, dist.median, dist.max, dist.count) == (0.10, 0.10, 0.30, 0.30, 10)
    # eleven hosts: the cheap host is no longer a tenth of the market
    assert market.distribution([0.30] * 10 + [0.10]).p10 == 0.30


def test_a_single_cheap_outlier_moves_min_but_not_p10() -> None:
    # why p10: one mispriced host among twenty changes the minimum only
    honest = [(40 + i) / 100 for i in range(20)]
    before, after = market.distribution(honest), market.distribution([*honest[1:], 0.01])
    assert after.min == 0.01 and before.min == 0.40
    assert after.p10 == before.p10 == 0.41


# --- the nearest-rank definition, as properties ------------------------------------------------


@given(price_lists, st.floats(min_value=0.0, max_value=1.0))
def test_a_quantile_is_the_smallest_price_with_a_share_q_at_or_below_it(
    values: list[float], q: float
) -> None:
    value = market.quantile(values, q)
    assert value in values
    at_or_below = sum(v <= value for v in values)
    below = sum(v < value for v in values)
    assert at_or_below >= q * len(values) - 1e-9
    # any cheaper price has fewer than the share q at or below it (so `value` is the smallest)
    assert below < max(1.0, q * len(values) - 1e-9)


@given(price_lists)
def test_p10_lies_between_min_and_median(values: list[float]) -> None:
    dist = market.distribution(values)
    assert dist.min <= dist.p10 <= dist.median
    if len(values) <= 10:
        assert dist.p10 == dist.min


@given(price_lists, st.sampled_from([0.5, 2.0, 0.92, 1000.0]))
def test_statistics_follow_a_change_of_unit(values: list[float], factor: float) -> None:
    # a price converted (per GPU -> per instance, USD -> EUR) picks the same host at each statistic
    before, after = market.distribution(values), market.distribution([v * factor for v in values])
    for name in ("min", "p10", "median", "max"):
        assert getattr(after, name) == getattr(before, name) * factor, name


@pytest.mark.parametrize("q", [-0.01, 1.01, math.nan])
def test_quantile_refuses_q_outside_zero_one(q: float) -> None:
    with pytest.raises(ValueError, match=r"q must be in \[0, 1\]"):
        market.quantile([1.0, 2.0], q)


def test_quantile_refuses_nan_prices_instead_of_depending_on_their_order() -> None:
    # sorted() leaves NaN where it was, so the answer would depend on the hosts' order
    for values in ([math.nan, 1.0, 2.0], [1.0, math.nan, 2.0]):
        with pytest.raises(ValueError, match="NaN"):
            market.quantile(values, 0.5)


# --- wrong prices ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("price", "reason"),
    [
        (math.nan, "price is not a finite number"),
        (math.inf, "price is not a finite number"),
        (-math.inf, "price is not a finite number"),
        (0.0, "price is zero"),
        (-0.25, "price is negative"),
        (None, "price is not a number"),
        ("0.30", "price is not a number"),  # a connector that forgot to convert
    ],
)
def test_every_kind_of_wrong_price_is_flagged_with_its_reason(price: object, reason: str) -> None:
    good, wrong = offers([host(0.30, host_id="a"), host(price, host_id="b")])
    assert good.problem is None and good.price_per_hour == 0.30
    assert good.provider_data["host_offers"] == 1 and good.provider_data["host_offers_invalid"] == 1
    assert wrong.problem == f"{reason} (1 host offer)"
    assert wrong.instance_type == "1x RTX 4090 24GB (community-verified) host b"
    assert wrong.provider_data["host_ids"] == ["b"]
    # only a finite price is kept as the host stated it; nothing else reads as a price
    finite = isinstance(price, float) and math.isfinite(price)
    assert wrong.provider_data["host_prices"] == [price if finite else None]


@pytest.mark.parametrize("price", [None, "0.30"])
def test_a_lone_unreadable_host_is_a_nan_price_under_the_segments_key(price: object) -> None:
    (wrong,) = offers([host(price, host_id="x")])
    assert wrong.instance_type == "1x RTX 4090 24GB (community-verified)"
    assert math.isnan(wrong.price_per_hour) and wrong.problem == "price is not a number (1 host offer)"


def test_a_lone_host_with_a_readable_wrong_price_keeps_it_for_quarantine() -> None:
    (zero,) = offers([host(0.0, host_id="x")])
    assert (zero.price_per_hour, zero.problem) == (0.0, "price is zero (1 host offer)")
    # a row the connector knows is wrong keeps its price and the connector's reason
    (known,) = offers([host(0.50, host_id="x", problem="unknown GPU")])
    assert (known.price_per_hour, known.problem) == (0.50, "unknown GPU (1 host offer)")


def test_a_host_the_connector_flagged_stays_out_of_the_statistics_even_with_a_good_price() -> None:
    result = offers([host(0.30, host_id="a"), host(0.01, host_id="b", problem="GPU count unreadable")])
    good, wrong = result
    assert good.price_per_hour == 0.30 and good.provider_data["price_min"] == 0.30
    assert (wrong.price_per_hour, wrong.problem) == (0.01, "GPU count unreadable (1 host offer)")


def test_wrong_hosts_without_an_id_share_one_flagged_offer_not_one_key_twice() -> None:
    """Connectors write "?" for a host the marketplace gives no id; two such wrong hosts next to a
    good one must not make two offers under the same key (the warehouse refuses duplicates)."""
    result = offers([host(0.30, host_id="a"), host(0.0, host_id="?"), host(-2.0, host_id="?")])
    good, wrong = result
    keys = [(o.provider, o.instance_type, o.region, o.zone, o.pricing_type) for o in result]
    assert len(set(keys)) == len(keys) == 2
    assert good.price_per_hour == 0.30
    assert math.isnan(wrong.price_per_hour) and wrong.instance_type.endswith(" host ?")
    assert wrong.problem == "price is negative; price is zero (2 host offers)"
    assert wrong.provider_data["host_prices"] == [0.0, -2.0]


def test_a_segment_of_only_wrong_hosts_lists_every_reason_once_and_every_host() -> None:
    (wrong,) = offers([host(0.0, host_id="a"), host(-1.0, host_id="b"), host(0.0, host_id="c")])
    assert math.isnan(wrong.price_per_hour)  # no one price stands for three wrong ones
    assert wrong.problem == "price is negative; price is zero (3 host offers)"
    assert wrong.provider_data["host_ids"] == ["a", "b", "c"]
    assert wrong.provider_data["host_prices"] == [0.0, -1.0, 0.0]
    assert wrong.scope == "market:on_demand"


# --- what a segment offer carries -------------------------------------------------------------------


def test_a_segment_offer_describes_its_segment() -> None:
    hosts = [
        host(p, host_id=str(i), vcpus=v) for i, (p, v) in enumerate([(0.3, 8.0), (0.5, None), (0.4, 16.0)])
    ]
    (offer,) = offers(hosts, price_source="market")
    assert offer.key == ("vast", "1x RTX 4090 24GB (community-verified)", "US", None, "on_demand")
    assert (offer.gpu_name_raw, offer.gpu_count, offer.gpu_memory_gb_raw) == ("RTX 4090", 1.0, 24.0)
    assert (offer.currency, offer.price_source, offer.scope) == ("USD", "market", "market:on_demand")
    assert offer.vcpus == 8.0  # the lower median of the hosts that state it
    assert offer.ram_gb is None  # no host states it
    data = offer.provider_data
    assert (data["price_min"], data["price_p10"], data["price_median"], data["price_max"]) == (
        0.3,
        0.3,
        0.4,
        0.5,
    )
    assert data["price_p10"] == offer.price_per_hour and data["tier"] == "community-verified"
    assert data["reliability_median"] is None and data["reliability_min"] is None


def test_the_price_source_is_the_callers() -> None:
    (offer,) = offers([host(0.3)], price_source="list")
    assert offer.price_source == "list"


@pytest.mark.parametrize(
    ("memory", "count", "instance", "memory_class"),
    [
        (None, 1.0, "1x RTX 4090 (community-verified)", None),
        (math.nan, 1.0, "1x RTX 4090 (community-verified)", None),
        (0.0, 1.0, "1x RTX 4090 (community-verified)", None),
        (24.2, 0.5, "0.5x RTX 4090 24GB (community-verified)", 24.0),  # a fractional GPU
        (23.99, 8.0, "8x RTX 4090 24GB (community-verified)", 24.0),
    ],
)
def test_instance_type_names_count_memory_class_and_tier(
    memory: float | None, count: float, instance: str, memory_class: float | None
) -> None:
    (offer,) = offers([host(0.3, gpu_memory_gb_raw=memory, gpu_count=count)])
    assert (offer.instance_type, offer.gpu_memory_gb_raw) == (instance, memory_class)


def test_currencies_and_tiers_are_separate_segments() -> None:
    result = offers([host(0.3), host(0.28, currency="EUR"), host(0.5, tier="datacenter-verified")])
    assert sorted((o.currency, o.provider_data["tier"], o.price_per_hour) for o in result) == [
        ("EUR", "community-verified", 0.28),
        ("USD", "community-verified", 0.3),
        ("USD", "datacenter-verified", 0.5),
    ]


@given(
    st.lists(
        st.tuples(st.sampled_from(["US", "DE", "SE"]), st.sampled_from([1.0, 2.0, 8.0]), prices),
        min_size=1,
        max_size=50,
    ),
    st.randoms(),
)
def test_the_published_offers_do_not_depend_on_the_hosts_order(
    rows: list[tuple[str, float, float]], rnd: random.Random
) -> None:
    hosts = [host(p, region=r, gpu_count=n, host_id=str(i)) for i, (r, n, p) in enumerate(rows)]
    shuffled = list(hosts)
    rnd.shuffle(shuffled)
    # the same offers, in the same (key) order
    assert offers(shuffled) == offers(hosts)


@given(price_lists, st.lists(st.sampled_from([0.0, -1.0, math.nan, math.inf]), max_size=5))
def test_wrong_hosts_never_change_the_published_price(values: list[float], wrong: list[float]) -> None:
    clean = [host(p, host_id=f"g{i}") for i, p in enumerate(values)]
    noisy = clean + [host(p, host_id=f"w{i}") for i, p in enumerate(wrong)]
    (expected,) = offers(clean)
    published, *flagged = offers(noisy)
    assert published.price_per_hour == expected.price_per_hour
    assert published.provider_data["host_offers_invalid"] == len(wrong)
    assert len(flagged) == len(wrong) and all(o.problem for o in flagged)


def test_market_scope_names_the_pricing_type() -> None:
    assert market.market_scope("spot") == "market:spot"
