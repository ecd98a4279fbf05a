"""Akash Console gpu-prices: model rows, the statistic, layout changes, replay; derived cross-check."""

from __future__ import annotations

import csv
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import akash, market
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
DERIVED = "akash/opencomputeprices-akash-2026-03-22.csv"
CATALOG = HardwareCatalog.load()


def answer(payload: Any) -> RawResponse:
    return RawResponse(
        url=akash.API_URL,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def model(**overrides: Any) -> dict[str, Any]:
    base = {
        "vendor": "nvidia",
        "model": "h100",
        "ram": "80Gi",
        "interface": "SXM5",
        "availability": {"total": 64, "available": 24},
        "providerAvailability": {"total": 2, "available": 2},
        "price": {"currency": "USD", "min": 1.2, "max": 2.07, "avg": 1.64, "weightedAverage": 1.53},
    }
    return base | overrides


@pytest.mark.parametrize(
    ("ram", "gb"), [("80Gi", 80.0), ("141Gi", 141.0), ("96G", 96.0), ("24", 24.0), (24, 24.0), ("big", None)]
)
def test_memory_gb(ram: object, gb: float | None) -> None:
    assert akash.memory_gb(ram) == gb


def test_a_model_is_one_gpu_priced_at_its_weighted_average() -> None:
    offer = akash.model_offer(model())
    assert isinstance(offer, Offer)
    assert offer.key == ("akash", "h100 80Gi SXM5", "global", None, "on_demand")
    assert (offer.price_per_hour, offer.gpu_count, offer.gpu_memory_gb_raw) == (1.53, 1.0, 80.0)
    assert (offer.price_source, offer.scope, offer.available) == ("market", "market:on_demand", True)
    data = offer.provider_data
    assert data["price_statistic"] == "weighted_average"
    assert (data["price_min"], data["price_max"], data["price_avg"], data["price_median"]) == (
        1.2,
        2.07,
        1.64,
        None,
    )
    assert (data["gpus_available"], data["providers_total"]) == (24, 2)


def test_null_price_is_excluded_and_a_missing_statistic_is_a_problem() -> None:
    assert akash.model_offer(model(price=None)) == Excluded("no_price", "h100 80Gi SXM5")
    offer = akash.model_offer(model(price={"currency": "USD", "min": 1.2}))
    assert isinstance(offer, Offer) and math.isnan(offer.price_per_hour)
    assert offer.problem == "`price.weightedAverage` missing"
    no_key = {k: v for k, v in model().items() if k != "price"}
    assert akash.model_offer(no_key).problem == "`price` missing"  # type: ignore[union-attr]


@pytest.mark.parametrize("value", [0, -0.5, "1.5"])
def test_a_wrong_statistic_is_flagged(value: object) -> None:
    offer = akash.model_offer(model(price={"currency": "USD", "weightedAverage": value}))
    assert isinstance(offer, Offer) and offer.problem is not None


def test_a_zero_min_is_kept_as_stated_and_does_not_set_the_price() -> None:
    offer = akash.model_offer(model(price={"currency": "USD", "min": 0, "weightedAverage": 0.3}))
    assert isinstance(offer, Offer) and offer.problem is None
    assert (offer.price_per_hour, offer.provider_data["price_min"]) == (0.3, 0.0)


@pytest.mark.parametrize(
    ("payload", "label"),
    [
        ({"models": []}, "`models` is empty"),
        ({"gpus": []}, "`models` list missing"),
        ([], "`models` list missing"),
    ],
)
def test_missing_or_empty_models_is_a_layout_change(payload: Any, label: str) -> None:
    with pytest.raises(LayoutChanged, match=label):
        list(akash.parse([answer(payload)]))


def test_a_row_without_model_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="`model`"):
        list(akash.parse([answer({"models": [model(model=None)]})]))


# --- cross-check with the derived OpenComputePrices rows (not parser input) ------------------------


def test_derived_akash_models_resolve_and_their_prices_match_our_reading(shared_raw: Path) -> None:
    with (shared_raw / DERIVED).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    tiers: dict[tuple[str, str, str], dict[str, float]] = {}
    for row in rows:
        # OCP's instance_type is "<model>_<interface>_<tier>"
        gpu, interface, tier = row["instance_type"].rsplit("_", 2)
        tiers.setdefault((gpu, row["gpu_memory_gb"], interface), {})[tier] = float(row["price_per_hour"])
    assert len(tiers) == 14
    for (gpu, memory, interface), prices in tiers.items():
        offer = akash.model_offer(
            model(
                model=gpu,
                ram=f"{memory}Gi",
                interface=interface,
                price={"currency": "USD", **{k: v for k, v in prices.items()}},
            )
        )
        assert isinstance(offer, Offer)
        match = CATALOG.resolve(
            "akash", offer.instance_type, offer.gpu_name_raw, offer.gpu_memory_gb_raw, 1.0
        )
        assert match is not None, offer.instance_type
        assert offer.price_per_hour == prices["weightedAverage"]
    assert tiers[("h100", "80", "SXM5")] == {"min": 1.2, "max": 2.07, "avg": 1.64, "weightedAverage": 1.53}
    assert tiers[("rtx4090", "24", "PCIe")]["weightedAverage"] == 0.35
    assert "min" not in tiers[("rtx4060ti", "16", "PCIe")]  # OCP dropped a min it could not use


# --- HTTP path ------------------------------------------------------------------------------------


def test_fetch_sends_a_plain_get() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert (request.method, str(request.url)) == ("GET", akash.API_URL)
        return httpx.Response(200, json={"models": [model()]})

    with make_client(transport=httpx.MockTransport(handler)) as client:
        assert len(list(akash.parse(list(akash.fetch(client, {}))))) == 1


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        items = list(akash.parse(list(akash.fetch(client, {}))))
    offers = {o.instance_type: o for o in items if isinstance(o, Offer)}
    assert len(offers) == 9 and exclusions(items) == {"no_price": 1}
    assert offers["h100 80Gi SXM5"].price_per_hour == 1.61
    assert offers["rtx4090 24Gi PCIe"].provider_data["price_min"] == 0.0
    assert offers["rtx5090 32Gi PCIe"].available is False
    names = {
        k: CATALOG.resolve("akash", k, o.gpu_name_raw, o.gpu_memory_gb_raw, 1.0).gpu_name  # type: ignore[union-attr]
        for k, o in offers.items()
    }
    assert names["a100 80Gi PCIe"] == "A100-80GB-PCIe" and names["a100 80Gi SXM4"] == "A100-80GB-SXM"
    assert names["pro6000se 96Gi PCIe"] == "RTX-PRO-6000-SE" and names["h200 141Gi SXM5"] == "H200-SXM"
    assert akash.shrink_limit == market.SHRINK_LIMIT


@pytest.fixture
def allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the offline guard for the live smoke test only."""
    monkeypatch.undo()


@pytest.mark.network
@pytest.mark.usefixtures("allow_network")
def test_live_gpu_prices_answer() -> None:
    with make_client() as client:
        offers = [o for o in akash.parse(list(akash.fetch(client, {}))) if isinstance(o, Offer)]
    assert offers and all(o.provider_data["price_statistic"] == "weighted_average" for o in offers)
