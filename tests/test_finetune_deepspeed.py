"""ZeRO-3 under DeepSpeed (`Job.zero3_impl="deepspeed"`): what its parameter coordinator keeps
gathered, against a replay of the coordinator's own fetch / prefetch / release rules."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from benchmarks.memory_accuracy import row_to_case
from finetune import Job, ModelSpec, memory_per_gpu
from finetune.memory import (
    DS_MAX_LIVE_PARAMETERS,
    _largest_param_bytes,
    deepspeed_live_bytes,
    model_states,
)
from flows.cli import app
from warehouse.seed_models import load_models

MODELS = load_models()
runner = CliRunner()
PREFETCH_BUCKET = 5e7  # DeepSpeedZeroConfig.prefetch_bucket_size default
MAX_REUSE_DISTANCE = 1e9  # DeepSpeedZeroConfig.max_reuse_distance default


def _trace(m: ModelSpec) -> list[tuple[str, int]]:
    """(parameter, elements) in the order a checkpointed full fine-tuning step uses them.

    Forward: embedding, each layer's seven linears, the head; backward: the head, then per layer
    from the last the recomputed forward and the backward; the embedding's gradient last. Norms
    are below the persistence threshold and never gathered.
    """
    h, inter, d = m.hidden_size, m.intermediate_size, m.head_dim_
    shapes = [
        ("q", h * m.attention_heads * d),
        ("k", h * m.kv_heads * d),
        ("v", h * m.kv_heads * d),
        ("o", m.attention_heads * d * h),
        ("gate", h * inter),
        ("up", h * inter),
        ("down", inter * h),
    ]
    vh = m.vocab_size * h

    def layer(i: int) -> list[tuple[str, int]]:
        return [(f"{name}{i}", size) for name, size in shapes]

    order = [("embed", vh)] + [p for i in range(m.layers) for p in layer(i)] + [("head", vh), ("head", vh)]
    for i in reversed(range(m.layers)):
        order += layer(i) + layer(i)[::-1]
    return [*order, ("embed", vh)]


def _replay_peak(order: list[tuple[str, int]]) -> int:
    """Most elements gathered at once under PartitionedParameterCoordinator's rules
    (deepspeed/runtime/zero/partitioned_param_coordinator.py): fetch the module's parameters,
    prefetch upcoming ones while min(max_live − available, bucket) > 0 (a whole parameter per
    iteration, tested after it is taken), release after use unless the parameter reappears
    within max_reuse_distance elements of the trace."""
    available: set[str] = set()
    n_available = peak = 0
    queue = 0
    for step, (name, size) in enumerate(order):
        if name not in available:
            available.add(name)
            n_available += size
        queue = max(queue, step + 1)
        budget = min(DS_MAX_LIVE_PARAMETERS - n_available, PREFETCH_BUCKET)
        taken = 0
        while queue < len(order) and taken < budget:
            ahead, ahead_size = order[queue]
            queue += 1
            if ahead not in available:
                available.add(ahead)
                n_available += ahead_size
                taken += ahead_size
        peak = max(peak, n_available)
        traversed, reused = 0, False
        for later, later_size in order[step + 1 :]:
            if traversed >= MAX_REUSE_DISTANCE:
                break
            if later == name:
                reused = True
                break
            traversed += later_size
        if not reused:
            available.discard(name)
            n_available -= size
    return peak


@pytest.mark.parametrize(
    "model_id",
    ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-2-7b-hf", "Qwen/Qwen-1_8B", "meta-llama/Llama-3.1-70B"],
)
def test_live_set_matches_a_replay_of_the_coordinator(model_id: str) -> None:
    m = MODELS[model_id]
    replayed = _replay_peak(_trace(m))
    # in elements, bf16: 2 bytes each; persisted norms are not in the replay
    modelled = deepspeed_live_bytes(2.0 * m.params, _largest_param_bytes(m, 2.0, 2.0), 0.0) / 2
    assert modelled == pytest.approx(replayed, rel=0.10)
    # far more than FSDP's two decoder layers on the small models, about as many on 70B
    assert modelled > DS_MAX_LIVE_PARAMETERS


def test_a_model_below_the_budget_is_gathered_whole() -> None:
    m = MODELS["Qwen/Qwen2.5-0.5B"]
    job = Job(method="lora", sharding="zero3", zero3_impl="deepspeed")
    # 0.49B parameters < 1e9: every GPU ends up holding the whole frozen base gathered, as
    # without sharding, and its own 1/8 partition beside it (ds_tensor stays)
    sharded = model_states(m, job, 8).weights
    unsharded = model_states(m, replace(job, sharding="none"), 8).weights
    frozen_bf16 = 2.0 * m.params  # no adapters count in the frozen part: lora keeps the base in bf16
    assert sharded == pytest.approx(unsharded + frozen_bf16 / 8, rel=1e-3)
    assert sharded > model_states(m, replace(job, zero3_impl="fsdp"), 8).weights


def test_one_rank_gathers_nothing() -> None:
    # all_gather_coalesced returns _no_gather_coalesced when num_partitions == 1
    m = MODELS["meta-llama/Llama-3.1-8B"]
    for method in ("lora", "qlora"):
        ds = Job(method=method, sharding="zero3", zero3_impl="deepspeed")  # type: ignore[arg-type]
        assert model_states(m, ds, 1).weights == pytest.approx(
            model_states(m, replace(ds, sharding="none"), 1).weights
        )
    full = Job(method="full", sharding="zero3")
    fsdp, ds = model_states(m, full, 1), model_states(m, replace(full, zero3_impl="deepspeed"), 1)
    # the estimator's gathered layer is gone; its bf16 gradient stays
    assert fsdp.weights - ds.weights == pytest.approx(2 * 128_256 * 4096)
    assert fsdp.gradients == ds.gradients


def test_deepspeed_holds_the_budget_beyond_the_shard() -> None:
    m = MODELS["meta-llama/Llama-3.1-70B"]
    job = Job(method="lora", sharding="zero3", zero3_impl="deepspeed")
    n = 8
    shard = model_states(m, replace(job, offload=True), n)  # offload: only the live set on GPU
    vh_bf16 = 2.0 * m.vocab_size * m.hidden_size
    persisted = 2.0 * (2 * m.layers + 1) * m.hidden_size
    adapters = shard.weights - (2.0 * DS_MAX_LIVE_PARAMETERS + vh_bf16 + persisted)
    assert adapters == pytest.approx(4.0 * 207_093_760, rel=1e-9)  # fp32 LoRA r16 all-linear


@given(
    st.sampled_from(list(MODELS)),
    st.sampled_from(["full", "lora", "qlora"]),
    st.booleans(),
    st.integers(1, 5),
    st.integers(1, 4),
)
def test_from_two_gpus_on_more_gpus_never_increase_deepspeed_model_states(
    model_id: str, method: str, offload: bool, log_n: int, more: int
) -> None:
    """From two ranks on the partitions shrink and the live set stays. One rank gathers nothing,
    so a model below the live budget needs more on two GPUs than on one (tested above)."""
    job = Job(method=method, sharding="zero3", zero3_impl="deepspeed", offload=offload)  # type: ignore[arg-type]
    m = MODELS[model_id]
    n = 2**log_n
    assert model_states(m, job, n * 2**more).total <= model_states(m, job, n).total + 1e-6


def test_cli_takes_zero3_impl() -> None:
    args = [
        "memory",
        "--model",
        "Qwen/Qwen2.5-0.5B",
        "--method",
        "lora",
        "--gpus",
        "8",
        "--sharding",
        "zero3",
    ]
    fsdp = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    ds = json.loads(runner.invoke(app, [*args, "--zero3-impl", "deepspeed", "--json"]).stdout)
    assert (fsdp["job"]["zero3_impl"], ds["job"]["zero3_impl"]) == ("fsdp", "deepspeed")
    assert ds["memory_gb"]["weights_gb"] > fsdp["memory_gb"]["weights_gb"]
    text = runner.invoke(app, [*args, "--zero3-impl", "deepspeed"]).output
    assert "zero3 (deepspeed)" in text
    estimate = ["estimate", "--model", "Qwen/Qwen2.5-0.5B", "--gpu", "H100-SXM", "--gpus", "8"]
    hardware = json.loads(runner.invoke(app, [*estimate, "--zero3-impl", "deepspeed", "--json"]).stdout)
    assert hardware["job"]["zero3_impl"] == "deepspeed"


def test_calibration_rows_that_name_deepspeed_read_as_deepspeed() -> None:
    row = {
        "model": "Qwen-1.8B", "params_b": "1.84", "method": "full (DeepSpeed ZeRO-3, 1 GPU)",
        "precision": "bf16", "seq_len": "256", "micro_batch": "1", "grad_checkpointing": "yes",
        "optimizer": "AdamW", "measured_peak_gb": "43.5", "hardware": "1x A100 80GB SXM",
        "source": "QwenLM/Qwen README.md; GB",
    }  # fmt: skip
    case = row_to_case(row, MODELS)
    assert case.job is not None and (case.job.sharding, case.job.zero3_impl) == ("zero3", "deepspeed")
    # a row whose method says FSDP stays FSDP even when its source cites both frameworks' docs
    fsdp = row_to_case({**row, "method": "qlora + FSDP", "source": "peft {deepspeed,fsdp}.md"}, MODELS)
    assert fsdp.job is not None and fsdp.job.zero3_impl == "fsdp"
    # the step-phase peak of that DeepSpeed row is below FSDP's: one rank gathers nothing
    assert (
        memory_per_gpu(case.model, case.job).total_gb
        < memory_per_gpu(  # type: ignore[arg-type]
            case.model,
            replace(case.job, zero3_impl="fsdp"),  # type: ignore[arg-type]
        ).total_gb
    )
