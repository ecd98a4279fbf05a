"""Hyperstack GPU pricing page: the real 2026 capture, flavor sizes, SkyPilot cross-check, replay."""

from __future__ import annotations

import csv
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors import hyperstack
from connectors.base import LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "hyperstack" / "gpu-pricing__2026-12-01.html"
CAPTURE = "gpu-pricing-page-excerpt-2026.html"


def response(body: bytes, status: int = 200) -> RawResponse:
    return RawResponse(
        url=hyperstack.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=body,
    )


def items(body: bytes) -> list[object]:
    return list(hyperstack.parse([response(body)]))


def by_key(found: list[object]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.pricing_type): o for o in found if isinstance(o, Offer)}


@pytest.fixture(scope="module")
def capture(shared_raw: Path) -> list[object]:
    return items((shared_raw / "hyperstack" / CAPTURE).read_bytes())


# --- helpers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "counts", "basis"),
    [
        ("NVIDIA H100", (1, 2, 4, 8), "documented"),
        ("NVIDIA H100 NVLink", (8,), "documented"),
        ("NVIDIA H100 SXM", (8,), "documented"),
        ("NVIDIA A4000", (1, 2, 4, 8, 10), "documented"),
        ("NVIDIA H200 SXM", (8,), "assumed"),
        ("NVIDIA B300", (8,), "assumed"),
        ("NVIDIA RTX Pro 6000 SE", (1, 2, 4, 8), "assumed"),
        ("Zeta Z9", (1, 2, 4, 8), "assumed"),
    ],
)
def test_gpu_counts(label: str, counts: tuple[int, ...], basis: str) -> None:
    assert hyperstack.gpu_counts(label) == (counts, basis)


# --- the real capture ------------------------------------------------------------------------------


def test_capture_on_demand_rows(capture: list[object]) -> None:
    offers = by_key(capture)
    on_demand = [o for o in offers.values() if o.pricing_type == "on_demand"]
    assert len({o.gpu_name_raw for o in on_demand}) == 13  # the card's 13 rows
    assert len(on_demand) == 32  # each row times its flavor sizes
    b300 = offers[("8x NVIDIA B300", "on_demand")]
    assert (b300.price_per_hour, b300.gpu_count, b300.gpu_memory_gb_raw) == (59.2, 8.0, 288.0)
    assert b300.provider_data["price_per_gpu_hour"] == 7.40
    assert offers[("8x NVIDIA B200", "on_demand")].provider_data["price_per_gpu_hour"] == 6.00
    assert offers[("8x NVIDIA H200 SXM", "on_demand")].price_per_hour == pytest.approx(8 * 3.99)
    assert offers[("8x NVIDIA H100 SXM", "on_demand")].price_per_hour == pytest.approx(25.60)
    a4000 = offers[("10x NVIDIA A4000", "on_demand")]
    assert a4000.price_per_hour == pytest.approx(1.50) and a4000.gpu_memory_gb_raw == 16
    one_h100 = offers[("1x NVIDIA H100", "on_demand")]
    assert (one_h100.price_per_hour, one_h100.billing_unit, one_h100.region) == (2.50, "minute", "global")
    assert (
        one_h100.provider_data["max_pcpus_per_gpu"] == 28
        and one_h100.provider_data["max_ram_gb_per_gpu"] == 180
    )
    # "&nbsp;$1.40": the leading no-break space is cleaned
    assert offers[("8x NVIDIA A100 NVLink", "on_demand")].provider_data["price_per_gpu_hour"] == 1.40
    assert all(o.scope == "on_demand:global" and o.price_source == "list" for o in on_demand)
    assert not any(o.problem for o in offers.values())


def test_capture_spot_rows(capture: list[object]) -> None:
    spot = {k: o for k, o in by_key(capture).items() if k[1] == "spot"}
    # issue 18: one offer per listed row (the per-GPU rate as 1 GPU), no flavor sizes the page
    # does not list for spot
    assert len({o.gpu_name_raw for o in spot.values()}) == 5 and len(spot) == 5
    assert spot[("1x NVIDIA H100 PCIe", "spot")].price_per_hour == 2.00
    assert spot[("1x NVIDIA RTX Pro 6000 SE", "spot")].price_per_hour == 1.48
    assert spot[("1x NVIDIA A100", "spot")].price_per_hour == 1.08
    assert spot[("1x NVIDIA L40", "spot")].price_per_hour == 0.80  # " $0.80": leading space
    assert spot[("1x NVIDIA A6000", "spot")].provider_data["gpu_counts_basis"].startswith("listed")
    assert ("8x NVIDIA RTX Pro 6000 SE", "spot") not in spot and ("4x NVIDIA A6000", "spot") not in spot


def test_reservation_rows_are_excluded(capture: list[object]) -> None:
    assert exclusions(capture) == {"reserved pricing (a term commitment, not on-demand)": 12}


def test_every_capture_gpu_resolves_with_interconnect(capture: list[object]) -> None:
    catalog = HardwareCatalog.load()
    matches = {
        o.instance_type: catalog.resolve(
            o.provider, o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count
        )
        for o in capture
        if isinstance(o, Offer)
    }
    assert [k for k, m in matches.items() if m is None] == []
    assert matches["8x NVIDIA H100"].gpu_name == "H100-PCIe"
    assert matches["8x NVIDIA H100 NVLink"].gpu_name == "H100-PCIe"
    assert matches["8x NVIDIA H100 NVLink"].intra_node_interconnect == "NVLink bridge"
    assert matches["8x NVIDIA H100 SXM"].intra_node_interconnect == "NVSwitch"
    assert matches["1x NVIDIA A100"].gpu_name == "A100-80GB-PCIe"
    assert matches["8x NVIDIA A100 SXM"].gpu_name == "A100-80GB-SXM"
    assert matches["1x NVIDIA H100 PCIe"].gpu_name == "H100-PCIe"
    assert matches["8x NVIDIA RTX Pro 6000 SE"].gpu_name == "RTX-PRO-6000-SE"
    assert matches["1x NVIDIA L40"].intra_node_interconnect == "none"
    # without the instance-type rows the provider-scoped aliases still say PCIe, not SXM
    assert catalog.resolve("hyperstack", "", "NVIDIA H100", 80).gpu_name == "H100-PCIe"
    assert catalog.resolve("hyperstack", "", "NVIDIA A100", 80).gpu_name == "A100-80GB-PCIe"


# SkyPilot v8 flavor -> (page GPU label, count); the catalog came from the infrahub API (derived)
SKYPILOT_FLAVORS = {
    "n3-A100x": "NVIDIA A100",
    "n3-A100x8-NVLink": "NVIDIA A100 NVLink",
    "n3-H100x": "NVIDIA H100",
    "n3-H100x8-NVLink": "NVIDIA H100 NVLink",
    "n3-H100-SXM5x8": "NVIDIA H100 SXM",
    "n3-L40x": "NVIDIA L40",
    "n3-RTX-A4000x": "NVIDIA A4000",
    "n3-RTX-A6000x": "NVIDIA A6000",
}


def _page_label(flavor: str) -> str:
    if flavor in SKYPILOT_FLAVORS:
        return SKYPILOT_FLAVORS[flavor]
    return SKYPILOT_FLAVORS[flavor.rstrip("0123456789")]


def test_skypilot_v8_cross_check(shared_raw: Path, capture: list[object]) -> None:
    """Derived rows, cross-check only: every v8 flavor size is one we emit; list the price moves."""
    offers = by_key(capture)
    with (shared_raw / "skypilot-catalog" / "v8" / "hyperstack-vms.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 25
    disagreements = {}
    for row in rows:
        key = (f"{row['AcceleratorCount']}x {_page_label(row['InstanceType'])}", "on_demand")
        assert key in offers, key  # same flavor sizes
        ours, theirs = offers[key].price_per_hour, float(row["Price"])
        if not math.isclose(ours, theirs, abs_tol=1e-6):
            disagreements[key[0]] = (theirs, ours)
    # the older catalog's H100 PCIe was $1.90/GPU (page: $2.50), H100 NVLink $1.95 ($2.60),
    # H100 SXM5 $2.40 ($3.20), A100 NVLink $1.40 (same); A100, L40, A4000, A6000 agree
    assert disagreements == {
        "1x NVIDIA H100": (1.9, 2.5),
        "2x NVIDIA H100": (3.8, 5.0),
        "4x NVIDIA H100": (7.6, 10.0),
        "8x NVIDIA H100": (15.2, 20.0),
        "8x NVIDIA H100 NVLink": (15.6, 20.8),
        "8x NVIDIA H100 SXM": (19.2, 25.6),
    }


# --- layout changes ------------------------------------------------------------------------------------


def test_renamed_price_header_is_a_layout_change() -> None:
    body = FIXTURE.read_bytes().replace(b"Pricing Per Hour", b"Hourly Rate")
    with pytest.raises(LayoutChanged, match="Pricing Per Hour"):
        items(body)


def test_removed_spot_card_is_a_layout_change() -> None:
    body = FIXTURE.read_bytes().replace(b"<span>Spot VM</span> Pricing", b"<span>Burst</span> Offers")
    with pytest.raises(LayoutChanged, match="Spot VM Pricing"):
        items(body)


def test_a_missing_reservation_card_loses_no_price() -> None:
    body = FIXTURE.read_bytes().replace(b"<span>Reservation</span> Pricing", b"<span>Commit</span> Plans")
    found = items(body)
    assert exclusions(found) == {} and len(by_key(found)) == 22


# --- fixture, wrong rows, replay ------------------------------------------------------------------------


def test_fixture_offers() -> None:
    found = items(FIXTURE.read_bytes())
    offers = by_key(found)
    assert len(offers) == 22 and exclusions(found) == {
        "reserved pricing (a term commitment, not on-demand)": 2
    }
    assert offers[("8x NVIDIA B200", "on_demand")].price_per_hour == 48.0
    assert offers[("1x NVIDIA L40", "spot")].price_per_hour == 0.8


@pytest.mark.parametrize(("cell", "problem"), [("$0.00", "non-positive"), ("$ —", "not a price")])
def test_wrong_price_cells_are_flagged_offers(cell: str, problem: str) -> None:
    body = FIXTURE.read_bytes().replace(b"<span>$6.00</span>", f"<span>{cell}</span>".encode())
    b200 = by_key(items(body))[("8x NVIDIA B200", "on_demand")]
    assert problem in (b200.problem or "")


def test_contact_cells_are_excluded() -> None:
    body = FIXTURE.read_bytes().replace(b"<span>$6.00</span>", b"<span>Contact us</span>")
    found = items(body)
    assert ("8x NVIDIA B200", "on_demand") not in by_key(found)
    assert exclusions(found)["on_demand: contact sales / not available"] == 1


def test_billing_unit_only_when_the_page_says_so() -> None:
    body = FIXTURE.read_bytes().replace(b"billed per minute", b"billed fairly")
    assert {o.billing_unit for o in items(body) if isinstance(o, Offer)} == {None}


def test_not_modified_keeps_both_scopes_current() -> None:
    found = list(hyperstack.parse([response(b"", status=304)]))
    assert [u.scope for u in found if isinstance(u, Unchanged)] == [
        {"scope": "on_demand:global"},
        {"scope": "spot:global"},
    ]


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPO / "tests" / "replay") as client:
        raw = list(hyperstack.fetch(client, {}, None))
    assert len(by_key(list(hyperstack.parse(raw)))) == 22


def test_fixture_is_small_and_says_it_is_hand_written() -> None:
    text = FIXTURE.read_text()
    assert len(text) < 20_000 and "hand-written by gpucost" in text


@pytest.mark.network
def test_live_page_parses() -> None:
    with make_client() as client:
        found = list(hyperstack.parse(list(hyperstack.fetch(client, {}, None))))
    offers = [o for o in found if isinstance(o, Offer)]
    assert any(o.pricing_type == "on_demand" for o in offers) and any(
        o.pricing_type == "spot" for o in offers
    )


def test_a_truncated_page_is_refused_not_loaded_in_part() -> None:
    body = FIXTURE.read_bytes()
    with pytest.raises(LayoutChanged, match="truncated"):
        items(body[: len(body) * 4 // 5])
