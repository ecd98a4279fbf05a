"""Latitude.sh plans API: bare-metal and VM GPU plans, one offer per region, hourly read, monthly kept."""

from __future__ import annotations

import copy
import csv
import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import latitude
from connectors.base import Degraded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures" / "latitude"
DERIVED = "latitude/opencomputeprices-latitude-2026-03-22.csv"
KEY = {latitude.CREDENTIAL: "replay-key"}  # sent as a header: the cassette matches on the URL
CATALOG = HardwareCatalog.load()


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}__2026-12-01.json").read_text())
    return data


def answer(payload: Any, url: str = latitude.BARE_METAL_URL) -> RawResponse:
    return RawResponse(
        url=url,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def both() -> list[RawResponse]:
    return [answer(load("plans")), answer(load("plans-virtual-machines"), latitude.VM_URL)]


def offers(items: list[Any]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in items if isinstance(o, Offer)}


def test_each_gpu_plan_is_one_offer_per_region_at_its_hourly_price() -> None:
    items = list(latitude.parse(both()))
    found = offers(items)
    assert len(found) == 7
    small = found[("g3-h100-small", "United States")]
    assert (small.price_per_hour, small.currency, small.gpu_count, small.gpu_memory_gb_raw) == (
        1.75,
        "USD",
        1.0,
        80.0,
    )
    assert (small.billing_unit, small.pricing_type, small.price_source) == ("hour", "on_demand", "list")
    # the monthly and yearly prices are kept, never turned into the offer's rate
    assert small.provider_data["prices"]["USD"] == {"hour": 1.75, "month": 1277.5, "year": 14000.0}
    assert small.provider_data["interconnect"] == "Paired-NVLink, PCIe based"
    rtx = found[("g4-rtx6kpro-large", "United States")]
    assert (rtx.price_per_hour, rtx.gpu_count, rtx.ram_gb) == (13.2, 8.0, 1536.0)
    assert exclusions(items) == {"cpu_only": 2, "no_regions": 1}
    assert {o.scope for o in found.values()} == {"plans:bare_metal", "plans:virtual_machines"}
    assert all(o.problem is None for o in found.values())


def test_stock_decides_availability_per_region() -> None:
    found = offers(list(latitude.parse(both())))
    brazil = found[("g3-h100-small", "Brazil")]
    assert (brazil.available, brazil.provider_data["stock_level"], brazil.provider_data["sites"]) == (
        False,
        "unavailable",
        ["SAO"],
    )
    assert found[("g3-h100-small", "United States")].available is True


def test_usd_is_read_first_and_a_brl_only_region_stays_in_brl() -> None:
    found = offers(list(latitude.parse(both())))
    large = found[("g3-h100-large", "Brazil")]
    assert (large.price_per_hour, large.currency) == (7.6, "USD")  # USD and BRL both stated
    assert large.provider_data["prices"]["BRL"] == {"hour": 39.9, "month": 29127.0}
    payload = load("plans")
    del payload["data"][2]["attributes"]["regions"][0]["pricing"]["USD"]
    brl = offers(list(latitude.parse([answer(payload)])))[("g3-h100-large", "Brazil")]
    assert (brl.price_per_hour, brl.currency, brl.problem) == (39.9, "BRL", None)


def test_a_vm_states_one_gpu_without_a_count() -> None:
    found = offers(list(latitude.parse(both())))
    vm = found[("vm.h100.small", "United States")]
    assert (vm.gpu_name_raw, vm.gpu_count, vm.vcpus, vm.ram_gb) == (
        "NVIDIA H100 80GB NVLink",
        1.0,
        16.0,
        128.0,
    )
    assert vm.provider_data["gpu_count_stated"] is False
    assert vm.scope == "plans:virtual_machines"


def test_bare_metal_cpu_is_kept_as_stated_not_as_vcpus() -> None:
    found = offers(list(latitude.parse(both())))
    small = found[("g3-h100-small", "United States")]
    assert small.vcpus is None
    assert small.provider_data["cpu"] == {"type": "AMD EPYC 9124", "clock": 3.0, "cores": 16, "count": 1}


def test_gpu_of_reads_both_shapes() -> None:
    assert latitude.gpu_of({"gpu": "2 x NVIDIA L40S", "vram_per_gpu": 48}) == ("NVIDIA L40S", 2.0, 48.0, {})
    assert latitude.gpu_of({"gpu": {}}) == (None, None, None, {})
    assert latitude.gpu_of({"gpu": {"type": "H100", "count": 0}})[0] is None
    assert latitude.gpu_of({}) == (None, None, None, {})


@pytest.mark.parametrize(
    ("pricing", "problem"),
    [
        ({"USD": {"month": 1277.5}}, "pricing.USD.hour missing"),
        ({"USD": {"hour": 0, "month": 0}}, "is not positive"),
        ({"USD": {"hour": "soon"}}, "is not a number"),
        ({}, "pricing.USD.hour missing"),
    ],
)
def test_a_region_without_a_readable_hourly_price_is_a_wrong_row(
    pricing: dict[str, Any], problem: str
) -> None:
    payload = load("plans")
    payload["data"][3]["attributes"]["regions"][0]["pricing"] = pricing
    found = offers(list(latitude.parse([answer(payload)])))
    rtx = found[("g4-rtx6kpro-large", "United States")]
    assert problem in (rtx.problem or "")
    assert rtx.problem and (math.isnan(rtx.price_per_hour) or rtx.price_per_hour <= 0)


def test_more_pages_than_read_is_degraded() -> None:
    payload = load("plans") | {"meta": {"current_page": 1, "last_page": 3, "per_page": 25}}
    items = list(latitude.parse([answer(payload)]))
    degraded = [i for i in items if isinstance(i, Degraded)]
    assert len(degraded) == 1 and "page 1 of 3" in degraded[0].reason
    assert offers(items)  # what was read still loads


@pytest.mark.parametrize("payload", [{"data": []}, {"plans": []}, [1]])
def test_an_empty_or_other_answer_raises(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="`data`"):
        list(latitude.parse([answer(payload)]))


def test_every_offer_maps_to_a_gpu_with_its_interconnect() -> None:
    found = offers(list(latitude.parse(both())))
    resolved = {
        k: CATALOG.resolve("latitude", k[0], o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in found.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    names = {k[0]: m.gpu_name for k, m in resolved.items() if m}
    assert names == {
        "g3-h100-small": "H100-PCIe",
        "g3-h100-large": "H100-PCIe",
        "g4-rtx6kpro-large": "RTX-PRO-6000-SE",
        "vm.h100.small": "H100-SXM",
        "vm.rtx6kpro.small": "RTX-PRO-6000-SE",
        "vm.l40s.small": "L40S",
    }
    large = resolved[("g3-h100-large", "Brazil")]
    assert large is not None and (large.gpu_count, large.intra_node_interconnect) == (4.0, "NVLink bridge")


def test_derived_rows_map_to_the_same_gpus_and_state_both_prices(shared_raw: Path) -> None:
    """OpenComputePrices' 2026-03-22 rows (derived from latitude.sh/pricing) are a cross-check
    only: each plan's GPU and count must be what our seeds give its slug, and each states an hourly
    and a monthly price, the case the connector reads hourly and keeps monthly."""
    with (shared_raw / DERIVED).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 5
    expected = {"H100": {"H100-PCIe", "H100-SXM"}, "L40S": {"L40S"}}
    for row in rows:
        plan = row["instance_type"].removeprefix("Plan ")
        slug = plan if plan.startswith("vm.") else plan.replace(".", "-")
        match = CATALOG.resolve("latitude", slug, None, None, float(row["gpu_count"]))
        assert match is not None, slug
        assert match.gpu_name in expected.get(row["gpu_name"], {"RTX-PRO-6000-SE"}), slug
        assert float(row["price_per_hour"]) > 0 and json.loads(row["raw_extra"])["monthly"] > 0
    pcie = CATALOG.resolve("latitude", "g3-h100-small", None, None, 1.0)
    assert pcie is not None and pcie.gpu_name == "H100-PCIe"  # "Paired-NVLink, PCIe based"


def test_fetch_sends_the_bearer_token_to_both_lists() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        name = "plans-virtual-machines" if request.url.path.endswith("virtual_machines") else "plans"
        return httpx.Response(200, json=load(name))

    with make_client(transport=httpx.MockTransport(handler), secrets=["secret-token"]) as client:
        responses = list(latitude.fetch(client, {latitude.CREDENTIAL: "secret-token"}))
    assert [str(r.url) for r in seen] == [latitude.BARE_METAL_URL, latitude.VM_URL]
    assert all(r.headers["authorization"] == "Bearer secret-token" for r in seen)
    assert len(offers(list(latitude.parse(responses)))) == 7


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        found = offers(list(latitude.parse(list(latitude.fetch(client, KEY)))))
    assert len(found) == 7
    assert found[("vm.l40s.small", "United States")].price_per_hour == 0.65


def test_the_fixture_is_not_changed_by_parsing() -> None:
    payload = load("plans")
    before = copy.deepcopy(payload)
    list(latitude.parse([answer(payload)]))
    assert payload == before


@pytest.mark.network
def test_live_plans() -> None:
    token = os.environ.get(latitude.CREDENTIAL)
    if not token:
        pytest.skip(f"{latitude.CREDENTIAL} not set")
    with make_client(secrets=[token]) as client:
        found = offers(list(latitude.parse(list(latitude.fetch(client, {latitude.CREDENTIAL: token})))))
    assert found and all(o.currency in ("USD", "BRL") for o in found.values())


@pytest.mark.parametrize(
    ("plan", "raw", "gpu", "source"),
    [
        ("g3-h100-small", "NVIDIA H100 80GB", "H100-PCIe", "instance_type"),
        # "NVLink" is a form-factor word of the name itself (an 80 GB NVLink H100 is the SXM5)
        ("vm.h100.small", "NVIDIA H100 80GB NVLink", "H100-SXM", "name"),
        ("vm.l40s.small", "NVIDIA L40S", "L40S", "only_variant"),
    ],
)
def test_variant_source_says_how_the_form_is_known(plan: str, raw: str, gpu: str, source: str) -> None:
    match = CATALOG.resolve("latitude", plan, raw, None, 1)
    assert match is not None and (match.gpu_name, match.variant_source) == (gpu, source)
