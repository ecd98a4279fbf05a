"""The job options are declared once (flows/job_options.py) and out-of-range values are one line;
`estimate --gpu` says fp16 on GPUs without bf16 and prints no cost for a job that does not fit."""

from __future__ import annotations

import json

import pytest
import typer.main
from typer.testing import CliRunner

from flows.cli import app
from flows.job_options import JOB_OPTIONS, JobOptions

runner = CliRunner()
LLAMA = ["--model", "meta-llama/Llama-3.1-8B"]


def _options(command: str) -> dict[str, tuple[str, ...]]:
    click = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {p.name: tuple(p.opts) for p in click.params}


def test_memory_and_estimate_take_the_same_job_options() -> None:
    memory, estimate = _options("memory"), _options("estimate")
    for name in JOB_OPTIONS:
        assert memory[name] == estimate[name], name
    # one field per option: the options object and the declarations cannot drift apart
    assert set(JOB_OPTIONS) == {f for f in JobOptions.__dataclass_fields__}


@pytest.mark.parametrize("tokens", ["0.1", "0", "-5", "lots", "2e16"])
def test_tokens_out_of_range_is_one_line_naming_the_flag(tokens: str) -> None:
    result = runner.invoke(app, ["estimate", *LLAMA, "--gpu", "H100-SXM", "--tokens", tokens])
    assert result.exit_code == 2  # a usage error, like click's own: the value of a flag is wrong
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--tokens" in lines[0], result.output


def test_a_job_that_does_not_fit_gets_no_cost() -> None:
    args = ["estimate", *LLAMA, "--method", "full", "--gpu", "T4", "--price-per-gpu-hour", "0.5"]
    text = runner.invoke(app, args).output
    assert "does NOT fit" in text and "$" not in text
    payload = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert payload["fits"] is False and payload["cost_usd"] is None and payload["hours"] is None


def test_a_job_that_does_not_fit_is_told_what_would_shrink_it_not_what_it_already_does() -> None:
    # a QLoRA job is not told to try QLoRA; a job already checkpointing is not told to checkpoint
    qlora = ["estimate", *LLAMA, "--method", "qlora", "--seq-len", "16384", "--gpu", "RTX4090"]
    said = " ".join(runner.invoke(app, qlora).output.split())
    assert "does NOT fit" in said
    hint = said[said.index("(try ") :]
    assert "--method qlora" not in hint and "--grad-checkpointing" not in hint
    assert "--loss chunked" in hint and "shorter sequences" in hint and "more GPUs (--gpus, --nodes)" in hint
    # a full fine-tune without checkpointing, two sequences a step, over two GPUs unsharded
    full = ["estimate", *LLAMA, "--method", "full", "--gpu", "T4", "--gpus", "2", "--sharding", "none"]
    full += ["--micro-batch", "2", "--no-grad-checkpointing", "--loss", "chunked"]
    said = " ".join(runner.invoke(app, full).output.split())
    hint = said[said.index("(try ") :]
    for asked in ("--method qlora", "--grad-checkpointing", "a smaller --micro-batch", "--sharding zero3"):
        assert asked in hint, hint
    assert "--loss chunked" not in hint


def test_gpus_without_bf16_say_fp16() -> None:
    args = ["estimate", *LLAMA, "--method", "lora", "--gpu", "V100-32GB-SXM", "--gpus", "8"]
    text = runner.invoke(app, [*args, "--price-per-gpu-hour", "0.5"]).output
    assert "no bf16" in text and "fp16 mixed precision" in text and "$" in text
    payload = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert payload["train_precision"] == "fp16-mixed"


def test_interconnect_and_sharding_reach_the_stated_estimate() -> None:
    base = ["estimate", *LLAMA, "--method", "full", "--gpu", "H100-PCIe", "--gpus", "8", "--json"]
    pcie = json.loads(runner.invoke(app, base).stdout)
    bridge = json.loads(runner.invoke(app, [*base, "--interconnect", "nvlink"]).stdout)
    zero3 = json.loads(runner.invoke(app, [*base, "--sharding", "zero3"]).stdout)
    assert (pcie["interconnect"], bridge["interconnect"]) == ("PCIe", "NVLink bridge")
    assert pcie["hours"] == bridge["hours"]  # a bridge links pairs: eight cards ring over PCIe
    assert zero3["sharding"] == "zero3" and zero3["hours"] > pcie["hours"]
    bad = runner.invoke(app, [*base[:-1], "--gpu", "L4", "--interconnect", "nvlink"])
    assert bad.exit_code == 1 and "--interconnect pcie" in bad.output


def test_the_pages_job_form_uses_the_option_names() -> None:
    """The page's job picker (answers/report/queries/fit_jobs.sql) describes a job by the same
    names as the command line, so a knob renamed in one place fails here."""
    from answers.report import query

    sql = query("fit_jobs")
    shown = {"method", "seq_len", "micro_batch", "precision", "optimizer", "lora_rank"}
    for name in shown:
        assert f"jobs.{name}" in sql, name
    assert shown <= set(JOB_OPTIONS)


# --- modeltime (issue 23): --kernels and --sharding hybrid ------------------------------------


def test_kernels_fused_is_faster_than_the_default_plain_stack() -> None:
    base = ["estimate", *LLAMA, "--gpu", "H100-SXM", "--json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    fused = json.loads(runner.invoke(app, [*base, "--kernels", "fused"]).stdout)
    assert plain["job"]["kernels"] == "plain" and fused["job"]["kernels"] == "fused"
    assert fused["hours"] < plain["hours"]


def test_hybrid_sharding_places_across_nodes_and_beats_zero3_on_a_slow_network() -> None:
    base = [
        "estimate", *LLAMA, "--method", "full", "--gpu", "H100-SXM", "--gpus", "8", "--nodes", "4",
        "--inter-node-gbps", "400", "--json",
    ]  # fmt: skip
    zero3 = json.loads(runner.invoke(app, [*base, "--sharding", "zero3"]).stdout)
    hybrid = json.loads(runner.invoke(app, [*base, "--sharding", "hybrid"]).stdout)
    assert hybrid["sharding"] == "hybrid" and hybrid["fits"]
    assert hybrid["hours"] < zero3["hours"]


def test_memory_refuses_hybrid_in_one_line_saying_what_to_ask() -> None:
    result = runner.invoke(app, ["memory", *LLAMA, "--sharding", "hybrid"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--sharding zero3" in lines[0], result.output
