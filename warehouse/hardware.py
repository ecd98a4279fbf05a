"""Canonical GPU names, VRAM and interconnect for any provider's offer. Pure: no I/O beyond
reading the seed CSVs once.

Canonical names (``gpus.csv`` ``gpu_name``): ``<model>[-<VRAM>GB][-<form factor>]``, with the
size only where a model ships in several sizes and the form factor only where it ships in several
(``A100-40GB-SXM``, ``A100-80GB-PCIe``, ``V100-32GB-SXM``, ``H100-SXM``, ``H100-PCIe``,
``H100-NVL``, ``H200-SXM``); otherwise the model with spaces removed (``L40S``, ``RTX4090``,
``RTXA6000``, ``RTX6000-Ada``, ``Quadro-RTX6000``, ``MI300X``). The three "RTX 6000" cards are
three rows: Turing ``Quadro-RTX6000`` (24 GB), Ampere ``RTXA6000`` and Ada ``RTX6000-Ada``.

How ``HardwareCatalog.resolve`` picks a GPU (first rule that applies wins):

1. ``instance_type``: the provider's instance type matches a row of ``instance_types.csv``
   (exact name first, then shell globs in file order). The row is authoritative: Azure's price
   API never names the GPU and AWS's ``gpu`` attributes are unreliable, so the instance type is
   the only trustworthy key for them. A fractional row (``gpu_count`` < 1) reports the VRAM
   share as ``vram_gb``.
2. ``alias``: the raw GPU name is normalized (see ``normalize_gpu_name``) and looked up in
   ``gpu_aliases.csv``, a provider-scoped row before a global one. When the row lists
   ``candidates`` (the name alone does not say 40 vs 80 GB, SXM vs NVL...), the reported VRAM
   picks the candidate whose ``vram_gb`` is nearest, if within ``VRAM_TOLERANCE`` (rule
   ``alias+vram``); without usable VRAM the row's documented default wins (``alias_default``).
3. Reported VRAM snaps to the canonical size when within ``VRAM_TOLERANCE``: AWS reports an L4 as
   22888 MiB (22.35 GB, 6.9 % short of 24) and an L40S as 45776 MiB. gpuhunt uses the same 7 %.
   VRAM further below the canonical size is a slice of one GPU (Vultr's 4 GB A100 plans):
   ``vram_gb`` is then the slice and ``gpu_count`` the fraction (rule suffix ``+vram_share``).

Stated vs seed (``stated_vram``). The provider's own per-GPU figure (``gpu_memory_gb_raw``) is
kept beside the seed's as ``vram_gb_stated``; ``vram_source`` says which one is published:

* ``source``: the source states a figure that agrees with the seed (within ``STATED_AGREE``, 1 %:
  GB vs GiB rounding of a page, Vast's 81559 MiB for 80 GB is 0.4 %), or states a slice of a card;
* ``seed``: the source states nothing;
* ``seed:snapped``: a MiB report short of the seed by a fraction of a GB, within
  ``VRAM_TOLERANCE`` (AWS's 22888 MiB L4 = 22.35 GB): driver-reserved memory, not a conflict;
* ``source:below_seed``: a conflict; the source states a whole number of GB less than the seed (a
  page saying 270 GB for B300): the source's figure is published, never more than it says;
* ``seed:below_source``: a conflict; the source states more than the seed (a page saying 192 GB
  for HGX B200, whose usable memory is 180): the seed's figure is published, since the reference
  says the source's figure is not usable memory.

``spec_conflict`` is true for the two last. A whole-GB figure is how a page states memory; a
fractional one is what a MiB count converts to, which is why only the latter snaps silently.

Variants the source does not state (``variant_source``): how the form factor of ``gpu_name`` was
known. ``name`` (the raw name or the instance type says SXM, PCIe, NVL, NVLink or HGX), ``vram``
(the stated VRAM picked a candidate of another form factor than the default: 94 GB is H100 NVL; 80
GB only confirms it), ``instance_type`` and ``provider_doc`` (a seed row for this provider, whose
source is the provider's own documentation; an instance type row listed in
``variants_unstated.csv``, with the page that leaves the variant out, is ``seed_default``),
``only_variant`` (the model ships in one form factor: nothing to state), or ``seed_default``: a bare
name ("H100", "A100-80GB") given the seeds' documented default by a row for every provider. The
marts then publish ``gpu_variant`` as null (stated-unknown): the offer is priced on the default's
specs, but never shown as SXM on the seeds' word alone. Give such a provider a provider-scoped alias
row, citing its own docs, to publish the variant.

Unknown names and instance types give ``None`` (the offer lands unmapped), never an exception.

``instance_types.csv`` vocabulary: ``intra_node_interconnect`` is one of ``NVSwitch``,
``NVLink mesh`` (direct links without a switch: V100 hybrid cube-mesh), ``NVLink bridge``
(pairs), ``Infinity Fabric``, ``PCIe`` (GPU-to-GPU peer-to-peer over PCIe), ``PCIe, no P2P``
(``finetune.offer.HOST_STAGED``: NCCL stages every transfer through host memory; the reading
for multi-GPU rentals of PCIe cards whose provider states no interconnect), ``none`` (one GPU or
less); ``intra_node_gbps`` is GB/s per GPU, bidirectional. ``inter_node_fabric`` is ``EFA``,
``InfiniBand``, ``RoCE``, ``ethernet`` or ``none``; ``inter_node_gbps`` is Gbit/s per node.
Empty cells mean "not known", never zero.
"""

from __future__ import annotations

import csv
import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SEEDS_DIR = Path(__file__).resolve().parent / "seeds"

# Relative distance within which a reported VRAM figure is the canonical size. 7 % covers AWS's
# MiB figures that leave out the driver-reserved memory (L4 22888 MiB vs 24 GB = 6.9 %) and
# Vast's 81559 MiB H100s, while 40 vs 48 GB or 80 vs 94 GB stay distinct.
VRAM_TOLERANCE = 0.07

# Relative distance within which a stated VRAM figure agrees with the seed's outright: rounding
# (GB vs GiB of a page, 81559 MiB = 79.6 GB for an 80 GB H100 is 0.4 %), never a different part.
STATED_AGREE = 0.01

# Vendor and marketing words that some providers include and others drop; "gpu" because GCP
# SKUs ("Nvidia L4 GPU") and Vultr plan ids ("...-h100-gpu") append it.
_NOISE_TOKENS = frozenset({"nvidia", "tesla", "amd", "geforce", "instinct", "gpu"})
# words of a raw name that state the form factor (normalized: see `normalize_gpu_name` tokens)
_VARIANT_WORDS = ("sxm", "pcie", "nvl", "hgx")
_SPOT_SUFFIX = re.compile(r"[\s_]+(spot|low[\s_]+priority)$", re.IGNORECASE)


def normalize_gpu_name(raw: str) -> str:
    """Lookup key for a raw GPU name: lowercase alphanumerics without vendor noise words.

    >>> normalize_gpu_name("NVIDIA GeForce RTX 4090"), normalize_gpu_name("nvidia-tesla-a100")
    ('rtx4090', 'a100')
    """
    tokens = re.split(r"[^0-9a-z]+", raw.lower())
    return "".join(t for t in tokens if t and t not in _NOISE_TOKENS)


def normalize_instance_type(provider: str, instance_type: str) -> str:
    """Lookup key for an instance type (or a glob pattern; ``*?[]`` survive).

    Azure spells one VM size several ways (``Standard_NC40ads_H100_v5``, ``NC40adsH100v5``,
    ``NC12s v3``, with " Spot"/" Low Priority" suffixes), so for Azure the prefix, the suffixes,
    underscores and spaces go. Other providers only lose case and surrounding space.
    """
    key = _SPOT_SUFFIX.sub("", instance_type.strip()).lower()
    if provider == "azure":
        key = re.sub(r"^standard_", "", key)
        key = re.sub(r"[^0-9a-z*?\[\]]", "", key)
    return key


@dataclass(frozen=True)
class GpuSpec:
    """One row of gpus.csv: a canonical GPU variant. Dense tensor figures; None = unknown."""

    gpu_name: str
    vendor: str
    model: str
    architecture: str
    vram_gb: float
    memory_type: str
    memory_bandwidth_gbps: float | None
    bf16_tflops: float | None
    fp16_tflops: float | None
    fp8_tflops: float | None
    int8_tops: float | None
    supports_bf16: bool
    supports_fp8: bool
    supports_int4: bool
    nvlink_gbps: float | None
    pcie_gen: int | None
    form_factor: str
    source: str
    # streaming multiprocessors (GEMM wave quantization), with its own source; None = not sourced
    sm_count: int | None = None
    sm_count_source: str = ""
    # measured large bf16 matmul rate (MAMF, TFLOPS), with its own source; None = not measured
    matmul_tflops: float | None = None
    matmul_tflops_source: str = ""
    # bf16/fp16 tensor math with FP32 accumulation runs at half the FP16-accumulate rate (GeForce
    # cards among others), so `bf16_tflops` is that half rate, with its own source; False = full rate
    half_rate_accumulate: bool = False
    half_rate_accumulate_source: str = ""
    # dense bf16 tensor FLOP per SM per clock at the accumulation `bf16_tflops` rates (GA100 2,048;
    # GA10x, AD10x and GB20x 1,024, 512 at half rate), with its own source; None = not stated
    tensor_flops_per_sm_clock: int | None = None
    tensor_flops_per_sm_clock_source: str = ""


@dataclass(frozen=True)
class GpuAlias:
    """One row of gpu_aliases.csv. ``provider`` "" = any provider."""

    raw_name: str
    provider: str
    gpu_name: str
    candidates: tuple[str, ...]
    rule: str
    source: str


@dataclass(frozen=True)
class InstanceTypeSpec:
    """One row of instance_types.csv: what a provider's instance type (or glob) contains."""

    provider: str
    instance_type: str
    gpu_name: str
    gpu_count: float | None
    vram_gb_per_gpu_share: float | None
    intra_node_interconnect: str | None
    intra_node_gbps: float | None
    inter_node_fabric: str | None
    inter_node_gbps: float | None
    gpudirect_rdma: bool | None
    source: str

    @property
    def is_pattern(self) -> bool:
        return any(c in self.instance_type for c in "*?[")


@dataclass(frozen=True)
class GpuMatch:
    """What an offer is, after normalization. ``vram_gb`` is per GPU (the share if fractional)."""

    gpu_name: str
    vram_gb: float
    gpu_count: float | None
    rule: str
    instance_type_pattern: str | None = None
    intra_node_interconnect: str | None = None
    intra_node_gbps: float | None = None
    inter_node_fabric: str | None = None
    inter_node_gbps: float | None = None
    gpudirect_rdma: bool | None = None
    # how the variant (SXM, PCIe, NVL...) was known: see `HardwareCatalog.variant_source`
    variant_source: str | None = None


def _float(cell: str) -> float | None:
    return float(cell) if cell.strip() else None


def _bool(cell: str) -> bool | None:
    value = cell.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    if not value:
        return None
    raise ValueError(f"expected true/false, got {cell!r}; fix the seed CSV")


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


class HardwareCatalog:
    """The seeds, indexed for ``resolve``. Build with ``HardwareCatalog.load()``."""

    def __init__(
        self,
        gpus: Mapping[str, GpuSpec],
        aliases: list[GpuAlias],
        instance_types: list[InstanceTypeSpec],
        variants_unstated: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self._gpus = dict(gpus)
        # (provider, instance_types.csv instance_type) whose source does not state the variant
        self._variants_unstated = variants_unstated
        self._aliases = list(aliases)
        self._instance_types = list(instance_types)
        self._alias_index = {(a.provider, normalize_gpu_name(a.raw_name)): a for a in self._aliases}
        self._exact: dict[tuple[str, str], InstanceTypeSpec] = {}
        self._patterns: dict[str, list[tuple[str, InstanceTypeSpec]]] = {}
        for row in self._instance_types:
            key = normalize_instance_type(row.provider, row.instance_type)
            if row.is_pattern:
                self._patterns.setdefault(row.provider, []).append((key, row))
            else:
                self._exact[(row.provider, key)] = row

    @classmethod
    def load(cls, seeds_dir: Path | None = None) -> HardwareCatalog:
        folder = seeds_dir or SEEDS_DIR
        gpus = {
            r["gpu_name"]: GpuSpec(
                gpu_name=r["gpu_name"],
                vendor=r["vendor"],
                model=r["model"],
                architecture=r["architecture"],
                vram_gb=float(r["vram_gb"]),
                memory_type=r["memory_type"],
                memory_bandwidth_gbps=_float(r["memory_bandwidth_gbps"]),
                bf16_tflops=_float(r["bf16_tflops"]),
                fp16_tflops=_float(r["fp16_tflops"]),
                fp8_tflops=_float(r["fp8_tflops"]),
                int8_tops=_float(r["int8_tops"]),
                supports_bf16=bool(_bool(r["supports_bf16"])),
                supports_fp8=bool(_bool(r["supports_fp8"])),
                supports_int4=bool(_bool(r["supports_int4"])),
                nvlink_gbps=_float(r["nvlink_gbps"]),
                pcie_gen=int(r["pcie_gen"]) if r["pcie_gen"].strip() else None,
                form_factor=r["form_factor"],
                source=r["source"],
                sm_count=int(r["sm_count"]) if r["sm_count"].strip() else None,
                sm_count_source=r["sm_count_source"].strip(),
                matmul_tflops=_float(r["matmul_tflops"]),
                matmul_tflops_source=r["matmul_tflops_source"].strip(),
                half_rate_accumulate=bool(_bool(r["half_rate_accumulate"])),
                half_rate_accumulate_source=r["half_rate_accumulate_source"].strip(),
                tensor_flops_per_sm_clock=(
                    int(r["tensor_flops_per_sm_clock"]) if r["tensor_flops_per_sm_clock"].strip() else None
                ),
                tensor_flops_per_sm_clock_source=r["tensor_flops_per_sm_clock_source"].strip(),
            )
            for r in _read(folder / "gpus.csv")
        }
        aliases = [
            GpuAlias(
                raw_name=r["raw_name"],
                provider=r["provider"],
                gpu_name=r["gpu_name"],
                candidates=tuple(c for c in r["candidates"].split("|") if c),
                rule=r["rule"],
                source=r["source"],
            )
            for r in _read(folder / "gpu_aliases.csv")
        ]
        instance_types = [
            InstanceTypeSpec(
                provider=r["provider"],
                instance_type=r["instance_type"],
                gpu_name=r["gpu_name"],
                gpu_count=_float(r["gpu_count"]),
                vram_gb_per_gpu_share=_float(r["vram_gb_per_gpu_share"]),
                intra_node_interconnect=r["intra_node_interconnect"] or None,
                intra_node_gbps=_float(r["intra_node_gbps"]),
                inter_node_fabric=r["inter_node_fabric"] or None,
                inter_node_gbps=_float(r["inter_node_gbps"]),
                gpudirect_rdma=_bool(r["gpudirect_rdma"]),
                source=r["source"],
            )
            for r in _read(folder / "instance_types.csv")
        ]
        unstated = folder / "variants_unstated.csv"
        variants_unstated = frozenset(
            (r["provider"], r["instance_type"]) for r in (_read(unstated) if unstated.exists() else [])
        )
        return cls(gpus, aliases, instance_types, variants_unstated)

    @property
    def gpus(self) -> Mapping[str, GpuSpec]:
        return self._gpus

    @property
    def aliases(self) -> list[GpuAlias]:
        return self._aliases

    @property
    def instance_types(self) -> list[InstanceTypeSpec]:
        return self._instance_types

    def instance_type(self, provider: str, instance_type: str) -> InstanceTypeSpec | None:
        """The instance_types.csv row for this offer: exact name first, then globs in order."""
        key = normalize_instance_type(provider, instance_type)
        exact = self._exact.get((provider, key))
        if exact is not None:
            return exact
        for pattern, row in self._patterns.get(provider, []):
            if fnmatch.fnmatchcase(key, pattern):
                return row
        return None

    def alias(self, provider: str, gpu_name_raw: str) -> GpuAlias | None:
        key = normalize_gpu_name(gpu_name_raw)
        return self._alias_index.get((provider, key)) or self._alias_index.get(("", key))

    def resolve(
        self,
        provider: str,
        instance_type: str,
        gpu_name_raw: str | None,
        gpu_memory_gb_raw: float | None,
        gpu_count: float | None = None,
    ) -> GpuMatch | None:
        """Canonical GPU, per-GPU VRAM, count and interconnect for one offer; None = unmapped."""
        row = self.instance_type(provider, instance_type) if instance_type else None
        if row is not None and row.gpu_name in self._gpus:
            spec = self._gpus[row.gpu_name]
            return GpuMatch(
                gpu_name=spec.gpu_name,
                vram_gb=row.vram_gb_per_gpu_share or spec.vram_gb,
                gpu_count=row.gpu_count if row.gpu_count is not None else gpu_count,
                rule="instance_type",
                instance_type_pattern=row.instance_type,
                intra_node_interconnect=row.intra_node_interconnect,
                intra_node_gbps=row.intra_node_gbps,
                inter_node_fabric=row.inter_node_fabric,
                inter_node_gbps=row.inter_node_gbps,
                gpudirect_rdma=row.gpudirect_rdma,
                variant_source=self._instance_variant(row, f"{gpu_name_raw or ''} {instance_type}"),
            )
        if not gpu_name_raw:
            return None
        alias = self.alias(provider, gpu_name_raw)
        if alias is None or alias.gpu_name not in self._gpus:
            return None
        name, rule = alias.gpu_name, "alias"
        if alias.candidates:
            picked = self._nearest(alias.candidates, alias.gpu_name, gpu_memory_gb_raw)
            name, rule = (picked, "alias+vram") if picked else (alias.gpu_name, "alias_default")
        spec = self._gpus[name]
        vram, count = spec.vram_gb, gpu_count
        if gpu_memory_gb_raw and gpu_memory_gb_raw < spec.vram_gb * (1 - VRAM_TOLERANCE):
            # A slice of one card (vGPU/MIG plans): report the slice, never the whole card.
            vram, rule = float(gpu_memory_gb_raw), rule + "+vram_share"
            count = gpu_count if gpu_count is not None else round(gpu_memory_gb_raw / spec.vram_gb, 3)
        return GpuMatch(
            gpu_name=name,
            vram_gb=vram,
            gpu_count=count,
            rule=rule,
            variant_source=self.variant_source(alias, f"{gpu_name_raw} {instance_type}", name, rule),
        )

    def _only_variant(self, gpu_name: str) -> bool:
        model = self._gpus[gpu_name].model
        return sum(1 for spec in self._gpus.values() if spec.model == model) == 1

    @staticmethod
    def _states_variant(source_words: str) -> bool:
        words = [w for w in re.split(r"[^0-9a-z]+", source_words.lower()) if w]
        return any(w.startswith(_VARIANT_WORDS) for w in words)

    def _instance_variant(self, row: InstanceTypeSpec, source_words: str) -> str:
        """An instance type row's source is the provider's documentation, unless
        variants_unstated.csv lists the row: then the variant is the seeds' default."""
        if self._only_variant(row.gpu_name):
            return "only_variant"
        if self._states_variant(source_words):
            return "name"
        return (
            "seed_default"
            if (row.provider, row.instance_type) in self._variants_unstated
            else "instance_type"
        )

    def variant_source(self, alias: GpuAlias, source_words: str, gpu_name: str, rule: str) -> str:
        """How an alias match knew its form factor (module docstring); `source_words` are what
        the source itself says: the raw GPU name and the instance type ("1x H100 SXM")."""
        if self._only_variant(gpu_name):
            return "only_variant"
        if self._states_variant(source_words):
            return "name"
        default = self._gpus.get(alias.gpu_name)
        if (
            rule.startswith("alias+vram")
            and default
            and default.form_factor != self._gpus[gpu_name].form_factor
        ):
            return "vram"  # the stated VRAM moved the pick to another form factor (94 GB: NVL)
        return "provider_doc" if alias.provider else "seed_default"

    def stated_vram(self, match: GpuMatch, stated_gb: float | None) -> tuple[float, str, bool]:
        """(published per-GPU VRAM, vram_source, spec_conflict) of a match whose source states
        ``stated_gb`` per GPU (None: not stated); rules in the module docstring."""
        seed = match.vram_gb
        if not stated_gb or stated_gb <= 0:
            return seed, "seed", False
        if match.rule.endswith("+vram_share") or abs(stated_gb - seed) <= seed * STATED_AGREE:
            return seed, "source", False  # a slice's vram_gb already is the stated figure
        if match.gpu_count is not None and 0 < match.gpu_count < 1:
            # a fractional instance type's share is the seed's by definition of the row
            return seed, "seed", False
        whole = abs(stated_gb - round(stated_gb)) < 1e-6
        if not whole and seed * (1 - VRAM_TOLERANCE) <= stated_gb < seed:
            return seed, "seed:snapped", False
        if stated_gb < seed:
            return float(stated_gb), "source:below_seed", True
        return seed, "seed:below_source", True

    def snap_vram(self, gpu_name: str, reported_gb: float) -> float | None:
        """The canonical VRAM if ``reported_gb`` is within tolerance of it, else None."""
        spec = self._gpus.get(gpu_name)
        if spec is None or abs(reported_gb - spec.vram_gb) > spec.vram_gb * VRAM_TOLERANCE:
            return None
        return spec.vram_gb

    def _nearest(self, candidates: tuple[str, ...], default: str, reported_gb: float | None) -> str | None:
        if not reported_gb:
            return None
        # Ties (H200 SXM and NVL are both 141 GB) go to the documented default.
        within = [
            (abs(reported_gb - self._gpus[c].vram_gb), c != default, c)
            for c in candidates
            if c in self._gpus and self.snap_vram(c, reported_gb) is not None
        ]
        return min(within)[2] if within else None
