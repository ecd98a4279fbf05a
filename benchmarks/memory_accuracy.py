"""Predicted vs published measured peak memory per GPU.

    uv run python benchmarks/memory_accuracy.py [CSV ...]
    # without CSV: ../shared/data/measured_memory_calibration.csv and benchmarks/data/memory_extra.csv
    # (rows this repo transcribed itself, each with its source and a quote), scored as separate sets

Each row of the CSV (model, params_b, method, precision, seq_len, micro_batch, grad_checkpointing,
optimizer, measured_peak_gb, hardware, source) is read into a ModelSpec, a Job and a GPU count by
the generic rules in `row_to_case`, which read the row's own words (no per-row constants). A row
the model cannot express (no sequence length, fp32 training, activation offloading, optimizer
fused into backward, samples shorter than the stated length) is listed with the reason and left
out of the summary. Measured values whose source says GiB are converted to GB (1e9 bytes).
Each set is summarized per method (full / LoRA / QLoRA) and per hardware class (datacenter /
workstation / consumer, `hardware_class`), so that no class is bought with another.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from finetune import (
    Job,
    ModelSpec,
    memory_per_gpu,
)
from warehouse.seed_models import load_models

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "data" / "measured_memory_calibration.csv"
EXTRA_CSV = Path(__file__).resolve().parent / "data" / "memory_extra.csv"
# Qwen's own profile (QwenLM/Qwen README @e8e1596): Qwen-1 1.8B/7B/14B LoRA, LoRA with trained
# embedding and head, GPTQ-Int4 Q-LoRA on one A100 at 256 to 8,192 tokens
QWEN_CSV = Path(__file__).resolve().parent / "data" / "memory_qwen.csv"
# GeForce cards are consumer; NVIDIA's professional RTX line (RTX A6000, RTX 6000 Ada, RTX PRO) and
# Radeon PRO are workstation; everything else named (A100, H100, L40S, A10G, MI300X …) is datacenter.
WORKSTATION = re.compile(r"rtx\s*(a\d|\d000|pro)|a[456]000|radeon pro|quadro", re.IGNORECASE)
CONSUMER = re.compile(r"geforce|rtx\s*\d0\d0|gtx|radeon rx", re.IGNORECASE)
GIB_IN_GB = 2**30 / 1e9


@dataclass(frozen=True)
class Case:
    setup: str
    measured_gb: float
    model: ModelSpec | None = None
    job: Job | None = None
    n_gpus: int = 1
    skip_reason: str | None = None
    note: str = ""
    kind: str = "device"
    method: str = ""
    hardware: str = ""


def _norm(name: str) -> str:
    name = name.split("/")[-1].lower().replace("_", ".")
    name = re.sub(r"^(meta-)", "", name)
    return re.sub(r"-(hf|instruct|chat|base|it|pt|v0\.\d|v\d\.\d)$", "", name)


def resolve_model(name: str, params_b: float | None, models: dict[str, ModelSpec]) -> tuple[ModelSpec, str]:
    """The seed whose normalized id matches `name`; else the seed closest in size (flagged)."""
    by_norm: dict[str, ModelSpec] = {}
    for spec in models.values():
        key = _norm(spec.model_id)
        by_norm.setdefault(key, spec)
        by_norm.setdefault(_norm(key), spec)
    key = _norm(name)
    for candidate in (key, _norm(key)):
        if candidate in by_norm:
            return by_norm[candidate], ""
    if params_b is None:
        raise LookupError(f"model {name!r} is not in llm_models.csv and the row has no params_b")
    dense = [m for m in models.values() if not m.is_moe]
    nearest = min(dense, key=lambda m: abs(math.log(m.params / (params_b * 1e9))))
    return nearest, f"arch of {nearest.model_id}"


def hardware_class(hardware: str) -> str:
    """datacenter / workstation / consumer from a row's hardware words; unstated when none."""
    if WORKSTATION.search(hardware):
        return "workstation"
    if CONSUMER.search(hardware):
        return "consumer"
    return "unstated" if "unstated" in hardware.lower() else "datacenter"


def _has(text: str, *words: str) -> bool:
    return any(w in text for w in words)


def row_to_case(row: dict[str, str], models: dict[str, ModelSpec]) -> Case:
    """Map one calibration row to (model, job, n_gpus) with generic text rules."""
    method_raw = row["method"].lower()
    text = " ".join(
        row[k] for k in ("method", "precision", "grad_checkpointing", "optimizer", "source", "hardware")
    ).lower()
    setup = f"{row['model']} | {row['method']} | s={row['seq_len'] or '?'} b={row['micro_batch'] or '?'}"
    measured = float(row["measured_peak_gb"])
    if re.search(r"\bgib\b", row["source"].lower()):
        measured *= GIB_IN_GB

    def skip(reason: str) -> Case:
        return Case(setup, measured, skip_reason=reason)

    if not row["seq_len"] or not row["micro_batch"]:
        return skip("no sequence length / micro-batch published")
    if _has(text, "fp32", "activation offload"):
        return skip("fp32 training or activation offloading is not modelled")
    if _has(text, "optimizer_in_bwd", "optimizer in backward"):
        return skip("optimizer step fused into backward is not modelled")
    if _has(text, "samples shorter than"):
        return skip("actual sample lengths below the stated max are unknown")
    if _has(method_raw, "freeze"):
        return skip("freeze-tuning is not modelled")

    if "qlora" in method_raw or "q-lora" in method_raw:
        method = "qlora"
    elif "lora" in method_raw:
        method = "lora"
    elif "full" in method_raw:
        method = "full"
    else:
        return skip(f"method {row['method']!r} not recognised")

    n_match = re.match(r"\s*(\d+)\s*x", row["hardware"].lower())
    n_gpus = int(n_match.group(1)) if n_match else 1
    if _has(method_raw, "zero3", "zero-3", "fsdp"):
        sharding = "zero3"
    elif _has(method_raw, "zero2", "zero-2"):
        sharding = "zero2"
    else:
        sharding = "none"
    offload = sharding != "none" and _has(text, "cpu offload", "cpu_offload") and "no offload" not in text
    # who shards a zero3 row: the method's own word first, else the only framework the row names;
    # FSDP otherwise (torchtune, Answer.AI's fsdp_qlora)
    if _has(method_raw, "fsdp"):
        zero3_impl = "fsdp"
    elif "deepspeed" in method_raw or ("deepspeed" in text and "fsdp" not in text):
        zero3_impl = "deepspeed"
    else:
        zero3_impl = "fsdp"

    # AnswerDotAI/fsdp_qlora's train.py, where a row states nothing else: its `fsdp_qlora()`
    # defaults (lora_rank 64, lora_target_modules "all" = q,k,v,o,gate,up,down, lora_dropout 0.1,
    # precision "bf16", which sets no FSDP MixedPrecision policy: every parameter, gradient and
    # AdamW state is bf16), and a loop that keeps `output` until after backward
    fsdp_qlora = "fsdp_qlora" in text
    # torchtune and litgpt `bf16-true` keep every tensor in bf16; HF/DeepSpeed `bf16` is mixed.
    pure = _has(text, "pure", "bf16-true", "torchtune", "bf16 states") or (
        fsdp_qlora and "autocast" not in text
    )
    precision = "bf16-pure" if pure else "bf16-mixed"
    optimizer = "adamw"
    if _has(text, "8bit", "8-bit"):
        optimizer = "paged-adamw8bit" if "paged" in text else "adamw8bit"

    gc_raw = row["grad_checkpointing"].strip().lower()
    # "unstated" → on: LLaMA-Factory, axolotl and TRL examples enable it by default
    grad_ckpt = not gc_raw.startswith("no")
    # torchtitan's per-op policy keeps matmul and attention outputs ("selective"); else full
    policy = "selective" if "selective" in gc_raw else "full"
    rank_match = re.search(r"\br\s*=?\s*(\d+)", text)
    rank = int(rank_match.group(1)) if rank_match else (64 if fsdp_qlora else 8)
    all_linear = _has(text, "all-linear", "all linear", "w1", "gate_proj", "mlp") or fsdp_qlora
    fused = bool(re.search(r"\bcce\b|liger|cut.cross", text))
    chunked = "chunked" in text
    # the standard loss under torch.compile (torchtitan since #1033), as the row's source says
    compiled_loss = "compiled loss" in text
    # torchtune's configs default to CEWithChunkedOutputLoss from v0.3 (2024-09)
    dated = re.search(r"\((20\d\d)-(\d\d)", row["source"])
    if "torchtune" in text and dated and (int(dated.group(1)), int(dated.group(2))) >= (2024, 9):
        chunked = True
    # which total the source reports: max_memory_allocated ("active", "allocated"),
    # max_memory_reserved ("reserved"), or the device total (nvidia-smi, unstated)
    source = row["source"].lower()
    kind = (
        "reserved"
        if "reserved" in source
        else ("allocated" if _has(source, "active", "allocated") else "device")
    )
    attention = "eager" if "eager" in text else "flash"
    # bf16 modules unless the row says torch.autocast over fp32 ones (fsdp_qlora's *_autocast)
    mixed = "autocast" if "autocast" in text and not pure else "fsdp"
    # Qwen-1's remote code computes its loss on 16-bit logits; only autocast would upcast them, and
    # Qwen's scripts train fp16 (Q-LoRA) and ZeRO-3 through DeepSpeed, which casts the module
    # instead (finetune_qlora_single_gpu.sh: --fp16 True --deepspeed finetune/ds_config_zero2.json)
    qwen1 = re.match(r"(qwen/)?qwen-\d", row["model"].lower()) is not None
    logits_fp32 = not (qwen1 and (_has(row["precision"].lower(), "fp16") or "deepspeed" in method_raw))
    # Qwen-1's DeepSpeed configs name DeepSpeed's own AdamW (finetune/ds_config_zero3.json:
    # "optimizer": {"type": "AdamW"}), which DeepSpeed builds as FusedAdam, updating in place
    # (engine._configure_basic_optimizer without torch_adam); HF Trainer's default is foreach
    fused_adam = qwen1 and sharding != "none" and zero3_impl == "deepspeed"
    # Qwen-1's Q-LoRA script runs DeepSpeed ZeRO-2 on its one GPU (finetune_qlora_single_gpu.sh:
    # --deepspeed finetune/ds_config_zero2.json), whose reduce_bucket_size 2e8 with overlap_comm
    # gives each backward two reduce buffers of 2e8 elements
    qwen1_qlora = qwen1 and method == "qlora"
    if qwen1_qlora:
        sharding = "zero2"
    # Qwen's "LoRA (emb)": finetune.py trains copies of the embedding and the head
    # (modules_to_save=["wte", "lm_head"]) beside the adapters
    copies = "embed+head" if "(emb)" in method_raw else "off"
    dropout_match = re.search(r"dropout\s*=?\s*(0?\.\d+|0)\b", text)
    dropout = float(dropout_match.group(1)) if dropout_match else (0.1 if fsdp_qlora else None)

    params_b = float(row["params_b"]) if row.get("params_b") else None
    try:
        model, note = resolve_model(row["model"], params_b, models)
    except LookupError as exc:
        return skip(str(exc))
    job = Job(
        method=method,  # type: ignore[arg-type]
        precision=precision,  # type: ignore[arg-type]
        optimizer=optimizer,  # type: ignore[arg-type]
        optimizer_impl="fused" if fused_adam else "foreach",
        seq_len=int(float(row["seq_len"])),
        micro_batch=int(float(row["micro_batch"])),
        grad_checkpointing=grad_ckpt,
        checkpoint_policy=policy,  # type: ignore[arg-type]
        attention=attention,  # type: ignore[arg-type]
        lora_rank=rank,
        lora_targets="all-linear" if all_linear else "attention",
        loss="fused" if fused else ("chunked" if chunked else ("compiled" if compiled_loss else "standard")),
        quant="gptq" if "gptq" in text else "nf4-dq",
        sharding=sharding,  # type: ignore[arg-type]
        offload=offload,
        zero3_impl=zero3_impl,  # type: ignore[arg-type]
        mixed_precision=mixed,  # type: ignore[arg-type]
        logits_fp32=logits_fp32,
        lora_dropout=dropout if method != "full" else None,
        keeps_outputs=fsdp_qlora,
        # fsdp_qlora's "DDP" is FSDP NO_SHARD (`--sharding_strategy ddp`): no bucket copy
        ddp_bucket_view=fsdp_qlora,
        # Qwen's ZeRO-2 config: two buffers of 2e8 (above); elsewhere the stage's common configs
        # (its ZeRO-3 config says "auto": hidden_size²)
        ds_reduce_buffer_elements=2 * 2e8 if qwen1_qlora else None,
        train_embeddings=copies if method != "full" else "off",  # type: ignore[arg-type]
    )
    return Case(
        setup,
        measured,
        model,
        job,
        n_gpus,
        note=note,
        kind=kind,
        method=method,
        hardware=hardware_class(row["hardware"]),
    )


@dataclass(frozen=True)
class Result:
    case: Case
    predicted_gb: float | None
    error_pct: float | None
    # which phase sets the predicted peak: load, step or optimizer (MemoryBreakdown.peak_phase)
    phase: str = ""


def evaluate(csv_path: Path, models: dict[str, ModelSpec] | None = None) -> list[Result]:
    models = models or load_models()
    with csv_path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    results = []
    for row in rows:
        case = row_to_case(row, models)
        if case.skip_reason or case.model is None or case.job is None:
            results.append(Result(case, None, None))
            continue
        b = memory_per_gpu(case.model, case.job, case.n_gpus)
        predicted = {"allocated": b.allocated_gb, "reserved": b.reserved_gb}.get(case.kind, b.total_gb)
        error = (predicted - case.measured_gb) / case.measured_gb * 100
        results.append(Result(case, predicted, error, b.peak_phase))
    return results


def summary(results: list[Result]) -> dict[str, float]:
    errors = [abs(r.error_pct) for r in results if r.error_pct is not None]
    return {
        "points": float(len(results)),
        "expressible": float(len(errors)),
        "within_20_share": sum(e <= 20 for e in errors) / len(errors) if errors else math.nan,
        "median_abs_error_pct": statistics.median(errors) if errors else math.nan,
        "mean_error_pct": statistics.fmean(r.error_pct for r in results if r.error_pct is not None)
        if errors
        else math.nan,
    }


def _group_line(label: str, results: list[Result]) -> str:
    errors = [r.error_pct for r in results if r.error_pct is not None]
    within = sum(abs(e) <= 20 for e in errors) / len(errors)
    return (
        f"| {label} | {len(errors)} | {within:.0%} | {statistics.median(abs(e) for e in errors):.1f} "
        f"| {statistics.median(errors):+.1f} |"
    )


def _print_set(title: str, results: list[Result]) -> None:
    print(f"## {title}")
    print()
    print("| setup | n | job | measured GB | predicted GB | error % |")
    print("|---|---|---|---|---|---|")
    for r in results:
        c = r.case
        if r.predicted_gb is None:
            print(f"| {c.setup} | | not expressible: {c.skip_reason} | {c.measured_gb:.2f} | | |")
            continue
        assert c.job is not None
        j = c.job
        impl = f"({j.zero3_impl})" if j.sharding == "zero3" else ""
        knobs = f"{j.method} {j.precision} {j.optimizer} {j.sharding}{impl}{'+off' if j.offload else ''}"
        knobs += f" gc={'on' if j.grad_checkpointing else 'off'}"
        if j.method != "full":
            knobs += f" r{j.lora_rank} {j.lora_targets}"
        if j.train_embeddings != "off":
            knobs += f" +{j.train_embeddings}"
        if j.loss != "standard":
            knobs += f" {j.loss}-ce"
        if j.mixed_precision != "fsdp":
            knobs += f" {j.mixed_precision}"
        knobs += f" [{c.kind}, {r.phase} peak]"
        if c.note:
            knobs += f" ({c.note})"
        print(
            f"| {c.setup} | {c.n_gpus} | {knobs} | {c.measured_gb:.2f} | {r.predicted_gb:.2f} "
            f"| {r.error_pct:+.1f} |"
        )
    s = summary(results)
    print()
    print(
        f"expressible {s['expressible']:.0f}/{s['points']:.0f}; "
        f"within ±20%: {s['within_20_share']:.0%}; "
        f"median |error|: {s['median_abs_error_pct']:.1f}%; mean error: {s['mean_error_pct']:+.1f}%"
    )
    scored = [r for r in results if r.error_pct is not None]
    print()
    print("| group | cases | within ±20 % | median abs error % | median bias % |")
    print("|---|---|---|---|---|")
    print(_group_line("all", scored))
    for key, label in (("method", "method"), ("hardware", "class")):
        groups: dict[str, list[Result]] = {}
        for r in scored:
            groups.setdefault(getattr(r.case, key), []).append(r)
        for name in sorted(groups):
            print(_group_line(f"{label} {name}", groups[name]))
    print()


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv[1:]] or [DEFAULT_CSV, EXTRA_CSV, QWEN_CSV]
    for csv_path in paths:
        if not csv_path.exists():
            print(f"calibration data absent ({csv_path}); nothing to score")
            continue
        _print_set(str(csv_path.name), evaluate(csv_path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
