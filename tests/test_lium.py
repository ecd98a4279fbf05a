"""Lium public nodes feed: rentable counts, the real capture, layout changes, replay."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import lium, market
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from finetune.offer import HOST_STAGED
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
CAPTURE = "lium/public-v1-nodes-recorded-2026-09-10-trimmed.json"
CATALOG = HardwareCatalog.load()


def answer(payload: Any) -> RawResponse:
    return RawResponse(
        url=lium.API_URL,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def node(**overrides: Any) -> dict[str, Any]:
    base = {
        "id": "n-1",
        "gpu_model": "RTX 4090",
        "gpu_count": 4,
        "available_gpu_count": 4,
        "price_per_gpu_hour": 0.3,
        "min_rentable_gpu_count": 1,
        "gpu_memory_gb": 24,
        "cpu_count": 32,
        "ram_gb": 128,
        "tier": "secure",
        "country_code": "US",
    }
    return base | overrides


def by_key(items: list[Any]) -> dict[tuple[str, str, str], Offer]:
    return {(o.instance_type, o.region, o.pricing_type): o for o in items if isinstance(o, Offer)}


@pytest.mark.parametrize(
    ("total", "available", "minimum", "counts"),
    [
        (8, 5, 1, (1, 2, 4)),
        (8, 8, 8, (8,)),
        (6, 6, 1, (1, 2, 4, 6)),
        (8, 3, 4, ()),
        (8, 0, 1, ()),
        (1, 1, 0, (1,)),
    ],
)
def test_rentable_counts(total: int, available: int, minimum: int, counts: tuple[int, ...]) -> None:
    assert lium.rentable_counts(total, available, minimum) == counts


def test_a_node_is_one_host_offer_per_rentable_count_with_its_share_of_cpu_and_ram() -> None:
    hosts, reason = lium.to_hosts(node())
    assert reason is None
    assert [(h.gpu_count, h.price_per_hour, h.vcpus, h.ram_gb) for h in hosts] == [
        (1.0, 0.3, 8, 32.0),
        (2.0, 0.6, 16, 64.0),
        (4.0, 1.2, 32, 128.0),
    ]
    assert {(h.pricing_type, h.tier, h.region) for h in hosts} == {("on_demand", "secure", "US")}


def test_spot_tier_is_spot_and_a_full_node_offers_nothing() -> None:
    (spot,), _ = lium.to_hosts(node(gpu_count=1, available_gpu_count=1, tier="spot"))
    assert (spot.pricing_type, spot.tier) == ("spot", "spot")
    assert lium.to_hosts(node(available_gpu_count=0)) == ([], "no_rentable_gpus")


@pytest.mark.parametrize(
    ("value", "problem"),
    [(None, "`price_per_gpu_hour` missing"), ("0.3", "`price_per_gpu_hour` is not a number")],
)
def test_an_unreadable_price_is_flagged(value: object, problem: str) -> None:
    (offer,) = [o for o in lium.parse([answer({"nodes": [node(gpu_count=1, price_per_gpu_hour=value)]})])]
    assert isinstance(offer, Offer) and math.isnan(offer.price_per_hour)
    assert offer.problem is not None and offer.problem.startswith(problem)


@pytest.mark.parametrize(
    ("payload", "label"),
    [
        ({"nodes": []}, "`nodes` is empty"),
        ({"items": []}, "`nodes` list missing"),
        ([], "`nodes` list missing"),
    ],
)
def test_missing_or_empty_nodes_is_a_layout_change(payload: Any, label: str) -> None:
    with pytest.raises(LayoutChanged, match=label):
        list(lium.parse([answer(payload)]))


def test_a_node_without_gpu_model_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="gpu_model"):
        list(lium.parse([answer({"nodes": [node(gpu_model=None)]})]))


# --- the real capture: recorded 2026-09-10, trimmed to four nodes ---------------------------------


def test_real_capture(shared_raw: Path) -> None:
    items = list(lium.parse([answer(json.loads((shared_raw / CAPTURE).read_text()))]))
    offers = by_key(items)
    assert len(offers) == 6 and exclusions(items) == {}
    assert offers[("8x RTX 5090 32GB (secure)", "JP", "on_demand")].price_per_hour == 4.0  # per node 4.0
    spot = offers[("1x RTX 5090 32GB (spot)", "US", "spot")]
    assert (spot.price_per_hour, spot.price_source, spot.scope) == (0.5, "market", "market:spot")
    # the H200 node has 5 of 8 GPUs free from 1: orders of 1, 2 and 4 GPUs at 3.99 each
    assert {k[0]: o.price_per_hour for k, o in offers.items() if "H200" in k[0]} == {
        "1x H200 140GB (secure)": 3.99,
        "2x H200 140GB (secure)": 7.98,
        "4x H200 140GB (secure)": 15.96,
    }
    a100 = offers[("8x A100-SXM4-80GB 80GB (secure)", "US", "on_demand")]
    assert (a100.price_per_hour, a100.vcpus, a100.ram_gb) == (9.84, 240, 1772.0)
    assert all(o.provider_data["host_offers"] == 1 for o in offers.values())
    names = {
        o.instance_type: CATALOG.resolve(
            o.provider, o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count
        )
        for o in offers.values()
    }
    assert {k: m.gpu_name for k, m in names.items() if m} == {
        "8x RTX 5090 32GB (secure)": "RTX5090",
        "1x RTX 5090 32GB (spot)": "RTX5090",
        "1x H200 140GB (secure)": "H200-SXM",
        "2x H200 140GB (secure)": "H200-SXM",
        "4x H200 140GB (secure)": "H200-SXM",
        "8x A100-SXM4-80GB 80GB (secure)": "A100-80GB-SXM",
    }
    # the feed states no interconnect: PCIe without P2P (a GeForce card has none anyway)
    assert names["8x RTX 5090 32GB (secure)"].intra_node_interconnect == HOST_STAGED


# --- HTTP path ------------------------------------------------------------------------------------


def test_fetch_sends_a_plain_get() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert (request.method, str(request.url)) == ("GET", lium.API_URL)
        assert "authorization" not in request.headers
        return httpx.Response(200, json={"nodes": [node()]})

    with make_client(transport=httpx.MockTransport(handler)) as client:
        assert len(by_key(list(lium.parse(list(lium.fetch(client, {})))))) == 3


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        items = list(lium.parse(list(lium.fetch(client, {}))))
    offers = by_key(items)
    rtx5090 = offers[("1x RTX 5090 32GB (secure)", "US", "on_demand")]
    assert (rtx5090.price_per_hour, rtx5090.provider_data["host_offers"]) == (0.55, 3)
    assert rtx5090.provider_data["price_median"] == 0.58
    assert offers[("1x RTX 4090 24GB (spot)", "US", "spot")].provider_data["host_offers"] == 2
    assert offers[("8x RTX 5090 32GB (spot)", "DE", "spot")].price_per_hour == 3.28
    assert offers[("8x H100 80GB HBM3 80GB (secure)", "FI", "on_demand")].price_per_hour == 15.12
    assert exclusions(items) == {"no_rentable_gpus": 2}
    assert sum(isinstance(i, Excluded) for i in items) == 1
    assert lium.shrink_limit == market.SHRINK_LIMIT
    for o in offers.values():
        assert CATALOG.resolve("lium", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)


@pytest.fixture
def allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the offline guard for the live smoke test only."""
    monkeypatch.undo()


@pytest.mark.network
@pytest.mark.usefixtures("allow_network")
def test_live_feed_answers_with_segments() -> None:
    with make_client() as client:
        offers = [o for o in lium.parse(list(lium.fetch(client, {}))) if isinstance(o, Offer)]
    assert offers and all(o.price_source == "market" for o in offers)
