"""Thunder Compute /v1/pricing: `<gpu>_x<n>_<mode>` keys, production vs prototyping, add-on rates."""

from __future__ import annotations

import csv
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connectors import thundercompute
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "thundercompute" / "pricing__2026-12-01.json"
DERIVED = "thundercompute/opencomputeprices-thundercompute-2026-03-22.csv"
CATALOG = HardwareCatalog.load()


def answer(payload: Any) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return RawResponse(
        url=thundercompute.API_URL,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=body,
    )


def fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def offers(items: list[Any]) -> dict[str, Offer]:
    return {o.instance_type: o for o in items if isinstance(o, Offer)}


def test_every_configuration_is_one_offer_priced_per_instance() -> None:
    items = list(thundercompute.parse([answer(fixture())]))
    found = offers(items)
    assert len(found) == 13
    h100 = found["h100_x8_production"]
    assert (h100.price_per_hour, h100.gpu_count, h100.gpu_name_raw) == (16.4, 8.0, "h100")
    assert (h100.currency, h100.region, h100.billing_unit) == ("USD", "global", "minute")
    assert h100.price_source == "list"
    assert found["a6000_x1_prototyping"].price_per_hour == 0.3
    assert all(o.problem is None for o in found.values())
    # the three extras are rates, not offers, and travel with every offer
    assert exclusions(items) == {"add_on_rate": 3}
    assert h100.provider_data["add_on_rates"] == {
        "additional_vcpus": 0.03,
        "disk_gb": 0.0001,
        "ephemeral_disk_gb": 0.0002,
    }


def test_production_is_on_demand_and_prototyping_is_interruptible_at_a_list_price() -> None:
    found = offers(list(thundercompute.parse([answer(fixture())])))
    production, prototyping = found["a100xl_x1_production"], found["a100xl_x1_prototyping"]
    assert (production.pricing_type, production.scope) == ("on_demand", "pricing:production")
    assert (prototyping.pricing_type, prototyping.price_source, prototyping.scope) == (
        "spot",
        "list",
        "pricing:prototyping",
    )
    assert "interrupted" in prototyping.provider_data["interruptible"]
    assert "interruptible" not in production.provider_data


def test_an_unknown_mode_lands_as_on_demand_and_says_so() -> None:
    found = offers(list(thundercompute.parse([answer({"pricing": {"h100_x1_burst": 1.9}})])))
    burst = found["h100_x1_burst"]
    assert (burst.pricing_type, burst.provider_data["mode_known"], burst.scope) == (
        "on_demand",
        False,
        "pricing:burst",
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [(0, "is not positive"), (-1.4, "is not positive"), ("n/a", "is not a number"), (None, "missing")],
)
def test_wrong_prices_are_flagged_not_dropped(value: object, problem: str) -> None:
    found = offers(list(thundercompute.parse([answer({"pricing": {"h100_x1_production": value}})])))
    assert problem in (found["h100_x1_production"].problem or "")


def test_an_unreadable_price_is_nan() -> None:
    found = offers(list(thundercompute.parse([answer({"pricing": {"h100_x1_production": "n/a"}})])))
    assert math.isnan(found["h100_x1_production"].price_per_hour)


def test_an_unknown_key_is_counted_with_its_name() -> None:
    payload = {"pricing": {"h100_x1_production": 2.0, "gpu_hours_promo": 0.5}}
    items = list(thundercompute.parse([answer(payload)]))
    left = [i for i in items if not isinstance(i, Offer)]
    assert exclusions(items) == {"unknown_key": 1}
    assert "gpu_hours_promo" in left[0].detail  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"prices": {"h100_x1_production": 2.0}}, "`pricing` object missing"),
        ({"pricing": {"disk_gb": 0.0001}}, "no `<gpu>_x<n>_<mode>` key"),
        ({"pricing": {}}, "no `<gpu>_x<n>_<mode>` key"),
        ([1, 2], "`pricing` object missing"),
    ],
)
def test_another_shape_raises_naming_what_is_missing(payload: Any, message: str) -> None:
    with pytest.raises(LayoutChanged, match=message):
        list(thundercompute.parse([answer(payload)]))


def test_config_reads_the_key() -> None:
    assert thundercompute.config("h100_x8_production") == ("h100", 8, "production")
    assert thundercompute.config("Zeta Z9_x2_Prototyping") == ("Zeta Z9", 2, "prototyping")
    assert thundercompute.config("h100_x0_production") is None
    assert thundercompute.config("additional_vcpus") is None


def test_every_offer_maps_to_a_gpu_with_its_interconnect() -> None:
    found = offers(list(thundercompute.parse([answer(fixture())])))
    resolved = {
        k: CATALOG.resolve("thundercompute", k, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in found.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    assert {m.gpu_name for m in resolved.values() if m} == {"RTXA6000", "A100-80GB-PCIe", "H100-PCIe"}
    h100 = resolved["h100_x8_production"]
    assert h100 is not None and (h100.gpu_count, h100.intra_node_interconnect) == (8.0, "PCIe")


def test_derived_rows_name_the_same_gpus(shared_raw: Path) -> None:
    """OpenComputePrices' 2026-03-22 rows (derived from the pricing page) are a cross-check
    only: their GPUs (RTX A6000, A100 80GB, H100 PCIe) must be the ones our keys resolve to, and
    their prices sit in the same range as per-instance 1-GPU rates."""
    with (shared_raw / DERIVED).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    derived = {(r["gpu_name"], r["gpu_variant"], r["gpu_memory_gb"]) for r in rows}
    assert derived == {("RTX A6000", "", "48"), ("A100", "", "80"), ("H100", "PCIe", "80")}
    # the page says PCIe for the H100: the seeds agree (bare "H100" would be the SXM default)
    h100 = CATALOG.resolve("thundercompute", "h100_x1_prototyping", "h100", None, 1)
    assert h100 is not None and h100.gpu_name == "H100-PCIe"
    a6000 = CATALOG.resolve("thundercompute", "a6000_x1_prototyping", "a6000", None, 1)
    assert a6000 is not None and a6000.vram_gb == 48.0
    assert all(0 < float(r["price_per_hour"]) < 5 for r in rows)


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        found = offers(list(thundercompute.parse(list(thundercompute.fetch(client, {})))))
    assert len(found) == 13
    assert found["h100_x1_production"].price_per_hour == 2.05


@pytest.mark.network
def test_live_pricing_endpoint() -> None:
    with make_client() as client:
        found = offers(list(thundercompute.parse(list(thundercompute.fetch(client, {})))))
    assert any(o.pricing_type == "on_demand" for o in found.values())
    assert all(o.problem is None for o in found.values())


@pytest.mark.parametrize(
    ("key", "raw", "gpu", "source"),
    [
        # the H100's PCIe form factor is the seeds' row for Thunder's h100 family
        ("h100_x1_production", "h100", "H100-PCIe", "instance_type"),
        # nothing Thunder publishes says SXM or PCIe for the A100: listed in variants_unstated.csv
        ("a100xl_x2_production", "a100xl", "A100-80GB-PCIe", "seed_default"),
        ("a6000_x1_prototyping", "a6000", "RTXA6000", "only_variant"),
    ],
)
def test_variant_source_says_how_the_form_factor_was_known(key: str, raw: str, gpu: str, source: str) -> None:
    match = CATALOG.resolve("thundercompute", key, raw, None, 1)
    assert match is not None and (match.gpu_name, match.variant_source) == (gpu, source)
