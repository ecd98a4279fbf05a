"""Where a job goes on given hardware: fewest nodes that fit, fastest sharding, its time (pure).

* A job uses whole instances ("nodes") and every GPU in them: the price is per instance, so an idle
  GPU only makes the run slower for the same money. A fractional offer (a vGPU slice, gpu_count < 1)
  is one node of one GPU with that share of the compute; its `vram_gb` is already the slice.
* It fits when the per-GPU device total `total_gb` ≤ `usable_vram_gb` = vram_gb × USABLE_VRAM_FRACTION.
* Chosen: the fewest nodes that fit (more nodes only add slower inter-node traffic), and at that
  node count, where the price is fixed, the sharding that fits with the shortest estimated time
  (`plan_job`), the lightest (none → zero2 → zero3) among equals: the cheapest placement up to
  billing rounding. Lightest is not always fastest: the heavier shardings move more bytes, but
  ZeRO-2 and ZeRO-3 also shard the optimizer step that DDP runs over every parameter on every GPU
  (a full fine-tune that fits unsharded on large GPUs updates in 1/N of the time under ZeRO-2),
  and DeepSpeed's bf16 engine computes LoRA adapters in bf16 where the HF Trainer's DDP keeps
  PEFT's fp32 ones. One GPU has nothing to shard: there the lightest that fits is what runs. DDP
  (`none`) replicates the whole model, so it is only ever tried on one node. Hybrid sharding
  (HSDP) is placed only when stated (`place_at(..., sharding="hybrid")`): its memory is ZeRO-3's
  over one node's GPUs.
* A placement that does not fit reports the configuration that came closest (smallest per-GPU need).
* Multi-node without a fast fabric (< FAST_FABRIC_GBPS, or unknown) is flagged and not priced.
* A tensor-parallel job (`Job.tensor_parallel` = t) needs nodes of a multiple of t GPUs: its groups
  stay inside a node's links. Elsewhere it cannot be placed, and the placement says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from finetune.architecture import ModelSpec
from finetune.job import FinetuneJob, Job, Sharding
from finetune.memory import MemoryBreakdown, memory_per_gpu
from finetune.tensor_parallel import group_refusal
from finetune.time import FAST_FABRIC_GBPS, Accelerator, estimate_time, matmul_share

SHARDINGS: tuple[Sharding, ...] = ("none", "zero2", "zero3")
# What the memory model leaves out and a real run still allocates: NCCL communicator buffers on
# multi-GPU jobs, the driver's and ECC's reservation, allocator spikes at step boundaries. The
# model's own error (median |error| < 15% on the calibration set) goes both ways and is not covered.
USABLE_VRAM_FRACTION = 0.95


def candidate_shardings(job: Job) -> list[Sharding]:
    """The shardings a placement may give `job`, lightest first: CPU offload rules out DDP."""
    return [s for s in SHARDINGS if not (job.offload and s == "none")]


class JobMemory:
    """`memory_per_gpu` of one job under each sharding it allows (computed once per GPU count:
    `memory_per_gpu` keeps what it computed)."""

    def __init__(self, model: ModelSpec, job: Job) -> None:
        self.model = model
        self.variants: list[tuple[Sharding, Job]] = [
            (s, replace(job, sharding=s)) for s in candidate_shardings(job)
        ]

    def hybrid_variant(self) -> int | None:
        """The index of the job under hybrid sharding, added on first request: only a stated
        `--sharding hybrid` asks for it, so automatic placement and the marts never see it.
        None when the job offloads (hybrid is modelled without offload)."""
        for i, (s, _) in enumerate(self.variants):
            if s == "hybrid":
                return i
        if self.variants[0][1].offload:
            return None
        self.variants.append(("hybrid", replace(self.variants[0][1], sharding="hybrid")))
        return len(self.variants) - 1

    def get(self, variant: int, n_gpus: int, gpus_per_node: int | None = None) -> MemoryBreakdown:
        """The breakdown of `self.variants[variant]` data-parallel over `n_gpus` GPUs.

        A hybrid job holds what ZeRO-3 over one node's GPUs holds: its shards are gathered inside
        the node and replicated across nodes (`gpus_per_node`, default all `n_gpus` in one node).
        """
        sharding, job = self.variants[variant]
        if sharding == "hybrid":
            node = n_gpus if gpus_per_node is None else min(n_gpus, gpus_per_node)
            return memory_per_gpu(self.model, replace(job, sharding="zero3"), node)
        return memory_per_gpu(self.model, job, n_gpus)  # kept per (model, job, GPUs) there


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


@dataclass(frozen=True)
class Hardware:
    """What of an offer decides fit and time (`finetune.offer.hardware_of` builds it from an offer).

    Links: `intra_node_gbytes_per_s` GB/s per GPU and direction; `inter_node_gbits_per_s` Gb/s per node.
    """

    gpu_name: str
    gpu_count: float
    vram_gb: float
    tensor_tflops: float | None  # dense bf16, or fp16 on GPUs without bf16 (T4, V100)
    intra_node_gbytes_per_s: float | None
    inter_node_gbits_per_s: float | None
    memory_bandwidth_gbps: float | None = None  # GB/s, datasheet
    architecture: str | None = None
    p2p: bool = True  # False for GeForce cards: NCCL stages through host memory
    pcie_gen: int | None = None
    sm_count: int | None = None  # streaming multiprocessors of a whole GPU (GEMM waves)
    # gpus.csv `half_rate_accumulate`: bf16 with FP32 accumulation at half the tensor rate
    half_rate_accumulate: bool = False
    matmul_tflops: float | None = None  # measured large bf16 matmul rate of a whole GPU (MAMF)
    # gpus.csv `tensor_flops_per_sm_clock`: dense tensor FLOP per SM per clock (attention's share)
    tensor_flops_per_sm_clock: float | None = None

    @property
    def gpus_per_node(self) -> int:
        return 1 if self.gpu_count < 1 else int(self.gpu_count)

    def accelerator(self, tflops: float) -> Accelerator:
        """One of the job's GPUs as the time model sees it, at `tflops` (`node_tflops`)."""
        share = min(1.0, self.gpu_count)
        return Accelerator(
            tflops=tflops,
            memory_bandwidth_gbps=self.memory_bandwidth_gbps * share if self.memory_bandwidth_gbps else None,
            architecture=self.architecture,
            vram_gb=self.vram_gb,
            p2p=self.p2p,
            pcie_gen=self.pcie_gen,
            # a slice's SMs are not its share of the whole GPU's (MIG): flat GEMM efficiency there
            sm_count=self.sm_count if self.gpu_count >= 1 else None,
            # a share of the part's own peak, so it holds for a MIG slice's share of the rate too
            matmul_share=matmul_share(self.matmul_tflops, self.tensor_tflops),
            half_rate_accumulate=self.half_rate_accumulate,
            tensor_flops_per_sm_clock=self.tensor_flops_per_sm_clock,
        )

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


def _fabric_warning(nodes: int, inter_node_gbits_per_s: float | None) -> str | None:
    if nodes <= 1:
        return None
    if inter_node_gbits_per_s is None or inter_node_gbits_per_s <= 0:
        return f"multi-node ({nodes} nodes) on an offer with no known inter-node fabric"
    if inter_node_gbits_per_s < FAST_FABRIC_GBPS:
        return (
            f"multi-node ({nodes} nodes) over {inter_node_gbits_per_s:g} Gb/s "
            f"(< {FAST_FABRIC_GBPS:g} Gb/s): no fast fabric"
        )
    return None


def _fewest_nodes(need: Callable[[int], float], usable: float, max_nodes: int) -> int | None:
    """Smallest k in 1..max_nodes with need(k) ≤ usable.

    From two GPUs on, per-GPU need never grows with k (shards shrink, the gathered set stays), so a
    bisection finds k. One GPU is tried first: it shards nothing and gathers nothing, and on a
    model whose gathered set is over half its weights it can need less than two GPUs do.
    """
    if need(1) <= usable:
        return 1
    if max_nodes < 2 or need(max_nodes) > usable:
        return None
    lo, hi = 2, max_nodes
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
    # why the job cannot be laid on these nodes at all (tensor-parallel groups that do not divide
    # a node's GPUs); total_gb is then NaN: no memory was computed
    refusal: str | None = None
    # the heavier shardings that also fit on these nodes (JobMemory.variants indices, lightest
    # first): `plan_job` times each and keeps the fastest
    alternatives: tuple[int, ...] = ()


def _group_refusal(memory: JobMemory, gpus_per_node: int, nodes: int, usable: float) -> Placement | None:
    """A placement that cannot be, when the job's tensor-parallel groups do not fit these nodes."""
    refusal = group_refusal(memory.variants[0][1].tensor_parallel, nodes * gpus_per_node, gpus_per_node)
    if refusal is None:
        return None
    return Placement(False, 0, nodes, gpus_per_node, math.nan, usable, refusal)


def place(memory: JobMemory, gpus_per_node: int, vram_gb: float, max_nodes: int) -> Placement:
    """Fewest nodes that fit; at that node count the lightest sharding that fits, and the heavier
    ones that fit too as `alternatives` (`plan_job` keeps the fastest)."""
    usable = vram_gb * USABLE_VRAM_FRACTION
    refused = _group_refusal(memory, gpus_per_node, 1, usable)
    if refused is not None:
        return refused
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
        n = nodes * gpus_per_node
        total = memory.get(variant, n).total_gb
        others = tuple(
            v
            for v, (sharding, _) in enumerate(memory.variants)
            if n > 1 and v > variant and sharding in SHARDINGS and (sharding != "none" or nodes == 1)
            and memory.get(v, n).total_gb <= usable
        )  # fmt: skip
        return Placement(True, variant, nodes, gpus_per_node, total, usable, alternatives=others)
    assert closest is not None
    total, nodes, variant = closest
    return Placement(False, variant, nodes, gpus_per_node, total, usable)


def place_at(
    memory: JobMemory, gpus_per_node: int, vram_gb: float, nodes: int, sharding: Sharding | None = None
) -> Placement:
    """On exactly `nodes` nodes (stated hardware): `sharding`, or the lightest that fits there with
    the heavier ones that fit as `alternatives` (`plan_job` keeps the fastest).

    DDP (`none`) is only tried on one node, as in `place`; nothing fitting reports `sharding`, or
    the variant with the smallest per-GPU need. On one node this is `place`'s answer.
    """
    usable = vram_gb * USABLE_VRAM_FRACTION
    n = nodes * gpus_per_node
    refused = _group_refusal(memory, gpus_per_node, nodes, usable)
    if refused is not None:
        return refused
    if sharding == "hybrid":
        hybrid = memory.hybrid_variant()
        allowed = [] if hybrid is None else [hybrid]
    else:
        allowed = [
            v
            for v, (s, _) in enumerate(memory.variants)
            if (sharding is None or s == sharding) and (s != "none" or nodes == 1) and s != "hybrid"
        ]
    if not allowed:
        raise ValueError(
            f"sharding {sharding} cannot run this job on {nodes} node(s): DDP (none) replicates the "
            "model on one node only, CPU offload needs zero2 or zero3, and hybrid is modelled "
            "without offload"
        )

    def need(v: int) -> float:
        return memory.get(v, n, gpus_per_node).total_gb

    fitting = [v for v in allowed if need(v) <= usable]
    if fitting:
        # one GPU has nothing to shard: the lightest that fits is what runs
        variant, *others = fitting if n > 1 else fitting[:1]
        return Placement(
            True, variant, nodes, gpus_per_node, need(variant), usable, alternatives=tuple(others)
        )
    variant = min(allowed, key=need)
    return Placement(False, variant, nodes, gpus_per_node, need(variant), usable)


def plan_job(fjob: FinetuneJob, hw: Hardware, placement: Placement, memory: JobMemory) -> Plan:
    """The placement's time and, if it cannot be priced, why; of the shardings that fit
    (`Placement.alternatives`), the one with the shortest time, the lightest among equals."""
    plans = [_plan_variant(fjob, hw, placement, memory)]
    for variant in placement.alternatives:
        total = memory.get(
            variant, placement.nodes * placement.gpus_per_node, placement.gpus_per_node
        ).total_gb
        other = replace(placement, variant=variant, total_gb=total, alternatives=())
        plans.append(_plan_variant(fjob, hw, other, memory))
    timed = [p for p in plans if p.priced and p.estimated_hours is not None]
    return min(timed, key=lambda p: p.estimated_hours or 0.0) if timed else plans[0]


def _plan_variant(fjob: FinetuneJob, hw: Hardware, placement: Placement, memory: JobMemory) -> Plan:
    """`plan_job` for the placement's own variant."""
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
        "fabric_warning": _fabric_warning(nodes, hw.inter_node_gbits_per_s),
    }
    unknown_time: dict[str, Any] = {"estimated_hours": None, "compute_hours": None, "comm_hours": None}
    if placement.refusal is not None:
        return Plan(**fields, **unknown_time, unpriced_reason=placement.refusal)
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
    intra = hw.intra_node_gbytes_per_s * 8 if hw.intra_node_gbytes_per_s is not None else None
    gpu = hw.accelerator(tflops)
    time = estimate_time(
        memory.model, job, fjob.train_tokens, n, gpn, tflops, intra, hw.inter_node_gbits_per_s, gpu=gpu
    )
    hours = time.hours if math.isfinite(time.hours) else None
    unpriced: str | None = fields["fabric_warning"] or (
        None if hours is not None else time.warning or "unbounded time"
    )
    return Plan(
        **fields,
        estimated_hours=hours,
        compute_hours=time.compute_hours,
        comm_hours=time.comm_hours if math.isfinite(time.comm_hours) else None,
        unpriced_reason=unpriced,
    )
