"""Autocast over fp32 modules (Job.mixed_precision="autocast") in the time model: the weight and
input casts and the fp32 residual stream, against bf16 modules (FSDP MixedPrecision / bf16 load)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job, estimate_time
from finetune.architecture import matmul_params
from finetune.memory import trainable_params
from finetune.time import (
    AUTOCAST_CAST_BYTES,
    AUTOCAST_OPS_PER_LINEAR,
    BACKWARD_OPS_RATIO,
    DISPATCH_SECONDS_PER_OP,
    FP32_ADAPTER_OPS,
    _autocast_elementwise_bytes_per_token,
    _autocast_weight_cast_bytes,
    _linears_per_layer,
    _n_adapters,
    _recompute_params,
    step_time,
)
from tests.factories import H100
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]


def _tps(job: Job) -> float:
    return estimate_time(LLAMA_8B, job, 1e8, 1, 1, H100.tflops, None, None, gpu=H100).tokens_per_s


@pytest.mark.parametrize("method", ["full", "lora"])
def test_autocast_over_fp32_modules_is_slower_than_bf16_modules(method: str) -> None:
    bf16 = Job(method=method, seq_len=2048, micro_batch=1, grad_checkpointing=True)
    assert _tps(replace(bf16, mixed_precision="autocast")) < _tps(bf16)


def test_fp32_modules_cost_per_step_where_fp32_adapters_cost_per_token() -> None:
    # autocast over fp32 modules casts every weight once per pass (a per-step cost); a bf16 base
    # running PEFT's fp32 adapters without autocast casts every adapter's input and output (a
    # per-token cost): the first is dearer at a short step, the second at a long one
    short = Job(method="lora", seq_len=512, micro_batch=1, grad_checkpointing=True)
    long = replace(short, seq_len=8192, micro_batch=4)
    for job, autocast_slower in ((short, True), (long, False)):
        fp32_modules = _tps(replace(job, mixed_precision="autocast"))
        fp32_adapters = _tps(replace(job, mixed_precision="none"))
        assert (fp32_modules < fp32_adapters) is autocast_slower


def test_bf16_modules_pay_no_autocast_term() -> None:
    job = Job(method="lora")
    assert _autocast_weight_cast_bytes(LLAMA_8B, job) == 0.0
    assert _autocast_elementwise_bytes_per_token(LLAMA_8B, job) == 0.0


def test_every_pass_casts_every_weight_it_uses_and_trained_gradients_are_cast_back() -> None:
    for job in (
        Job(method="lora", mixed_precision="autocast", grad_checkpointing=True),
        Job(method="lora", mixed_precision="autocast", grad_checkpointing=False),
        Job(method="full", mixed_precision="autocast", grad_checkpointing=True),
    ):
        passes = matmul_params(LLAMA_8B) + _recompute_params(LLAMA_8B, job)
        expected = AUTOCAST_CAST_BYTES * (passes + trainable_params(LLAMA_8B, job))
        assert _autocast_weight_cast_bytes(LLAMA_8B, job) == pytest.approx(expected)
    # checkpointing recomputes the layers, whose weights are cast again
    gc = Job(method="lora", mixed_precision="autocast", grad_checkpointing=True)
    assert _autocast_weight_cast_bytes(LLAMA_8B, gc) > _autocast_weight_cast_bytes(
        LLAMA_8B, replace(gc, grad_checkpointing=False)
    )


def test_a_qlora_base_is_dequantized_not_cast() -> None:
    job = Job(method="qlora", mixed_precision="autocast")
    assert _autocast_weight_cast_bytes(LLAMA_8B, job) == 0.0
    # its fp32 residual stream still widens the elementwise work
    assert _autocast_elementwise_bytes_per_token(LLAMA_8B, job) > 0.0


def test_a_compiled_job_fuses_the_casts_and_widens_only_the_stream() -> None:
    job = Job(method="lora", mixed_precision="autocast", compiled=True)
    assert _autocast_elementwise_bytes_per_token(LLAMA_8B, job) == 8.0 * LLAMA_8B.hidden_size
    eager = replace(job, compiled=False)
    assert _autocast_elementwise_bytes_per_token(LLAMA_8B, eager) > 8.0 * LLAMA_8B.hidden_size


def test_more_adapted_linears_read_more_fp32_inputs() -> None:
    qv = Job(method="lora", mixed_precision="autocast", lora_targets="qv")
    every = replace(qv, lora_targets="all-linear")
    h = LLAMA_8B.hidden_size
    # all-linear adds k, gate and up as readers of the fp32 normed stream: three more casts
    delta = _autocast_elementwise_bytes_per_token(LLAMA_8B, every) - _autocast_elementwise_bytes_per_token(
        LLAMA_8B, qv
    )
    assert delta == pytest.approx(3 * AUTOCAST_CAST_BYTES * h)


def test_autocast_dispatches_two_casts_per_linear_call() -> None:
    job = Job(method="lora", seq_len=512, micro_batch=1, grad_checkpointing=False, lora_targets="qv")
    plain = step_time(LLAMA_8B, job, H100, 1, None, True)
    cast = step_time(LLAMA_8B, replace(job, mixed_precision="autocast"), H100, 1, None, True)
    linears = _linears_per_layer(LLAMA_8B) * LLAMA_8B.layers + _n_adapters(LLAMA_8B, job)
    extra = AUTOCAST_OPS_PER_LINEAR * linears * (1 + BACKWARD_OPS_RATIO) * DISPATCH_SECONDS_PER_OP
    # the bf16-module job's adapters cast their input to fp32 and back (HF Trainer autocast over
    # bf16 modules): two ops per adapter that fp32 modules, whose stream is fp32 already, skip
    round_trip = (
        FP32_ADAPTER_OPS * _n_adapters(LLAMA_8B, job) * (1 + BACKWARD_OPS_RATIO) * DISPATCH_SECONDS_PER_OP
    )
    assert (
        job.adapter_input_round_trip and not replace(job, mixed_precision="autocast").adapter_input_round_trip
    )
    assert cast.dispatch_s - plain.dispatch_s == pytest.approx(extra - round_trip)


def test_autocast_needs_bf16_mixed() -> None:
    with pytest.raises(ValueError, match="bf16-mixed"):
        Job(precision="bf16-pure", mixed_precision="autocast")
