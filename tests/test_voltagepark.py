"""Voltage Park: keyless bare-metal locations (per-GPU price per fabric, whole 8-GPU nodes) and
instant-deploy VM presets (per-instance compute rate); our fixtures, replay, the live smoke test."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import voltagepark
from connectors.base import Degraded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures" / "voltagepark"
LOCATION = "5b0e7c1a-3f2d-4c8e-9a61-2d7f0b4e8c10"


def answer(url: str, payload: Any) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return RawResponse(
        url=url, method="GET", status=200, fetched_at=datetime(2026, 12, 2, tzinfo=UTC), body=body
    )


def node(**prices: object) -> dict[str, Any]:
    row: dict[str, Any] = {"id": "loc-1", "specs_per_node": {"gpu_model": "h100-sxm5-80gb", "gpu_count": 8}}
    return row | prices


def locations(*rows: dict[str, Any], **envelope: object) -> dict[str, Any]:
    return {"results": list(rows), "total_result_count": len(rows), "has_next": False} | envelope


def bare_metal(payload: Any) -> list[object]:
    return list(voltagepark.parse([answer(voltagepark.BARE_METAL_URL, payload)]))


def offers_of(items: Sequence[object]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in items if isinstance(o, Offer)}


def fixture_items() -> list[object]:
    responses = [
        answer(voltagepark.BARE_METAL_URL, (FIXTURES / "bare-metal-locations__2026-12-02.json").read_bytes()),
        answer(voltagepark.PRESETS_URL, (FIXTURES / "instant-deploy-presets__2026-12-02.json").read_bytes()),
    ]
    return list(voltagepark.parse(responses))


def test_bare_metal_prices_whole_nodes_per_fabric() -> None:
    offers = offers_of(fixture_items())
    ethernet = offers[("8x h100-sxm5-80gb bare-metal ethernet", LOCATION)]
    # "1.99" is USD per GPU-hour; a node is 8 GPUs
    assert (ethernet.price_per_hour, ethernet.gpu_count, ethernet.currency) == (15.92, 8.0, "USD")
    assert (ethernet.vcpus, ethernet.ram_gb, ethernet.available) == (104.0, 1024.0, True)
    assert ethernet.provider_data["price_per_gpu_hour"] == "1.99"
    infiniband = offers[("8x h100-sxm5-80gb bare-metal infiniband", LOCATION)]
    assert (infiniband.price_per_hour, infiniband.available) == (19.92, False)  # 0 GPUs in stock
    assert {o.scope for o in offers.values() if "bare-metal" in o.instance_type} == {"on_demand:bare-metal"}
    assert all(o.pricing_type == "on_demand" and o.price_source == "list" for o in offers.values())


def test_a_null_fabric_price_is_not_sold_there() -> None:
    items = fixture_items()
    second = [k for k in offers_of(items) if k[1].startswith("c94a2e6d")]
    assert second == [("8x h100-sxm5-80gb bare-metal infiniband", "c94a2e6d-7b1f-4e03-8d5a-6f2c9e1b7a34")]
    assert exclusions(items) == {"no_ethernet_price": 1, "no_gpu": 1}


def test_vm_presets_are_per_instance_with_storage_apart() -> None:
    offers = offers_of(fixture_items())
    assert {k[0] for k in offers if k[1] == "global"} == {f"{n}x h100-sxm5-80gb vm" for n in (1, 2, 4, 8)}
    eight = offers[("8x h100-sxm5-80gb vm", "global")]
    # "15.120000" is the whole 8-GPU VM, not a per-GPU rate
    assert (eight.price_per_hour, eight.gpu_count, eight.available) == (15.12, 8.0, False)
    assert eight.provider_data["storage_rate_hourly"] == "0.800000"
    one = offers[("1x h100-sxm5-80gb vm", "global")]
    assert (one.price_per_hour, one.vcpus, one.ram_gb, one.available) == (1.89, 26.0, 116.0, True)
    assert one.scope == "on_demand:vm"


def test_a_new_fabric_lands_as_its_own_offer() -> None:
    offers = offers_of(
        bare_metal(locations(node(gpu_price_ethernet="2", gpu_price_roce="2.2", gpu_count_roce=8)))
    )
    assert offers[("8x h100-sxm5-80gb bare-metal roce", "loc-1")].price_per_hour == pytest.approx(17.6)


@pytest.mark.parametrize(
    ("value", "problem"), [("0", "not positive"), ("-1", "not positive"), ("n/a", "not a number")]
)
def test_wrong_prices_are_flagged_not_dropped(value: str, problem: str) -> None:
    offers = offers_of(bare_metal(locations(node(gpu_price_ethernet=value, gpu_price_infiniband="2.49"))))
    flagged = offers[("8x h100-sxm5-80gb bare-metal ethernet", "loc-1")]
    assert problem in (flagged.problem or "")
    assert offers[("8x h100-sxm5-80gb bare-metal infiniband", "loc-1")].problem is None


def test_a_node_without_a_gpu_count_is_flagged() -> None:
    row = node(gpu_price_ethernet="1.99", gpu_price_infiniband="2.49")
    row["specs_per_node"] = {"gpu_model": "h100-sxm5-80gb"}
    offer = offers_of(bare_metal(locations(row)))[("?x h100-sxm5-80gb bare-metal ethernet", "loc-1")]
    assert math.isnan(offer.price_per_hour) and "gpu_count" in (offer.problem or "")


def test_renamed_price_keys_are_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="gpu_price_<fabric>"):
        bare_metal(locations(node(price_ethernet="1.99")))


@pytest.mark.parametrize(
    "payload",
    [
        locations(node(gpu_price_ethernet="1.99"), has_next=True),
        locations(node(gpu_price_ethernet="1.99"), total_result_count=3),
    ],
)
def test_a_paged_answer_is_refused(payload: dict[str, Any]) -> None:
    with pytest.raises(LayoutChanged, match="now pages"):
        bare_metal(payload)


@pytest.mark.parametrize("payload", [{"locations": []}, {"results": []}, []])
def test_missing_or_empty_results_is_a_layout_change(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="`results`"):
        bare_metal(payload)


def test_a_location_without_gpu_model_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="gpu_model"):
        bare_metal(locations({"id": "x", "gpu_price_ethernet": "1.99", "specs_per_node": {}}))


def test_presets_mixed_gpus_excluded_and_bad_rate_flagged() -> None:
    presets = [
        {"id": "a", "resources": {"gpus": {"h100-sxm5-80gb": {"count": 1}, "a100": {"count": 1}}}},
        {"id": "b", "resources": {"gpus": {"h100-sxm5-80gb": {"count": 2}}}, "compute_rate_hourly": None},
    ]
    items = list(voltagepark.parse([answer(voltagepark.PRESETS_URL, presets)]))
    assert exclusions(items) == {"mixed_gpu_models": 1}
    (offer,) = offers_of(items).values()
    assert "compute_rate_hourly missing" in (offer.problem or "")
    with pytest.raises(LayoutChanged, match="`presets`"):
        list(voltagepark.parse([answer(voltagepark.PRESETS_URL, {"detail": "gone"})]))


def test_every_offer_maps_to_a_gpu_with_its_fabric() -> None:
    hardware = HardwareCatalog.load()
    offers = offers_of(fixture_items())
    resolved = {
        k: hardware.resolve("voltagepark", o.instance_type, o.gpu_name_raw, None, o.gpu_count)
        for k, o in offers.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    assert {m.gpu_name for m in resolved.values() if m} == {"H100-SXM"}
    ib = resolved[("8x h100-sxm5-80gb bare-metal infiniband", LOCATION)]
    assert ib is not None and (ib.inter_node_fabric, ib.inter_node_gbps, ib.intra_node_interconnect) == (
        "InfiniBand",
        3200.0,
        "NVSwitch",
    )


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(voltagepark.fetch(client, {}))
    assert [r.url for r in responses] == [voltagepark.BARE_METAL_URL, voltagepark.PRESETS_URL]
    assert len(offers_of(list(voltagepark.parse(responses)))) == 7


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_endpoints_price_h100_nodes() -> None:
    with make_client() as client:
        responses = list(voltagepark.fetch(client, {}))
    offers = [o for o in voltagepark.parse(responses) if isinstance(o, Offer)]
    assert any("bare-metal" in o.instance_type and o.problem is None for o in offers)


def test_a_known_fabric_key_missing_from_a_priced_row_is_flagged() -> None:
    offers = offers_of(bare_metal(locations(node(gpu_price_ethernet="1.99"))))
    flagged = offers[("8x h100-sxm5-80gb bare-metal infiniband", "loc-1")]
    assert math.isnan(flagged.price_per_hour) and "gpu_price_infiniband missing" in (flagged.problem or "")
    assert offers[("8x h100-sxm5-80gb bare-metal ethernet", "loc-1")].problem is None


def test_a_removed_presets_endpoint_degrades_and_keeps_bare_metal() -> None:
    gone = RawResponse(
        url=voltagepark.PRESETS_URL, method="GET", status=404, fetched_at=datetime(2026, 12, 2, tzinfo=UTC)
    )
    bare = answer(
        voltagepark.BARE_METAL_URL, (FIXTURES / "bare-metal-locations__2026-12-02.json").read_bytes()
    )
    items = list(voltagepark.parse([bare, gone]))
    (degraded,) = [i for i in items if isinstance(i, Degraded)]
    assert "HTTP 404" in degraded.reason and "virtual-machines/instant/locations" in degraded.hint
    assert {o.scope for o in items if isinstance(o, Offer)} == {"on_demand:bare-metal"}


def test_fetch_accepts_a_404_for_presets_only() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if "instant-deploy-presets" in str(request.url):
            return httpx.Response(404, json={"detail": "Not found."})
        return httpx.Response(
            200, json=locations(node(gpu_price_ethernet="1.99", gpu_price_infiniband="2.49"))
        )

    with make_client(transport=httpx.MockTransport(handler)) as client:
        statuses = [r.status for r in voltagepark.fetch(client, {})]
    assert statuses == [200, 404]


def test_location_rows_returns_every_row_of_a_complete_page() -> None:
    rows = [node(gpu_price_ethernet="1.99"), node(gpu_price_ethernet="2.09")]
    assert voltagepark.location_rows(locations(*rows)) == rows
    # an answer without the count (or with has_next false) is one whole page
    assert voltagepark.location_rows({"results": rows}) == rows
