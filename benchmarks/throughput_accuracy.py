"""Predicted vs published measured fine-tuning throughput (tokens/s, all GPUs together).

    uv run python benchmarks/throughput_accuracy.py [CSV ...]
    # without CSV: ../shared/data/measured_throughput_calibration.csv (skipped when absent),
    # benchmarks/data/throughput_extra.csv and throughput_llm_foundry.csv (this repo's own
    # transcriptions), each scored as a set

Each row states the model, method, precision, optimizer, sequence length, micro-batch,
checkpointing, LoRA rank and targets, GPU (a gpus.csv name), GPU count, GPUs per node, the
intra-node link, inter-node Gb/s, sharding, offload, framework and the measured tokens/s (this
repository's rows add the tensor-parallel degree, a framework "without sequence parallel" running
its tensor parallelism without it, and the micro-steps per optimizer step, `grad_accumulation`;
a `config` ending in .json names a config.json under benchmarks/data, for model shapes no hub
model has). It is
read into a ModelSpec, a Job and an Accelerator by generic rules (`row_to_case`; `intra_link` is
nvlink, pcie, or host for PCIe without peer-to-peer, as `estimate --interconnect` says); nothing is
looked up per row. What the columns leave to the stack is read from the stack's stated defaults:
the AdamW implementation (`FUSED_OPTIMIZER_STACKS`), the hardware a source names that its `gpu`
column could not (`HARDWARE_AS_STATED`), and, for padded batches, the padded length from the
stated mean and maximum sample length (`padded_batch_length`, or `bucketed_padded_length` for a
source whose loop sorts length buckets, `LENGTH_BUCKETED_SOURCES`); LoRA on q and v only where the
notes say so. Rows marked score=no are listed with their exclusion reason and left out of the
summary. The summary gives the share within ±35 %, median |error| and median bias, overall, by
method, by hardware class (datacenter / workstation / consumer, `hardware_class`) and by GPU.
The kernel stack is read from the framework: Unsloth and Liger Kernel runs are `kernels=fused`,
everything else the plain stack; the attention kernel (`attention_of`) and a fused loss
(`FUSED_LOSS_STACKS`) likewise. Only the Job fields the installed model knows are set, so the
same script scores an older checkout of the model too (before / after runs).
"""

from __future__ import annotations

import csv
import functools
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, fields
from pathlib import Path

from benchmarks.memory_accuracy import resolve_model
from finetune import Accelerator, Job, ModelSpec, estimate_time
from finetune.architecture import model_from_hf_config
from finetune.job import _truncated_exponential_rate, padded_batch_length
from finetune.offer import PCIE_X16_GBYTES_PER_S, has_p2p
from finetune.time import matmul_share
from warehouse.seed_models import SEEDS_DIR, load_models

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "data" / "measured_throughput_calibration.csv"
DATA_DIR = Path(__file__).resolve().parent / "data"
EXTRA_CSV = DATA_DIR / "throughput_extra.csv"
FOUNDRY_CSV = DATA_DIR / "throughput_llm_foundry.csv"
# Qwen's own fine-tuning profile (QwenLM/Qwen README @e8e1596): Qwen-1 1.8B/7B/14B on one A100,
# LoRA, LoRA with trained embedding and head, and GPTQ-Int4 Q-LoRA at 256 to 8,192 tokens
QWEN_CSV = DATA_DIR / "throughput_qwen.csv"
TOLERANCE_PCT = 35.0
# Frameworks that run fused kernels (FlashAttention-2, fused RMSNorm / RoPE / SwiGLU / LoRA
# / linear cross-entropy): Unsloth, any stack that names Liger Kernel, and Megatron-Core on
# TransformerEngine layers (NeMo's Llama recipes: the RMSNorm fused into the next linear by TE's
# LayerNormLinear, cuDNN fused attention, `apply_rope_fusion`, `bias_activation_fusion` for SwiGLU).
FUSED_KERNEL_STACKS = ("unsloth", "liger", "transformerengine")
# Stacks whose attention is the GPU's own fused kernel, not FA2-class (`Job.attention` "native"):
# TransformerEngine's DotProductAttention runs cuDNN fused attention (the NeMo rows' framework
# says "TransformerEngine layers/fused attention"). A stack that does not say runs FA2-class
# kernels (flash-attn 2, SDPA's flash backend).
NATIVE_ATTENTION_STACKS = ("transformerengine",)
# Stacks whose attention is FlashAttention-1-class (`Job.attention` "flash1"): llm-foundry's
# `attn_impl: triton` (its Triton port of FlashAttention-1) and the flash-attn 1.x package.
FLASH1_ATTENTION_STACKS = ("triton flash attention", "flash-attn 1")
# Stacks whose loss is one fused kernel over bf16 logits (read, then the gradient written in
# place): flash-attn's xentropy CrossEntropyLoss, MPT's default loss_fn "fused_crossentropy".
FUSED_LOSS_STACKS = ("fused cross-entropy",)
# Stacks whose AdamW runs as one fused kernel: torchtune's recipe configs set `fused: True` on
# torch.optim.AdamW (its 70B offload row says "CPU offload with fused optimizer"); torchtitan's
# `optimizer.implementation` defaults to "fused". Everything else gets torch's default, foreach.
FUSED_OPTIMIZER_STACKS = ("torchtune", "torchtitan")
# source → the gpus.csv row of the hardware the source itself describes, where the row's `gpu`
# column names the nearest catalogue part. torchtitan-2024-12: "Each H100 GPU is equipped with
# 96GB HBM2e with 2.4 TB/sec peak memory bandwidth ... We used the default 500W power limit";
# "the actual peak TFLOPs number is between SXM and NVL" (benchmarks/llama3_h100_202412_torchtitan.md).
# torchtitan-2025-06-asynctp: the same Grand Teton hosts, "96GB HBM2e with 2.4 TB/sec", "the
# default 500W power limit" (benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md).
HARDWARE_AS_STATED: dict[str, str] = {
    "torchtitan-2024-12": "H100-96GB-SXM",
    "torchtitan-2025-06-asynctp": "H100-96GB-SXM",
}
# "batches padded to the longest sample (max 768)": the notes' statement of a padded dataset
PADDED_MAX = re.compile(r"padded to the longest sample \(max (\d+)\)")
# source → the bucket factor of its length-grouped batching, where the source's own training loop
# sorts samples by length before batching (the rows' notes state only "padded to the longest
# sample"). peft-method-comparison: method_comparison/MetaMathQA/run.py iterates with
# `BucketIterator(ds_train, batch_size=batch_size, bucket_factor=BUCKET_FACTOR, …)`,
# `BUCKET_FACTOR = 20`, and utils.BucketIterator "yields batches … grouped in buckets by sequence
# length": each run of batch_size × 20 samples is sorted by length, then cut into batches
# (huggingface/peft @5d602fdb; the same code since the suite's first commit, 41921013, 2025-03-27).
LENGTH_BUCKETED_SOURCES: dict[str, int] = {"peft-method-comparison": 20}
# sources whose LoRA rows trained fp32 adapters over a bf16 base, where the rows' `precision`
# says only "bf16-pure" (the base's dtype). peft-method-comparison: every results JSON's
# run_info.train_config has "dtype": "bfloat16", "use_amp": false, "autocast_adapter_dtype": true,
# and utils.get_model passes it to get_peft_model, which then casts the adapters to float32
# (huggingface/peft @5d602fdb); no autocast, so each adapter runs in fp32 (finetune.time
# FP32_ADAPTER_*). That is this model's bf16-mixed LoRA (fp32 adapters and AdamW states) with
# mixed_precision "none" (bf16 modules, no autocast).
FP32_ADAPTER_SOURCES = frozenset({"peft-method-comparison"})
# Not read as padded, on purpose: torchtune-readme-2024-07 (the table of pytorch/torchtune#955,
# 2024-05-09, unchanged at 0057fe7c) keeps its stated "Seq Length" as every sequence's length.
# Its recipe configs load unpacked alpaca (recipes/configs/llama2: alpaca_cleaned_dataset in
# 7B_qlora_single_device, 7B_lora_single_device, 7B_lora; alpaca_dataset in 7B_full_low_memory,
# 7B_full, 70B_lora; packing landed after the table, #875 2024-05-14), utils.padded_collate pads
# "to the longest sequence length in the batch", and the recipes count input_ids.numel() per rank.
# Mean tokens per templated sample under the Llama-2 tokenizer: alpaca ≈ 128 (Wang et al. 2023,
# arXiv 2306.04751, Table 1 "Alpaca … 27.8 | 64.6" LLaMA tokens, less their random templates, plus
# torchtune's AlpacaInstructTemplate, BOS and EOS); alpaca-cleaned ≈ 225, longest ≈ 1,585
# (gururise/AlpacaDataCleaned @791174f6 assets/prompt_length_distribution.png read column by
# column; its outputs were replaced by GPT-4-LLM's on 2023-04-08). Batches of 4 would then pad to
# ≈ 267 and ≈ 467 tokens (`padded_batch_length`). The table's own figures rule that out for rows
# that move most: 702 tok/s on one RTX 4090 (7B full, bnb PagedAdamW with 8 B/param of states,
# ≈ 54 GB, against 24 GB) would be a 1.5 s step that pages ≥ 30 GB each way over PCIe; 1,388
# tok/s/GPU on 4× RTX 4090 FSDP a 0.77 s step that gathers 7B bf16 weights twice through the host;
# its peak memory rose from 14.97 GB (config defaults, the README before #955) to 24.1 GB. Scored
# that way T11 / T12 / T13 fall to −36 / −72 / −66 %. Yet 26.4 GB per GPU for 70B LoRA cannot hold
# 4 × 4096 checkpointed layer inputs (21.5 GB) besides the 17 GB weight shard: no one reading
# fits every row of that table.
# "LoRA r8 on q,v" / "LoRA r32 on q_proj,v_proj": the notes name the adapted projections where
# the `lora_targets` column can only say "attention"
QV_ONLY = re.compile(r"\bq(?:_proj)?,\s*v(?:_proj)?\b")
# "packed documents attended apart (mean 446.5 tokens)": the notes' statement that the packer kept
# each document's attention to itself (FlashAttention varlen), with the mean document length
NO_SEQUENCE_PARALLEL = re.compile(r"without sequence parallel")
DOCUMENTS = re.compile(r"packed documents attended apart \(mean ([0-9]+(?:\.[0-9]+)?) tokens\)")


@dataclass(frozen=True)
class Case:
    case_id: str
    setup: str
    measured_tokens_per_s: float
    method: str = ""
    gpu_name: str = ""
    hardware_class: str = ""
    model: ModelSpec | None = None
    job: Job | None = None
    gpu: Accelerator | None = None
    n_gpus: int = 1
    gpus_per_node: int = 1
    intra_node_gbps: float | None = None
    inter_node_gbps: float | None = None
    skip_reason: str | None = None


def load_gpus(path: Path | None = None) -> dict[str, dict[str, str]]:
    with (path or SEEDS_DIR / "gpus.csv").open(newline="", encoding="utf-8") as f:
        return {row["gpu_name"]: row for row in csv.DictReader(f)}


def hardware_class(spec: dict[str, str] | None) -> str:
    """consumer: GeForce cards; workstation: the professional RTX / Quadro boards; datacenter: the
    rest (A100, H100, L40S, MI300X …), from gpus.csv's `model` column."""
    model = (spec or {}).get("model", "")
    if model.startswith("GeForce"):
        return "consumer"
    if model.startswith(("RTX", "Quadro")):
        return "workstation"
    return "datacenter"


def bucketed_padded_length(mean_len: float, max_len: float, micro_batch: int, bucket_factor: int) -> float:
    """Mean padded length of micro-batches cut from length-sorted buckets.

    A bucket holds n = micro_batch × bucket_factor samples drawn from the same maximum-entropy
    length law as `padded_batch_length` (truncated exponential of the stated mean and maximum);
    sorted longest first, batch j holds order statistics jb+1 … jb+b and is padded to the first
    of them. The mean padded length is the mean over the bucket's batches of E[X_(jb+1:n)], each
    E[X_(r:n)] = ∫₀¹ F⁻¹(u) · Beta(u; n−r+1, r) du (Simpson's rule over u).
    """
    if not (0 < mean_len < max_len) or micro_batch < 1 or bucket_factor < 1:
        raise ValueError(
            f"need 0 < mean_len < max_len, micro_batch ≥ 1, bucket_factor ≥ 1, got "
            f"{mean_len}, {max_len}, {micro_batch}, {bucket_factor}"
        )
    lam = _truncated_exponential_rate(mean_len, max_len)
    n = micro_batch * bucket_factor

    def quantile(u: float) -> float:
        if abs(lam * max_len) < 1e-9:
            return u * max_len
        return -math.log1p(u * math.expm1(-lam * max_len)) / lam

    steps = 2000  # Simpson's rule on a smooth integrand: exact to well under a token
    h = 1.0 / steps
    grid = [i * h for i in range(steps + 1)]
    weights = [1 if i in (0, steps) else (4 if i % 2 else 2) for i in range(steps + 1)]
    lengths = [quantile(u) for u in grid]
    padded = 0.0
    for j in range(bucket_factor):
        k = n - j * micro_batch  # ascending rank of the batch's longest sample
        log_norm = math.lgamma(n + 1) - math.lgamma(k) - math.lgamma(n - k + 1)
        expected = 0.0
        for u, w, x in zip(grid, weights, lengths, strict=True):
            if 0.0 < u < 1.0:
                density = math.exp(log_norm + (k - 1) * math.log(u) + (n - k) * math.log1p(-u))
            else:  # the density's end values: non-zero only at u = 1 with k = n (or u = 0, k = 1)
                density = float((u == 1.0 and k == n) or (u == 0.0 and k == 1)) * math.exp(log_norm)
            expected += w * x * density
        padded += expected * h / 3
    return padded / bucket_factor


def _job(**knobs: object) -> Job:
    """A Job from the knobs this checkout's Job has (an older model lacks the newer ones)."""
    known = {f.name for f in fields(Job)}
    return Job(**{k: v for k, v in knobs.items() if k in known})  # type: ignore[arg-type]


def _accelerator(**knobs: object) -> Accelerator:
    """An Accelerator from the knobs this checkout's has (an older model lacks `sm_count`)."""
    known = {f.name for f in fields(Accelerator)}
    return Accelerator(**{k: v for k, v in knobs.items() if k in known})  # type: ignore[arg-type]


def _float(cell: str | None) -> float | None:
    return float(cell) if cell else None


def ran_compiled(row: dict[str, str]) -> bool:
    """Whether the measured run used torch.compile, as its source says: torchtune's README tables
    mark compiled rows ("compile on", "Uses torch compile" on the row's footnote); "no compile"
    says the opposite; a source that does not say ran eager (PyTorch's default)."""
    said = f"{row['framework']} {row['quote']}".lower()
    # a results file's own `"compile": false` ("compile false" once transcribed) says eager too
    off = re.search(r"no compile|compile\W*false", said)
    return off is None and "compile" in said


def attention_of(framework: str) -> str:
    """The attention kernel a row's stack runs, from its framework words (lower case)."""
    if any(k in framework for k in NATIVE_ATTENTION_STACKS):
        return "native"
    if any(k in framework for k in FLASH1_ATTENTION_STACKS):
        return "flash1"
    return "flash"


def loss_of(framework: str) -> str:
    """The loss path a row's stack runs, from its framework words (lower case)."""
    if any(k in framework for k in FUSED_LOSS_STACKS):
        return "fused"
    if "compiled loss" in framework:
        return "compiled"
    return "chunked" if "chunked ce" in framework else "standard"


@functools.cache
def _config_model(path: Path) -> ModelSpec:
    """A config.json under benchmarks/data, read and parsed once however many rows name it."""
    return model_from_hf_config(json.loads(path.read_text(encoding="utf-8")), path.stem)


def row_model(row: dict[str, str], models: dict[str, ModelSpec]) -> ModelSpec:
    """The row's model: a config.json this repository keeps under benchmarks/data (`config` ending
    in .json, for shapes no hub model has: llm-foundry's benchmark MPTs), else the seed whose id
    matches `config` or `model`."""
    config = row.get("config") or ""
    if config.endswith(".json"):
        path = DATA_DIR / config
        if not path.is_file():
            raise LookupError(f"{row['id']}: config {config} is not under {DATA_DIR}")
        return _config_model(path)
    spec, _ = resolve_model(config or row["model"], None, models)
    return spec


def row_to_case(row: dict[str, str], models: dict[str, ModelSpec], gpus: dict[str, dict[str, str]]) -> Case:
    """One calibration row → (model, job, hardware), by the row's own columns."""
    gpu_name = HARDWARE_AS_STATED.get(row["source"], row["gpu"])
    copies = row.get("train_embeddings") or "off"
    method = row["method"] if copies == "off" else f"{row['method']}+{copies}"
    setup = (
        f"{row['model']} {method} s={row['seq_len']} b={row['micro_batch']} "
        f"{row['gpus']}× {gpu_name} {row['sharding']}"
    )
    measured = float(row["tokens_per_s"])
    spec = gpus.get(gpu_name)
    base = Case(
        row["id"],
        setup,
        measured,
        method=row["method"],
        gpu_name=gpu_name,
        hardware_class=hardware_class(spec),
    )
    if row["score"].strip().lower() == "no":
        return Case(**{**base.__dict__, "skip_reason": row["exclusion_reason"] or "score=no"})
    if spec is None or not spec.get("bf16_tflops"):
        return Case(**{**base.__dict__, "skip_reason": f"no dense bf16 TFLOPS for {gpu_name} in gpus.csv"})
    try:
        model = row_model(row, models)
    except LookupError as exc:
        return Case(**{**base.__dict__, "skip_reason": str(exc)})
    framework = row["framework"].lower()
    gc = row["grad_checkpointing"].strip().lower()
    known = ("adamw", "adamw8bit", "paged-adamw", "paged-adamw8bit")
    optimizer = row["optimizer"] if row["optimizer"] in known else "adamw"
    seq_len, micro_batch = int(row["seq_len"]), int(row["micro_batch"])
    padding_efficiency = 1.0
    padded = PADDED_MAX.search(row["notes"])
    if padded:
        # seq_len is the mean real length; the GPU computes the padded batch
        max_len = int(padded.group(1))
        bucket_factor = LENGTH_BUCKETED_SOURCES.get(row["source"])
        padded_len = (
            bucketed_padded_length(seq_len, max_len, micro_batch, bucket_factor)
            if bucket_factor
            else padded_batch_length(seq_len, max_len, micro_batch)
        )
        padding_efficiency = seq_len / padded_len
        seq_len = round(padded_len)
    documents = DOCUMENTS.search(row["notes"])
    precision, mixed_precision = row["precision"], "fsdp"
    if row["source"] in FP32_ADAPTER_SOURCES and row["method"] != "full":
        precision, mixed_precision = "bf16-mixed", "none"
    job = _job(
        method=row["method"],
        precision=precision,
        mixed_precision=mixed_precision,
        optimizer=optimizer,
        seq_len=seq_len,
        micro_batch=micro_batch,
        padding_efficiency=min(1.0, padding_efficiency),
        grad_checkpointing=gc in ("yes", "selective"),
        # the rows' "selective" is torchtitan's per-op policy (its train_configs: selective_ac_option 'op')
        checkpoint_policy="selective" if gc == "selective" else "full",
        optimizer_impl="fused" if framework.startswith(FUSED_OPTIMIZER_STACKS) else "foreach",
        lora_rank=int(row["lora_rank"] or 16),
        lora_targets=(
            "qv"
            if row["lora_targets"] == "attention" and QV_ONLY.search(row["notes"])
            else (row["lora_targets"] or "all-linear")
        ),
        loss=loss_of(framework),
        sharding=row["sharding"] or "none",
        # a stack that names DeepSpeed shards its zero3 rows itself (axolotl's zero3_bf16.json)
        zero3_impl="deepspeed" if "deepspeed" in framework else "fsdp",
        offload=row["offload"].strip().lower() == "yes",
        compiled=ran_compiled(row),
        kernels="fused" if any(k in framework for k in FUSED_KERNEL_STACKS) else "plain",
        attention=attention_of(framework),
        # a GPTQ-int4 base is named in the framework or notes ("GPTQ", "Int4 GPTQ checkpoint")
        quant="gptq" if "gptq" in f"{framework} {row['notes']}".lower() else "nf4-dq",
        doc_len=float(documents.group(1)) if documents else None,
        # this repo's rows add a tensor_parallel column (empty: 1); the shared rows have none
        tensor_parallel=int(row.get("tensor_parallel") or 1),
        sequence_parallel=NO_SEQUENCE_PARALLEL.search(framework) is None,
        # this repo's rows may state the micro-steps per optimizer step (empty: 1), the LoRA
        # dropout (empty: the recipe default) and a trained embedding / head copy (empty: off)
        grad_accumulation=int(row.get("grad_accumulation") or 1),
        lora_dropout=_float(row.get("lora_dropout")),
        train_embeddings=row.get("train_embeddings") or "off",
    )
    link = row["intra_link"].strip().lower()
    gpu = _accelerator(
        tflops=float(spec["bf16_tflops"]),
        memory_bandwidth_gbps=_float(spec.get("memory_bandwidth_gbps")),
        architecture=spec.get("architecture"),
        vram_gb=_float(spec.get("vram_gb")),
        # intra_link "host": the source says its GPUs had no peer-to-peer (staged through host memory)
        p2p=has_p2p(spec.get("model")) and link != "host",
        pcie_gen=int(spec["pcie_gen"]) if spec.get("pcie_gen") else None,
        sm_count=int(spec["sm_count"]) if spec.get("sm_count") else None,
        half_rate_accumulate=spec.get("half_rate_accumulate") == "true",
        tensor_flops_per_sm_clock=_float(spec.get("tensor_flops_per_sm_clock")),
        matmul_share=matmul_share(_float(spec.get("matmul_tflops")), _float(spec.get("bf16_tflops"))),
    )
    nvlink = _float(spec.get("nvlink_gbps")) or 0.0
    # seeds state NVLink bidirectionally (GB/s); a ring sees one direction; ×8 for Gb/s
    intra = nvlink / 2 * 8 if link == "nvlink" and nvlink else None
    if link in ("pcie", "host"):
        # GPUs with P2P talk over their PCIe x16 link (GeForce stage through the host instead)
        intra = PCIE_X16_GBYTES_PER_S.get(gpu.pcie_gen or 4, PCIE_X16_GBYTES_PER_S[4]) * 8
    return Case(
        **{
            **base.__dict__,
            "model": model,
            "job": job,
            "gpu": gpu,
            "n_gpus": int(row["gpus"]),
            "gpus_per_node": int(row["gpus_per_node"] or row["gpus"]),
            "intra_node_gbps": intra,
            "inter_node_gbps": _float(row["inter_node_gbps"]),
        }
    )


@dataclass(frozen=True)
class Result:
    case: Case
    predicted_tokens_per_s: float | None
    error_pct: float | None


def predict(case: Case) -> float:
    assert case.model is not None and case.job is not None and case.gpu is not None
    t = estimate_time(
        case.model,
        case.job,
        1e9,
        case.n_gpus,
        case.gpus_per_node,
        case.gpu.tflops,
        case.intra_node_gbps,
        case.inter_node_gbps,
        gpu=case.gpu,
    )
    return t.tokens_per_s


def evaluate(csv_path: Path) -> list[Result]:
    models, gpus = load_models(), load_gpus()
    with csv_path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    results = []
    for row in rows:
        case = row_to_case(row, models, gpus)
        if case.skip_reason:
            results.append(Result(case, None, None))
            continue
        predicted = predict(case)
        error = (predicted - case.measured_tokens_per_s) / case.measured_tokens_per_s * 100
        results.append(Result(case, predicted, error))
    return results


def summary(results: list[Result]) -> dict[str, float]:
    errors = [r.error_pct for r in results if r.error_pct is not None]
    if not errors:
        return {
            "cases": 0.0,
            "within_share": math.nan,
            "median_abs_error_pct": math.nan,
            "median_bias_pct": math.nan,
        }
    return {
        "cases": float(len(errors)),
        "within_share": sum(abs(e) <= TOLERANCE_PCT for e in errors) / len(errors),
        "median_abs_error_pct": statistics.median(abs(e) for e in errors),
        "median_bias_pct": statistics.median(errors),
    }


def _summary_line(label: str, results: list[Result]) -> str:
    s = summary(results)
    return (
        f"| {label} | {s['cases']:.0f} | {s['within_share']:.0%} | {s['median_abs_error_pct']:.1f} "
        f"| {s['median_bias_pct']:+.1f} |"
    )


def report(label: str, results: list[Result]) -> None:
    """Print one set's per-row table and its summary by method, hardware class and GPU."""
    print(f"## {label}\n")
    print("| id | setup | measured tok/s | predicted tok/s | error % |")
    print("|---|---|---|---|---|")
    for r in results:
        c = r.case
        if r.predicted_tokens_per_s is None:
            print(
                f"| {c.case_id} | {c.setup} | {c.measured_tokens_per_s:,.0f} | excluded: {c.skip_reason} | |"
            )
            continue
        print(
            f"| {c.case_id} | {c.setup} | {c.measured_tokens_per_s:,.0f} "
            f"| {r.predicted_tokens_per_s:,.0f} | {r.error_pct:+.1f} |"
        )
    scored = [r for r in results if r.error_pct is not None]
    print()
    print(f"| group | cases | within ±{TOLERANCE_PCT:.0f} % | median abs error % | median bias % |")
    print("|---|---|---|---|---|")
    print(_summary_line("all", scored))
    for key, prefix in (("method", "method"), ("hardware_class", "class"), ("gpu_name", "gpu")):
        groups: dict[str, list[Result]] = defaultdict(list)
        for r in scored:
            groups[getattr(r.case, key)].append(r)
        for name in sorted(groups):
            print(_summary_line(f"{prefix} {name}", groups[name]))
    excluded = len(results) - len(scored)
    print(f"\n{len(scored)} scored, {excluded} excluded (score=no or not expressible)\n")
    report_pairs(scored)


@dataclass(frozen=True)
class Pair:
    """One job measured on two GPUs by one source: what the measurements say of b against a, and
    what the model says."""

    setup: str
    gpu_a: str
    gpu_b: str
    measured_ratio: float
    model_ratio: float

    @property
    def model_over_measured(self) -> float:
        """Above 1: the model rates GPU b faster against a than the runs measured."""
        return self.model_ratio / self.measured_ratio


def pairs(results: list[Result]) -> list[Pair]:
    """Scored rows that differ only in their GPU (same model, job, GPU count and node shape), one
    Pair per two GPUs, a before b by name. The same code on two parts cancels everything the two
    runs share (stack, kernels, data), so the quotient isolates how the model rates one part
    against the other."""
    groups: dict[tuple[object, ...], dict[str, Result]] = defaultdict(dict)
    for r in results:
        c = r.case
        if r.predicted_tokens_per_s is None or c.model is None:
            continue
        key = (c.model.model_id, c.job, c.n_gpus, c.gpus_per_node, c.inter_node_gbps)
        groups[key].setdefault(c.gpu_name, r)
    out = []
    for by_gpu in groups.values():
        names = sorted(by_gpu)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                ra, rb = by_gpu[a], by_gpu[b]
                assert ra.predicted_tokens_per_s is not None and rb.predicted_tokens_per_s is not None
                out.append(
                    Pair(
                        setup=ra.case.setup.replace(a, "·"),
                        gpu_a=a,
                        gpu_b=b,
                        measured_ratio=rb.case.measured_tokens_per_s / ra.case.measured_tokens_per_s,
                        model_ratio=rb.predicted_tokens_per_s / ra.predicted_tokens_per_s,
                    )
                )
    return out


def report_pairs(results: list[Result]) -> None:
    """Print the set's side-by-side pairs and, per two GPUs, the median model/measured quotient."""
    found = pairs(results)
    if not found:
        return
    print("### side by side: one job on two GPUs\n")
    print("| setup | b / a | measured | model | model / measured |")
    print("|---|---|---|---|---|")
    for p in found:
        print(
            f"| {p.setup} | {p.gpu_b} / {p.gpu_a} | {p.measured_ratio:.2f} | {p.model_ratio:.2f} "
            f"| {p.model_over_measured:.2f} |"
        )
    by_parts: dict[tuple[str, str], list[float]] = defaultdict(list)
    for p in found:
        by_parts[(p.gpu_a, p.gpu_b)].append(p.model_over_measured)
    print("\n| b / a | pairs | median model / measured | range |")
    print("|---|---|---|---|")
    for (a, b), quotients in sorted(by_parts.items()):
        print(
            f"| {b} / {a} | {len(quotients)} | {statistics.median(quotients):.2f} "
            f"| {min(quotients):.2f}–{max(quotients):.2f} |"
        )
    print()


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv[1:]] or [DEFAULT_CSV, EXTRA_CSV, FOUNDRY_CSV, QWEN_CSV]
    for csv_path in paths:
        if not csv_path.exists():
            print(f"calibration data absent ({csv_path}); nothing to score\n")
            continue
        report(str(csv_path.name), evaluate(csv_path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
