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


@pytest.mark.parametrize("command", ["memory", "estimate"])
def test_pipeline_parallel_is_refused_in_one_line(command):
    result = runner.invoke(app, [command, "--model", "meta-llama/Llama-3.1-8B", "--pipeline-parallel", "2"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "pipeline_parallel=2" in result.output and "zero3" in result.output


def test_tensor_parallel_on_too_few_gpus_is_refused_in_one_line():
    # a TP group of 2 cannot sit on one GPU: said in one line, naming the flag to change
    result = runner.invoke(app, ["memory", "--model", "meta-llama/Llama-3.1-8B", "--tensor-parallel", "2"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--gpus 1" in result.output and "multiple of 2 GPUs" in result.output
    hardware = ["--gpu", "H100-SXM", "--gpus", "1", "--tensor-parallel", "2"]
    result = runner.invoke(app, ["estimate", "--model", "meta-llama/Llama-3.1-8B", *hardware])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "multiple of 2 GPUs" in result.output


def test_tensor_parallel_memory_and_estimate_answer_per_gpu():
    base = ["--model", "meta-llama/Llama-3.1-70B", "--seq-len", "4096", "--micro-batch", "2", "--json"]
    plain = _json("memory", *base, "--gpus", "8", "--sharding", "zero3")
    split = _json("memory", *base, "--gpus", "8", "--sharding", "zero3", "--tensor-parallel", "2")
    # each GPU keeps half of every activation (sequence parallelism) and shards half the model
    # over half as many data-parallel ranks: the same weight bytes, half the activations
    assert split["memory_gb"]["activations_gb"] == pytest.approx(plain["memory_gb"]["activations_gb"] / 2)
    assert split["job"]["tensor_parallel"] == 2 and split["job"]["sequence_parallel"] is True
    hardware = ["--gpu", "H100-SXM", "--gpus", "8", "--sharding", "zero3"]
    one = _json("estimate", *base, *hardware)
    two = _json("estimate", *base, *hardware, "--tensor-parallel", "2")
    # the same 8 GPUs: TP adds its collectives on the critical path, so it is never faster here
    assert 0 < two["tokens_per_s"] < one["tokens_per_s"]
