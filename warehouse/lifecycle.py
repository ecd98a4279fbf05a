"""Provider lifecycle: retired providers, and providers failing long enough to be stale.

**Retired** is data: a row of `seeds/provider_lifecycle.csv` (state `retired`, since when, why,
what to do, the source that says so). A retired provider

- leaves the default provider set of every refresh and check (`retired()` here, read by
  `warehouse.pipeline.select_connectors`); naming it explicitly is refused with one line saying so;
- has its open offers in `core.offer_prices` closed by the next run (`close_retired`: `valid_to`
  set, `closed_by_run_id` the run, `closed_reason` 'retired: <reason>', migration 005), and
  `staging.stg_offers__current` leaves its offers out meanwhile, so they are never current;
- keeps its connector module in `connectors.CONNECTORS`: the raw archive still holds its
  responses, and re-parsing them (warehouse/archive.py) needs the parser.

**Stale** is computed, never stored: a provider whose runs have failed (status `failed` or
`rejected`) since its last good one (`ok` or `degraded`, which both published prices) for longer
than `Settings.stale_after_hours` (default 48, GPUCOST_STALE_AFTER_HOURS). `provider_health` (the
SQL in `sql/queries/provider_health.sql`) gives, per failing provider, its state (`active` while
failing for less than the setting, then `stale`), since when and the last error; the marts join it
as `provider_state`, `provider_failing_since` and `is_stale` on `marts.gpu_offers`. A degraded run
counts as good on purpose: its healthy scopes loaded fresh prices, which staleness must not hide.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import duckdb
import polars as pl

from warehouse.db import PACKAGE_DIR, SEEDS_DIR

LIFECYCLE_SEED = "provider_lifecycle.csv"
HEALTH_SQL = PACKAGE_DIR / "sql" / "queries" / "provider_health.sql"
HEALTH_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "provider": pl.String,
    "provider_state": pl.String,
    "provider_failing_since": pl.Datetime("us", "UTC"),
    "last_good_at": pl.Datetime("us", "UTC"),
    "failed_runs": pl.Int64,
    "last_error": pl.String,
    "last_hint": pl.String,
}


@dataclass(frozen=True)
class Retirement:
    """One retired provider, as the lifecycle seed states it."""

    provider: str
    since: date
    reason: str
    what_to_do: str
    source: str

    def message(self) -> str:
        """The one line a user who names the provider gets."""
        since = f"{self.since:%Y-%m-%d}"
        return f"{self.provider} is retired since {since}: {self.reason} ({self.source}); {self.what_to_do}"


def retired(seeds_dir: Path = SEEDS_DIR) -> dict[str, Retirement]:
    """The retired providers of the lifecycle seed, by slug (empty when the seed is absent)."""
    path = seeds_dir / LIFECYCLE_SEED
    if not path.is_file():
        return {}
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {
        row["provider"]: Retirement(
            provider=row["provider"],
            since=date.fromisoformat(row["since"]),
            reason=row["reason"],
            what_to_do=row["what_to_do"],
            source=row["source"],
        )
        for row in rows
        if row["state"] == "retired"
    }


def close_retired(
    con: duckdb.DuckDBPyConnection, run_id: str, now: datetime, retirements: dict[str, Retirement]
) -> dict[str, int]:
    """Close every open offer of a retired provider, with the reason; offers closed per provider
    (only providers that had any)."""
    closed: dict[str, int] = {}
    for provider, retirement in sorted(retirements.items()):
        (count,) = con.execute(
            "update core.offer_prices set valid_to = ?, closed_by_run_id = ?, closed_reason = ? "
            "where provider = ? and valid_to is null",
            [now, run_id, f"retired: {retirement.reason}", provider],
        ).fetchall()[0]
        if count:
            closed[provider] = count
    return closed


def closed_as_retired(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Offers closed because their provider retired, per provider (empty before migration 005)."""
    try:
        rows = con.execute(
            "select provider, count(*) from core.offer_prices where closed_reason like 'retired:%' "
            "group by provider"
        ).fetchall()
    except duckdb.BinderException:  # a read-only warehouse from before migration 005
        return {}
    return dict(rows)


def provider_health(con: duckdb.DuckDBPyConnection, now: datetime, stale_after_hours: float) -> pl.DataFrame:
    """One row per provider failing since its last good run (see the module docstring)."""
    rows = con.execute(HEALTH_SQL.read_text(), [now, stale_after_hours]).fetchall()
    return pl.DataFrame(rows, schema=HEALTH_SCHEMA, orient="row")


def stale_providers(
    con: duckdb.DuckDBPyConnection, now: datetime, stale_after_hours: float
) -> dict[str, datetime]:
    """Stale provider -> failing since."""
    health = provider_health(con, now, stale_after_hours).filter(pl.col("provider_state") == "stale")
    return dict(zip(health["provider"], health["provider_failing_since"], strict=True))
