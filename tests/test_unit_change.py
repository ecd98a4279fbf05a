"""A unit change is an anomaly whatever its size (issue 19 item 2).

A price that moves by a GPU count, x60, x730, x100 or an exchange rate is held as `unit_change`
even below the 3x jump factor, and no repetition releases it (a misread unit repeats identically).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import duckdb
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from connectors.base import FxRate, Offer
from tests.factories import make_offer
from warehouse.db import connect, migrate
from warehouse.load import (
    UNIT_TOLERANCE,
    Guards,
    load_fx_rates,
    load_offers,
    unit_change,
    unit_factors,
)

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
HOUR = timedelta(hours=1)
EUR = 1.08  # USD per euro in these tests


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(":memory:")
    migrate(con)
    yield con
    con.close()


def load(con, run_id: str, batch: list[Offer], now: datetime, **kw):
    """`load_offers` plus the provider-run row `land` writes (the guard's "previous run")."""
    result = load_offers(con, run_id, batch[0].provider, batch, now=now, **kw)
    con.execute(
        "insert into ops.provider_runs (run_id, provider, status, started_at) values (?, ?, ?, ?)",
        [run_id, batch[0].provider, result.status, now],
    )
    return result


def box(price: float, gpus: float = 2.0, currency: str = "USD", provider: str = "aws") -> Offer:
    return make_offer("p.2x", price, provider=provider, gpu_count=gpus, currency=currency)


def published(con, provider: str = "aws") -> tuple[float, str]:
    return con.execute(
        "select price_per_hour, currency from core.offer_prices where provider = ? and valid_to is null",
        [provider],
    ).fetchall()[0]


def sig3(value: float) -> float:
    """Rounded to three significant digits, as a price page or API publishes it."""
    return float(f"{value:.3g}")


# --- the factor test, pure --------------------------------------------------------------------------------


def test_the_factors_of_an_offer():
    factors = unit_factors((8.0, 8.0), {"USD": 1.0, "EUR": EUR}, "USD")
    assert factors == {"x60": 60.0, "x730": 730.0, "x100": 100.0, "8 GPUs": 8.0, "EUR/USD": EUR}
    # one GPU and a currency at par are no unit change: a factor of 1 would hold every unchanged price
    assert unit_factors((1.0, None), {"USD": 1.0, "XPAR": 1.0}, "USD") == {
        "x60": 60,
        "x730": 730,
        "x100": 100,
    }
    # the exchange rate is the one against the offer's own currency
    assert unit_factors((), {"USD": 1.0, "EUR": EUR}, "EUR")["USD/EUR"] == pytest.approx(1 / EUR)


def test_a_unit_change_is_named_with_its_direction():
    factors = unit_factors((8.0,), {"USD": 1.0, "EUR": EUR}, "USD")
    assert unit_change(2.0, 16.0, factors) == "x8 GPUs"
    assert unit_change(16.0, 2.0, factors) == "/8 GPUs"
    assert unit_change(1.5, 1095.0, factors) == "x730"
    assert unit_change(2.5, 0.025, factors) == "/100"
    assert unit_change(2.16, 2.0, factors) == "/EUR/USD"
    assert unit_change(2.0, 3.0, factors) is None
    assert unit_change(0.0, 3.0, factors) is None and unit_change(2.0, math.nan, factors) is None


def test_the_tolerance_is_a_relative_band_around_the_factor():
    factors = {"2 GPUs": 2.0}
    inside, outside = 1 + UNIT_TOLERANCE * 0.99, 1 + UNIT_TOLERANCE * 1.01
    assert unit_change(1.0, 2.0 * inside, factors) == "x2 GPUs"
    assert unit_change(1.0, 2.0 * outside, factors) is None
    assert unit_change(1.0, 0.5 / inside, factors) == "/2 GPUs"
    assert unit_change(1.0, 0.5 / outside, factors) is None


FACTORS = st.sampled_from([2.0, 4.0, 8.0, 60.0, 730.0, 100.0, EUR])
PRICES = st.floats(min_value=0.10, max_value=100.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(price=PRICES, factor=FACTORS, up=st.booleans())
def test_every_published_unit_misreading_is_caught(price, factor, up):
    """A price re-published in another unit, rounded to three significant digits like the
    source, is within the tolerance of its factor: that is what the tolerance is chosen for."""
    old = sig3(price)
    new = sig3(old * factor if up else old / factor)
    factors = unit_factors(
        (8.0 if factor in (2.0, 4.0, 8.0) else 1.0, factor), {"USD": 1.0, "EUR": EUR}, "USD"
    )
    assert unit_change(old, new, factors) is not None


@settings(max_examples=200, deadline=None)
@given(old=PRICES, ratio=st.floats(min_value=0.001, max_value=1000.0))
def test_a_move_away_from_every_factor_is_no_unit_change(old, ratio):
    factors = unit_factors((2.0,), {"USD": 1.0, "EUR": EUR}, "USD")
    distance = min(min(abs(ratio / f - 1), abs(ratio * f - 1)) for f in factors.values())
    assume(distance > UNIT_TOLERANCE * 1.001)
    assert unit_change(old, old * ratio, factors) is None


# --- the guard in the load ----------------------------------------------------------------------------------


def test_a_two_gpu_box_doubling_is_held_below_the_jump_factor_and_never_confirmed(con):
    """2x passes under the 3x guard; it is what a per-GPU column read as the instance price does."""
    load(con, "r1", [box(2.0)], T0)
    for i in range(2, 5):  # no number of identical runs releases it
        result = load(con, f"r{i}", [box(4.0)], T0 + i * HOUR)
        assert result.quarantine_reasons == {"unit_change": 1}
        assert published(con) == (2.0, "USD")
    (details,) = con.execute(
        "select details from ops.quarantine where reason = 'unit_change' limit 1"
    ).fetchall()[0]
    assert json.loads(details) == {
        "old_price_per_hour": 2.0,
        "new_price_per_hour": 4.0,
        "currency": "USD",
        "old_currency": "USD",
        "unit_factor": "x2 GPUs",
    }
    accepted = load(con, "r9", [box(4.0)], T0 + 9 * HOUR, guards=Guards(accept_changes=True))
    assert accepted.quarantine_reasons == {} and published(con) == (4.0, "USD")


def test_an_ordinary_move_on_a_two_gpu_box_loads(con):
    load(con, "r1", [box(2.0)], T0)
    result = load(con, "r2", [box(2.6)], T0 + HOUR)  # +30 %: no factor near it
    assert result.quarantine_reasons == {} and published(con) == (2.6, "USD")


def test_a_per_gpu_price_read_as_the_instance_price_is_held(con):
    """8x is already a price jump; as a unit change it is also never confirmed by repetition."""
    load(con, "r1", [box(16.0, gpus=8)], T0)
    for i in (2, 3):
        assert load(con, f"r{i}", [box(2.0, gpus=8)], T0 + i * HOUR).quarantine_reasons == {"unit_change": 1}
    assert published(con) == (16.0, "USD")


def test_cents_and_months_are_held_even_when_repeated(con):
    load(con, "r1", [box(1.5, gpus=1)], T0)
    for i, misread in enumerate((150.0, 1095.0, 150.0, 1095.0), start=2):
        assert load(con, f"r{i}", [box(misread, gpus=1)], T0 + i * HOUR).quarantine_reasons == {
            "unit_change": 1
        }
    assert published(con) == (1.5, "USD")


def test_a_euro_price_read_as_dollars_is_held(con):
    """A page in EUR stored as USD: the number stays, its USD value moves by the EUR rate."""
    load_fx_rates(con, "fx", [FxRate("EUR", date(2026, 11, 30), EUR, "ECB")], now=T0)
    load(con, "r1", [box(2.0, gpus=1, currency="EUR", provider="scaleway")], T0)
    result = load(con, "r2", [box(2.0, gpus=1, currency="USD", provider="scaleway")], T0 + HOUR)
    assert result.quarantine_reasons == {"unit_change": 1}
    assert published(con, "scaleway") == (2.0, "EUR")


def test_a_dollar_price_converted_twice_is_held_when_euros_are_priced(con):
    """A USD offer whose number moves by exactly the EUR rate (a page in EUR converted by the parser
    with its own rate) is held once some offer in the warehouse is priced in EUR."""
    load_fx_rates(con, "fx", [FxRate("EUR", date(2026, 11, 30), EUR, "ECB")], now=T0)
    load(con, "e1", [box(1.0, gpus=1, currency="EUR", provider="scaleway")], T0)
    load(con, "r1", [box(2.16, gpus=1)], T0)
    assert load(con, "r2", [box(2.0, gpus=1)], T0 + HOUR).quarantine_reasons == {"unit_change": 1}


def test_without_offers_in_a_currency_its_rate_is_no_factor(con):
    """Only currencies offers are priced in can be misread: ECB's 30 others would hold every
    ordinary move that lands near one of their cross rates."""
    load_fx_rates(con, "fx", [FxRate("EUR", date(2026, 11, 30), EUR, "ECB")], now=T0)
    load(con, "r1", [box(2.16, gpus=1)], T0)
    assert load(con, "r2", [box(2.0, gpus=1)], T0 + HOUR).quarantine_reasons == {}


prices = st.floats(min_value=0.05, max_value=200.0, allow_nan=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    old=prices,
    gpus=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    factor=st.sampled_from(["gpus", 60.0, 730.0, 100.0]),
)
def test_a_unit_change_of_any_offer_is_never_published(old, gpus, factor):
    k = gpus if factor == "gpus" else factor
    assume(k > 1)
    assume(old * k / gpus < 2000.0)  # above the $2,000/GPU-h limit it is quarantined as absurd instead
    con = connect(":memory:")
    migrate(con)
    try:
        load(con, "r1", [box(old, gpus=gpus)], T0)
        for i in (2, 3):
            up = load(con, f"r{i}", [box(old * k, gpus=gpus)], T0 + i * HOUR)
            assert up.quarantine_reasons == {"unit_change": 1}
        down = load(con, "r4", [box(old / k, gpus=gpus)], T0 + 4 * HOUR)
        assert down.quarantine_reasons == {"unit_change": 1}
        assert published(con) == (old, "USD")
    finally:
        con.close()
