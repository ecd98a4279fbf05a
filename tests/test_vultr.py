"""Vultr plans connector: GPU shares, spot as a published rate, locations, paging, captures, replay."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import vultr
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"


def answer(payload: Any, url: str = vultr.PLANS_URL + "?type=all&per_page=500") -> RawResponse:
    return RawResponse(
        url=url,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def metal(payload: Any) -> RawResponse:
    return answer(payload, vultr.METAL_URL + "?per_page=500")


def by_key(items: list[Any]) -> dict[tuple[str, str, str], Offer]:
    return {(o.instance_type, o.region, o.pricing_type): o for o in items if isinstance(o, Offer)}


def vcg(**overrides: Any) -> dict[str, Any]:
    base = {
        "id": "vcg-a100-12c-120g-80vram",
        "vcpu_count": 12,
        "ram": 122880,
        "monthly_cost": 1750,
        "hourly_cost": 2.397,
        "type": "vcg",
        "locations": ["ewr"],
        "gpu_vram_gb": 80,
        "gpu_type": "NVIDIA_A100",
    }
    return base | overrides


# --- pure helpers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "vram", "expected"),
    [
        ("A100", 4, (0.05, 4)),
        ("A100", 40, (0.5, 40)),
        ("A100", 80, (1.0, 80.0)),
        ("B200", 1536, (8.0, 192.0)),
        ("L40S", 96, (2.0, 48.0)),
        ("a40", 48, (1.0, 48.0)),
        ("ZETA", 80, (0.0, 80)),
        ("A100", None, (0.0, None)),
    ],
)
def test_gpu_share_splits_plan_vram_into_cards(model: str, vram: float | None, expected: tuple) -> None:
    assert vultr.gpu_share(model, vram) == expected


@pytest.mark.parametrize(
    ("plan_id", "expected"),
    [
        ("vbm-112c-2048gb-8-h100-gpu", (8, "h100")),
        ("vbm-256c-2048gb-8-mi300x-gpu", (8, "mi300x")),
        ("vbm-72c-480gb-gh200-gpu", (1, "gh200")),
        ("vbm-4c-32gb", None),
    ],
)
def test_metal_gpu_reads_count_and_model_from_the_plan_id(plan_id: str, expected: tuple | None) -> None:
    assert vultr.metal_gpu(plan_id) == expected


def test_gpu_model_drops_the_vendor_prefix() -> None:
    assert (vultr.gpu_model("NVIDIA_A100"), vultr.gpu_model("AMD_MI300X"), vultr.gpu_model("L4")) == (
        "A100",
        "MI300X",
        "L4",
    )


@pytest.mark.parametrize(
    ("payload", "cursor"),
    [
        ({"meta": {"links": {"next": "abc", "prev": ""}}}, "abc"),
        ({"meta": {"links": {"next": "", "prev": "x"}}}, None),
        ({"meta": {"total": 3}}, None),
        ({}, None),
    ],
)
def test_next_cursor(payload: dict, cursor: str | None) -> None:
    assert vultr.next_cursor(payload) == cursor


# --- one plan -------------------------------------------------------------------------------------


def test_one_offer_per_location_and_spot_is_a_published_list_price() -> None:
    plan = vcg(locations=["ewr", "fra"], hourly_cost_preemptible=1.643, monthly_cost_preemptible=1200)
    offers = by_key(vultr.plan_offers(plan, "plans"))  # type: ignore[arg-type]
    assert set(offers) == {
        (plan["id"], region, pricing) for region in ("ewr", "fra") for pricing in ("on_demand", "spot")
    }
    spot = offers[(plan["id"], "fra", "spot")]
    assert (spot.price_per_hour, spot.price_source, spot.scope) == (1.643, "list", "plans:spot")
    assert "not a market price" in spot.provider_data["spot_kind"]
    on_demand = offers[(plan["id"], "ewr", "on_demand")]
    assert (on_demand.price_per_hour, on_demand.gpu_count, on_demand.gpu_name_raw) == (2.397, 1.0, "A100")
    assert (on_demand.vcpus, on_demand.ram_gb, on_demand.scope) == (12.0, 120.0, "plans:on_demand")


def test_location_cost_overrides_the_plan_price_for_that_location() -> None:
    plan = vcg(locations=["ewr", "sjc"], location_cost={"sjc": {"hourly_cost": 2.6}})
    offers = by_key(vultr.plan_offers(plan, "plans"))  # type: ignore[arg-type]
    assert offers[(plan["id"], "ewr", "on_demand")].price_per_hour == 2.397
    assert offers[(plan["id"], "sjc", "on_demand")].price_per_hour == 2.6
    assert offers[(plan["id"], "sjc", "on_demand")].provider_data["location_cost"] is True


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"hourly_cost": 0}, "not positive"),
        ({"hourly_cost": -1.0}, "not positive"),
        ({"hourly_cost": math.nan}, "not a number"),
        ({"hourly_cost": "n/a"}, "not a number"),
        ({"hourly_cost": None}, "hourly_cost missing"),
    ],
)
def test_wrong_prices_are_flagged_offers(overrides: dict[str, Any], problem: str) -> None:
    (offer,) = vultr.plan_offers(vcg(**overrides), "plans")  # type: ignore[misc]
    assert isinstance(offer, Offer) and problem in (offer.problem or "")


def test_missing_hourly_cost_is_a_problem_but_a_monthly_plan_is_converted() -> None:
    plan = vcg()
    del plan["hourly_cost"]
    (offer,) = vultr.plan_offers(plan, "plans")  # type: ignore[misc]
    assert offer.problem and math.isnan(offer.price_per_hour)
    (monthly,) = vultr.plan_offers(plan | {"invoice_type": "monthly"}, "plans")  # type: ignore[misc]
    assert monthly.problem is None and monthly.price_per_hour == pytest.approx(1750 / 730)


@pytest.mark.parametrize(
    ("plan", "source", "reason"),
    [
        ({"id": "vc2-1c-1gb", "hourly_cost": 0.007, "locations": ["ewr"]}, "plans", "cpu_only"),
        ({"id": "vbm-4c-32gb", "hourly_cost": 0.179, "locations": ["ewr"]}, "plans-metal", "cpu_only"),
        (vcg(locations=[]), "plans", "no_location"),
    ],
)
def test_excluded_plans_say_why(plan: dict[str, Any], source: str, reason: str) -> None:
    result = vultr.plan_offers(plan, source)
    assert isinstance(result, Excluded) and result.reason == reason


def test_unknown_gpu_type_still_lands_with_its_raw_name() -> None:
    (offer,) = vultr.plan_offers(vcg(gpu_type="NVIDIA_Zeta Z9"), "plans")  # type: ignore[misc]
    assert (offer.gpu_name_raw, offer.gpu_count, offer.gpu_memory_gb_raw) == ("Zeta Z9", 0.0, 80.0)


@pytest.mark.parametrize(
    ("response", "label"),
    [
        (answer({"plan": []}), "`plans` list missing"),
        (metal({"plans": []}), "`plans_metal` list missing"),
        (answer([1, 2]), "`plans` list missing"),
        (answer({"plans": [{"id": "vc2-1c-1gb", "locations": ["ewr"]}]}), "no GPU plan"),
        (answer({"plans": [{"hourly_cost": 1.0}]}), "plan without `id`"),
    ],
)
def test_unreadable_payloads_are_layout_changes(response: RawResponse, label: str) -> None:
    with pytest.raises(LayoutChanged, match=label):
        list(vultr.parse([response]))


# --- real captures (gpuhunt test literals, PROVENANCE.md: EXTRACTED) ----------------------------


def test_real_metal_capture(shared_raw: Path) -> None:
    payload = json.loads((shared_raw / "vultr" / "plans-metal-gpu-sample.json").read_text())
    items = list(vultr.parse([metal(payload)]))
    offers = by_key(items)
    assert len(offers) == 4 and exclusions(items) == {}
    h100 = offers[("vbm-112c-2048gb-8-h100-gpu", "sea", "on_demand")]
    assert (h100.price_per_hour, h100.gpu_count, h100.gpu_name_raw, h100.vcpus) == (23.92, 8.0, "h100", 224.0)
    assert h100.ram_gb == 2048.0 and h100.provider_data["monthly_cost"] == 16074.24
    spot = offers[("vbm-112c-2048gb-8-h100-gpu", "sea", "spot")]
    assert (spot.price_per_hour, spot.price_source, spot.scope) == (18.4, "list", "plans-metal:spot")
    mi300x = offers[("vbm-256c-2048gb-8-mi300x-gpu", "ord", "spot")]
    assert (mi300x.price_per_hour, mi300x.gpu_count, mi300x.gpu_name_raw) == (14.72, 8.0, "mi300x")
    assert offers[("vbm-256c-2048gb-8-mi300x-gpu", "ord", "on_demand")].price_per_hour == 17.52


def test_real_cloud_gpu_capture(shared_raw: Path) -> None:
    payload = json.loads((shared_raw / "vultr" / "plans-vcg-gpu-sample.json").read_text())
    offers = by_key(list(vultr.parse([answer(payload)])))
    assert len(offers) == 3 and {p for _, _, p in offers} == {"on_demand"}  # no preemptible stated
    slice_ = offers[("vcg-a100-1c-6g-4vram", "ewr", "on_demand")]
    assert (slice_.price_per_hour, slice_.gpu_count, slice_.gpu_memory_gb_raw) == (0.123, 0.05, 4.0)
    half = offers[("vcg-a100-6c-60g-40vram", "ewr", "on_demand")]
    assert (half.price_per_hour, half.gpu_count, half.gpu_memory_gb_raw) == (1.397, 0.5, 40.0)
    whole = offers[("vcg-a100-12c-120g-80vram", "ewr", "on_demand")]
    assert (whole.price_per_hour, whole.gpu_count, whole.ram_gb) == (2.397, 1.0, 120.0)


# --- HTTP path ------------------------------------------------------------------------------------


def test_fetch_follows_the_cursor_and_sends_no_credentials() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        assert "authorization" not in request.headers
        if request.url.path.endswith("/plans-metal"):
            return httpx.Response(200, json={"plans_metal": [], "meta": {"links": {"next": ""}}})
        if request.url.params.get("cursor") == "c2":
            return httpx.Response(200, json={"plans": [vcg(id="b")], "meta": {"links": {"next": ""}}})
        return httpx.Response(200, json={"plans": [vcg(id="a")], "meta": {"links": {"next": "c2"}}})

    with make_client(transport=httpx.MockTransport(handler)) as client:
        responses = list(vultr.fetch(client, {}))
    assert [r.url for r in responses] == [
        "https://api.vultr.com/v2/plans?type=all&per_page=500",
        "https://api.vultr.com/v2/plans?type=all&per_page=500&cursor=c2",
        "https://api.vultr.com/v2/plans-metal?per_page=500",
    ]
    assert {o.instance_type for o in vultr.parse(responses) if isinstance(o, Offer)} == {"a", "b"}


def test_a_cursor_that_repeats_is_a_layout_change() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"plans": [vcg()], "meta": {"links": {"next": "same"}}})

    with make_client(transport=httpx.MockTransport(handler)) as client, pytest.raises(LayoutChanged):
        list(vultr.fetch(client, {}))


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(vultr.fetch(client, {}))
    assert len(responses) == 3  # two pages of plans, one of metal plans
    items = list(vultr.parse(responses))
    offers = by_key(items)
    assert exclusions(items) == {"cpu_only": 2, "no_location": 1}
    assert offers[("vcg-l40s-16c-180g-48vram", "sjc", "on_demand")].price_per_hour == 1.838
    assert offers[("vcg-l40s-16c-180g-48vram", "atl", "on_demand")].price_per_hour == 1.671
    b200 = offers[("vcg-b200-248c-2826g-1536vram", "ewr", "spot")]
    assert (b200.price_per_hour, b200.gpu_count, b200.gpu_memory_gb_raw) == (63.94, 8.0, 192.0)
    assert offers[("vbm-112c-2048gb-8-h100-gpu", "ewr", "spot")].price_per_hour == 18.4
    assert ("vbm-256c-2048gb-8-mi300x-gpu", "ord", "spot") not in offers
    assert len(offers) == 13


@pytest.mark.network
def test_live_plans_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lift the offline guard: this test exists to reach api.vultr.com
    with make_client() as client:
        items = list(vultr.parse(list(vultr.fetch(client, {}))))
    offers = [o for o in items if isinstance(o, Offer)]
    assert offers and all(o.problem is None for o in offers)


# --- every GPU of the captures and the cassette resolves to a canonical GPU -----------------------


def test_capture_and_cassette_gpus_resolve(shared_raw: Path) -> None:
    from warehouse.hardware import HardwareCatalog

    catalog = HardwareCatalog.load()
    vcg_capture = json.loads((shared_raw / "vultr" / "plans-vcg-gpu-sample.json").read_text())
    metal_capture = json.loads((shared_raw / "vultr" / "plans-metal-gpu-sample.json").read_text())
    with make_client(replay=REPLAY) as client:
        responses = [*vultr.fetch(client, {}), answer(vcg_capture), metal(metal_capture)]
    offers = [o for o in vultr.parse(responses) if isinstance(o, Offer)]
    resolved = {
        o.instance_type: catalog.resolve(
            "vultr", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count or None
        )
        for o in offers
    }
    assert [plan for plan, match in resolved.items() if match is None] == []
    slice_ = resolved["vcg-a100-1c-6g-4vram"]
    assert (slice_.gpu_name, slice_.vram_gb, slice_.gpu_count) == ("A100-80GB-PCIe", 4.0, 0.05)
    h100 = resolved["vbm-112c-2048gb-8-h100-gpu"]
    assert (h100.gpu_name, h100.gpu_count, h100.intra_node_interconnect) == ("H100-SXM", 8, "NVSwitch")
    assert resolved["vbm-256c-2048gb-8-mi300x-gpu"].gpu_name == "MI300X"
    assert resolved["vcg-b200-248c-2826g-1536vram"].gpu_name == "B200"
