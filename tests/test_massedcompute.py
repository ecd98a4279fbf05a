"""Massed Compute VM API gpu-inventory: products gpu_<n>x_<model>, USD cents per instance-hour;
our fixture, replay, the missing-key skip and the live smoke test."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import massedcompute
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions, missing_credentials
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "massedcompute" / "gpu-inventory__2026-12-02.json"


def answer(payload: Any) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return RawResponse(
        url=massedcompute.API_URL,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 2, tzinfo=UTC),
        body=body,
    )


def offers_of(items: Sequence[object]) -> dict[str, Offer]:
    return {o.instance_type: o for o in items if isinstance(o, Offer)}


def product(name: str, cents: object = 100, **extra: object) -> dict[str, Any]:
    instance = {"name": name, "description": "", "price_cents_per_hour": cents, "specs": {"vcpu_count": 8}}
    return {
        name: {"instance_type": instance, "regions_with_capacity_available": [], "capacity_available": 1}
        | extra
    }


def test_fixture_products_price_whole_vms_in_dollars() -> None:
    items = list(massedcompute.parse([answer(FIXTURE.read_bytes())]))
    offers = offers_of(items)
    assert len(offers) == 7 and exclusions(items) == {"not_a_gpu_product": 1}
    four = offers["gpu_4x_l40s"]
    # 352 cents per hour for the whole 4-GPU VM
    assert (four.price_per_hour, four.gpu_count, four.gpu_name_raw, four.currency) == (
        3.52,
        4.0,
        "l40s",
        "USD",
    )
    assert (four.vcpus, four.ram_gb, four.billing_unit) == (46.0, 412.3, "minute")  # 384 GiB
    assert four.provider_data["storage_gb"] == 2500
    blackwell = offers["gpu_1x_pro_6000_blackwell"]
    assert (blackwell.price_per_hour, blackwell.gpu_memory_gb_raw, blackwell.gpu_name_raw) == (
        2.19,
        96.0,
        "pro_6000_blackwell",
    )
    dgx = offers["gpu_1x_DGX_A100"]
    assert (dgx.available, dgx.provider_data["regions_with_capacity"]) == (False, [])
    assert offers["gpu_1x_l40s"].provider_data["regions_with_capacity"] == ["us-central-3"]
    assert all(
        o.pricing_type == "on_demand" and o.price_source == "list" and o.region == "global"
        for o in offers.values()
    )
    assert all(o.problem is None for o in offers.values())


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpu_8x_h100", (8, "h100")),
        ("gpu_1x_DGX_A100", (1, "DGX_A100")),
        ("cpu_32_vcpu", None),
        ("gpu_0x_l40", None),
    ],
)
def test_product_gpus_reads_count_and_model(name: str, expected: tuple[int, str] | None) -> None:
    assert massedcompute.product_gpus(name) == expected


@pytest.mark.parametrize(
    ("cents", "problem"),
    [(None, "missing"), (0, "not positive"), (-5, "not positive"), ("abc", "not a number")],
)
def test_wrong_prices_are_flagged_not_dropped(cents: object, problem: str) -> None:
    (offer,) = offers_of(
        list(massedcompute.parse([answer({"gpu_inventory": product("gpu_1x_l40", cents)})]))
    ).values()
    assert problem in (offer.problem or "")
    assert offer.problem and (math.isnan(offer.price_per_hour) or offer.price_per_hour <= 0)


def test_stated_memory_tells_an_80gb_a100_from_the_40gb_default() -> None:
    entry = product("gpu_1x_a100")
    entry["gpu_1x_a100"]["instance_type"]["description"] = "1x A100 80GB"
    (offer,) = offers_of(list(massedcompute.parse([answer({"gpu_inventory": entry})]))).values()
    match = HardwareCatalog.load().resolve(
        "massedcompute", offer.instance_type, offer.gpu_name_raw, 80.0, 1.0
    )
    assert offer.gpu_memory_gb_raw == 80.0 and match is not None and match.gpu_name == "A100-80GB-SXM"


@pytest.mark.parametrize("payload", [{"data": {}}, {"gpu_inventory": {}}, [1]])
def test_missing_or_empty_inventory_is_a_layout_change(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="`gpu_inventory`"):
        list(massedcompute.parse([answer(payload)]))


def test_a_product_without_instance_type_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="no `instance_type`"):
        list(massedcompute.parse([answer({"gpu_inventory": {"gpu_1x_l40": {"capacity_available": 1}}})]))


def test_every_fixture_product_maps_to_a_gpu() -> None:
    hardware = HardwareCatalog.load()
    offers = offers_of(list(massedcompute.parse([answer(FIXTURE.read_bytes())])))
    resolved = {
        k: hardware.resolve(
            "massedcompute", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count
        )
        for k, o in offers.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    assert {k: m.gpu_name for k, m in resolved.items() if m} == {
        "gpu_1x_l40s": "L40S",
        "gpu_4x_l40s": "L40S",
        "gpu_2x_a6000": "RTXA6000",
        "gpu_1x_a100": "A100-80GB-SXM",
        "gpu_1x_DGX_A100": "A100-80GB-SXM",
        "gpu_1x_h100": "H100-SXM",
        "gpu_1x_pro_6000_blackwell": "RTX-PRO-6000",
    }
    assert resolved["gpu_4x_l40s"] is not None and resolved["gpu_4x_l40s"].intra_node_interconnect == "PCIe"


def test_without_the_key_the_provider_is_skipped() -> None:
    assert missing_credentials(massedcompute, {}) == ("MASSEDCOMPUTE_API_KEY",)
    assert missing_credentials(massedcompute, {"MASSEDCOMPUTE_API_KEY": "k"}) == ()


def test_fetch_sends_the_key_as_a_bearer_header_and_never_records_it() -> None:
    secret = "mc-secret-123"

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {secret}"
        return httpx.Response(200, json={"gpu_inventory": product("gpu_1x_l40")})

    with make_client(transport=httpx.MockTransport(handler), secrets=[secret]) as client:
        (response,) = massedcompute.fetch(client, {"MASSEDCOMPUTE_API_KEY": secret})
    assert secret not in response.url
    assert all(secret not in value for value in response.headers.values())
    assert len(offers_of(list(massedcompute.parse([response])))) == 1


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(massedcompute.fetch(client, {"MASSEDCOMPUTE_API_KEY": "test-key"}))
    assert len(offers_of(list(massedcompute.parse(responses)))) == 7


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_inventory_has_gpu_products() -> None:
    key = os.environ.get("MASSEDCOMPUTE_API_KEY")
    if not key:
        pytest.skip("MASSEDCOMPUTE_API_KEY is not set: the gpu-inventory endpoint needs a Bearer key")
    with make_client(secrets=[key]) as client:
        responses = list(massedcompute.fetch(client, {"MASSEDCOMPUTE_API_KEY": key}))
    offers = [o for o in massedcompute.parse(responses) if isinstance(o, Offer)]
    assert offers and all(o.gpu_count >= 1 for o in offers)


@pytest.mark.parametrize(
    ("description", "gb"),
    [("1x RTX PRO 6000 Blackwell 96GB", 96.0), ("2x L40S 48 GB", 48.0), ("1x H100", None), (None, None)],
)
def test_the_description_states_the_memory_per_gpu_or_nothing(description: object, gb: float | None) -> None:
    entry = product("gpu_1x_l40s")
    entry["gpu_1x_l40s"]["instance_type"]["description"] = description
    (offer,) = offers_of(list(massedcompute.parse([answer({"gpu_inventory": entry})]))).values()
    assert offer.gpu_memory_gb_raw == gb
