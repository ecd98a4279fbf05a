"""Qwen's own fine-tuning profile as a throughput set (benchmarks/data/throughput_qwen.csv).

The rows are this repo's transcription of the QwenLM/Qwen README table at e8e1596 (memory / speed
per model size, method and sequence length on one A100 80 GB, batch 1, gradient accumulation 8).
The tests hold the transcription to its own arithmetic and check that the benchmark reads each
row's recipe: the LoRA dropout, the trained embedding and head copies, accumulation, GPTQ."""

from __future__ import annotations

import csv
import re

import pytest

from benchmarks.throughput_accuracy import QWEN_CSV, evaluate, load_gpus, predict, row_to_case
from warehouse.seed_models import load_models

MODELS = load_models()
GPUS = load_gpus()
with QWEN_CSV.open(newline="", encoding="utf-8") as _f:
    ROWS = list(csv.DictReader(_f))
LENGTHS = (256, 512, 1024, 2048, 4096, 8192)


def test_every_row_is_its_quoted_cell_at_eight_samples_per_step() -> None:
    # 13 method rows × 6 lengths, less the 7B full-parameter cells the README leaves empty ("-")
    assert len(ROWS) == 13 * 6 - 3
    for row in ROWS:
        cell = re.search(r'sequence length (\d+): "[\d.]+G? / ([\d.]+)s/it"', row["quote"])
        assert cell, row["id"]
        length, seconds = int(cell.group(1)), float(cell.group(2))
        assert (int(row["seq_len"]), float(row["measured"])) == (length, seconds), row["id"]
        # one sample per micro-step on each GPU, 8 micro-steps per optimizer step, padded to L
        assert int(row["tokens_per_unit"]) == 8 * length * int(row["gpus"]), row["id"]
        assert float(row["tokens_per_s"]) == pytest.approx(int(row["tokens_per_unit"]) / seconds, abs=0.1)
        assert row["source_url"].startswith("https://github.com/QwenLM/Qwen/blob/e8e15962d897")


def test_excluded_rows_say_why_and_the_rest_are_the_single_gpu_peft_runs() -> None:
    scored = [r for r in ROWS if r["score"] == "yes"]
    assert len(scored) == 54  # 1.8B, 7B, 14B × LoRA, LoRA (emb), Q-LoRA × 6 lengths
    for row in ROWS:
        if row["score"] == "no":
            assert row["exclusion_reason"], row["id"]
        else:
            assert row["gpus"] == "1" and row["method"] in ("lora", "qlora"), row["id"]
    reasons = " ".join(r["exclusion_reason"] for r in ROWS)
    assert "QwenLM/Qwen#833" in reasons and "not a seeded model" in reasons


def test_the_benchmark_reads_each_rows_recipe() -> None:
    by_quote = {r["quote"].split(", sequence length")[0]: r for r in ROWS if r["seq_len"] == "2048"}
    lora = row_to_case(by_quote["7B, LoRA"], MODELS, GPUS)
    emb = row_to_case(by_quote["7B, LoRA (emb)"], MODELS, GPUS)
    qlora = row_to_case(by_quote["7B, Q-LoRA"], MODELS, GPUS)
    for case in (lora, emb, qlora):
        assert case.job is not None, case.skip_reason
        assert (case.job.grad_accumulation, case.job.lora_dropout, case.job.lora_rank) == (8, 0.05, 64)
        assert case.job.lora_targets == "all-linear" and case.job.micro_batch == 1
    assert lora.job is not None and emb.job is not None and qlora.job is not None
    assert (lora.job.train_embeddings, emb.job.train_embeddings) == ("off", "embed+head")
    assert "+embed+head" in emb.setup and "+" not in lora.setup.split()[1]
    # Q-LoRA: the GPTQ chat checkpoint under DeepSpeed ZeRO-2's fp16 engine on one GPU
    assert (qlora.job.method, qlora.job.quant, qlora.job.sharding) == ("qlora", "gptq", "zero2")
    assert lora.job.quant != "gptq" and lora.job.sharding == "none"


def test_trained_copies_and_dropout_cost_time() -> None:
    results = {r.case.case_id: r for r in evaluate(QWEN_CSV)}
    ids = {(r["quote"].split(", sequence length")[0], r["seq_len"]): r["id"] for r in ROWS}
    for length in ("2048", "8192"):
        plain = results[ids["14B, LoRA", length]].predicted_tokens_per_s
        emb = results[ids["14B, LoRA (emb)", length]].predicted_tokens_per_s
        assert plain and emb
        # the head copy's weight gradient and the embedding gradient are extra work every step
        assert emb < plain
    # a row read without its dropout (the recipe default for LoRA: none) is faster
    row = next(r for r in ROWS if r["id"] == ids["7B, LoRA", "2048"])
    with_dropout = row_to_case(row, MODELS, GPUS)
    without = row_to_case(dict(row, lora_dropout=""), MODELS, GPUS)
    assert without.job is not None and without.job.lora_dropout is None
    assert predict(with_dropout) < predict(without)
