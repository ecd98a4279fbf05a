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
