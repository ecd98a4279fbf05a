"""What each provider's bill holds beyond the GPU-hour: `gpucost providers`.

The facts are seeds: warehouse/seeds/provider_storage.csv (storage, egress, stopped-instance
billing, boot time; one row per provider, each with its `source` URLs and the date it was
`checked`) beside the billing granularity and minimum charge of warehouse/seeds/providers.csv.
A fact the provider does not publish is empty in the seed and reads `UNPUBLISHED` here, so a
reader never mistakes a missing figure for a free one.

Units: prices are in the row's `currency` as the provider publishes them (USD or EUR, no FX); per
GB means 10^9 bytes, and a price a provider publishes per GiB is converted once, in the seed
(÷ 1.073741824), with the published figure kept in its notes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from answers import AnswerError
from warehouse.db import connect, load_seeds, migrate

SQL = Path(__file__).resolve().parent / "sql" / "provider_facts.sql"
UNPUBLISHED = "unpublished"

# Columns that hold a provider's stated fact: empty there means the provider does not say.
FACT_COLUMNS = (
    "billing_granularity",
    "minimum_charge_seconds",
    "storage_persists_on_stop",
    "volume_kind",
    "volume_price_per_gb_month",
    "egress_price_per_gb",
    "egress_free_gb_per_month",
    "ingress_price_per_gb",
    "stopped_instance_bills",
    "boot_minutes",
    "internet_gbits_per_s",
    "disk_write_gbytes_per_s",
)

Rows = tuple[list[str], list[tuple[Any, ...]]]


def provider_facts(con: duckdb.DuckDBPyConnection) -> Rows:
    """One row per provider of `core.providers`: its facts, `UNPUBLISHED` where it states none.

    `con` holds the seeds (`core.providers`, `core.provider_storage`); AnswerError when it does not.
    """
    try:
        rel = con.sql(SQL.read_text(encoding="utf-8"))
        columns, rows = list(rel.columns), rel.fetchall()
    except duckdb.CatalogException:
        raise AnswerError(
            "this warehouse has no provider facts seed (core.provider_storage); "
            "run `gpucost refresh` to load the seeds"
        ) from None
    facts = {columns.index(name) for name in FACT_COLUMNS}
    marked = [
        tuple(UNPUBLISHED if value is None and i in facts else value for i, value in enumerate(row))
        for row in rows
    ]
    return columns, marked


def seeded_provider_facts() -> Rows:
    """`provider_facts` of the seeds this code ships, read into a throwaway in-memory warehouse:
    the facts need no refresh, and a warehouse loaded by an older release cannot serve stale ones."""
    con = connect(":memory:")
    try:
        migrate(con)
        load_seeds(con)
        return provider_facts(con)
    finally:
        con.close()
