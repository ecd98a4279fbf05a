"""Marketplace aggregation: nearest-rank quantiles and segment offers, as properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors import base, market
from connectors.base import Offer
from connectors.market import HostOffer

prices = st.floats(min_value=0.01, max_value=500, allow_nan=False, allow_infinity=False)
price_lists = st.lists(prices, min_size=1, max_size=60)


def host(price: float, **overrides: object) -> HostOffer:
    fields: dict[str, object] = {
        "gpu_name_raw": "RTX 4090",
        "gpu_count": 1.0,
        "region": "US",
        "tier": "community-verified",
        "pricing_type": "on_demand",
        "price_per_hour": price,
        "gpu_memory_gb_raw": 23.99,
    }
    return HostOffer(**(fields | overrides))  # type: ignore[arg-type]


def offers(hosts: list[HostOffer]) -> list[Offer]:
    return list(market.aggregate("vast", hosts))


# --- quantiles ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([3.0], 0.1, 3.0),
        ([5.0, 1.0, 3.0], 0.5, 3.0),
        ([4.0, 1.0, 3.0, 2.0], 0.5, 2.0),  # lower median: a price a host really asks
        (list(range(1, 11)), 0.1, 1),
        (list(range(1, 31)), 0.1, 3),  # 0.1 * 30 is 3.0000000000000004 in floating point
        (list(range(1, 12)), 0.1, 2),
        ([7.0, 9.0], 0.0, 7.0),
        ([7.0, 9.0], 1.0, 9.0),
    ],
)
def test_nearest_rank_quantile(values: list[float], q: float, expected: float) -> None:
    assert market.quantile(values, q) == expected


def test_quantile_refuses_nothing_and_bad_q() -> None:
    with pytest.raises(ValueError, match="no values"):
        market.quantile([], 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        market.quantile([1.0], 1.5)


@given(price_lists, st.randoms())
def test_statistics_are_order_independent(values: list[float], rnd: object) -> None:
    shuffled = list(values)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert market.distribution(values) == market.distribution(shuffled)


@given(price_lists)
def test_statistics_are_monotone_and_real_prices(values: list[float]) -> None:
    dist = market.distribution(values)
    assert dist.min <= dist.p10 <= dist.median <= dist.max
    assert {dist.min, dist.p10, dist.median, dist.max} <= set(values)
    assert dist.count == len(values)


@given(price_lists, st.floats(min_value=0, max_value=1000, allow_nan=False))
def test_a_more_expensive_host_never_lowers_a_statistic(values: list[float], extra: float) -> None:
    before = market.distribution(values)
    after = market.distribution([*values, max(values) + extra])
    for name in ("min", "p10", "median", "max"):
        assert getattr(after, name) >= getattr(before, name), name
    assert after.count == before.count + 1


# --- segments -------------------------------------------------------------------------------------


@given(price_lists)
def test_one_segment_offer_with_the_exact_count_and_p10_price(values: list[float]) -> None:
    (offer,) = offers([host(p) for p in values])
    dist = market.distribution(values)
    assert offer.price_per_hour == dist.p10
    assert offer.provider_data["price_statistic"] == "p10"
    assert offer.provider_data["host_offers"] == len(values)
    assert (offer.provider_data["price_min"], offer.provider_data["price_median"]) == (dist.min, dist.median)
    assert offer.scope == "market:on_demand"
    assert offer.problem is None


@given(st.lists(prices, min_size=2, max_size=40), st.data())
def test_a_host_that_disappears_changes_statistics_not_the_key(
    values: list[float], data: st.DataObject
) -> None:
    gone = data.draw(st.integers(min_value=0, max_value=len(values) - 1))
    (before,) = offers([host(p) for p in values])
    (after,) = offers([host(p) for i, p in enumerate(values) if i != gone])
    assert after.key == before.key
    assert after.provider_data["host_offers"] == before.provider_data["host_offers"] - 1


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["RTX 4090", "H100 SXM", "A100 SXM4"]),
            st.sampled_from([1.0, 2.0, 8.0]),
            st.sampled_from(["US", "DE", "unknown"]),
            st.sampled_from(["datacenter-verified", "community-unverified"]),
            prices,
        ),
        min_size=1,
        max_size=80,
    )
)
def test_counts_add_up_and_keys_are_unique(rows: list[tuple[str, float, str, str, float]]) -> None:
    hosts = [host(p, gpu_name_raw=g, gpu_count=n, region=r, tier=t) for g, n, r, t, p in rows]
    result = offers(hosts)
    assert sum(o.provider_data["host_offers"] for o in result) == len(rows)
    assert len({o.key for o in result}) == len(result)
    assert len(result) == len({(g, n, r, t) for g, n, r, t, _ in rows})


def test_memory_class_separates_40_and_80_gb_and_absorbs_host_jitter() -> None:
    result = offers(
        [
            host(1.0, gpu_name_raw="A100 SXM4", gpu_memory_gb_raw=40.0),
            host(1.2, gpu_name_raw="A100 SXM4", gpu_memory_gb_raw=39.9),
            host(2.0, gpu_name_raw="A100 SXM4", gpu_memory_gb_raw=80.0),
        ]
    )
    assert {o.instance_type: o.provider_data["host_offers"] for o in result} == {
        "1x A100 SXM4 40GB (community-verified)": 2,
        "1x A100 SXM4 80GB (community-verified)": 1,
    }
    assert {o.gpu_memory_gb_raw for o in result} == {40.0, 80.0}


def test_host_extras_are_summarised_as_medians() -> None:
    hosts = [
        host(0.30, reliability=0.99, disk_per_gb_month=0.10, egress_per_tb=5.0, vcpus=16, ram_gb=64),
        host(0.35, reliability=0.95, disk_per_gb_month=0.20, egress_per_tb=10.0, vcpus=32, ram_gb=128),
        host(0.40, reliability=None, disk_per_gb_month=0.15, egress_per_tb=None, vcpus=8, ram_gb=32),
    ]
    (offer,) = offers(hosts)
    data = offer.provider_data
    assert (data["reliability_median"], data["reliability_min"]) == (0.95, 0.95)
    assert (data["disk_per_gb_month_median"], data["egress_per_tb_median"]) == (0.15, 5.0)
    assert data["ingress_per_tb_median"] is None
    assert (offer.vcpus, offer.ram_gb) == (16, 64)


@pytest.mark.parametrize("bad", [math.nan, 0.0, -1.0, math.inf])
def test_a_wrong_host_is_flagged_apart_and_left_out_of_the_statistics(bad: float) -> None:
    result = offers([host(0.3, host_id="a"), host(0.5, host_id="b"), host(bad, host_id="c")])
    good = [o for o in result if o.problem is None]
    flagged = [o for o in result if o.problem is not None]
    assert len(good) == 1 and good[0].provider_data["host_offers"] == 2
    assert good[0].provider_data["host_offers_invalid"] == 1
    assert good[0].price_per_hour == 0.3
    (wrong,) = flagged
    assert wrong.instance_type == "1x RTX 4090 24GB (community-verified) host c"
    assert wrong.key != good[0].key


def test_a_segment_of_only_wrong_hosts_keeps_its_key_flagged() -> None:
    (before,) = offers([host(0.3), host(0.4)])
    (after,) = offers(
        [host(math.nan, problem="`dph_total` missing"), host(math.nan, problem="`dph_total` missing")]
    )
    assert after.key == before.key
    assert math.isnan(after.price_per_hour)
    assert after.problem == "`dph_total` missing (2 host offers)"


def test_spot_and_on_demand_are_separate_scopes() -> None:
    result = offers([host(0.3), host(0.2, pricing_type="spot")])
    assert {(o.pricing_type, o.scope) for o in result} == {
        ("on_demand", "market:on_demand"),
        ("spot", "market:spot"),
    }


def test_market_shrink_limit_is_laxer_than_the_default() -> None:
    assert base.SHRINK_LIMIT < market.SHRINK_LIMIT < 1.0
