"""TensorDock v2 hostnodes: bundle pricing, credentials, layout changes, replay; derived cross-check."""

from __future__ import annotations

import csv
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import market, tensordock
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions, missing_credentials
from connectors.http import make_client
from finetune.offer import HOST_STAGED
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
DERIVED = "tensordock/opencomputeprices-tensordock-2026-03-21.csv"
CATALOG = HardwareCatalog.load()
SECRET = "td-secret-123"


def answer(payload: Any) -> RawResponse:
    return RawResponse(
        url=tensordock.API_URL,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def node(gpus: list[dict[str, Any]] | None = None, **overrides: Any) -> dict[str, Any]:
    base = {
        "id": "hn-1",
        "uptime_percentage": 99.5,
        "location": {"city": "Dallas", "stateprovince": "Texas", "country": "United States", "tier": 1},
        "available_resources": {
            "gpus": gpus
            or [{"v0Name": "geforcertx4090-pcie-24gb", "availableCount": 2, "price_per_hr": 0.4}],
            "vcpu_count": 12,
            "ram_gb": 128,
            "storage_gb": 1000,
        },
        "pricing": {"per_vcpu_hr": 0.003, "per_gb_ram_hr": 0.002, "per_gb_storage_hr": 0.00005},
    }
    return base | overrides


def offers_of(payload: Any) -> dict[tuple[str, str], Offer]:
    return {
        (o.instance_type, o.region): o for o in tensordock.parse([answer(payload)]) if isinstance(o, Offer)
    }


def test_memory_gb_from_v0_name() -> None:
    assert tensordock.memory_gb("geforcertx4090-pcie-24gb") == 24.0
    assert tensordock.memory_gb("h100-sxm5-80gb") == 80.0
    assert tensordock.memory_gb("mystery") is None


def test_a_bundle_is_gpus_plus_vcpus_ram_and_disk_at_the_node_unit_prices() -> None:
    hosts, left_out = tensordock.to_hosts(node())
    assert not left_out
    one, two = hosts
    # 0.40 + 8 vCPU x 0.003 + 32 GB x 0.002 + 200 GB x 0.00005
    assert one.price_per_hour == pytest.approx(0.498)
    # two GPUs want 16 vCPUs; the node has 12 free, so the bundle takes 12
    assert (two.vcpus, two.ram_gb) == (12.0, 64)
    assert two.price_per_hour == pytest.approx(0.8 + 12 * 0.003 + 64 * 0.002 + 0.01)
    assert (one.region, one.tier, one.reliability) == ("United States", "tier-1", 0.995)
    assert one.disk_per_gb_month == pytest.approx(0.0365)


def test_no_free_gpu_is_excluded_and_a_bad_price_is_flagged() -> None:
    gpus = [
        {"v0Name": "l40s-pcie-48gb", "availableCount": 0, "price_per_hr": 0.7},
        {"v0Name": "geforcertx3090-pcie-24gb", "availableCount": 1, "price_per_hr": 0},
    ]
    items = list(tensordock.parse([answer({"data": {"hostnodes": [node(gpus)]}})]))
    assert exclusions(items) == {"no_free_gpus": 1}
    (flagged,) = [o for o in items if isinstance(o, Offer)]
    assert flagged.problem == "`price_per_hr` is 0.0 (1 host offer)"


def test_missing_unit_prices_flag_the_offer_instead_of_pricing_the_gpu_alone() -> None:
    offers = offers_of({"data": {"hostnodes": [node(pricing={"per_vcpu_hr": 0.003})]}}).values()
    assert len(offers) == 2  # one per GPU count, both flagged
    assert all(o.problem is not None and "per_gb_ram_hr" in o.problem for o in offers)


@pytest.mark.parametrize(
    ("payload", "label"),
    [
        ({"data": {"hostnodes": []}}, "`data.hostnodes` is empty"),
        ({"hostnodes": []}, "`data.hostnodes` list missing"),
        ({"data": {"nodes": []}}, "`data.hostnodes` list missing"),
    ],
)
def test_missing_or_empty_hostnodes_is_a_layout_change(payload: Any, label: str) -> None:
    with pytest.raises(LayoutChanged, match=label):
        list(tensordock.parse([answer(payload)]))


def test_a_node_without_gpus_or_v0_name_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match=r"available_resources\.gpus"):
        list(tensordock.parse([answer({"data": {"hostnodes": [node(available_resources={})]}})]))
    with pytest.raises(LayoutChanged, match="v0Name"):
        list(tensordock.parse([answer({"data": {"hostnodes": [node([{"availableCount": 1}])]}})]))


def test_the_key_is_required() -> None:
    assert tensordock.requires == ("TENSORDOCK_API_KEY",)
    assert missing_credentials(tensordock, {}) == ("TENSORDOCK_API_KEY",)


# --- cross-check with the derived OpenComputePrices rows (not parser input) ------------------------


def test_derived_tensordock_gpus_resolve(shared_raw: Path) -> None:
    with (shared_raw / DERIVED).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 113
    resolved = {}
    for row in rows:
        v0 = row["instance_type"]  # OCP keeps TensorDock's v0Name here
        match = CATALOG.resolve("tensordock", "", v0, tensordock.memory_gb(v0), 1.0)
        assert match is not None, v0
        resolved[v0] = match.gpu_name
    assert resolved["geforcertx5090-pcie-32gb"] == "RTX5090"  # OCP's row says 0 GB; the name says 32
    assert resolved["v100-sxm3-32gb"] == "V100-32GB-SXM"
    assert resolved["rtx6000ada-pcie-48gb"] == "RTX6000-Ada"
    assert len(resolved) == 16


# --- HTTP path ------------------------------------------------------------------------------------


def test_fetch_sends_the_key_as_a_bearer_header_and_never_records_it() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {SECRET}"
        return httpx.Response(200, json={"data": {"hostnodes": [node()]}})

    with make_client(transport=httpx.MockTransport(handler), secrets=[SECRET]) as client:
        (response,) = tensordock.fetch(client, {"TENSORDOCK_API_KEY": SECRET})
    assert SECRET not in response.url
    assert all(SECRET not in value for value in response.headers.values())
    assert len(list(tensordock.parse([response]))) == 2


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY, secrets=[SECRET]) as client:
        items = list(tensordock.parse(list(tensordock.fetch(client, {"TENSORDOCK_API_KEY": SECRET}))))
    offers = {(o.instance_type, o.region): o for o in items if isinstance(o, Offer)}
    assert len(offers) == 15 and exclusions(items) == {"no_free_gpus": 1}
    rtx4090 = offers[("1x geforcertx4090-pcie-24gb 24GB (tier-1)", "United States")]
    assert (rtx4090.price_per_hour, rtx4090.provider_data["host_offers"]) == (0.468, 2)
    assert rtx4090.provider_data["price_median"] == 0.468 and rtx4090.provider_data["price_max"] == 0.518
    assert rtx4090.provider_data["bundle"] == tensordock.BUNDLE
    h100 = offers[("8x h100-sxm5-80gb 80GB (tier-4)", "Germany")]
    assert h100.price_per_hour == pytest.approx(17.114)
    assert all(o.scope == "market:on_demand" and o.pricing_type == "on_demand" for o in offers.values())
    assert tensordock.shrink_limit == market.SHRINK_LIMIT
    for o in offers.values():
        match = CATALOG.resolve(
            "tensordock", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count
        )
        assert match is not None, o.instance_type
    two = CATALOG.resolve("tensordock", "2x geforcertx4090-pcie-24gb 24GB (tier-1)", None, None, 2.0)
    # the API states no interconnect: PCIe without P2P, as the seed row's notes assume
    assert two is not None and two.intra_node_interconnect == HOST_STAGED
    assert not any(math.isnan(o.price_per_hour) for o in offers.values())


@pytest.fixture
def allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the offline guard for the live smoke test only."""
    monkeypatch.undo()


@pytest.mark.network
@pytest.mark.usefixtures("allow_network")
def test_live_hostnodes_answer() -> None:
    import os

    key = os.environ.get("TENSORDOCK_API_KEY")
    if not key:
        pytest.skip("TENSORDOCK_API_KEY is not set")
    with make_client(secrets=[key]) as client:
        offers = [o for o in tensordock.parse(list(tensordock.fetch(client, {"TENSORDOCK_API_KEY": key})))]
    assert offers
