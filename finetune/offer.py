"""What of an offer, or of a GPU someone states (`estimate --gpu`), the model reads: one translation.

Pure: no DuckDB, no I/O, no project package. `warehouse.finetune_marts` applies it to every
distinct hardware among the current offers; `answers.estimate` builds a one-row offer from a
stated GPU with `stated_links` and sends it through the same path. Units are in the names:

* **Link bandwidth inside a node**: `intra_node_gbytes_per_s`, GB/s (1e9 bytes) per GPU and per
  direction, the rate a ring collective sees. The seeds (instance_types.csv, gpus.csv
  `nvlink_gbps`) and the mart column `intra_node_gbps` state it the way vendors quote it,
  *bidirectional* (NVLink 4: 900 GB/s per H100 = 450 each way), so it is halved here, once.
* **Network between nodes**: `inter_node_gbits_per_s`, Gb/s (1e9 bits) per node, all of the
  node's NICs together: the seeds' and the mart's `inter_node_gbps` is already that unit (a flat
  collective's rings cross it at that whole rate, `finetune.time.link_bytes_per_s`).
* `finetune.time.estimate_time` takes both links in Gb/s per direction (`gbits_per_s`).

An NVLink *bridge* joins two cards (Azure NC H100 v5, hyperstack's "NVLink" flavours of PCIe
cards); with more than two GPUs a ring crosses PCIe between the bridged pairs, so the whole
collective runs at the PCIe rate. A multi-GPU PCIe offer whose seed leaves the rate empty gets
the GPU's PCIe x16 rate. GeForce cards have no P2P (`has_p2p`), nor has a node stated
`HOST_STAGED` (rentals whose provider states no link). Parts whose bf16 with FP32
accumulation runs at half their FP16-accumulate rate (GeForce cards among them) carry gpus.csv's
`half_rate_accumulate`, a fact of the part with its own source rather than a rule on its name.

GPUs without bf16 (Volta, Turing: gpus.csv `supports_bf16` false) train in fp16 mixed precision:
the same two bytes per value, so memory is unchanged, at the fp16 tensor rate (`tensor_rate`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from finetune.cost import HOURS_PER_MONTH, Granularity
from finetune.job import DEFAULT_CHECKPOINT_EVERY_HOURS
from finetune.placement import Hardware
from finetune.time import PCIE_X16_GBYTES_PER_S

__all__ = [
    "CHECKPOINT_INTERVAL_HOURS",
    "DEFAULT_INTERRUPTIONS_PER_HOUR",
    "GRANULARITY",
    "HOST_STAGED",
    "HOURS_PER_MONTH",
    "MARKET_INTERRUPTIONS_PER_HOUR",
    "RESTART_OVERHEAD_HOURS",
    "Interconnect",
    "gbits_per_s",
    "granularity",
    "hardware_of",
    "has_p2p",
    "interruptions_per_hour",
    "intra_node_gbytes_per_s",
    "node_limit",
    "stated_links",
    "tensor_rate",
]

# The checkpoint interval of a job that states none (finetune.job.Experiment's default).
CHECKPOINT_INTERVAL_HOURS = DEFAULT_CHECKPOINT_EVERY_HOURS
# Replacing an interrupted instance: provisioning, image pull, reloading model and checkpoint,
# 10–20 minutes for a model-sized checkpoint.
RESTART_OVERHEAD_HOURS = 0.25
# AWS' Spot Advisor bands are the fraction of instances interrupted over the trailing month
# (HOURS_PER_MONTH, finetune.cost's average month).
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
# `per_month`: a rental paid by the month (finetune.cost bills it in whole 730-hour months, held
# for the whole experiment).
GRANULARITY: dict[str, Granularity] = {
    "per_second": "second",
    "per_minute": "minute",
    "per_hour": "hour",
    "per_month": "month",
}
# An NVLink bridge links this many cards; beyond it a collective crosses PCIe.
BRIDGED_GPUS = 2
BITS_PER_BYTE = 8

Interconnect = Literal["nvlink", "pcie", "host"]
# `intra_node_interconnect` of a node whose GPUs share PCIe but cannot reach each other's memory
# (`--interconnect host`): NCCL stages every transfer through host memory, as on GeForce cards.
# NVIDIA's NCCL user guide, "GPU troubleshooting" (GPU Direct): direct point-to-point PCI messages
# "can fail or perform poorly for a variety of reasons, like missing components, a bad
# configuration of a virtual machine or a container, or some BIOS settings"; IO virtualization
# (VT-d / IOMMU, which passing GPUs into VMs needs) redirects "all PCI point-to-point traffic to the
# CPU root complex" through PCI Access Control Services. Rented VMs often run that way, and no
# offer states it, so it is the user's to say.
HOST_STAGED = "PCIe, no P2P"


def gbits_per_s(gbytes_per_s: float | None) -> float | None:
    """GB/s → Gb/s (the unit `estimate_time` takes links in)."""
    return None if gbytes_per_s is None else gbytes_per_s * BITS_PER_BYTE


def intra_node_gbytes_per_s(
    stated_bidirectional_gbytes_per_s: float | None,
    gpu_count: float,
    interconnect: str | None,
    pcie_gen: int | None,
) -> float | None:
    """GB/s per GPU and direction inside a node, from the seeds' bidirectional figure.

    None (or 0) where it is unknown or there is no link (one GPU): a multi-GPU job is then not
    timed rather than timed on a guess.
    """
    pcie = PCIE_X16_GBYTES_PER_S.get(pcie_gen or 0)
    kind = interconnect or "PCIe"
    if stated_bidirectional_gbytes_per_s is not None and stated_bidirectional_gbytes_per_s > 0:
        if kind == "NVLink bridge" and gpu_count > BRIDGED_GPUS:
            return pcie  # the ring's slowest hop is the PCIe one between bridged pairs
        return float(stated_bidirectional_gbytes_per_s) / 2
    if gpu_count > 1 and kind in ("PCIe", HOST_STAGED):
        return pcie
    return stated_bidirectional_gbytes_per_s


def has_p2p(gpu_model: str | None) -> bool:
    """GeForce cards have no GPU-to-GPU P2P over PCIe (NVIDIA disables it in the driver since
    the RTX 40 series; RTX 30 only over an NVLink bridge, which clouds do not fit), so NCCL stages
    their traffic through host memory. Read from gpus.csv's `model` ("GeForce RTX 4090")."""
    return not (gpu_model or "").startswith("GeForce")


def tensor_rate(
    bf16_tflops: float | None, fp16_tflops: float | None, supports_bf16: bool | None = None
) -> tuple[float | None, Literal["bf16", "fp16"]]:
    """(dense TFLOPS a job trains at, the 16-bit type it trains in).

    A GPU without bf16 (`supports_bf16` false) trains in fp16 mixed precision with loss scaling:
    same bytes per value, its fp16 rate. One with bf16 trains in it, at its bf16 rate; where
    gpus.csv has the type but not the rate (RTX PRO 6000 Server Edition, MI250, Gaudi), the rate
    is unknown (None) and the job is not timed, rather than said to train in fp16. Where the seed
    does not say whether the part has bf16 (None), a bf16 rate says it has.
    """
    if supports_bf16 is not False and bf16_tflops is not None:
        return float(bf16_tflops), "bf16"
    if supports_bf16:
        return None, "bf16"
    return (None if fp16_tflops is None else float(fp16_tflops)), "fp16"


def granularity(billing_granularity: str | None) -> Granularity:
    """providers.csv's billing unit as `finetune.billed_hours` takes it; unknown: per hour."""
    return GRANULARITY.get(billing_granularity or "", "hour")


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


def hardware_of(row: Mapping[str, Any]) -> Hardware:
    """What of an offer (a `warehouse.finetune_marts.read_offers` row) decides placement and time.

    Reads the mart's columns in the mart's units: `intra_node_gbps` bidirectional GB/s,
    `inter_node_gbps` Gb/s per node.
    """
    tflops, _ = tensor_rate(row["bf16_tflops"], row["fp16_tflops"], row.get("supports_bf16"))
    return Hardware(
        gpu_name=row["gpu_name"],
        gpu_count=float(row["gpu_count"]),
        vram_gb=float(row["vram_gb"]),
        tensor_tflops=tflops,
        intra_node_gbytes_per_s=intra_node_gbytes_per_s(
            row["intra_node_gbps"], row["gpu_count"], row["intra_node_interconnect"], row["pcie_gen"]
        ),
        inter_node_gbits_per_s=row["inter_node_gbps"],
        memory_bandwidth_gbps=row["memory_bandwidth_gbps"],
        architecture=row["architecture"],
        p2p=has_p2p(row["gpu_model"]) and row["intra_node_interconnect"] != HOST_STAGED,
        pcie_gen=row["pcie_gen"],
        sm_count=row.get("sm_count"),
        matmul_tflops=row.get("matmul_tflops"),
        half_rate_accumulate=bool(row.get("half_rate_accumulate")),
        tensor_flops_per_sm_clock=row.get("tensor_flops_per_sm_clock"),
    )


def node_limit(hw: Hardware, max_nodes: int | None, max_gpus: int | None, serverless: bool = False) -> int:
    """How many of an offer's instances one job may use.

    A serverless offer (providers.csv `serverless`) runs one function on one machine: there are
    no instances to network together, so it is never part of a multi-node job."""
    if hw.gpu_count < 1 or serverless:
        return 1  # a slice of one GPU is never part of a multi-node job
    limit = max_nodes if max_nodes is not None else math.inf
    if max_gpus is not None:
        limit = min(limit, max(1, max_gpus // hw.gpus_per_node))
    return int(limit) if math.isfinite(limit) else 1


# gpus.csv form factors whose NVLink ports reach every GPU of the board (NVSwitch, or AMD's
# Infinity Fabric mesh on OAM); a PCIe card's NVLink is a bridge to one neighbour.
_BOARD_LINKS = {"SXM": "NVSwitch", "Superchip": "NVSwitch", "OAM": "Infinity Fabric"}


def stated_links(
    form_factor: str | None,
    nvlink_bidirectional_gbytes_per_s: float | None,
    gpus_per_node: int,
    interconnect: Interconnect | None,
) -> tuple[str, float | None]:
    """(intra_node_interconnect, bidirectional GB/s) of a stated node, in instance_types.csv's words.

    `interconnect` None: NVLink where the form factor links the whole board (SXM, OAM,
    Superchip), else PCIe. "nvlink" on a PCIe card means its NVLink bridge, which
    `intra_node_gbytes_per_s` rates at PCIe beyond a pair. "host": PCIe without peer-to-peer
    (HOST_STAGED), whatever the board. Raises ValueError for "nvlink" on a GPU without NVLink.
    """
    if gpus_per_node <= 1:
        return "none", None
    board = _BOARD_LINKS.get(form_factor or "")
    nvlink = nvlink_bidirectional_gbytes_per_s or 0.0
    wanted = interconnect or ("nvlink" if board and nvlink > 0 else "pcie")
    if wanted == "pcie":
        return "PCIe", None
    if wanted == "host":
        return HOST_STAGED, None
    if nvlink <= 0:
        raise ValueError(
            "this GPU has no NVLink in gpus.csv (nvlink_gbps 0 or empty): use --interconnect pcie"
        )
    return (board or "NVLink bridge"), float(nvlink)
