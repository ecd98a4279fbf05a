"""Crusoe pricing page: a `<div>` grid of GPU cards, per-GPU prices x shape counts, "Contact sales"."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors import crusoe, pages
from connectors.base import LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "crusoe" / "pricing__2026-12-01.html"
CAPTURE = "crusoe/pricing-page-gpu-instances-excerpt-2026.html"
CATALOG = HardwareCatalog.load()


def page(body: bytes | str, status: int = 200) -> RawResponse:
    return RawResponse(
        url=crusoe.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        content_type="text/html; charset=utf-8",
        body=body.encode() if isinstance(body, str) else body,
    )


def offers(items: list[object]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.pricing_type): o for o in items if isinstance(o, Offer)}


# --- the real capture (verbatim excerpt, 2026) --------------------------------------------------


def test_real_capture(shared_raw: Path) -> None:
    items = list(crusoe.parse([page((shared_raw / CAPTURE).read_bytes())]))
    found = offers(items)
    assert len(found) == 13
    # every "Current spot" cell reads "Contact sales": no spot offer, 9 spot exclusions
    assert not any(pricing == "spot" for _, pricing in found)
    assert exclusions(items) == {"contact_sales": 3, "spot_contact_sales": 9}  # GB200, B200, MI355X
    h200 = found[("8x NVIDIA H200 141GB HGX", "on_demand")]
    # $4.29 per GPU-hour x 8 GPUs (h200-141gb-sxm-ib.8x)
    assert (h200.price_per_hour, h200.gpu_count, h200.gpu_memory_gb_raw) == (34.32, 8.0, 141.0)
    assert h200.provider_data["price_per_gpu_hour"] == 4.29
    assert (h200.gpu_name_raw, h200.currency, h200.price_source) == ("NVIDIA H200", "USD", "list")
    assert found[("8x NVIDIA H100 80GB HGX", "on_demand")].price_per_hour == 31.2
    assert found[("8x NVIDIA A100 80GB SXM", "on_demand")].price_per_hour == 18.4
    # the two A100 rows differ by their tag only
    assert found[("2x NVIDIA A100 80GB PCIe", "on_demand")].price_per_hour == 4.0
    assert found[("10x NVIDIA L40S 48GB", "on_demand")].price_per_hour == 15.0
    assert found[("8x AMD MI300X 192GB", "on_demand")].price_per_hour == 27.6
    assert {o.scope for o in found.values()} == {"on_demand:gpu-instances"}
    assert all(o.problem is None for o in found.values())


def test_real_capture_maps_to_gpus_and_interconnect(shared_raw: Path) -> None:
    found = offers(list(crusoe.parse([page((shared_raw / CAPTURE).read_bytes())])))
    resolved = {
        k[0]: CATALOG.resolve("crusoe", k[0], o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in found.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    h100 = resolved["8x NVIDIA H100 80GB HGX"]
    assert (h100.gpu_name, h100.intra_node_interconnect, h100.inter_node_fabric, h100.inter_node_gbps) == (
        "H100-SXM",
        "NVSwitch",
        "InfiniBand",
        3200.0,
    )
    assert resolved["8x NVIDIA A100 80GB SXM"].inter_node_gbps == 1600.0
    assert resolved["4x NVIDIA A100 80GB PCIe"].gpu_name == "A100-80GB-PCIe"
    assert resolved["8x AMD MI300X 192GB"].gpu_name == "MI300X"
    # the GPU name alone resolves too
    assert all(CATALOG.resolve("crusoe", "", o.gpu_name_raw, o.gpu_memory_gb_raw) for o in found.values())


def test_derived_opencomputeprices_rows_disagree_and_are_a_cross_check_only(shared_raw: Path) -> None:
    """OpenComputePrices' 2026-03-22 rows (derived) are per-GPU prices, lower than the 2026 page
    for A100 and L40S: the page is the source; these are listed as disagreements."""
    with (shared_raw / "crusoe" / "opencomputeprices-crusoe-2026-03-22.csv").open(newline="") as handle:
        derived = {(r["gpu_name"], r["gpu_variant"], r["price_per_gpu_hour"]) for r in csv.DictReader(handle)}
    found = offers(list(crusoe.parse([page((shared_raw / CAPTURE).read_bytes())])))
    ours = {o.provider_data["model"] + " " + " ".join(o.provider_data["tags"]): o for o in found.values()}
    per_gpu = {label: o.provider_data["price_per_gpu_hour"] for label, o in ours.items()}
    assert ("H200", "SXM", "4.29") in derived and per_gpu["NVIDIA H200 141GB HGX"] == 4.29
    assert ("H100", "SXM5", "3.9") in derived and per_gpu["NVIDIA H100 80GB HGX"] == 3.90
    assert ("A100", "SXM", "1.95") in derived and per_gpu["NVIDIA A100 80GB SXM"] == 2.30
    assert ("L40S", "", "1.0") in derived and per_gpu["NVIDIA L40S 48GB"] == 1.50


# --- the fixture page ---------------------------------------------------------------------------


def test_a_published_spot_price_becomes_a_spot_offer() -> None:
    items = list(crusoe.parse([page(FIXTURE.read_bytes())]))
    found = offers(items)
    spot = found[("4x NVIDIA A40 48GB PCIe", "spot")]
    assert (spot.price_per_hour, spot.price_source, spot.scope) == (1.6, "market", "spot:gpu-instances")
    assert found[("1x NVIDIA A40 48GB PCIe", "on_demand")].price_per_hour == 0.9
    assert len(found) == 21
    assert exclusions(items) == {"contact_sales": 3, "spot_contact_sales": 9}
    # the CPU section has the same column labels and must not be read as GPUs
    assert not any("c1a" in it for it, _ in found)


def test_an_unknown_gpu_lands_as_one_gpu() -> None:
    body = FIXTURE.read_text().replace(">NVIDIA L40S<", ">NVIDIA Z9<")
    found = offers(list(crusoe.parse([page(body)])))
    z9 = found[("1x NVIDIA Z9 48GB", "on_demand")]
    assert (z9.price_per_hour, z9.provider_data["gpu_counts_documented"]) == (1.5, False)


def test_wrong_prices_are_flagged() -> None:
    body = FIXTURE.read_text().replace("$3.45/GPU-hr", "$0.00/GPU-hr").replace("$3.90/GPU-hr", "$3.90")
    found = offers(list(crusoe.parse([page(body)])))
    assert "not a positive number" in (found[("8x AMD MI300X 192GB", "on_demand")].problem or "")
    # a price that no longer says per GPU would be off by the GPU count
    assert "no time unit stated" in (found[("8x NVIDIA H100 80GB HGX", "on_demand")].problem or "")


def test_a_page_whose_prices_all_lost_their_basis_raises() -> None:
    body = FIXTURE.read_text().replace("/GPU-hr", "")
    with pytest.raises(LayoutChanged, match="no time unit stated in the cell, its label or the page"):
        list(crusoe.parse([page(body)]))


def test_a_per_instance_price_is_refused() -> None:
    body = FIXTURE.read_text().replace("/GPU-hr", "/instance-hr")
    with pytest.raises(LayoutChanged, match="is per instance, but the page names no instance size"):
        list(crusoe.parse([page(body)]))


def test_a_renamed_header_raises_naming_the_labels() -> None:
    body = FIXTURE.read_text().replace(">Current spot<", ">Interruptible<", 1)
    with pytest.raises(LayoutChanged, match="GPU model, On-demand, Spot found in the GPU instances table"):
        list(crusoe.parse([page(body)]))


def test_a_removed_table_raises() -> None:
    body = FIXTURE.read_text().replace("GPU instances pricing", "Accelerators")
    with pytest.raises(LayoutChanged, match="heading `GPU instances pricing` not found"):
        list(crusoe.parse([page(body)]))


def test_model_and_tags() -> None:
    doc = pages.soup(
        "<a><div><h4>NVIDIA H100</h4><div></div></div><div><div>80GB</div><div>HGX</div></div></a>"
    )
    assert crusoe.model_and_tags(doc.a) == ("NVIDIA H100", ["80GB", "HGX"])


def test_not_modified_keeps_both_scopes() -> None:
    assert [u.scope for u in crusoe.parse([page(b"", status=304)]) if isinstance(u, Unchanged)] == [
        {"scope": "on_demand:gpu-instances"},
        {"scope": "spot:gpu-instances"},
    ]


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        found = offers(list(crusoe.parse(list(crusoe.fetch(client, {})))))
    assert len(found) == 21
    assert found[("8x NVIDIA H200 141GB HGX", "on_demand")].price_per_hour == 34.32


@pytest.mark.network
def test_live_pricing_page() -> None:
    with make_client() as client:
        found = offers(list(crusoe.parse(list(crusoe.fetch(client, {})))))
    assert any(o.gpu_count == 8 for o in found.values())
