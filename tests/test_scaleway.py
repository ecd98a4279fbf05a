"""Scaleway: Product Catalog and Instance API answers -> EUR offers; real recordings, replay."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import scaleway
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
INSTANCE_API = "https://api.scaleway.com/instance/v1/zones/{zone}/products/servers"
DAY = "2026-07-30"


def answer(url: str, payload: Any) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return RawResponse(
        url=url, method="GET", status=200, fetched_at=datetime(2026, 12, 1, tzinfo=UTC), body=body
    )


def offers_of(items: list[object]) -> dict[tuple[str, str | None], Offer]:
    return {(o.instance_type, o.zone): o for o in items if isinstance(o, Offer)}


def product(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "sku": "/compute/l4_2_24g/run_fr-par-2",
        "product": "L4-2-24G",
        "locality": {"zone": "fr-par-2"},
        "price": {"retail_price": {"currency_code": "EUR", "units": 0, "nanos": 26250000}},
        "unit_of_measure": {"unit": "minute", "size": 1},
        "properties": {
            "hardware": {
                "cpu": {"virtual": {"count": 16}},
                "ram": {"size": 96 * 1024**3},
                "gpu": {"count": 2, "type": "L4"},
            },
            "instance": {"range": "GPU", "offer_id": "L4-2-24G"},
        },
        "status": "general_availability",
    }
    return base | overrides


# --- pure helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "memory"),
    [("H100-SXM-2-80G", 80.0), ("B300-SXM-8-288G", 288.0), ("L4-1-24G", 24.0), ("RENDER-S", None)],
)
def test_memory_from_name(name: str, memory: float | None) -> None:
    assert scaleway.memory_from_name(name) == memory


def test_region_of_a_zone() -> None:
    assert (scaleway.region_of("fr-par-2"), scaleway.region_of("pl-waw-3")) == ("fr-par", "pl-waw")


def test_a_per_minute_catalog_price_becomes_per_hour_for_the_whole_instance() -> None:
    offer = scaleway.catalog_offer(product())
    assert isinstance(offer, Offer)
    assert (offer.price_per_hour, offer.currency, offer.billing_unit) == (1.575, "EUR", "minute")
    assert (offer.gpu_name_raw, offer.gpu_count, offer.gpu_memory_gb_raw) == ("L4", 2.0, 24.0)
    assert (offer.vcpus, offer.ram_gb, offer.region, offer.zone) == (16.0, 96.0, "fr-par", "fr-par-2")
    assert (offer.pricing_type, offer.price_source, offer.scope, offer.problem) == (
        "on_demand",
        "list",
        "catalog:fr-par-2",
        None,
    )


def test_an_hourly_catalog_price_stays_hourly() -> None:
    offer = scaleway.catalog_offer(product(unit_of_measure={"unit": "hour", "size": 1}))
    assert isinstance(offer, Offer) and offer.price_per_hour == 0.02625 and offer.billing_unit is None


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"price": {}}, "`price.retail_price` missing"),
        ({"price": {"retail_price": {"currency_code": "EUR", "units": 0, "nanos": 0}}}, "not a positive"),
        ({"price": {"retail_price": {"currency_code": "EUR", "units": "x", "nanos": 0}}}, "unreadable price"),
        ({"unit_of_measure": {"unit": "fortnight", "size": 1}}, "unknown unit of measure"),
    ],
)
def test_a_wrong_price_is_flagged_not_dropped(overrides: dict[str, Any], problem: str) -> None:
    offer = scaleway.catalog_offer(product(**overrides))
    assert isinstance(offer, Offer) and problem in (offer.problem or "")
    if "positive" not in problem:
        assert math.isnan(offer.price_per_hour)


def test_cpu_only_and_retired_products_are_excluded_by_rule() -> None:
    cpu = product(
        properties={"hardware": {"cpu": {"virtual": {"count": 2}}}, "instance": {"offer_id": "POP2-2C-8G"}}
    )
    items = list(
        scaleway.parse([answer(scaleway.CATALOG_URL, {"products": [cpu, product(status="retired")]})])
    )
    assert exclusions(items) == {"cpu_only": 1, "not_for_sale": 1}
    assert not offers_of(items)


def test_a_product_without_offer_id_or_zone_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="offer_id"):
        scaleway.catalog_offer(product(locality={}))


@pytest.mark.parametrize("payload", [{"items": []}, [1], {"servers": []}])
def test_an_unknown_envelope_is_a_layout_change(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="`products` list"):
        list(scaleway.parse([answer(scaleway.CATALOG_URL, payload)]))


def test_an_empty_catalog_is_refused() -> None:
    with pytest.raises(LayoutChanged, match="refusing to report an empty catalog"):
        list(scaleway.parse([answer(scaleway.CATALOG_URL, {"products": [], "total_count": 0})]))


def test_the_catalog_offer_wins_over_the_instance_api_for_one_type_and_zone() -> None:
    server = {"gpu": 2, "gpu_info": {"gpu_name": "L4", "gpu_memory": 24 * 1024**3}, "hourly_price": 9.99}
    items = list(
        scaleway.parse(
            [
                answer(INSTANCE_API.format(zone="fr-par-2"), {"servers": {"L4-2-24G": server}}),
                answer(scaleway.CATALOG_URL, {"products": [product()]}),
            ]
        )
    )
    (offer,) = offers_of(items).values()
    assert offer.price_per_hour == 1.575 and offer.provider_data["source"] == "product-catalog"


# --- real recordings (../shared/data/raw/scaleway, terraform-provider-scaleway cassettes) -------


def _instance_pages(raw: Path, zone: str, pages: int, availability: bool) -> list[RawResponse]:
    url = INSTANCE_API.format(zone=zone)
    responses = [
        answer(
            f"{url}?page={n}", (raw / f"instance-v1-products-servers-{zone}-page{n}-{DAY}.json").read_bytes()
        )
        for n in range(1, pages + 1)
    ]
    if availability:
        responses += [
            answer(
                f"{url}/availability?page={n}",
                (raw / f"instance-v1-products-servers-availability-{zone}-page{n}-{DAY}.json").read_bytes(),
            )
            for n in range(1, pages + 1)
        ]
    return responses


def test_real_instance_api_fr_par_2(shared_raw: Path) -> None:
    items = list(scaleway.parse(_instance_pages(shared_raw / "scaleway", "fr-par-2", 3, availability=True)))
    offers = offers_of(items)
    assert len(offers) == 17  # B300-SXM x3, H100 PCIe x2, H100-SXM x3, L4 x4, L40S x4, RENDER-S
    assert exclusions(items) == {"cpu_only": 118}
    assert all(
        o.currency == "EUR" and o.pricing_type == "on_demand" and o.problem is None for o in offers.values()
    )
    sxm8 = offers[("H100-SXM-8-80G", "fr-par-2")]
    assert (sxm8.price_per_hour, sxm8.gpu_count, sxm8.gpu_memory_gb_raw, sxm8.vcpus, sxm8.ram_gb) == (
        25.3308,
        8.0,
        80.0,
        128.0,
        960.0,
    )
    assert sxm8.gpu_name_raw == "H100-SXM" and sxm8.available is True
    b300 = offers[("B300-SXM-8-288G", "fr-par-2")]
    assert (b300.price_per_hour, b300.gpu_memory_gb_raw, b300.available) == (60.0, 288.0, False)
    assert b300.provider_data["availability"] == "shortage"
    assert offers[("H100-1-80G", "fr-par-2")].gpu_name_raw == "H100-PCIe"
    render = offers[("RENDER-S", "fr-par-2")]
    assert (render.gpu_name_raw, render.gpu_memory_gb_raw, render.price_per_hour) == ("P100", 16.0, 1.221)
    assert offers[("L40S-8-48G", "fr-par-2")].price_per_hour == 11.759328


def test_real_instance_api_pl_waw_2(shared_raw: Path) -> None:
    items = list(scaleway.parse(_instance_pages(shared_raw / "scaleway", "pl-waw-2", 1, availability=False)))
    offers = offers_of(items)
    assert len(offers) == 10 and exclusions(items) == {"cpu_only": 40}
    assert {o.region for o in offers.values()} == {"pl-waw"}
    assert offers[("L4-1-24G", "pl-waw-2")].price_per_hour == 0.7875
    assert offers[("H100-2-80G", "pl-waw-2")].price_per_hour == 5.733
    assert all(o.available is None for o in offers.values())  # no availability answer read


@pytest.mark.parametrize(
    ("capture", "key", "per_hour", "gpu", "count", "vcpus", "ram"),
    [
        ("H100-SXM-2-80G-fr-par-2", ("H100-SXM-2-80G", "fr-par-2"), 6.6198, "H100-SXM", 2.0, 32.0, 240.0),
        ("L4-1-24G-pl-waw-2", ("L4-1-24G", "pl-waw-2"), 0.7875, "L4", 1.0, 8.0, 48.0),
    ],
)
def test_real_product_catalog_answers(
    shared_raw: Path,
    capture: str,
    key: tuple[str, str],
    per_hour: float,
    gpu: str,
    count: float,
    vcpus: float,
    ram: float,
) -> None:
    body = (
        shared_raw / "scaleway" / f"product-catalog-v2alpha1-public-catalog-{capture}-{DAY}.json"
    ).read_bytes()
    offers = offers_of(list(scaleway.parse([answer(scaleway.CATALOG_URL, body)])))
    assert list(offers) == [key]
    offer = offers[key]
    assert (offer.price_per_hour, offer.gpu_name_raw, offer.gpu_count, offer.vcpus, offer.ram_gb) == (
        per_hour,
        gpu,
        count,
        vcpus,
        ram,
    )
    assert (offer.currency, offer.billing_unit, offer.gpu_memory_gb_raw) == (
        "EUR",
        "minute",
        float(key[0][-3:-1]),
    )


def test_real_catalog_minute_price_matches_the_instance_api_hourly_price(shared_raw: Path) -> None:
    raw = shared_raw / "scaleway"
    hourly = offers_of(list(scaleway.parse(_instance_pages(raw, "fr-par-2", 3, availability=False))))
    body = (raw / f"product-catalog-v2alpha1-public-catalog-H100-SXM-2-80G-fr-par-2-{DAY}.json").read_bytes()
    catalog = offers_of(list(scaleway.parse([answer(scaleway.CATALOG_URL, body)])))
    key = ("H100-SXM-2-80G", "fr-par-2")
    assert catalog[key].price_per_hour == pytest.approx(hourly[key].price_per_hour)


# --- HTTP path --------------------------------------------------------------------------------


def test_fetch_pages_until_total_count() -> None:
    pages = {1: [product(), product()], 2: [product()], 3: [product()]}
    seen: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        seen.append(params)
        return httpx.Response(200, json={"products": pages[int(params["page"])], "total_count": 3})

    with make_client(transport=httpx.MockTransport(handler)) as client:
        responses = list(scaleway.fetch(client, {}))
    assert [p["page"] for p in seen] == ["1", "2"]
    assert seen[0] == {"page": "1", "page_size": "100", "product_types": "instance"}
    assert len(responses) == 2


def test_fetch_stops_on_an_empty_page() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        page = int(request.url.params["page"])
        return httpx.Response(200, json={"products": [product()] if page == 1 else [], "total_count": 10})

    with make_client(transport=httpx.MockTransport(handler)) as client:
        assert len(list(scaleway.fetch(client, {}))) == 2


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(scaleway.fetch(client, {}))
    assert len(responses) == 2
    items = list(scaleway.parse(responses))
    offers = offers_of(items)
    assert set(offers) == {
        ("H100-SXM-8-80G", "fr-par-2"),
        ("L40S-4-48G", "fr-par-2"),
        ("H100-SXM-2-80G", "fr-par-2"),
        ("L4-8-24G", "fr-par-2"),
        ("L4-1-24G", "pl-waw-2"),
        ("H100-1-80G", "pl-waw-2"),
    }
    assert offers[("H100-SXM-8-80G", "fr-par-2")].price_per_hour == 25.2
    assert offers[("L4-1-24G", "pl-waw-2")].price_per_hour == 0.78
    assert offers[("H100-SXM-2-80G", "fr-par-2")].price_per_hour == 6.6
    assert exclusions(items) == {"cpu_only": 1}


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_catalog_has_gpu_instances_in_eur() -> None:
    with make_client() as client:
        responses = list(scaleway.fetch(client, {}))
    offers = [o for o in scaleway.parse(responses) if isinstance(o, Offer)]
    assert offers and {o.currency for o in offers} == {"EUR"}
    assert any(o.gpu_name_raw and "H100" in o.gpu_name_raw for o in offers)


def test_every_gpu_in_the_real_recordings_maps_to_a_canonical_gpu(shared_raw: Path) -> None:
    from warehouse.hardware import HardwareCatalog

    catalog = HardwareCatalog.load()
    raw = shared_raw / "scaleway"
    responses = _instance_pages(raw, "fr-par-2", 3, availability=False)
    responses += _instance_pages(raw, "pl-waw-2", 1, availability=False)
    responses += [
        answer(scaleway.CATALOG_URL, path.read_bytes()) for path in sorted(raw.glob("product-catalog-*.json"))
    ]
    offers = [o for o in scaleway.parse(responses) if isinstance(o, Offer)]
    resolved = {
        o.instance_type: catalog.resolve(
            name, o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count
        )
        for o in offers
        for name in ("scaleway",)
    }
    assert [t for t, match in resolved.items() if match is None] == []
    assert resolved["H100-SXM-8-80G"].intra_node_interconnect == "NVSwitch"
    assert (resolved["H100-2-80G"].gpu_name, resolved["H100-2-80G"].intra_node_interconnect) == (
        "H100-PCIe",
        "PCIe",
    )
    assert {m.gpu_name for m in resolved.values()} == {"B300", "H100-PCIe", "H100-SXM", "L4", "L40S", "P100"}
