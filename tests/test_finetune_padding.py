"""Padded (unpacked) data: --mean-len / --max-len, `finetune.padded_shape`, and where each length
is used (time at the expected padded length, memory at the longest micro-batch)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from finetune import Job, estimate_time, memory_per_gpu, padded_batch_length
from finetune.job import padded_shape
from flows.cli import app
from tests.conftest import REPO
from tests.test_cli_finetune import home  # noqa: F401  (the warehouse fixture)
from warehouse.seed_models import load_models

runner = CliRunner()
LLAMA_8B = "meta-llama/Llama-3.1-8B"
MODEL = ["--model", LLAMA_8B, "--method", "lora"]


def _json(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --- padded_shape ---------------------------------------------------------------------------------


def test_padded_shape_computes_the_expected_padded_batch_and_its_real_share() -> None:
    shape = padded_shape(210, 768, 4)
    expected = padded_batch_length(210, 768, 4)
    assert shape.expected_len == pytest.approx(expected)
    assert shape.seq_len == round(expected)
    assert shape.padding_efficiency == pytest.approx(210 / expected)
    # four samples padded to the longest: well above the mean, below the maximum
    assert 210 < shape.expected_len < 768


def test_one_sample_per_micro_batch_is_never_padded() -> None:
    shape = padded_shape(210, 768, 1)
    assert shape.seq_len == 210
    assert shape.padding_efficiency == pytest.approx(1.0, abs=1e-6)


def test_mean_equal_to_max_means_every_sample_has_that_length() -> None:
    shape = padded_shape(512, 512, 8)
    assert (shape.seq_len, shape.expected_len, shape.padding_efficiency) == (512, 512.0, 1.0)


@pytest.mark.parametrize(
    ("mean", "longest", "words"),
    [(800, 768, "above the longest"), (0, 768, "≥ 1 token"), (-5, 768, "≥ 1 token"), (10, 0, "≥ 1 token")],
)
def test_padded_shape_refuses_impossible_lengths(mean: float, longest: int, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        padded_shape(mean, longest, 2)


# --- the model: memory at the longest batch, time at the expected one ---------------------------------


def test_memory_is_sized_at_the_longest_micro_batch() -> None:
    m = load_models()[LLAMA_8B]
    shape = padded_shape(300, 2048, 4)
    padded = Job(seq_len=shape.seq_len, padding_efficiency=shape.padding_efficiency, peak_seq_len=2048)
    # every micro-batch holding the 2048-token sample is padded to 2048: that step sets the peak
    at_peak = memory_per_gpu(m, Job(seq_len=2048))
    assert memory_per_gpu(m, padded) == at_peak
    assert memory_per_gpu(m, padded).total_gb > memory_per_gpu(m, Job(seq_len=shape.seq_len)).total_gb


def test_time_is_at_the_expected_padded_length_and_counts_real_tokens_only() -> None:
    m = load_models()[LLAMA_8B]
    shape = padded_shape(300, 2048, 4)
    # the fused stack's FlashAttention stays causal on a padded batch, so the computed work is the same
    packed = Job(seq_len=shape.seq_len, micro_batch=4, kernels="fused")
    padded = replace(packed, padding_efficiency=shape.padding_efficiency, peak_seq_len=2048)
    t_packed = estimate_time(m, packed, 1e8, 1, 1, 989.0, None, None)
    t_padded = estimate_time(m, padded, 1e8, 1, 1, 989.0, None, None)
    # the same computed batch, of which only padding_efficiency is real
    assert t_padded.tokens_per_s == pytest.approx(t_packed.tokens_per_s * shape.padding_efficiency)
    # the plain stack's masked SDPA computes all s² blocks of the padded batch: slower still
    plain = estimate_time(m, replace(padded, kernels="plain"), 1e8, 1, 1, 989.0, None, None)
    assert plain.tokens_per_s < t_padded.tokens_per_s


def test_a_peak_shorter_than_the_expected_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="peak_seq_len"):
        Job(seq_len=1024, peak_seq_len=512)


# --- the CLI ----------------------------------------------------------------------------------------


def test_memory_json_reports_the_padded_shape_and_sizes_memory_at_max_len() -> None:
    padded = _json("memory", *MODEL, "--mean-len", "210", "--max-len", "768", "--micro-batch", "4", "--json")
    packed = _json("memory", *MODEL, "--seq-len", "768", "--micro-batch", "4", "--json")
    shape = padded_shape(210, 768, 4)
    assert padded["padding"] == {
        "mean_len": 210.0,
        "max_len": 768,
        "expected_padded_len": pytest.approx(shape.expected_len),
        "padding_efficiency": pytest.approx(shape.padding_efficiency),
        "time_seq_len": shape.seq_len,
        "memory_seq_len": 768,
    }
    assert (padded["job"]["seq_len"], padded["job"]["peak_seq_len"]) == (shape.seq_len, 768)
    assert padded["memory_gb"] == packed["memory_gb"]
    assert packed["padding"] is None


def test_estimate_on_hardware_takes_the_padded_shape() -> None:
    hardware = ["--gpu", "H100-SXM", "--gpus", "8", "--json"]
    padded = _json(
        "estimate", *MODEL, "--mean-len", "210", "--max-len", "768", "--micro-batch", "4", *hardware
    )
    shape = padded_shape(210, 768, 4)
    same = _json(
        "estimate", *MODEL, "--seq-len", str(shape.seq_len), "--micro-batch", "4",
        "--padding-efficiency", str(shape.padding_efficiency), *hardware,
    )  # fmt: skip
    assert padded["tokens_per_s"] == pytest.approx(same["tokens_per_s"])
    assert padded["padding"]["padding_efficiency"] == pytest.approx(shape.padding_efficiency)
    assert padded["job"]["peak_seq_len"] == 768
    # memory at the longest batch: more than the expected-length job holds
    assert padded["memory_gb"]["total_gb"] > same["memory_gb"]["total_gb"]


def test_the_human_memory_line_says_where_each_length_is_used() -> None:
    result = runner.invoke(
        app, ["memory", *MODEL, "--mean-len", "210", "--max-len", "768", "--micro-batch", "4"]
    )
    assert result.exit_code == 0, result.output
    assert "mean 210, max 768" in result.output and "memory at 768" in result.output


@pytest.mark.parametrize(
    ("command", "args", "words"),
    [
        ("memory", ["--mean-len", "800", "--max-len", "768"], "cannot exceed the maximum"),
        ("memory", ["--mean-len", "0", "--max-len", "768"], "≥ 1 token"),
        ("memory", ["--mean-len", "-3", "--max-len", "768"], "≥ 1 token"),
        ("memory", ["--mean-len", "200", "--max-len", "0"], "≥ 1 token"),
        ("memory", ["--mean-len", "200"], "give both --mean-len and --max-len"),
        ("estimate", ["--max-len", "768"], "give both --mean-len and --max-len"),
        ("memory", ["--mean-len", "200", "--max-len", "768", "--seq-len", "512"], "drop --seq-len"),
        (
            "estimate",
            ["--mean-len", "200", "--max-len", "768", "--padding-efficiency", "0.5"],
            "give one or the other",
        ),
    ],
)
def test_contradicting_or_impossible_lengths_fail_in_one_line_with_exit_2(
    command: str, args: list[str], words: str
) -> None:
    result = runner.invoke(
        app,
        [command, *MODEL, *args, "--gpu", "H100-SXM"] if command == "estimate" else [command, *MODEL, *args],
    )
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_new_options_are_documented_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text()
    for option in ("--mean-len", "--max-len", "--zero3-impl", "--train-embeddings"):
        assert option in readme, f"{option} is not documented in README.md"


# --- estimate over current offers -------------------------------------------------------------------


def test_estimate_over_offers_sizes_at_max_len_and_times_at_the_expected_length(home) -> None:  # noqa: F811
    base = ["estimate", "--model", "Qwen2.5-7B", "--method", "qlora", "--tokens", "50M", "--micro-batch", "4"]
    shape = padded_shape(300, 2048, 4)
    padded = _json(*base, "--mean-len", "300", "--max-len", "2048", "--json")
    at_peak = _json(*base, "--seq-len", "2048", "--json")
    efficiency = str(shape.padding_efficiency)
    timed = _json(*base, "--seq-len", str(shape.seq_len), "--padding-efficiency", efficiency, "--json")

    def by_offer(rows: list[dict]) -> dict[tuple[str, str], dict]:
        return {(r["provider"], r["instance_type"]): r for r in rows}

    padded_rows, peak_rows, timed_rows = by_offer(padded), by_offer(at_peak), by_offer(timed)
    assert padded_rows.keys() == peak_rows.keys()
    same_placement = 0
    for key, row in padded_rows.items():
        assert row["total_gb"] == pytest.approx(peak_rows[key]["total_gb"])
        if timed_rows.get(key, {}).get("sharding") == row["sharding"]:
            assert row["estimated_hours"] == pytest.approx(timed_rows[key]["estimated_hours"])
            same_placement += 1
    assert same_placement >= 1
