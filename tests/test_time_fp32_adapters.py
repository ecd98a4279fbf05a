"""PEFT's fp32 adapters over a bf16 base (issue 23, the plain HF/PEFT stack): the input and output
casts each adapted linear runs, in time and in what autograd keeps, and where nothing is cast."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job, estimate_time
from finetune.memory import _adapted_linear_inputs, _layer_activation_bytes_per_token, memory_per_gpu
from finetune.time import (
    BACKWARD_OPS_RATIO,
    DISPATCH_SECONDS_PER_OP,
    FP32_ADAPTER_BACKWARD_RATIO,
    FP32_ADAPTER_OPS,
    ROUND_TRIP_BYTES,
    STREAM_EFFICIENCY,
    _fp32_adapter_bytes_per_token,
    _n_adapters,
    step_time,
)
from tests.factories import H100 as DATASHEET_H100
from warehouse.seed_models import load_models

LLAMA_8B = load_models()["meta-llama/Llama-3.1-8B"]
# a plain loop over the bf16 base: PEFT's fp32 adapters compute in fp32
PLAIN_LOOP = Job(method="lora", seq_len=2048, micro_batch=1, mixed_precision="none")

# the H100 SXM's 132 SMs (whitepaper table 3): these tests price GEMM tiles
H100 = replace(DATASHEET_H100, sm_count=132)


def _tps(job: Job) -> float:
    return estimate_time(LLAMA_8B, job, 1e8, 1, 1, H100.tflops, None, None, gpu=H100).tokens_per_s


def test_which_jobs_run_fp32_adapters() -> None:
    assert PLAIN_LOOP.fp32_adapters and not PLAIN_LOOP.adapter_input_round_trip
    assert replace(PLAIN_LOOP, method="qlora").fp32_adapters
    # the HF Trainer's autocast over bf16 modules (the default) round-trips LoRA's input only
    trainer = replace(PLAIN_LOOP, mixed_precision="fsdp")
    assert trainer.adapter_input_round_trip and not trainer.fp32_adapters
    assert not replace(trainer, method="qlora").adapter_input_round_trip
    # nothing is cast where the adapters compute in bf16 or the casts are fused away
    for job in (
        replace(PLAIN_LOOP, method="full"),
        replace(PLAIN_LOOP, precision="bf16-pure", mixed_precision="fsdp"),
        replace(PLAIN_LOOP, sharding="zero3"),
        replace(PLAIN_LOOP, sharding="zero2"),
        replace(PLAIN_LOOP, kernels="fused"),
        replace(PLAIN_LOOP, compiled=True),
        replace(PLAIN_LOOP, mixed_precision="autocast"),
        replace(trainer, sharding="zero3"),
    ):
        assert not (job.fp32_adapters or job.adapter_input_round_trip), job


def test_none_needs_fp32_adapters_to_exist() -> None:
    with pytest.raises(ValueError, match="bf16-mixed"):
        Job(method="lora", precision="bf16-pure", mixed_precision="none")


def test_fp32_branch_bytes_per_adapted_linear() -> None:
    h, q = LLAMA_8B.hidden_size, LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    kv = LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    qv = replace(PLAIN_LOOP, lora_targets="qv")
    # per adapted linear, beyond a bf16 adapter: input cast and fp32 read (10 − 2 per d_in), fp32
    # output, scale, add and cast back (28 − 12 per d_out: the bf16 branch writes B's output,
    # scales it and adds it, 2 + 4 + 6)
    expected = 8 * (h + h) + 16 * (q + kv)
    assert _fp32_adapter_bytes_per_token(LLAMA_8B, qv) == pytest.approx(expected)
    # dropout copies the fp32 input: 9 per d_in instead of 5
    dropped = replace(qv, lora_dropout=0.1)
    assert _fp32_adapter_bytes_per_token(LLAMA_8B, dropped) == pytest.approx(expected + 4 * (h + h))
    # under the Trainer's autocast only the input goes to fp32 and back: 12 per d_in
    trainer = replace(qv, mixed_precision="fsdp")
    assert _fp32_adapter_bytes_per_token(LLAMA_8B, trainer) == pytest.approx(ROUND_TRIP_BYTES * 2 * h)
    assert (
        _fp32_adapter_bytes_per_token(LLAMA_8B, replace(qv, precision="bf16-pure", mixed_precision="fsdp"))
        == 0
    )


def test_the_casts_run_in_every_forward_and_once_more_in_backward() -> None:
    pure = replace(PLAIN_LOOP, precision="bf16-pure", mixed_precision="fsdp")
    for gc in (True, False):
        a = step_time(LLAMA_8B, replace(pure, grad_checkpointing=gc), H100, 1, None, True)
        b = step_time(LLAMA_8B, replace(PLAIN_LOOP, grad_checkpointing=gc), H100, 1, None, True)
        passes = (2 if gc else 1) + FP32_ADAPTER_BACKWARD_RATIO
        extra = _fp32_adapter_bytes_per_token(LLAMA_8B, PLAIN_LOOP) * LLAMA_8B.layers * 2048 * passes
        assert b.elementwise_s - a.elementwise_s == pytest.approx(
            extra / (H100.bandwidth_bytes_per_s * STREAM_EFFICIENCY)
        )
        # two more ops per adapter in every forward and backward
        ops = FP32_ADAPTER_OPS * _n_adapters(LLAMA_8B, PLAIN_LOOP) * ((2 if gc else 1) + BACKWARD_OPS_RATIO)
        assert b.dispatch_s - a.dispatch_s == pytest.approx(ops * DISPATCH_SECONDS_PER_OP)


def test_new_user_8b_lora_on_one_h100_orders_by_what_it_casts() -> None:
    # the new-user case: a plain loop is slowest, the Trainer's autocast next, bf16 adapters
    # (FSDP/DeepSpeed-style or bf16-pure) fastest
    plain, trainer = _tps(PLAIN_LOOP), _tps(replace(PLAIN_LOOP, mixed_precision="fsdp"))
    pure = _tps(replace(PLAIN_LOOP, precision="bf16-pure", mixed_precision="fsdp"))
    assert plain < trainer < pure
    # the casts are a per-token cost: a longer step does not amortize them
    long = replace(PLAIN_LOOP, seq_len=8192, micro_batch=2)
    long_pure = replace(long, precision="bf16-pure", mixed_precision="fsdp")
    assert _tps(long) / _tps(long_pure) < 0.9


def test_autograd_keeps_each_adapters_own_copy_of_its_input() -> None:
    job = replace(PLAIN_LOOP, grad_checkpointing=False)
    pure = replace(job, precision="bf16-pure", mixed_precision="fsdp")
    h, inter = LLAMA_8B.hidden_size, LLAMA_8B.intermediate_size
    inputs = _adapted_linear_inputs(LLAMA_8B, job)
    # bf16 adapters share the normed q/k/v input (2h), the gate/up input (2h) and down's (2I);
    # fp32 adapters each keep their own fp32 copy instead
    shared = 2 * h + 2 * h + 2 * inter
    fp32 = _layer_activation_bytes_per_token(LLAMA_8B, job, 2048)
    base = _layer_activation_bytes_per_token(LLAMA_8B, pure, 2048)
    assert fp32 - base == pytest.approx(4 * inputs - shared)
    # under the Trainer's autocast the copy lora_A keeps is autocast's bf16 cast
    trainer = replace(job, mixed_precision="fsdp")
    assert _layer_activation_bytes_per_token(LLAMA_8B, trainer, 2048) - base == pytest.approx(
        2 * inputs - shared
    )
    # bitsandbytes' 4-bit linear keeps its bf16 input too: nothing shared is dropped
    q_fp32 = _layer_activation_bytes_per_token(LLAMA_8B, replace(job, method="qlora", lora_dropout=0.0), 2048)
    q_base = _layer_activation_bytes_per_token(
        LLAMA_8B, replace(pure, method="qlora", lora_dropout=0.0, optimizer="adamw"), 2048
    )
    assert q_fp32 - q_base == pytest.approx(4 * inputs)


def test_without_checkpointing_the_fp32_copies_weigh_on_the_peak() -> None:
    job = replace(PLAIN_LOOP, grad_checkpointing=False)
    trainer = replace(job, mixed_precision="fsdp")
    assert memory_per_gpu(LLAMA_8B, job, 1).total_gb > memory_per_gpu(LLAMA_8B, trainer, 1).total_gb
