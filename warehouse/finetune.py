"""Fine-tuning marts: what each job of the default grid needs, and what it costs on every current offer.

The model itself lives in the `finetune` package (pure); this module reads the warehouse, builds
frames with it and writes the marts. `build_finetune_marts` runs inside
`warehouse.marts.build_marts`' transaction, after `marts.gpu_offers`, and creates

* `marts.finetune_requirements`: one row per job × GPU count (1 … 64) × sharding (none, zero2,
  zero3): the per-GPU memory breakdown of `finetune.memory_per_gpu` (`total_gb` is the device
  total; `allocated_gb`, `reserved_gb` and `peak_phase` say what sets it), trainable parameters,
  tokens and FLOPs. Offloading jobs have no `none` rows (offload needs ZeRO).
* `marts.finetune_costs`: one row per job × current offer, whether the job fits or not.

Jobs and models come from `warehouse.models.load_finetune_jobs` / `load_models`, the one parser of
`seeds/finetune_jobs.csv` and `seeds/llm_models.csv` (the same files `load_seeds` puts in `core.*`).

Placement (`finetune.placement`): fewest nodes that fit, then the lightest sharding; nodes are capped
by `max_nodes` (the CLI's --max-nodes) and by MART_MAX_GPUS GPUs in all for the mart.

* Time is `finetune.estimate_time`, a per-step roofline, with the offer's dense bf16 TFLOPS (fp16 on
  GPUs without bf16, T4 and V100), its memory bandwidth and generation from gpus.csv, and links:
  the seeds state intra-node bandwidth in bidirectional GB/s (halved to the per-direction rate a
  ring collective sees) and inter-node in Gb/s per node. A multi-GPU PCIe offer whose seed leaves
  the bandwidth empty gets the GPU's PCIe x16 rate; GeForce cards (no P2P) stage through host memory.
* Multi-node on an offer without a fast fabric (< finetune.FAST_FABRIC_GBPS, or unknown) is
  flagged in `fabric_warning` and not priced: `priced` is false and the cost columns are null.
  So is a GPU with neither dense bf16 nor fp16 TFLOPS in gpus.csv (`unpriced_reason` says which).

Cost: billed hours are the hours rounded up to the provider's billing granularity, at least its
minimum charge (`finetune.billed_hours`), × price per instance-hour × nodes. On spot, the hours
are first stretched by the expected lost work (`finetune.expected_spot_hours`), with the
interruption rate of AWS' Spot Advisor band where the offer carries one, else a default per
provider `spot_kind` (constants below). Any node's interruption stops the whole job, so the job's
rate is nodes × the per-instance rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import polars as pl

from finetune import (
    FinetuneJob,
    ModelSpec,
    billed_hours,
    expected_spot_hours,
    flops_per_token,
    trainable_params,
)
from finetune.cost import Granularity
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
from finetune.time import PCIE_X16_GBYTES_PER_S
from warehouse.db import WarehouseError
from warehouse.models import load_finetune_jobs, load_models

__all__ = [
    "SHARDINGS",
    "USABLE_VRAM_FRACTION",
    "Hardware",
    "JobMemory",
    "MemoryTable",
    "Placement",
    "Plan",
    "build_finetune_marts",
    "cost_frame",
    "place",
    "plan_job",
    "price_inputs",
    "read_offers",
    "requirements_frame",
]

REQUIREMENT_GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
# The mart considers at most as many GPUs as the requirements grid shows (8 nodes of 8).
MART_MAX_GPUS = 64

# Checkpoint every half hour: on spot, each interruption loses half an interval on average.
CHECKPOINT_INTERVAL_HOURS = 0.5
# Replacing an interrupted instance: provisioning, image pull, reloading model and checkpoint,
# 10–20 minutes for a model-sized checkpoint.
RESTART_OVERHEAD_HOURS = 0.25
# AWS' Spot Advisor bands are the fraction of instances interrupted over the trailing month.
HOURS_PER_MONTH = 730.0
# Interruptions per instance-hour where the offer carries no rate of its own:
# - market (GCP, Azure, Nebius, Verda): Google documents a preemption rate of "5% to 15% per day"
#   for preemptible VMs; we take 15%/day (GPUs are the contended kind): −ln(0.85)/24 ≈ 0.0068/h.
# - fixed_discount (OCI preemptible, Vultr): reclaimed when capacity is needed, no published
#   rate; the market default.
# - bid (RunPod interruptible, Vast): any higher bid preempts at once; no published rate, so we
#   assume one interruption per ~20 running hours, an order of magnitude above the market default.
MARKET_INTERRUPTIONS_PER_HOUR = -math.log(1 - 0.15) / 24
DEFAULT_INTERRUPTIONS_PER_HOUR: dict[str, float] = {
    "market": MARKET_INTERRUPTIONS_PER_HOUR,
    "fixed_discount": MARKET_INTERRUPTIONS_PER_HOUR,
    "bid": 0.05,
}
# providers.csv billing_granularity → finetune.Granularity. An unknown provider is billed per
# hour: the coarsest unit never understates a cost.
GRANULARITY: dict[str, Granularity] = {"per_second": "second", "per_minute": "minute", "per_hour": "hour"}


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


# --- placing a job on an offer ----------------------------------------------------------------


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
    offers.intra_node_interconnect,
    offers.intra_node_gbps,
    offers.inter_node_gbps,
    gpus.pcie_gen,
    gpus.memory_bandwidth_gbps,
    gpus.architecture,
    gpus.model as gpu_model,
    offers.billing_granularity,
    offers.minimum_charge_seconds,
    offers.spot_kind,
    try_cast(json_extract_string(offers.provider_data, '$.interruption_rate_min') as double)
        as interruption_rate_min,
    try_cast(json_extract_string(offers.provider_data, '$.interruption_rate_max') as double)
        as interruption_rate_max
from marts.gpu_offers as offers
left join core.gpus as gpus on offers.gpu_name = gpus.gpu_name
where offers.gpu_count > 0 and offers.vram_gb > 0 and offers.price_usd_per_hour > 0
order by offers.provider, offers.instance_type, offers.region, offers.zone, offers.pricing_type
"""


def read_offers(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Current offers from marts.gpu_offers with what placing and pricing a job needs."""
    found = con.execute(
        "select count(*) from information_schema.tables "
        "where table_schema = 'marts' and table_name = 'gpu_offers'"
    ).fetchall()[0][0]
    if not found:
        raise WarehouseError("no marts.gpu_offers yet; run `gpucost refresh` first")
    return con.sql(_OFFERS_SQL).pl()


def _intra_node_gbps(row: Mapping[str, Any]) -> float | None:
    """GB/s per GPU and direction inside a node; a PCIe offer with no stated rate gets its x16 rate.

    The hardware seeds state link bandwidth bidirectionally (NVLink 4: 900 GB/s per H100), the way
    vendors quote it; a ring collective moves data at the per-direction rate, so it is halved here.
    """
    if row["intra_node_gbps"] is not None and row["intra_node_gbps"] > 0:
        return float(row["intra_node_gbps"]) / 2
    if row["gpu_count"] > 1 and (row["intra_node_interconnect"] or "PCIe") == "PCIe":
        return PCIE_X16_GBYTES_PER_S.get(row["pcie_gen"] or 0)
    return row["intra_node_gbps"]


def has_p2p(gpu_model: str | None) -> bool:
    """GeForce cards have no GPU-to-GPU P2P over PCIe (NVIDIA disables it in the driver since
    the RTX 40 series; RTX 30 only over an NVLink bridge, which clouds do not fit), so NCCL stages
    their traffic through host memory. Read from gpus.csv's `model` ("GeForce RTX 4090")."""
    return not (gpu_model or "").startswith("GeForce")


def interruptions_per_hour(row: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """(interruptions per instance-hour, where the rate comes from) for a spot offer; on-demand: None.

    AWS' band [min, max] is the fraction p of instances interrupted in a month; we take the band's
    middle and the Poisson rate that interrupts that fraction in a month: −ln(1 − p) / 730 h.
    """
    if not row["is_spot"]:
        return None, None
    low, high = row["interruption_rate_min"], row["interruption_rate_max"]
    if low is not None and high is not None:
        p = min((low + high) / 2, 0.99)
        return -math.log(1 - p) / HOURS_PER_MONTH, "spot_advisor_band"
    kind = row["spot_kind"] if row["spot_kind"] in DEFAULT_INTERRUPTIONS_PER_HOUR else "market"
    return DEFAULT_INTERRUPTIONS_PER_HOUR[kind], f"default_{kind}"


# --- finetune_costs ----------------------------------------------------------------------------

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

_BILLING_SCHEMA: dict[str, Any] = {
    "job_id": pl.String,
    "model_id": pl.String,
    "method": pl.String,
    "train_tokens": pl.Float64,
    "profile_id": pl.Int64,
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
    "interruptions_per_hour": pl.Float64,
    "interruption_source": pl.String,
    "expected_spot_hours": pl.Float64,
    "billing_granularity": pl.String,
    "billed_hours": pl.Float64,
    "priced": pl.Boolean,
    "unpriced_reason": pl.String,
}

_COSTS_SQL = """
with

offers as (
    select * from finetune_offers_frame
),

billing as (
    select * from finetune_billing_frame
),

joined as (
    select
        billing.job_id,
        billing.model_id,
        billing.method,
        billing.train_tokens,
        offers.* exclude (profile_id),
        billing.* exclude (job_id, model_id, method, train_tokens, profile_id),
        billing.billed_hours * offers.price_usd_per_hour * billing.nodes_used as run_cost_usd
    from offers
    inner join billing on offers.profile_id = billing.profile_id
),

final as (
    select
        * exclude (run_cost_usd),
        case when priced and not is_spot then run_cost_usd end as on_demand_cost_usd,
        case when priced and is_spot then run_cost_usd end as expected_spot_cost_usd,
        case when priced then run_cost_usd end as cost_usd,
        case when priced then run_cost_usd / train_tokens * 1e6 end as usd_per_million_tokens
    from joined
)

select * from final
"""


def _billing(
    plan: Plan, granularity: Granularity, minimum_hours: float, rate: float | None
) -> dict[str, Any]:
    """Billed hours (and the expected spot wall time) of one plan under one billing profile."""
    if not plan.priced or plan.estimated_hours is None:
        return {"priced": False, "unpriced_reason": plan.unpriced_reason}
    if rate is None:
        return {
            "billed_hours": billed_hours(plan.estimated_hours, granularity, minimum_hours),
            "priced": True,
        }
    job_rate = rate * plan.nodes_used
    wall = expected_spot_hours(
        plan.estimated_hours, job_rate, CHECKPOINT_INTERVAL_HOURS, RESTART_OVERHEAD_HOURS
    )
    if math.isinf(wall):
        reason = (
            f"spot interruptions ({job_rate:.3g}/h) outpace checkpoints every "
            f"{CHECKPOINT_INTERVAL_HOURS:g} h: the job never finishes"
        )
        return {"interruptions_per_hour": job_rate, "priced": False, "unpriced_reason": reason}
    return {
        "interruptions_per_hour": job_rate,
        "expected_spot_hours": wall,
        "billed_hours": billed_hours(wall, granularity, minimum_hours),
        "priced": True,
    }


def price_inputs(
    jobs: Sequence[FinetuneJob],
    models: Mapping[str, ModelSpec],
    offers: pl.DataFrame,
    *,
    max_nodes: int | None = None,
    max_gpus: int | None = MART_MAX_GPUS,
    memory: MemoryTable | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(offers with a billing `profile_id`, one row per job × profile with placement and billing).

    The work happens once per job × distinct hardware (placement, time) and once per job × billing
    profile (hardware, granularity, minimum charge, interruption rate); `_COSTS_SQL` joins the
    offers back on, so the job × offer cross product only ever exists inside DuckDB.
    """
    memory = memory or MemoryTable()
    hw_ids: dict[Hardware, int] = {}
    profiles: dict[tuple[int, Granularity, float, float | None, str | None], int] = {}
    profile_of_offer = []
    for row in offers.iter_rows(named=True):
        hw = Hardware(
            gpu_name=row["gpu_name"],
            gpu_count=float(row["gpu_count"]),
            vram_gb=float(row["vram_gb"]),
            # GPUs without bf16 (Turing, Volta) train in fp16 mixed precision: same bytes, fp16 rate
            tensor_tflops=row["bf16_tflops"] if row["bf16_tflops"] is not None else row.get("fp16_tflops"),
            intra_node_gbps=_intra_node_gbps(row),
            inter_node_gbps=row["inter_node_gbps"],
            memory_bandwidth_gbps=row.get("memory_bandwidth_gbps"),
            architecture=row.get("architecture"),
            p2p=has_p2p(row.get("gpu_model")),
            pcie_gen=row.get("pcie_gen"),
        )
        hw_id = hw_ids.setdefault(hw, len(hw_ids))
        granularity = GRANULARITY.get(row["billing_granularity"] or "", "hour")
        minimum = (row["minimum_charge_seconds"] or 0) / 3600
        rate, source = interruptions_per_hour(row)
        key = (hw_id, granularity, minimum, rate, source)
        profile_of_offer.append(profiles.setdefault(key, len(profiles)))

    def node_limit(hw: Hardware) -> int:
        if hw.gpu_count < 1:
            return 1  # a slice of one GPU is never part of a multi-node job
        limit = max_nodes if max_nodes is not None else math.inf
        if max_gpus is not None:
            limit = min(limit, max(1, max_gpus // hw.gpus_per_node))
        return int(limit) if math.isfinite(limit) else 1

    rows = []
    for fjob in jobs:
        job_memory = memory.for_job(models[fjob.model_id], fjob.job)
        placements: dict[tuple[int, float, int], Placement] = {}
        plans = []
        for hw in hw_ids:
            key = (hw.gpus_per_node, hw.vram_gb, node_limit(hw))
            if key not in placements:
                placements[key] = place(job_memory, *key)
            plans.append(plan_job(fjob, hw, placements[key], job_memory))
        for (hw_id, granularity, minimum, rate, source), profile_id in profiles.items():
            plan = plans[hw_id]
            rows.append(
                {
                    "job_id": fjob.job_id,
                    "model_id": fjob.model_id,
                    "method": fjob.job.method,
                    "train_tokens": fjob.train_tokens,
                    "profile_id": profile_id,
                    "fits": plan.fits,
                    "usable_vram_gb": plan.usable_vram_gb,
                    "total_gb": plan.total_gb,
                    "sharding": plan.sharding,
                    "gpus_used": plan.gpus_used,
                    "nodes_used": plan.nodes_used,
                    "gpus_per_node": plan.gpus_per_node,
                    "multi_node": plan.multi_node,
                    "fabric_warning": plan.fabric_warning,
                    "estimated_hours": plan.estimated_hours,
                    "compute_hours": plan.compute_hours,
                    "comm_hours": plan.comm_hours,
                    "interruptions_per_hour": rate,
                    "interruption_source": source,
                    "billing_granularity": granularity,
                    **_billing(plan, granularity, minimum, rate),
                }
            )
    priced_offers = offers.select(_OFFER_COLUMNS).with_columns(
        pl.Series("profile_id", profile_of_offer, dtype=pl.Int64)
    )
    return priced_offers, pl.DataFrame(rows, schema=_BILLING_SCHEMA)


@contextmanager
def _registered(con: duckdb.DuckDBPyConnection, **frames: pl.DataFrame) -> Iterator[None]:
    for name, frame in frames.items():
        con.register(name, frame)
    try:
        yield
    finally:
        for name in frames:
            con.unregister(name)


def cost_frame(
    con: duckdb.DuckDBPyConnection,
    jobs: Sequence[FinetuneJob],
    models: Mapping[str, ModelSpec],
    offers: pl.DataFrame,
    *,
    max_nodes: int | None = None,
    max_gpus: int | None = MART_MAX_GPUS,
    memory: MemoryTable | None = None,
) -> pl.DataFrame:
    """The rows of marts.finetune_costs for `jobs` on `offers` (`read_offers`), as a frame.

    `con` only runs the join (any connection, read-only included). The mart and `gpucost estimate`
    both come through `price_inputs` and `_COSTS_SQL`: here, and in `build_finetune_marts`.
    """
    priced_offers, billing = price_inputs(
        jobs, models, offers, max_nodes=max_nodes, max_gpus=max_gpus, memory=memory
    )
    with _registered(con, finetune_offers_frame=priced_offers, finetune_billing_frame=billing):
        return con.sql(_COSTS_SQL).pl()


# --- the marts ---------------------------------------------------------------------------------


def build_finetune_marts(
    con: duckdb.DuckDBPyConnection,
    jobs: Sequence[FinetuneJob] | None = None,
    models: Mapping[str, ModelSpec] | None = None,
) -> dict[str, int]:
    """Create marts.finetune_requirements and marts.finetune_costs; rows per relation.

    Called by `build_marts` inside its transaction, after marts.gpu_offers. `jobs` and `models`
    default to the seeds.
    """
    models = models if models is not None else load_models()
    jobs = jobs if jobs is not None else load_finetune_jobs()
    memory = MemoryTable()
    requirements = requirements_frame(jobs, models, memory)
    priced_offers, billing = price_inputs(jobs, models, read_offers(con), memory=memory)
    with _registered(
        con,
        finetune_requirements_frame=requirements,
        finetune_offers_frame=priced_offers,
        finetune_billing_frame=billing,
    ):
        con.execute(
            "create or replace table marts.finetune_requirements as select * from finetune_requirements_frame"
        )
        con.execute(f"create or replace table marts.finetune_costs as\n{_COSTS_SQL}")
    counts = {}
    for relation in ("marts.finetune_requirements", "marts.finetune_costs"):
        counts[relation] = con.execute(f"select count(*) from {relation}").fetchall()[0][0]
    return counts
