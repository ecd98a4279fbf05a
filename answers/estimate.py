"""`gpucost estimate`'s answers: one fine-tuning job priced on every current offer, or on stated hardware.

Both go through `warehouse.finetune_marts.cost_frame`, the code that builds marts.finetune_costs:
the same offer translation (`finetune.offer`), the same placement and time, the same bill in SQL.

* `rank_offers`: the job on every current offer passing `OfferFilters` (on-demand only unless
  `spot`), each priced as the mart prices it; `frontier` folds offers neither faster nor cheaper
  than another of the same provider, GPU and pricing type.
* `on_hardware`: `--gpu X --gpus N [--nodes K]` is a one-row offer frame built from gpus.csv:
  links as an instance_types.csv row would state them (`finetune.offer.stated_links`:
  NVSwitch on SXM/OAM boards, PCIe otherwise, or `interconnect`), billed per second with no
  minimum at `price_usd_per_gpu_hour` × GPUs (no price: hours only). It is placed on exactly the
  stated nodes (`place_at`), with `sharding` when given. A job that does not fit has no cost.

The ranking is by the whole bill (`total_usd`, finetune.cost.itemized_bill): compute, spot rework,
set-up, storage, checkpoint writes, egress, ingress, idle time and one-time fees under each
provider's facts (core.provider_storage) and billing rule. So a month-billed offer ranks by what
the experiment really pays on it (a 5-hour job: a whole month, and its set-up fee), never by its
hourly equivalent; a serverless offer pays no idle time; each row says its rule in
`billing_rule` (answers.billing). An offer whose provider leaves a fact unpublished is ranked by its known
items, and says which are unknown (`bill_unknown_items`) and which facts are missing
(`bill_missing_facts`); the frontier folds by hours and total. Stated hardware has no provider,
so only its compute and spot rework are known.

GPUs without bf16 (T4, V100: gpus.csv `supports_bf16`) train in fp16 mixed precision at their
fp16 rate: every row says which in `train_precision` (`finetune.offer.tensor_rate`).
"""

from __future__ import annotations

import difflib
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import duckdb
import polars as pl

from answers import AnswerError
from answers.billing import billing_rule
from answers.prices import (
    OFFER_KEY,
    OfferFilters,
    apply_filters,
    check_filters,
    current_offers,
    frontier,
    with_price_age,
)
from finetune import FinetuneJob, ModelSpec, Sharding, memory_per_gpu, trainable_params
from finetune.cost import BILL_TOTAL_COLUMNS
from finetune.job import Job
from finetune.memory import MemoryBreakdown
from finetune.offer import Interconnect, stated_links, tensor_rate
from finetune.placement import MemoryTable, place_at
from finetune.tensor_parallel import group_refusal
from finetune.time import model_flops_per_token
from warehouse.db import connect, snapshot
from warehouse.finetune_marts import (
    FACT_SCHEMA,
    OFFER_SCHEMA,
    PricedOffers,
    cost_frame,
    priced_cost_frame,
    priced_offers,
    read_offers,
)
from warehouse.hardware import GpuSpec, HardwareCatalog

__all__ = [
    "BILL_DETAIL_COLUMNS",
    "DETAIL_COLUMNS",
    "MemoryAnswer",
    "OfferBook",
    "OfferRanking",
    "StatedEstimate",
    "StatedHardware",
    "find_gpu",
    "job_memory",
    "offer_memory",
    "on_hardware",
    "rank_offers",
    "stated_offer",
    "train_precision",
]

# the bill's columns of each ranked row (marts.finetune_costs, finetune.cost.itemized_bill)
BILL_DETAIL_COLUMNS = BILL_TOTAL_COLUMNS
# the ranking's extra columns, from answers.prices.current_offers
DETAIL_COLUMNS = (
    "price_statistic",
    "price_covers",
    "available",
    "price_is_from",
    "price_since",
    "last_seen_at",
    "price_age_hours",
    "interruption_rate_min",
    "interruption_rate_max",
    # answers.billing: how the offer bills beyond its hourly figure ("" for plain metered billing)
    "billing_rule",
)
# what billing_rule reads of answers.prices.current_offers
_RULE_COLUMNS = (
    "billing_granularity",
    "serverless",
    "currency",
    "published_price_per_hour",
    "setup_fee",
    "monthly_price_cap",
)
RANK_ORDER = ["total_usd", "estimated_hours", "provider", "instance_type"]
FOLDED_REASON = (
    "folded: another offer of the same provider, GPU and pricing type is at least as fast and no "
    "dearer (the ranking shows it with all)"
)
# a stated node's default network: 8 × 400 Gb/s, the InfiniBand NDR / EFA v2 of an 8-GPU node
DEFAULT_INTER_NODE_GBITS_PER_S = 3200.0


def train_precision(
    job: Job, bf16_tflops: float | None, fp16_tflops: float | None, supports_bf16: bool | None
) -> str:
    """The precision the job trains in on this GPU: the job's own, or fp16-mixed without bf16."""
    _, dtype = tensor_rate(bf16_tflops, fp16_tflops, supports_bf16)
    return job.precision if dtype == "bf16" else "fp16-mixed"


def _with_train_precision(rows: pl.DataFrame, offers: pl.DataFrame, job: Job) -> pl.DataFrame:
    """`rows` (cost_frame) with `train_precision`, from the GPU facts of each row's offer."""
    columns = [c for c in ("bf16_tflops", "fp16_tflops", "supports_bf16") if c in offers.columns]
    facts = offers.select([*OFFER_KEY, *columns]).unique(list(OFFER_KEY), keep="first")
    if not columns:  # no GPU facts at all: the job's own precision is never confirmed
        return rows.with_columns(train_precision=pl.lit(train_precision(job, None, None, None)))
    # decided once per distinct GPU facts (a few dozen), not per offer (10k offers: 30 ms saved)
    kinds = facts.select(columns).unique()
    precision = [
        train_precision(job, r.get("bf16_tflops"), r.get("fp16_tflops"), r.get("supports_bf16"))
        for r in kinds.iter_rows(named=True)
    ]
    kinds = kinds.with_columns(pl.Series("train_precision", precision, dtype=pl.String))
    facts = facts.join(kinds, on=columns, how="left", nulls_equal=True).select(
        [*OFFER_KEY, "train_precision"]
    )
    return rows.join(facts, on=list(OFFER_KEY), how="left", nulls_equal=True)


@dataclass(frozen=True)
class OfferRanking:
    """The job on current offers: `rows` every offer that passed the filters (priced or not),
    `marked` the priced ones with `on_frontier`, `details` price age and spot band per offer."""

    rows: pl.DataFrame
    marked: pl.DataFrame
    details: pl.DataFrame

    @property
    def folded(self) -> int:
        return self.marked.height - int(self.marked["on_frontier"].sum())

    @property
    def fitting(self) -> int:
        return self.rows.filter(self.rows["fits"]).height

    def excluded(self) -> pl.DataFrame:
        """Why each offer that passed the filters is not on the ranking's frontier, one row per
        offer (OFFER_KEY, gpu_name, gpus_used, `excluded_reason`): it cannot hold the job, it
        cannot be priced (`unpriced_reason`), or it is folded off the frontier."""
        not_priced = self.rows.filter(~self.rows["priced"])
        does_not_fit = pl.format(
            "does not fit: needs {} GB per GPU ({} over {} GPU(s)), {} GB usable",
            pl.col("total_gb").round(1),
            pl.col("sharding"),
            pl.col("gpus_used"),
            pl.col("usable_vram_gb").round(1),
        )
        # a job that cannot be laid on the offer's nodes at all (tensor-parallel groups) has no
        # memory figure (NaN): its own reason says why
        laid_out = pl.col("total_gb").is_not_nan()
        reasons = not_priced.select(
            pl.when(pl.col("fits") | ~laid_out).then(pl.col("unpriced_reason")).otherwise(does_not_fit)
        ).to_series()
        folded = self.marked.filter(~self.marked["on_frontier"])
        columns = [*OFFER_KEY, "gpu_name", "gpus_used"]
        return pl.concat(
            [
                not_priced.select(columns).with_columns(reasons.alias("excluded_reason")),
                folded.select(columns).with_columns(excluded_reason=pl.lit(FOLDED_REASON)),
            ]
        ).sort([*OFFER_KEY], nulls_last=True)

    def shown(self, top: int, show_all: bool) -> pl.DataFrame:
        """The `top` cheapest (frontier only unless `show_all`), with their details."""
        shown = (self.marked if show_all else self.marked.filter(self.marked["on_frontier"])).sort(RANK_ORDER)
        keys = list(OFFER_KEY)
        return shown.head(top).join(self.details, on=keys, how="left", nulls_equal=True).sort(RANK_ORDER)


class OfferBook:
    """What ranking any job reads of one warehouse: its offers (`read_offers`), each current
    offer's billing rule (answers.billing), the offers priced per node limit
    (`finetune_marts.priced_offers`), and a copy of the relations a question still reads
    (`SNAPSHOT`: the filters' names and the current offers) in an in-memory database of its own.
    None of it depends on the job or the filters, so `gpucost serve` keeps one per warehouse
    version (flows/web.py) and a question opens no file: it places the job and runs the bill on
    a connection of the copy (`reader`). `gpucost estimate` needs no book. Thread-safe."""

    # node limits whose priced offers are kept (max_nodes is 1 … 8 in practice; each is ~1 MB)
    KEEP_LIMITS = 8
    # what a question reads of the warehouse once the book is read: check_filters' GPU and
    # provider names, and current_offers' marts.gpu_offers
    SNAPSHOT = ("marts.gpu_offers", "core.gpus", "core.providers")

    def __init__(
        self,
        offers: pl.DataFrame,
        rules: pl.DataFrame,
        copy: duckdb.DuckDBPyConnection | None = None,
        current: pl.DataFrame | None = None,
    ) -> None:
        self.offers = offers
        self.rules = rules
        self._copy = copy
        # every current offer (answers.prices.current_offers, no filter) without its age
        self.current = current
        self._priced: dict[int, PricedOffers] = {}
        self._lock = threading.Lock()

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection) -> OfferBook:
        """The book of the warehouse `con` reads (WarehouseError before its first refresh)."""
        offers = read_offers(con)
        copy = snapshot(con, cls.SNAPSHOT)
        everything = OfferFilters(include_unavailable=True, include_stale=True)
        current = current_offers(copy, everything, datetime.now(UTC)).drop("price_age_hours")
        return cls(offers, billing_rules(current), copy, current)

    def current_offers(self, filters: OfferFilters, now: datetime) -> pl.DataFrame:
        """`answers.prices.current_offers` of the book's warehouse: its rows, columns and order,
        filtered by the same rules (`filter_terms`, rendered in polars) and aged at `now`."""
        if self.current is None:
            raise ValueError("this book keeps no current offers (OfferBook.read keeps them)")
        return with_price_age(apply_filters(self.current, filters), now)

    @contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection of the book's copy for one question: `rank_offers` and `check_filters`
        read it as they read the warehouse. Each question its own (DuckDB connections are not
        shared between threads); closed after it."""
        if self._copy is None:
            raise ValueError("this book keeps no copy of its warehouse (OfferBook.read makes one)")
        with self._lock:
            con = self._copy.cursor()
        try:
            yield con
        finally:
            con.close()

    def priced(self, con: duckdb.DuckDBPyConnection, max_nodes: int) -> PricedOffers:
        """Every offer priced under `max_nodes` (`con` only runs the SQL)."""
        with self._lock:
            found = self._priced.get(max_nodes)
        if found is None:
            found = priced_offers(con, self.offers, max_nodes=max_nodes, max_gpus=None)
            with self._lock:
                if len(self._priced) >= self.KEEP_LIMITS:
                    self._priced.pop(next(iter(self._priced)))
                self._priced[max_nodes] = found
        return found


def billing_rules(current: pl.DataFrame) -> pl.DataFrame:
    """`OFFER_KEY` and `billing_rule` of each of `current`'s offers (answers.billing), worded once
    per distinct billing terms (dozens), not once per offer (10k offers: ~100 ms saved)."""
    current = current.select([*OFFER_KEY, *_RULE_COLUMNS])
    terms = current.select(_RULE_COLUMNS).unique()
    words = [billing_rule(r) for r in terms.iter_rows(named=True)]
    terms = terms.with_columns(pl.Series("billing_rule", words, dtype=pl.String))
    rules = current.join(terms, on=list(_RULE_COLUMNS), how="left", nulls_equal=True)
    return rules.select([*OFFER_KEY, "billing_rule"])


def rank_offers(
    con: duckdb.DuckDBPyConnection,
    fjob: FinetuneJob,
    model: ModelSpec,
    filters: OfferFilters,
    now: datetime,
    *,
    spot: bool,
    max_nodes: int,
    book: OfferBook | None = None,
) -> OfferRanking:
    """The job on every current offer passing `filters`; AnswerError when none can be priced.

    `book`: what a server keeps of this warehouse whatever the job (`gpucost serve`). Without one
    (one command, one job) only the offers passing `filters` are read, worded and priced."""
    check_filters(con, filters)
    current = current_offers(con, filters, now) if book is None else book.current_offers(filters, now)
    rules = billing_rules(current) if book is None else book.rules
    current = current.join(rules, on=list(OFFER_KEY), how="left", nulls_equal=True)
    details = current.select([*OFFER_KEY, *DETAIL_COLUMNS])
    every = read_offers(con) if book is None else book.offers
    offers = every.join(details.select(OFFER_KEY), on=list(OFFER_KEY), how="semi", nulls_equal=True)
    if not spot:
        offers = offers.filter(~offers["is_spot"])
    if book is None:
        rows = cost_frame(con, [fjob], {model.model_id: model}, offers, max_nodes=max_nodes, max_gpus=None)
    else:
        priced = book.priced(con, max_nodes).only(offers)
        rows = priced_cost_frame(con, [fjob], {model.model_id: model}, priced)
    if rows.is_empty():
        kind = "" if spot else "on-demand "
        if filters != OfferFilters():
            raise AnswerError(f"no current {kind}offers match {filters.describe()}; loosen a filter")
        raise AnswerError(f"no current {kind}offers in the warehouse; run `gpucost refresh`")
    rows = _with_train_precision(rows, offers, fjob.job)
    priced_rows = rows.filter(rows["priced"])
    if priced_rows.is_empty():
        raise AnswerError(_nothing_priced(rows, max_nodes, fjob.job))
    return OfferRanking(rows, frontier(priced_rows, cost="total_usd"), details)


def shrink_hints(job: Job, stated_gpus: int | None = None) -> list[str]:
    """What would make a job that does not fit need less memory per GPU, leaving out what the job
    already does (suggesting --method qlora to a QLoRA job tells its user nothing). On stated
    hardware (`stated_gpus`: the GPUs asked for) more GPUs too, and ZeRO-3 where several GPUs
    were asked for unsharded; ranked offers say --max-nodes instead (`_nothing_priced`)."""
    hints = [] if job.method == "qlora" else ["--method qlora"]
    if not job.grad_checkpointing:
        hints.append("--grad-checkpointing")
    if job.micro_batch > 1:
        hints.append("a smaller --micro-batch")
    if job.loss == "standard":
        # the fp32 logits over the vocabulary: the peak of a long sequence on a small model
        hints.append("--loss chunked")
    hints.append("shorter sequences")
    if stated_gpus is not None:
        hints.append("more GPUs (--gpus, --nodes)")
        if stated_gpus > 1 and job.sharding not in ("zero3", "hybrid"):
            hints.append("--sharding zero3")
    return hints


def _nothing_priced(rows: pl.DataFrame, max_nodes: int, job: Job) -> str:
    fitting = rows.filter(rows["fits"])
    # offers whose nodes cannot hold a tensor-parallel group have no memory figure (NaN)
    placeable = rows.filter(rows["total_gb"].is_not_nan())
    if fitting.is_empty() and placeable.is_empty():
        reason = rows["unpriced_reason"].drop_nulls()
        return (
            "no current offer has nodes that can hold this job's tensor-parallel groups"
            + (f" ({reason[0]})" if len(reason) else "")
            + "; ask a smaller --tensor-parallel, or offers with more GPUs per node"
        )
    if fitting.is_empty():
        closest = placeable.sort(["total_gb", "usable_vram_gb"], descending=[False, True]).row(0, named=True)
        return (
            f"no current offer can hold this job; the smallest per-GPU need is "
            f"{closest['total_gb']:.1f} GB with {closest['sharding']} over {closest['gpus_used']} "
            f"GPU(s) ({closest['gpu_name']}, {closest['usable_vram_gb']:.1f} GB usable); "
            f"try {', '.join([*shrink_hints(job), f'--max-nodes (now {max_nodes})'])}"
        )
    reasons = sorted(set(fitting["unpriced_reason"].to_list()))
    return f"{fitting.height} offer(s) can hold this job but none can be priced: " + "; ".join(reasons[:3])


@dataclass(frozen=True)
class MemoryAnswer:
    """`gpucost memory`: the per-GPU breakdown of one job on `n_gpus`, and what it trains."""

    breakdown: MemoryBreakdown
    trainable_params: int


def job_memory(model: ModelSpec, job: Job, n_gpus: int) -> MemoryAnswer:
    """Peak memory per GPU of `job` data-parallel over `n_gpus` (needs no warehouse)."""
    return MemoryAnswer(memory_per_gpu(model, job, n_gpus), trainable_params(model, job))


def offer_memory(model: ModelSpec, job: Job, row: dict[str, Any]) -> MemoryAnswer:
    """The per-GPU memory of `job` as a ranked row (`rank_offers`) places it: the row's sharding
    over its GPUs, the breakdown its `total_gb` came from (finetune.placement.JobMemory)."""
    memory = MemoryTable().for_job(model, job)
    variant = next((i for i, (s, _) in enumerate(memory.variants) if s == row["sharding"]), None)
    if variant is None and row["sharding"] == "hybrid":
        variant = memory.hybrid_variant()
    if variant is None:
        raise AnswerError(f"the ranked row's sharding {row['sharding']!r} is not one this job allows")
    breakdown = memory.get(variant, row["gpus_used"], row["gpus_per_node"])
    return MemoryAnswer(breakdown, trainable_params(model, memory.variants[variant][1]))


# --- stated hardware ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StatedHardware:
    """`--gpu`, `--gpus` (per node), `--nodes`, `--interconnect`, `--inter-node-gbps`,
    `--price-per-gpu-hour` and `--sharding` of `gpucost estimate`."""

    gpu: str
    gpus_per_node: int = 1
    nodes: int = 1
    interconnect: Interconnect | None = None  # None: NVLink on SXM/OAM boards, else PCIe
    inter_node_gbits_per_s: float = DEFAULT_INTER_NODE_GBITS_PER_S
    price_usd_per_gpu_hour: float | None = None
    sharding: Sharding | None = None  # None: the fastest that fits (finetune.placement)


@dataclass(frozen=True)
class StatedEstimate:
    """The job on stated hardware: `row` is its marts.finetune_costs row (cost null when it does
    not fit or has no price), with what the page and `--json` add."""

    gpu: GpuSpec
    hardware: StatedHardware
    row: dict[str, Any]
    breakdown: MemoryBreakdown
    job: Job  # the job as placed (its sharding)
    tokens_per_s: float | None
    mfu: float | None

    @property
    def hours(self) -> float | None:
        return self.row["estimated_hours"]

    @property
    def cost_usd(self) -> float | None:
        return self.row["cost_usd"]

    @property
    def bill(self) -> dict[str, Any]:
        """The bill's items and total (None: unknown), and what is missing."""
        return {c: self.row[c] for c in BILL_DETAIL_COLUMNS}

    @property
    def warning(self) -> str | None:
        """Why a job that fits is not timed or priced (slow fabric, unbounded time); None otherwise."""
        return self.row["unpriced_reason"] if self.row["fits"] else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.gpu_name,
            "gpus_per_node": self.hardware.gpus_per_node,
            "nodes": self.hardware.nodes,
            "n_gpus": self.row["gpus_used"],
            "interconnect": self.row["intra_node_interconnect"],
            "sharding": self.row["sharding"],
            "train_precision": self.row["train_precision"],
            "fits": self.row["fits"],
            "usable_vram_gb": self.row["usable_vram_gb"],
            "train_tokens": self.row["train_tokens"],
            "tokens_per_s": self.tokens_per_s,
            "hours": self.hours,
            "billed_hours": self.row["billed_hours"],
            "mfu": self.mfu,
            "warning": self.warning,
            "cost_usd": self.cost_usd,
            "bill": self.bill,
            "price_per_gpu_hour": self.hardware.price_usd_per_gpu_hour,
            "job": asdict(self.job),
        }


def find_gpu(name: str, catalog: HardwareCatalog | None = None) -> GpuSpec:
    """A gpus.csv row by canonical name, case-insensitive; AnswerError with close names."""
    gpus = (catalog or HardwareCatalog.load()).gpus
    for key, spec in gpus.items():
        if key.lower() == name.lower():
            return spec
    # the variants of the model asked for first ("H100" → H100-SXM, H100-PCIe, …), then names that
    # are merely spelled alike (difflib would put P100 before them)
    variants = [key for key in gpus if key.lower().startswith(name.lower())]
    alike = difflib.get_close_matches(name, list(gpus), n=5, cutoff=0.4)
    close = variants + [c for c in alike if c not in variants]
    hint = f"; did you mean {', '.join(close[:5])}?" if close else ""
    raise AnswerError(f"no GPU {name!r} in warehouse/seeds/gpus.csv{hint} (see `gpucost gpus`)")


def stated_offer(gpu: GpuSpec, hw: StatedHardware) -> dict[str, Any]:
    """The one-row offer (`read_offers` columns) of `hw`: what the mart would read for such a box."""
    try:
        interconnect, intra = stated_links(
            gpu.form_factor, gpu.nvlink_gbps, hw.gpus_per_node, hw.interconnect
        )
    except ValueError as exc:
        raise AnswerError(f"--gpu {gpu.gpu_name} --interconnect nvlink: {exc}") from None
    price = hw.price_usd_per_gpu_hour
    return {
        "provider": "stated",
        "instance_type": f"{hw.gpus_per_node}x {gpu.gpu_name}",
        "region": "stated",
        "zone": None,
        "pricing_type": "on_demand",
        "is_spot": False,
        "price_source": "list",
        "gpu_name": gpu.gpu_name,
        "gpu_count": float(hw.gpus_per_node),
        "vram_gb": float(gpu.vram_gb),
        "price_usd_per_hour": None if price is None else price * hw.gpus_per_node,
        "bf16_tflops": gpu.bf16_tflops,
        "fp16_tflops": gpu.fp16_tflops,
        "supports_bf16": gpu.supports_bf16,
        "intra_node_interconnect": interconnect,
        "intra_node_gbps": intra,
        "inter_node_gbps": hw.inter_node_gbits_per_s if hw.nodes > 1 else None,
        "pcie_gen": gpu.pcie_gen,
        "memory_bandwidth_gbps": gpu.memory_bandwidth_gbps,
        "architecture": gpu.architecture,
        "sm_count": gpu.sm_count,
        "matmul_tflops": gpu.matmul_tflops,
        "half_rate_accumulate": gpu.half_rate_accumulate,
        "tensor_flops_per_sm_clock": gpu.tensor_flops_per_sm_clock,
        "gpu_model": gpu.model,
        "billing_granularity": "per_second",
        "minimum_charge_seconds": None,
        "spot_kind": None,
        "interruption_rate_min": None,
        "interruption_rate_max": None,
        "is_stale": False,
        # no provider: its storage, network and billing facts are unknown
        **dict.fromkeys(FACT_SCHEMA),
    }


def on_hardware(
    fjob: FinetuneJob, model: ModelSpec, hw: StatedHardware, catalog: HardwareCatalog | None = None
) -> StatedEstimate:
    """The job on stated hardware, priced by the mart's cost SQL over a one-row offer frame."""
    gpu = find_gpu(hw.gpu, catalog)
    refusal = group_refusal(fjob.job.tensor_parallel, hw.nodes * hw.gpus_per_node, hw.gpus_per_node)
    if refusal:
        raise AnswerError(f"--gpus {hw.gpus_per_node}: {refusal}")
    offer = stated_offer(gpu, hw)
    offers = pl.DataFrame([offer], schema=OFFER_SCHEMA)
    memory = MemoryTable()
    placer = partial(place_at, sharding=hw.sharding)
    con = connect(":memory:")
    try:
        rows = cost_frame(
            con, [fjob], {model.model_id: model}, offers, max_nodes=hw.nodes, max_gpus=None,
            memory=memory, placer=placer,
        )  # fmt: skip
    except ValueError as exc:  # place_at: a sharding that cannot run on these nodes
        raise AnswerError(f"--sharding {hw.sharding}: {exc}") from None
    finally:
        con.close()
    rows = _with_train_precision(rows, offers, fjob.job)
    row = {**rows.row(0, named=True), "intra_node_interconnect": offer["intra_node_interconnect"]}
    job_memory = memory.for_job(model, fjob.job)
    variant = next(i for i, (s, _) in enumerate(job_memory.variants) if s == row["sharding"])
    placed = job_memory.variants[variant][1]
    hours = row["estimated_hours"]
    tokens_per_s = fjob.train_tokens / (hours * 3600) if hours else None
    tflops, _ = tensor_rate(gpu.bf16_tflops, gpu.fp16_tflops, gpu.supports_bf16)
    mfu = None
    if tokens_per_s is not None and tflops:
        mfu = model_flops_per_token(model, placed) * tokens_per_s / (row["gpus_used"] * tflops * 1e12)
    if tokens_per_s is not None and not math.isfinite(tokens_per_s):
        tokens_per_s = None
    return StatedEstimate(
        gpu,
        hw,
        row,
        job_memory.get(variant, row["gpus_used"], row["gpus_per_node"]),
        placed,
        tokens_per_s,
        mfu,
    )
