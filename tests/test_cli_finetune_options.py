"""The fine-tuning model's job fields reach the CLI: checkpoint policy, optimizer kernel, full
state-dict loading, and a clear refusal for tensor / pipeline parallel jobs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flows.cli import app

runner = CliRunner()
BASE = ["--model", "meta-llama/Llama-3.1-8B", "--method", "full", "--json"]


def _json(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_memory_passes_the_new_job_fields_through():
    job = _json("memory", *BASE, "--checkpoint-policy", "selective", "--optimizer-impl", "fused")["job"]
    assert (job["checkpoint_policy"], job["optimizer_impl"]) == ("selective", "fused")
    assert job["full_state_dict_load"] is False and job["tensor_parallel"] == 1


def test_selective_checkpointing_keeps_more_activations_than_full():
    # the training step's phase holds the activations (the optimizer step's has freed them)
    def step_gb(policy: str) -> float:
        return _json("memory", *BASE, "--checkpoint-policy", policy)["totals_gb"]["phases_gb"]["step"]

    assert step_gb("selective") > step_gb("full")  # it saves every second matmul output too


def test_full_state_dict_loading_raises_the_load_phase_of_a_sharded_job():
    args = ["memory", *BASE, "--gpus", "8", "--sharding", "zero3"]
    plain = _json(*args)["totals_gb"]["phases_gb"]
    loading = _json(*args, "--full-state-dict-load")["totals_gb"]["phases_gb"]
    assert loading["load"] > plain["load"]


def test_a_fused_optimizer_is_no_slower_than_foreach_on_stated_hardware():
    hardware = ["estimate", *BASE, "--gpu", "H100-SXM", "--gpus", "8"]
    foreach = _json(*hardware, "--optimizer-impl", "foreach")["tokens_per_s"]
    fused = _json(*hardware, "--optimizer-impl", "fused")["tokens_per_s"]
    assert fused >= foreach


@pytest.mark.parametrize("option", ["--tensor-parallel", "--pipeline-parallel"])
@pytest.mark.parametrize("command", ["memory", "estimate"])
def test_tensor_and_pipeline_parallel_are_refused_in_one_line(command, option):
    result = runner.invoke(app, [command, "--model", "meta-llama/Llama-3.1-8B", option, "2"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "covers data parallelism only" in result.output and "zero3" in result.output
