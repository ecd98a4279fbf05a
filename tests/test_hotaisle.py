"""Hot Aisle availability API: US cents per instance-hour, VM and bare-metal lists, `null` = none free."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import hotaisle, pages
from connectors.base import LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog
from warehouse.pipeline import collect

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
VM_URL = f"{hotaisle.API_URL}/teams/t/virtual_machines/available/"
BM_URL = f"{hotaisle.API_URL}/teams/t/bare_metal/available/"
PAGE = REPO / "tests" / "fixtures" / "hotaisle" / "pricing__2026-12-02.html"
CREDS = {hotaisle.API_KEY: "k-123", hotaisle.TEAM: "my-team"}
GIB = 1024**3


def answer(payload: Any, url: str = VM_URL) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return RawResponse(
        url=url, method="GET", status=200, fetched_at=datetime(2026, 12, 2, tzinfo=UTC), body=body
    )


def vm(price: Any = 299, count: int = 1, cores: int = 13, cpu: str = "Xeon Platinum 8470") -> dict[str, Any]:
    return {
        "OnDemandPrice": price,
        "Specs": {
            "cpu_cores": cores,
            "ram_capacity": 224 * count * GIB,
            "disk_capacity": 1536 * count * GIB,
            "cpus": {"count": 1, "model": cpu},
            "gpus": [{"count": count, "model": "MI300X"}],
        },
    }


def offers(*responses: RawResponse) -> dict[str, Offer]:
    return {o.instance_type: o for o in hotaisle.parse(list(responses)) if isinstance(o, Offer)}


# --- the shape capture (gpuhunt's hand-written test values: shape only) ------------------------


def test_shape_capture_of_both_lists(shared_raw: Path) -> None:
    vms = (shared_raw / "hotaisle" / "virtual-machines-available-sample.json").read_bytes()
    metal = (shared_raw / "hotaisle" / "bare-metal-available-sample.json").read_bytes()
    found = offers(answer(vms), answer(metal, BM_URL))
    assert sorted(found) == ["bm 8x MI300X 104c Xeon Platinum 8470", "vm 1x MI300X 13c Xeon Platinum 8470"]
    one = found["vm 1x MI300X 13c Xeon Platinum 8470"]
    # 199 US cents an instance-hour; 240 GiB of RAM as bytes; 13 cores
    assert (one.price_per_hour, one.currency, one.gpu_count, one.ram_gb, one.vcpus) == (
        1.99,
        "USD",
        1.0,
        240.0,
        13,
    )
    assert (one.gpu_name_raw, one.gpu_memory_gb_raw, one.region, one.available) == (
        "MI300X",
        None,
        "global",
        True,
    )
    eight = found["bm 8x MI300X 104c Xeon Platinum 8470"]
    # 2712 cents = 8 x $3.39; the bare-metal list states its minimum reservation and quantity
    assert (eight.price_per_hour, eight.gpu_count, eight.ram_gb) == (27.12, 8.0, 2048.0)
    assert eight.provider_data["minimum_reservation_minutes"] == 480
    assert eight.provider_data["quantity"] == 1
    assert eight.provider_data["disk_gb"] == round(123839994396672 / GIB, 1)
    assert {o.scope for o in found.values()} == {"on_demand:virtual_machines", "on_demand:bare_metal"}
    assert all(o.problem is None and o.pricing_type == "on_demand" for o in found.values())


# --- the parser ---------------------------------------------------------------------------------


def test_null_means_nothing_free_and_is_said() -> None:
    items = list(hotaisle.parse([answer(None), answer([vm()], BM_URL)]))
    assert exclusions(items) == {"none_available:virtual_machines": 1}
    assert [o.scope for o in items if isinstance(o, Offer)] == ["on_demand:bare_metal"]
    assert exclusions(hotaisle.parse([answer([])])) == {"none_available:virtual_machines": 1}


def test_one_offer_per_shape_the_lowest_price_and_a_count() -> None:
    found = offers(answer([vm(310), vm(299), vm(305), vm(600, 2, 26)]))
    one = found["vm 1x MI300X 13c Xeon Platinum 8470"]
    assert (one.price_per_hour, one.provider_data["listings"]) == (2.99, 3)
    assert found["vm 2x MI300X 26c Xeon Platinum 8470"].provider_data["listings"] == 1


def test_a_readable_price_beats_a_wrong_one_of_the_same_shape() -> None:
    found = offers(answer([vm(None), vm(299)]))
    one = found["vm 1x MI300X 13c Xeon Platinum 8470"]
    assert (one.price_per_hour, one.problem, one.provider_data["listings"]) == (2.99, None, 2)


def test_the_cpu_tells_shapes_of_one_gpu_count_apart() -> None:
    found = offers(answer([vm(598, 2, 26), vm(612, 2, 26, "Xeon Platinum 8462Y+")]))
    assert found["vm 2x MI300X 26c Xeon Platinum 8462Y+"].price_per_hour == 6.12
    assert found["vm 2x MI300X 26c Xeon Platinum 8470"].provider_data["cpu_model"] == "Xeon Platinum 8470"


@pytest.mark.parametrize(
    ("price", "problem"),
    [
        (0, "OnDemandPrice is not positive: 0"),
        (-5, "OnDemandPrice is not positive: -5"),
        ("lots", "OnDemandPrice is not a number: 'lots'"),
        (None, "OnDemandPrice missing"),
    ],
)
def test_a_wrong_price_is_a_flagged_offer_never_dropped(price: Any, problem: str) -> None:
    (offer,) = offers(answer([vm(price)])).values()
    assert offer.problem == problem
    assert offer.price_per_hour <= 0 or math.isnan(offer.price_per_hour)


def test_an_item_without_a_gpu_is_excluded() -> None:
    cpu_only = vm()
    cpu_only["Specs"]["gpus"] = []
    items = list(hotaisle.parse([answer([cpu_only, vm()])]))
    assert exclusions(items) == {"no_gpu": 1}
    assert len([o for o in items if isinstance(o, Offer)]) == 1


def test_two_gpu_models_in_one_item_is_a_wrong_row() -> None:
    mixed = vm()
    mixed["Specs"]["gpus"].append({"count": 1, "model": "MI325X"})
    (offer,) = offers(answer([mixed])).values()
    assert offer.problem == "several GPU models in one item: ['MI300X', 'MI325X']"
    assert offer.gpu_count == 2.0


def test_a_gpu_without_a_count_is_a_wrong_row() -> None:
    uncounted = vm()
    del uncounted["Specs"]["gpus"][0]["count"]
    (offer,) = offers(answer([uncounted])).values()
    assert offer.problem == "GPU count not stated for MI300X"


def test_cpu_model_reads_an_object_or_a_list() -> None:
    assert hotaisle.cpu_model({"count": 1, "model": "Xeon Platinum 8470"}) == "Xeon Platinum 8470"
    assert hotaisle.cpu_model([{"model": "EPYC 9654"}, {"model": "EPYC 9654"}]) == "EPYC 9654"
    assert hotaisle.cpu_model(None) == ""


@pytest.mark.parametrize("payload", [{"items": []}, "busy", 3])
def test_another_shape_is_a_layout_change(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="expected a list of available items or null"):
        list(hotaisle.parse([answer(payload)]))


def test_a_list_of_non_objects_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="not an object"):
        list(hotaisle.parse([answer([1, 2])]))


def test_an_unknown_url_is_refused() -> None:
    with pytest.raises(LayoutChanged, match="not a Hot Aisle availability URL"):
        list(hotaisle.parse([answer([vm()], f"{hotaisle.API_URL}/teams/t/other/")]))


# --- seeds ----------------------------------------------------------------------------------------


def test_every_replayed_shape_maps_with_its_interconnect() -> None:
    catalog = HardwareCatalog.load()
    with make_client(replay=REPLAY, secrets=list(CREDS.values())) as client:
        found = offers(*hotaisle.fetch(client, CREDS))
    resolved = {
        t: catalog.resolve("hotaisle", t, o.gpu_name_raw, o.gpu_memory_gb_raw) for t, o in found.items()
    }
    matches = {t: m for t, m in resolved.items() if m is not None}
    assert len(matches) == len(found) == 5  # zero unmapped
    assert {m.gpu_name for m in matches.values()} == {"MI300X"}
    assert all(m.vram_gb == 192 for m in matches.values())
    assert matches["bm 8x MI300X 104c Xeon Platinum 8470"].intra_node_interconnect == "Infinity Fabric"
    assert matches["vm 1x MI300X 13c Xeon Platinum 8470"].intra_node_interconnect == "none"


# --- HTTP path ------------------------------------------------------------------------------------


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY, secrets=list(CREDS.values())) as client:
        responses = list(hotaisle.fetch(client, CREDS))
    assert [r.url for r in responses] == [
        "https://admin.hotaisle.app/api/teams/***/virtual_machines/available/",
        "https://admin.hotaisle.app/api/teams/***/bare_metal/available/",
    ]
    items = list(hotaisle.parse(responses))
    found = {o.instance_type: o for o in items if isinstance(o, Offer)}
    assert len(found) == 5
    assert found["vm 1x MI300X 13c Xeon Platinum 8470"].provider_data["listings"] == 2
    assert found["vm 4x MI300X 52c Xeon Platinum 8470"].price_per_hour == 11.96
    metal = found["bm 8x MI300X 104c Xeon Platinum 8470"]
    assert (metal.price_per_hour, metal.provider_data["quantity"]) == (27.12, 2)
    assert exclusions(items) == {}


def test_the_key_is_a_token_header_and_the_team_is_redacted_from_the_url() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=None)

    with make_client(transport=httpx.MockTransport(handler), secrets=list(CREDS.values())) as client:
        responses = list(hotaisle.fetch(client, CREDS))
    assert [r.headers["authorization"] for r in seen] == ["Token k-123", "Token k-123"]
    assert [r.url.path for r in seen] == [
        "/api/teams/my-team/virtual_machines/available/",
        "/api/teams/my-team/bare_metal/available/",
    ]
    assert all("my-team" not in r.url and "k-123" not in r.url for r in responses)


def test_without_key_and_team_only_the_pricing_page_is_read() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, content=PAGE.read_bytes(), headers={"content-type": "text/html"})

    for creds in ({}, {hotaisle.API_KEY: "k"}, {hotaisle.TEAM: "t"}):  # the API needs both
        with make_client(transport=httpx.MockTransport(handler)) as client:
            batch = collect(hotaisle, client, creds)
        assert (batch.status, batch.error) == ("fetched", None)
    assert seen == [hotaisle.PAGE_URL] * 3


def test_module_contract() -> None:
    assert hotaisle.name == "hotaisle"
    assert hotaisle.requires == ()
    assert hotaisle.optional == ("HOTAISLE_API_KEY", "HOTAISLE_TEAM_HANDLE")


# --- the pricing page (our fixture: no capture of the page exists) ---------------------------------


def page(body: bytes | str, status: int = 200) -> RawResponse:
    return RawResponse(
        url=hotaisle.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 2, tzinfo=UTC),
        content_type="text/html; charset=utf-8",
        body=body.encode() if isinstance(body, str) else body,
    )


def plan(kicker: str, heading: str, counts: str, price: str, extra: str = "") -> str:
    return (
        f'<div class="card"><p class="uppercase">{kicker}</p><h2>{heading}</h2>'
        f'<p><span>{counts}</span><span class="font-bold">MI300x</span></p>'
        f'<p class="price">{price}</p>{extra}</div>'
    )


def plans(*cards: str) -> str:
    return f"<html><body><main><section>{''.join(cards)}</section></main></body></html>"


def test_page_fixture_plan_cards_per_gpu_rate_times_count() -> None:
    items = list(hotaisle.parse([page(PAGE.read_bytes())]))
    found = {o.instance_type: o for o in items if isinstance(o, Offer)}
    assert sorted(found) == ["vm 1x MI300X", "vm 2x MI300X", "vm 4x MI300X"]
    small = found["vm 1x MI300X"]
    assert (small.price_per_hour, small.currency, small.gpu_count, small.gpu_name_raw) == (
        2.99,
        "USD",
        1.0,
        "MI300X",
    )
    assert (small.provider_data["plan"], small.provider_data["price_basis"]) == ("Small", "USD per GPU-hour")
    # the Medium card sells 2 and 4 GPUs at one per-GPU rate
    assert (found["vm 2x MI300X"].price_per_hour, found["vm 4x MI300X"].price_per_hour) == (5.9, 11.8)
    # the hero says "billed by the minute": the page states the billing unit
    assert {o.billing_unit for o in found.values()} == {"minute"}
    assert {o.scope for o in found.values()} == {"on_demand:virtual_machines"}
    assert all(o.problem is None and o.available is None for o in found.values())
    # hero lookalikes (2), the one-month-minimum bare metal, the grandfathered rate
    assert exclusions(items) == {"not_a_plan_card": 2, "monthly_minimum": 1, "existing_customers_only": 1}


def test_page_offers_map_with_their_interconnect() -> None:
    catalog = HardwareCatalog.load()
    one = catalog.resolve("hotaisle", "vm 1x MI300X", "MI300X", None)
    four = catalog.resolve("hotaisle", "vm 4x MI300X", "MI300X", None)
    assert one is not None and (one.gpu_name, one.vram_gb, one.intra_node_interconnect) == (
        "MI300X",
        192,
        "none",
    )
    assert four is not None and four.gpu_name == "MI300X"


def test_a_price_without_its_basis_is_refused() -> None:
    with pytest.raises(LayoutChanged, match="price basis"):
        list(hotaisle.parse([page(plans(plan("VM", "Small", "1x", "$2.99/hr")))]))


def test_one_card_without_a_basis_is_that_cards_problem() -> None:
    body = plans(plan("VM", "Small", "1x", "$2.99/hr"), plan("VM", "Medium", "2x", "$2.95/GPU/hr"))
    found = {o.instance_type: o for o in hotaisle.parse([page(body)]) if isinstance(o, Offer)}
    assert found["vm 2x MI300X"].problem is None
    assert found["vm 1x MI300X"].problem is not None and math.isnan(found["vm 1x MI300X"].price_per_hour)


def test_a_zero_rate_is_a_wrong_row() -> None:
    (offer,) = [
        o
        for o in hotaisle.parse([page(plans(plan("VM", "Small", "1x", "$0.00/GPU/hr")))])
        if isinstance(o, Offer)
    ]
    assert offer.problem == "price '$0.00/GPU/hr' is not a positive number"


def test_bare_metal_without_a_minimum_is_an_offer_and_no_billing_unit_unless_stated() -> None:
    (offer,) = [
        o
        for o in hotaisle.parse([page(plans(plan("Bare metal", "Large", "8x", "$3.39/GPU/hr")))])
        if isinstance(o, Offer)
    ]
    assert (offer.instance_type, offer.price_per_hour, offer.scope) == (
        "bm 8x MI300X",
        27.12,
        "on_demand:bare_metal",
    )
    assert offer.billing_unit is None


def test_a_repeated_card_is_counted_once() -> None:
    card = plan("VM", "Small", "1x", "$2.99/GPU/hr")
    items = list(hotaisle.parse([page(plans(card, card))]))
    assert [o.instance_type for o in items if isinstance(o, Offer)] == ["vm 1x MI300X"]
    assert exclusions(items) == {"repeated_card": 1}


def test_a_page_without_plan_cards_is_a_layout_change() -> None:
    hero = "<div><p>Virtual machines</p><p>$2.99/GPU/hr</p></div>"
    with pytest.raises(LayoutChanged, match="no plan card"):
        list(hotaisle.parse([page(plans(hero))]))


def test_page_helpers() -> None:
    doc = pages.soup(plans(plan("VM", "Medium", "2x &amp; 4x", "$2.95/GPU/hr")))
    card = doc.find("div")
    assert card is not None
    assert hotaisle.plan_shape(card) == ([2, 4], "MI300X")
    assert hotaisle.plan_kind(card) == "virtual_machines"
    assert hotaisle.plan_shape(pages.soup("<div><p>8x bare metal</p></div>")) is None


def test_page_replay_is_the_keyless_path() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(hotaisle.fetch(client, {}))
    assert [r.url for r in responses] == ["https://hotaisle.xyz/pricing"]
    assert len([o for o in hotaisle.parse(responses) if isinstance(o, Offer)]) == 3


def test_page_not_modified_keeps_both_scopes_current() -> None:
    items = list(hotaisle.parse([page(b"", status=304)]))
    assert [i.scope for i in items if isinstance(i, Unchanged)] == [
        {"scope": "on_demand:virtual_machines"},
        {"scope": "on_demand:bare_metal"},
    ]


@pytest.mark.network
def test_live_pricing_page_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lift the offline guard: this test exists to reach hotaisle.xyz
    with make_client() as client:
        responses = list(hotaisle.fetch(client, {}))
    found = [o for o in hotaisle.parse(responses) if isinstance(o, Offer)]
    assert found and all(o.problem is None and o.gpu_name_raw == "MI300X" for o in found)


@pytest.mark.network
def test_live_availability_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.undo()  # lift the offline guard: this test exists to reach admin.hotaisle.app
    creds = {k: os.environ.get(k, "") for k in hotaisle.optional}
    if not all(creds.values()):
        pytest.skip("set HOTAISLE_API_KEY and HOTAISLE_TEAM_HANDLE: the lists are per team")
    with make_client(secrets=list(creds.values())) as client:
        responses = list(hotaisle.fetch(client, creds))
    items = list(hotaisle.parse(responses))
    found = [o for o in items if isinstance(o, Offer)]
    assert all(o.problem is None and o.currency == "USD" for o in found)
    # each list either names offers or says none is free
    assert len(found) + sum(exclusions(items).values()) >= 2
