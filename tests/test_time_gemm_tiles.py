"""GEMM tile and wave quantization (issue 23): a GEMM's output is computed in GEMM_TILE tiles, one
per SM per wave, so a small or odd-shaped output pays for whole tiles and whole waves. The step's
linears are counted shape by shape: forward T×d_out, input gradient T×d_in, weight gradient
d_in×d_out (full fine-tuning only)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from answers.estimate import StatedHardware, find_gpu, stated_offer
from finetune import Accelerator, FinetuneJob, Job, ModelSpec
from finetune.architecture import _attention_params_per_layer, _mlp_params_per_layer
from finetune.offer import hardware_of
from finetune.placement import Hardware, MemoryTable, place, plan_job
from finetune.time import (
    GEMM_EFFICIENCY,
    GEMM_TILE,
    _passes,
    _recompute_params,
    gemm_shape_efficiency,
    gemm_shapes,
    step_time,
    tile_efficiency,
)
from tests.factories import A100 as DATASHEET_A100
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_3B = MODELS["meta-llama/Llama-3.2-3B"]
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
TILE_AREA = GEMM_TILE[0] * GEMM_TILE[1]
A100 = replace(DATASHEET_A100, sm_count=108)
L40S = Accelerator(
    tflops=362.0, memory_bandwidth_gbps=864.0, architecture="Ada Lovelace", vram_gb=48, sm_count=142
)
LORA = Job(method="lora", precision="bf16-mixed", seq_len=2048, micro_batch=2, grad_checkpointing=False)
FULL = Job(method="full", precision="bf16-pure", seq_len=2048, micro_batch=2, grad_checkpointing=False)


# --- tile_efficiency ----------------------------------------------------------------------------


def test_a_shape_that_fills_whole_waves_has_no_loss() -> None:
    # 9 × 12 = 108 tiles of 256×128: exactly one wave on A100's 108 SMs
    assert tile_efficiency(9 * 256, 12 * 128, 108) == pytest.approx(1.0)
    # and two full waves
    assert tile_efficiency(18 * 256, 12 * 128, 108) == pytest.approx(1.0)


def test_one_tile_over_a_wave_boundary_costs_a_whole_wave() -> None:
    # 109 tiles on 108 SMs: two waves for 109 tiles' work
    assert tile_efficiency(109 * 256, 128, 108) == pytest.approx(109 / 216)


def test_a_partial_tile_is_computed_whole() -> None:
    # 257 rows need two 256-row tiles on one SM: half of the second one is wasted
    assert tile_efficiency(257, 128, 1) == pytest.approx(257 * 128 / (2 * TILE_AREA))


def test_the_better_orientation_of_the_tile_is_taken() -> None:
    # a 128×256 output is one tile turned one way, two half-empty ones the other
    assert tile_efficiency(128, 256, 1) == pytest.approx(1.0)
    assert tile_efficiency(256, 128, 1) == pytest.approx(1.0)


def test_a_small_output_leaves_most_sms_idle() -> None:
    # T72's k projection on an L40S: 840 tokens × 1024 outputs is 16 tiles of 142 slots
    assert tile_efficiency(840, 1024, 142) == pytest.approx(840 * 1024 / (142 * TILE_AREA))


def test_non_positive_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        tile_efficiency(0, 128, 108)
    with pytest.raises(ValueError, match="positive"):
        tile_efficiency(128, 128, 0)


dims = st.integers(min_value=1, max_value=40_000)
sms = st.integers(min_value=1, max_value=200)


@given(dims, dims, sms)
def test_efficiency_is_a_share(m: int, n: int, sm_count: int) -> None:
    assert 0.0 < tile_efficiency(m, n, sm_count) <= 1.0 + 1e-12


@given(dims, dims, sms)
def test_efficiency_does_not_depend_on_which_side_is_m(m: int, n: int, sm_count: int) -> None:
    assert tile_efficiency(m, n, sm_count) == pytest.approx(tile_efficiency(n, m, sm_count))


@given(dims, dims, sms)
def test_a_larger_output_never_takes_less_time(m: int, n: int, sm_count: int) -> None:
    # time ∝ waves = useful outputs / efficiency: one more row can only add work
    def waves(rows: int) -> float:
        return rows * n / tile_efficiency(rows, n, sm_count)

    assert waves(m + 1) >= waves(m) - 1e-6


@given(dims, dims, sms)
def test_shapes_that_are_whole_waves_of_whole_tiles_lose_nothing(m: int, n: int, sm_count: int) -> None:
    # scale the output up to whole tiles and then to whole waves
    rows, cols = math.ceil(m / GEMM_TILE[0]), math.ceil(n / GEMM_TILE[1])
    assert tile_efficiency(rows * sm_count * GEMM_TILE[0], cols * GEMM_TILE[1], sm_count) == pytest.approx(
        1.0
    )


# --- gemm_shapes --------------------------------------------------------------------------------


def _step_gemm_flops(model: ModelSpec, job: Job, tokens: int) -> float:
    """The decoder and head GEMM FLOPs step_time counts, norms left out (they are no GEMM)."""
    flop_passes, _ = _passes(job)
    per_layer = _attention_params_per_layer(model) + _mlp_params_per_layer(model, active=True)
    gemm_params = model.layers * per_layer + model.vocab_size * model.hidden_size
    return (2.0 * gemm_params * flop_passes + 2.0 * _recompute_params(model, job)) * tokens


@pytest.mark.parametrize(
    "job",
    [
        LORA,
        FULL,
        replace(LORA, grad_checkpointing=True),
        replace(FULL, grad_checkpointing=True, checkpoint_policy="selective"),
        replace(LORA, method="qlora", grad_checkpointing=True, checkpoint_policy="selective"),
    ],
    ids=["lora", "full", "lora-gc", "full-selective", "qlora-selective"],
)
def test_the_shapes_add_up_to_the_flops_the_step_counts(job: Job) -> None:
    tokens = job.seq_len * job.micro_batch
    shapes = gemm_shapes(LLAMA_8B, job, tokens)
    assert sum(g.flops for g in shapes) == pytest.approx(_step_gemm_flops(LLAMA_8B, job, tokens))


def test_routed_experts_share_the_tokens_and_add_up_to_the_active_flops() -> None:
    # Mixtral: 8 experts, 2 per token; 4096 tokens give each expert 1024 rows on average
    mixtral = MODELS["mistralai/Mixtral-8x7B-v0.1"]
    shapes = gemm_shapes(mixtral, FULL, 4096)
    # the gate and up projections' forward: rows × I over h
    inter, h = mixtral.intermediate_size, mixtral.hidden_size
    expert_rows = {g.m for g in shapes if (g.n, g.k) == (inter, h)}
    assert expert_rows == {4096 * 2 // 8}
    # all of the active FLOPs but the router's (h → 8 logits: forward, dX, dW in 32 layers)
    router = 2.0 * 4096 * h * mixtral.num_experts * 3 * mixtral.layers
    assert sum(g.flops for g in shapes) == pytest.approx(_step_gemm_flops(mixtral, FULL, 4096) - router)


def test_weight_gradients_are_weight_shaped_and_only_in_full_fine_tuning() -> None:
    h, inter = LLAMA_8B.hidden_size, LLAMA_8B.intermediate_size
    tokens = 1000  # no model dimension: a reduction over it can only be a weight gradient
    full = gemm_shapes(LLAMA_8B, FULL, tokens)
    lora = gemm_shapes(LLAMA_8B, LORA, tokens)
    # dW of down_proj (I → h): a d_in × d_out = I × h output reduced over the tokens
    assert any((g.m, g.n, g.k) == (inter, h, tokens) for g in full)
    assert not any(g.k == tokens for g in lora)
    assert len(full) == len(lora) + 8  # 7 decoder linears and the head


def test_forward_and_input_gradient_shapes_of_one_linear() -> None:
    h, kv = LLAMA_8B.hidden_size, LLAMA_8B.kv_heads * LLAMA_8B.head_dim_
    shapes = gemm_shapes(LLAMA_8B, LORA, 4096)
    # k_proj (h → kv): forward T×kv over h; input gradient T×h over kv
    assert any((g.m, g.n, g.k, g.calls) == (4096, kv, h, LLAMA_8B.layers) for g in shapes)
    assert any((g.m, g.n, g.k, g.calls) == (4096, h, kv, LLAMA_8B.layers) for g in shapes)


def test_recompute_reruns_the_forward_shapes_of_the_decoder_not_the_head() -> None:
    job = replace(LORA, grad_checkpointing=True)
    vocab, h = LLAMA_8B.vocab_size, LLAMA_8B.hidden_size
    shapes = gemm_shapes(LLAMA_8B, job, 4096)
    head = [g for g in shapes if g.n == vocab]
    assert [g.calls for g in head] == [1]
    q_forward = next(
        g for g in shapes if (g.m, g.n, g.k) == (4096, LLAMA_8B.attention_heads * LLAMA_8B.head_dim_, h)
    )
    assert q_forward.calls == 2 * LLAMA_8B.layers


# --- gemm_shape_efficiency and step_time --------------------------------------------------------


def test_without_an_sm_count_the_flat_efficiency_stays() -> None:
    assert gemm_shape_efficiency(LLAMA_8B, LORA, replace(A100, sm_count=None), 4096) == GEMM_EFFICIENCY
    # AMD's matrix cores are outside the NVIDIA tile model: its measured share, no wave term
    mi300x = Accelerator(tflops=1307.0, architecture="CDNA 3", sm_count=304, matmul_share=668.4 / 1307.0)
    assert gemm_shape_efficiency(LLAMA_8B, LORA, mi300x, 4096) == pytest.approx(668.4 / 1307.0)


def test_big_steps_keep_nearly_the_big_shape_efficiency() -> None:
    # 8B at 4096 tokens per micro-step on A100: a 4096×4096 output is 512 tiles in 5 waves of
    # 108 (0.95), the MLP's 4096×14336 ones 0.98, and only k and v (4096×1024: 128 tiles, 2
    # waves) lose 40 %: 5 % in all
    eff = gemm_shape_efficiency(LLAMA_8B, LORA, A100, 4096)
    assert eff == pytest.approx(0.95 * GEMM_EFFICIENCY, abs=0.01)
    assert eff <= GEMM_EFFICIENCY


def test_small_steps_lose_to_tile_and_wave_quantization() -> None:
    # T72: 3B, 4 × 210 tokens on an L40S
    small = gemm_shape_efficiency(LLAMA_3B, LORA, L40S, 840)
    assert small < 0.8 * GEMM_EFFICIENCY
    assert small < gemm_shape_efficiency(LLAMA_3B, LORA, L40S, 8192)


def test_step_time_prices_the_gemms_at_their_shapes() -> None:
    job = replace(LORA, seq_len=210, micro_batch=4)
    flat = step_time(LLAMA_3B, job, replace(L40S, sm_count=None), 1, None, True)
    tiled = step_time(LLAMA_3B, job, L40S, 1, None, True)
    assert tiled.matmul_s > flat.matmul_s
    # everything but the matmuls is untouched
    assert (tiled.elementwise_s, tiled.dispatch_s, tiled.loss_s) == (
        flat.elementwise_s,
        flat.dispatch_s,
        flat.loss_s,
    )


# --- from the seeds to the estimate -------------------------------------------------------------


def test_a_stated_gpu_and_its_offer_hardware_carry_the_seed_sm_count() -> None:
    gpu = find_gpu("L40S")
    row = stated_offer(gpu, StatedHardware(gpu="L40S"))
    assert row["sm_count"] == gpu.sm_count == 142
    assert hardware_of(row).sm_count == 142


@pytest.mark.parametrize(("gpu_count", "slower"), [(1.0, True), (0.5, False)], ids=["whole", "slice"])
def test_plans_price_the_gemm_waves_of_whole_gpus_only(gpu_count: float, slower: bool) -> None:
    # T72's step (3B LoRA, 4 × 210 tokens) on an L40S; a slice's SMs are not a share of the GPU's
    fjob = FinetuneJob("small", LLAMA_3B.model_id, replace(LORA, seq_len=210, micro_batch=4), 10_000_000, 1.0)
    memory = MemoryTable().for_job(LLAMA_3B, fjob.job)

    def hours(sm_count: int | None) -> float:
        hw = Hardware("L40S", gpu_count, 48.0, 362.0, None, None, 864.0, "Ada Lovelace", sm_count=sm_count)
        plan = plan_job(fjob, hw, place(memory, hw.gpus_per_node, hw.vram_gb, 1), memory)
        assert plan.estimated_hours is not None
        return plan.estimated_hours

    assert (hours(142) > hours(None)) is slower
    assert hours(142) >= hours(None)
