"""The elementwise work of other block kinds (issue 23): the time model counted every family's
layer as Llama's (two RMSNorms written in torch ops with an fp32 upcast, rotary on q and k).
LayerNorm families run F.layer_norm, one native kernel; a parallel block has one norm; families
with learned positions or ALiBi (MPT, GPT-2, OPT, BLOOM, ...) rotate nothing. Memory already read
these block kinds; now time does too."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job, ModelSpec, estimate_time
from finetune.architecture import block_kind, model_from_hf_config
from finetune.time import (
    AUTOCAST_ROTARY_EXTRA_BYTES,
    LAYER_NORM_OPS,
    OPS_PER_LAYER_FORWARD,
    RMS_NORM_OPS,
    ROTARY_OPS,
    _autocast_elementwise_bytes_per_token,
    _eager_ops_per_layer_forward,
    _elementwise_bytes_per_token,
)
from tests.factories import A100
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
PHI_2 = MODELS["microsoft/phi-2"]
FALCON_7B = MODELS["tiiuae/falcon-7b"]
# llm-foundry's MPT-7B benchmark shape (benchmarks/data/configs/mpt-7b.json)
MPT_7B = model_from_hf_config(
    {
        "model_type": "mpt",
        "d_model": 4096,
        "n_heads": 32,
        "n_layers": 32,
        "expansion_ratio": 4,
        "vocab_size": 50368,
    },
    "mpt-7b",
)
EAGER = Job(method="full", seq_len=2048, micro_batch=4)


def _as_llama_block(model: ModelSpec) -> ModelSpec:
    """The same shapes as a Llama-style block: two RMSNorms, rotary."""
    return replace(model, layer_norm=False, parallel_block=False, rotary=True)


# --- which families rotate ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "model_type", ["mpt", "gpt2", "gpt_bigcode", "gpt_neo", "opt", "biogpt", "bloom", "t5"]
)
def test_learned_position_and_alibi_families_rotate_nothing(model_type: str) -> None:
    assert block_kind({"model_type": model_type})["rotary"] is False


@pytest.mark.parametrize(
    "model_type", ["llama", "mistral", "qwen2", "phi", "gptj", "gpt_neox", "falcon", "starcoder2"]
)
def test_rotary_families_rotate(model_type: str) -> None:
    assert block_kind({"model_type": model_type})["rotary"] is True


def test_falcon_with_alibi_rotates_nothing() -> None:
    assert block_kind({"model_type": "falcon", "alibi": True})["rotary"] is False


def test_seeded_models_keep_their_rotary() -> None:
    # every seeded family rotates (Phi partially: its slices and cat still touch all of q and k)
    assert LLAMA_8B.rotary and PHI_2.rotary and FALCON_7B.rotary
    assert not MPT_7B.rotary and MPT_7B.layer_norm and not MPT_7B.gated_mlp


# --- the bytes and ops each kind moves ----------------------------------------------------------


def test_layer_norm_moves_4h_per_norm_where_rmsnorm_moves_36h() -> None:
    h = MPT_7B.hidden_size
    q = kv = MPT_7B.attention_heads * MPT_7B.head_dim_
    llama_like = _elementwise_bytes_per_token(_as_llama_block(MPT_7B), EAGER)
    mpt = _elementwise_bytes_per_token(MPT_7B, EAGER)
    # two norms at 36h → 4h, and no rotary (20 bytes per q and k element)
    assert llama_like - mpt == pytest.approx(2 * (36 - 4) * h + 20 * (q + kv))


def test_a_parallel_block_runs_one_norm() -> None:
    assert PHI_2.norms_per_layer == 1 and LLAMA_8B.norms_per_layer == 2
    h = PHI_2.hidden_size
    sequential = _elementwise_bytes_per_token(replace(PHI_2, parallel_block=False), EAGER)
    assert sequential - _elementwise_bytes_per_token(PHI_2, EAGER) == pytest.approx(4 * h)


def test_the_fused_stack_counts_one_norm_kernel_per_norm() -> None:
    fused = replace(EAGER, kernels="fused")
    h = PHI_2.hidden_size
    sequential = _elementwise_bytes_per_token(replace(PHI_2, parallel_block=False), fused)
    assert sequential - _elementwise_bytes_per_token(PHI_2, fused) == pytest.approx(4 * h)


def test_eager_ops_follow_the_block_kind() -> None:
    assert _eager_ops_per_layer_forward(LLAMA_8B) == OPS_PER_LAYER_FORWARD
    # MPT: two F.layer_norm calls, no rotary
    mpt = OPS_PER_LAYER_FORWARD - 2 * RMS_NORM_OPS + 2 * LAYER_NORM_OPS - ROTARY_OPS
    assert _eager_ops_per_layer_forward(MPT_7B) == mpt
    # Phi: one F.layer_norm, partial rotary
    assert _eager_ops_per_layer_forward(PHI_2) == OPS_PER_LAYER_FORWARD - 2 * RMS_NORM_OPS + LAYER_NORM_OPS


def test_autocast_runs_layer_norm_in_fp32() -> None:
    # autocast's fp32 list: F.layer_norm reads and writes fp32, 8h against the bf16 4h
    job = replace(EAGER, precision="bf16-mixed", mixed_precision="autocast")
    h = MPT_7B.hidden_size
    bf16_norm_model = replace(MPT_7B, layer_norm=False)
    with_ln = _autocast_elementwise_bytes_per_token(MPT_7B, job)
    # the RMSNorm path under autocast saves its two casts (−8h each); the LayerNorm path adds 4h each
    assert with_ln - _autocast_elementwise_bytes_per_token(bf16_norm_model, job) == pytest.approx(
        2 * (4 + 8) * h
    )


def test_autocast_norm_traffic_counts_the_block_s_norms_on_every_stack() -> None:
    # an RMSNorm block with one norm (parallel) moves half the norm traffic of a sequential one,
    # eager (its two casts saved, −8h each) and fused (4h each) alike
    job = replace(EAGER, precision="bf16-mixed", mixed_precision="autocast")
    rms_parallel = replace(PHI_2, layer_norm=False)
    rms_sequential = replace(rms_parallel, parallel_block=False)
    h = PHI_2.hidden_size
    for kernels, per_norm in (("plain", -8.0), ("fused", 4.0)):
        stack = replace(job, kernels=kernels)
        one = _autocast_elementwise_bytes_per_token(rms_parallel, stack)
        two = _autocast_elementwise_bytes_per_token(rms_sequential, stack)
        assert two - one == pytest.approx(per_norm * h), kernels


def test_no_rotary_means_no_autocast_rotary_traffic() -> None:
    job = replace(EAGER, precision="bf16-mixed", mixed_precision="autocast")
    q = kv = MPT_7B.attention_heads * MPT_7B.head_dim_
    rotating = _autocast_elementwise_bytes_per_token(replace(MPT_7B, rotary=True), job)
    assert rotating - _autocast_elementwise_bytes_per_token(MPT_7B, job) == pytest.approx(
        AUTOCAST_ROTARY_EXTRA_BYTES * (q + kv)
    )


# --- the step ----------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [MPT_7B, PHI_2, FALCON_7B], ids=["mpt", "phi", "falcon"])
def test_a_lighter_block_never_takes_longer_than_llamas(model: ModelSpec) -> None:
    def step(m: ModelSpec) -> float:
        return estimate_time(m, EAGER, 1e9, 1, 1, A100.tflops, None, None, gpu=A100).step.elementwise_s

    assert step(model) < step(_as_llama_block(model))


def test_only_elementwise_and_dispatch_move() -> None:
    a = estimate_time(MPT_7B, EAGER, 1e9, 1, 1, A100.tflops, None, None, gpu=A100).step
    b = estimate_time(_as_llama_block(MPT_7B), EAGER, 1e9, 1, 1, A100.tflops, None, None, gpu=A100).step
    assert a.matmul_s == b.matmul_s and a.attention_s == b.attention_s and a.loss_s == b.loss_s
    assert a.dispatch_s < b.dispatch_s
