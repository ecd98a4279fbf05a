"""DigitalOcean sizes connector: GPU sizes, regions, paging, the token, captures, replay."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import digitalocean
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, exclusions, missing_credentials
from connectors.http import make_client

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
TOKEN = "dop_v1_SECRET_TOKEN_123"


def answer(payload: Any) -> RawResponse:
    return RawResponse(
        url=digitalocean.SIZES_URL + "?per_page=200",
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def by_key(items: list[Any]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in items if isinstance(o, Offer)}


def size(**overrides: Any) -> dict[str, Any]:
    base = {
        "slug": "gpu-h100x8-640gb",
        "memory": 1966080,
        "vcpus": 160,
        "price_monthly": 17796.48,
        "price_hourly": 23.92,
        "regions": ["nyc2"],
        "available": True,
        "description": "H100 GPU - 8X",
        "gpu_info": {"count": 8, "vram": {"amount": 640, "unit": "gib"}, "model": "nvidia_h100"},
    }
    return base | overrides


# --- one size -------------------------------------------------------------------------------------


def test_gpu_size_gives_one_list_offer_per_region() -> None:
    offers = by_key(digitalocean.size_offers(size(regions=["nyc2", "tor1"])))  # type: ignore[arg-type]
    assert set(offers) == {("gpu-h100x8-640gb", "nyc2"), ("gpu-h100x8-640gb", "tor1")}
    offer = offers[("gpu-h100x8-640gb", "tor1")]
    assert (offer.pricing_type, offer.price_source, offer.price_per_hour) == ("on_demand", "list", 23.92)
    assert (offer.gpu_name_raw, offer.gpu_count, offer.gpu_memory_gb_raw) == ("nvidia_h100", 8.0, 80.0)
    assert (offer.vcpus, offer.ram_gb, offer.available, offer.scope) == (
        160.0,
        1920.0,
        True,
        "sizes:on_demand",
    )
    assert offer.provider_data["price_monthly"] == 17796.48


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [({"gpu_info": None}, "cpu_only"), ({"regions": []}, "no_region")],
)
def test_excluded_sizes_say_why(overrides: dict[str, Any], reason: str) -> None:
    result = digitalocean.size_offers(size(**overrides))
    assert isinstance(result, Excluded) and result.reason == reason


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"price_hourly": 0}, "not positive"),
        ({"price_hourly": -2}, "not positive"),
        ({"price_hourly": math.nan}, "not a number"),
        ({"price_hourly": None}, "price_hourly missing"),
    ],
)
def test_wrong_prices_are_flagged_offers(overrides: dict[str, Any], problem: str) -> None:
    (offer,) = digitalocean.size_offers(size(**overrides))  # type: ignore[misc]
    assert problem in (offer.problem or "")


def test_a_renamed_price_key_is_a_problem_not_a_missing_offer() -> None:
    renamed = size()
    renamed["price_per_hour"] = renamed.pop("price_hourly")
    (offer,) = digitalocean.size_offers(renamed)  # type: ignore[misc]
    assert offer.problem == "price_hourly missing" and math.isnan(offer.price_per_hour)


def test_next_page() -> None:
    assert digitalocean.next_page({"links": {"pages": {"next": "https://x/2"}}}) == "https://x/2"
    assert digitalocean.next_page({"links": {}}) is None
    assert digitalocean.next_page({}) is None


@pytest.mark.parametrize(
    ("payload", "label"),
    [
        ({"size": []}, "`sizes` list missing"),
        (
            {"sizes": [{"slug": "s-1vcpu-1gb", "price_hourly": 0.01, "regions": ["nyc1"]}]},
            "no size with `gpu_info`",
        ),
        ({"sizes": [{"price_hourly": 1.0}]}, "size without `slug`"),
        (
            {"sizes": [{k: v for k, v in size().items() if k != "price_hourly"}]},
            "`price_hourly` missing from all",
        ),
    ],
)
def test_unreadable_payloads_are_layout_changes(payload: Any, label: str) -> None:
    with pytest.raises(LayoutChanged, match=label):
        list(digitalocean.parse([answer(payload)]))


def test_the_token_is_required() -> None:
    assert missing_credentials(digitalocean, {}) == ("DIGITALOCEAN_TOKEN",)
    assert missing_credentials(digitalocean, {"DIGITALOCEAN_TOKEN": ""}) == ("DIGITALOCEAN_TOKEN",)
    assert missing_credentials(digitalocean, {"DIGITALOCEAN_TOKEN": TOKEN}) == ()


# --- real capture (gpuhunt test literal, PROVENANCE.md: EXTRACTED) ------------------------------


def test_real_capture(shared_raw: Path) -> None:
    payload = json.loads((shared_raw / "digitalocean" / "sizes-sample.json").read_text())
    items = list(digitalocean.parse([answer(payload)]))
    offers = by_key(items)
    assert set(offers) == {("gpu-h100x8-640gb", "nyc1"), ("gpu-mi300x8-1536gb", "nyc1")}
    assert exclusions(items) == {"cpu_only": 1}
    h100 = offers[("gpu-h100x8-640gb", "nyc1")]
    assert (h100.price_per_hour, h100.gpu_count, h100.gpu_memory_gb_raw, h100.vcpus) == (
        23.92,
        8.0,
        80.0,
        160.0,
    )
    mi300x = offers[("gpu-mi300x8-1536gb", "nyc1")]
    assert (mi300x.price_per_hour, mi300x.gpu_name_raw, mi300x.gpu_memory_gb_raw) == (
        15.92,
        "amd_mi300x",
        192.0,
    )
    assert mi300x.ram_gb == 1920.0 and mi300x.provider_data["price_monthly"] == 11844.48


def test_a_spot_size_is_excluded_and_never_the_cheapest_on_demand_offer(shared_raw: Path) -> None:
    # The real capture plus a `-spot` twin of its 8x H100 size (our own edit, in the Sizes API's
    # shape): DigitalOcean documents no terms for such slugs, so they are counted, not published.
    payload = json.loads((shared_raw / "digitalocean" / "sizes-sample.json").read_text())
    h100 = next(s for s in payload["sizes"] if s["slug"] == "gpu-h100x8-640gb")
    payload["sizes"].append(h100 | {"slug": "gpu-h100x8-640gb-spot", "price_hourly": 11.92})
    items = list(digitalocean.parse([answer(payload)]))
    offers = by_key(items)
    assert ("gpu-h100x8-640gb-spot", "nyc1") not in offers
    assert exclusions(items) == {"cpu_only": 1, "spot_size_terms_undocumented": 1}
    on_demand_h100 = [o for o in offers.values() if o.gpu_name_raw == "nvidia_h100"]
    assert [o.price_per_hour for o in on_demand_h100] == [23.92]


def test_only_a_spot_suffix_marks_a_spot_size() -> None:
    # "spot" elsewhere in a slug is not the suffix rule
    offers = by_key(list(digitalocean.parse([answer({"sizes": [size(slug="gpu-spotless-h100x1")]})])))
    assert {slug for slug, _ in offers} == {"gpu-spotless-h100x1"}


def test_capture_and_cassette_gpus_resolve(shared_raw: Path) -> None:
    from warehouse.hardware import HardwareCatalog

    catalog = HardwareCatalog.load()
    payload = json.loads((shared_raw / "digitalocean" / "sizes-sample.json").read_text())
    with make_client(replay=REPLAY) as client:
        responses = [*digitalocean.fetch(client, {"DIGITALOCEAN_TOKEN": TOKEN}), answer(payload)]
    offers = [o for o in digitalocean.parse(responses) if isinstance(o, Offer)]
    resolved = {
        o.instance_type: catalog.resolve(
            "digitalocean", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count or None
        )
        for o in offers
    }
    assert [slug for slug, match in resolved.items() if match is None] == []
    names = {slug: (m.gpu_name, m.gpu_count) for slug, m in resolved.items() if m is not None}
    assert names["gpu-h100x8-640gb"] == ("H100-SXM", 8)
    assert names["gpu-mi300x8-1536gb"] == ("MI300X", 8)
    assert names["gpu-4000adax1-20gb"] == ("RTX4000-Ada", 1)
    assert names["gpu-l40sx1-48gb"] == ("L40S", 1)


# --- HTTP path ------------------------------------------------------------------------------------


def test_fetch_sends_the_token_as_a_header_follows_pages_and_never_records_it() -> None:
    sent: list[httpx.Request] = []
    second = "https://api.digitalocean.com/v2/sizes?page=2&per_page=200"

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.params.get("page") == "2":
            return httpx.Response(200, json={"sizes": [size(slug="b")], "links": {}})
        return httpx.Response(200, json={"sizes": [size(slug="a")], "links": {"pages": {"next": second}}})

    with make_client(transport=httpx.MockTransport(handler), secrets=[TOKEN]) as client:
        responses = list(digitalocean.fetch(client, {"DIGITALOCEAN_TOKEN": TOKEN}))
    assert [r.headers.get("authorization") for r in responses] == [None, None]
    assert all(request.headers["authorization"] == f"Bearer {TOKEN}" for request in sent)
    assert [r.url for r in responses] == ["https://api.digitalocean.com/v2/sizes?per_page=200", second]
    assert all(TOKEN not in r.url and TOKEN.encode() not in r.read() for r in responses)
    assert {o.instance_type for o in digitalocean.parse(responses) if isinstance(o, Offer)} == {"a", "b"}


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(digitalocean.fetch(client, {"DIGITALOCEAN_TOKEN": TOKEN}))
    assert len(responses) == 2
    items = list(digitalocean.parse(responses))
    offers = by_key(items)
    assert exclusions(items) == {"cpu_only": 1, "no_region": 1}
    assert len(offers) == 8
    assert offers[("gpu-h100x1-80gb", "tor1")].price_per_hour == 3.39
    assert offers[("gpu-h100x8-640gb", "nyc2")].price_per_hour == 23.92
    assert offers[("gpu-mi300x1-192gb", "atl1")].price_per_hour == 1.99
    assert offers[("gpu-4000adax1-20gb", "tor1")].gpu_memory_gb_raw == 20.0
    assert {o.pricing_type for o in offers.values()} == {"on_demand"}


@pytest.mark.network
def test_live_sizes_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    token = os.environ.get("DIGITALOCEAN_TOKEN")
    if not token:
        pytest.skip("DIGITALOCEAN_TOKEN is not set")
    monkeypatch.undo()  # lift the offline guard: this test exists to reach api.digitalocean.com
    with make_client(secrets=[token]) as client:
        items = list(digitalocean.parse(list(digitalocean.fetch(client, {"DIGITALOCEAN_TOKEN": token}))))
    assert [o for o in items if isinstance(o, Offer)]
