"""The eager bf16 LoRA branch's traffic (issue 23): `result + lora_B(lora_A(dropout(x))) * scaling`
writes B's output (2 bytes per output element), scales it (read 2, write 2) and adds it to the
frozen output (read 2 + 2, write 2): 12 per d_out. The count said 10, two short of its own list;
the fp32 branch (28 per d_out) always counted B's write, so its total is unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job
from finetune.time import (
    BNB_RESULT_CLONE_BYTES,
    DROPOUT_BACKWARD_BYTES,
    EAGER_ADAPTER_BACKWARD_IN_BYTES,
    EAGER_ADAPTER_BACKWARD_OUT_BYTES,
    EAGER_ADAPTER_OUT_BYTES,
    ELEMENTWISE_BACKWARD_RATIO,
    FP32_ADAPTER_OUT_BYTES,
    _eager_adapter_backward_excess,
    _elementwise_bytes_per_token,
    _fp32_adapter_bytes_per_token,
    step_time,
)
from tests.factories import H100
from warehouse.seed_models import load_models

LLAMA_8B = load_models()["meta-llama/Llama-3.1-8B"]
BF16 = 2
# bf16 adapters: a sharded job's FSDP MixedPrecision casts them (no fp32 branch)
SHARDED = Job(
    method="lora", seq_len=2048, micro_batch=1, sharding="zero3", lora_targets="qv", lora_dropout=0.0
)


def test_the_bf16_branch_moves_b_output_the_scale_and_the_add() -> None:
    b_writes = BF16
    scale = BF16 + BF16
    add = 2 * BF16 + BF16
    assert b_writes + scale + add == EAGER_ADAPTER_OUT_BYTES == 12


def test_each_adapted_linear_adds_its_input_read_and_its_output_bytes() -> None:
    h = LLAMA_8B.hidden_size
    kv = LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    q = LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    adapted = _elementwise_bytes_per_token(LLAMA_8B, SHARDED)
    plain = _elementwise_bytes_per_token(LLAMA_8B, replace(SHARDED, method="full"))
    # q (h → q) and v (h → kv): A reads each input, the branch moves 12 per output element
    assert adapted - plain == pytest.approx(2 * (h + h) + EAGER_ADAPTER_OUT_BYTES * (q + kv))
    assert not (SHARDED.fp32_adapters or SHARDED.adapter_input_round_trip)


def test_the_fp32_branch_keeps_its_own_total() -> None:
    # a one-GPU eager loop without autocast keeps PEFT's fp32 adapters: bf16 count + fp32 extra
    one_gpu = replace(SHARDED, sharding="none", mixed_precision="none")
    assert one_gpu.fp32_adapters
    q = LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    kv = LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    h = LLAMA_8B.hidden_size
    extra = _fp32_adapter_bytes_per_token(LLAMA_8B, one_gpu)
    # the input side's extra (8 per d_in) aside, the output side totals FP32_ADAPTER_OUT_BYTES
    assert extra - 8 * (h + h) == pytest.approx((FP32_ADAPTER_OUT_BYTES - EAGER_ADAPTER_OUT_BYTES) * (q + kv))


def test_peft_clones_the_frozen_output_of_a_bitsandbytes_base() -> None:
    # tuners/lora/bnb.py Linear4bit.forward: result.clone() before the branch is added (read 2,
    # write 2 per output element); GPTQ's layer and lora.Linear add to the frozen output directly
    assert BNB_RESULT_CLONE_BYTES == BF16 + BF16
    q = LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    kv = LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    lora = _elementwise_bytes_per_token(LLAMA_8B, SHARDED)
    nf4 = _elementwise_bytes_per_token(LLAMA_8B, replace(SHARDED, method="qlora", quant="nf4"))
    gptq = _elementwise_bytes_per_token(LLAMA_8B, replace(SHARDED, method="qlora", quant="gptq"))
    assert nf4 - lora == pytest.approx(BNB_RESULT_CLONE_BYTES * (q + kv))
    assert gptq == pytest.approx(lora)


def test_the_fp32_branch_over_a_bitsandbytes_base_keeps_its_total_too() -> None:
    # bnb's fp32 count (clone 4, B 4, scale 8, cast 6, add 6 = 28) already holds the clone
    one_gpu = replace(SHARDED, sharding="none", mixed_precision="none", method="qlora", quant="nf4-dq")
    assert one_gpu.fp32_adapters
    q = LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    kv = LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    h = LLAMA_8B.hidden_size
    bf16_branch = _elementwise_bytes_per_token(LLAMA_8B, one_gpu)
    bf16_lora = _elementwise_bytes_per_token(LLAMA_8B, replace(one_gpu, method="lora"))
    extra = _fp32_adapter_bytes_per_token(LLAMA_8B, one_gpu)
    extra_lora = _fp32_adapter_bytes_per_token(LLAMA_8B, replace(one_gpu, method="lora"))
    # the bf16 count is 4 higher per d_out, the fp32 extra 4 lower: the same fp32 total
    assert bf16_branch + extra == pytest.approx(bf16_lora + extra_lora)
    assert extra - 8 * (h + h) == pytest.approx(
        (FP32_ADAPTER_OUT_BYTES - EAGER_ADAPTER_OUT_BYTES - BNB_RESULT_CLONE_BYTES) * (q + kv)
    )


# --- the branch's backward, counted instead of 2 × its forward ----------------------------------


def test_the_branchs_backward_is_its_ops() -> None:
    # per d_out: the scale's backward (read 2, write 2), lora_B's weight and input gradients each
    # read the incoming gradient (2 + 2)
    assert (BF16 + BF16) + 2 * BF16 == EAGER_ADAPTER_BACKWARD_OUT_BYTES == 8
    # per d_in: lora_A's weight gradient reads the input (2), its input gradient is written (2) and
    # added to the frozen path's (read 2 + 2, write 2)
    assert BF16 + BF16 + 3 * BF16 == EAGER_ADAPTER_BACKWARD_IN_BYTES == 10
    # dropout's backward: the gradient times the saved bool mask, written (2 + 1 + 2)
    assert BF16 + 1 + BF16 == DROPOUT_BACKWARD_BYTES == 5


def test_the_excess_replaces_the_ratio_for_the_branch_only() -> None:
    h = LLAMA_8B.hidden_size
    q = LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    kv = LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    forward = 2 * (h + h) + EAGER_ADAPTER_OUT_BYTES * (q + kv)
    backward = EAGER_ADAPTER_BACKWARD_IN_BYTES * (h + h) + EAGER_ADAPTER_BACKWARD_OUT_BYTES * (q + kv)
    excess = _eager_adapter_backward_excess(LLAMA_8B, SHARDED)
    assert excess == pytest.approx(backward - ELEMENTWISE_BACKWARD_RATIO * forward)
    # the branch's backward moves less than twice its forward
    assert excess < 0
    # with dropout: its forward copy (5 per d_in) against its backward's 5
    dropped = replace(SHARDED, lora_dropout=0.1)
    assert _eager_adapter_backward_excess(LLAMA_8B, dropped) - excess == pytest.approx(
        (DROPOUT_BACKWARD_BYTES - ELEMENTWISE_BACKWARD_RATIO * 5) * (h + h)
    )
    # fused and compiled stacks keep the ratio: no count has checked their adapter kernels
    assert _eager_adapter_backward_excess(LLAMA_8B, replace(SHARDED, kernels="fused")) == 0
    assert _eager_adapter_backward_excess(LLAMA_8B, replace(SHARDED, compiled=True)) == 0
    assert _eager_adapter_backward_excess(LLAMA_8B, replace(SHARDED, method="full")) == 0


def test_the_step_charges_the_counted_backward() -> None:
    step = step_time(LLAMA_8B, SHARDED, H100, 8, 450e9, True)
    tokens = SHARDED.seq_len * SHARDED.micro_batch
    passes = 2 + ELEMENTWISE_BACKWARD_RATIO  # forward and recompute (checkpointing), backward
    per_layer = _elementwise_bytes_per_token(LLAMA_8B, SHARDED) * passes + _eager_adapter_backward_excess(
        LLAMA_8B, SHARDED
    )
    # bf16 adapters under FSDP: no fp32 branch, no autocast casts; streamed at 90 % of 3,350 GB/s
    assert step.elementwise_s == pytest.approx(per_layer * LLAMA_8B.layers * tokens / (0.9 * 3350e9))
