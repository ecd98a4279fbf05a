"""The eager rotary's traffic (issue 23): HF's `q * cos + rotate_half(q) * sin` was priced at 14
bytes per q and k element, which left out the copy rotate_half makes (the negated half, then the
cat). Counted op by op it is 20; Liger-Kernel's measurement of the same HF function is slower than
even 20 bytes at streaming bandwidth, so the count is a floor, not an overcount."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job
from finetune.time import (
    AUTOCAST_ROTARY_EXTRA_BYTES,
    EAGER_ROTARY_BYTES,
    STREAM_EFFICIENCY,
    _autocast_elementwise_bytes_per_token,
    _elementwise_bytes_per_token,
)
from warehouse.seed_models import load_models

LLAMA_8B = load_models()["meta-llama/Llama-3.1-8B"]
EAGER = Job(method="full", seq_len=2048, micro_batch=4)
BF16 = 2

# Liger-Kernel benchmark/data/all_benchmark_data.csv @ead96b61: 'rope', provider 'huggingface',
# forward, NVIDIA A100-SXM4-80GB (2,039 GB/s), 2024-09-03, one sequence of 32 q and 8 kv heads of
# 256 (benchmark_rope.py: q and k are (1, T, heads, 256).transpose(1, 2), as in HF attention)
A100_80GB_BYTES_PER_S = 2039e9
LIGER_HF_ROPE_FORWARD_MS = {8192: 1.933, 16384: 3.817}
Q_WIDTH, KV_WIDTH = 32 * 256, 8 * 256


def test_the_rotary_bytes_are_the_sum_of_its_ops() -> None:
    # per element of q (or k), bf16: -x2 reads and writes half the elements; cat reads both
    # halves and writes the rotated copy; q·cos and rot·sin read one tensor each and write one
    # (cos, sin: one row per position, shared by the heads); the sum reads two and writes one
    negate = BF16 / 2 + BF16 / 2
    cat = 2 * BF16
    products = 2 * (BF16 + BF16)
    total = 3 * BF16
    assert negate + cat + products + total == EAGER_ROTARY_BYTES == 20


def test_under_autocast_the_products_and_the_sum_widen_to_fp32_and_sdpa_casts_back() -> None:
    # cos and sin are fp32 under autocast over fp32 modules: each product reads bf16 q and writes
    # fp32; the sum reads two fp32 and writes one; rotate_half's copy stays bf16
    fp32 = 4
    negate_and_cat = BF16 + 2 * BF16
    products = 2 * (BF16 + fp32)
    total = 3 * fp32
    promoted = negate_and_cat + products + total
    cast_back = fp32 + BF16
    assert promoted == 30
    assert promoted + cast_back - EAGER_ROTARY_BYTES == AUTOCAST_ROTARY_EXTRA_BYTES == 16


def test_autocast_adds_the_extra_on_q_and_k_only_where_the_family_rotates() -> None:
    job = replace(EAGER, mixed_precision="autocast")
    q = LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    kv = LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    rotating = _autocast_elementwise_bytes_per_token(LLAMA_8B, job)
    still = _autocast_elementwise_bytes_per_token(replace(LLAMA_8B, rotary=False), job)
    assert rotating - still == pytest.approx(AUTOCAST_ROTARY_EXTRA_BYTES * (q + kv))
    # Liger's rotary works in place in q's dtype: nothing widens
    fused = replace(job, kernels="fused")
    assert _autocast_elementwise_bytes_per_token(LLAMA_8B, fused) == pytest.approx(
        _autocast_elementwise_bytes_per_token(replace(LLAMA_8B, rotary=False), fused)
    )


def test_the_eager_layer_moves_the_rotary_bytes_on_q_and_k() -> None:
    q = LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    kv = LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    rotating = _elementwise_bytes_per_token(LLAMA_8B, EAGER)
    still = _elementwise_bytes_per_token(replace(LLAMA_8B, rotary=False), EAGER)
    assert rotating - still == pytest.approx(EAGER_ROTARY_BYTES * (q + kv))


def test_fused_rotary_stays_one_read_and_one_write() -> None:
    # Liger's / Unsloth's rotary kernel rotates q and k in place: 4 bytes per element, unchanged
    q = LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    kv = LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    fused = replace(EAGER, kernels="fused")
    rotating = _elementwise_bytes_per_token(LLAMA_8B, fused)
    still = _elementwise_bytes_per_token(replace(LLAMA_8B, rotary=False), fused)
    assert rotating - still == pytest.approx(4 * (q + kv))


@pytest.mark.parametrize("positions", sorted(LIGER_HF_ROPE_FORWARD_MS))
def test_the_measured_hf_rotary_is_no_faster_than_its_bytes_at_streaming_bandwidth(positions: int) -> None:
    # were the count too high, the measured time would imply more than streaming bandwidth
    moved = EAGER_ROTARY_BYTES * positions * (Q_WIDTH + KV_WIDTH)
    achieved = moved / (LIGER_HF_ROPE_FORWARD_MS[positions] / 1e3)
    assert achieved < STREAM_EFFICIENCY * A100_80GB_BYTES_PER_S
    # and the old count (14) would have the same kernels at under a third of the bandwidth
    assert 14 * positions * (Q_WIDTH + KV_WIDTH) / (LIGER_HF_ROPE_FORWARD_MS[positions] / 1e3) < (
        0.33 * A100_80GB_BYTES_PER_S
    )
