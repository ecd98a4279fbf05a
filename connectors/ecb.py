"""ECB: the European Central Bank's euro foreign exchange reference rates, as USD per unit.

Source: `GET https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml` (no auth, no documented
rate limit; one request a run). The ECB publishes the rates once a day, around 16:00 CET on TARGET
working days; on weekends and holidays the file still carries the last working day's rates, so a
rate's `rate_date` is the date in the file, never the day we fetched it.

Format (a GESMES envelope; the rate elements live in the eurofxref namespace)::

    <gesmes:Envelope xmlns:gesmes="http://www.gesmes.org/xml/2002-08-01"
                     xmlns="http://www.ecb.int/vocabulary/2002-08-01/eurofxref">
      <gesmes:subject>Reference rates</gesmes:subject>
      <Cube>
        <Cube time="2026-11-30">
          <Cube currency="USD" rate="1.0842"/>   units of the currency per 1 EUR
          <Cube currency="GBP" rate="0.8391"/>
          ...

The 90-day and full history files (`eurofxref-hist-90d.xml`, `eurofxref-hist.xml`) have the same
shape with one `Cube time=...` per day; `parse` reads every day it is given.

What becomes an `FxRate` (not an `Offer`: the warehouse loads these into `core.fx_rates` before
any provider's offers), per day:
- EUR: `usd_per_unit` = the USD rate (dollars per euro);
- every other listed currency C: `usd_per_unit` = USD rate / C's rate (a cross rate through EUR);
- USD itself is not yielded: the warehouse treats USD as 1.

Quirks handled:
- A day without a USD rate, or whose USD rate is not a positive finite number, raises
  `LayoutChanged`: every rate of that day is derived from it, so none can be trusted.
- Any other currency whose rate is not a number, zero or NaN is yielded with `usd_per_unit`
  NaN (a negative rate gives a negative one): the warehouse quarantines a rate that is not a
  finite positive number and keeps that currency's last good rate. A rate is never guessed.
- A `Cube` with a `currency` but no `rate` attribute (or no `Cube time=...` at all) raises
  `LayoutChanged` naming what was looked for.
- Currency codes are not checked against a list: the ECB adds and drops currencies (HRK left in
  2023, RUB was suspended in 2022), and an unknown code is harmless: no offer is priced in it.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from datetime import date

from connectors.base import FxRate, LayoutChanged, RawResponse
from connectors.http import Client

name = "ecb"
requires: tuple[str, ...] = ()

DAILY_URL = "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml"
SOURCE = "ECB euro foreign exchange reference rates"
EUROFXREF_NS = "http://www.ecb.int/vocabulary/2002-08-01/eurofxref"
_CUBE = f"{{{EUROFXREF_NS}}}Cube"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield client.fetch("GET", DAILY_URL)


def daily_rates(body: bytes, url: str = DAILY_URL) -> dict[date, dict[str, str]]:
    """The raw `rate` attribute per currency per `Cube time=...` day: units of currency per EUR."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise LayoutChanged(f"{url}: not XML ({exc}); has the ECB moved or changed the file?") from exc
    days: dict[date, dict[str, str]] = {}
    for day in root.iter(_CUBE):
        stamp = day.get("time")
        if stamp is None:
            continue  # the outer wrapper Cube, or a rate Cube
        try:
            rate_date = date.fromisoformat(stamp)
        except ValueError as exc:
            raise LayoutChanged(f"{url}: `Cube time={stamp!r}` is not an ISO date") from exc
        rates: dict[str, str] = {}
        for cube in day.findall(_CUBE):
            currency = cube.get("currency")
            if currency is None:
                raise LayoutChanged(f"{url}: a rate `Cube` of {stamp} has no `currency` attribute")
            rate = cube.get("rate")
            if rate is None:
                raise LayoutChanged(
                    f"{url}: `rate` attribute missing on `Cube currency={currency!r}` of {stamp}; "
                    "has the ECB renamed it?"
                )
            rates[currency] = rate
        days[rate_date] = rates
    if not days:
        raise LayoutChanged(
            f"{url}: no `Cube time=...` element in the {EUROFXREF_NS} namespace; "
            "has the ECB changed the eurofxref format?"
        )
    return days


def usd_rates(rate_date: date, per_eur: Mapping[str, str]) -> Iterator[FxRate]:
    """One day's rates as USD per unit: EUR from the USD rate, the others crossed through EUR."""
    usd = _positive(per_eur.get("USD"))
    if usd is None:
        raise LayoutChanged(
            f"ECB rates of {rate_date}: USD rate {per_eur.get('USD')!r} is missing or not a positive "
            "number; every cross rate depends on it, so none is reported"
        )
    yield FxRate("EUR", rate_date, usd, SOURCE)
    for currency, text in per_eur.items():
        if currency in ("USD", "EUR"):
            continue
        rate = _number(text)
        # A wrong rate stays visible (NaN for 0 or unreadable, negative stays negative): the
        # warehouse quarantines it and keeps the currency's last good rate; never a guess.
        yield FxRate(currency, rate_date, usd / rate if rate else math.nan, SOURCE)


def parse(responses: Sequence[RawResponse]) -> Iterator[FxRate]:
    for response in responses:
        for rate_date, per_eur in sorted(daily_rates(response.read(), response.url).items()):
            yield from usd_rates(rate_date, per_eur)


def _number(text: str | None) -> float:
    """The rate as a float; NaN when missing or unreadable."""
    try:
        return float(text) if text is not None else math.nan
    except ValueError:
        return math.nan


def _positive(text: str | None) -> float | None:
    number = _number(text)
    return number if math.isfinite(number) and number > 0 else None
