"""What a user sees of a guard (issue 19): a spot price above on-demand is held where the provider
caps spot at on-demand and flagged where a market may really ask more; a held price says so in
the marts (`price_held_reason`, `price_held_since`); an offer the mart drops for an absurd
converted price is listed in marts.dropped_offers and counted by `gpucost status`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import duckdb
import pytest
from typer.testing import CliRunner

from answers.status import dropped_offers, freshness
from connectors.base import FxRate, Offer
from flows.cli import app
from tests.factories import make_offer
from warehouse.db import Settings, connect, load_seeds, migrate, open_warehouse
from warehouse.hardware import HardwareCatalog
from warehouse.load import Guards, load_fx_rates, load_offers, spot_caps
from warehouse.marts import build_marts

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
HOUR = timedelta(hours=1)
CATALOG = HardwareCatalog.load()


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    yield con
    con.close()


def h100(price: float, provider: str, pricing_type: str = "on_demand", **fields) -> Offer:
    return make_offer(
        "8x H100",
        price,
        provider=provider,
        pricing_type=pricing_type,
        gpu_name_raw="H100",
        gpu_memory_gb_raw=80.0,
        gpu_count=8.0,
        scope=f"{pricing_type}:us-east-1",
        **fields,
    )


def current(con, provider: str) -> dict[str, tuple[float, dict]]:
    rows = con.execute(
        "select pricing_type, price_per_hour, provider_data from core.offer_prices "
        "where provider = ? and valid_to is null",
        [provider],
    ).fetchall()
    return {kind: (price, json.loads(data)) for kind, price, data in rows}


# --- spot above on-demand ---------------------------------------------------------------------------


def test_who_caps_spot_at_on_demand(con):
    assert spot_caps(con, "nebius") and spot_caps(con, "vultr")  # providers.csv: fixed_discount
    assert not any(spot_caps(con, p) for p in ("aws", "gcp", "vast", "lambdalabs"))  # markets, no spot


def test_a_fixed_discount_spot_above_on_demand_is_held(con):
    """Swapped columns: the spot column holds the on-demand price and back."""
    load_offers(con, "r1", "nebius", [h100(24.0, "nebius"), h100(12.0, "nebius", "spot")], now=T0)
    result = load_offers(
        con, "r2", "nebius", [h100(24.0, "nebius"), h100(30.0, "nebius", "spot")], now=T0 + HOUR
    )
    assert result.quarantine_reasons == {"spot_above_on_demand": 1}
    assert current(con, "nebius")["spot"][0] == 12.0  # the last good spot price stays
    (details,) = con.execute(
        "select details from ops.quarantine where reason = 'spot_above_on_demand'"
    ).fetchall()[0]
    assert json.loads(details) == {"spot_usd_per_hour": 30.0, "on_demand_usd_per_hour": 24.0}


def test_a_spot_above_the_current_on_demand_is_held_when_on_demand_is_not_in_the_batch(con):
    load_offers(con, "r1", "vultr", [h100(18.0, "vultr")], now=T0)
    result = load_offers(con, "r2", "vultr", [h100(20.0, "vultr", "spot", zone="ewr-1")], now=T0 + HOUR)
    assert result.quarantine_reasons == {"spot_above_on_demand": 1}
    assert "spot" not in current(con, "vultr")  # a new spot offer held: nothing to keep, nothing shown


def test_an_aws_spot_above_on_demand_is_flagged_not_held(con):
    """AWS documents a default maximum price (On-Demand), not a cap on the Spot price itself."""
    load_offers(con, "r1", "aws", [h100(98.32, "aws")], now=T0)
    spot = h100(120.0, "aws", "spot", zone="us-east-1a", price_source="market")
    assert load_offers(con, "r2", "aws", [spot], now=T0 + HOUR).quarantine_reasons == {}
    assert current(con, "aws")["spot"][1]["spot_above_on_demand"] == pytest.approx(120.0 / 98.32, abs=1e-4)


def test_a_market_spot_above_on_demand_is_published_and_flagged(con):
    """GCP's catalog prices A100-80GB and H200 spot up to 1.2x on-demand (see load.py): real."""
    offers = [h100(36.60, "gcp"), h100(43.95, "gcp", "spot", price_source="market")]
    assert load_offers(con, "r1", "gcp", offers, now=T0).quarantine_reasons == {}
    price, data = current(con, "gcp")["spot"]
    assert price == 43.95 and data["spot_above_on_demand"] == pytest.approx(43.95 / 36.60, abs=1e-4)
    assert "spot_above_on_demand" not in current(con, "gcp")["on_demand"][1]


def test_spot_at_or_below_on_demand_is_no_finding(con):
    offers = [h100(24.0, "nebius"), h100(24.005, "nebius", "spot"), h100(9.0, "nebius", "spot", region="eu")]
    assert load_offers(con, "r1", "nebius", offers, now=T0).quarantine_reasons == {}
    assert "spot_above_on_demand" not in current(con, "nebius")["spot"][1]


def test_spot_and_on_demand_are_compared_in_dollars(con):
    load_fx_rates(con, "fx", [FxRate("EUR", date(2026, 11, 30), 1.08, "ECB")], now=T0)
    # 23 EUR is $24.84: above the $24.00 on-demand, though the number is smaller
    offers = [h100(24.0, "nebius"), h100(23.0, "nebius", "spot", currency="EUR")]
    assert load_offers(con, "r1", "nebius", offers, now=T0).quarantine_reasons == {"spot_above_on_demand": 1}


def test_accept_changes_publishes_a_spot_above_on_demand_flagged(con):
    offers = [h100(24.0, "nebius"), h100(30.0, "nebius", "spot")]
    result = load_offers(con, "r1", "nebius", offers, now=T0, guards=Guards(accept_changes=True))
    assert result.quarantine_reasons == {}
    assert current(con, "nebius")["spot"][1]["spot_above_on_demand"] == 1.25


# --- a held price says so in the marts ----------------------------------------------------------------


def held(con) -> list[tuple]:
    build_marts(con, catalog=CATALOG, settings=Settings())
    return con.execute(
        "select pricing_type, price_per_hour, price_held_reason, price_held_since, last_seen_at "
        "from marts.gpu_offers order by pricing_type"
    ).fetchall()


def test_a_held_price_shows_its_reason_and_since_when(con):
    load_offers(con, "r1", "lambdalabs", [h100(24.0, "lambdalabs")], now=T0)
    assert held(con) == [("on_demand", 24.0, None, None, T0)]
    for i in (1, 2):  # x100 (cents read as dollars) is never confirmed: held run after run
        load_offers(con, f"r{i + 1}", "lambdalabs", [h100(2400.0, "lambdalabs")], now=T0 + i * HOUR)
    # the price shown is the last good one, seen at T0, held since the first run that read 2400
    assert held(con) == [("on_demand", 24.0, "unit_change", T0 + HOUR, T0)]
    # a run that reads the good price again ends the hold
    load_offers(con, "r4", "lambdalabs", [h100(24.5, "lambdalabs")], now=T0 + 3 * HOUR)
    assert held(con) == [("on_demand", 24.5, None, None, T0 + 3 * HOUR)]


def test_a_thin_segment_held_shows_thin_market(con):
    def segment(price: float) -> Offer:
        return h100(price, "vast", price_source="market", provider_data={"host_offers": 1})

    load_offers(con, "r1", "vast", [segment(16.0)], now=T0)
    load_offers(con, "r2", "vast", [segment(9.0)], now=T0 + HOUR)
    assert held(con) == [("on_demand", 16.0, "thin_market", T0 + HOUR, T0)]


# --- a dropped offer is on record --------------------------------------------------------------------


def test_an_absurd_converted_price_is_listed_as_dropped(con):
    load_offers(con, "r1", "lambdalabs", [h100(24.0, "lambdalabs")], now=T0)
    load_offers(con, "r1", "nebius", [h100(16.0, "nebius")], now=T0)
    build_marts(con, catalog=CATALOG, settings=Settings(max_usd_per_gpu_hour=2.5))  # $3 and $2/GPU-h
    assert [p for (p,) in con.execute("select provider from marts.gpu_offers").fetchall()] == ["nebius"]
    dropped = con.execute(
        "select provider, instance_type, price_usd_per_gpu_hour, drop_reason from marts.dropped_offers"
    ).fetchall()
    assert dropped == [("lambdalabs", "8x H100", 3.0, "absurd_price")]
    assert dropped_offers(con) == [("lambdalabs", "absurd_price", 1)]
    build_marts(con, catalog=CATALOG, settings=Settings())
    assert dropped_offers(con) == []


def test_no_marts_yet_means_nothing_dropped():
    con = connect(":memory:")
    try:
        assert dropped_offers(con) == []
    finally:
        con.close()


def test_status_counts_the_dropped_offers(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    monkeypatch.setenv("GPUCOST_MAX_USD_PER_GPU_HOUR", "2.5")
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    try:
        load_offers(con, "r1", "lambdalabs", [h100(24.0, "lambdalabs")], now=T0)
        con.execute(
            "insert into ops.provider_runs (run_id, provider, status, started_at, finished_at) "
            "values ('r1', 'lambdalabs', 'ok', ?, ?)",
            [T0, T0],
        )
        build_marts(con, catalog=CATALOG, settings=Settings())
    finally:
        con.close()
    result = CliRunner().invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    assert "warning: lambdalabs: 1 current offer(s) left out of the answers" in result.stdout
    flat = result.stdout.replace("\n", " ")
    assert "GPUCOST_MAX_USD_PER_GPU_HOUR ($2.5/GPU-hour)" in flat
    # where to look, without SQL written in flows/: the table and the command that reads it
    assert "the table marts.dropped_offers lists them (`gpucost sql`)" in flat


def test_the_page_counts_every_guard_s_held_prices(con):
    """The freshness panel's "held" count covers unit_change, thin_market and spot holds too."""

    def segment(price: float) -> Offer:
        return h100(price, "vast", price_source="market", provider_data={"host_offers": 1})

    for i, price in enumerate((16.0, 9.0)):
        load_offers(con, f"r{i}", "vast", [segment(price)], now=T0 + i * HOUR)
        con.execute(
            "insert into ops.provider_runs (run_id, provider, status, started_at, finished_at) "
            "values (?, 'vast', 'ok', ?, ?)",
            [f"r{i}", T0 + i * HOUR, T0 + i * HOUR],
        )
    build_marts(con, catalog=CATALOG, settings=Settings())
    (vast,) = freshness(con)["providers"]
    assert vast["held_prices"] == 1
