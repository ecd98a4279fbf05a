"""Hypothesis properties of the memory, time and cost model."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finetune import (
    Job,
    MemoryBreakdown,
    ModelSpec,
    billed_hours,
    count_params,
    estimate_time,
    expected_spot_cost,
    expected_spot_hours,
    memory_per_gpu,
    model_states,
    run_cost,
)


@st.composite
def model_specs(draw: st.DrawFn) -> ModelSpec:
    heads = draw(st.sampled_from([8, 16, 32, 64]))
    head_dim = draw(st.sampled_from([64, 128]))
    hidden = heads * head_dim
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8, heads) if heads % h == 0]))
    spec = ModelSpec(
        model_id="hypothesis",
        params=0,
        active_params=0,
        layers=draw(st.integers(2, 96)),
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=kv,
        intermediate_size=draw(st.integers(2, 4)) * hidden,
        vocab_size=draw(st.sampled_from([32000, 128256, 151936, 256000])),
        tied_embeddings=draw(st.booleans()),
        max_context=131072,
        gated_mlp=draw(st.booleans()),
    )
    p = count_params(spec)
    return replace(spec, params=p, active_params=p)


@st.composite
def jobs(draw: st.DrawFn, method: str | None = None, sharding: str | None = None) -> Job:
    shard = sharding or draw(st.sampled_from(["none", "zero2", "zero3"]))
    return Job(
        method=method or draw(st.sampled_from(["full", "lora", "qlora"])),  # type: ignore[arg-type]
        precision=draw(st.sampled_from(["bf16-mixed", "bf16-pure"])),
        optimizer=draw(st.sampled_from(["adamw", "adamw8bit", "paged-adamw8bit"])),
        seq_len=draw(st.integers(1, 32768)),
        micro_batch=draw(st.integers(1, 16)),
        grad_checkpointing=draw(st.booleans()),
        attention=draw(st.sampled_from(["flash", "eager"])),
        lora_rank=draw(st.sampled_from([4, 8, 16, 32, 64])),
        lora_targets=draw(st.sampled_from(["attention", "all-linear"])),
        loss=draw(st.sampled_from(["standard", "chunked", "fused"])),
        sharding=shard,  # type: ignore[arg-type]
        offload=draw(st.booleans()) if shard != "none" else False,
    )


gpus = st.sampled_from([1, 2, 4, 8, 16, 64])


def _step_gb(m: ModelSpec, job: Job, n: int) -> float:
    return dict(memory_per_gpu(m, job, n).phases_gb)["step"]


@given(model_specs(), jobs(), gpus, st.integers(1, 4096))
def test_memory_is_monotone_in_sequence_length(m: ModelSpec, job: Job, n: int, extra: int) -> None:
    longer = replace(job, seq_len=job.seq_len + extra)
    # the training step grows strictly; the peak may be set by the load or optimizer phase
    assert _step_gb(m, longer, n) > _step_gb(m, job, n)
    assert memory_per_gpu(m, longer, n).total_gb >= memory_per_gpu(m, job, n).total_gb


@given(model_specs(), jobs(), gpus, st.integers(1, 8))
def test_memory_is_monotone_in_micro_batch(m: ModelSpec, job: Job, n: int, extra: int) -> None:
    bigger = replace(job, micro_batch=job.micro_batch + extra)
    assert _step_gb(m, bigger, n) > _step_gb(m, job, n)
    assert memory_per_gpu(m, bigger, n).total_gb >= memory_per_gpu(m, job, n).total_gb


@given(model_specs(), jobs(), gpus, st.integers(1, 32))
def test_memory_is_monotone_in_parameters(m: ModelSpec, job: Job, n: int, extra: int) -> None:
    deeper = replace(m, layers=m.layers + extra)
    p = count_params(deeper)
    deeper = replace(deeper, params=p, active_params=p)
    assert memory_per_gpu(deeper, job, n).total_gb > memory_per_gpu(m, job, n).total_gb


@given(model_specs(), jobs(method="full", sharding="none"))
def test_qlora_below_lora_below_full(m: ModelSpec, full: Job) -> None:
    # all-linear targets: bitsandbytes saves every linear input, so with attention-only LoRA a
    # long un-checkpointed QLoRA batch can legitimately keep more activations than LoRA does
    # the same LoRA dropout for both: QLoRA's recipe default (0.1) copies every adapter input,
    # which on a tiny model can outweigh what 4-bit weights save
    lora = replace(full, method="lora", lora_targets="all-linear", lora_dropout=0.0)
    qlora = replace(lora, method="qlora")
    q, lo, f = (memory_per_gpu(m, j) for j in (qlora, lora, full))
    assert q.total_gb < lo.total_gb
    if full.grad_checkpointing:
        assert lo.total_gb < f.total_gb
    else:
        # un-checkpointed on one GPU, PEFT's fp32 adapters under the Trainer's autocast keep a
        # bf16 copy of each adapter's input of their own (Job.adapter_input_round_trip), inputs
        # full fine-tuning shares: on a tiny model at a huge batch that can outweigh full's
        # 16 B per parameter of states, which still order the two
        def states(b: MemoryBreakdown) -> float:
            return b.weights_gb + b.gradients_gb + b.optimizer_gb

        assert states(lo) < states(f)


@given(model_specs(), jobs(sharding="zero3"), st.integers(1, 6), st.integers(1, 6))
def test_from_two_gpus_on_more_gpus_under_zero3_never_increase_model_states(
    m: ModelSpec, job: Job, log_n: int, more: int
) -> None:
    """Shards shrink as 1/n; the gathered set (a full-size buffer beside the shard) stays."""

    def states(n: int) -> float:
        return model_states(m, job, n).total / 1e9

    n = 2**log_n
    assert states(n * 2**more) <= states(n) + 1e-12


def test_two_gpus_under_zero3_need_more_than_one_only_when_the_gathered_set_is_over_half() -> None:
    """One GPU shards and gathers nothing (FSDP runs NO_SHARD at world size 1); two hold half the
    weights plus the whole gathered set. An 8B model saves; a two-layer toy, whose two live units
    and root are all of it, pays half its weights more."""

    def spec(layers: int, hidden: int, heads: int, kv: int, inter: int, vocab: int) -> ModelSpec:
        m = ModelSpec(
            model_id=f"{layers}-layers", params=0, active_params=0, layers=layers, hidden_size=hidden,
            attention_heads=heads, kv_heads=kv, intermediate_size=inter, vocab_size=vocab,
            tied_embeddings=False, max_context=8192,
        )  # fmt: skip
        p = count_params(m)
        return replace(m, params=p, active_params=p)

    job = Job(method="lora", sharding="zero3")
    big = spec(32, 4096, 32, 8, 14336, 128_256)  # Llama-3.1-8B's shape
    assert model_states(big, job, 2).weights < model_states(big, job, 1).weights
    toy = spec(2, 512, 8, 8, 2048, 32_000)
    one, two = model_states(toy, job, 1).weights, model_states(toy, job, 2).weights
    assert two == pytest.approx(one * 1.5, rel=0.02)


@given(
    st.floats(0, 1e4, allow_nan=False),
    st.floats(0.01, 100),
    st.floats(0.01, 100),
    st.sampled_from(["second", "minute", "hour"]),
    st.integers(1, 16),
)
def test_cost_is_linear_in_price(
    hours: float, price: float, factor: float, granularity: str, nodes: int
) -> None:
    base = run_cost(hours, price, granularity, nodes)  # type: ignore[arg-type]
    scaled = run_cost(hours, price * factor, granularity, nodes)  # type: ignore[arg-type]
    assert scaled == pytest.approx(base * factor, rel=1e-9)


@given(
    model_specs(),
    jobs(),
    st.floats(1e5, 1e10),
    st.floats(1.0, 10.0),
    st.sampled_from([1, 2, 8, 16]),
    st.sampled_from(["second", "minute", "hour"]),
)
@settings(max_examples=200)
def test_cost_is_monotone_in_tokens(
    m: ModelSpec, job: Job, tokens: float, more: float, n: int, granularity: str
) -> None:
    def cost(t: float) -> float:
        est = estimate_time(m, job, t, n, 8, 989.0, 7200.0, 3200.0)
        return run_cost(est.hours, 30.0, granularity, est.nodes)  # type: ignore[arg-type]

    assert cost(tokens * more) >= cost(tokens)


@given(
    st.floats(0, 1e5, allow_nan=False),
    st.sampled_from(["second", "minute", "hour"]),
    st.floats(0, 2),
)
def test_billing_rounding_never_lowers_cost(hours: float, granularity: str, minimum: float) -> None:
    billed = billed_hours(hours, granularity, minimum)  # type: ignore[arg-type]
    assert billed >= hours
    assert billed >= minimum
    unit = {"second": 1 / 3600, "minute": 1 / 60, "hour": 1.0}[granularity]
    assert billed < max(hours, minimum) + unit + 1e-9


@pytest.mark.parametrize(
    ("hours", "granularity", "expected"),
    [
        (0.1, "second", 0.1),
        (1.0, "hour", 1.0),
        (1.01, "hour", 2.0),
        (0.5 + 1 / 3600, "minute", 0.5 + 1 / 60),
        (0.0, "hour", 0.0),
    ],
)
def test_billed_hours_examples(hours: float, granularity: str, expected: float) -> None:
    assert billed_hours(hours, granularity) == pytest.approx(expected)  # type: ignore[arg-type]


def test_billing_minimum_applies() -> None:
    assert billed_hours(0.05, "second", minimum_hours=1 / 60) == pytest.approx(0.05)
    assert billed_hours(0.001, "second", minimum_hours=1 / 60) == pytest.approx(1 / 60)


@given(
    st.floats(0.01, 1000),
    st.floats(0, 0.5),
    st.floats(0.05, 2),
    st.floats(0, 0.5),
    st.floats(0.1, 50),
)
def test_spot_cost_never_below_uninterrupted_cost(
    hours: float, rate: float, interval: float, restart: float, price: float
) -> None:
    spot = expected_spot_cost(hours, price, rate, interval, restart, "second")
    assert spot >= run_cost(hours, price, "second")


def test_expected_spot_hours_closed_form() -> None:
    # λ = 0.1/h, checkpoint every 1 h, 0.1 h restart: each interruption costs 0.6 h,
    # waste fraction 0.06, so 10 h of work takes 10 / 0.94 h
    assert expected_spot_hours(10, 0.1, 1.0, 0.1) == pytest.approx(10 / 0.94)
    assert expected_spot_hours(10, 0.0, 1.0, 0.1) == 10
    assert math.isinf(expected_spot_hours(10, 2.0, 1.0, 0.0))
