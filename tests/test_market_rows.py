"""Marketplace rows fail alone (issue 19 item 4): a host row missing a field is quarantined with
its reason while the rest loads; a segment of few hosts does not move on one host's word.

Over each marketplace's own fixture (tests/fixtures/<slug>/) and, for Vast and Lium, the real
captures in ../shared/data/raw (skipped when absent)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import pytest

from connectors import akash, lium, market, tensordock, vast
from connectors.base import LayoutChanged, Offer, RawResponse
from tests.conftest import REPO
from tests.factories import make_offer
from warehouse.db import connect, migrate
from warehouse.load import Guards, load_offers

FIXTURES = REPO / "tests" / "fixtures"
T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
HOUR = timedelta(hours=1)


def answer(module: ModuleType, payload: Any) -> RawResponse:
    return RawResponse(module.API_URL, "GET", 200, T0, body=json.dumps(payload).encode())


# slug -> (module, fixture, the rows of a payload, a field no offer can be formed without)
CASES: dict[str, tuple[ModuleType, str, Callable[[Any], list[Any]], str]] = {
    "vast": (vast, "vast/bundles__2026-12-01.json", vast.host_offers, "gpu_name"),
    "lium": (lium, "lium/nodes__2026-12-01.json", lium.nodes, "gpu_model"),
    "tensordock": (
        tensordock,
        "tensordock/hostnodes__2026-12-01.json",
        tensordock.hostnodes,
        "available_resources",
    ),
    "akash": (akash, "akash/gpu-prices__2026-12-01.json", akash.models, "model"),
}


def offers(items: list[Any]) -> list[Offer]:
    return [i for i in items if isinstance(i, Offer)]


def good(items: list[Any]) -> dict[tuple, float]:
    return {o.key: o.price_per_hour for o in offers(items) if o.problem is None}


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(":memory:")
    migrate(con)
    yield con
    con.close()


def broken_parse(module: ModuleType, payload: Any, rows: Callable[[Any], list[Any]], field: str, index: int):
    """Parse `payload` with row `index` missing `field`, and with that row removed entirely."""
    broken, without = json.loads(json.dumps(payload)), json.loads(json.dumps(payload))
    rows(broken)[index].pop(field)
    del rows(without)[index]
    return list(module.parse([answer(module, broken)])), list(module.parse([answer(module, without)]))


@pytest.mark.parametrize("slug", sorted(CASES))
def test_a_row_missing_a_field_is_quarantined_and_the_rest_loads(slug, con):
    module, fixture, rows, field = CASES[slug]
    payload = json.loads((FIXTURES / fixture).read_text())
    items, without = broken_parse(module, payload, rows, field, 0)
    flagged = [o for o in offers(items) if o.instance_type.startswith("unreadable host row")]
    assert len(flagged) == 1 and f"`{field.split('.')[0]}" in (flagged[0].problem or ""), flagged
    assert flagged[0].problem.startswith("host row unreadable: ")
    # every other row is read exactly as if the broken one were not there
    assert good(items) == good(without) and good(items)
    result = load_offers(con, "r1", slug, offers(items), now=T0)
    assert result.status == "ok" and result.offers_loaded == len(good(items))
    reasons = [
        r for (r,) in con.execute("select reason from ops.quarantine where provider = ?", [slug]).fetchall()
    ]
    assert any(r.startswith("host row unreadable:") for r in reasons)


@pytest.mark.parametrize("slug", sorted(CASES))
def test_every_row_unreadable_is_a_format_change(slug):
    module, fixture, rows, field = CASES[slug]
    payload = json.loads((FIXTURES / fixture).read_text())
    for row in rows(payload):
        row.pop(field, None)
    with pytest.raises(LayoutChanged, match=r"every one of \d+ host rows is unreadable .*changed its format"):
        list(module.parse([answer(module, payload)]))


def test_a_row_that_is_not_an_object_fails_alone():
    payload = json.loads((FIXTURES / "vast/bundles__2026-12-01.json").read_text())
    vast.host_offers(payload).append(None)
    flagged = [
        o for o in offers(list(vast.parse([answer(vast, payload)]))) if o.instance_type.startswith("unread")
    ]
    assert [o.problem for o in flagged] == ["host row unreadable: host row is not an object: None"]


def test_the_shared_host_readers():
    assert (
        market.host_number(2) == 2.0 and market.host_number("2") is None and market.host_number(True) is None
    )
    assert market.host_price({"p": 0.5}, "p") == (0.5, None)
    price, problem = market.host_price({}, "p")
    assert price != price and problem == "`p` missing"
    assert market.host_price({"p": "x"}, "p")[1] == "`p` is not a number: 'x'"


# --- real captures ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slug", "capture", "wrap"),
    [
        ("vast", "vast/ewyluda-fixture-bundles-reduced-2026.json", lambda hosts: {"offers": hosts}),
        ("lium", "lium/public-v1-nodes-recorded-2026-09-10-trimmed.json", lambda payload: payload),
    ],
)
def test_a_broken_row_of_a_real_capture_fails_alone(slug, capture, wrap, shared_raw: Path):
    module, _, rows, field = CASES[slug]
    payload = wrap(json.loads((shared_raw / capture).read_text()))
    middle = len(rows(payload)) // 2
    items, without = broken_parse(module, payload, rows, field, middle)
    assert len([o for o in offers(items) if o.instance_type.startswith("unreadable host row")]) == 1
    assert good(items) == good(without) and len(good(items)) >= 5


# --- thin segments ----------------------------------------------------------------------------------------


def segment(price: float, hosts: int) -> Offer:
    return make_offer(
        "2x RTX 4090 24GB (community-verified)",
        price,
        provider="vast",
        price_source="market",
        gpu_count=2.0,
        scope="market:on_demand",
        provider_data={"price_statistic": "p10", "host_offers": hosts},
    )


def run(con, run_id: str, offer: Offer, now: datetime, guards: Guards | None = None):
    result = load_offers(con, run_id, "vast", [offer], now=now, guards=guards)
    con.execute(
        "insert into ops.provider_runs (run_id, provider, status, started_at) values (?, ?, ?, ?)",
        [run_id, "vast", result.status, now],
    )
    return result


def price(con) -> float:
    return con.execute("select price_per_hour from core.offer_prices where valid_to is null").fetchall()[0][0]


def test_a_two_host_segment_does_not_follow_one_host_under_the_jump_factor(con):
    """The issue's case: a 2-host segment followed one cheap host by 2.9x, under the 3x guard."""
    run(con, "r1", segment(1.00, hosts=2), T0)
    held = run(con, "r2", segment(1.00 / 2.9, hosts=2), T0 + HOUR)
    assert held.quarantine_reasons == {"thin_market": 1} and price(con) == 1.00
    details = con.execute("select details from ops.quarantine where reason = 'thin_market'").fetchall()
    assert json.loads(details[0][0]) == {
        "old_price_per_hour": 1.00,
        "new_price_per_hour": pytest.approx(1.00 / 2.9),
        "currency": "USD",
        "host_offers": 2,
        "market_min_hosts": 3,
    }


def test_repeating_one_host_s_listing_never_confirms_it(con):
    """The same listing read again is the same one witness: ten identical runs publish nothing."""
    run(con, "r0", segment(1.00, hosts=2), T0)
    for i in range(1, 11):
        result = run(con, f"r{i}", segment(0.40, hosts=2), T0 + i * HOUR)
        assert result.quarantine_reasons == {"thin_market": 1}
    assert price(con) == 1.00


def test_the_move_lands_once_the_segment_reaches_the_host_floor(con):
    run(con, "r0", segment(1.00, hosts=2), T0)
    assert run(con, "r1", segment(0.40, hosts=2), T0 + HOUR).quarantine_reasons == {"thin_market": 1}
    # three hosts now stand behind the price: an ordinary move under the 3x jump factor lands
    assert run(con, "r2", segment(0.40, hosts=3), T0 + 2 * HOUR).quarantine_reasons == {}
    assert price(con) == pytest.approx(0.40)


def test_a_populated_segment_moving_past_the_jump_factor_still_needs_two_runs(con):
    run(con, "r0", segment(1.00, hosts=2), T0)
    run(con, "r1", segment(0.20, hosts=2), T0 + HOUR)  # thin_market: confirms nothing
    assert run(con, "r2", segment(0.20, hosts=5), T0 + 2 * HOUR).quarantine_reasons == {"price_jump": 1}
    assert run(con, "r3", segment(0.20, hosts=5), T0 + 3 * HOUR).quarantine_reasons == {}
    assert price(con) == pytest.approx(0.20)


def test_accept_changes_publishes_a_thin_segment_s_move(con):
    run(con, "r0", segment(1.00, hosts=1), T0)
    result = run(con, "r1", segment(0.40, hosts=1), T0 + HOUR, Guards(accept_changes=True))
    assert result.quarantine_reasons == {} and price(con) == pytest.approx(0.40)


def test_a_thin_segment_moving_within_the_confirm_factor_loads(con):
    run(con, "r1", segment(1.00, hosts=1), T0)
    assert run(con, "r2", segment(1.05, hosts=1), T0 + HOUR).quarantine_reasons == {}
    assert price(con) == pytest.approx(1.05)


def test_a_well_populated_segment_moves_as_the_jump_factor_allows(con):
    run(con, "r1", segment(1.00, hosts=12), T0)
    assert run(con, "r2", segment(1.00 / 2.9, hosts=12), T0 + HOUR).quarantine_reasons == {}


def test_the_host_floor_is_a_setting(con):
    run(con, "r1", segment(1.00, hosts=4), T0, Guards(market_min_hosts=5))
    result = run(con, "r2", segment(0.7, hosts=4), T0 + HOUR, Guards(market_min_hosts=5))
    assert result.quarantine_reasons == {"thin_market": 1}
    assert run(con, "r3", segment(0.7, hosts=4), T0 + 2 * HOUR).quarantine_reasons == {}  # floor 3


def test_a_list_price_is_never_a_thin_segment(con):
    """Only a marketplace aggregate stands on hosts; a `host_offers` key on a list row is not read."""
    listed = make_offer("A", 1.0, provider="vast", gpu_count=2.0, provider_data={"host_offers": 1})
    run(con, "r1", listed, T0)
    assert run(con, "r2", replace(listed, price_per_hour=0.6), T0 + HOUR).quarantine_reasons == {}
