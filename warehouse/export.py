"""Feeds: versioned, explicit column lists over the marts, written atomically.

A feed's columns are pinned here, not taken from the mart with `select *`, so adding a column to a
mart never changes a feed silently: a new column means a new feed version. Files are named
`<feed>.v<version>.<format>` and written to a temporary file in the same folder, then renamed into
place, so a reader never sees half a file. Feeds written from a warehouse that holds recorded
sample data (`--replay`) sit beside a `SAMPLE_DATA.txt` that says so; live feeds never do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from warehouse.db import SAMPLE_BANNER, holds_sample_data

SAMPLE_MARKER = "SAMPLE_DATA.txt"

Format = Literal["csv", "parquet"]
FORMATS: tuple[Format, ...] = ("csv", "parquet")


@dataclass(frozen=True)
class Feed:
    name: str
    version: int
    relation: str
    columns: tuple[str, ...]
    order_by: tuple[str, ...]
    where: str = "true"

    def filename(self, fmt: Format) -> str:
        return f"{self.name}.v{self.version}.{fmt}"


FEEDS: tuple[Feed, ...] = (
    Feed(
        name="gpu_offers",
        version=1,
        relation="marts.gpu_offers",
        columns=(
            "provider",
            "instance_type",
            "region",
            "zone",
            "pricing_type",
            "is_spot",
            "price_source",
            "price_usd_per_hour",
            "gpu_name",
            "gpu_count",
            "vram_gb",
            "total_vram_gb",
            "memory_type",
            "bf16_tflops",
            "intra_node_interconnect",
            "intra_node_gbps",
            "inter_node_fabric",
            "inter_node_gbps",
            "price_usd_per_gpu_hour",
            "price_usd_per_vram_gb_hour",
            "billing_granularity",
            "last_seen_at",
        ),
        order_by=("provider", "instance_type", "region", "pricing_type"),
    ),
    Feed(
        name="unmapped_gpus",
        version=1,
        relation="marts.unmapped_gpus",
        columns=("provider", "gpu_name_raw", "gpu_memory_gb_raw", "offers"),
        order_by=("provider", "gpu_name_raw"),
    ),
    Feed(
        name="finetune_costs",
        version=1,
        relation="marts.finetune_costs",
        columns=(
            "job_id",
            "model_id",
            "method",
            "train_tokens",
            "provider",
            "instance_type",
            "region",
            "zone",
            "pricing_type",
            "price_source",
            "gpu_name",
            "gpus_used",
            "nodes_used",
            "sharding",
            "estimated_hours",
            "billed_hours",
            "on_demand_cost_usd",
            "expected_spot_cost_usd",
            "cost_usd",
            "usd_per_million_tokens",
        ),
        order_by=("job_id", "cost_usd", "provider", "instance_type", "region", "pricing_type"),
        # the feed is what a job can run on now; the mart also keeps why the rest cannot
        where="fits and priced",
    ),
)


def _exists(con: duckdb.DuckDBPyConnection, relation: str) -> bool:
    schema, name = relation.split(".")
    return bool(
        con.execute(
            "select count(*) from information_schema.tables where table_schema = ? and table_name = ?",
            [schema, name],
        ).fetchall()[0][0]
    )


def write_feeds(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    formats: tuple[Format, ...] = FORMATS,
    feeds: tuple[Feed, ...] = FEEDS,
) -> list[tuple[Path, int]]:
    """Write every feed whose mart exists; (path, rows) for each file written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for feed in feeds:
        if not _exists(con, feed.relation):
            continue
        columns = ", ".join(feed.columns)
        query = (
            f"select {columns} from {feed.relation} where {feed.where} order by {', '.join(feed.order_by)}"
        )
        rows = con.execute(f"select count(*) from ({query})").fetchall()[0][0]
        for fmt in formats:
            target = out_dir / feed.filename(fmt)
            partial = out_dir / f".{target.name}.{os.getpid()}.tmp"
            options = "format parquet, compression zstd" if fmt == "parquet" else "format csv, header true"
            con.execute(f"copy ({query}) to '{partial.as_posix()}' ({options})")
            partial.replace(target)
            written.append((target, rows))
    marker = out_dir / SAMPLE_MARKER
    if holds_sample_data(con):
        marker.write_text(SAMPLE_BANNER + "\n")
    else:
        marker.unlink(missing_ok=True)
    return written
