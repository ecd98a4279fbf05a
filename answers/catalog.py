"""What the seeds and the mapping know: `gpucost gpus`, `gpucost unmapped`, the refresh's table.

Rows come back as (columns, rows) for the CLI's plain tables; the SQL is in answers/sql/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from answers import AnswerError
from warehouse.db import connect, load_seeds, migrate

SQL_DIR = Path(__file__).resolve().parent / "sql"

Rows = tuple[list[str], list[tuple[Any, ...]]]


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> Rows:
    rel = con.sql(sql)
    return list(rel.columns), rel.fetchall()


def gpu_catalog() -> Rows:
    """The canonical GPUs (warehouse/seeds/gpus.csv), read into a throwaway in-memory warehouse."""
    con = connect(":memory:")
    try:
        migrate(con)
        load_seeds(con)
        return _rows(con, (SQL_DIR / "gpu_catalog.sql").read_text(encoding="utf-8"))
    finally:
        con.close()


def unmapped(con: duckdb.DuckDBPyConnection) -> Rows:
    """Current offers whose GPU the seeds cannot name; AnswerError before the first refresh."""
    try:
        return _rows(con, "select * from marts.unmapped_gpus")
    except duckdb.CatalogException:
        raise AnswerError("no marts yet; run `gpucost refresh` first") from None


def spec_conflicts(con: duckdb.DuckDBPyConnection) -> Rows:
    """Current offers whose stated VRAM disagrees with the seed's (marts.spec_conflicts)."""
    try:
        return _rows(con, "select * from marts.spec_conflicts")
    except duckdb.CatalogException:
        raise AnswerError("no marts yet; run `gpucost refresh` first") from None


def cheapest_per_gpu(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The cheapest current offer per GPU (25 at most, largest VRAM first), as records."""
    columns, rows = _rows(con, (SQL_DIR / "cheapest_per_gpu.sql").read_text(encoding="utf-8"))
    return [dict(zip(columns, row, strict=True)) for row in rows]
