"""Freshness, once: `gpucost status` and the comparison page read it from here.

* `last_good`: when each provider last published prices (its latest ok or degraded run), the one
  definition of "fresh" both readers show.
* `status`: `gpucost status`'s answer: each provider's last finished run, `last_good`, the
  runs in progress or abandoned, the providers failing or stale (`warehouse.lifecycle`) and the
  offers closed because their provider retired, and the current offers the offers mart leaves
  out (`dropped_offers`, from marts.dropped_offers).
* `freshness`: the page's per-provider panel: the last run with its held scopes and prices, and
  `last_good_at` from `last_good`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from answers import AnswerError
from warehouse.freshness import stale_fx_rates
from warehouse.lifecycle import Retirement, closed_as_retired, provider_health, retired

SQL_DIR = Path(__file__).resolve().parent / "sql"
PAGE_QUERIES_DIR = Path(__file__).resolve().parent / "report" / "queries"


def _sql(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _last_good(con: duckdb.DuckDBPyConnection) -> list[tuple[str, datetime, int]]:
    return con.execute(_sql(SQL_DIR / "last_good.sql")).fetchall()


def last_good(con: duckdb.DuckDBPyConnection) -> dict[str, datetime]:
    """provider → when its prices were last published (UTC)."""
    return {provider: at for provider, at, _ in _last_good(con)}


@dataclass(frozen=True)
class OpenRun:
    """A run in progress or abandoned."""

    run_id: str
    status: str
    started_at: datetime
    error: str | None


@dataclass(frozen=True)
class Status:
    """`gpucost status`: the last run of each provider (`columns`, `rows`), when each last
    published prices, and the runs still open."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    last_good: dict[str, datetime]
    open_runs: list[OpenRun]
    health: pl.DataFrame  # one row per provider failing since its last good run (warehouse.lifecycle)
    retired: dict[str, Retirement]  # the lifecycle seed's retired providers
    closed_as_retired: dict[str, int]  # provider -> offers closed because it retired
    # (currency, newest rate date, offers priced in it) whose rate is older than the setting
    stale_fx_rates: list[tuple[str, date, int]]
    # (provider, drop reason, offers) the offers mart leaves out (marts.dropped_offers)
    dropped_offers: list[tuple[str, str, int]] = field(default_factory=list)


def status(
    con: duckdb.DuckDBPyConnection, now: datetime, stale_after_hours: float, fx_stale_after_days: float
) -> Status:
    """The warehouse's runs, judged at `now`; AnswerError when none is recorded yet."""
    rel = con.sql(_sql(SQL_DIR / "provider_status.sql"))
    columns, rows = list(rel.columns), rel.fetchall()
    if not rows:
        raise AnswerError("no runs recorded yet; run `gpucost refresh`")
    runs = [OpenRun(*row) for row in con.execute(_sql(SQL_DIR / "open_runs.sql")).fetchall()]
    health = provider_health(con, now, stale_after_hours)
    stale_rates = stale_fx_rates(con, fx_stale_after_days, now.date())
    return Status(
        columns,
        rows,
        last_good(con),
        runs,
        health,
        retired(),
        closed_as_retired(con),
        stale_rates,
        dropped_offers(con),
    )


def dropped_offers(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, int]]:
    """(provider, drop reason, offers) of the current offers the offers mart leaves out
    (marts.dropped_offers); none before the first mart build."""
    built = con.execute(
        "select count(*) from duckdb_tables() where schema_name = 'marts' and table_name = 'dropped_offers'"
    ).fetchall()
    if not built[0][0]:  # no marts built yet: nothing is dropped
        return []
    return con.execute(
        "select provider, drop_reason, count(*) from marts.dropped_offers "
        "group by provider, drop_reason order by provider, drop_reason"
    ).fetchall()


def freshness(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The page's freshness panel: per provider its last run, held scopes and last good refresh."""
    good = {provider: epoch for provider, _, epoch in _last_good(con)}
    rel = con.sql(_sql(PAGE_QUERIES_DIR / "freshness.sql"))
    providers = []
    for row in rel.fetchall():
        found = dict(zip(rel.columns, row, strict=True))
        # the page's column order: last_good_at right after finished_at
        record: dict[str, Any] = {}
        for name, value in found.items():
            record[name] = value
            if name == "finished_at":
                record["last_good_at"] = good.get(found["provider"])
        scopes = json.loads(record.pop("scopes") or "{}")
        record["held_scopes"] = sorted(
            f"{name} ({outcome.get('reason', outcome.get('status'))})"
            for name, outcome in scopes.items()
            if outcome.get("status") != "ok"
        )
        record["scopes"] = len(scopes)
        providers.append(record)
    last = con.sql(_sql(PAGE_QUERIES_DIR / "last_run.sql"))
    last_run = [dict(zip(last.columns, row, strict=True)) for row in last.fetchall()]
    return {"providers": providers, "last_run": last_run[0] if last_run else None}
