"""Hetzner GPU servers: the matrix page's plans joined to the website price feed; hourly rates, a
monthly cap and a one-time set-up fee.

No capture of either body exists in ../shared/data/raw (PROVENANCE.md lists Hetzner GEX among the
sources nobody recorded), so every test here reads our own fixtures, written in the structure
peers show (tests/fixtures/README.md), or edits of them.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connectors import hetzner, pages
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures" / "hetzner"
PAGE = (FIXTURES / "matrix-gpu__2026-12-02.html").read_text(encoding="utf-8")
FEED = json.loads((FIXTURES / "live-data-prices__2026-12-02.json").read_text(encoding="utf-8"))
CATALOG = HardwareCatalog.load()


def _responses(page: str = PAGE, feed: Any = FEED) -> list[RawResponse]:
    at = datetime(2026, 12, 2, tzinfo=UTC)
    body = feed if isinstance(feed, bytes) else json.dumps(feed).encode()
    return [
        RawResponse(
            hetzner.PAGE_URL, "GET", 200, at, content_type="text/html; charset=utf-8", body=page.encode()
        ),
        RawResponse(hetzner.PRICES_URL, "GET", 200, at, content_type="application/json", body=body),
    ]


def _offers(page: str = PAGE, feed: Any = FEED) -> dict[tuple[str, str], Offer]:
    return {
        (o.instance_type, o.region): o for o in hetzner.parse(_responses(page, feed)) if isinstance(o, Offer)
    }


def _feed(edit: Any) -> Any:
    feed = json.loads(json.dumps(FEED))
    edit(feed)
    return feed


# --- the fixture ----------------------------------------------------------------------------------


def test_every_plan_in_every_datacenter_at_its_hourly_rate() -> None:
    found = _offers()
    assert sorted(found) == [
        ("GEX131", "fsn1"),
        ("GEX131", "nbg1"),
        ("GEX45", "fsn1"),
        ("GEX45", "hel1"),
        ("GEX45", "nbg1"),
        ("GEX63", "hel1"),
    ]
    gex45 = found[("GEX45", "fsn1")]
    # Hetzner bills to the hour: the price is the hourly rate, the month is its cap
    assert (gex45.price_per_hour, gex45.currency, gex45.billing_unit) == (0.3402, "EUR", "hour")
    assert gex45.monthly_price_cap == 212.3 and "price_monthly" not in gex45.provider_data
    assert gex45.setup_fee == 209.0  # one-time, per server, in the offer's currency
    assert (gex45.gpu_name_raw, gex45.gpu_count, gex45.gpu_memory_gb_raw) == (
        "NVIDIA RTX PRO 4000 Blackwell SFF",
        1.0,
        24.0,
    )
    assert (gex45.pricing_type, gex45.price_source, gex45.scope) == ("on_demand", "list", hetzner.SCOPE)
    assert found[("GEX131", "nbg1")].setup_fee == 1499.0
    assert all(o.problem is None for o in found.values())


def test_an_inactive_location_is_offered_unavailable() -> None:
    found = _offers()
    assert found[("GEX131", "fsn1")].available is False
    assert found[("GEX131", "nbg1")].available is True


def test_an_add_on_priced_outside_any_plan_is_not_an_offer() -> None:
    # the IPv4 address (ROBOT_1266) sits in the page beside the plans, not in one
    keys = {o.provider_data["product_key"] for o in _offers().values()}
    assert keys == {"ROBOT_1768", "ROBOT_1767", "ROBOT_1747"}


def test_every_gpu_resolves_to_a_canonical_gpu() -> None:
    for (plan, _), offer in _offers().items():
        match = CATALOG.resolve("hetzner", plan, offer.gpu_name_raw, offer.gpu_memory_gb_raw, offer.gpu_count)
        assert match is not None, plan
        # by alias too, so a renamed plan with a known card still maps
        by_alias = CATALOG.resolve("hetzner", "GEX999", offer.gpu_name_raw, offer.gpu_memory_gb_raw, 1.0)
        assert by_alias is not None and by_alias.gpu_name == match.gpu_name
    assert {CATALOG.resolve("hetzner", p, None, None, 1.0).gpu_name for p, _ in _offers()} == {  # type: ignore[union-attr]
        "RTX-PRO-4000-SFF",
        "RTX-PRO-6000-MaxQ",
    }


def test_gpu_label_reads_the_card_and_its_count() -> None:
    assert hetzner.gpu_label("GEX45 NVIDIA RTX PRO 4000 Blackwell SFF 24 GB GDDR7 ECC") == (
        "NVIDIA RTX PRO 4000 Blackwell SFF",
        1,
    )
    assert hetzner.gpu_label("GEX9 2 x NVIDIA RTX 6000 Ada, 48 GB GDDR6") == ("NVIDIA RTX 6000 Ada", 2)
    assert hetzner.gpu_label("EX44 Intel Core i5-13500") == (None, 1)


# --- what the feed may not say -------------------------------------------------------------------


def test_a_plan_the_feed_does_not_price_is_excluded() -> None:
    feed = _feed(lambda f: f["products"].pop("ROBOT_1767"))
    items = list(hetzner.parse(_responses(feed=feed)))
    assert exclusions(items) == {"not_in_price_feed": 1}
    assert not any(isinstance(i, Offer) and i.instance_type == "GEX63" for i in items)


def test_a_missing_setup_fee_is_a_wrong_row_not_no_fee() -> None:
    feed = _feed(lambda f: f["products"]["ROBOT_1767"]["locations"][0]["prices"].pop("setup"))
    gex63 = _offers(feed=feed)[("GEX63", "hel1")]
    assert gex63.problem == "prices.setup.EUR missing" and gex63.setup_fee is None


def test_a_waived_fee_is_zero() -> None:
    def waive(f: Any) -> None:
        f["products"]["ROBOT_1767"]["locations"][0]["prices"]["setup"]["EUR"] = 0

    gex63 = _offers(feed=_feed(waive))[("GEX63", "hel1")]
    assert gex63.setup_fee == 0.0 and gex63.problem is None


def test_a_negative_fee_is_a_wrong_row() -> None:
    def negative(f: Any) -> None:
        f["products"]["ROBOT_1767"]["locations"][0]["prices"]["setup"]["EUR"] = -5

    assert "not positive" in (_offers(feed=_feed(negative))[("GEX63", "hel1")].problem or "")


def test_one_missing_hourly_rate_is_a_wrong_row() -> None:
    feed = _feed(lambda f: f["products"]["ROBOT_1768"]["locations"][0]["prices"].pop("hourly"))
    found = _offers(feed=feed)
    assert found[("GEX45", "fsn1")].problem == "prices.hourly.EUR missing"
    assert math.isnan(found[("GEX45", "fsn1")].price_per_hour)
    assert found[("GEX45", "nbg1")].problem is None


def test_no_hourly_rate_anywhere_is_a_layout_change() -> None:
    def drop(f: Any) -> None:
        for product in f["products"].values():
            for location in product["locations"]:
                location["prices"].pop("hourly", None)

    with pytest.raises(LayoutChanged, match=r"prices\.hourly\.EUR"):
        list(hetzner.parse(_responses(feed=_feed(drop))))


def test_a_feed_without_products_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="`products`"):
        list(hetzner.parse(_responses(feed={"server": []})))


def test_a_product_without_locations_is_a_layout_change() -> None:
    feed = _feed(lambda f: f["products"]["ROBOT_1768"].update(locations=[]))
    with pytest.raises(LayoutChanged, match=r"ROBOT_1768\.locations"):
        list(hetzner.parse(_responses(feed=feed)))


def test_a_page_without_price_keys_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="product-key"):
        list(hetzner.parse(_responses(page=PAGE.replace("product-key=", "data-key="))))


def test_a_truncated_page_is_refused() -> None:
    with pytest.raises(LayoutChanged, match="truncated"):
        list(hetzner.parse(_responses(page=PAGE[: len(PAGE) // 2])))


def test_both_answers_are_needed() -> None:
    with pytest.raises(LayoutChanged, match="live_data_prices"):
        list(hetzner.parse(_responses()[:1]))


def test_the_page_reads_as_a_reader_sees_it() -> None:
    # the trademark signs and the line break inside the GPU cell do not split the label
    plans = hetzner.matrix_plans(pages.soup(PAGE))
    assert [p.plan for p in plans] == ["GEX45", "GEX63", "GEX131"]
    assert plans[1].gpu_label == "NVIDIA RTX PRO 6000 Blackwell Max-Q" and plans[1].gpu_memory_gb == 96.0


def test_exclusions_are_items_not_errors() -> None:
    feed = _feed(lambda f: f["products"].pop("ROBOT_1747"))
    assert any(isinstance(i, Excluded) for i in hetzner.parse(_responses(feed=feed)))


# --- replay and live ------------------------------------------------------------------------------


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        found = {
            (o.instance_type, o.region): o
            for o in hetzner.parse(list(hetzner.fetch(client, {})))
            if isinstance(o, Offer)
        }
    assert len(found) == 6
    assert found[("GEX63", "hel1")].price_per_hour == 1.5982


@pytest.mark.network
def test_live_matrix_and_price_feed() -> None:
    with make_client() as client:
        found = [o for o in hetzner.parse(list(hetzner.fetch(client, {}))) if isinstance(o, Offer)]
    assert found and all(o.currency == "EUR" and o.instance_type.startswith("GEX") for o in found)
    assert any(o.setup_fee is not None for o in found)
