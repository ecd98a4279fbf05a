"""Linode type-list connector: GPU plans only, region prices, paging, the real capture, replay."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import linode
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from finetune.offer import HOST_STAGED

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
CAPTURE = "linode/v4beta-linode-types-page1-2024-07.json"


def answer(payload: Any, url: str = linode.TYPES_URL + "?page=1&page_size=500") -> RawResponse:
    return RawResponse(
        url=url,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def by_key(items: list[Any]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in items if isinstance(o, Offer)}


def gpu_type(**overrides: Any) -> dict[str, Any]:
    base = {
        "id": "g1-gpu-rtx6000-2",
        "label": "Dedicated 64GB + RTX6000 GPU x2",
        "class": "gpu",
        "memory": 65536,
        "vcpus": 16,
        "gpus": 2,
        "price": {"hourly": 3.0, "monthly": 2000.0},
        "region_prices": [],
    }
    return base | overrides


@pytest.mark.parametrize(
    ("label", "model"),
    [
        ("Dedicated 32GB + RTX6000 GPU x1", "RTX6000"),
        ("Dedicated 128GB + RTX6000 GPU x4", "RTX6000"),
        ("RTX4000 Ada x1 Small", "RTX4000 Ada"),
        ("RTX4000 Ada x4 Medium", "RTX4000 Ada"),
        ("", None),
    ],
)
def test_gpu_label(label: str, model: str | None) -> None:
    assert linode.gpu_label(label) == model


def test_gpu_type_gives_a_default_offer_and_one_per_region_price() -> None:
    regional = [{"id": "id-cgk", "hourly": 3.6, "monthly": 2400.0}]
    offers = by_key(linode.type_offers(gpu_type(region_prices=regional)))  # type: ignore[arg-type]
    assert set(offers) == {("g1-gpu-rtx6000-2", "global"), ("g1-gpu-rtx6000-2", "id-cgk")}
    default = offers[("g1-gpu-rtx6000-2", "global")]
    assert (default.price_per_hour, default.gpu_count, default.gpu_name_raw) == (3.0, 2.0, "RTX6000")
    assert (default.pricing_type, default.price_source, default.scope) == (
        "on_demand",
        "list",
        "types:on_demand",
    )
    assert (default.vcpus, default.ram_gb, default.provider_data["price_monthly"]) == (16.0, 64.0, 2000.0)
    jakarta = offers[("g1-gpu-rtx6000-2", "id-cgk")]
    assert (jakarta.price_per_hour, jakarta.provider_data["price_monthly"]) == (3.6, 2400.0)
    # Linode bills the hourly rate up to the monthly price: each region's own month caps it
    assert (default.monthly_price_cap, jakarta.monthly_price_cap) == (2000.0, 2400.0)


def test_a_monthly_price_missing_or_zero_caps_nothing() -> None:
    assert linode.monthly_cap({"hourly": 1.5, "monthly": 1000}) == 1000.0
    assert linode.monthly_cap({"hourly": 1.5, "monthly": 0}) is None
    assert linode.monthly_cap({"hourly": 1.5}) is None
    assert linode.monthly_cap({"hourly": 1.5, "monthly": "n/a"}) is None


def test_cpu_plans_are_excluded_by_rule() -> None:
    result = linode.type_offers(
        gpu_type(id="g6-standard-2", label="Linode 4GB", **{"class": "standard"}, gpus=0)
    )
    assert isinstance(result, Excluded) and result.reason == "cpu_only"


@pytest.mark.parametrize(
    ("price", "problem"),
    [
        ({"hourly": 0, "monthly": 0}, "not positive"),
        ({"hourly": math.nan}, "not a number"),
        ({"monthly": 2000.0}, "price.hourly missing"),
        ({"hourly_renamed": 3.0}, "price.hourly missing"),
    ],
)
def test_wrong_prices_are_flagged_offers(price: dict[str, Any], problem: str) -> None:
    (offer,) = linode.type_offers(gpu_type(price=price))  # type: ignore[misc]
    assert problem in (offer.problem or "")


@pytest.mark.parametrize(
    ("payload", "label"),
    [
        ({"types": []}, "`data` list missing"),
        ({"data": [{"id": "g6-nanode-1", "class": "nanode", "gpus": 0}]}, "no type with class 'gpu'"),
        ({"data": [{"label": "x"}]}, "type without `id`"),
        ({"data": [gpu_type(region_prices=[{"hourly": 1.0}])]}, "`region_prices` entry without `id`"),
    ],
)
def test_unreadable_payloads_are_layout_changes(payload: Any, label: str) -> None:
    with pytest.raises(LayoutChanged, match=label):
        list(linode.parse([answer(payload)]))


@pytest.mark.parametrize(("payload", "pages"), [({"pages": 3}, 3), ({}, 1)])
def test_page_count(payload: dict, pages: int) -> None:
    assert linode.page_count(payload) == pages


def test_page_count_rejects_nonsense() -> None:
    with pytest.raises(LayoutChanged, match="`pages`"):
        linode.page_count({"pages": 0})


# --- the real capture (linodego go-vcr recording, PROVENANCE.md: EXTRACTED response body) ------


def test_real_capture(shared_raw: Path) -> None:
    payload = json.loads((shared_raw / CAPTURE).read_text())
    url = "https://api.linode.com/v4beta/linode/types?page=1"
    items = list(linode.parse([answer(payload, url)]))
    offers = by_key(items)
    assert exclusions(items) == {"cpu_only": 33}
    assert set(offers) == {(f"g1-gpu-rtx6000-{n}", "global") for n in (1, 2, 3, 4)}  # no GPU region prices
    for n in (1, 2, 3, 4):
        offer = offers[(f"g1-gpu-rtx6000-{n}", "global")]
        assert (offer.price_per_hour, offer.gpu_count, offer.gpu_name_raw) == (1.5 * n, float(n), "RTX6000")
        assert offer.provider_data["price_monthly"] == offer.monthly_price_cap == 1000.0 * n
    assert (offers[("g1-gpu-rtx6000-4", "global")].vcpus, offers[("g1-gpu-rtx6000-4", "global")].ram_gb) == (
        24.0,
        128.0,
    )


def test_capture_and_cassette_gpus_resolve(shared_raw: Path) -> None:
    from warehouse.hardware import HardwareCatalog

    catalog = HardwareCatalog.load()
    payload = json.loads((shared_raw / CAPTURE).read_text())
    with make_client(replay=REPLAY) as client:
        responses = [*linode.fetch(client, {}), answer(payload)]
    offers = [o for o in linode.parse(responses) if isinstance(o, Offer)]
    resolved = {
        o.instance_type: catalog.resolve("linode", o.instance_type, o.gpu_name_raw, None, o.gpu_count or None)
        for o in offers
    }
    assert [t for t, match in resolved.items() if match is None] == []
    four = resolved["g1-gpu-rtx6000-4"]
    assert (four.gpu_name, four.gpu_count, four.intra_node_interconnect) == ("Quadro-RTX6000", 4, HOST_STAGED)
    ada = resolved["g2-gpu-rtx4000a4-m"]
    assert (ada.gpu_name, ada.gpu_count, ada.intra_node_interconnect) == ("RTX4000-Ada", 4, HOST_STAGED)


# --- HTTP path ------------------------------------------------------------------------------------


def test_fetch_asks_for_every_page() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        page = int(request.url.params["page"])
        return httpx.Response(200, json={"data": [gpu_type(id=f"t{page}")], "page": page, "pages": 3})

    with make_client(transport=httpx.MockTransport(handler)) as client:
        responses = list(linode.fetch(client, {}))
    assert [r.url.rsplit("?", 1)[1] for r in responses] == [f"page={n}&page_size=500" for n in (1, 2, 3)]
    assert {o.instance_type for o in linode.parse(responses) if isinstance(o, Offer)} == {"t1", "t2", "t3"}


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(linode.fetch(client, {}))
    assert len(responses) == 2
    items = list(linode.parse(responses))
    offers = by_key(items)
    assert exclusions(items) == {"cpu_only": 1}
    assert len(offers) == 6
    assert offers[("g1-gpu-rtx6000-2", "br-gru")].price_per_hour == 3.5
    assert offers[("g1-gpu-rtx6000-2", "global")].price_per_hour == 3.0
    ada = offers[("g2-gpu-rtx4000a4-m", "global")]
    assert (ada.price_per_hour, ada.gpu_count, ada.gpu_name_raw) == (2.96, 4.0, "RTX4000 Ada")


@pytest.mark.network
def test_live_types_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lift the offline guard: this test exists to reach api.linode.com
    with make_client() as client:
        items = list(linode.parse(list(linode.fetch(client, {}))))
    offers = [o for o in items if isinstance(o, Offer)]
    assert offers and all(o.problem is None for o in offers)


def test_a_zero_default_beside_region_prices_means_priced_per_region_only() -> None:
    regional = [{"id": "us-ord", "hourly": 3.0, "monthly": 2000.0}]
    offers = by_key(linode.type_offers(gpu_type(price={"hourly": 0, "monthly": 0}, region_prices=regional)))  # type: ignore[arg-type]
    assert set(offers) == {("g1-gpu-rtx6000-2", "us-ord")}
    (zero,) = linode.type_offers(gpu_type(price={"hourly": 0, "monthly": 0}))  # type: ignore[misc]
    assert zero.problem == "price.hourly is not positive: 0"  # no region prices: a wrong row
