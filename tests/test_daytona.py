"""Daytona GPU price list: per-GPU on-demand and spot rates; the real sample, replay."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connectors import daytona
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"


def answer(payload: Any) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return RawResponse(
        url=daytona.API_URL, method="GET", status=200, fetched_at=datetime(2026, 12, 1, tzinfo=UTC), body=body
    )


def offers_of(items: list[object]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.pricing_type): o for o in items if isinstance(o, Offer)}


def test_real_gpu_pricing_sample(shared_raw: Path) -> None:
    """dstackai/gpuhunt test literal; PROVENANCE: "not guaranteed verbatim"."""
    body = (shared_raw / "daytona" / "gpu-pricing-sample.json").read_bytes()
    offers = offers_of(list(daytona.parse([answer(body)])))
    assert len(offers) == 16  # 8 GPU types x on-demand + spot
    assert sum(p == "spot" for _, p in offers) == 8
    h100 = offers[("1x H100", "on_demand")]
    assert (h100.price_per_hour, h100.gpu_count, h100.currency, h100.price_source) == (
        3.95,
        1.0,
        "USD",
        "list",
    )
    spot = offers[("1x H100", "spot")]
    assert (spot.price_per_hour, spot.provider_data["spot_kind"]) == (2.27, "published_rate")
    assert spot.provider_data["resources"] == {
        "vcpuPerHour": 0.03,
        "memoryGiBPerHour": 0.0093,
        "diskGiBPerHour": 6.2e-05,
    }
    assert offers[("1x RTX-4090", "spot")].price_per_hour == 0.57
    assert offers[("1x B300", "on_demand")].price_per_hour == 7.1
    assert all(o.problem is None for o in offers.values())
    hardware = HardwareCatalog.load()
    resolved = {
        k: hardware.resolve("daytona", o.instance_type, o.gpu_name_raw, None, 1.0) for k, o in offers.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    assert resolved[("1x MI355X", "spot")].gpu_name == "MI355X"
    assert resolved[("1x RTX-PRO-6000", "on_demand")].gpu_name == "RTX-PRO-6000"


def test_null_spot_means_not_offered_and_a_missing_key_is_flagged() -> None:
    items = list(
        daytona.parse(
            [answer({"gpus": [{"type": "L40S", "onDemandPricePerHour": 1.2, "spotPricePerHour": None}]})]
        )
    )
    assert set(offers_of(items)) == {("1x L40S", "on_demand")}
    assert exclusions(items) == {"no_spot_rate": 1}
    renamed = offers_of(
        list(daytona.parse([answer({"gpus": [{"type": "L40S", "onDemand": 1.2, "spotPricePerHour": 0.7}]})]))
    )
    flagged = renamed[("1x L40S", "on_demand")]
    assert math.isnan(flagged.price_per_hour) and "`onDemandPricePerHour` missing" in (flagged.problem or "")


@pytest.mark.parametrize(
    ("value", "problem"), [(0, "not a positive"), (-1.0, "not a positive"), ("1.2", "not a number")]
)
def test_wrong_prices_are_flagged(value: object, problem: str) -> None:
    offers = offers_of(
        list(
            daytona.parse(
                [answer({"gpus": [{"type": "H100", "onDemandPricePerHour": value, "spotPricePerHour": 2}]})]
            )
        )
    )
    assert problem in (offers[("1x H100", "on_demand")].problem or "")
    assert offers[("1x H100", "spot")].problem is None


@pytest.mark.parametrize("payload", [{"prices": []}, {"gpus": []}, [1]])
def test_missing_or_empty_gpus_is_a_layout_change(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="`gpus`"):
        list(daytona.parse([answer(payload)]))


def test_an_entry_without_type_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="without `type`"):
        list(daytona.parse([answer({"gpus": [{"onDemandPricePerHour": 1}]})]))


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(daytona.fetch(client, {}))
    items = list(daytona.parse(responses))
    offers = offers_of(items)
    assert len(offers) == 7 and exclusions(items) == {"no_spot_rate": 1}
    assert offers[("1x H200", "spot")].price_per_hour == 2.5


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_price_list_has_spot_and_on_demand() -> None:
    with make_client() as client:
        responses = list(daytona.fetch(client, {}))
    offers = [o for o in daytona.parse(responses) if isinstance(o, Offer)]
    assert {o.pricing_type for o in offers} == {"on_demand", "spot"}
