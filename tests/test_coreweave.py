"""CoreWeave pricing page: real 2026 Europe table, the 2023 layout, the derived CSV, fixture, replay."""

from __future__ import annotations

import csv
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors import coreweave, pages
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "coreweave" / "pricing__2026-12-01.html"
EUROPE_2026 = "pricing-page-gpu-europe-table-excerpt-2026.html"
WAYBACK_2023 = "pricing-page-excerpt-wayback-20230921.html"
DERIVED_CSV = "opencomputeprices-coreweave-2026-03-23.csv"


def response(body: bytes, status: int = 200) -> RawResponse:
    return RawResponse(
        url=coreweave.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=body,
    )


def items(body: bytes) -> list[object]:
    return list(coreweave.parse([response(body)]))


def offers_by_key(found: list[object]) -> dict[tuple[str, str, str], Offer]:
    return {(o.instance_type, o.region, o.pricing_type): o for o in found if isinstance(o, Offer)}


@pytest.fixture(scope="module")
def europe(shared_raw: Path) -> list[object]:
    return items((shared_raw / "coreweave" / EUROPE_2026).read_bytes())


# --- helpers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "slug"),
    [("EUROPE", "europe"), ("North America", "north-america"), ("US East (NY)", "us-east-ny")],
)
def test_region_slug(label: str, slug: str) -> None:
    assert coreweave.region_slug(label) == slug


def test_footnote_marks_are_split_off() -> None:
    assert coreweave.footnote_marks("4^1") == ("4", ("1",))
    assert coreweave.footnote_marks("Inference Price ^2") == ("Inference Price", ("2",))
    assert coreweave.footnote_marks("8") == ("8", ())


# --- the real 2026 capture -------------------------------------------------------------------------


def test_europe_2026_offers_and_real_values(europe: list[object]) -> None:
    offers = offers_by_key(europe)
    on_demand = [k for k in offers if k[2] == "on_demand"]
    spot = [k for k in offers if k[2] == "spot"]
    assert (len(on_demand), len(spot)) == (9, 7)
    assert {k[1] for k in offers} == {"europe"}
    h100 = offers[("hgx-h100", "europe", "on_demand")]
    assert (h100.price_per_hour, h100.gpu_count, h100.gpu_memory_gb_raw) == (49.24, 8.0, 80.0)
    assert (h100.vcpus, h100.ram_gb, h100.currency, h100.price_source) == (128.0, 2048.0, "USD", "list")
    assert h100.gpu_name_raw == "NVIDIA HGX H100" and h100.scope == "on_demand:europe"
    assert offers[("hgx-h100", "europe", "spot")].price_per_hour == 19.51
    assert offers[("nvidia-b200", "europe", "on_demand")].price_per_hour == 68.80
    assert offers[("nvidia-b200", "europe", "spot")].price_per_hour == 34.87
    assert offers[("hgx-h200", "europe", "on_demand")].price_per_hour == 50.44
    assert offers[("hgx-h200", "europe", "spot")].price_per_hour == 20.64
    assert offers[("nvidia-l40s", "europe", "on_demand")].price_per_hour == 18.00
    assert offers[("nvidia-a100", "europe", "spot")].price_per_hour == 9.51
    gb200 = offers[("nvidia-gb200-nvl72", "europe", "on_demand")]
    assert (gb200.price_per_hour, gb200.gpu_count, gb200.gpu_memory_gb_raw) == (42.0, 4.0, 186.0)
    assert gb200.provider_data["gpu_count_footnotes"] == ["1"]
    assert gb200.provider_data["local_storage_tb"] == 30.72
    # contact-sales on-demand rows still have a spot price
    assert offers[("nvidia-b300", "europe", "spot")].price_per_hour == 36.70
    assert ("nvidia-b300", "europe", "on_demand") not in offers
    assert (
        offers[("nvidia-rtx-pro-6000-blackwell-server-edition-standard-memory", "europe", "spot")].ram_gb
        == 512
    )
    assert not any(o.problem for o in offers.values())


def test_europe_2026_contact_and_na_are_excluded(europe: list[object]) -> None:
    # GB300, HGX B300, RTX PRO 6000 Standard Memory: contact sales; GB300, GB200, GH200, L40, L40S: N/A spot
    assert exclusions(europe) == {"on_demand: contact sales": 3, "spot: not offered (N/A)": 5}


def test_every_capture_gpu_resolves(europe: list[object]) -> None:
    catalog = HardwareCatalog.load()
    offers = [o for o in europe if isinstance(o, Offer)]
    matches = {
        o.instance_type: catalog.resolve(
            o.provider, o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count
        )
        for o in offers
    }
    assert [k for k, m in matches.items() if m is None] == []
    assert (
        matches["hgx-h100"].gpu_name == "H100-SXM"
        and matches["hgx-h100"].intra_node_interconnect == "NVSwitch"
    )
    assert matches["nvidia-a100"].gpu_name == "A100-80GB-SXM"
    assert matches["nvidia-gb200-nvl72"].gpu_name == "GB200" and matches["nvidia-gb200-nvl72"].gpu_count == 4
    assert matches["nvidia-l40s"].intra_node_interconnect == "PCIe"
    # the Contact-sales-only GB300 instance is priced nowhere but still known to the seeds
    assert (
        catalog.resolve("coreweave", "nvidia-gb300-nvl72", "NVIDIA GB300 NVL72", 279, 4).gpu_name == "GB300"
    )


def test_derived_csv_misstates_instance_prices_as_per_gpu(shared_raw: Path, europe: list[object]) -> None:
    """Negative test: OpenComputePrices wrote the per-instance price as a per-GPU price, count 1."""
    offers = {
        o.gpu_name_raw.removeprefix("NVIDIA ").removesuffix(" NVL72"): o
        for o in europe
        if isinstance(o, Offer) and o.pricing_type == "on_demand"
    }
    with (shared_raw / "coreweave" / DERIVED_CSV).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    for row in rows:
        ours = offers[row["instance_type"].removesuffix(" NVL72")]
        ours_per_gpu = ours.price_per_hour / ours.gpu_count
        theirs_per_gpu = float(row["price_per_gpu_hour"])
        assert float(row["gpu_count"]) == 1 and ours.gpu_count > 1
        assert theirs_per_gpu != pytest.approx(ours_per_gpu)
        assert theirs_per_gpu / ours_per_gpu == pytest.approx(ours.gpu_count)  # off by the GPU count
        assert float(row["price_per_hour"]) == pytest.approx(ours.price_per_hour)


# --- the 2023 layout ----------------------------------------------------------------------------------


def test_2023_layout_is_a_component_price_not_an_instance_price(shared_raw: Path) -> None:
    body = (shared_raw / "coreweave" / WAYBACK_2023).read_bytes()
    with pytest.raises(LayoutChanged, match="GPU Component Cost Per Hour"):
        items(body)
    rows = {r.product: r for r in coreweave.legacy_component_rows(pages.soup(body))}
    assert len(rows) == 12  # the 13th (Tesla V100 NVLINK) is cut off by the excerpt
    assert rows["hgx-h100"].gpu_component_usd_per_gpu_hour == 4.76 and rows["hgx-h100"].vram_gb == 80
    assert rows["h100-pcie"].gpu_component_usd_per_gpu_hour == 4.25
    assert rows["a100-40gb-nvlink"].vram_gb == 40
    assert rows["quadro-rtx-4000"].gpu_component_usd_per_gpu_hour == 0.24
    catalog = HardwareCatalog.load()
    assert all(catalog.resolve("coreweave", "", r.gpu_model, r.vram_gb) for r in rows.values())


# --- layout changes -------------------------------------------------------------------------------------


def test_renamed_price_header_is_a_layout_change() -> None:
    body = FIXTURE.read_bytes().replace(b"On-Demand Price (Per Hour)", b"Hourly Rate")
    with pytest.raises(LayoutChanged, match="On-Demand Price"):
        items(body)


def test_missing_region_heading_is_a_layout_change() -> None:
    body = FIXTURE.read_bytes().replace(b"REGION: ", b"Zone ")
    with pytest.raises(LayoutChanged, match="REGION"):
        items(body)


def test_removed_tables_are_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="REGION"):
        items(b"<html><body><h2>Pricing</h2><p>Talk to us.</p></body></html>")


def test_a_region_without_rows_is_a_layout_change() -> None:
    body = FIXTURE.read_bytes().replace(b"data-product=", b"data-sku=")
    with pytest.raises(LayoutChanged, match="data-product"):
        items(body)


# --- the hand-written fixture, wrong rows, replay --------------------------------------------------------


def test_fixture_regions_extra_column_and_exclusions() -> None:
    found = items(FIXTURE.read_bytes())
    offers = offers_by_key(found)
    assert {k[1] for k in offers} == {"north-america", "europe"}
    l40s = offers[("nvidia-l40s", "north-america", "spot")]
    assert l40s.price_per_hour == 7.88 and l40s.scope == "spot:north-america"
    assert l40s.provider_data["extra_columns"] == {"Inference Single GPU Price (Per Hour)": "$2.25"}
    assert exclusions(found) == {"spot: not offered (N/A)": 1, "on_demand: contact sales": 1}


@pytest.mark.parametrize(
    ("cell", "problem"), [("$0.00", "non-positive"), ("$ —", "not a price"), ("", "not a price")]
)
def test_wrong_price_cells_are_flagged_offers(cell: str, problem: str) -> None:
    body = FIXTURE.read_bytes().replace(b"<div>$49.24</div>", f"<div>{cell}</div>".encode(), 1)
    h100 = offers_by_key(items(body))[("hgx-h100", "north-america", "on_demand")]
    assert problem in (h100.problem or "")
    if problem != "non-positive":
        assert math.isnan(h100.price_per_hour)


def test_a_per_gpu_header_is_multiplied_by_the_count() -> None:
    body = FIXTURE.read_bytes().replace(b"Spot Price (Per Hour)", b"Spot Price (per GPU/hr)")
    offers = offers_by_key(items(body))
    assert offers[("hgx-h100", "north-america", "spot")].price_per_hour == pytest.approx(8 * 19.71)


def test_not_modified_keeps_every_offer_current() -> None:
    assert next(iter(coreweave.parse([response(b"", status=304)]))) == Unchanged(
        {}, reason=f"{coreweave.PAGE_URL} not modified (HTTP 304)"
    )


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPO / "tests" / "replay") as client:
        raw = list(coreweave.fetch(client, {}, None))
    found = list(coreweave.parse(raw))
    assert sum(isinstance(o, Offer) for o in found) == 12
    assert any(isinstance(o, Excluded) for o in found)


def test_fixture_is_small_and_says_it_is_hand_written() -> None:
    text = FIXTURE.read_text()
    assert len(text) < 20_000 and "hand-written by gpucost" in text


@pytest.mark.network
def test_live_page_parses() -> None:
    with make_client() as client:
        found = list(coreweave.parse(list(coreweave.fetch(client, {}, None))))
    offers = [o for o in found if isinstance(o, Offer)]
    assert len({o.region for o in offers}) >= 1 and any(o.pricing_type == "spot" for o in offers)


def test_a_truncated_page_is_refused_not_loaded_in_part() -> None:
    body = FIXTURE.read_bytes()
    with pytest.raises(LayoutChanged, match="truncated"):
        items(body[: len(body) // 3])
