"""Feeds: versioned, explicit column lists over the marts, written atomically, manifest last.

A feed's columns are pinned here, not taken from the mart with `select *`, so adding a column to a
mart never changes a feed silently: a new column means a new feed version, written beside the old
one. Files are named `<feed>.v<version>.<format>` and written to a temporary file in the same folder,
then renamed into place, so a reader never sees half a file.

* v1 feeds are exactly what they were: the marts' column names, CSV and Parquet.
* v2 feeds name every column with its unit and document it in `warehouse.dictionary` (type, unit,
  meaning, and the SQL it comes from when it is not the mart column of that name); their Parquet
  files carry key/value metadata (feed, version, run id, generated at, live or replay, the columns).
  `finetune_costs.v2` is Parquet only: one row per job × offer that fits is already 85k rows on the
  replay cassette and millions on a live warehouse; its CSV would be 31.5 MB against 2.0 MB of
  zstd Parquet on the cassette (15.7×, benchmarks/feeds.py) and would lose the types.
* v3 (`gpu_offers.v3`, beside v2): v2's columns plus `price_covers`, `vram_gb_stated`,
  `vram_source`, `spec_conflict`, `gpu_variant` and `variant_source`. Rows are every current offer,
  as in v2: an unavailable one stays, its `available` false (feeds are data, not rankings).
* `finetune_costs.v3` (beside v2, Parquet only like it): v2's columns plus the whole bill of the
  job's experiment (finetune.cost.itemized_bill): its checkpoint interval and sizes, each item in
  USD (null where the provider leaves a fact unpublished), `total_usd` of the known items, and
  which items and facts are unknown; rows in the order of that total.
* v4 (`gpu_offers.v4` and `finetune_costs.v4`, beside v3): the offer's one-time set-up fee and
  whether its provider is serverless; the bill's `fees_usd` item. v3 keeps its columns.
* `manifest.json` (every file of the publication: rows, bytes, sha256; run id, generated_at, live or
  replay) is written last, also by rename: once it names a run, every file it lists is in place.

Feeds written from a warehouse that holds recorded sample data (`--replay`) sit beside a
`SAMPLE_DATA.txt` that says so, and say `replay` in their metadata; live feeds never do.
`warehouse.publish` copies a publication to object storage.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import duckdb

from finetune.cost import BILL_INPUT_COLUMNS, BILL_TOTAL_COLUMNS
from warehouse.db import SAMPLE_BANNER, holds_sample_data, relation_exists
from warehouse.dictionary import column

SAMPLE_MARKER = "SAMPLE_DATA.txt"
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1

Format = Literal["csv", "parquet"]
FORMATS: tuple[Format, ...] = ("csv", "parquet")
DataMode = Literal["live", "replay"]


@dataclass(frozen=True)
class Feed:
    name: str
    version: int
    relation: str
    columns: tuple[str, ...]
    order_by: tuple[str, ...]
    where: str = "true"
    formats: tuple[Format, ...] = FORMATS
    description: str = ""
    # a select over `relation` (and whatever it joins) that the columns' sources read, when the
    # relation alone lacks some of them
    source_sql: str | None = None
    # v2 on: columns come through the dictionary (renamed, derived) and Parquet carries metadata
    documented_names: bool = False
    # rows a stale provider's offers fail (warehouse/lifecycle.py): left out unless include_stale
    fresh: str | None = None

    def filename(self, fmt: Format) -> str:
        return f"{self.name}.v{self.version}.{fmt}"

    def query(self, include_stale: bool = False) -> str:
        """The select that writes this feed (without a stale provider's offers unless asked)."""
        if self.documented_names:
            select = ", ".join(
                f"{column(name).source} as {name}" if column(name).source else name for name in self.columns
            )
        else:
            select = ", ".join(self.columns)
        source = f"({self.source_sql}) as source" if self.source_sql else self.relation
        where = self.where if include_stale or self.fresh is None else f"({self.where}) and {self.fresh}"
        return f"select {select} from {source} where {where} order by {', '.join(self.order_by)}"


_FINETUNE_COSTS_V2_SOURCE = """
select
    costs.*,
    jobs.seq_len,
    jobs.micro_batch,
    jobs.precision,
    jobs.optimizer,
    jobs.lora_rank,
    offers.price_usd_per_gpu_hour,
    offers.last_seen_at
from marts.finetune_costs as costs
left join core.finetune_jobs as jobs on costs.job_id = jobs.job_id
left join marts.gpu_offers as offers
    on costs.provider = offers.provider
    and costs.instance_type = offers.instance_type
    and costs.region = offers.region
    and costs.zone is not distinct from offers.zone
    and costs.pricing_type = offers.pricing_type
"""

# gpu_offers v2's columns, pinned; v3 is v2 plus what the source states beside the seed
_GPU_OFFERS_V2: tuple[str, ...] = (
    "provider",
    "instance_type",
    "region",
    "zone",
    "pricing_type",
    "is_spot",
    "price_source",
    "price_is_from",
    "price_statistic",
    "price_usd_per_gpu_hour",
    "price_usd_per_hour",
    "price_usd_per_vram_gb_hour",
    "published_price_per_hour",
    "currency",
    "fx_usd_per_unit",
    "fx_rate_date",
    "gpu_name",
    "gpu_name_raw",
    "gpu_count",
    "vram_gb_per_gpu",
    "total_vram_gb",
    "memory_type",
    "memory_bandwidth_gbytes_per_s",
    "bf16_dense_tflops",
    "fp8_dense_tflops",
    "intra_node_interconnect",
    "intra_node_gbytes_per_s",
    "interconnect_source",
    "inter_node_fabric",
    "inter_node_gbits_per_s",
    "gpudirect_rdma",
    "vcpus",
    "ram_gb",
    "available",
    "billing_granularity",
    "minimum_charge_seconds",
    "spot_kind",
    "price_since_at",
    "last_seen_at",
    "price_age_hours",
)
_GPU_OFFERS_V3: tuple[str, ...] = (
    *_GPU_OFFERS_V2,
    "price_covers",
    "vram_gb_stated",
    "vram_source",
    "spec_conflict",
    "gpu_variant",
    "variant_source",
)

# finetune_costs v2's columns, pinned; v3 is v2 plus the whole bill
_FINETUNE_COSTS_V2: tuple[str, ...] = (
    "job_id",
    "model_id",
    "method",
    "seq_len_tokens",
    "micro_batch_sequences",
    "precision",
    "optimizer",
    "lora_rank_used",
    "train_tokens",
    "provider",
    "instance_type",
    "region",
    "zone",
    "pricing_type",
    "is_spot",
    "price_source",
    "gpu_name",
    "gpu_count",
    "vram_gb_per_gpu",
    "price_usd_per_hour",
    "price_usd_per_gpu_hour",
    "memory_per_gpu_gb",
    "usable_vram_per_gpu_gb",
    "sharding",
    "gpus_used",
    "nodes_used",
    "gpus_per_node",
    "estimated_hours",
    "interruptions_per_hour",
    "interruption_source",
    "expected_spot_hours",
    "billing_granularity",
    "billed_hours",
    "on_demand_cost_usd",
    "expected_spot_cost_usd",
    "cost_usd",
    "cost_usd_per_million_tokens",
    "last_seen_at",
    "price_age_hours",
)
# v3's bill, pinned as it was published (its items before `fees`); v4 is v3 plus `fees_usd`
_FINETUNE_COSTS_V3: tuple[str, ...] = (
    *_FINETUNE_COSTS_V2,
    *BILL_INPUT_COLUMNS,
    "compute_usd",
    "spot_rework_usd",
    "setup_usd",
    "storage_usd",
    "checkpoint_usd",
    "egress_usd",
    "ingress_usd",
    "idle_usd",
    "total_usd",
    "bill_unknown_items",
    "bill_missing_facts",
)
_FINETUNE_COSTS_V4: tuple[str, ...] = (
    *_FINETUNE_COSTS_V2,
    *BILL_INPUT_COLUMNS,
    *BILL_TOTAL_COLUMNS,
)
# gpu_offers v4: v3 plus what billing needs beyond the hourly price: the one-time set-up fee and
# whether the provider is serverless
_GPU_OFFERS_V4: tuple[str, ...] = (
    *_GPU_OFFERS_V3,
    "setup_fee",
    "setup_fee_usd",
    "serverless",
)
# gpu_offers v5: v4 plus the monthly cap of an hourly rate (Hetzner's "never more than the monthly
# price"), which the bill applies per 730-hour month held
_GPU_OFFERS_V5: tuple[str, ...] = (
    *_GPU_OFFERS_V4,
    "monthly_price_cap",
    "monthly_price_cap_usd",
)

FEEDS: tuple[Feed, ...] = (
    Feed(
        name="gpu_offers",
        version=1,
        relation="marts.gpu_offers",
        fresh="not is_stale",
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
        description="Every current GPU offer (v1: the marts' names; prefer v2).",
    ),
    Feed(
        name="unmapped_gpus",
        version=1,
        relation="marts.unmapped_gpus",
        columns=("provider", "gpu_name_raw", "gpu_memory_gb_raw", "offers"),
        order_by=("provider", "gpu_name_raw"),
        description="Raw GPU names no hardware seed can map (v1).",
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
        description="What each fine-tuning job of the grid costs on every offer it fits (v1).",
    ),
    Feed(
        name="gpu_offers",
        version=2,
        relation="marts.gpu_offers",
        fresh="not is_stale",
        columns=_GPU_OFFERS_V2,
        order_by=("provider", "instance_type", "region", "zone", "pricing_type"),
        description="Every current GPU offer, one row per offer, with its GPU, interconnect, billing "
        "and freshness.",
        documented_names=True,
    ),
    Feed(
        name="gpu_offers",
        version=3,
        relation="marts.gpu_offers",
        fresh="not is_stale",
        columns=_GPU_OFFERS_V3,
        order_by=("provider", "instance_type", "region", "zone", "pricing_type"),
        description="v2 and, per offer, what its price covers and the provider's stated VRAM beside the "
        "seed's (which one vram_gb_per_gpu publishes, and whether they conflict).",
        documented_names=True,
    ),
    Feed(
        name="unmapped_gpus",
        version=2,
        relation="marts.unmapped_gpus",
        columns=(
            "provider",
            "gpu_name_raw",
            "gpu_memory_gb_raw",
            "offer_count",
            "example_instance_type_list",
            "first_seen_at",
        ),
        order_by=("provider", "gpu_name_raw", "gpu_memory_gb_raw"),
        description="Raw GPU names among current offers that no hardware seed can map: add an alias or "
        "an instance type row to warehouse/seeds.",
        documented_names=True,
    ),
    Feed(
        name="finetune_costs",
        version=2,
        relation="marts.finetune_costs",
        source_sql=_FINETUNE_COSTS_V2_SOURCE,
        columns=_FINETUNE_COSTS_V2,
        order_by=("job_id", "cost_usd", "provider", "instance_type", "region", "zone", "pricing_type"),
        where="fits and priced",
        # Parquet only: see the module docstring
        formats=("parquet",),
        description="What each fine-tuning job of the grid (warehouse/seeds/finetune_jobs.csv) costs on "
        "every current offer it fits, each row complete on its own: the job (joined from "
        "`core.finetune_jobs`), the offer, memory per GPU, placement, hours, cost, and the price's "
        "freshness (joined from `marts.gpu_offers`). Parquet only: one row per job × fitting offer is "
        "millions of rows on a live warehouse, where CSV is an order of magnitude larger.",
        documented_names=True,
    ),
    Feed(
        name="finetune_costs",
        version=3,
        relation="marts.finetune_costs",
        source_sql=_FINETUNE_COSTS_V2_SOURCE,
        columns=_FINETUNE_COSTS_V3,
        order_by=("job_id", "total_usd", "provider", "instance_type", "region", "zone", "pricing_type"),
        where="fits and priced",
        formats=("parquet",),
        description="v2 and the whole bill of each job's experiment on each offer it fits "
        "(finetune.cost.itemized_bill): compute, spot rework, set-up, storage, checkpoint writes, "
        "egress, ingress and idle time in USD under the provider's published facts "
        "(warehouse/seeds/provider_storage.csv), null where a fact is unpublished; `total_usd` adds "
        "the known items, `bill_unknown_items` and `bill_missing_facts` say what is left out. "
        "Parquet only, as v2. Its `total_usd` is the one bill's total, so it includes the set-up "
        "fees that only v4 itemizes (`fees_usd`).",
        documented_names=True,
    ),
    Feed(
        name="gpu_offers",
        version=4,
        relation="marts.gpu_offers",
        fresh="not is_stale",
        columns=_GPU_OFFERS_V4,
        order_by=("provider", "instance_type", "region", "zone", "pricing_type"),
        description="v3 and what billing needs beyond the hourly price: the one-time set-up fee per "
        "instance (as published and in USD; null where none is stated) and whether the provider is "
        "serverless (billed only while a run runs).",
        documented_names=True,
    ),
    Feed(
        name="finetune_costs",
        version=4,
        relation="marts.finetune_costs",
        source_sql=_FINETUNE_COSTS_V2_SOURCE,
        columns=_FINETUNE_COSTS_V4,
        order_by=("job_id", "total_usd", "provider", "instance_type", "region", "zone", "pricing_type"),
        where="fits and priced",
        formats=("parquet",),
        description="v3 and the bill's one-time fees, `fees_usd` (an offer's set-up fee × instances, "
        "once per experiment), under the billing rules of finetune.cost: a month-billed offer is held "
        "for the whole experiment in whole months, a serverless one bills no idle time. Parquet only, "
        "as v2.",
        documented_names=True,
    ),
    Feed(
        name="gpu_offers",
        version=5,
        relation="marts.gpu_offers",
        fresh="not is_stale",
        columns=_GPU_OFFERS_V5,
        order_by=("provider", "instance_type", "region", "zone", "pricing_type"),
        description="v4 and the monthly cap of an hourly rate where the provider states one (as "
        "published and in USD; null where none is stated): the bill charges an instance at most "
        "this per 730-hour month it is held.",
        documented_names=True,
    ),
)


@dataclass(frozen=True)
class Publication:
    """What one `write_feeds` wrote: the folder, the files with their rows, and the manifest."""

    out_dir: Path
    files: tuple[tuple[Path, int], ...]
    run_id: str | None
    generated_at: datetime
    data_mode: DataMode

    @property
    def manifest_path(self) -> Path:
        return self.out_dir / MANIFEST


def latest_run_id(con: duckdb.DuckDBPyConnection) -> str | None:
    """The run that built the current marts (None for a warehouse without runs, as in tests)."""
    try:
        found = con.execute(
            "select run_id from ops.runs where marts_built_at is not null "
            "order by marts_built_at desc limit 1"
        ).fetchall()
    except duckdb.CatalogException:
        return None
    return found[0][0] if found else None


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _utc_text(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parquet_metadata(
    feed: Feed, *, run_id: str | None, generated_at: datetime, data_mode: DataMode
) -> dict[str, str]:
    """The key/value metadata of a v2 Parquet file (strings only, as Parquet stores them)."""
    entries = [column(name) for name in feed.columns]
    metadata = {
        "feed": feed.name,
        "feed_version": str(feed.version),
        "generated_at": _utc_text(generated_at),
        "data_mode": data_mode,
        "columns": json.dumps(
            [{"name": e.name, "type": e.type, "unit": e.unit, "meaning": e.meaning} for e in entries]
        ),
    }
    if run_id is not None:
        metadata["run_id"] = run_id
    return metadata


def _copy_options(feed: Feed, fmt: Format, metadata: dict[str, str]) -> str:
    if fmt == "csv":
        return "format csv, header true"
    options = "format parquet, compression zstd"
    if feed.documented_names:
        pairs = ", ".join(f"{key}: {_literal(value)}" for key, value in metadata.items())
        options += f", kv_metadata {{{pairs}}}"
    return options


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_atomically(target: Path, text: str) -> None:
    partial = target.parent / f".{target.name}.{os.getpid()}.tmp"
    partial.write_text(text)
    partial.replace(target)


def manifest_document(publication: Publication, feeds: Sequence[Feed]) -> dict[str, Any]:
    """manifest.json's content: the publication and, per file, feed, version, format, rows, bytes, sha256."""
    by_name = {feed.filename(fmt): (feed, fmt) for feed in feeds for fmt in feed.formats}
    files = []
    for path, rows in publication.files:
        feed, fmt = by_name[path.name]
        files.append(
            {
                "name": path.name,
                "feed": feed.name,
                "feed_version": feed.version,
                "format": fmt,
                "rows": rows,
                "bytes": path.stat().st_size,
                "sha256": sha256_of(path),
            }
        )
    return {
        "manifest_version": MANIFEST_VERSION,
        "run_id": publication.run_id,
        "generated_at": _utc_text(publication.generated_at),
        "data_mode": publication.data_mode,
        "sample_marker": SAMPLE_MARKER if publication.data_mode == "replay" else None,
        "dictionary": "docs/feeds.md",
        "files": files,
    }


def read_manifest(out_dir: Path) -> dict[str, Any]:
    """The manifest of the publication in `out_dir`; the error says how to make one."""
    path = out_dir / MANIFEST
    if not path.exists():
        raise FileNotFoundError(
            f"no {MANIFEST} in {out_dir}; write the feeds first (`gpucost export` or `gpucost refresh`)"
        )
    return json.loads(path.read_text())


def write_publication(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    formats: tuple[Format, ...] = FORMATS,
    feeds: tuple[Feed, ...] = FEEDS,
    *,
    run_id: str | None = None,
    sample: bool | None = None,
    now: datetime | None = None,
    include_stale: bool = False,
) -> Publication:
    """Write every feed whose mart exists in `formats` (those each feed offers), then the manifest.

    run_id: the run whose marts these are (default: the last run that built marts).
    sample: whether the warehouse holds recorded sample data (default: asked of the warehouse).
    now: the publication's `generated_at` (default: the time of the call).
    include_stale: keep a stale provider's offers in the offer feeds (`gpucost export --include-stale`);
        the fine-tuning cost feeds never hold them (the cost mart prices no stale offer).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    generated_at = now or datetime.now(UTC)
    if generated_at.tzinfo is None:  # a naive time is taken as UTC, as everything here is
        generated_at = generated_at.replace(tzinfo=UTC)
    run_id = run_id if run_id is not None else latest_run_id(con)
    sample = holds_sample_data(con) if sample is None else sample
    data_mode: DataMode = "replay" if sample else "live"
    # price_age_hours reads it: one "now" for every row of every feed of the publication
    con.execute(f"set variable feeds_generated_at = timestamptz {_literal(generated_at.isoformat())}")
    written: list[tuple[Path, int]] = []
    for feed in feeds:
        wanted = [fmt for fmt in feed.formats if fmt in formats]
        if not wanted or not relation_exists(con, feed.relation):
            continue
        query = feed.query(include_stale)
        rows = con.execute(f"select count(*) from ({query})").fetchall()[0][0]
        metadata = parquet_metadata(feed, run_id=run_id, generated_at=generated_at, data_mode=data_mode)
        for fmt in wanted:
            target = out_dir / feed.filename(fmt)
            partial = out_dir / f".{target.name}.{os.getpid()}.tmp"
            con.execute(f"copy ({query}) to '{partial.as_posix()}' ({_copy_options(feed, fmt, metadata)})")
            partial.replace(target)
            written.append((target, rows))
    marker = out_dir / SAMPLE_MARKER
    if sample:
        marker.write_text(SAMPLE_BANNER + "\n")
    else:
        marker.unlink(missing_ok=True)
    publication = Publication(out_dir, tuple(written), run_id, generated_at, data_mode)
    if written:
        # last: a reader who sees this manifest finds every file it names already in place
        document = manifest_document(publication, feeds)
        _write_atomically(publication.manifest_path, json.dumps(document, indent=2) + "\n")
    return publication


def write_feeds(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    formats: tuple[Format, ...] = FORMATS,
    feeds: tuple[Feed, ...] = FEEDS,
    *,
    run_id: str | None = None,
    sample: bool | None = None,
    now: datetime | None = None,
    include_stale: bool = False,
) -> list[tuple[Path, int]]:
    """Write every feed whose mart exists, then manifest.json; (path, rows) for each feed file."""
    publication = write_publication(
        con, out_dir, formats, feeds, run_id=run_id, sample=sample, now=now, include_stale=include_stale
    )
    return list(publication.files)
