"""Lightning AI accelerator catalog: per-instance on-demand and interruptible rates per cloud, replay.

No capture of the catalog exists (../shared/data/raw has none; OpenComputePrices' lightningai.csv
lost its GPU names, PROVENANCE.md): the parser is tested on our own bodies in the catalog's
structure as Lightning's own cost-estimation skill documents it (tests/fixtures/README.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connectors import lightning
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures" / "lightning"


def answer(payload: Any, cloud: str = "MACHINE") -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return RawResponse(
        url=lightning.url_for(cloud),
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 2, tzinfo=UTC),
        body=body,
    )


def machine(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "slugMultiCloud": "lit-h100-80gb-8",
        "family": "H100",
        "acceleratorType": "GPU",
        "enabled": True,
        "cost": 36,
        "spotPrice": 20.5,
        "resources": {"gpu": 8, "gpuType": "nvidia-h100-80gb", "cpu": 208, "memoryMb": "1843200"},
    }
    return base | fields


def offers_of(items: Sequence[object]) -> dict[tuple[str, str, str], Offer]:
    return {(o.region, o.instance_type, o.pricing_type): o for o in items if isinstance(o, Offer)}


def fixture_items() -> list[object]:
    items: list[object] = []
    for cloud in lightning.CLOUDS:
        path = FIXTURES / f"accelerators-{cloud.lower().replace('_', '-')}__2026-12-02.json"
        items += lightning.parse([answer(path.read_bytes(), cloud)])
    return items


def test_a_machine_is_priced_per_instance_on_demand_and_interruptible() -> None:
    offers = offers_of(list(lightning.parse([answer({"accelerator": [machine()]})])))
    on_demand = offers[("lightning-cloud", "lit-h100-80gb-8", "on_demand")]
    # `cost` is the whole 8-GPU machine's hourly rate, not a per-GPU one
    assert (on_demand.price_per_hour, on_demand.gpu_count, on_demand.currency) == (36.0, 8.0, "USD")
    assert (on_demand.gpu_memory_gb_raw, on_demand.vcpus, on_demand.ram_gb) == (80.0, 208.0, 1800.0)
    assert (on_demand.billing_unit, on_demand.price_source, on_demand.scope) == (
        "second",
        "list",
        "on_demand:lightning-cloud",
    )
    spot = offers[("lightning-cloud", "lit-h100-80gb-8", "spot")]
    assert (spot.price_per_hour, spot.price_source, spot.scope) == (20.5, "list", "spot:lightning-cloud")


def test_fixture_catalogs_of_every_cloud() -> None:
    items = fixture_items()
    offers = offers_of(items)
    assert len(offers) == 25
    assert exclusions(items) == {"not_a_gpu": 2, "no_spot_rate": 7, "dws_only": 1, "disabled": 1}
    assert {region for region, _, _ in offers} == set(lightning.CLOUDS.values())
    aws = offers[("aws", "lit-h100-80gb-8", "on_demand")]
    assert (aws.price_per_hour, aws.provider_data["instance_id"]) == (78.8, "p5.48xlarge")
    h200 = offers[("lightning-cloud", "lit-h200-141gb-8", "on_demand")]
    assert h200.available is False and h200.provider_data["available_in_seconds"] == "86400"
    assert ("lightning-cloud", "lit-h200-141gb-8", "spot") not in offers  # spotPrice 0: none
    b200 = offers[("lightning-cloud", "lit-b200-8", "on_demand")]
    assert b200.gpu_memory_gb_raw is None and b200.provider_data["tier_restricted"] is True
    assert all(o.problem is None for o in offers.values())


def test_every_fixture_machine_resolves_to_a_canonical_gpu() -> None:
    hardware = HardwareCatalog.load()
    resolved = {
        k: hardware.resolve("lightning", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in offers_of(fixture_items()).items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    names = {k[1]: m.gpu_name for k, m in resolved.items() if m is not None}
    assert names["lit-l40s-1"] == "L40S" and names["lit-l4-1"] == "L4"  # l4 is no prefix of l40s
    assert names["lit-rtxp-6000-1"] == "RTX-PRO-6000" and names["lit-a10g-1"] == "A10G"
    single = resolved[("lightning-cloud", "lit-h100-80gb-1", "on_demand")]
    assert single is not None and single.intra_node_interconnect == "none"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [({"cost": 0}, "not a positive"), ({"cost": "36"}, "not a number"), ({"cost": -1}, "not a positive")],
)
def test_wrong_on_demand_prices_are_flagged(fields: dict[str, Any], problem: str) -> None:
    offers = offers_of(list(lightning.parse([answer({"accelerator": [machine(**fields)]})])))
    assert problem in (offers[("lightning-cloud", "lit-h100-80gb-8", "on_demand")].problem or "")
    assert offers[("lightning-cloud", "lit-h100-80gb-8", "spot")].problem is None


def test_a_missing_cost_is_flagged_but_a_missing_spot_price_is_no_spot() -> None:
    entry = machine()
    del entry["cost"], entry["spotPrice"]
    items = list(lightning.parse([answer({"accelerator": [entry]})]))
    flagged = offers_of(items)[("lightning-cloud", "lit-h100-80gb-8", "on_demand")]
    assert math.isnan(flagged.price_per_hour) and flagged.problem == "`cost` missing"
    assert exclusions(items) == {"no_spot_rate": 1}


def test_sides_not_sold_and_machines_that_are_not_gpus_are_excluded() -> None:
    catalog = [
        machine(nonSpot=True),
        machine(slugMultiCloud="cpu-4", acceleratorType="CPU", resources={"gpu": 0, "cpu": 4}),
        machine(slugMultiCloud="lit-tpu", acceleratorType="TPU", resources={"cpu": 180}),
        machine(slugMultiCloud="lit-h100-80gb-1", enabled=False),
    ]
    items = list(lightning.parse([answer({"accelerator": catalog}, "GCP")]))
    assert set(offers_of(items)) == {("gcp", "lit-h100-80gb-8", "on_demand")}
    assert exclusions(items) == {"no_spot": 1, "not_a_gpu": 2, "disabled": 1}


@pytest.mark.parametrize("payload", [{"machines": []}, {"accelerator": []}, [1]])
def test_missing_or_empty_catalog_is_a_layout_change(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="`accelerator`"):
        list(lightning.parse([answer(payload)]))


def test_a_gpu_machine_without_a_slug_is_a_layout_change() -> None:
    entry = machine()
    del entry["slugMultiCloud"]
    with pytest.raises(LayoutChanged, match="no slug"):
        list(lightning.parse([answer({"accelerator": [entry]})]))


def test_region_is_the_cloud_the_url_asks_for() -> None:
    assert lightning.region_of(lightning.url_for("VOLTAGE_PARK")) == "voltagepark"
    assert lightning.region_of(lightning.url_for("NEW_CLOUD")) == "new-cloud"
    with pytest.raises(LayoutChanged, match="cloudProvider"):
        lightning.region_of(lightning.API_URL)


def test_vram_and_counts_read_as_the_catalog_sends_them() -> None:
    assert lightning.vram_gb("nvidia-h200-141gb") == 141.0
    assert lightning.vram_gb("nvidia-b200") is None
    entry = machine(resources={"gpu": "8", "gpuType": "nvidia-h100-80gb", "memoryMb": "bad"})
    offer = offers_of(list(lightning.parse([answer({"accelerator": [entry]})])))[
        ("lightning-cloud", "lit-h100-80gb-8", "on_demand")
    ]
    assert (offer.gpu_count, offer.ram_gb, offer.vcpus) == (8.0, None, None)


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(lightning.fetch(client, {}))
    assert len(responses) == len(lightning.CLOUDS)
    assert len(offers_of(list(lightning.parse(responses)))) == 25


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_catalog_prices_gpu_machines() -> None:
    with make_client() as client:
        responses = list(lightning.fetch(client, {}))
    offers = [o for o in lightning.parse(responses) if isinstance(o, Offer)]
    assert any(o.region == "lightning-cloud" and o.problem is None for o in offers)
