"""Genesis Cloud pricing page: GPU cards found by their price line, the basis the page states, RFQ."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors import genesiscloud, pages
from connectors.base import LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "genesiscloud" / "pricing__2026-12-02.html"
FOOTNOTE = '<p class="note">*Prices per GPU per hour, billed per minute.</p>'


def page(body: bytes | str, status: int = 200) -> RawResponse:
    return RawResponse(
        url=genesiscloud.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 2, tzinfo=UTC),
        content_type="text/html; charset=utf-8",
        body=body.encode() if isinstance(body, str) else body,
    )


def card(title: str, price: str, body: str = "- 8x NVIDIA H100 GPU 80 GB", before: str = "") -> str:
    return (
        f'<div class="item"><div class="title"><a href="#">{title}</a></div>'
        f"<div>{before}<div>{price}</div><div>*</div></div><p>{body}</p>"
        '<a class="button" href="/contact">Request a quote</a></div>'
    )


def html(*cards: str, footnote: str = FOOTNOTE) -> str:
    return f"<html><body><section><div class='grid'>{''.join(cards)}</div>{footnote}</section></body></html>"


def parse(body: str | bytes) -> list[object]:
    return list(genesiscloud.parse([page(body)]))


def offers(items: list[object]) -> dict[str, Offer]:
    return {o.instance_type: o for o in items if isinstance(o, Offer)}


# --- our fixture (no capture of the page exists) ------------------------------------------------


def test_fixture_cards_per_gpu_price_times_the_node() -> None:
    items = parse(FIXTURE.read_bytes())
    found = offers(items)
    assert sorted(found) == ["8x NVIDIA HGX H100", "8x NVIDIA HGX H200"]
    h100 = found["8x NVIDIA HGX H100"]
    # "$ 2.19/h" per GPU (the page's asterisk footnote says so) x the 8 GPUs the card names
    assert (h100.price_per_hour, h100.currency, h100.gpu_count, h100.gpu_memory_gb_raw) == (
        17.52,
        "USD",
        8.0,
        80.0,
    )
    assert (h100.gpu_name_raw, h100.vcpus, h100.ram_gb, h100.region) == ("HGX H100", 192.0, 1920.0, "global")
    assert h100.provider_data["locations"] == ["Norway", "Iceland"]
    assert h100.provider_data["price_basis"] == "USD per GPU-hour"
    assert "price_is_from" not in h100.provider_data
    h200 = found["8x NVIDIA HGX H200"]
    assert (h200.price_per_hour, h200.gpu_memory_gb_raw, h200.provider_data["price_is_from"]) == (
        22.4,
        141.0,
        True,
    )
    # B200 reads "RFQ"; the block-storage card names no GPU
    assert exclusions(items) == {"contact_sales": 1, "not_a_gpu_instance": 1}
    assert all(o.problem is None and o.scope == "on_demand:gpu-instances" for o in found.values())
    assert all((o.pricing_type, o.price_source) == ("on_demand", "list") for o in found.values())


def test_every_fixture_offer_maps_with_its_interconnect() -> None:
    catalog = HardwareCatalog.load()
    found = offers(parse(FIXTURE.read_bytes()))
    resolved = {
        t: catalog.resolve("genesiscloud", t, o.gpu_name_raw, o.gpu_memory_gb_raw) for t, o in found.items()
    }
    matches = {t: m for t, m in resolved.items() if m is not None}
    assert len(matches) == len(found)  # zero unmapped
    assert {t: (m.gpu_name, m.intra_node_interconnect) for t, m in matches.items()} == {
        "8x NVIDIA HGX H100": ("H100-SXM", "NVSwitch"),
        "8x NVIDIA HGX H200": ("H200-SXM", "NVSwitch"),
    }
    b200 = catalog.resolve("genesiscloud", "8x NVIDIA HGX B200", "HGX B200", 180.0)
    assert b200 is not None and (b200.gpu_name, b200.intra_node_interconnect) == ("B200", "NVSwitch")


# --- the basis -------------------------------------------------------------------------------------


def test_a_price_with_no_basis_stated_anywhere_is_refused() -> None:
    with pytest.raises(LayoutChanged, match="price basis"):
        parse(html(card("NVIDIA HGX H100", "$ 2.19/h"), footnote=""))


def test_one_card_without_a_basis_is_that_cards_problem() -> None:
    stated = card("NVIDIA HGX H200", "$ 2.80/h", "- 8x NVIDIA H200 GPU 141 GB, per GPU")
    found = offers(parse(html(card("NVIDIA HGX H100", "$ 2.19/h"), stated, footnote="")))
    assert found["8x NVIDIA HGX H200"].problem is None
    h100 = found["8x NVIDIA HGX H100"]
    assert h100.problem is not None and "price basis" in h100.problem and math.isnan(h100.price_per_hour)


def test_a_per_gpu_price_line_needs_no_footnote() -> None:
    (offer,) = offers(parse(html(card("NVIDIA HGX H100", "$ 2.19/GPU/h"), footnote=""))).values()
    assert offer.price_per_hour == 17.52


def test_a_per_node_price_is_the_instance_price() -> None:
    body = "- 8x NVIDIA H100 GPU 80 GB, price per node"
    (offer,) = offers(parse(html(card("NVIDIA HGX H100", "$ 17.52/h", body), footnote=""))).values()
    assert (offer.price_per_hour, offer.provider_data["price_basis"]) == (17.52, "USD per instance-hour")


def test_the_card_and_the_footnote_must_agree() -> None:
    body = "- 8x NVIDIA H100 GPU 80 GB, price per node"
    with pytest.raises(LayoutChanged, match="which basis the price is in is unclear"):
        parse(html(card("NVIDIA HGX H100", "$ 2.19/h", body)))


def test_a_price_in_euros_keeps_its_currency_and_a_monthly_one_is_per_hour() -> None:
    found = offers(
        parse(
            html(
                card("NVIDIA HGX H100", "€ 2,19/h"),
                card("NVIDIA L40S", "$ 730/month", "- 1x NVIDIA L40S GPU 48 GB"),
            )
        )
    )
    assert (found["8x NVIDIA HGX H100"].currency, found["8x NVIDIA HGX H100"].price_per_hour) == (
        "EUR",
        17.52,
    )
    assert found["1x NVIDIA L40S"].price_per_hour == 1.0


# --- cards ---------------------------------------------------------------------------------------


def test_no_gpu_count_stated_is_one_gpu_and_says_so() -> None:
    (offer,) = offers(parse(html(card("NVIDIA L40S", "$ 1.10/h", "48 GB GDDR6")))).values()
    assert (offer.instance_type, offer.gpu_count, offer.price_per_hour) == ("1x NVIDIA L40S", 1.0, 1.1)
    assert offer.provider_data["gpu_count_stated"] is False


def test_a_per_node_price_without_a_count_is_a_wrong_row() -> None:
    (offer,) = offers(parse(html(card("NVIDIA L40S", "$ 9.00/h", "price per node"), footnote=""))).values()
    assert offer.problem == "price '$ 9.00/h' is per node but the card states no GPU count"


def test_a_zero_price_is_a_wrong_row() -> None:
    (offer,) = offers(parse(html(card("NVIDIA HGX H100", "$ 0.00/h")))).values()
    assert offer.problem == "price '$ 0.00/h' is not a positive number"


def test_commitment_cards_are_excluded_but_on_demand_ones_that_mention_one_are_not() -> None:
    items = parse(
        html(
            card("NVIDIA HGX H100", "$ 1.60/h", "- 8x NVIDIA H100 GPU 80 GB, 12-month reserved contract"),
            card(
                "NVIDIA HGX H200", "$ 2.80/h", "- 8x NVIDIA H200 GPU 141 GB, on-demand; reserved on request"
            ),
        )
    )
    assert sorted(offers(items)) == ["8x NVIDIA HGX H200"]
    assert exclusions(items) == {"commitment_price": 1}


def test_a_repeated_card_is_counted_once() -> None:
    twice = card("NVIDIA HGX H100", "$ 2.19/h")
    items = parse(html(twice, twice))
    assert len(offers(items)) == 1
    assert exclusions(items) == {"repeated_card": 1}


def test_a_heading_element_names_the_gpu_too() -> None:
    body = html(
        "<div><h3>NVIDIA H100 PCIe On-Demand</h3><div><span>$</span> <span>1.90</span><span>/h</span></div>"
        "<p>1x NVIDIA H100 GPU 80 GB</p></div>"
    )
    (offer,) = offers(parse(body)).values()
    assert (offer.instance_type, offer.gpu_name_raw, offer.price_per_hour) == (
        "1x NVIDIA H100 PCIe",
        "H100 PCIe",
        1.9,
    )


def test_a_page_of_quote_requests_only_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="no GPU card with a price per unit of time"):
        parse(html(card("NVIDIA HGX B200", "RFQ")))


def test_prices_without_a_time_unit_are_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="no GPU card with a price"):
        parse(html(card("NVIDIA HGX H100", "$ 2.19")))


def test_helpers() -> None:
    assert genesiscloud.node_of("- 8x NVIDIA H100 GPU 80 GB - 192 vCPUs") == (8, 80.0)
    assert genesiscloud.node_of("8 x NVIDIA HGX B200 (180 GB)") == (8, 180.0)
    assert genesiscloud.node_of("4x NVIDIA L40S") == (4, None)
    assert genesiscloud.node_of("NVIDIA L40S 48 GB") == (None, None)
    # a node line is never the title, wherever it stands in the card
    node_first = pages.soup("<div><p>- 8x NVIDIA H100 GPU 80 GB</p><div>NVIDIA HGX&trade; H100</div></div>")
    assert genesiscloud.heading_of(node_first) == "NVIDIA HGX H100"
    assert genesiscloud.heading_of(pages.soup("<div><p>Block storage</p></div>")) == ""
    doc = pages.soup(html(card("NVIDIA HGX H100", "$ 2.19/h")))
    assert [pages.clean(t.get_text(" ")) for t in genesiscloud.price_holders(doc)] == ["$ 2.19/h"]
    assert genesiscloud.footnote_basis(doc) == pages.Stated(
        per_gpu=True, source="the footnote 'Prices per GPU per hour, billed per minute.'"
    )


# --- HTTP path ------------------------------------------------------------------------------------


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(genesiscloud.fetch(client, {}))
    assert [r.url for r in responses] == ["https://www.genesiscloud.com/pricing"]
    assert sorted(offers(list(genesiscloud.parse(responses)))) == ["8x NVIDIA HGX H100", "8x NVIDIA HGX H200"]


def test_not_modified_keeps_the_scope_current() -> None:
    (item,) = genesiscloud.parse([page(b"", status=304)])
    assert isinstance(item, Unchanged) and item.scope == {"scope": "on_demand:gpu-instances"}


def test_module_contract() -> None:
    assert (genesiscloud.name, genesiscloud.requires) == ("genesiscloud", ())


@pytest.mark.network
def test_live_pricing_page_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lift the offline guard: this test exists to reach www.genesiscloud.com
    with make_client() as client:
        responses = list(genesiscloud.fetch(client, {}))
    found = offers(list(genesiscloud.parse(responses)))
    # the page sells 8-GPU HGX nodes; each price must come with its basis and a GPU count
    assert found and all(o.problem is None for o in found.values())
    assert any(o.gpu_count == 8 for o in found.values())
