"""Verda (DataCrunch) connector: the products page, the optional API, token safety, replay."""

from __future__ import annotations

import json
import logging
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import pages, verda
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures" / "verda"
PAGE_CAPTURE = "datacrunch/products-page-excerpt-wayback-20250808.html"
TOKEN = "eyJ-RUNTIME-ACCESS-TOKEN-never-stored"
REFRESH = "refresh-RUNTIME-TOKEN-never-stored"


def raw(url: str, body: bytes, status: int = 200) -> RawResponse:
    return RawResponse(
        url=url, method="GET", status=status, fetched_at=datetime(2026, 12, 1, tzinfo=UTC), body=body
    )


def capture_page(shared_raw: Path) -> RawResponse:
    """The Wayback excerpt starts inside the header row (it was cut at the text 'Instance name'):
    restore the `<table><thead><tr>` the cut removed, touching nothing else."""
    body = (shared_raw / PAGE_CAPTURE).read_bytes()
    end_of_comment = body.index(b"-->") + 3
    return raw(verda.PAGE_URL, body[:end_of_comment] + b"<table><thead><tr>" + body[end_of_comment:])


def offers_of(items: list[Any]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.pricing_type): o for o in items if isinstance(o, Offer)}


def page_html(header: str = "On demand price", spot: str = "$0.80/h", on_demand: str = "$3.64/h") -> bytes:
    return (
        "<table><thead><tr><th>Instance name</th><th>GPU model</th><th>GPU</th><th>VRAM</th>"
        f"<th>{header}</th><th>Spot price</th></tr></thead><tbody><tr><td>1B200.30V</td>"
        f"<td>B200 SXM6 180GB</td><td>1</td><td>180</td><td>{on_demand}</td><td>{spot}</td></tr>"
        "</tbody></table>"
    ).encode()


# --- pure helpers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "price", "problem"),
    [
        ("$3.64/h", 3.64, None),
        ("$29.10/h", 29.10, None),
        ("$0.05/min", 3.0, None),
        ("$3.64", math.nan, "no time unit stated"),
        ("3.64/h", math.nan, "no currency stated"),
        ("$3.64/GPU/h", 7.28, None),  # a per-GPU cell is read as such: x 2 GPUs
        ("$0.00/h", 0.0, "not a positive price"),
        ("soon", math.nan, "not a price"),
    ],
)
def test_hourly_price(cell: str, price: float, problem: str | None) -> None:
    # one cell under "On demand price" in a row of 2 GPUs
    table = pages.Table(("Instance name", "On demand price"), (("2B200.60V", cell),), "a test table")
    amount, currency, issue, _ = verda.hourly_price(table.read()[0], "On demand price", 2.0)
    assert currency == "USD"
    assert (math.isnan(amount) and math.isnan(price)) or amount == pytest.approx(price)
    assert (issue is None) == (problem is None) and (problem is None or problem in issue)


# --- the real products page (Wayback 2025-08-08, B200 table) -------------------------------------


def test_real_products_page(shared_raw: Path) -> None:
    items = list(verda.parse([capture_page(shared_raw)]))
    offers = offers_of(items)
    assert len(offers) == 12 and exclusions(items) == {}
    assert sum(o.pricing_type == "spot" for o in offers.values()) == 4
    assert sum(o.provider_data["pricing"] == "dynamic" for o in offers.values()) == 4
    one = offers[("1B200.30V", "on_demand")]
    assert (one.price_per_hour, one.currency, one.gpu_count, one.gpu_memory_gb_raw) == (
        3.64,
        "USD",
        1.0,
        180.0,
    )
    assert (one.gpu_name_raw, one.vcpus, one.ram_gb, one.scope) == (
        "B200 SXM6 180GB",
        30.0,
        184.0,
        "instances:on_demand",
    )
    eight = offers[("8B200.240V", "on_demand")]
    assert (eight.price_per_hour, eight.gpu_count, eight.gpu_memory_gb_raw) == (29.10, 8.0, 180.0)
    assert eight.provider_data["vram_total_gb"] == 1440 and eight.provider_data["p2p"] == "1.8 TB/s"
    assert offers[("8B200.240V (dynamic)", "on_demand")].price_per_hour == 21.42
    assert offers[("8B200.240V", "spot")].price_per_hour == 6.43
    assert offers[("2B200.60V", "spot")].price_per_hour == 1.61
    assert offers[("4B200.120V (dynamic)", "on_demand")].scope == "instances:dynamic"
    assert all(o.price_source == "list" and o.problem is None for o in offers.values())


def test_every_capture_gpu_maps_with_interconnect(shared_raw: Path) -> None:
    catalog = HardwareCatalog.load()
    items = list(verda.parse([capture_page(shared_raw), *api_capture(shared_raw)]))
    for offer in (o for o in items if isinstance(o, Offer)):
        match = catalog.resolve(
            "verda", offer.instance_type, offer.gpu_name_raw, offer.gpu_memory_gb_raw, offer.gpu_count
        )
        assert match is not None, offer.instance_type
    two = catalog.resolve("verda", "2B200.60V (dynamic)", "B200 SXM6 180GB", 180, 2)
    assert (two.gpu_name, two.intra_node_interconnect, two.intra_node_gbps) == ("B200", "NVSwitch", 900)
    assert catalog.resolve("verda", "1H100.80S.30V", None, None).gpu_name == "H100-SXM"


# --- the real API samples (gpuhunt test literals) -------------------------------------------------


def api_capture(shared_raw: Path) -> list[RawResponse]:
    folder = shared_raw / "datacrunch"
    return [
        raw(
            f"{verda.INSTANCE_TYPES_URL}?currency=usd",
            (folder / "verda-instance-types-sample.json").read_bytes(),
        ),
        raw(
            f"{verda.AVAILABILITY_URL}?isSpot=false",
            (folder / "verda-instance-availability-sample.json").read_bytes(),
        ),
    ]


def test_real_api_samples(shared_raw: Path) -> None:
    items = list(verda.parse(api_capture(shared_raw)))
    offers = offers_of(items)
    assert exclusions(items) == {"cpu_only": 1}
    assert set(offers) == {
        ("1H100.80S.30V", "on_demand"),
        ("1H100.80S.30V", "spot"),
        ("2A6000.20V", "on_demand"),
        ("2A6000.20V", "spot"),
    }
    h100 = offers[("1H100.80S.30V", "on_demand")]
    assert (h100.price_per_hour, h100.gpu_count, h100.gpu_memory_gb_raw, h100.vcpus, h100.ram_gb) == (
        3.95,
        1.0,
        80.0,
        30.0,
        120.0,
    )
    assert h100.gpu_name_raw == "H100 SXM5 80GB" and h100.available is False  # not listed anywhere
    a6000 = offers[("2A6000.20V", "on_demand")]
    assert (a6000.price_per_hour, a6000.gpu_memory_gb_raw, a6000.available) == (1.98, 48.0, True)
    assert a6000.provider_data["locations"] == ["FIN-01"] and a6000.provider_data["p2p"] == "50GB/s"
    spot = offers[("2A6000.20V", "spot")]
    assert (spot.price_per_hour, spot.scope, spot.available) == (0.70, "instances:spot", None)
    assert offers[("1H100.80S.30V", "spot")].price_per_hour == 1.70


def test_availability_map_reads_locations_and_the_spot_flag(shared_raw: Path) -> None:
    body = (shared_raw / "datacrunch" / "verda-instance-availability-sample.json").read_bytes()
    is_spot, where = verda.availability_map(raw(f"{verda.AVAILABILITY_URL}?isSpot=true", body))
    assert is_spot is True
    assert where["CPU.4V.16G"] == ["FIN-01", "ICE-01"] and where["8V100.48V"] == ["FIN-01"]


def test_api_wins_over_the_page_for_the_types_it_lists(shared_raw: Path) -> None:
    types = json.loads((FIXTURES / "instance-types__2026-12-01.json").read_text())
    api = raw(f"{verda.INSTANCE_TYPES_URL}?currency=usd", json.dumps(types).encode())
    items = list(verda.parse([capture_page(shared_raw), api]))
    offers = offers_of(items)
    # 1B200.30V comes from the API (3.79), the other B200 rows from the page
    assert offers[("1B200.30V", "on_demand")].provider_data["source"] == "api"
    assert offers[("1B200.30V", "on_demand")].price_per_hour == 3.79
    assert offers[("2B200.60V", "on_demand")].provider_data["source"] == "products_page"
    assert exclusions(items) == {"listed_by_api": 1, "cpu_only": 1, "not_offered:dynamic": 1}
    dynamic = offers[("1B200.30V (dynamic)", "on_demand")]
    assert (dynamic.price_per_hour, dynamic.provider_data["max_dynamic_price"]) == (2.91, 3.79)


# --- wrong rows and layout changes ----------------------------------------------------------------


def test_a_renamed_price_key_is_a_wrong_row_not_a_missing_offer() -> None:
    item = json.loads((FIXTURES / "instance-types__2026-12-01.json").read_text())[0]
    item["price_per_hour_usd"] = item.pop("price_per_hour")
    offers = offers_of(list(verda.api_offers([item])))
    broken = offers[("1B200.30V", "on_demand")]
    assert math.isnan(broken.price_per_hour) and "price_per_hour" in broken.problem
    assert offers[("1B200.30V", "spot")].problem is None


def test_null_spot_price_means_not_offered() -> None:
    item = json.loads((FIXTURES / "instance-types__2026-12-01.json").read_text())[1] | {"spot_price": None}
    items = list(verda.api_offers([item]))
    assert ("8H100.80S.176V", "spot") not in offers_of(items)
    assert exclusions(items) == {"not_offered:spot": 1, "not_offered:dynamic": 1}


@pytest.mark.parametrize("payload", [[], {"instance_types": []}, [{"price_per_hour": "1.0"}]])
def test_unreadable_instance_types_is_a_layout_change(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="instance"):
        list(verda.parse([raw(verda.INSTANCE_TYPES_URL, json.dumps(payload).encode())]))


def test_a_renamed_price_header_raises_layout_changed_with_the_label() -> None:
    with pytest.raises(LayoutChanged, match="On demand price"):
        list(verda.parse([raw(verda.PAGE_URL, page_html(header="Hourly rate"))]))


def test_a_removed_table_raises_layout_changed() -> None:
    with pytest.raises(LayoutChanged, match="Instance name, On demand price"):
        list(verda.parse([raw(verda.PAGE_URL, b"<html><body><p>We moved our prices.</p></body></html>")]))


def test_bad_and_missing_page_cells() -> None:
    items = list(verda.parse([raw(verda.PAGE_URL, page_html(on_demand="$0.00/h", spot="-"))]))
    offers = offers_of(items)
    assert offers[("1B200.30V", "on_demand")].problem == "price 0.0 is not a positive price"
    assert exclusions(items) == {"not_offered:spot": 1}
    assert "Dynamic price" not in page_html().decode() and ("1B200.30V (dynamic)", "on_demand") not in offers


def test_not_modified_page_keeps_every_page_scope() -> None:
    items = list(verda.parse([raw(verda.PAGE_URL, b"", status=304)]))
    assert items and all(isinstance(i, Unchanged) for i in items)
    assert {i.scope["scope"] for i in items} == set(verda.PAGE_SCOPES)


# --- fetch: the token is a run-time secret --------------------------------------------------------


def api_handler(sent: list[httpx.Request]) -> httpx.MockTransport:
    types = (FIXTURES / "instance-types__2026-12-01.json").read_bytes()

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        path = request.url.path
        if path.endswith("/oauth2/token"):
            return httpx.Response(
                200,
                json={
                    "access_token": TOKEN,
                    "refresh_token": REFRESH,
                    "token_type": "Bearer",
                    "expires_in": 3600,
                },
            )
        if request.headers.get("authorization") != f"Bearer {TOKEN}" and "/v1/" in str(request.url):
            return httpx.Response(401, json={"code": "unauthorized_request"})
        if path.endswith("/instance-types"):
            return httpx.Response(200, content=types, headers={"content-type": "application/json"})
        if path.endswith("/instance-availability"):
            return httpx.Response(200, json=[{"location_code": "FIN-01", "availabilities": ["1B200.30V"]}])
        return httpx.Response(200, content=(FIXTURES / "products__2026-12-01.html").read_bytes())

    return httpx.MockTransport(handle)


def test_fetch_with_credentials_never_keeps_or_logs_the_token(caplog: pytest.LogCaptureFixture) -> None:
    creds = {verda.CLIENT_ID: "client-id-123", verda.CLIENT_SECRET: "client-secret-456"}
    sent: list[httpx.Request] = []
    caplog.set_level(logging.DEBUG)
    with make_client(transport=api_handler(sent), secrets=creds.values()) as client:
        responses = list(verda.fetch(client, creds, None))
    assert [r.url.split("?")[0] for r in responses] == [
        verda.PAGE_URL,
        verda.INSTANCE_TYPES_URL,
        verda.AVAILABILITY_URL,
        verda.AVAILABILITY_URL,
    ]  # the token exchange is not among them: it is never archived
    token_request = next(r for r in sent if r.url.path.endswith("/oauth2/token"))
    assert json.loads(token_request.content)["grant_type"] == "client_credentials"
    for response in responses:
        stored = " ".join([response.url, response.read().decode(), json.dumps(dict(response.headers))])
        stored += (response.request_body or b"").decode()
        for value in (TOKEN, REFRESH, *creds.values()):
            assert value not in stored
    assert TOKEN not in caplog.text and REFRESH not in caplog.text
    items = list(verda.parse(responses))
    assert offers_of(items)[("1B200.30V", "on_demand")].available is True


def test_fetch_without_credentials_asks_the_keyless_api_then_falls_back_to_the_page() -> None:
    # this API refuses a request without a token (401): the page is the fallback
    sent: list[httpx.Request] = []
    with make_client(transport=api_handler(sent)) as client:
        responses = list(verda.fetch(client, {}, None))
    assert [r.url for r in responses] == [verda.PAGE_URL]
    assert [r.url.path for r in sent] == ["/v1/instance-types", "/products"]
    assert "authorization" not in sent[0].headers and sent[0].url.params["currency"] == "usd"


def test_a_keyless_instance_types_answer_is_read_and_the_page_not_fetched() -> None:
    types = (FIXTURES / "instance-types__2026-12-01.json").read_bytes()
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.path.endswith("/instance-types"):
            return httpx.Response(200, content=types, headers={"content-type": "application/json"})
        return httpx.Response(500)

    with make_client(transport=httpx.MockTransport(handle)) as client:
        responses = list(verda.fetch(client, {}, None))
    assert [r.url.split("?")[0] for r in responses] == [verda.INSTANCE_TYPES_URL] and len(sent) == 1
    offers = offers_of(list(verda.parse(responses)))
    # the API's offers carry the same scopes as the page's, so switching source loses no scope
    assert offers and {o.scope for o in offers.values()} <= set(verda.PAGE_SCOPES)


@pytest.mark.parametrize("answer", [httpx.Response(200, json=[]), httpx.Response(200, content=b"<html>")])
def test_an_unusable_keyless_answer_falls_back_to_the_page(answer: httpx.Response) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/instance-types"):
            return answer
        return httpx.Response(200, content=(FIXTURES / "products__2026-12-01.html").read_bytes())

    with make_client(transport=httpx.MockTransport(handle)) as client:
        responses = list(verda.fetch(client, {}, None))
    assert [r.url for r in responses] == [verda.PAGE_URL]


def test_record_mode_never_asks_for_a_token(tmp_path: Path) -> None:
    creds = {verda.CLIENT_ID: "id", verda.CLIENT_SECRET: "secret"}
    sent: list[httpx.Request] = []
    with make_client(transport=api_handler(sent), secrets=creds.values(), record=tmp_path) as client:
        responses = list(verda.fetch(client, creds, None))
    assert [r.url for r in responses] == [verda.PAGE_URL]
    assert not any("oauth2" in str(r.url) for r in sent)


def test_token_answer_without_a_token_names_the_credentials() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"error": "nope"})

    creds = {verda.CLIENT_ID: "id", verda.CLIENT_SECRET: "secret"}
    with (
        make_client(transport=httpx.MockTransport(handle)) as client,
        pytest.raises(Exception, match="VERDA_CLIENT_ID"),
    ):
        list(verda.fetch(client, creds, None))


def test_replay_cassette_fetches_and_parses_the_page() -> None:
    # replay ignores the API credentials on purpose: only a live client may carry the token
    creds = {verda.CLIENT_ID: "replay-placeholder", verda.CLIENT_SECRET: "replay-placeholder"}
    with make_client(replay=REPLAY, secrets=creds.values()) as client:
        responses = list(verda.fetch(client, creds, None))
    items = list(verda.parse(responses))
    offers = offers_of(items)
    assert len(offers) == 11 and exclusions(items) == {"not_offered:spot": 1}
    assert offers[("8H100.80S.176V", "on_demand")].price_per_hour == 18.32
    assert offers[("1B200.30V", "spot")].price_per_hour == 1.34
    assert {o.scope for o in offers.values()} == set(verda.PAGE_SCOPES)


@pytest.mark.network
def test_live_products_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # this test exists to talk to verda.com
    creds = {k: os.environ[k] for k in verda.optional if os.environ.get(k)}
    with make_client(secrets=creds.values()) as client:
        responses = list(verda.fetch(client, creds, None))
    offers = [o for o in verda.parse(responses) if isinstance(o, Offer)]
    assert offers and any(o.pricing_type == "spot" for o in offers)
    assert not [o for o in offers if o.problem]


def test_excluded_items_are_excluded_instances() -> None:
    items = list(verda.parse([raw(verda.PAGE_URL, page_html(spot="N/A"))]))
    assert [i for i in items if isinstance(i, Excluded)] == [Excluded("not_offered:spot", count=1)]
