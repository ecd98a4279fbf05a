"""Paperspace pricing page: the real January 2024 capture, footnotes, hidden blocks, replay."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connectors import paperspace
from connectors.base import LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
CAPTURE = "paperspace/pricing-page-excerpt-wayback-20240123.html"
RULE = "Multiply the specs and price of each type above by the number of GPUs."


def page(body: bytes | str, status: int = 200) -> RawResponse:
    return RawResponse(
        url=paperspace.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=body.encode() if isinstance(body, str) else body,
    )


def offers_of(items: list[Any]) -> dict[str, Offer]:
    return {o.instance_type: o for o in items if isinstance(o, Offer)}


def one_card(price: str = "0.76", multi: str = "2x 4x", notes: str = "", rule: bool = True) -> str:
    return (
        '<div><div class="instance-blocks-flex"><h1>A4000</h1><div class="instance-price-wrap"><div>$</div>'
        f"<h1>{price}</h1><div>/ hour</div></div><ul><li><p>45GB RAM</p></li><li><p>8 vCPU</p></li></ul>"
        f"<div><div>Multi-GPU types:</div><div>{multi}</div></div></div></div>{notes}"
        + (
            "<div>Multiply the specs and price of each type above by the number of GPUs.</div>"
            if rule
            else ""
        )
    )


# --- the real capture -----------------------------------------------------------------------------


def test_real_capture(shared_raw: Path) -> None:
    items = list(paperspace.parse([page((shared_raw / CAPTURE).read_bytes())]))
    offers = offers_of(items)
    assert len(offers) == 30
    assert exclusions(items) == {"commitment_price": 6}  # H100 1x/8x card figure, A100-80G 1x..8x
    a4000 = offers["A4000"]
    assert (a4000.price_per_hour, a4000.gpu_count, a4000.vcpus, a4000.ram_gb) == (0.76, 1.0, 8.0, 45.0)
    assert offers["A4000x4"].price_per_hour == 3.04 and offers["A4000x4"].gpu_count == 4.0
    assert (offers["V100"].price_per_hour, offers["V100"].gpu_memory_gb_raw) == (2.30, 16.0)
    assert (offers["P6000x2"].price_per_hour, offers["P6000x2"].ram_gb) == (2.20, 60.0)
    assert offers["M4000"].price_per_hour == 0.45 and "M4000x2" not in offers  # "none"
    assert offers["RTX4000x2"].price_per_hour == 1.12
    # The H100 card shows $2.24*, a 3-year commitment; its footnote gives on-demand $6.00/hour.
    h100 = offers["H100"]
    assert (h100.price_per_hour, h100.ram_gb, h100.vcpus) == (6.00, 256.0, 20.0)
    assert h100.provider_data["price_from_footnote"] and h100.provider_data["promo"]
    assert h100.provider_data["commitment_price_text"] == "$ 2.24* / hour"
    assert offers["H100x8"].price_per_hour == 48.0 and "H100x2" not in offers
    # The hidden legacy $3.09 block is never read, and A100-80G has only a commitment price.
    assert not any(o.price_per_hour == 3.09 for o in offers.values())
    assert not any(key.startswith("A100-80G") for key in offers)
    assert all(o.pricing_type == "on_demand" and o.problem is None for o in offers.values())
    assert {o.scope for o in offers.values()} == {"pricing:dedicated_gpus"}


def test_real_capture_maps_with_interconnect(shared_raw: Path) -> None:
    catalog = HardwareCatalog.load()
    offers = offers_of(list(paperspace.parse([page((shared_raw / CAPTURE).read_bytes())])))
    matches = {
        key: catalog.resolve("paperspace", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for key, o in offers.items()
    }
    assert [key for key, match in matches.items() if match is None] == []
    assert (matches["H100x8"].gpu_name, matches["H100x8"].intra_node_interconnect) == ("H100-SXM", "NVSwitch")
    assert (matches["P4000"].gpu_name, matches["RTX5000x2"].gpu_name) == ("Quadro-P4000", "Quadro-RTX5000")
    assert matches["A6000x4"].intra_node_interconnect == "PCIe"


# --- helpers and rules ----------------------------------------------------------------------------


def test_read_specs() -> None:
    specs = paperspace.read_specs(["16 GB GPU", "30 GB RAM", "8 vCPU"])
    assert (specs.vram_gb, specs.ram_gb, specs.vcpus, specs.description) == (16.0, 30.0, 8.0, None)
    named = paperspace.read_specs(["NVIDIA HGX H100 GPU", "256 GB RAM", "20 vCPU"])
    assert (named.vram_gb, named.description) == (None, "NVIDIA HGX H100 GPU")


def test_footnotes_are_keyed_by_their_marks() -> None:
    notes = paperspace.footnotes(
        paperspace.pages.soup("<p>*$2 is for a 1-year commitment.</p><p>**other</p><p>plain</p>")
    )
    assert notes == {"*": "*$2 is for a 1-year commitment.", "**": "**other"}


def test_a_marked_price_without_its_footnote_is_a_wrong_row() -> None:
    offers = offers_of(list(paperspace.parse([page(one_card(price="0.76*"))])))
    assert all(math.isnan(o.price_per_hour) and "footnote" in o.problem for o in offers.values())


def test_commitment_without_on_demand_is_excluded() -> None:
    note = "<p>*$0.76/hour pricing is for a 3-year commitment.</p>"
    items = list(paperspace.parse([page(one_card(price="0.76*", notes=note))]))
    assert not offers_of(items) and exclusions(items) == {"commitment_price": 3}


def test_without_the_multiply_rule_only_one_gpu_machines_are_priced() -> None:
    items = list(paperspace.parse([page(one_card(rule=False))]))
    assert list(offers_of(items)) == ["A4000"]
    assert exclusions(items) == {"multi_gpu_price_not_stated": 2}


def test_a_zero_price_is_a_flagged_offer() -> None:
    offers = offers_of(list(paperspace.parse([page(one_card(price="0.00"))])))
    assert offers["A4000x2"].problem == "price 0.0 is not a positive price"


def test_no_cards_raises_layout_changed() -> None:
    with pytest.raises(LayoutChanged, match="Multi-GPU types"):
        list(paperspace.parse([page("<html><body><h4>Pricing moved</h4></body></html>")]))


def test_cards_without_price_blocks_raise_layout_changed() -> None:
    with pytest.raises(LayoutChanged, match="/ hour"):
        list(paperspace.parse([page(one_card().replace("/ hour", "/ unit"))]))


def test_not_modified_keeps_the_scope() -> None:
    (item,) = paperspace.parse([page(b"", status=304)])
    assert isinstance(item, Unchanged) and item.scope == {"scope": "pricing:dedicated_gpus"}


def test_replay_cassette_fetches_and_parses() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(paperspace.fetch(client, {}, None))
    items = list(paperspace.parse(responses))
    offers = offers_of(items)
    assert sorted(offers) == [
        "A4000",
        "A4000x2",
        "A4000x4",
        "A6000",
        "A6000x2",
        "A6000x4",
        "H100",
        "H100x8",
        "P4000",
    ]
    assert offers["H100x8"].price_per_hour == pytest.approx(47.6)
    assert exclusions(items) == {"commitment_price": 6}


@pytest.mark.network
def test_live_pricing_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # this test exists to talk to paperspace.com
    with make_client() as client:
        responses = list(paperspace.fetch(client, {}, None))
    offers = [o for o in paperspace.parse(responses) if isinstance(o, Offer)]
    assert offers and not [o for o in offers if o.problem]
