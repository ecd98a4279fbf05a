"""Together AI pricing page: the GPU Clusters table only, per-GPU rates x 8-GPU nodes, preemptible."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors import together
from connectors.base import LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "together" / "pricing__2026-12-02.html"
CATALOG = HardwareCatalog.load()


def page(body: bytes | str, status: int = 200) -> RawResponse:
    return RawResponse(
        url=together.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 2, tzinfo=UTC),
        content_type="text/html; charset=utf-8",
        body=body.encode() if isinstance(body, str) else body,
    )


def offers(items: Sequence[object]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.pricing_type): o for o in items if isinstance(o, Offer)}


def fixture_with(old: str, new: str) -> str:
    text = FIXTURE.read_text()
    assert old in text, old  # an edit that changes nothing would test nothing
    return text.replace(old, new)


def test_gpu_name_drops_the_board_and_the_node_type() -> None:
    assert together.gpu_name("NVIDIA HGX H100 SXM - Inference") == "H100 SXM"
    assert together.gpu_name("NVIDIA HGX B200") == "B200"
    assert together.gpu_name("NVIDIA GB200 NVL72") == "GB200 NVL72"


def test_fixture_prices_one_8_gpu_node_per_hardware_row() -> None:
    items = list(together.parse([page(FIXTURE.read_bytes())]))
    found = offers(items)
    assert len(found) == 8  # four priced rows, on-demand and preemptible each
    h100 = found[("8x NVIDIA HGX H100 SXM", "on_demand")]
    # $3.49 per GPU-hour x 8 GPUs
    assert (h100.price_per_hour, h100.gpu_count, h100.currency) == (27.92, 8.0, "USD")
    assert (h100.gpu_name_raw, h100.price_source, h100.scope) == (
        "H100 SXM",
        "list",
        "on_demand:gpu-clusters",
    )
    assert h100.provider_data["price_per_gpu_hour"] == 3.49
    assert h100.provider_data["price_basis"] == "USD per GPU-hour"
    assert found[("8x NVIDIA HGX B200", "on_demand")].price_per_hour == 44.0
    assert found[("8x NVIDIA HGX H200", "on_demand")].price_per_hour == 33.52
    assert found[("8x NVIDIA HGX H100 SXM - Inference", "on_demand")].price_per_hour == 19.12
    # GB200 says "Contact us"; the reserved cells (two per priced row, em dashes aside) are terms
    assert exclusions(items) == {"contact_sales": 1, "reserved_term": 6}
    assert all(o.problem is None and o.region == "global" for o in found.values())


def test_only_the_gpu_clusters_section_is_read() -> None:
    found = offers(list(together.parse([page(FIXTURE.read_bytes())])))
    # the Dedicated Endpoints table has the same labels and hourly GPU prices: not offers
    assert not any(it.startswith("8x 1x") or "80GB" in it for it, _ in found)
    assert {o.provider_data["hardware"] for o in found.values()} == {
        "NVIDIA HGX B200",
        "NVIDIA HGX H200",
        "NVIDIA HGX H100 SXM",
        "NVIDIA HGX H100 SXM - Inference",
    }


def test_preemptible_is_estimated_at_half_the_on_demand_rate_without_a_column() -> None:
    found = offers(list(together.parse([page(FIXTURE.read_bytes())])))
    spot = found[("8x NVIDIA HGX H100 SXM", "spot")]
    assert (spot.price_per_hour, spot.price_source, spot.scope) == (13.96, "estimated", "spot:gpu-clusters")
    assert spot.provider_data["spot_share_of_on_demand"] == together.PREEMPTIBLE_SHARE
    assert "flat 50%" in spot.provider_data["spot_rule"]
    assert spot.provider_data["price_per_gpu_hour"] == 1.745


def test_a_preemptible_column_is_read_as_a_published_rate() -> None:
    body = fixture_with("<th>On-demand</th>", "<th>On-demand</th><th>Preemptible</th>")
    for hardware, on_demand, spot_cell in (
        ("NVIDIA HGX B200", "$5.50", "$2.60"),
        ("NVIDIA HGX H200", "$4.19", "$2.10"),
        ("NVIDIA HGX H100 SXM", "$3.49", "$1.75"),
        ("NVIDIA HGX H100 SXM - Inference", "$2.39", "&mdash;"),
        ("NVIDIA GB200 NVL72", "Contact us", "Contact us"),
    ):
        row = f"<tr><td>{hardware}</td><td>{on_demand}</td>"
        assert row in body, row
        body = body.replace(row, f"{row}<td>{spot_cell}</td>")
    items = list(together.parse([page(body)]))
    found = offers(items)
    spot = found[("8x NVIDIA HGX H100 SXM", "spot")]
    assert (spot.price_per_hour, spot.price_source) == (14.0, "list")
    assert "spot_rule" not in spot.provider_data
    assert ("8x NVIDIA HGX H100 SXM - Inference", "spot") not in found  # an em dash: none
    assert exclusions(items) == {
        "contact_sales": 1,
        "spot_contact_sales": 1,  # GB200 asks for contact in both columns
        "reserved_term": 6,
        "spot_no_public_rate": 1,
    }


def test_a_dash_on_demand_cell_is_no_public_rate() -> None:
    body = fixture_with("<td>$2.39</td>", "<td>&mdash;</td>")
    items = list(together.parse([page(body)]))
    assert ("8x NVIDIA HGX H100 SXM - Inference", "on_demand") not in offers(items)
    assert exclusions(items)["no_public_rate"] == 1


def test_a_cell_stating_its_own_basis_wins_over_the_stated_one() -> None:
    # a per-node price is not multiplied by the node's GPUs
    body = fixture_with("SXM</td><td>$3.49</td>", "SXM</td><td>$27.92/instance-hr</td>")
    h100 = offers(list(together.parse([page(body)])))[("8x NVIDIA HGX H100 SXM", "on_demand")]
    assert (h100.price_per_hour, h100.provider_data["price_per_gpu_hour"]) == (27.92, None)
    # and a currency comes from the cell as printed
    body = fixture_with("<td>$4.19</td>", "<td>€4.19</td>")
    assert offers(list(together.parse([page(body)])))[("8x NVIDIA HGX H200", "on_demand")].currency == "EUR"


def test_wrong_prices_are_flagged_not_dropped() -> None:
    body = fixture_with("<td>$5.50</td>", "<td>$0.00</td>").replace("<td>$4.19</td>", "<td>soon-ish $</td>")
    found = offers(list(together.parse([page(body)])))
    assert "not a positive number" in (found[("8x NVIDIA HGX B200", "on_demand")].problem or "")
    assert found[("8x NVIDIA HGX H200", "on_demand")].problem is not None
    # the estimate from a wrong price is flagged too (quarantined, keeping its last good price)
    spot = found[("8x NVIDIA HGX B200", "spot")]
    assert spot.price_source == "estimated" and "preemptible estimate derives from it" in (spot.problem or "")


SENTENCE = "Prices are per GPU per hour."


def test_the_basis_comes_from_the_page_not_from_the_docs() -> None:
    # with no sentence stating it and bare "$3.49" cells, no price states its time unit
    with pytest.raises(LayoutChanged, match="no time unit stated in the cell, its label or the page"):
        list(together.parse([page(fixture_with(SENTENCE, ""))]))
    # cells that say it themselves read without the sentence
    body = fixture_with(SENTENCE, "").replace("SXM</td><td>$3.49</td>", "SXM</td><td>$3.49/GPU/hr</td>")
    found = offers(list(together.parse([page(body)])))
    assert found[("8x NVIDIA HGX H100 SXM", "on_demand")].price_per_hour == 27.92
    assert found[("8x NVIDIA HGX H200", "on_demand")].problem is not None  # still unstated


def test_a_page_that_states_monthly_rates_is_converted() -> None:
    body = fixture_with(SENTENCE, "Prices are per GPU per month.").replace(
        "SXM</td><td>$3.49</td>", "SXM</td><td>$2,547.70</td>"
    )
    h100 = offers(list(together.parse([page(body)])))[("8x NVIDIA HGX H100 SXM", "on_demand")]
    assert h100.price_per_hour == pytest.approx(27.92)  # 2547.70 / 730 h x 8 GPUs


def test_two_sentences_stating_different_bases_are_a_layout_change() -> None:
    body = fixture_with(SENTENCE, f"{SENTENCE} Reserved rates are per node per month.")
    with pytest.raises(LayoutChanged, match="states its prices' basis twice differently"):
        list(together.parse([page(body)]))


def test_a_renamed_or_new_price_column_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="On-demand"):
        list(together.parse([page(fixture_with("<th>On-demand</th>", "<th>Pay as you go</th>"))]))
    body = fixture_with("<th>Reserved 1-6 days</th>", "<th>Burst</th>")
    with pytest.raises(LayoutChanged, match="column `Burst`"):
        list(together.parse([page(body)]))
    with pytest.raises(LayoutChanged, match="Hardware"):
        list(
            together.parse(
                [
                    page(
                        fixture_with(
                            "<th>Hardware</th><th>On-demand</th><th>Reserved",
                            "<th>Model</th><th>On-demand</th><th>Reserved",
                        )
                    )
                ]
            )
        )


def test_a_missing_section_is_a_layout_change_naming_the_heading() -> None:
    with pytest.raises(LayoutChanged, match="Instant Clusters"):
        list(together.parse([page(fixture_with("<h2>GPU Clusters</h2>", "<h2>Compute</h2>"))]))
    # another wording the docs use still reads
    body = fixture_with("<h2>GPU Clusters</h2>", "<h2>Instant GPU Clusters</h2>")
    assert len(offers(list(together.parse([page(body)])))) == 8


def test_a_not_modified_page_keeps_both_scopes() -> None:
    items = list(together.parse([page(b"", status=304)]))
    assert {tuple(i.scope.items()) for i in items if isinstance(i, Unchanged)} == {
        (("scope", "on_demand:gpu-clusters"),),
        (("scope", "spot:gpu-clusters"),),
    }


def test_replay_cassette_maps_every_offer_to_a_gpu_and_its_fabric() -> None:
    with make_client(replay=REPLAY) as client:
        items = list(together.parse(list(together.fetch(client, {}))))
    found = offers(items)
    assert len(found) == 8
    resolved = {
        it: CATALOG.resolve("together", it, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for (it, _), o in found.items()
    }
    assert [it for it, match in resolved.items() if match is None] == []
    h100 = resolved["8x NVIDIA HGX H100 SXM"]
    assert h100 is not None
    assert (h100.gpu_name, h100.gpu_count, h100.intra_node_interconnect, h100.inter_node_fabric) == (
        "H100-SXM",
        8,
        "NVSwitch",
        "InfiniBand",
    )
    assert h100.inter_node_gbps is None  # Together states InfiniBand, not its bandwidth
    b200 = resolved["8x NVIDIA HGX B200"]
    assert b200 is not None and (b200.gpu_name, b200.intra_node_gbps) == ("B200", 1800.0)
    inference = resolved["8x NVIDIA HGX H100 SXM - Inference"]
    assert inference is not None and inference.instance_type_pattern != h100.instance_type_pattern


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_pricing_page_has_gpu_cluster_rates() -> None:
    with make_client() as client:
        items = list(together.parse(list(together.fetch(client, {}))))
    found = [o for o in items if isinstance(o, Offer) and o.problem is None]
    assert {o.pricing_type for o in found} >= {"on_demand"}
    assert {o.gpu_name_raw for o in found} & {"H100 SXM", "H200", "B200"}
