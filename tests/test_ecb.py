"""ECB reference rates: USD per unit from the eurofxref XML, bad rates, layout changes, replay.

No real capture of eurofxref-daily.xml exists in ../shared/data/raw (PROVENANCE.md: "FX ... none:
write a fixture in the documented format"), so these tests read our own fixture
tests/fixtures/ecb/eurofxref-daily__2026-12-01.xml, written in the ECB's structure.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from connectors import ecb
from connectors.base import FxRate, LayoutChanged, RawResponse
from connectors.http import make_client

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "ecb" / "eurofxref-daily__2026-12-01.xml"
HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<gesmes:Envelope '
    'xmlns:gesmes="http://www.gesmes.org/xml/2002-08-01" '
    'xmlns="http://www.ecb.int/vocabulary/2002-08-01/eurofxref">'
    "<gesmes:subject>Reference rates</gesmes:subject><Cube>"
)
TAIL = "</Cube></gesmes:Envelope>"


def answer(body: bytes) -> RawResponse:
    return RawResponse(
        url=ecb.DAILY_URL, method="GET", status=200, fetched_at=datetime(2026, 12, 1, tzinfo=UTC), body=body
    )


def envelope(*days: tuple[str, dict[str, str]]) -> bytes:
    cubes = "".join(
        f"<Cube time='{day}'>"
        + "".join(f"<Cube currency='{c}' rate='{r}'/>" for c, r in rates.items())
        + "</Cube>"
        for day, rates in days
    )
    return (HEAD + cubes + TAIL).encode()


def rates(items: list[object]) -> dict[tuple[str, date], float]:
    return {(i.currency, i.rate_date): i.usd_per_unit for i in items if isinstance(i, FxRate)}


def test_fixture_gives_eur_from_the_usd_rate_and_cross_rates_for_the_rest() -> None:
    items = list(ecb.parse([answer(FIXTURE.read_bytes())]))
    day = date(2026, 11, 30)
    got = rates(items)
    assert len(got) == 11  # EUR + the 10 non-USD currencies; USD itself is implied
    assert ("USD", day) not in got
    assert got[("EUR", day)] == 1.08
    assert got[("GBP", day)] == pytest.approx(1.08 / 0.84)  # 1.2857 USD per pound
    assert got[("JPY", day)] == pytest.approx(1.08 / 162)
    assert got[("CHF", day)] == pytest.approx(1.125)
    assert got[("PLN", day)] == pytest.approx(0.25)
    assert {i.source for i in items if isinstance(i, FxRate)} == {ecb.SOURCE}
    assert all(isinstance(i, FxRate) for i in items)


def test_history_file_with_several_days_yields_each_day() -> None:
    body = envelope(("2026-11-27", {"USD": "1.05", "GBP": "0.84"}), ("2026-11-30", {"USD": "1.08"}))
    got = rates(list(ecb.parse([answer(body)])))
    assert got == {
        ("EUR", date(2026, 11, 27)): 1.05,
        ("GBP", date(2026, 11, 27)): pytest.approx(1.25),
        ("EUR", date(2026, 11, 30)): 1.08,
    }


@pytest.mark.parametrize("bad", ["0", "NaN", "-1.2", "n/a", ""])
def test_an_invalid_rate_is_yielded_unusable_for_the_warehouse_to_quarantine(bad: str) -> None:
    items = list(ecb.parse([answer(envelope(("2026-11-30", {"USD": "1.08", "GBP": bad, "JPY": "162"})))]))
    got = rates(items)
    gbp = got[("GBP", date(2026, 11, 30))]
    assert math.isnan(gbp) or gbp < 0  # never a plausible-looking guess
    assert got[("JPY", date(2026, 11, 30))] == pytest.approx(1.08 / 162)
    assert all(isinstance(i, FxRate) for i in items)


@pytest.mark.parametrize("usd", [None, "0", "NaN"])
def test_a_missing_or_invalid_usd_rate_fails_the_whole_day(usd: str | None) -> None:
    day = {"GBP": "0.84"} | ({"USD": usd} if usd is not None else {})
    with pytest.raises(LayoutChanged, match="USD rate"):
        list(ecb.parse([answer(envelope(("2026-11-30", day)))]))


def test_an_unknown_currency_code_is_reported_like_any_other() -> None:
    got = rates(list(ecb.parse([answer(envelope(("2026-11-30", {"USD": "1.08", "ZZZ": "2.16"})))])))
    assert got[("ZZZ", date(2026, 11, 30))] == pytest.approx(0.5)


def test_a_renamed_rate_attribute_is_a_layout_change_naming_it() -> None:
    body = FIXTURE.read_bytes().replace(b"rate=", b"value=")
    with pytest.raises(LayoutChanged, match="`rate` attribute missing on `Cube currency='USD'`"):
        list(ecb.parse([answer(body)]))


@pytest.mark.parametrize(
    "body",
    [
        (HEAD + TAIL).encode(),  # the day cube removed
        FIXTURE.read_bytes().replace(b"eurofxref", b"otherref"),  # another namespace
        b"<html><body>Service unavailable</body></html>",
    ],
)
def test_no_day_cube_is_a_layout_change(body: bytes) -> None:
    with pytest.raises(LayoutChanged, match=r"no `Cube time=\.\.\.` element"):
        list(ecb.parse([answer(body)]))


def test_not_xml_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="not XML"):
        list(ecb.parse([answer(b'{"rates": {}}')]))


def test_a_bad_date_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="not an ISO date"):
        list(ecb.parse([answer(envelope(("30.11.2026", {"USD": "1.08"})))]))


def test_positive_helper() -> None:
    assert ecb._positive("1.0842") == 1.0842
    assert all(ecb._positive(t) is None for t in (None, "", "0", "-1", "nan", "inf", "x"))
    assert math.isnan(ecb._number("n/a")) and ecb._number("0.84") == 0.84


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(ecb.fetch(client, {}))
    got = rates(list(ecb.parse(responses)))
    assert got[("EUR", date(2026, 11, 30))] == 1.08
    assert len(got) == 11


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_daily_file_parses() -> None:
    with make_client() as client:
        responses = list(ecb.fetch(client, {}))
    got = {i.currency: i for i in ecb.parse(responses) if isinstance(i, FxRate)}
    assert 0.5 < got["EUR"].usd_per_unit < 2.0
    assert {"GBP", "JPY", "CHF"} <= set(got)
