"""The throughput benchmark's side-by-side pairs (issue 23): one source's same job on two GPUs.

Two runs of the same code differ only in the part, so the quotient of the model's ratio and the
measured one isolates how the model rates one GPU against the other from everything the stack
adds. The tests build rows in the extra set's columns and check which rows pair, which way the
ratios point, and that the foundry set's H100 and A100 tables pair up."""

from __future__ import annotations

import csv

import pytest

from benchmarks.throughput_accuracy import (
    EXTRA_CSV,
    FOUNDRY_CSV,
    Case,
    Pair,
    Result,
    evaluate,
    load_gpus,
    pairs,
    report_pairs,
    row_to_case,
)
from warehouse.seed_models import load_models

MODELS = load_models()
GPUS = load_gpus()
with EXTRA_CSV.open(newline="", encoding="utf-8") as _f:
    # a scored one-GPU LoRA row of the extra set (X33: Llama-3.1-8B on one H100) as a template
    TEMPLATE = next(r for r in csv.DictReader(_f) if r["id"] == "X33")


def _result(gpu: str, measured: float, predicted: float, **changes: str) -> Result:
    """A scored row on `gpu`, measured and predicted as given (the prediction is what pairs reads)."""
    case = row_to_case({**TEMPLATE, "gpu": gpu, "tokens_per_s": str(measured), **changes}, MODELS, GPUS)
    assert case.skip_reason is None, case.skip_reason
    return Result(case, predicted, (predicted - measured) / measured * 100)


def test_the_same_job_on_two_gpus_pairs_with_both_ratios() -> None:
    found = pairs([_result("H100-SXM", 3000.0, 4000.0), _result("A100-80GB-SXM", 1500.0, 1600.0)])
    assert len(found) == 1
    (p,) = found
    # a before b by name; each ratio is b over a
    assert (p.gpu_a, p.gpu_b) == ("A100-80GB-SXM", "H100-SXM")
    assert p.measured_ratio == pytest.approx(2.0)
    assert p.model_ratio == pytest.approx(2.5)
    # the model rates the H100 a quarter too fast against the A100
    assert p.model_over_measured == pytest.approx(1.25)
    # the GPU's name leaves the setup, which then reads for both rows
    assert "H100" not in p.setup and "A100" not in p.setup and "·" in p.setup


def test_rows_that_differ_in_more_than_the_gpu_do_not_pair() -> None:
    h100 = _result("H100-SXM", 3000.0, 4000.0)
    other_batch = _result("A100-80GB-SXM", 1500.0, 1600.0, micro_batch="4")
    other_length = _result("A100-80GB-SXM", 1500.0, 1600.0, seq_len="2048")
    assert pairs([h100, other_batch, other_length]) == []


def test_excluded_rows_and_a_gpu_alone_do_not_pair() -> None:
    excluded = Result(Case("Z1", "setup", 100.0, skip_reason="not expressible"), None, None)
    assert pairs([_result("H100-SXM", 3000.0, 4000.0), excluded]) == []


def test_three_gpus_make_three_pairs() -> None:
    rows = [
        _result("H100-SXM", 3000.0, 4000.0),
        _result("A100-80GB-SXM", 1500.0, 1600.0),
        _result("L40S", 1000.0, 900.0),
    ]
    found = pairs(rows)
    assert {(p.gpu_a, p.gpu_b) for p in found} == {
        ("A100-80GB-SXM", "H100-SXM"),
        ("A100-80GB-SXM", "L40S"),
        ("H100-SXM", "L40S"),
    }


def test_the_report_prints_each_pair_and_the_median_per_two_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    report_pairs([_result("H100-SXM", 3000.0, 4000.0), _result("A100-80GB-SXM", 1500.0, 1600.0)])
    out = capsys.readouterr().out
    assert "side by side" in out
    assert "| H100-SXM / A100-80GB-SXM | 2.00 | 2.50 | 1.25 |" in out
    assert "| H100-SXM / A100-80GB-SXM | 1 | 1.25 | 1.25–1.25 |" in out


def test_a_set_without_pairs_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    report_pairs([_result("H100-SXM", 3000.0, 4000.0)])
    assert capsys.readouterr().out == ""


def test_the_foundry_tables_pair_the_h100_rows_with_the_a100_rows() -> None:
    # llm-foundry ran its benchmark shapes on H100 and A100 80GB at the same batch and
    # accumulation for most rows: those are the pairs
    found = pairs(evaluate(FOUNDRY_CSV))
    assert found
    assert {(p.gpu_a, p.gpu_b) for p in found} == {("A100-80GB-SXM", "H100-SXM")}
    assert all(isinstance(p, Pair) and p.measured_ratio > 1 and p.model_ratio > 1 for p in found)
