"""Vast.ai connector: host offer rules, the real (reduced) capture, layout changes, replay."""

from __future__ import annotations

import csv
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import market, vast
from connectors.base import Degraded, LayoutChanged, Offer, RawResponse
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
CAPTURE = "vast/ewyluda-fixture-bundles-reduced-2026.json"
CATALOG = HardwareCatalog.load()


def answer(payload: Any) -> RawResponse:
    return RawResponse(
        url=vast.API_URL,
        method="POST",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def offer(**overrides: Any) -> dict[str, Any]:
    base = {
        "id": 1,
        "machine_id": 11,
        "gpu_name": "RTX 4090",
        "num_gpus": 2,
        "gpu_ram": 24564,
        "dph_total": 0.72,
        "min_bid": 0.40,
        "geolocation": "Texas, US",
        "hosting_type": 0,
        "verification": "verified",
        "reliability2": 0.99,
        "storage_cost": 0.15,
        "inet_up_cost": 0.005,
        "inet_down_cost": 0.002,
        "cpu_cores": 32,
        "cpu_cores_effective": 16,
        "cpu_ram": 128000,
    }
    return base | overrides


def by_key(items: list[Any]) -> dict[tuple[str, str, str], Offer]:
    return {(o.instance_type, o.region, o.pricing_type): o for o in items if isinstance(o, Offer)}


# --- helpers and one offer ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("geolocation", "expected"),
    [("Quebec, CA", "CA"), ("SE", "SE"), ("Sverdlovsk Oblast, RU", "RU"), (None, "unknown"), ("", "unknown")],
)
def test_country(geolocation: str | None, expected: str) -> None:
    assert vast.country(geolocation) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"hosting_type": 1, "verification": "verified"}, "datacenter-verified"),
        ({"hosting_type": 0, "verification": "verified"}, "community-verified"),
        ({"hosting_type": 0, "verification": "deverified"}, "community-unverified"),
        ({"datacenter": True, "verified": True}, "datacenter-verified"),
        ({"verified": False}, "community-unverified"),
        ({}, "unknown"),
    ],
)
def test_tier(fields: dict[str, Any], expected: str) -> None:
    assert vast.tier(fields) == expected


def test_one_offer_is_an_on_demand_and_an_interruptible_host() -> None:
    on_demand, spot = vast.to_hosts(offer())
    assert (on_demand.pricing_type, on_demand.price_per_hour) == ("on_demand", 0.72)
    assert (spot.pricing_type, spot.price_per_hour) == ("spot", 0.40)
    assert (on_demand.gpu_count, on_demand.gpu_memory_gb_raw) == (2.0, 23.99)
    assert (on_demand.region, on_demand.tier) == ("US", "community-verified")
    # the offer gets half the machine's 128 GB: 16 of its 32 cores
    assert (on_demand.vcpus, on_demand.ram_gb) == (16.0, 64.0)
    assert (on_demand.egress_per_tb, on_demand.ingress_per_tb, on_demand.disk_per_gb_month) == (
        5.0,
        2.0,
        0.15,
    )


@pytest.mark.parametrize(
    ("fields", "problem"),
    [({"min_bid": None}, "`min_bid` missing"), ({"min_bid": "0.4"}, "`min_bid` is not a number")],
)
def test_an_unreadable_price_is_a_problem_not_a_missing_offer(fields: dict[str, Any], problem: str) -> None:
    _, spot = vast.to_hosts(offer(**fields))
    assert math.isnan(spot.price_per_hour)
    assert spot.problem is not None and spot.problem.startswith(problem)


def test_parse_aggregates_hosts_into_segments_with_one_scope_per_pricing_type() -> None:
    hosts = [offer(id=i, dph_total=p) for i, p in enumerate([0.9, 0.7, 0.8], start=1)]
    offers = by_key(list(vast.parse([answer({"offers": hosts})])))
    on_demand = offers[("2x RTX 4090 24GB (community-verified)", "US", "on_demand")]
    assert on_demand.price_per_hour == 0.7  # p10 of three hosts is the cheapest
    assert on_demand.provider_data["host_offers"] == 3
    assert on_demand.provider_data["price_median"] == 0.8
    assert on_demand.price_source == "market" and on_demand.scope == "market:on_demand"
    assert offers[("2x RTX 4090 24GB (community-verified)", "US", "spot")].scope == "market:spot"
    assert vast.shrink_limit == market.SHRINK_LIMIT


@pytest.mark.parametrize(
    ("payload", "label"),
    [
        ({"offers": []}, "`offers` is empty"),
        ({"bundles": []}, "`offers` list missing"),
        ([], "`offers` is empty"),
    ],
)
def test_missing_or_empty_offers_is_a_layout_change(payload: Any, label: str) -> None:
    with pytest.raises(LayoutChanged, match=label):
        list(vast.parse([answer(payload)]))


def test_an_offer_without_gpu_name_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="gpu_name"):
        list(vast.parse([answer({"offers": [offer(gpu_name=None)]})]))


def test_a_renamed_price_key_flags_every_segment_instead_of_closing_it() -> None:
    hosts = [{k.replace("dph_total", "dph_renamed"): v for k, v in offer(id=i).items()} for i in (1, 2)]
    offers = by_key(list(vast.parse([answer({"offers": hosts})])))
    flagged = offers[("2x RTX 4090 24GB (community-verified)", "US", "on_demand")]
    assert math.isnan(flagged.price_per_hour)
    assert flagged.problem == "`dph_total` missing (2 host offers)"


# --- the real capture: reduced to gpu_name, gpu_ram, num_gpus, dph_total (no min_bid, no location) -----


@pytest.fixture(scope="module")
def capture_offers(shared_raw: Path) -> list[Offer]:
    hosts = json.loads((shared_raw / CAPTURE).read_text())
    return [o for o in vast.parse([answer({"offers": hosts})]) if isinstance(o, Offer)]


def test_real_capture_segments_and_values(capture_offers: list[Offer]) -> None:
    on_demand = {o.instance_type: o for o in capture_offers if o.pricing_type == "on_demand"}
    spot = [o for o in capture_offers if o.pricing_type == "spot"]
    assert len(on_demand) == 37 and len(spot) == 37
    assert sum(o.provider_data["host_offers"] for o in on_demand.values()) == 138
    a100 = on_demand["1x A100 SXM4 40GB (unknown)"]
    assert a100.provider_data["host_offers"] == 14
    assert a100.provider_data["price_min"] == pytest.approx(0.296296, abs=1e-6)
    assert a100.price_per_hour == pytest.approx(0.429630, abs=1e-6)  # 2nd cheapest of 14
    assert a100.provider_data["price_median"] == pytest.approx(0.667407, abs=1e-6)
    b200 = on_demand["8x B200 179GB (unknown)"]
    assert (b200.price_per_hour, b200.gpu_memory_gb_raw) == (pytest.approx(65.010417, abs=1e-6), 179.0)
    assert on_demand["1x H100 SXM 80GB (unknown)"].provider_data["host_offers"] == 8
    assert {o.region for o in capture_offers} == {"unknown"}  # the reduction dropped geolocation
    # the reduction also dropped min_bid: every interruptible segment is flagged, none vanishes
    assert all(o.problem and o.problem.startswith("`min_bid` missing") for o in spot)


def test_real_capture_gpus_all_resolve(capture_offers: list[Offer]) -> None:
    names = {}
    for o in capture_offers:
        match = CATALOG.resolve(o.provider, o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        assert match is not None, o.instance_type
        names[o.instance_type] = match.gpu_name
    assert names["1x A100 SXM4 80GB (unknown)"] == "A100-80GB-SXM"
    assert names["1x A100 PCIE 40GB (unknown)"] == "A100-40GB-PCIe"
    assert names["1x H100 NVL 94GB (unknown)"] == "H100-NVL"
    assert names["1x H200 140GB (unknown)"] == "H200-SXM"


def test_skypilot_vast_names_resolve_and_prices_fall_in_our_range(
    shared_raw: Path, capture_offers: list[Offer]
) -> None:
    """Cross-check with SkyPilot's derived Vast catalog (not parser input)."""
    with (shared_raw / "skypilot-catalog" / "v9" / "vast-vms.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        # SkyPilot's InstanceType is "<n>x-<Vast gpu_name with _ for spaces>-<cpus>-<MiB>"
        raw = row["InstanceType"].split("-")[1].replace("_", " ")
        assert CATALOG.resolve("vast", "", raw, None, None) is not None, raw
    on_demand = {o.instance_type: o for o in capture_offers if o.pricing_type == "on_demand"}
    for instance, gpu in (("1x L40S 45GB (unknown)", "L40S"), ("2x L40S 45GB (unknown)", "L40S")):
        theirs = {float(r["Price"]) for r in rows if r["InstanceType"].startswith(f"{instance[0]}x-{gpu}-")}
        data = on_demand[instance].provider_data
        assert theirs and all(data["price_min"] - 0.01 <= p <= data["price_max"] + 0.01 for p in theirs)


# --- HTTP path ------------------------------------------------------------------------------------


def test_fetch_posts_the_search_body_without_credentials() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "authorization" not in request.headers
        assert json.loads(request.content) == vast.SEARCH
        return httpx.Response(200, json={"offers": [offer()]})

    with make_client(transport=httpx.MockTransport(handler)) as client:
        responses = list(vast.fetch(client, {}))
    assert len(by_key(list(vast.parse(responses)))) == 2


def test_fetch_sends_the_optional_key_as_a_header_and_never_records_it() -> None:
    secret = "vast-SECRET-key-123"

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {secret}"
        return httpx.Response(200, json={"offers": [offer()]})

    with make_client(transport=httpx.MockTransport(handler), secrets=[secret]) as client:
        (response,) = vast.fetch(client, {"VAST_API_KEY": secret})
    assert secret not in response.url and secret.encode() not in (response.request_body or b"")
    assert all(secret not in value for value in response.headers.values())


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(vast.fetch(client, {}))
    offers = by_key(list(vast.parse(responses)))
    us = offers[("1x RTX 4090 24GB (community-verified)", "US", "on_demand")]
    assert (us.price_per_hour, us.provider_data["host_offers"]) == (0.3139, 3)
    assert us.provider_data["price_median"] == 0.3539
    assert us.provider_data["reliability_median"] == 0.9871
    h100 = offers[("8x H100 SXM 80GB (datacenter-verified)", "SE", "spot")]
    assert (h100.price_per_hour, h100.provider_data["host_offers"]) == (12.0, 2)
    assert ("1x RTX 6000Ada 48GB (community-verified)", "unknown", "on_demand") in offers
    assert ("1x RTX 3090 24GB (community-unverified)", "CA", "spot") in offers
    assert all(o.problem is None for o in offers.values())
    for o in offers.values():
        assert CATALOG.resolve("vast", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)


@pytest.fixture
def allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the offline guard for the live smoke test only."""
    monkeypatch.undo()


@pytest.mark.network
@pytest.mark.usefixtures("allow_network")
def test_live_search_answers_with_segments() -> None:
    with make_client() as client:
        offers = [o for o in vast.parse(list(vast.fetch(client, {}))) if isinstance(o, Offer)]
    assert {o.pricing_type for o in offers} == {"on_demand", "spot"}
    assert sum(o.provider_data["host_offers"] for o in offers if o.problem is None) > 100


# --- a capped answer: loaded, but the run says it is incomplete -------------------------------------


def _asked(body: bytes, limit: int | None) -> RawResponse:
    search = dict(vast.SEARCH) | ({"limit": limit} if limit is not None else {})
    request = json.dumps({k: v for k, v in search.items() if limit is not None or k != "limit"}).encode()
    return RawResponse(
        url=vast.API_URL,
        method="POST",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        request_body=request,
        body=body,
    )


def test_an_answer_as_long_as_the_limit_it_asked_for_is_degraded_with_a_hint(shared_raw: Path) -> None:
    body = (shared_raw / CAPTURE).read_bytes()  # 138 offers
    count = len(vast.host_offers(json.loads(body)))
    capped = list(vast.parse([_asked(body, count)]))
    (notice,) = [i for i in capped if isinstance(i, Degraded)]
    assert f"holds {count} offers" in notice.reason and "VAST_API_KEY" in notice.hint
    # the offers still load: the same segments as an answer that was not cut off
    whole = list(vast.parse([_asked(body, count + 1)]))
    assert not [i for i in whole if isinstance(i, Degraded)]
    assert [i for i in capped if isinstance(i, Offer)] == [i for i in whole if isinstance(i, Offer)]


@pytest.mark.parametrize(
    ("request_body", "limit"),
    [(None, vast.LIMIT), (b"not json", vast.LIMIT), (b'{"limit": true}', vast.LIMIT), (b'{"limit": 64}', 64)],
)
def test_requested_limit_reads_the_request_as_sent(request_body: bytes | None, limit: int) -> None:
    assert vast.requested_limit(request_body) == limit


def test_a_capped_run_lands_degraded_with_its_offers_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warehouse.db import open_warehouse
    from warehouse.pipeline import collect, land

    fixture = REPO / "tests" / "fixtures" / "vast" / "bundles__2026-12-01.json"
    offers = len(json.loads(fixture.read_text())["offers"])
    # the search as sent asks for exactly as many offers as the answer holds
    monkeypatch.setattr(vast, "REQUEST_BODY", json.dumps(vast.SEARCH | {"limit": offers}).encode())
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=fixture.read_bytes()))
    with make_client(transport=transport, spool_dir=tmp_path / "spool") as client:
        batch = collect(vast, client, {})
    assert batch.status == "fetched" and len(batch.degraded) == 1
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    try:
        outcome = land(con, tmp_path / "raw", "run-capped", batch)
    finally:
        con.close()
    assert outcome.status == "degraded" and outcome.offers_loaded > 0
    assert f"holds {offers} offers" in (outcome.error or "")
    assert "set VAST_API_KEY" in (outcome.hint or "")
