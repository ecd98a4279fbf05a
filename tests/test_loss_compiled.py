"""The standard loss under torch.compile (`Job.loss` "compiled"), and the torchtitan memory rows
that measure it and its uncompiled twin (benchmarks/data/memory_extra.csv)."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.memory_accuracy import EXTRA_CSV, evaluate, row_to_case
from benchmarks.throughput_accuracy import loss_of
from finetune import Job, logits_bytes, memory_per_gpu
from finetune.memory import LOGITS_BYTES_PER_ELEMENT
from finetune.time import LOSS_BYTES_PER_LOGIT, step_time
from flows.job_options import JobOptions
from tests.factories import H100
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
TORCHTITAN_8B = Job(
    method="full",
    seq_len=8192,
    micro_batch=1,
    sharding="zero3",
    checkpoint_policy="selective",
)


def test_compiled_loss_keeps_the_bf16_logits_and_their_bf16_gradient() -> None:
    elements = TORCHTITAN_8B.seq_len * LLAMA_8B.vocab_size
    # fp32 copy and fp32 gradient stay in the fused kernels' registers: 2 + 2 bytes per logit
    assert logits_bytes(LLAMA_8B, replace(TORCHTITAN_8B, loss="compiled")) == pytest.approx(4 * elements)
    # between the fused loss (no logits) and the standard one (12 bytes)
    standard = logits_bytes(LLAMA_8B, TORCHTITAN_8B)
    fused = logits_bytes(LLAMA_8B, replace(TORCHTITAN_8B, loss="fused"))
    assert fused < 4 * elements < standard == pytest.approx(12 * elements)


def test_compiling_the_loss_lowers_the_peak_by_the_fp32_copies() -> None:
    standard = memory_per_gpu(LLAMA_8B, TORCHTITAN_8B, 8)
    compiled = memory_per_gpu(LLAMA_8B, replace(TORCHTITAN_8B, loss="compiled"), 8)
    # the fp32 upcast and its fp32 gradient: 12 − 4 = 8 bytes per logit
    per = LOGITS_BYTES_PER_ELEMENT["standard"] - LOGITS_BYTES_PER_ELEMENT["compiled"]
    assert per == 8
    saved = per * TORCHTITAN_8B.seq_len * LLAMA_8B.vocab_size / 1e9
    # the loss sets this job's peak: everything it drops comes off the allocated total (the reserved
    # one drops by the allocator's fragmentation share of it besides)
    assert standard.allocated_gb - compiled.allocated_gb == pytest.approx(saved, rel=0.02)
    assert standard.reserved_gb - compiled.reserved_gb > saved
    assert compiled.weights_gb == standard.weights_gb and compiled.optimizer_gb == standard.optimizer_gb


def test_compiled_loss_streams_the_logits_fewer_times() -> None:
    job = Job(method="lora", seq_len=2048, micro_batch=2)
    standard = step_time(LLAMA_8B, job, H100, 1, None, True)
    compiled = step_time(LLAMA_8B, replace(job, loss="compiled"), H100, 1, None, True)
    fused = step_time(LLAMA_8B, replace(job, loss="fused"), H100, 1, None, True)
    ratio = LOSS_BYTES_PER_LOGIT["compiled"] / LOSS_BYTES_PER_LOGIT["standard"]
    assert compiled.loss_s == pytest.approx(standard.loss_s * ratio)
    assert fused.loss_s < compiled.loss_s < standard.loss_s
    # nothing else in the step changes
    assert compiled.matmul_s == standard.matmul_s and compiled.elementwise_s == standard.elementwise_s


def test_the_cli_states_a_compiled_loss() -> None:
    job, _ = JobOptions(model="x", method="full", loss="compiled").job(sharding="zero3")
    assert job.loss == "compiled"
    # a compiled loss avoids the full fp32 logits, as the marts' chunked_ce column says
    assert job.chunked_ce


def test_benchmarks_read_the_loss_and_the_checkpoint_policy_from_the_row() -> None:
    assert loss_of("torchtitan (fsdp2, compile; compiled loss; bf16)") == "compiled"
    assert loss_of("torchtitan (fsdp2, compile, bf16)") == "standard"
    row = {
        "model": "Llama-3.1-8B", "params_b": "8.03", "method": "full FSDP", "precision": "bf16 mixed",
        "seq_len": "8192", "micro_batch": "1", "grad_checkpointing": "selective (per-op)",
        "optimizer": "AdamW", "measured_peak_gb": "40", "hardware": "8x MI300X",
        "source": "torchtitan, compiled loss; max reserved GiB",
    }  # fmt: skip
    case = row_to_case(row, MODELS)
    assert case.job is not None and case.n_gpus == 8 and case.kind == "reserved"
    job = case.job
    assert (job.loss, job.checkpoint_policy, job.sharding) == ("compiled", "selective", "zero3")
    full = row_to_case({**row, "grad_checkpointing": "yes", "source": "test row"}, MODELS)
    assert full.job is not None and (full.job.loss, full.job.checkpoint_policy) == ("standard", "full")


def _torchtitan_rows() -> list[dict[str, str]]:
    with Path(EXTRA_CSV).open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if "torchtitan" in r["source"]]


def test_torchtitan_memory_rows_are_datacenter_full_fine_tuning_read_as_reserved_gib() -> None:
    rows = _torchtitan_rows()
    assert len(rows) == 6
    cases = [row_to_case(r, MODELS) for r in rows]
    assert all(c.job is not None and c.kind == "reserved" and c.method == "full" for c in cases)
    assert all(c.hardware == "datacenter" for c in cases)
    # GiB as logged: 82.4 GiB is 88.5 GB
    first = next(c for r, c in zip(rows, cases, strict=True) if r["measured_peak_gb"] == "82.4")
    assert first.measured_gb == pytest.approx(82.4 * 2**30 / 1e9)
    # only the runs after pytorch/torchtitan#1033 compile the loss
    compiled = {r["hardware"] for r, c in zip(rows, cases, strict=True) if c.job and c.job.loss == "compiled"}
    assert compiled == {"8x MI300X", "8x B200 (750 W cap)"}


def test_torchtitan_memory_rows_are_scored_within_the_band() -> None:
    by_setup = [r for r in evaluate(Path(EXTRA_CSV)) if r.case.n_gpus in (8, 128) and r.case.method == "full"]
    assert len(by_setup) == 6
    assert all(r.error_pct is not None and abs(r.error_pct) <= 20 for r in by_setup)
    # 8 → 128 GPUs: the measured drop (82.4 → 67.0 GiB) is the shrinking optimizer shard; the model's
    # own drop is within a GiB of it
    eight = next(r for r in by_setup if r.case.n_gpus == 8 and r.case.measured_gb > 85)
    many = next(r for r in by_setup if r.case.n_gpus == 128 and r.case.measured_gb > 70)
    assert eight.predicted_gb is not None and many.predicted_gb is not None
    measured_drop = eight.case.measured_gb - many.case.measured_gb
    assert eight.predicted_gb - many.predicted_gb == pytest.approx(measured_drop, abs=1.1)
