"""Nebius price page: div grids, the effective-date rule, preemptible prices, "from" and "Contact us"."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from connectors import nebius, pages
from connectors.base import LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "nebius" / "prices__2026-12-01.html"
CAPTURE = "nebius/prices-page-gpu-and-preemptible-tables-excerpt-2026-09.html"
CATALOG = HardwareCatalog.load()
TODAY = datetime(2026, 12, 1, 6, tzinfo=UTC)


def page(body: bytes | str, fetched_at: datetime = TODAY, status: int = 200) -> RawResponse:
    return RawResponse(
        url=nebius.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=fetched_at,
        content_type="text/html; charset=utf-8",
        body=body.encode() if isinstance(body, str) else body,
    )


def offers(items: list[object]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.pricing_type): o for o in items if isinstance(o, Offer)}


# --- the real capture (verbatim excerpt, 2026-09) ------------------------------------------------


def test_real_capture_on_a_day_after_october_first(shared_raw: Path) -> None:
    items = list(nebius.parse([page((shared_raw / CAPTURE).read_bytes())]))
    found = offers(items)
    on_demand = {k: o for k, o in found.items() if k[1] == "on_demand"}
    spot = {k: o for k, o in found.items() if k[1] == "spot"}
    assert (len(on_demand), len(spot)) == (11, 11)
    assert exclusions(items) == {"contact_sales": 2}  # GB300 and GB200 NVL72
    h100 = found[("8x NVIDIA HGX H100", "on_demand")]
    # today is after October 1, 2026: the effective-October column ($4.50/GPU-h) is the price
    assert (h100.price_per_hour, h100.gpu_count, h100.vcpus, h100.ram_gb) == (36.0, 8.0, 128.0, 1600.0)
    assert h100.provider_data["price_before"] == 3.85
    assert h100.provider_data["price_effective_from"] == "2026-10-01"
    assert found[("1x NVIDIA HGX H100", "on_demand")].price_per_hour == 4.50
    assert found[("8x NVIDIA HGX B300", "on_demand")].price_per_hour == 76.0  # 9.50 x 8
    assert found[("8x NVIDIA HGX B200", "on_demand")].price_per_hour == 68.0
    assert found[("1x NVIDIA HGX H200", "on_demand")].price_per_hour == 5.40
    # B200 and B300 are sold as 8-GPU VMs only
    assert ("1x NVIDIA HGX B200", "on_demand") not in found
    l40s = found[("1x NVIDIA L40S with Intel CPU", "on_demand")]
    assert (l40s.price_per_hour, l40s.provider_data["price_is_from"], l40s.vcpus) == (1.55, True, None)
    assert l40s.provider_data["vcpus_per_gpu"] == "8-40"
    assert l40s.gpu_name_raw == "NVIDIA L40S"
    assert found[("4x NVIDIA L40S with AMD CPU", "on_demand")].price_per_hour == 7.28
    # preemptible: every cell reads "from $x"; "**" footnote marks are dropped
    assert found[("8x NVIDIA HGX H100", "spot")].price_per_hour == 6.32
    assert found[("1x NVIDIA L40S with Intel CPU", "spot")].price_per_hour == 0.74
    assert found[("8x NVIDIA HGX B300", "spot")].price_per_hour == 7.92
    assert all(o.provider_data.get("price_is_from") for o in spot.values())
    assert {o.scope for o in on_demand.values()} == {"on_demand:gpu-instances"}
    assert {o.scope for o in spot.values()} == {"spot:preemptible"}
    assert all(o.problem is None and o.currency == "USD" for o in found.values())


def test_real_capture_before_october_first_reads_the_on_demand_column(shared_raw: Path) -> None:
    september = datetime(2026, 9, 15, tzinfo=UTC)
    found = offers(list(nebius.parse([page((shared_raw / CAPTURE).read_bytes(), september)])))
    h100 = found[("8x NVIDIA HGX H100", "on_demand")]
    assert h100.price_per_hour == 30.8  # 3.85 x 8
    assert h100.provider_data["price_scheduled"] == 4.50
    assert found[("8x NVIDIA HGX B300", "on_demand")].price_per_hour == 62.8


def test_real_capture_maps_to_gpus_and_interconnect(shared_raw: Path) -> None:
    found = offers(list(nebius.parse([page((shared_raw / CAPTURE).read_bytes())])))
    resolved = {
        k[0]: CATALOG.resolve("nebius", k[0], o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in found.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    assert resolved["8x NVIDIA HGX H100"].gpu_name == "H100-SXM"
    assert resolved["8x NVIDIA HGX H100"].intra_node_interconnect == "NVSwitch"
    assert resolved["8x NVIDIA HGX B200"].inter_node_fabric == "InfiniBand"
    assert resolved["8x NVIDIA HGX B300"].gpu_name == "B300"
    assert resolved["1x NVIDIA RTX PRO 6000"].gpu_name == "RTX-PRO-6000-SE"
    assert resolved["2x NVIDIA L40S with AMD CPU"].intra_node_interconnect == "PCIe"
    # the GPU name alone resolves too
    assert all(CATALOG.resolve("nebius", "", o.gpu_name_raw, None) for o in found.values())


def test_derived_skypilot_rows_are_a_cross_check_only(shared_raw: Path) -> None:
    """SkyPilot's nebius catalog (commit date unknown, older than the page) prices H100 at
    $2.95/GPU-h on demand and $1.25 spot; the 2026-09 page says $3.85 -> $4.50 and from $0.79."""
    import csv

    with (shared_raw / "skypilot-catalog" / "v9" / "nebius-vms.csv").open(newline="") as handle:
        sky = {r["InstanceType"]: r for r in csv.DictReader(handle)}
    row = sky["gpu-h100-sxm_8gpu-128vcpu-1600gb"]
    assert (float(row["Price"]), float(row["SpotPrice"]), row["vCPUs"]) == (23.60, 10.00, "128")
    found = offers(list(nebius.parse([page((shared_raw / CAPTURE).read_bytes())])))
    ours = found[("8x NVIDIA HGX H100", "on_demand")]
    # the same shape: vCPUs and RAM agree, the price does not (different dates)
    assert (ours.vcpus, ours.ram_gb) == (128.0, 1600.0)
    assert ours.price_per_hour != float(row["Price"])


# --- the effective-date rule --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("GPU-hour (Effective October 1, 2026)", date(2026, 10, 1)),
        ("Effective from Jan 15 2027", date(2027, 1, 15)),
        ("On-demand, GPU-hour", None),
        ("Effective soon", None),
    ],
)
def test_effective_date(header: str, expected: date | None) -> None:
    assert nebius.effective_date(header) == expected


def test_the_effective_column_is_current_from_its_date_on() -> None:
    table = pages.Table(("Item", "On-demand, GPU-hour", "GPU-hour (Effective October 1, 2026)"), (), "t")
    assert nebius.current_price_column(table, date(2026, 9, 30)) == (1, 2, date(2026, 10, 1))
    assert nebius.current_price_column(table, date(2026, 10, 1)) == (2, 1, date(2026, 10, 1))
    plain = pages.Table(("Item", "On-demand, GPU-hour"), (), "t")
    assert nebius.current_price_column(plain, date(2026, 12, 1)) == (1, None, None)


# --- the fixture page ---------------------------------------------------------------------------


def test_fixture_page_and_the_cpu_table_is_not_read() -> None:
    items = list(nebius.parse([page(FIXTURE.read_bytes())]))
    found = offers(items)
    assert len(found) == 19
    assert not any("Ice Lake" in it for it, _ in found)
    assert exclusions(items) == {"contact_sales": 1}


def test_an_unknown_gpu_lands_as_one_gpu() -> None:
    body = FIXTURE.read_text().replace("NVIDIA HGX B300", "NVIDIA HGX Z9")
    found = offers(list(nebius.parse([page(body)])))
    z9 = found[("1x NVIDIA HGX Z9", "on_demand")]
    assert (z9.price_per_hour, z9.provider_data["gpu_counts_documented"]) == (9.50, False)
    assert CATALOG.resolve("nebius", z9.instance_type, z9.gpu_name_raw, None, 1) is None


def test_wrong_prices_are_flagged() -> None:
    body = (
        FIXTURE.read_text().replace("<p>$5.40</p>", "<p>$0.00</p>").replace("<p>$4.50</p>", "<p>TBA soon</p>")
    )
    found = offers(list(nebius.parse([page(body)])))
    assert "not a positive number" in (found[("8x NVIDIA HGX H200", "on_demand")].problem or "")
    assert "not readable" in (found[("8x NVIDIA HGX H100", "on_demand")].problem or "")


def test_a_renamed_price_header_raises() -> None:
    body = FIXTURE.read_text().replace("Spot price, GPU-hour*", "Interruptible price")
    with pytest.raises(
        LayoutChanged, match="Item, Spot found in the `Preemptible NVIDIA GPU Instances` table"
    ):
        list(nebius.parse([page(body)]))


def test_a_price_column_without_gpu_hour_raises() -> None:
    body = FIXTURE.read_text().replace("Spot price, GPU-hour*", "Spot price, per hour")
    with pytest.raises(LayoutChanged, match=r"no price basis \(per GPU or per instance\) stated"):
        list(nebius.parse([page(body)]))


def test_a_per_instance_price_is_refused_because_no_row_names_its_size() -> None:
    # one row is sold in several GPU counts: an instance price cannot be placed on any of them
    body = FIXTURE.read_text().replace("Spot price, GPU-hour*", "Spot price, instance-hour")
    with pytest.raises(LayoutChanged, match="is per instance, but the page names no instance size"):
        list(nebius.parse([page(body)]))


def test_a_page_without_the_separate_spot_table_still_publishes_on_demand() -> None:
    # issue 18: since 2026-07 the spot table may be gone; on-demand prices must still load
    body = FIXTURE.read_text().replace("Preemptible NVIDIA GPU Instances", "Reserved capacity")
    items = list(nebius.parse([page(body)]))
    found = offers(items)
    assert {k[1] for k in found} == {"on_demand"} and len(found) == 11
    assert exclusions(items)["no_spot_prices_on_page"] == 1


def _merged_spot_column() -> str:
    """The fixture with spot as a column of the main table, the preemptible table removed."""
    head = "<p>GPU-hour (Effective October 1, 2026)</p></div></div>"
    cell = '<div class="pc-highlight-table-block__cell"><div><p>{}</p></div></div>'
    body = FIXTURE.read_text().replace(head, head + cell.format("Spot price, GPU-hour"), 1)
    # each on-demand row gains a spot cell after its effective-date price
    for old, spot in (("$9.50", "from $0.99"), ("$5.40", "from $0.79"), ("$4.50</p></div></div></div>", "")):
        if spot:
            target = f"<p>{old}</p></div></div>"
            body = body.replace(target, target + cell.format(spot), 1)
    body = body.replace("Preemptible NVIDIA GPU Instances", "Reserved capacity")
    return body


def test_spot_merged_into_the_main_table_as_a_column() -> None:
    items = list(nebius.parse([page(_merged_spot_column())]))
    found = offers(items)
    b300 = found[("8x NVIDIA HGX B300", "spot")]
    assert b300.price_per_hour == pytest.approx(8 * 0.99) and b300.provider_data["price_is_from"]
    assert b300.scope == "spot:preemptible" and "main table" in b300.provider_data["layout"]
    assert found[("8x NVIDIA HGX B300", "on_demand")].price_per_hour == pytest.approx(8 * 9.50)
    assert "no_spot_prices_on_page" not in exclusions(items)


def test_spot_merged_into_the_main_table_as_rows() -> None:
    row = (
        '<div class="pc-highlight-table-block__row">'
        + "".join(
            f'<div class="pc-highlight-table-block__cell"><div><p>{v}</p></div></div>'
            for v in ("NVIDIA HGX H100 (preemptible)", "16", "200", "from $0.79", "from $0.79")
        )
        + "</div>"
    )
    body = FIXTURE.read_text().replace("Preemptible NVIDIA GPU Instances", "Reserved capacity")
    body = body.replace(
        '<div class="pc-highlight-table-block__body">',
        '<div class="pc-highlight-table-block__body">' + row,
        1,
    )
    found = offers(list(nebius.parse([page(body)])))
    spot = found[("8x NVIDIA HGX H100", "spot")]
    assert spot.price_per_hour == pytest.approx(8 * 0.79) and spot.scope == "spot:preemptible"
    assert found[("8x NVIDIA HGX H100", "on_demand")].price_per_hour == pytest.approx(8 * 4.50)


def test_not_modified_keeps_both_scopes() -> None:
    assert [u.scope for u in nebius.parse([page(b"", status=304)]) if isinstance(u, Unchanged)] == [
        {"scope": "on_demand:gpu-instances"},
        {"scope": "spot:preemptible"},
    ]


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        items = list(nebius.parse(list(nebius.fetch(client, {}))))
    found = offers(items)
    assert len(found) == 19
    assert found[("8x NVIDIA HGX H100", "spot")].price_per_hour == 6.32


@pytest.mark.network
def test_live_price_page() -> None:
    with make_client() as client:
        found = offers(list(nebius.parse(list(nebius.fetch(client, {})))))
    assert any(k[1] == "spot" for k in found)
    assert any(o.gpu_count == 8 for o in found.values())
