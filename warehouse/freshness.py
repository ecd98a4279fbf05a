"""How old the warehouse's reference data is: questions `gpucost status` asks on the read path.

Apart from warehouse/load.py, which writes these tables and imports the connectors' types (and so
every connector and the HTTP stack): a read command imports only this (start-up, issue 22).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: flows.cli_prices imports format_age at start-up
    import duckdb


def stale_fx_rates(
    con: duckdb.DuckDBPyConnection, stale_after_days: float, today: date | None = None
) -> list[tuple[str, date, int]]:
    """(currency, newest rate date, current offers priced in it) of every currency whose newest
    held rate is more than `stale_after_days` old on `today` (default: the UTC date), for the
    currencies some current offer is priced in; a currency with no rate at all is not here (its
    offers are quarantined at load)."""
    today = today or datetime.now(UTC).date()
    rows = con.execute(
        """
        with rates as (
            select currency, max(rate_date) as rate_date from core.fx_rates group by currency
        )
        select o.currency, r.rate_date, count(*) as offers
        from core.offer_prices as o inner join rates as r using (currency)
        where o.valid_to is null and o.currency <> 'USD' and date_diff('day', r.rate_date, ?) > ?
        group by o.currency, r.rate_date
        order by o.currency
        """,
        [today, stale_after_days],
    ).fetchall()
    return [(currency, rate_date, offers) for currency, rate_date, offers in rows]


def format_age(hours: float | None) -> str:
    """3 h → "3h", 50 h → "2d"; under a minute "now"."""
    if hours is None:
        return ""
    minutes = hours * 60
    for limit, unit, size in ((60, "m", 1), (48 * 60, "h", 60), (60 * 24 * 60, "d", 24 * 60)):
        if minutes < limit:
            return "now" if minutes < 1 else f"{minutes / size:.0f}{unit}"
    return f"{minutes / (30 * 24 * 60):.0f}mo"
