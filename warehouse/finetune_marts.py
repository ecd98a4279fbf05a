"""Fine-tuning marts: what each job of the default grid needs, and what it costs on every current offer.

The model itself lives in the `finetune` package (pure); this module reads the warehouse, builds
frames with it and writes the marts. `build_finetune_marts` runs inside
`warehouse.marts.build_marts`' transaction, after `marts.gpu_offers`, and creates

* `marts.finetune_requirements`: one row per job × GPU count (1 … 64) × sharding (none, zero2,
  zero3): the per-GPU memory breakdown of `finetune.memory_per_gpu` (`total_gb` is the device
  total; `allocated_gb`, `reserved_gb` and `peak_phase` say what sets it), trainable parameters,
  tokens and FLOPs. Offloading jobs have no `none` rows (offload needs ZeRO).
* `marts.finetune_offers`: one row per current offer with its pricing inputs (hardware_key, billing
  unit and minimum, spot interruption rate), built in DuckDB; the Python helpers below run once per
  distinct hardware and spot band, never per offer.
* `marts.finetune_plans`: one row per job × distinct hardware (placement and hours from
  `finetune.placement`), kept across refreshes while job_key and hardware_key match.
* `marts.finetune_costs`: a view, one row per job × current offer whether the job fits or not:
  offers joined to plans and billed in SQL. Nothing of size jobs × offers is ever written: at 10k
  offers that table was 4M rows and most of a refresh.

What of an offer the model reads (links, P2P, the fp16 fallback, the interruption rate, billing
granularity, node limits) is `finetune.offer`, the same translation `answers.estimate` applies to
stated hardware; this module runs it once per distinct hardware and spot band.

Jobs and models come from `warehouse.seed_models.load_finetune_jobs` / `load_models`, the one parser of
`seeds/finetune_jobs.csv` and `seeds/llm_models.csv` (the same files `load_seeds` puts in `core.*`).

Placement (`finetune.placement`): fewest nodes that fit, then the fastest sharding that fits; nodes are capped
by `max_nodes` (the CLI's --max-nodes) and by MART_MAX_GPUS GPUs in all for the mart.

* Time is `finetune.estimate_time`, a per-step roofline, with the offer's dense bf16 TFLOPS (fp16 on
  GPUs without bf16, T4 and V100), its memory bandwidth and generation from gpus.csv, and links
  as `finetune.offer.hardware_of` translates them: the seeds state intra-node bandwidth in
  bidirectional GB/s (the mart's `intra_node_gbps`), the model takes GB/s per direction
  (`intra_node_gbytes_per_s`); an NVLink bridge beyond two GPUs and a PCIe offer with no stated
  rate run at the GPU's PCIe x16 rate; GeForce cards (no P2P) stage through host memory.
* Multi-node on an offer without a fast fabric (< finetune.FAST_FABRIC_GBPS, or unknown) is
  flagged in `fabric_warning` and not priced: `priced` is false and the cost columns are null.
  So is a GPU with neither dense bf16 nor fp16 TFLOPS in gpus.csv (`unpriced_reason` says which).

Cost: billed hours are the hours rounded up to the provider's billing granularity, at least its
minimum charge (`finetune.billed_hours`), × price per instance-hour × nodes. On spot, the hours
are first stretched by the expected lost work (`finetune.expected_spot_hours`), with the
interruption rate of AWS' Spot Advisor band where the offer carries one, else a default per
provider `spot_kind` (constants in `finetune.offer`). Any node's interruption stops the whole
job, so the job's rate is nodes × the per-instance rate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

import finetune
from finetune import (
    FinetuneJob,
    ModelSpec,
    flops_per_token,
    trainable_params,
)
from finetune.cost import (
    BILL_INPUT_COLUMNS,
    BILL_ITEMS,
    BILL_TOTAL_COLUMNS,
    BITS_PER_BYTE,
    FACTS,
    job_data,
    tokens_per_gpu_step,
)
from finetune.offer import (
    CHECKPOINT_INTERVAL_HOURS,
    DEFAULT_INTERRUPTIONS_PER_HOUR,
    GRANULARITY,
    HOURS_PER_MONTH,
    MARKET_INTERRUPTIONS_PER_HOUR,
    RESTART_OVERHEAD_HOURS,
    hardware_of,
    has_p2p,
    interruptions_per_hour,
    node_limit,
)
from finetune.placement import (
    SHARDINGS,
    USABLE_VRAM_FRACTION,
    Hardware,
    JobMemory,
    MemoryTable,
    Placement,
    Plan,
    place,
    plan_job,
)
from warehouse.db import WarehouseError, query_frame, relation_exists
from warehouse.seed_models import load_finetune_jobs, load_models

__all__ = [
    "CHECKPOINT_INTERVAL_HOURS",
    "DEFAULT_INTERRUPTIONS_PER_HOUR",
    "FINETUNE_RELATIONS",
    "GRANULARITY",
    "HOURS_PER_MONTH",
    "MARKET_INTERRUPTIONS_PER_HOUR",
    "RESTART_OVERHEAD_HOURS",
    "SHARDINGS",
    "USABLE_VRAM_FRACTION",
    "Hardware",
    "JobMemory",
    "MemoryTable",
    "OfferInputs",
    "Placement",
    "Plan",
    "PricedOffers",
    "build_finetune_marts",
    "code_fingerprint",
    "cost_frame",
    "hardware_key",
    "hardware_of",
    "has_p2p",
    "interruptions_per_hour",
    "job_key",
    "node_limit",
    "offer_inputs",
    "place",
    "plan_job",
    "plans_frame",
    "priced_cost_frame",
    "priced_offers",
    "read_offers",
    "requirements_frame",
]

# How a plan is placed: (job memory, GPUs per node, VRAM per GPU, node limit) → Placement.
Placer = Callable[[JobMemory, int, float, int], Placement]

REQUIREMENT_GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
# The mart considers at most as many GPUs as the requirements grid shows (8 nodes of 8).
MART_MAX_GPUS = 64

# --- finetune_requirements --------------------------------------------------------------------

_REQUIREMENTS_SCHEMA: dict[str, Any] = {
    "job_id": pl.String,
    "model_id": pl.String,
    "method": pl.String,
    "precision": pl.String,
    "optimizer": pl.String,
    "seq_len": pl.Int64,
    "micro_batch": pl.Int64,
    "grad_checkpointing": pl.Boolean,
    "attention": pl.String,
    "lora_rank": pl.Int64,
    "lora_targets": pl.String,
    "chunked_ce": pl.Boolean,
    "offload": pl.Boolean,
    "n_gpus": pl.Int64,
    "sharding": pl.String,
    "weights_gb": pl.Float64,
    "gradients_gb": pl.Float64,
    "optimizer_gb": pl.Float64,
    "activations_gb": pl.Float64,
    "logits_gb": pl.Float64,
    "overhead_gb": pl.Float64,
    "total_gb": pl.Float64,
    "allocated_gb": pl.Float64,
    "reserved_gb": pl.Float64,
    "peak_phase": pl.String,
    "loss": pl.String,
    "quant": pl.String,
    "trainable_params": pl.Int64,
    "train_tokens": pl.Float64,
    "flops_per_token": pl.Float64,
    "total_flops": pl.Float64,
}


def requirements_frame(
    jobs: Sequence[FinetuneJob],
    models: Mapping[str, ModelSpec],
    memory: MemoryTable | None = None,
    gpu_counts: Iterable[int] = REQUIREMENT_GPU_COUNTS,
) -> pl.DataFrame:
    """One row per job × GPU count × sharding: per-GPU memory (GB), parameters, tokens, FLOPs."""
    memory = memory or MemoryTable()
    counts = tuple(gpu_counts)
    rows = []
    for fjob in jobs:
        model, job = models[fjob.model_id], fjob.job
        fpt = flops_per_token(model, job)
        trainable = trainable_params(model, job)
        job_memory = memory.for_job(model, job)
        for variant, (sharding, _) in enumerate(job_memory.variants):
            for n in counts:
                rows.append(
                    {
                        "job_id": fjob.job_id,
                        "model_id": fjob.model_id,
                        "method": job.method,
                        "precision": job.precision,
                        "optimizer": job.optimizer,
                        "seq_len": job.seq_len,
                        "micro_batch": job.micro_batch,
                        "grad_checkpointing": job.grad_checkpointing,
                        "attention": job.attention,
                        "lora_rank": job.lora_rank,
                        "lora_targets": job.lora_targets,
                        "chunked_ce": job.chunked_ce,
                        "offload": job.offload,
                        "n_gpus": n,
                        "sharding": sharding,
                        **(breakdown := job_memory.get(variant, n)).as_dict(),
                        "allocated_gb": breakdown.allocated_gb,
                        "reserved_gb": breakdown.reserved_gb,
                        "peak_phase": breakdown.peak_phase,
                        "loss": job.loss,
                        "quant": job.quant if job.method == "qlora" else None,
                        "trainable_params": trainable,
                        "train_tokens": fjob.train_tokens,
                        "flops_per_token": fpt,
                        "total_flops": fpt * fjob.train_tokens,
                    }
                )
    return pl.DataFrame(rows, schema=_REQUIREMENTS_SCHEMA)


# --- offers ------------------------------------------------------------------------------------

_OFFERS_SQL = """
select
    offers.provider,
    offers.instance_type,
    offers.region,
    offers.zone,
    offers.pricing_type,
    offers.is_spot,
    offers.price_source,
    offers.gpu_name,
    offers.gpu_count,
    offers.vram_gb,
    offers.price_usd_per_hour,
    offers.bf16_tflops,
    gpus.fp16_tflops,
    gpus.supports_bf16,
    offers.intra_node_interconnect,
    offers.intra_node_gbps,
    offers.inter_node_gbps,
    gpus.pcie_gen,
    gpus.memory_bandwidth_gbps::double as memory_bandwidth_gbps,
    gpus.architecture,
    gpus.sm_count,
    gpus.matmul_tflops::double as matmul_tflops,
    coalesce(try_cast(gpus.half_rate_accumulate as boolean), false) as half_rate_accumulate,
    gpus.tensor_flops_per_sm_clock::bigint as tensor_flops_per_sm_clock,
    gpus.model as gpu_model,
    offers.billing_granularity,
    offers.minimum_charge_seconds,
    offers.spot_kind,
    try_cast(json_extract_string(offers.provider_data, '$.interruption_rate_min') as double)
        as interruption_rate_min,
    try_cast(json_extract_string(offers.provider_data, '$.interruption_rate_max') as double)
        as interruption_rate_max,
    offers.is_stale,
    offers.setup_fee_usd,
    offers.serverless,
    offers.monthly_price_cap_usd,
    {fact_columns}
from marts.gpu_offers as offers
left join core.gpus as gpus on offers.gpu_name = gpus.gpu_name
left join ({facts}) as facts on offers.provider = facts.provider
where offers.gpu_count > 0 and offers.vram_gb > 0 and offers.price_usd_per_hour > 0
order by offers.provider, offers.instance_type, offers.region, offers.zone, offers.pricing_type
"""


# A provider's bill facts (finetune.cost.ProviderFacts), prices in USD, as every offer carries them.
FACT_SCHEMA: dict[str, Any] = {
    "storage_persists_on_stop": pl.Boolean,
    "volume_usd_per_gb_month": pl.Float64,
    "egress_usd_per_gb": pl.Float64,
    "egress_free_gb_per_month": pl.Float64,
    "ingress_usd_per_gb": pl.Float64,
    "stopped_instance_bills": pl.Boolean,
    "boot_minutes": pl.Float64,
    "internet_gbits_per_s": pl.Float64,
    "disk_write_gbytes_per_s": pl.Float64,
}
_FACT_COLUMNS = tuple(FACT_SCHEMA)

# core.provider_storage (warehouse/seeds/provider_storage.csv, loaded with auto_detect, so every
# column is cast here: an all-empty column comes in as VARCHAR) with its prices converted to USD
# at the latest rate of core.fx_rates. A price in a currency without a rate is unknown (null).
_PROVIDER_FACTS_SQL = """
select
    facts.provider,
    try_cast(facts.storage_persists_on_stop as boolean) as storage_persists_on_stop,
    try_cast(facts.volume_price_per_gb_month as double) * fx.usd_per_unit as volume_usd_per_gb_month,
    try_cast(facts.egress_price_per_gb as double) * fx.usd_per_unit as egress_usd_per_gb,
    try_cast(facts.egress_free_gb_per_month as double) as egress_free_gb_per_month,
    try_cast(facts.ingress_price_per_gb as double) * fx.usd_per_unit as ingress_usd_per_gb,
    try_cast(facts.stopped_instance_bills as boolean) as stopped_instance_bills,
    try_cast(facts.boot_minutes as double) as boot_minutes,
    try_cast(facts.internet_gbits_per_s as double) as internet_gbits_per_s,
    try_cast(facts.disk_write_gbytes_per_s as double) as disk_write_gbytes_per_s
from core.provider_storage as facts
left join (
    select 'USD' as currency, 1.0::double as usd_per_unit
    {other_rates}
) as fx on upper(trim(facts.currency::varchar)) = fx.currency
"""
_LATEST_RATES_SQL = """
    union all
    select currency, usd_per_unit from core.fx_rates
    where currency <> 'USD'
    qualify row_number() over (partition by currency order by rate_date desc) = 1
"""
# no facts seed yet: every fact unknown
_NO_FACTS_SQL = "select null::varchar as provider, " + ", ".join(
    f"null::{'boolean' if t == pl.Boolean else 'double'} as {c}" for c, t in FACT_SCHEMA.items()
)


def provider_facts_sql(con: duckdb.DuckDBPyConnection) -> str:
    """A select of one row per provider with its bill facts (FACT_SCHEMA); no rows without the seed."""
    if not relation_exists(con, "core.provider_storage"):
        return _NO_FACTS_SQL + " where false"
    rates = _LATEST_RATES_SQL if relation_exists(con, "core.fx_rates") else ""
    return _PROVIDER_FACTS_SQL.format(other_rates=rates)


def offers_sql(con: duckdb.DuckDBPyConnection) -> str:
    """The select behind `read_offers` on this warehouse (with or without the facts seed)."""
    return _OFFERS_SQL.format(
        facts=provider_facts_sql(con), fact_columns=", ".join(f"facts.{c}" for c in _FACT_COLUMNS)
    )


# Every column `read_offers` returns, typed: the frame a hand-built offer (answers.estimate's
# stated hardware) is made as; a test holds it to `read_offers`.
OFFER_SCHEMA: dict[str, Any] = {
    "provider": pl.String,
    "instance_type": pl.String,
    "region": pl.String,
    "zone": pl.String,
    "pricing_type": pl.String,
    "is_spot": pl.Boolean,
    "price_source": pl.String,
    "gpu_name": pl.String,
    "gpu_count": pl.Float64,
    "vram_gb": pl.Float64,
    "price_usd_per_hour": pl.Float64,
    "bf16_tflops": pl.Float64,
    "fp16_tflops": pl.Float64,
    "supports_bf16": pl.Boolean,
    "intra_node_interconnect": pl.String,
    "intra_node_gbps": pl.Float64,
    "inter_node_gbps": pl.Float64,
    "pcie_gen": pl.Int64,
    "memory_bandwidth_gbps": pl.Float64,
    "architecture": pl.String,
    "sm_count": pl.Int64,
    "matmul_tflops": pl.Float64,
    "half_rate_accumulate": pl.Boolean,
    "tensor_flops_per_sm_clock": pl.Int64,
    "gpu_model": pl.String,
    "billing_granularity": pl.String,
    "minimum_charge_seconds": pl.Int64,
    "spot_kind": pl.String,
    "interruption_rate_min": pl.Float64,
    "interruption_rate_max": pl.Float64,
    "is_stale": pl.Boolean,
    "setup_fee_usd": pl.Float64,
    "serverless": pl.Boolean,
    "monthly_price_cap_usd": pl.Float64,
    **FACT_SCHEMA,
}


def read_offers(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Current offers from marts.gpu_offers with what placing and pricing a job needs."""
    if not relation_exists(con, "marts.gpu_offers"):
        raise WarehouseError("no marts.gpu_offers yet; run `gpucost refresh` first")
    return query_frame(con, offers_sql(con))


# --- per-offer pricing inputs, column-wise ----------------------------------------------------
#
# The offer's own work happens in DuckDB: the Python functions above run once per distinct
# hardware and once per distinct spot band (hundreds of rows at most, however many offers), and
# `_INPUTS_SQL` joins their answers back onto every offer.

# Columns of a `read_offers` row that decide its Hardware (hardware_of) and its interruption
# rate (interruptions_per_hour).
_HARDWARE_COLUMNS = (
    "gpu_name",
    "gpu_count",
    "vram_gb",
    "bf16_tflops",
    "fp16_tflops",
    "supports_bf16",
    "intra_node_interconnect",
    "intra_node_gbps",
    "inter_node_gbps",
    "pcie_gen",
    "memory_bandwidth_gbps",
    "architecture",
    "sm_count",
    "matmul_tflops",
    "half_rate_accumulate",
    "tensor_flops_per_sm_clock",
    "gpu_model",
    # not the machine's, but it decides the node limit (a serverless offer runs on one machine)
    "serverless",
)
_SPOT_COLUMNS = ("is_spot", "interruption_rate_min", "interruption_rate_max", "spot_kind")
# read_offers columns a hand-built frame may leave out (they came later); null = unknown.
_OPTIONAL_OFFER_COLUMNS: dict[str, Any] = {
    "fp16_tflops": pl.Float64,
    "supports_bf16": pl.Boolean,
    "memory_bandwidth_gbps": pl.Float64,
    "architecture": pl.String,
    "sm_count": pl.Int64,
    "matmul_tflops": pl.Float64,
    "half_rate_accumulate": pl.Boolean,
    "tensor_flops_per_sm_clock": pl.Int64,
    "gpu_model": pl.String,
    "setup_fee_usd": pl.Float64,
    "serverless": pl.Boolean,
    "monthly_price_cap_usd": pl.Float64,
    **FACT_SCHEMA,
}

_OFFER_COLUMNS = (
    "provider",
    "instance_type",
    "region",
    "zone",
    "pricing_type",
    "is_spot",
    "price_source",
    "gpu_name",
    "gpu_count",
    "vram_gb",
    "price_usd_per_hour",
)
# what names one offer (marts.gpu_offers' key)
_OFFER_KEY = _OFFER_COLUMNS[:5]


def _null_safe(columns: Iterable[str], left: str, right: str) -> str:
    return " and ".join(f"{left}.{c} is not distinct from {right}.{c}" for c in columns)


def _granularity_sql(column: str) -> str:
    cases = " ".join(f"when '{raw}' then '{unit}'" for raw, unit in GRANULARITY.items())
    return f"case {column} {cases} else 'hour' end"


_INPUTS_SQL = f"""
with

offers as (
    select * from {{offers}}
),

hardware as (
    select * from {{hardware}}
),

spot_rates as (
    select * from {{spot_rates}}
),

final as (
    select
        {", ".join(f"offers.{c}" for c in _OFFER_COLUMNS)},
        hardware.hardware_key,
        {_granularity_sql("offers.billing_granularity")} as billing_granularity,
        coalesce(offers.minimum_charge_seconds, 0) / 3600 as minimum_billed_hours,
        spot_rates.interruptions_per_hour,
        spot_rates.interruption_source,
        offers.setup_fee_usd,
        coalesce(offers.serverless, false) as serverless,
        offers.monthly_price_cap_usd,
        {", ".join(f"offers.{c}" for c in _FACT_COLUMNS)}
    from offers
    inner join hardware on {_null_safe(_HARDWARE_COLUMNS, "offers", "hardware")}
    inner join spot_rates on {_null_safe(_SPOT_COLUMNS, "offers", "spot_rates")}
)

select * from final
"""


def _distinct_rows(con: duckdb.DuckDBPyConnection, source: str, columns: Sequence[str]) -> pl.DataFrame:
    return con.sql(f"select distinct {', '.join(columns)} from {source}").pl()


@dataclass(frozen=True)
class OfferInputs:
    """What pricing every offer needs, in frames small enough to hold whatever the offer count.

    `hardware`: one row per distinct hardware description (the `_HARDWARE_COLUMNS`) with its
    `hardware_key`; `spot_rates`: one row per distinct spot band with its interruption rate;
    `machines`: the Hardware of each key with the node limit plans are made under.
    """

    hardware: pl.DataFrame
    spot_rates: pl.DataFrame
    machines: dict[int, tuple[Hardware, int]]


def hardware_key(hw: Hardware, limit: int) -> int:
    """A stable 64-bit key of (hardware, node limit): the same across refreshes and processes,
    so a plan computed once is found again (see `_reusable_plans`)."""
    digest = hashlib.sha256(repr((hw, limit)).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def offer_inputs(
    con: duckdb.DuckDBPyConnection,
    source: str,
    *,
    max_nodes: int | None = None,
    max_gpus: int | None = MART_MAX_GPUS,
) -> OfferInputs:
    """The distinct hardware and spot bands among the offers of `source` (a relation or subquery
    with the `read_offers` columns), each worked out once by the functions above."""
    machines: dict[int, tuple[Hardware, int]] = {}
    keys = []
    raw = _distinct_rows(con, source, _HARDWARE_COLUMNS)
    for row in raw.iter_rows(named=True):
        hw = hardware_of(row)
        limit = node_limit(hw, max_nodes, max_gpus, serverless=bool(row["serverless"]))
        key = hardware_key(hw, limit)
        machines.setdefault(key, (hw, limit))
        keys.append(key)
    hardware = raw.with_columns(pl.Series("hardware_key", keys, dtype=pl.Int64))
    bands = _distinct_rows(con, source, _SPOT_COLUMNS)
    rates = [interruptions_per_hour(row) for row in bands.iter_rows(named=True)]
    spot_rates = bands.with_columns(
        pl.Series("interruptions_per_hour", [r for r, _ in rates], dtype=pl.Float64),
        pl.Series("interruption_source", [s for _, s in rates], dtype=pl.String),
    )
    return OfferInputs(hardware, spot_rates, machines)


# --- plans: job × hardware ---------------------------------------------------------------------

_PLAN_SCHEMA: dict[str, Any] = {
    "job_id": pl.String,
    "job_key": pl.String,
    "model_id": pl.String,
    "method": pl.String,
    "train_tokens": pl.Float64,
    "hardware_key": pl.Int64,
    "fits": pl.Boolean,
    "usable_vram_gb": pl.Float64,
    "total_gb": pl.Float64,
    "sharding": pl.String,
    "gpus_used": pl.Int64,
    "nodes_used": pl.Int64,
    "gpus_per_node": pl.Int64,
    "multi_node": pl.Boolean,
    "fabric_warning": pl.String,
    "estimated_hours": pl.Float64,
    "compute_hours": pl.Float64,
    "comm_hours": pl.Float64,
    "unpriced_reason": pl.String,
}
_PLAN_FIELDS = tuple(_PLAN_SCHEMA)[6:]
# What the bill reads of the job (finetune.cost.job_data, the experiment's checkpoint interval),
# the same on every hardware; held in the plans so the cost view needs no other table.
_JOB_DATA_SCHEMA: dict[str, Any] = {
    "dataset_gb": pl.Float64,
    "model_download_gb": pl.Float64,
    "checkpoint_gb": pl.Float64,
    "result_gb": pl.Float64,
    "runs": pl.Int64,
    "idle_hours": pl.Float64,
    "checkpoint_every_hours": pl.Float64,
    "checkpoint_every_steps": pl.Int64,
    "tokens_per_gpu_step": pl.Float64,
}
_PLAN_SCHEMA |= _JOB_DATA_SCHEMA


def _job_data_row(fjob: FinetuneJob, model: ModelSpec) -> tuple[Any, ...]:
    data = job_data(model, fjob)
    return (
        data.dataset_gb,
        data.model_download_gb,
        data.checkpoint_gb,
        data.result_gb,
        data.runs,
        data.idle_hours,
        fjob.experiment.every_hours,
        fjob.experiment.checkpoint_every_steps,
        tokens_per_gpu_step(fjob),
    )


def code_fingerprint() -> str:
    """sha256 of the code a plan depends on: the finetune package and this module.

    Plans are pure functions of that code, the job, its model and the hardware, so a stored plan
    whose job_key (this fingerprint, the job and the model) and hardware_key match is the plan
    this code would compute; editing any of it recomputes every plan on the next refresh.
    """
    digest = hashlib.sha256()
    for path in [*sorted(Path(finetune.__file__).parent.glob("*.py")), Path(__file__)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def job_key(fingerprint: str, fjob: FinetuneJob, model: ModelSpec) -> str:
    return hashlib.sha256(f"{fingerprint}\0{fjob!r}\0{model!r}".encode()).hexdigest()[:32]


def plans_frame(
    jobs: Sequence[FinetuneJob],
    models: Mapping[str, ModelSpec],
    machines: Mapping[int, tuple[Hardware, int]],
    memory: MemoryTable,
    keys: Mapping[str, str] | None = None,
    skip: Iterable[tuple[str, int]] = (),
    placer: Placer = place,
) -> pl.DataFrame:
    """One row per job × hardware key: `plan_job` on the placement `placer` chooses.

    `keys` maps job_id to its job_key (default: the job_id); pairs in `skip` (job_key,
    hardware_key) are left out, because the caller already holds their plans. `placer` is
    `place` (fewest nodes up to the limit) for offers; stated hardware passes `place_at`.
    """
    skipped = set(skip)
    meta: list[tuple[str, str, str, str, float, int]] = []
    plans: list[Plan] = []
    data: list[tuple[Any, ...]] = []
    for fjob in jobs:
        key = keys[fjob.job_id] if keys is not None else fjob.job_id
        todo = [(k, m) for k, m in machines.items() if (key, k) not in skipped]
        if not todo:
            continue
        job_memory = memory.for_job(models[fjob.model_id], fjob.job)
        job_row = _job_data_row(fjob, models[fjob.model_id])
        placements: dict[tuple[int, float, int], Placement] = {}
        row = (fjob.job_id, key, fjob.model_id, fjob.job.method, fjob.train_tokens)
        for hw_key, (hw, limit) in todo:
            spot = (hw.gpus_per_node, hw.vram_gb, limit)
            if spot not in placements:
                placements[spot] = placer(job_memory, *spot)
            plans.append(plan_job(fjob, hw, placements[spot], job_memory))
            meta.append((*row, hw_key))
            data.append(job_row)
    # column by column: a dict per row costs more than the plans themselves at 150k rows
    names = tuple(_PLAN_SCHEMA)[:6]
    columns: dict[str, list[Any]] = {name: [row[i] for row in meta] for i, name in enumerate(names)}
    columns |= {name: [getattr(plan, name) for plan in plans] for name in _PLAN_FIELDS}
    columns |= {name: [row[i] for row in data] for i, name in enumerate(_JOB_DATA_SCHEMA)}
    return pl.DataFrame(columns, schema=_PLAN_SCHEMA)


# --- finetune_costs: offers × plans, billed in SQL ---------------------------------------------
#
# The same formulas as finetune.billed_hours and finetune.expected_spot_hours, written out over
# columns in the same order of floating-point operations, so each value is the one those
# functions return (tests/test_finetune_scale.py holds them equal row for row):
#   billed_hours(h, unit, minimum): q = h × units / unit hours; n = ceil(q − 1e-9 · max(1, q));
#     b = n × unit hours / units, one unit more if b < h; at least minimum (a unit is (3600, 1) for
#     a second ... (1, 730) for a month).
#   expected_spot_hours(h, λ, c, R) = h / (1 − λ·(c/2 + R)), never finishing when λ·(c/2 + R) ≥ 1.
# λ is the instance rate × nodes: any node's interruption stops the whole job; c is the job's
# checkpoint interval (finetune.cost.checkpoint_interval_hours).
# The bill's items are finetune.cost.itemized_bill's, written out the same way (its docstring
# gives the formulas); tests/test_finetune_scale.py holds every item equal to it row for row.

# the loss per interruption of a job checkpointing at the default interval
_LOSS_PER_INTERRUPTION_HOURS = CHECKPOINT_INTERVAL_HOURS / 2 + RESTART_OVERHEAD_HOURS
_UNITS_PER_HOUR = "case billing_granularity when 'second' then 3600 when 'minute' then 60 else 1 end"
_HOURS_PER_UNIT = f"case billing_granularity when 'month' then {int(HOURS_PER_MONTH)} else 1 end"
_NEVER_FINISHES = "spot interruptions ({:.3g}/h) outpace checkpoints every {:g} h: the job never finishes"
# The bill columns of marts.finetune_costs, after the columns it had before the bill.
BILL_COLUMNS = (*BILL_INPUT_COLUMNS, *BILL_TOTAL_COLUMNS)


def _sum_known_sql(items: Sequence[str]) -> str:
    first, *rest = items
    return " + ".join([f"{first}_usd", *(f"coalesce({item}_usd, 0.0)" for item in rest)])


def _listed_sql(cases: Sequence[tuple[str, str]]) -> str:
    """`a, b` of the labels whose condition holds, null when none does."""
    whens = ", ".join(f"case when {cond} then '{label}' end" for label, cond in cases)
    return f"nullif(concat_ws(', ', {whens}), '')"


# when each fact's absence leaves an item unknown (finetune.cost.itemized_bill's `missing`)
_MISSING_FACT_SQL: dict[str, str] = {
    "storage_persists_on_stop": "volume_usd_per_gb_month is null and storage_persists_on_stop is null",
    "volume_price_per_gb_month": "volume_usd_per_gb_month is null "
    "and storage_persists_on_stop is distinct from false",
    "egress_price_per_gb": "out_gb <> 0 and egress_usd_per_gb is null",
    "ingress_price_per_gb": "moved_gb is distinct from 0 and ingress_usd_per_gb is null",
    "stopped_instance_bills": "gap_hours <> 0 and not serverless and not held "
    "and stopped_instance_bills is null",
    "boot_minutes": "boot_minutes is null",
    "internet_gbits_per_s": "internet_gbits_per_s is null",
    "disk_write_gbytes_per_s": "checkpoint_writes <> 0 and disk_write_gbytes_per_s is null",
}
assert tuple(_MISSING_FACT_SQL) == FACTS


def _billed_hours_sql(hours: str, minimum: str = "minimum_billed_hours") -> str:
    hours = f"({hours})"
    q = f"({hours} * units_per_hour / hours_per_unit)"
    n = f"ceil({q} - 1e-9 * greatest(1.0, {q}))"
    billed = (
        f"case when {n} * hours_per_unit / units_per_hour < {hours} "
        f"then ({n} + 1) * hours_per_unit / units_per_hour "
        f"else {n} * hours_per_unit / units_per_hour end"
    )
    return f"greatest({billed}, {minimum})"


def _capped_cost_sql(span: str) -> str:
    """finetune.cost.capped_cost over columns: whole 730-h months at min(730 × price, cap), the
    part month left at min(billed(rest) × price, cap), × nodes. `span` names the hours capped
    (`rental`, `experiment`, `run`): the `months` stage has `{span}_months`, `{span}_rest` and
    `{span}_first_minimum`, so the expression stays a few column references long."""
    whole = f"least({HOURS_PER_MONTH!r} * price_usd_per_hour, monthly_cap_usd)"
    billed = _billed_hours_sql(f"{span}_rest", f"{span}_first_minimum")
    last = f"least({billed} * price_usd_per_hour, monthly_cap_usd)"
    return f"({span}_months * {whole} + {last}) * nodes_used"


# The spans of hours a bill rounds or caps, each a column of the `spans` stage, so every
# formula over them refers to a column: written out inline, each span appeared 7 times in a
# billed-hours expression and ~20 times in a capped one, and DuckDB bound and optimised all of it
# for every question (inline, the bill query took 166 ms where it takes 138 at 10k offers).
_SPANS = {
    # a held rental's billed work: every run's hours and the gaps between them
    "rental": "runs * estimated_hours + (runs - 1) * idle_hours",
    # its wall time: every run's (spot) wall hours and the gaps between them
    "experiment": "runs * coalesce(spot_hours, estimated_hours) + (runs - 1) * idle_hours",
    # one run's wall hours
    "run": "coalesce(spot_hours, estimated_hours)",
}
# each span's whole months, the hours left after them, and the minimum that applies to those
# (a rental's minimum counts once, in its first month)
_MONTHS_SQL = ",\n        ".join(
    f"floor({span}_hours / {HOURS_PER_MONTH!r}) as {span}_months, "
    f"greatest(0.0, {span}_hours - floor({span}_hours / {HOURS_PER_MONTH!r}) * {HOURS_PER_MONTH!r}) "
    f"as {span}_rest, "
    f"case when floor({span}_hours / {HOURS_PER_MONTH!r}) = 0 then minimum_billed_hours else 0.0 end "
    f"as {span}_first_minimum"
    for span in _SPANS
)

_COSTS_SQL = f"""
with

offers as (
    select * from {{offers}}
),

plans as (
    select * from {{plans}}
),

joined as (
    select
        plans.job_id,
        plans.model_id,
        plans.method,
        plans.train_tokens,
        {", ".join(f"offers.{c}" for c in _OFFER_COLUMNS)},
        {", ".join(f"plans.{c}" for c in _PLAN_FIELDS[:-1])},
        offers.interruptions_per_hour as instance_interruptions_per_hour,
        offers.interruption_source,
        offers.billing_granularity,
        offers.minimum_billed_hours,
        {_UNITS_PER_HOUR} as units_per_hour,
        {_HOURS_PER_UNIT} as hours_per_unit,
        -- a cap applies to an hourly rate held as one rental (finetune.cost.itemized_bill)
        case
            when not offers.serverless and offers.billing_granularity <> 'month'
                then offers.monthly_price_cap_usd
        end as monthly_cap_usd,
        offers.billing_granularity = 'month'
            or (not offers.serverless and offers.monthly_price_cap_usd is not null) as held,
        offers.setup_fee_usd,
        offers.serverless,
        plans.unpriced_reason as plan_unpriced_reason,
        plans.unpriced_reason is null and plans.estimated_hours is not null as plan_priced,
        {", ".join(f"plans.{c}" for c in _JOB_DATA_SCHEMA)},
        {", ".join(f"offers.{c}" for c in _FACT_COLUMNS)}
    from offers
    inner join plans on offers.hardware_key = plans.hardware_key
),

spot as (
    select
        *,
        case
            when plan_priced then instance_interruptions_per_hour * nodes_used
        end as job_interruptions_per_hour,
        case
            when plan_priced and checkpoint_every_hours is not null then checkpoint_every_hours
            when plan_priced
                then checkpoint_every_steps * estimated_hours
                    / (train_tokens / (tokens_per_gpu_step * gpus_used))
        end as interval_hours
    from joined
),

losses as (
    select
        *,
        job_interruptions_per_hour * (interval_hours / 2 + {RESTART_OVERHEAD_HOURS!r}) as waste
    from spot
),

wall as (
    select
        *,
        waste >= 1 as never_finishes,
        case when waste < 1 then estimated_hours / (1 - waste) end as spot_hours
    from losses
),

spans as (
    select
        *,
        {", ".join(f"{sql} as {span}_hours" for span, sql in _SPANS.items())}
    from wall
),

months as (
    select
        *,
        {_MONTHS_SQL}
    from spans
),

billing as (
    select
        *,
        plan_priced and not coalesce(never_finishes, false) as is_priced,
        case
            when plan_priced and job_interruptions_per_hour is null
                then {_billed_hours_sql("estimated_hours")}
            when plan_priced and not never_finishes
                then {_billed_hours_sql("spot_hours")}
        end as billed,
        case
            when plan_priced and not coalesce(never_finishes, false)
                then {_billed_hours_sql("estimated_hours")}
        end as billed_work,
        -- a month-billed rental is held for the whole experiment, gaps included, rounded once
        case
            when plan_priced and not coalesce(never_finishes, false) and held
                then {_billed_hours_sql("rental_hours")}
        end as billed_rental,
        case
            when plan_priced and not coalesce(never_finishes, false) and held
                then {_billed_hours_sql("experiment_hours")}
        end as billed_rental_wall,
        -- an hourly rate capped per month, held for the experiment: each month at most the cap
        case
            when plan_priced and not coalesce(never_finishes, false) and monthly_cap_usd is not null
                then {_capped_cost_sql("rental")}
        end as capped_usd,
        case
            when plan_priced and not coalesce(never_finishes, false) and monthly_cap_usd is not null
                then {_capped_cost_sql("experiment")}
        end as capped_wall_usd
    from months
),

quantities as (
    select
        *,
        -- one run's cost (finetune.cost.run_cost): its billed wall hours at the price, or on a
        -- capped hourly rate each month of the run at most the cap
        case
            when is_priced and monthly_cap_usd is not null
                then {_capped_cost_sql("run")}
            when is_priced then billed * price_usd_per_hour * nodes_used
        end as run_usd,
        case
            when volume_usd_per_gb_month is not null or storage_persists_on_stop then true
            else storage_persists_on_stop
        end as keeps_data,
        model_download_gb + dataset_gb as session_gb,
        dataset_gb + model_download_gb + checkpoint_gb as stored_gb,
        runs * floor(estimated_hours / interval_hours) as checkpoint_writes,
        runs * result_gb as out_gb,
        (runs - 1) * idle_hours as gap_hours
    from billing
),

moved as (
    select
        *,
        case
            when runs = 1 or keeps_data then session_gb
            when not keeps_data then runs * session_gb
        end as moved_gb
    from quantities
),

items as (
    select
        *,
        case
            when is_priced and monthly_cap_usd is not null then capped_usd
            when is_priced and held then billed_rental * price_usd_per_hour * nodes_used
            when is_priced then runs * billed_work * price_usd_per_hour * nodes_used
        end as compute_usd,
        case
            when is_priced and monthly_cap_usd is not null then capped_wall_usd - capped_usd
            when is_priced and held
                then (billed_rental_wall - billed_rental) * price_usd_per_hour * nodes_used
            when is_priced then runs * (billed - billed_work) * price_usd_per_hour * nodes_used
        end as spot_rework_usd,
        case
            when is_priced and boot_minutes is not null and internet_gbits_per_s is not null
                and moved_gb is not null
                then (runs * boot_minutes / 60 + moved_gb * {BITS_PER_BYTE} / internet_gbits_per_s / 3600)
                    * price_usd_per_hour * nodes_used
        end as setup_usd,
        case
            when not is_priced then null
            when volume_usd_per_gb_month is not null
                then volume_usd_per_gb_month * stored_gb * experiment_hours / {HOURS_PER_MONTH!r}
            when storage_persists_on_stop = false then 0.0
        end as storage_usd,
        case
            when not is_priced then null
            when checkpoint_writes = 0 then 0.0
            when disk_write_gbytes_per_s is not null
                then checkpoint_writes * checkpoint_gb / disk_write_gbytes_per_s / 3600
                    * price_usd_per_hour * nodes_used
        end as checkpoint_usd,
        case
            when not is_priced then null
            when out_gb = 0 then 0.0
            when egress_usd_per_gb is not null
                then greatest(0.0, out_gb - coalesce(egress_free_gb_per_month, 0.0)) * egress_usd_per_gb
        end as egress_usd,
        case
            when not is_priced then null
            when moved_gb = 0 then 0.0
            when ingress_usd_per_gb is not null and moved_gb is not null then moved_gb * ingress_usd_per_gb
        end as ingress_usd,
        case
            when not is_priced then null
            when gap_hours = 0 or serverless or held or stopped_instance_bills = false then 0.0
            when stopped_instance_bills then gap_hours * price_usd_per_hour * nodes_used
        end as idle_usd,
        case when is_priced then coalesce(setup_fee_usd, 0.0) * nodes_used end as fees_usd
    from moved
),

final as (
    select
        job_id,
        model_id,
        method,
        train_tokens,
        {", ".join(_OFFER_COLUMNS)},
        {", ".join(_PLAN_FIELDS[:-1])},
        coalesce(job_interruptions_per_hour, instance_interruptions_per_hour) as interruptions_per_hour,
        interruption_source,
        spot_hours as expected_spot_hours,
        billing_granularity,
        billed as billed_hours,
        is_priced as priced,
        case
            when not plan_priced then plan_unpriced_reason
            when never_finishes then format('{_NEVER_FINISHES.replace("{", "{{").replace("}", "}}")}',
                job_interruptions_per_hour, interval_hours)
        end as unpriced_reason,
        case when not is_spot then run_usd end as on_demand_cost_usd,
        case when is_spot then run_usd end as expected_spot_cost_usd,
        run_usd as cost_usd,
        run_usd / train_tokens * 1e6 as usd_per_million_tokens,
        interval_hours as checkpoint_interval_hours,
        dataset_gb,
        model_download_gb,
        checkpoint_gb,
        result_gb,
        runs,
        idle_hours,
        {", ".join(f"{item}_usd" for item in BILL_ITEMS)},
        case when is_priced then {_sum_known_sql(BILL_ITEMS)} end as total_usd,
        case
            when is_priced then {_listed_sql([(item, f"{item}_usd is null") for item in BILL_ITEMS])}
        end as bill_unknown_items,
        case when is_priced then {_listed_sql(list(_MISSING_FACT_SQL.items()))} end as bill_missing_facts
    from items
)

select * from final
"""


@contextmanager
def _registered(con: duckdb.DuckDBPyConnection, **frames: pl.DataFrame) -> Iterator[None]:
    for name, frame in frames.items():
        con.register(name, frame)
    try:
        yield
    finally:
        for name in frames:
            con.unregister(name)


def _with_optional_columns(offers: pl.DataFrame) -> pl.DataFrame:
    missing = [
        pl.lit(None, dtype=t).alias(c) for c, t in _OPTIONAL_OFFER_COLUMNS.items() if c not in offers.columns
    ]
    return offers.with_columns(missing) if missing else offers


@dataclass(frozen=True)
class PricedOffers:
    """Offers with their pricing inputs (`_INPUTS_SQL`'s rows: hardware_key, billing unit,
    minimum, spot rate, provider facts) and the Hardware and node limit of each hardware_key.

    What `cost_frame` works out of its offers before any job is placed: the same whatever the
    job, so `gpucost serve` keeps one per warehouse version and node limit (answers.estimate).
    """

    frame: pl.DataFrame
    machines: dict[int, tuple[Hardware, int]]

    def only(self, keys: pl.DataFrame) -> PricedOffers:
        """The offers whose key (provider, instance_type, region, zone, pricing_type) is in `keys`."""
        on = list(_OFFER_KEY)
        return PricedOffers(
            self.frame.join(keys.select(on), on=on, how="semi", nulls_equal=True), self.machines
        )


def priced_offers(
    con: duckdb.DuckDBPyConnection,
    offers: pl.DataFrame,
    *,
    max_nodes: int | None = None,
    max_gpus: int | None = MART_MAX_GPUS,
) -> PricedOffers:
    """`offers` (`read_offers` columns) with their pricing inputs; `con` only runs the SQL."""
    with _registered(con, finetune_offers_frame=_with_optional_columns(offers)):
        inputs = offer_inputs(con, "finetune_offers_frame", max_nodes=max_nodes, max_gpus=max_gpus)
        with _registered(
            con, finetune_hardware_frame=inputs.hardware, finetune_spot_rates_frame=inputs.spot_rates
        ):
            sql = _INPUTS_SQL.format(
                offers="finetune_offers_frame",
                hardware="finetune_hardware_frame",
                spot_rates="finetune_spot_rates_frame",
            )
            return PricedOffers(query_frame(con, sql), inputs.machines)


def priced_cost_frame(
    con: duckdb.DuckDBPyConnection,
    jobs: Sequence[FinetuneJob],
    models: Mapping[str, ModelSpec],
    priced: PricedOffers,
    *,
    memory: MemoryTable | None = None,
    placer: Placer = place,
) -> pl.DataFrame:
    """`cost_frame` of offers already priced (`priced_offers`): jobs are planned only on the
    hardware these offers have."""
    present = set(priced.frame["hardware_key"].to_list())
    machines = {key: machine for key, machine in priced.machines.items() if key in present}
    plans = plans_frame(jobs, models, machines, memory or MemoryTable(), placer=placer)
    with _registered(con, finetune_priced_offers_frame=priced.frame, finetune_plans_frame=plans):
        costs_sql = _COSTS_SQL.format(offers="finetune_priced_offers_frame", plans="finetune_plans_frame")
        return query_frame(con, costs_sql)


def cost_frame(
    con: duckdb.DuckDBPyConnection,
    jobs: Sequence[FinetuneJob],
    models: Mapping[str, ModelSpec],
    offers: pl.DataFrame,
    *,
    max_nodes: int | None = None,
    max_gpus: int | None = MART_MAX_GPUS,
    memory: MemoryTable | None = None,
    placer: Placer = place,
) -> pl.DataFrame:
    """The rows of marts.finetune_costs for `jobs` on `offers` (`read_offers`), as a frame.

    `con` only runs the SQL (any connection, read-only or in-memory included). The mart and
    `answers.estimate` (offers and stated hardware alike) share `offer_inputs`, `plans_frame`,
    `_INPUTS_SQL` and `_COSTS_SQL`.
    """
    priced = priced_offers(con, offers, max_nodes=max_nodes, max_gpus=max_gpus)
    return priced_cost_frame(con, jobs, models, priced, memory=memory, placer=placer)


# --- the marts ---------------------------------------------------------------------------------

# What build_finetune_marts creates: three small tables and the job × offer view.
FINETUNE_RELATIONS = (
    "marts.finetune_requirements",
    "marts.finetune_offers",
    "marts.finetune_plans",
    "marts.finetune_costs",
)


def _relation_type(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> str | None:
    found = con.execute(
        "select table_type from information_schema.tables where table_schema = ? and table_name = ?",
        [schema, name],
    ).fetchall()
    return found[0][0] if found else None


def _reusable_plans(con: duckdb.DuckDBPyConnection) -> set[tuple[str, int]]:
    """(job_key, hardware_key) of the plans marts.finetune_plans already holds."""
    if _relation_type(con, "marts", "finetune_plans") is None:
        return set()
    columns = {c[0] for c in con.execute("describe marts.finetune_plans").fetchall()}
    if columns != set(_PLAN_SCHEMA):
        return set()  # planned by code with other columns: plan again, and replace the table
    return set(con.execute("select job_key, hardware_key from marts.finetune_plans").fetchall())


def build_finetune_marts(
    con: duckdb.DuckDBPyConnection,
    jobs: Sequence[FinetuneJob] | None = None,
    models: Mapping[str, ModelSpec] | None = None,
) -> dict[str, int]:
    """Create the fine-tuning marts (tables finetune_requirements, finetune_offers,
    finetune_plans; view finetune_costs); rows per relation.

    Called by `build_marts` inside its transaction, after marts.gpu_offers. `jobs` and `models`
    default to the seeds. Plans already in marts.finetune_plans under the same job_key and
    hardware_key are kept, not recomputed; plans of jobs or hardware no longer current are dropped.
    """
    models = models if models is not None else load_models()
    jobs = jobs if jobs is not None else load_finetune_jobs()
    memory = MemoryTable()
    requirements = requirements_frame(jobs, models, memory)
    # a stale provider's offers (warehouse/lifecycle.py) are priced by no job: the cost mart, the
    # page's fit view and the finetune_costs feeds all read this mart
    source = f"(\nselect * from (\n{offers_sql(con)}\n) where not is_stale\n)"
    inputs = offer_inputs(con, source)
    fingerprint = code_fingerprint()
    keys = {fjob.job_id: job_key(fingerprint, fjob, models[fjob.model_id]) for fjob in jobs}
    held = _reusable_plans(con)
    new_plans = plans_frame(jobs, models, inputs.machines, memory, keys, skip=held)
    with _registered(
        con,
        finetune_requirements_frame=requirements,
        finetune_hardware_frame=inputs.hardware,
        finetune_spot_rates_frame=inputs.spot_rates,
        finetune_new_plans_frame=new_plans,
        finetune_job_keys_frame=pl.DataFrame({"job_key": list(keys.values())}, schema={"job_key": pl.String}),
        finetune_hardware_keys_frame=pl.DataFrame(
            {"hardware_key": list(inputs.machines)}, schema={"hardware_key": pl.Int64}
        ),
    ):
        con.execute(
            "create or replace table marts.finetune_requirements as select * from finetune_requirements_frame"
        )
        inputs_sql = _INPUTS_SQL.format(
            offers=source, hardware="finetune_hardware_frame", spot_rates="finetune_spot_rates_frame"
        )
        con.execute(f"create or replace table marts.finetune_offers as\n{inputs_sql}")
        if held:
            # keep what is still current, add what is new: an hourly refresh writes no plan at all
            # unless a job, the model code or the hardware on offer changed
            con.execute(
                "delete from marts.finetune_plans where job_key not in (select job_key from "
                "finetune_job_keys_frame) or hardware_key not in (select hardware_key from "
                "finetune_hardware_keys_frame)"
            )
            con.execute("insert into marts.finetune_plans by name select * from finetune_new_plans_frame")
        else:
            con.execute(
                "create or replace table marts.finetune_plans as select * from finetune_new_plans_frame"
            )
        # Warehouses from before held the cost mart as a table; a view cannot replace a table.
        if _relation_type(con, "marts", "finetune_costs") == "BASE TABLE":
            con.execute("drop table marts.finetune_costs")
        costs_sql = _COSTS_SQL.format(offers="marts.finetune_offers", plans="marts.finetune_plans")
        con.execute(f"create or replace view marts.finetune_costs as\n{costs_sql}")
    counts = {}
    for relation in FINETUNE_RELATIONS:
        counts[relation] = con.execute(f"select count(*) from {relation}").fetchall()[0][0]
    return counts
