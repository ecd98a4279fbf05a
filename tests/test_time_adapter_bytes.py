"""The eager bf16 LoRA branch's traffic (issue 23): `result + lora_B(lora_A(dropout(x))) * scaling`
writes B's output (2 bytes per output element), scales it (read 2, write 2) and adds it to the
frozen output (read 2 + 2, write 2): 12 per d_out. The count said 10, two short of its own list;
the fp32 branch (28 per d_out) always counted B's write, so its total is unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job
from finetune.time import (
    EAGER_ADAPTER_OUT_BYTES,
    FP32_ADAPTER_OUT_BYTES,
    _elementwise_bytes_per_token,
    _fp32_adapter_bytes_per_token,
)
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
