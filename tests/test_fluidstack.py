"""Fluidstack pricing page: the real January 2025 capture, helpers, layout changes, replay."""

from __future__ import annotations

import csv
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connectors import fluidstack, pages
from connectors.base import LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
CAPTURE = "fluidstack/pricing-page-excerpt-wayback-20250109.html"


def page(body: bytes, status: int = 200) -> RawResponse:
    return RawResponse(
        url=fluidstack.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=body,
    )


def offers_of(items: list[Any]) -> dict[str, Offer]:
    return {o.instance_type: o for o in items if isinstance(o, Offer)}


def table(header: str = "On-Demand Price (/hr)", price: str = "$2.89") -> bytes:
    return (
        "<table><thead><tr><th><p>Model</p></th><th><p>VRAM (GB)</p></th><th><p>Max vCPUs per GPU</p></th>"
        f"<th><p>{header}</p></th>"
        f"<th><p>1 Year price (/hr)</p></th></tr></thead><tbody><tr><th><h2>Nvidia H100 PCIe</h2></th>"
        f"<td><p>80</p></td><td><p>48</p></td><td><p>{price}</p></td><td><p>$2.05</p></td></tr></tbody></table>"
    ).encode()


@pytest.mark.parametrize(
    ("cell", "unit", "price", "problem"),
    [
        ("$2.89", "hour", 2.89, None),
        ("$2.89<br/>", "hour", 2.89, None),
        ("$0.05/min", None, 3.0, None),
        ("$2.89", None, math.nan, "no time unit stated"),
        ("2.89", "hour", math.nan, "no currency stated"),
        ("-$1.00", "hour", -1.0, "not a positive price"),
        ("ask", "hour", math.nan, "not a price"),
    ],
)
def test_gpu_hour_price(cell: str, unit: str | None, price: float, problem: str | None) -> None:
    # the header states the unit ("On-Demand Price (/hr)") or not; a row is one GPU
    header = "On-Demand Price (/hr)" if unit == "hour" else "On-Demand Price"
    table = pages.Table(("Model", header), (("Nvidia H100", pages.clean(cell.replace("<br/>", ""))),), "t")
    stated = pages.Stated(per_gpu=True, source="a test row of one GPU")
    amount, _, issue, _ = fluidstack.gpu_hour_price(table.read()[0], stated)
    assert (math.isnan(amount) and math.isnan(price)) or amount == pytest.approx(price)
    assert (issue is None) == (problem is None) and (problem is None or problem in issue)


def test_real_capture(shared_raw: Path) -> None:
    items = list(fluidstack.parse([page((shared_raw / CAPTURE).read_bytes())]))
    offers = offers_of(items)
    assert list(offers) == [
        "Nvidia H100 PCIe",
        "Nvidia A100 80GB PCIe",
        "Nvidia A100 40GB PCIe",
        "Nvidia L40",
    ]
    h100 = offers["Nvidia H100 PCIe"]
    assert (h100.price_per_hour, h100.currency, h100.gpu_count, h100.gpu_memory_gb_raw) == (
        2.89,
        "USD",
        1.0,
        80.0,
    )
    assert (h100.vcpus, h100.ram_gb, h100.pricing_type, h100.price_source) == (
        48.0,
        256.0,
        "on_demand",
        "list",
    )
    assert offers["Nvidia A100 40GB PCIe"].price_per_hour == 1.65
    assert (offers["Nvidia L40"].price_per_hour, offers["Nvidia L40"].ram_gb) == (1.25, 48.0)
    # the 1-year column is a commitment, never on-demand; the H200 is sold reserved only
    assert exclusions(items) == {"reserved_1_year": 5, "no_on_demand_price": 1}
    assert not any(o.problem for o in offers.values()) and {o.scope for o in offers.values()} == {
        "pricing:on_demand"
    }
    assert not any(o.pricing_type == "spot" for o in offers.values())


def test_real_capture_maps_to_canonical_gpus(shared_raw: Path) -> None:
    catalog = HardwareCatalog.load()
    offers = offers_of(list(fluidstack.parse([page((shared_raw / CAPTURE).read_bytes())])))
    names = {
        key: catalog.resolve("fluidstack", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for key, o in offers.items()
    }
    assert {k: m.gpu_name if m else None for k, m in names.items()} == {
        "Nvidia H100 PCIe": "H100-PCIe",
        "Nvidia A100 80GB PCIe": "A100-80GB-PCIe",
        "Nvidia A100 40GB PCIe": "A100-40GB-PCIe",
        "Nvidia L40": "L40",
    }


def test_skypilot_catalog_is_a_different_offer_not_a_contradiction(shared_raw: Path) -> None:
    """Cross-check only (derived rows): SkyPilot's one Fluidstack row is an 8x H100 SXM (NVLink)
    node at $23.92 = $2.99/GPU-h in FINLAND; the 2025 page lists the H100 PCIe at $2.89."""
    with (shared_raw / "skypilot-catalog" / "v9" / "fluidstack-vms.csv").open(newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["AcceleratorName"], row["AcceleratorCount"], float(row["Price"])) == (
        "H100-NVLINK",
        "8",
        23.92,
    )
    offers = offers_of(list(fluidstack.parse([page((shared_raw / CAPTURE).read_bytes())])))
    assert float(row["Price"]) / 8 != offers["Nvidia H100 PCIe"].price_per_hour


def test_a_renamed_on_demand_header_raises_layout_changed() -> None:
    with pytest.raises(LayoutChanged, match="On-Demand Price"):
        list(fluidstack.parse([page(table(header="Hourly"))]))


def test_a_removed_table_raises_layout_changed() -> None:
    with pytest.raises(LayoutChanged, match="Model, On-Demand Price"):
        list(fluidstack.parse([page(b"<html><body><h1>Talk to us</h1></body></html>")]))


def test_a_wrong_cell_is_a_flagged_offer_and_contact_is_excluded() -> None:
    offers = offers_of(list(fluidstack.parse([page(table(price="$0"))])))
    assert offers["Nvidia H100 PCIe"].problem == "price 0.0 is not a positive price"
    items = list(fluidstack.parse([page(table(price="Contact sales"))]))
    assert not offers_of(items) and exclusions(items) == {"contact_sales": 1, "reserved_1_year": 1}


def test_not_modified_keeps_the_scope() -> None:
    (item,) = fluidstack.parse([page(b"", status=304)])
    assert isinstance(item, Unchanged) and item.scope == {"scope": "pricing:on_demand"}


def test_replay_cassette_fetches_and_parses() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(fluidstack.fetch(client, {}, None))
    items = list(fluidstack.parse(responses))
    offers = offers_of(items)
    assert set(offers) == {"Nvidia H200", "Nvidia H100 SXM", "Nvidia A100 80GB PCIe"}
    assert offers["Nvidia H100 SXM"].price_per_hour == 2.69
    assert exclusions(items) == {"reserved_1_year": 4, "no_on_demand_price": 1}


@pytest.mark.network
def test_live_pricing_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # this test exists to talk to fluidstack.io
    assert "PYTEST_CURRENT_TEST" in os.environ
    with make_client() as client:
        responses = list(fluidstack.fetch(client, {}, None))
    offers = [o for o in fluidstack.parse(responses) if isinstance(o, Offer)]
    assert offers and not [o for o in offers if o.problem]
