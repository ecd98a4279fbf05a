"""Every flag checked (issue 22): an out-of-range or conflicting value is one `error:` line naming
the flag, exit 2, never typer's boxed panel or a silent pick; a sequence beyond the model's
context length is warned of in one line. Runs the real typer app, offline, no warehouse needed
except where a filter is checked against the seeds."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.output import console
from tests.test_cli_commands import live_warehouse

runner = CliRunner()
MODEL = ["--model", "meta-llama/Llama-3.2-1B"]  # seeded: no Hub lookup
ESTIMATE = ["estimate", *MODEL, "--tokens", "1M"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(console, "width", 200)
    return tmp_path / "data"


def only_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output and "╭" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["prices", "--min-vram", "-1"], "--min-vram"),
        (["prices", "--max-price", "-0.5"], "--max-price"),
        ([*ESTIMATE, "--epochs", "0"], "--epochs"),
        ([*ESTIMATE, "--seq-len", "0"], "--seq-len"),
        ([*ESTIMATE, "--max-nodes", "0"], "--max-nodes"),
        ([*ESTIMATE, "--top", "0"], "--top"),
        ([*ESTIMATE, "--gpu", "H100-SXM", "--gpus", "0"], "--gpus"),
        ([*ESTIMATE, "--gpu", "H100-SXM", "--nodes", "-2"], "--nodes"),
        ([*ESTIMATE, "--gpu", "H100-SXM", "--price-per-gpu-hour", "-1"], "--price-per-gpu-hour"),
        (["memory", *MODEL, "--lora-rank", "0"], "--lora-rank"),
        (["memory", *MODEL, "--micro-batch", "0"], "--micro-batch"),
        (["memory", *MODEL, "--lora-dropout", "1.5"], "--lora-dropout"),
        (["memory", *MODEL, "--gpus", "0"], "--gpus"),
        (["server", "start", "--port", "0"], "--port"),
        (["server", "start", "--port", "70000"], "--port"),
        (["prices", "--no-such-flag"], "--no-such-flag"),
    ],
)
def test_an_out_of_range_value_is_one_line_naming_the_flag(args: list[str], flag: str, home: Path):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    line = only_error_line(result)
    assert f"'{flag}'" in line or f"{flag} " in line, line
    assert "--help` lists the options" in line


@pytest.mark.parametrize(
    "args",
    [
        [*ESTIMATE, "--tokens", "0"],
        [*ESTIMATE, "--tokens", "-5"],
        [*ESTIMATE, "--mean-len", "0", "--max-len", "0"],
        [*ESTIMATE, "--mean-len", "200", "--max-len", "100"],
    ],
)
def test_token_counts_and_lengths_are_checked_with_their_flag(args: list[str], home: Path):
    line = only_error_line(runner.invoke(app, args))
    assert ("--tokens" in line) or ("--mean-len" in line and "--max-len" in line), line


@pytest.mark.parametrize("command", [["prices"], ["history", "--gpu", "H100"]])
def test_spot_and_on_demand_together_are_refused_not_silently_on_demand(command: list[str], home: Path):
    result = runner.invoke(app, [*command, "--spot", "--on-demand"])
    assert result.exit_code == 2, result.output
    assert only_error_line(result) == (
        "error: --spot and --on-demand are exclusive: give one, or neither for both kinds"
    )


def test_spot_or_on_demand_alone_filters_the_prices(home: Path):
    live_warehouse(home)  # one on-demand AWS H100 offer
    on_demand = runner.invoke(app, ["prices", "--on-demand", "--json"])
    assert on_demand.exit_code == 0 and "p5.48xlarge" in on_demand.stdout
    spot = runner.invoke(app, ["prices", "--spot"])
    assert spot.exit_code == 1 and "no current offers match --spot; loosen a filter" in spot.output


def test_the_offer_gpu_error_names_offer_gpu(home: Path):
    live_warehouse(home)
    result = runner.invoke(app, [*ESTIMATE, "--offer-gpu", "H1OO"])
    assert result.exit_code == 1, result.output
    line = only_error_line(result)
    assert line.startswith("error: --offer-gpu 'H1OO' matches no GPU") and " --gpu " not in line
    # prices' own filter is still called --gpu
    assert only_error_line(runner.invoke(app, ["prices", "--gpu", "H1OO"])).startswith("error: --gpu 'H1OO'")


@pytest.mark.parametrize(
    ("extra", "warned"),
    [
        (
            ["--seq-len", "1000000"],
            "warning: --seq-len 1000000 is beyond meta-llama/Llama-3.2-1B's context length of 131072",
        ),
        (["--mean-len", "900", "--max-len", "200000"], "warning: --max-len 200000 is beyond"),
        (["--seq-len", "131072"], None),
        ([], None),
    ],
)
def test_a_sequence_beyond_the_models_context_length_is_warned_of_once(extra, warned, home: Path):
    result = runner.invoke(app, ["memory", *MODEL, *extra])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    if warned is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].startswith(warned), result.stderr
        assert "max_position_embeddings" in warnings[0]


def test_the_bare_command_still_prints_its_help_and_an_unknown_command_is_one_line(home: Path):
    bare = runner.invoke(app, [])
    assert "Usage:" in bare.output and "error:" not in bare.output
    unknown = runner.invoke(app, ["pricse"])
    assert unknown.exit_code == 2 and "No such command 'pricse'" in only_error_line(unknown)
    helped = runner.invoke(app, ["prices", "--help"])
    assert helped.exit_code == 0 and "--on-demand" in helped.output


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--sharding", "zero3"], "--sharding"),
        (["--gpus", "4"], "--gpus"),
        (["--nodes", "2"], "--nodes"),
        (["--interconnect", "nvlink"], "--interconnect"),
        (["--price-per-gpu-hour", "2.5"], "--price-per-gpu-hour"),
        (["--inter-node-gbps", "400"], "--inter-node-gbps"),
    ],
)
def test_a_stated_hardware_option_without_gpu_is_refused_not_ignored(extra: list[str], flag: str, home: Path):
    # ranking offers, each offer states its own hardware: a --sharding or --gpus given without
    # --gpu would silently change nothing, so it is a usage error naming the flag and --gpu
    line = only_error_line(runner.invoke(app, [*ESTIMATE, *extra]))
    assert flag in line and "--gpu NAME" in line
    assert runner.invoke(app, [*ESTIMATE, *extra]).exit_code == 2


@pytest.mark.parametrize("since", ["-3d", "banana", "2999-01-01"])
def test_a_bad_since_is_a_usage_error_before_any_warehouse_opens(since: str, home: Path):
    # checked before the warehouse is opened: the same one line whether or not a warehouse exists
    result = runner.invoke(app, ["history", "--gpu", "H100", "--since", since])
    assert result.exit_code == 2 and "--since" in only_error_line(result)
    assert not home.exists() or not any(home.rglob("*.duckdb"))
