"""Length-bucketed batches (PEFT's method comparison sorts each bucket by length before batching):
the benchmark's padded length for such sources, and what it must equal at its limits."""

from __future__ import annotations

import csv
import itertools

import pytest

from benchmarks.throughput_accuracy import (
    EXTRA_CSV,
    LENGTH_BUCKETED_SOURCES,
    bucketed_padded_length,
    load_gpus,
    row_to_case,
)
from finetune.job import padded_batch_length
from warehouse.seed_models import load_models

MODELS = load_models()


def test_one_batch_per_bucket_is_the_unsorted_padded_length() -> None:
    # a bucket of one batch sorts nothing: the batch is padded to the longest of b random samples
    for mean, longest, b in ((210.0, 768.0, 4), (500.0, 2048.0, 8), (900.0, 1024.0, 2)):
        assert bucketed_padded_length(mean, longest, b, 1) == pytest.approx(
            padded_batch_length(mean, longest, b), rel=1e-6
        )


def test_one_sample_per_batch_is_never_padded() -> None:
    assert bucketed_padded_length(210.0, 768.0, 1, 20) == pytest.approx(210.0, rel=1e-6)


def test_bigger_buckets_pad_less_and_never_below_the_mean() -> None:
    lengths = [bucketed_padded_length(210.0, 768.0, 4, f) for f in (1, 2, 5, 20, 80)]
    assert all(a > b for a, b in itertools.pairwise(lengths))
    assert lengths[-1] > 210.0
    # sorted buckets of 80 leave a few per cent of padding, random batches of 4 about half
    assert 210.0 / lengths[3] > 0.9 > 0.6 > 210.0 / lengths[0]


@pytest.mark.parametrize(
    "args", [(0.0, 768.0, 4, 20), (800.0, 768.0, 4, 20), (210.0, 768.0, 0, 20), (210.0, 768.0, 4, 0)]
)
def test_bucketed_length_refuses_impossible_shapes(args: tuple[float, float, int, int]) -> None:
    with pytest.raises(ValueError, match="need 0 < mean_len"):
        bucketed_padded_length(*args)


def _peft_row() -> dict[str, str]:
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        return next(r for r in csv.DictReader(f) if r["source"] == "peft-method-comparison")


def test_a_bucketing_source_computes_the_bucketed_length() -> None:
    row = _peft_row()
    case = row_to_case(row, MODELS, load_gpus())
    assert case.job is not None
    expected = bucketed_padded_length(210.0, 768.0, 4, LENGTH_BUCKETED_SOURCES[row["source"]])
    assert case.job.seq_len == round(expected)
    assert case.job.padding_efficiency == pytest.approx(210.0 / expected)


def test_a_source_that_does_not_bucket_pads_random_batches() -> None:
    row = {**_peft_row(), "source": "some-trainer-without-bucketing"}
    case = row_to_case(row, MODELS, load_gpus())
    assert case.job is not None
    assert case.job.seq_len == round(padded_batch_length(210.0, 768.0, 4))


def test_every_peft_run_reads_as_its_results_file_says() -> None:
    # X01 (LoRA r64, 2025), X65 (full fine-tuning) and X66 (LoRA r32), one L40S, one loop
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        rows = {r["id"]: r for r in csv.DictReader(f) if r["source"] == "peft-method-comparison"}
    assert set(rows) == {"X01", "X65", "X66"}
    gpus = load_gpus()  # read gpus.csv once, not once per row
    cases = {i: row_to_case(r, MODELS, gpus) for i, r in rows.items()}
    factor = LENGTH_BUCKETED_SOURCES["peft-method-comparison"]
    bucketed = round(bucketed_padded_length(210.0, 768.0, 4, factor))
    for case_id, case in cases.items():
        assert case.skip_reason is None and case.job is not None, case_id
        assert case.job.seq_len == bucketed and case.job.micro_batch == 4 and not case.job.grad_checkpointing
        # every file pins its commit, and the quote carries the median the row states
        assert "/blob/" in rows[case_id]["source_url"]
        assert f"median {rows[case_id]['measured']}" in rows[case_id]["quote"]
    full, lora = cases["X65"].job, cases["X66"].job
    assert full is not None and lora is not None
    # no PEFT wrapper on the full run: every weight and its AdamW states in bf16, no autocast
    assert (full.method, full.precision) == ("full", "bf16-pure")
    # the LoRA runs cast their adapters to fp32 over the bf16 base (FP32_ADAPTER_SOURCES)
    assert (lora.method, lora.precision, lora.mixed_precision) == ("lora", "bf16-mixed", "none")
    assert (lora.lora_rank, lora.lora_targets) == (32, "qv")
