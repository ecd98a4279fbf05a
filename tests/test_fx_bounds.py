"""Exchange rates with bounds (issue 19 item 3): a rate out of band is never confirmed by
repetition; a stale rate is shown; the mart converts with the rate core used and refuses an
absurd converted price."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from connectors.base import FxRate
from flows.cli import app
from tests.factories import make_offer
from warehouse.db import Settings, connect, load_seeds, migrate, open_warehouse
from warehouse.hardware import HardwareCatalog
from warehouse.load import Guards, fx_band_median, load_fx_rates, load_offers, out_of_band, stale_fx_rates
from warehouse.marts import build_marts
from warehouse.pipeline import ProviderBatch, land

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
DAY = timedelta(days=1)
CATALOG = HardwareCatalog.load()


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    yield con
    con.close()


def history(con, currency: str = "EUR", rate: float = 1.08, days: int = 20, end: date = date(2026, 11, 30)):
    """`days` daily rates of `currency` up to `end`, a little noise around `rate`."""
    rates = [
        FxRate(currency, end - timedelta(days=i), rate * (1 + 0.002 * (i % 3 - 1)), "ECB")
        for i in range(days)
    ]
    load_fx_rates(con, "fx0", rates, now=T0)


def rates_run(con, tmp_path: Path, run_id: str, *rates: FxRate, guards: Guards | None = None):
    batch = ProviderBatch("ecb", "fetched", T0)
    batch.fx_rates = list(rates)
    return land(con, tmp_path, run_id, batch, guards=guards)


def eur_rate(con) -> float:
    return con.execute(
        "select usd_per_unit from core.fx_rates where currency = 'EUR' order by rate_date desc limit 1"
    ).fetchall()[0][0]


def h100(price: float = 2.73, currency: str = "EUR"):
    return make_offer(
        "H100-1-80G",
        price,
        provider="scaleway",
        currency=currency,
        gpu_name_raw="H100",
        gpu_memory_gb_raw=80.0,
        gpu_count=1.0,
    )


# --- the band -------------------------------------------------------------------------------------------


def test_the_band_is_relative_to_the_median_of_the_last_month(con):
    history(con)
    median = fx_band_median(con, "EUR", date(2026, 12, 1))
    assert median == pytest.approx(1.08, rel=0.003)
    assert not out_of_band(1.08 * 1.19, median, 0.2) and out_of_band(1.08 * 1.21, median, 0.2)
    assert out_of_band(1.08 / 1.3, median, 0.2)
    assert fx_band_median(con, "GBP", date(2026, 12, 1)) is None and not out_of_band(5.0, None, 0.2)


def test_a_thousandfold_rate_is_held_however_often_it_repeats(con, tmp_path):
    """The issue's case: a 1000x rate was released by its second identical run."""
    history(con)
    before = eur_rate(con)
    for i in range(1, 4):
        outcome = rates_run(con, tmp_path, f"fx{i}", FxRate("EUR", date(2026, 12, 1), 1080.0, "ECB"))
        assert outcome.status == "rejected" and outcome.offers_quarantined == 1
        assert eur_rate(con) == before
    reasons = con.execute("select distinct reason from ops.quarantine where provider = 'ecb'").fetchall()
    assert reasons == [("fx_out_of_band",)]


def test_a_rate_within_the_band_loads_and_the_others_are_held_alone(con, tmp_path):
    history(con)
    history(con, "GBP", 1.27)
    outcome = rates_run(
        con,
        tmp_path,
        "fx1",
        FxRate("EUR", date(2026, 12, 1), 1.08 * 1.05, "ECB"),
        FxRate("GBP", date(2026, 12, 1), 1.27 * 1.5, "ECB"),  # 1.5x: under the 3x jump guard
    )
    assert outcome.status == "degraded" and outcome.offers_quarantined == 1
    assert eur_rate(con) == pytest.approx(1.08 * 1.05)


def test_a_gap_in_the_history_does_not_unbound_the_band(con, tmp_path):
    history(con, end=date(2026, 9, 1))  # three months without a rate, then a wrong one
    for i in (1, 2):
        outcome = rates_run(con, tmp_path, f"fx{i}", FxRate("EUR", date(2026, 12, 1), 10.8, "ECB"))
        assert outcome.status == "rejected" and "1 fx_out_of_band" in (outcome.hint or "")


def test_accept_changes_publishes_a_rate_out_of_band(con, tmp_path):
    history(con)
    rates_run(
        con, tmp_path, "fx1", FxRate("EUR", date(2026, 12, 1), 1.5, "ECB"), guards=Guards(accept_changes=True)
    )
    assert eur_rate(con) == 1.5


# --- the mart: the rate core used, stale rates, absurd converted prices -----------------------------


def mart(con, **settings) -> dict[str, tuple]:
    build_marts(con, catalog=CATALOG, settings=Settings(**settings))
    rows = con.execute(
        "select provider, price_usd_per_hour, fx_usd_per_unit, fx_rate_date, fx_rate_stale "
        "from marts.gpu_offers"
    ).fetchall()
    return {r[0]: r[1:] for r in rows}


def core_row(con) -> tuple:
    return con.execute(
        "select price_usd_per_hour, fx_rate_date from core.offer_prices where provider = 'scaleway'"
    ).fetchall()[0]


def test_core_and_the_mart_agree_on_the_rate_a_row_used(con):
    load_fx_rates(con, "fx1", [FxRate("EUR", date(2026, 11, 30), 1.05, "ECB")], now=T0)
    load_offers(con, "r1", "scaleway", [h100()], now=T0)
    assert core_row(con) == (pytest.approx(2.73 * 1.05), date(2026, 11, 30))
    # a newer rate arrives; until scaleway is loaded again, both still say the rate it used
    load_fx_rates(con, "fx2", [FxRate("EUR", date(2026, 12, 1), 1.10, "ECB")], now=T0 + DAY)
    usd, rate, rate_date, _ = mart(con)["scaleway"]
    assert (usd, rate, rate_date) == (pytest.approx(2.73 * 1.05), 1.05, date(2026, 11, 30))
    assert core_row(con) == (pytest.approx(usd), rate_date)
    # seen again: converted with the new rate, in core and mart alike, with no new price interval
    load_offers(con, "r2", "scaleway", [h100()], now=T0 + DAY)
    usd, rate, rate_date, _ = mart(con)["scaleway"]
    assert (usd, rate, rate_date) == (pytest.approx(2.73 * 1.10), 1.10, date(2026, 12, 1))
    assert core_row(con) == (pytest.approx(usd), rate_date)
    assert con.execute("select count(*) from core.offer_prices").fetchall() == [(1,)]


def test_a_held_row_never_shows_a_wrong_rate(con, tmp_path):
    """The issue's case: the mart converted every EUR offer with a confirmed 1000x rate (an H100
    at $3,300 per GPU-hour); now that rate never lands, and the mart uses the row's own rate."""
    history(con)
    load_offers(con, "r1", "scaleway", [h100()], now=T0)
    for i in (1, 2):
        rates_run(con, tmp_path, f"fx{i}", FxRate("EUR", date(2026, 12, 1), 1080.0, "ECB"))
    load_offers(con, "r2", "scaleway", [h100()], now=T0 + DAY)
    usd, rate, _, _ = mart(con)["scaleway"]
    assert rate == pytest.approx(1.08, rel=0.003) and usd < 3.5


def test_the_mart_refuses_an_absurd_converted_price(con):
    """The $2,000 rule on the mart's own USD: a row whose conversion is over the limit (here a
    limit of $2 to show it) is not published, while the others are."""
    load_fx_rates(con, "fx1", [FxRate("EUR", date(2026, 11, 30), 1.05, "ECB")], now=T0)
    load_offers(con, "r1", "scaleway", [h100()], now=T0)
    usd = make_offer(
        "H100-1", 1.9, provider="lambdalabs", gpu_name_raw="H100", gpu_memory_gb_raw=80.0, gpu_count=1
    )
    load_offers(con, "r1", "lambdalabs", [usd], now=T0)
    assert set(mart(con)) == {"scaleway", "lambdalabs"}
    assert set(mart(con, max_usd_per_gpu_hour=2.0)) == {"lambdalabs"}  # 2.73 EUR = $2.87


def test_a_rate_older_than_the_limit_is_stale_in_the_mart(con):
    today = datetime.now(UTC).date()
    load_fx_rates(con, "fx1", [FxRate("EUR", today - timedelta(days=30), 1.05, "ECB")], now=T0)
    load_offers(con, "r1", "scaleway", [h100()], now=T0)
    usd = make_offer(
        "H100-1", 1.9, provider="lambdalabs", gpu_name_raw="H100", gpu_memory_gb_raw=80.0, gpu_count=1
    )
    load_offers(con, "r1", "lambdalabs", [usd], now=T0)
    rows = mart(con)
    assert rows["scaleway"][3] is True and rows["lambdalabs"][3] is False  # a USD price has no rate
    assert mart(con, fx_stale_after_days=60)["scaleway"][3] is False
    assert stale_fx_rates(con, 7, today) == [("EUR", today - timedelta(days=30), 1)]
    assert stale_fx_rates(con, 60, today) == []


def test_status_warns_of_a_stale_rate(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    try:
        rate_date = datetime.now(UTC).date() - timedelta(days=30)
        load_fx_rates(con, "fx1", [FxRate("EUR", rate_date, 1.05, "ECB")], now=T0)
        load_offers(con, "r1", "scaleway", [h100()], now=T0)
        con.execute(
            "insert into ops.provider_runs (run_id, provider, status, started_at, finished_at) "
            "values ('r1', 'scaleway', 'ok', ?, ?)",
            [T0, T0],
        )
    finally:
        con.close()
    result = CliRunner().invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    assert f"warning: the EUR exchange rate is from {rate_date:%Y-%m-%d}" in result.stdout
    assert "1 offer(s) priced in EUR" in result.stdout
