"""Fine-tuning marts: what each job of the default grid needs, and what it costs on every current offer.

`build_finetune_marts` runs inside `warehouse.marts.build_marts`' transaction, after
`marts.gpu_offers`, and creates

* `marts.finetune_requirements`: one row per job × GPU count (1 … 64) × sharding (none, zero2,
  zero3): the per-GPU memory breakdown of `requirements.memory_per_gpu`, trainable parameters,
  tokens and FLOPs. Offloading jobs have no `none` rows (offload needs ZeRO).
* `marts.finetune_costs`: one row per job × current offer, whether the job fits or not.

Jobs and models come from `requirements.load_finetune_jobs` / `load_models`, the one parser of
`seeds/finetune_jobs.csv` and `seeds/llm_models.csv` (the same files `load_seeds` puts in `core.*`).

How one job is placed on one offer (`plan_job`):

* A job uses whole instances ("nodes") and every GPU in them: the price is per instance, so an idle
  GPU only makes the run slower for the same money. A fractional offer (a vGPU slice, gpu_count < 1)
  is one node of one GPU with that share of the compute; its `vram_gb` is already the slice.
* It fits when the per-GPU peak `total_gb` ≤ `usable_vram_gb` = vram_gb × USABLE_VRAM_FRACTION.
* Chosen: the fewest nodes that fit, and at that node count the lightest sharding that fits
  (none → zero2 → zero3). At a fixed GPU count compute time is the same for all three and their
  communication volume grows in that order, and more nodes only add slower inter-node traffic, so
  this is also the cheapest placement up to billing rounding. DDP (`none`) replicates the whole
  model, so it is only ever tried on one node. The seed's own `sharding` column is not a limit here.
* Nodes are capped by `max_nodes` (the CLI's --max-nodes) and by `max_gpus` GPUs in all
  (MART_MAX_GPUS = 64, the top of the requirements grid) for the mart.
* A row that does not fit reports the configuration that came closest (smallest per-GPU need).
* Time is `requirements.estimate_time` with the offer's dense bf16 TFLOPS (fp16 on GPUs without
  bf16, T4 and V100, which train in fp16 mixed precision with the same memory) and links: the seeds
  state intra-node bandwidth in bidirectional GB/s (halved to the per-direction rate a ring collective
  sees, ×8 for estimate_time's Gb/s) and inter-node in Gb/s per node.
  A multi-GPU PCIe offer whose seed leaves the bandwidth empty gets the GPU's PCIe x16 rate.
* Multi-node on an offer without a fast fabric (< requirements.FAST_FABRIC_GBPS, or unknown) is
  flagged in `fabric_warning` and not priced: `priced` is false and the cost columns are null.
  So is a GPU with neither dense bf16 nor fp16 TFLOPS in gpus.csv (`unpriced_reason` says which).

Cost: billed hours are the hours rounded up to the provider's billing granularity, at least its
minimum charge (`requirements.billed_hours`), × price per instance-hour × nodes. On spot, the hours
are first stretched by the expected lost work (`requirements.expected_spot_hours`), with the
interruption rate of AWS' Spot Advisor band where the offer carries one, else a default per
provider `spot_kind` (constants below). Any node's interruption stops the whole job, so the job's
rate is nodes × the per-instance rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import duckdb
import polars as pl

from warehouse.db import WarehouseError
from warehouse.requirements import (
    FAST_FABRIC_GBPS,
    FinetuneJob,
    Granularity,
    Job,
    MemoryBreakdown,
    ModelSpec,
    Sharding,
    billed_hours,
    estimate_time,
    expected_spot_hours,
    flops_per_token,
    load_finetune_jobs,
    load_models,
    memory_per_gpu,
    trainable_params,
)

SHARDINGS: tuple[Sharding, ...] = ("none", "zero2", "zero3")
REQUIREMENT_GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
# The mart considers at most as many GPUs as the requirements grid shows (8 nodes of 8).
MART_MAX_GPUS = 64

# What the memory model leaves out and a real run still allocates: NCCL communicator buffers on
# multi-GPU jobs, the driver's and ECC's reservation, allocator spikes at step boundaries. The
# model's own error (median |error| < 15% on the calibration set) goes both ways and is not covered.
USABLE_VRAM_FRACTION = 0.95

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
# Unidirectional x16 bandwidth in GB/s by PCIe generation (PCI-SIG: 8/16/32/64 GT/s per lane).
PCIE_X16_GBYTES_PER_S: dict[int, float] = {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0}
# providers.csv billing_granularity → requirements.Granularity. An unknown provider is billed per
# hour: the coarsest unit never understates a cost.
GRANULARITY: dict[str, Granularity] = {"per_second": "second", "per_minute": "minute", "per_hour": "hour"}


class JobMemory:
    """`memory_per_gpu` of one job under each sharding it allows, per GPU count, computed once."""

    def __init__(self, model: ModelSpec, job: Job) -> None:
        self.model = model
        self.variants: list[tuple[Sharding, Job]] = [
            (s, replace(job, sharding=s)) for s in SHARDINGS if not (job.offload and s == "none")
        ]
        self._cache: dict[tuple[int, int], MemoryBreakdown] = {}

    def get(self, variant: int, n_gpus: int) -> MemoryBreakdown:
        """The breakdown of `self.variants[variant]` data-parallel over `n_gpus` GPUs."""
        key = (variant, n_gpus)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = memory_per_gpu(self.model, self.variants[variant][1], n_gpus)
        return found


class MemoryTable:
    """One `JobMemory` per (model, job), shared by both marts."""

    def __init__(self) -> None:
        self._jobs: dict[tuple[str, Job], JobMemory] = {}

    def for_job(self, model: ModelSpec, job: Job) -> JobMemory:
        key = (model.model_id, job)
        found = self._jobs.get(key)
        if found is None:
            found = self._jobs[key] = JobMemory(model, job)
        return found


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
                        **job_memory.get(variant, n).as_dict(),
                        "trainable_params": trainable,
                        "train_tokens": fjob.train_tokens,
                        "flops_per_token": fpt,
                        "total_flops": fpt * fjob.train_tokens,
                    }
                )
    return pl.DataFrame(rows, schema=_REQUIREMENTS_SCHEMA)


# --- placing a job on an offer ----------------------------------------------------------------


@dataclass(frozen=True)
class Hardware:
    """What of an offer decides fit and time. Bandwidths: intra GB/s per GPU, inter Gb/s per node."""

    gpu_name: str
    gpu_count: float
    vram_gb: float
    tensor_tflops: float | None  # dense bf16, or fp16 on GPUs without bf16 (T4, V100)
    intra_node_gbps: float | None
    inter_node_gbps: float | None

    @property
    def gpus_per_node(self) -> int:
        return 1 if self.gpu_count < 1 else int(self.gpu_count)

    @property
    def node_tflops(self) -> float | None:
        """Dense tensor TFLOPS of one of the job's GPUs (a slice gets its share)."""
        if self.tensor_tflops is None:
            return None
        return self.tensor_tflops * min(1.0, self.gpu_count)


@dataclass(frozen=True)
class Plan:
    """One job on one kind of hardware. When it does not fit, the placement that came closest."""

    fits: bool
    sharding: Sharding
    gpus_used: int
    nodes_used: int
    gpus_per_node: int
    total_gb: float
    usable_vram_gb: float
    multi_node: bool
    fabric_warning: str | None
    estimated_hours: float | None
    compute_hours: float | None
    comm_hours: float | None
    unpriced_reason: str | None

    @property
    def priced(self) -> bool:
        return self.unpriced_reason is None


def _fabric_warning(nodes: int, inter_node_gbps: float | None) -> str | None:
    if nodes <= 1:
        return None
    if inter_node_gbps is None or inter_node_gbps <= 0:
        return f"multi-node ({nodes} nodes) on an offer with no known inter-node fabric"
    if inter_node_gbps < FAST_FABRIC_GBPS:
        return (
            f"multi-node ({nodes} nodes) over {inter_node_gbps:g} Gb/s "
            f"(< {FAST_FABRIC_GBPS:g} Gb/s): no fast fabric"
        )
    return None


def _fewest_nodes(need: Callable[[int], float], usable: float, max_nodes: int) -> int | None:
    """Smallest k in 1..max_nodes with need(k) ≤ usable; per-GPU need never grows with k."""
    if need(max_nodes) > usable:
        return None
    lo, hi = 1, max_nodes
    while lo < hi:
        mid = (lo + hi) // 2
        if need(mid) <= usable:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class Placement:
    """Where a job goes on `nodes` whole nodes; when nothing fits, the placement that came closest."""

    fits: bool
    variant: int  # index into JobMemory.variants
    nodes: int
    gpus_per_node: int
    total_gb: float
    usable_vram_gb: float


def place(memory: JobMemory, gpus_per_node: int, vram_gb: float, max_nodes: int) -> Placement:
    """Fewest nodes that fit, then the lightest sharding at that node count."""
    usable = vram_gb * USABLE_VRAM_FRACTION
    best: tuple[int, int] | None = None
    closest: tuple[float, int, int] | None = None
    for variant, (sharding, _) in enumerate(memory.variants):
        # DDP replicates the whole model: more nodes never lower its per-GPU need
        limit = 1 if sharding == "none" else max_nodes

        def need(k: int, variant: int = variant) -> float:
            return memory.get(variant, k * gpus_per_node).total_gb

        k = _fewest_nodes(need, usable, limit)
        if k is not None:
            best = min(best or (k, variant), (k, variant))
        elif closest is None or need(limit) < closest[0]:
            closest = (need(limit), limit, variant)
    if best is not None:
        nodes, variant = best
        total = memory.get(variant, nodes * gpus_per_node).total_gb
        return Placement(True, variant, nodes, gpus_per_node, total, usable)
    assert closest is not None
    total, nodes, variant = closest
    return Placement(False, variant, nodes, gpus_per_node, total, usable)


def plan_job(fjob: FinetuneJob, hw: Hardware, placement: Placement, memory: JobMemory) -> Plan:
    """The placement's time and, if it cannot be priced, why."""
    sharding, job = memory.variants[placement.variant]
    nodes, gpn = placement.nodes, placement.gpus_per_node
    n = nodes * gpn
    fields: dict[str, Any] = {
        "fits": placement.fits,
        "sharding": sharding,
        "gpus_used": n,
        "nodes_used": nodes,
        "gpus_per_node": gpn,
        "total_gb": placement.total_gb,
        "usable_vram_gb": placement.usable_vram_gb,
        "multi_node": nodes > 1,
        "fabric_warning": _fabric_warning(nodes, hw.inter_node_gbps),
    }
    unknown_time = {"estimated_hours": None, "compute_hours": None, "comm_hours": None}
    if not placement.fits:
        reason = (
            f"does not fit: needs {placement.total_gb:.1f} GB per GPU even with {sharding} over "
            f"{n} GPU(s); {placement.usable_vram_gb:.1f} GB usable"
        )
        return Plan(**fields, **unknown_time, unpriced_reason=reason)
    tflops = hw.node_tflops
    if tflops is None or tflops <= 0:
        reason = f"no dense bf16 or fp16 TFLOPS for {hw.gpu_name} in gpus.csv (no tensor cores or unknown)"
        return Plan(**fields, **unknown_time, unpriced_reason=reason)
    intra = hw.intra_node_gbps * 8 if hw.intra_node_gbps is not None else None
    time = estimate_time(memory.model, job, fjob.train_tokens, n, gpn, tflops, intra, hw.inter_node_gbps)
    hours = time.hours if math.isfinite(time.hours) else None
    reason = fields["fabric_warning"] or (None if hours is not None else time.warning or "unbounded time")
    return Plan(
        **fields,
        estimated_hours=hours,
        compute_hours=time.compute_hours,
        comm_hours=time.comm_hours if math.isfinite(time.comm_hours) else None,
        unpriced_reason=reason,
    )


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
