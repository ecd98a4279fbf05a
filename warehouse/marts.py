"""Rebuilding staging and marts: one transaction, so readers see the old marts or the new, never half.

Order of work:

1. `staging.offer_hardware`: every distinct GPU description among current offers, resolved by
   `warehouse.hardware.HardwareCatalog` (Python, because VRAM snapping and glob patterns are data
   plus a little arithmetic that SQL would only obscure); and `staging.provider_health`, each
   failing provider's state as of the build (`warehouse.lifecycle`: stale after
   `Settings.stale_after_hours`);
2. the SQL models in `sql/staging/*.sql` (views) and `sql/marts/*.sql` (tables), one model per file,
   named by the file, run in dependency order (a model depends on the `staging.x` / `marts.x` names
   it mentions);
3. the fine-tuning marts, computed by `warehouse.finetune_marts` from `marts.gpu_offers` and the seeds;
4. `COMMENT ON` every mart column from `warehouse.dictionary` (type, unit, meaning).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from warehouse.db import PACKAGE_DIR, Settings, transaction
from warehouse.dictionary import comment_marts
from warehouse.hardware import HardwareCatalog
from warehouse.lifecycle import provider_health

SQL_DIR = PACKAGE_DIR / "sql"
_REFERENCE = re.compile(r"\b(staging|marts)\.([a-z_][a-z0-9_]*)\b")

_HARDWARE_SCHEMA = {
    "provider": pl.String,
    "instance_type": pl.String,
    "gpu_name_raw": pl.String,
    "gpu_memory_gb_raw": pl.Float64,
    "gpu_count_raw": pl.Float64,
    "gpu_name": pl.String,
    "match_rule": pl.String,
    "gpu_count": pl.Float64,
    "vram_gb": pl.Float64,
    "vram_gb_seed": pl.Float64,
    "vram_gb_stated": pl.Float64,
    "vram_source": pl.String,
    "spec_conflict": pl.Boolean,
    "variant_source": pl.String,
    "instance_type_pattern": pl.String,
    "intra_node_interconnect": pl.String,
    "intra_node_gbps": pl.Float64,
    "inter_node_fabric": pl.String,
    "inter_node_gbps": pl.Float64,
    "gpudirect_rdma": pl.Boolean,
}


@dataclass(frozen=True)
class SqlModel:
    schema: str  # staging | marts
    name: str
    sql: str

    @property
    def relation(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def depends_on(self) -> set[str]:
        return {f"{s}.{n}" for s, n in _REFERENCE.findall(self.sql)} - {self.relation}


def sql_models(directory: Path = SQL_DIR) -> list[SqlModel]:
    """Every SQL model, in an order where each comes after the models it reads."""
    models = {
        f"{schema}.{path.stem}": SqlModel(schema, path.stem, path.read_text())
        for schema in ("staging", "marts")
        for path in sorted((directory / schema).glob("*.sql"))
    }
    graph = {name: {d for d in model.depends_on if d in models} for name, model in models.items()}
    return [models[name] for name in TopologicalSorter(graph).static_order()]


def resolve_hardware(
    con: duckdb.DuckDBPyConnection, catalog: HardwareCatalog, *, current_only: bool = True
) -> pl.DataFrame:
    """Resolve each distinct GPU description of the current offers (or, with `current_only=False`,
    of the whole price history) to a canonical GPU."""
    where = "where valid_to is null" if current_only else ""
    distinct = con.execute(
        "select distinct provider, instance_type, gpu_name_raw, gpu_memory_gb_raw, gpu_count "
        f"from core.offer_prices {where}"
    ).fetchall()
    return resolve_descriptions(catalog, distinct)


def resolve_descriptions(catalog: HardwareCatalog, distinct: Iterable[Sequence[Any]]) -> pl.DataFrame:
    """One row of `_HARDWARE_SCHEMA` per (provider, instance_type, gpu_name_raw,
    gpu_memory_gb_raw, gpu_count) description: the one place offers meet the hardware seeds."""
    rows = []
    for provider, instance_type, name_raw, memory_raw, count_raw in distinct:
        # A count of 0 is how connectors say "the source does not state it" (Azure, AWS spot).
        match = catalog.resolve(provider, instance_type, name_raw, memory_raw, count_raw or None)
        vram, vram_source, conflict = catalog.stated_vram(match, memory_raw) if match else (None, None, None)
        rows.append(
            {
                "provider": provider,
                "instance_type": instance_type,
                "gpu_name_raw": name_raw,
                "gpu_memory_gb_raw": memory_raw,
                "gpu_count_raw": count_raw,
                "gpu_name": match.gpu_name if match else None,
                "match_rule": match.rule if match else None,
                "gpu_count": match.gpu_count if match else None,
                "vram_gb": vram,
                "vram_gb_seed": match.vram_gb if match else None,
                "vram_gb_stated": memory_raw if memory_raw and memory_raw > 0 else None,
                "vram_source": vram_source,
                "spec_conflict": conflict,
                "variant_source": match.variant_source if match else None,
                "instance_type_pattern": match.instance_type_pattern if match else None,
                "intra_node_interconnect": match.intra_node_interconnect if match else None,
                "intra_node_gbps": match.intra_node_gbps if match else None,
                "inter_node_fabric": match.inter_node_fabric if match else None,
                "inter_node_gbps": match.inter_node_gbps if match else None,
                "gpudirect_rdma": match.gpudirect_rdma if match else None,
            }
        )
    return pl.DataFrame(rows, schema=_HARDWARE_SCHEMA)


FinetuneBuilder = Callable[[duckdb.DuckDBPyConnection], dict[str, int]]


def build_marts(
    con: duckdb.DuckDBPyConnection,
    *,
    catalog: HardwareCatalog | None = None,
    finetune: FinetuneBuilder | None = None,
    now: datetime | None = None,
    stale_after_hours: float | None = None,
    settings: Settings | None = None,
) -> dict[str, int]:
    """Rebuild staging and marts in one transaction; rows per relation built.

    Staleness is judged as of `now` (default: the time of the call) with `stale_after_hours`
    (default: the setting). The SQL models read two limits from `settings` as DuckDB variables:
    `max_usd_per_gpu_hour` (the load's absurd-price rule, applied again to the converted USD the
    mart publishes) and `fx_stale_after_days` (`fx_rate_stale`)."""
    catalog = catalog or HardwareCatalog.load()
    settings = settings or Settings()
    hardware = resolve_hardware(con, catalog)
    if stale_after_hours is None:
        stale_after_hours = settings.stale_after_hours
    health = provider_health(con, now or datetime.now(UTC), stale_after_hours)
    counts: dict[str, int] = {}
    con.execute("set variable max_usd_per_gpu_hour = ?", [settings.max_usd_per_gpu_hour])
    con.execute("set variable fx_stale_after_days = ?", [settings.fx_stale_after_days])
    with transaction(con):
        for table, frame in (("offer_hardware", hardware), ("provider_health", health)):
            con.register(f"{table}_frame", frame)
            con.execute(f"create or replace table staging.{table} as select * from {table}_frame")
            con.unregister(f"{table}_frame")
            counts[f"staging.{table}"] = frame.height
        for model in sql_models():
            kind = "view" if model.schema == "staging" else "table"
            con.execute(f"create or replace {kind} {model.relation} as\n{model.sql}")
            counts[model.relation] = con.execute(f"select count(*) from {model.relation}").fetchall()[0][0]
        if finetune is not None:
            counts.update(finetune(con))
        # last: `create or replace` drops comments; the dictionary puts them back on every rebuild
        comment_marts(con)
    return counts
