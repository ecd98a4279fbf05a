"""The time model: a per-step roofline whose terms each follow from a stated physical cause."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Accelerator, Job, ModelSpec, estimate_time
from finetune.architecture import matmul_params
from finetune.time import (
    ATTENTION_BACKWARD_RATIO,
    CAUSAL_FRACTION,
    GEMM_EFFICIENCY,
    flops_per_token,
    step_time,
)
from tests.factories import A100, H100, RTX4090
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]


def _time(model: ModelSpec, job: Job, gpu: Accelerator, n: int = 1, intra: float | None = None):
    return estimate_time(model, job, 1e8, n, n, gpu.tflops, intra, None, gpu=gpu)


def test_large_step_matmuls_run_at_the_gemm_efficiency() -> None:
    job = Job(method="full", seq_len=4096, micro_batch=4, grad_checkpointing=False)
    step = step_time(LLAMA_8B, job, H100, 1, None, True)
    tokens = 4096 * 4
    expected = 6 * matmul_params(LLAMA_8B) * tokens / (989e12 * GEMM_EFFICIENCY)
    assert step.matmul_s == pytest.approx(expected)


def test_causal_flash_attention_counts_half_the_scores() -> None:
    flash = Job(method="full", seq_len=8192, grad_checkpointing=False, attention="flash")
    eager = replace(flash, attention="eager")
    matmuls = 6 * matmul_params(LLAMA_8B)
    attn_flash = flops_per_token(LLAMA_8B, flash) - matmuls
    attn_eager = flops_per_token(LLAMA_8B, eager) - matmuls
    assert attn_flash == pytest.approx(CAUSAL_FRACTION * attn_eager)
    # forward 4·L·a·d·s, halved, times (1 forward + 2.5 backward)
    forward = 4 * 32 * 32 * 128 * 8192 * CAUSAL_FRACTION
    assert attn_flash == pytest.approx(forward * (1 + ATTENTION_BACKWARD_RATIO))


def test_a100_reaches_a_higher_share_of_peak_than_h100() -> None:
    # H100 has 295 FLOPs per byte of bandwidth against A100's 153: memory-bound work costs it more
    job = Job(method="lora", seq_len=2048, micro_batch=4)
    assert _time(LLAMA_8B, job, A100).utilization > _time(LLAMA_8B, job, H100).utilization


def test_qlora_dequantization_is_a_per_step_cost() -> None:
    # bf16 adapters on both sides (FSDP/DeepSpeed-style bf16 compute), so that dequantization is
    # the only difference: under the HF Trainer's autocast a LoRA linear casts its input to the
    # fp32 adapter and back, which bitsandbytes' QLoRA linear skips (test_time_fp32_adapters)
    lora = Job(method="lora", seq_len=512, micro_batch=1, lora_dropout=0.0, precision="bf16-pure")
    qlora = replace(lora, method="qlora")
    small = step_time(LLAMA_8B, qlora, A100, 1, None, True)
    large = step_time(LLAMA_8B, replace(qlora, micro_batch=16), A100, 1, None, True)
    # the same seconds per step whatever the batch: it dequantizes the weights, not the tokens
    assert small.dequant_s == pytest.approx(large.dequant_s)
    assert small.dequant_s > 0
    slowdown_small = _time(LLAMA_8B, qlora, A100).hours / _time(LLAMA_8B, lora, A100).hours
    big = replace(lora, micro_batch=16)
    slowdown_large = (
        _time(LLAMA_8B, replace(big, method="qlora"), A100).hours / _time(LLAMA_8B, big, A100).hours
    )
    assert slowdown_small > slowdown_large > 1


def test_geforce_without_p2p_pays_communication_on_top_of_compute() -> None:
    job = Job(method="full", sharding="zero3", seq_len=2048, micro_batch=4)
    no_p2p = _time(LLAMA_8B, job, RTX4090, n=4)
    assert no_p2p.step is not None and not no_p2p.step.overlapped
    assert no_p2p.step.total_s == pytest.approx(no_p2p.step.compute_s + no_p2p.step.comm_s)
    with_p2p = _time(LLAMA_8B, job, replace(RTX4090, p2p=True), n=4, intra=32 * 8)
    assert with_p2p.hours < no_p2p.hours


def test_optimizer_step_is_amortized_over_gradient_accumulation() -> None:
    job = Job(method="full", precision="bf16-pure", seq_len=512, micro_batch=1)
    once = step_time(LLAMA_8B, job, H100, 1, None, True)
    accumulated = step_time(LLAMA_8B, replace(job, grad_accumulation=8), H100, 1, None, True)
    assert accumulated.optimizer_s == pytest.approx(once.optimizer_s / 8)


def test_padding_wastes_compute_in_proportion() -> None:
    # FlashAttention (the fused stack) stays causal on a padded batch: the waste is the padding
    packed = Job(method="lora", seq_len=2048, micro_batch=2, kernels="fused")
    padded = replace(packed, padding_efficiency=0.5)
    assert _time(LLAMA_8B, padded, A100).hours == pytest.approx(2 * _time(LLAMA_8B, packed, A100).hours)
    # the plain stack's masked SDPA also loses the causal skip: more than in proportion
    plain = replace(packed, kernels="plain")
    assert (
        _time(LLAMA_8B, replace(plain, padding_efficiency=0.5), A100).hours
        > 2 * _time(LLAMA_8B, plain, A100).hours
    )


def test_small_steps_hit_the_dispatch_floor() -> None:
    tiny = MODELS["meta-llama/Llama-3.2-1B"]
    step = step_time(tiny, Job(method="lora", seq_len=16, micro_batch=1), H100, 1, None, True)
    assert step.compute_s == pytest.approx(step.dispatch_s)


@pytest.mark.parametrize("tokens", [0.0, -1.0, float("inf"), float("nan")])
def test_tokens_must_be_positive_and_finite(tokens: float) -> None:
    with pytest.raises(ValueError, match="tokens"):
        estimate_time(LLAMA_8B, Job(), tokens, 1, 1, 989.0, None, None)


# --- per-step costs added with the second pass -------------------------------------------------


def test_selective_checkpointing_recomputes_the_even_matmuls_and_no_attention() -> None:
    none = Job(method="full", seq_len=8192, micro_batch=2, grad_checkpointing=False)
    selective = replace(none, grad_checkpointing=True, checkpoint_policy="selective")
    full = replace(selective, checkpoint_policy="full")
    m = LLAMA_8B
    # torchtitan's op policy reruns every second mm of a layer: k, o and up (w1, w3, w2 order)
    even = m.hidden_size * 1024 + 4096 * 4096 + 4096 * 14336
    extra = flops_per_token(m, selective) - flops_per_token(m, none)
    assert extra == pytest.approx(2 * m.layers * even)
    assert flops_per_token(m, none) < flops_per_token(m, selective) < flops_per_token(m, full)
    s_step = step_time(m, selective, H100, 1, None, True)
    n_step = step_time(m, none, H100, 1, None, True)
    assert s_step.attention_s == pytest.approx(n_step.attention_s)  # the SDPA output is saved
    assert s_step.elementwise_s > n_step.elementwise_s  # elementwise work is recomputed


def test_foreach_adamw_moves_more_bytes_than_fused() -> None:
    from finetune.time import optimizer_bytes_per_param

    pure = Job(method="full", precision="bf16-pure", grad_clip=False)
    # bf16 p = g = s = 2: fused reads p, g, m, v and writes p, m, v; foreach runs 8 kernels
    assert optimizer_bytes_per_param(replace(pure, optimizer_impl="fused")) == 2 * 2 + 2 + 4 * 2
    assert optimizer_bytes_per_param(pure) == 4 * 2 + 14 * 2 + 2 * 2
    # clipping reads the gradients for the norm, then reads and writes them to scale them
    assert optimizer_bytes_per_param(replace(pure, grad_clip=True)) == 40 + 3 * 2
    # bitsandbytes optimizers are one fused kernel whatever the job says
    eight = replace(pure, optimizer="adamw8bit")
    fused_eight = replace(eight, optimizer_impl="fused")
    assert optimizer_bytes_per_param(eight) == optimizer_bytes_per_param(fused_eight)


def test_the_loss_pass_scales_with_the_vocabulary_and_fused_loss_is_cheaper() -> None:
    job = Job(method="lora", seq_len=1024, micro_batch=2)
    standard = step_time(LLAMA_8B, job, H100, 1, None, True)
    fused = step_time(LLAMA_8B, replace(job, loss="fused"), H100, 1, None, True)
    wide = step_time(replace(LLAMA_8B, vocab_size=2 * LLAMA_8B.vocab_size), job, H100, 1, None, True)
    assert 0 < fused.loss_s < standard.loss_s
    assert wide.loss_s == pytest.approx(2 * standard.loss_s)


def test_fsdp_exposes_one_units_all_gather_and_reduce_scatter() -> None:
    job = Job(method="full", sharding="zero3", seq_len=2048, micro_batch=1)
    t = _time(LLAMA_8B, job, H100, n=8, intra=450 * 8)
    assert t.step is not None and t.step.exposed_comm_s > 0
    assert t.step.total_s == pytest.approx(max(t.step.compute_s, t.step.comm_s) + t.step.exposed_comm_s)
    # the exposed part is one unit's worth, a small share of the step's whole traffic
    assert t.step.exposed_comm_s < t.step.comm_s / LLAMA_8B.layers * 2


def test_pipeline_parallel_is_refused_with_a_way_out() -> None:
    from finetune import OutsideModelError, memory_per_gpu

    job = Job(method="full", sharding="zero3", pipeline_parallel=4)
    with pytest.raises(OutsideModelError, match=r"pipeline_parallel=4.*sharding='zero3'"):
        _time(LLAMA_8B, job, H100, n=8, intra=450 * 8)
    with pytest.raises(OutsideModelError, match="pipeline_parallel=4"):
        memory_per_gpu(LLAMA_8B, job, 8)


def test_padded_batch_length_follows_the_stated_mean_and_maximum() -> None:
    from finetune import padded_batch_length

    # one sample per batch is never padded
    assert padded_batch_length(210, 768, 1) == pytest.approx(210, rel=1e-6)
    # mean = max/2 is the uniform law: E[max of 2] = 2/3 of the range
    assert padded_batch_length(384, 768, 2) == pytest.approx(512, rel=1e-4)
    lengths = [padded_batch_length(210, 768, b) for b in (1, 2, 4, 8, 64)]
    assert lengths == sorted(lengths) and lengths[-1] < 768
    with pytest.raises(ValueError):
        padded_batch_length(800, 768, 4)


# --- torch.compile --------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
@pytest.mark.parametrize(
    "model_id", ["meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-7B"]
)
def test_compiled_fuses_elementwise_work_and_launches_fewer_kernels(model_id: str, method: str) -> None:
    """Inductor moves only the inputs and outputs of each fused region, and launches its kernels
    from generated code; matmuls, attention and the loss are the same work either way."""
    m = MODELS[model_id]
    eager = Job(method=method, seq_len=2048, micro_batch=2)  # type: ignore[arg-type]
    compiled = replace(eager, compiled=True)
    e, c = step_time(m, eager, RTX4090, 1, None, True), step_time(m, compiled, RTX4090, 1, None, True)
    assert c.elementwise_s < e.elementwise_s and c.dispatch_s < e.dispatch_s
    assert (c.matmul_s, c.attention_s, c.loss_s, c.dequant_s) == (
        e.matmul_s,
        e.attention_s,
        e.loss_s,
        e.dequant_s,
    )
    assert _time(m, compiled, RTX4090).tokens_per_s > _time(m, eager, RTX4090).tokens_per_s


def test_compiled_elementwise_bytes_are_the_fused_regions_inputs_and_outputs() -> None:
    from finetune.time import _elementwise_bytes_per_token

    m = LLAMA_8B
    h, inter = m.hidden_size, m.intermediate_size
    q, kv = m.attention_heads * m.head_dim_, m.kv_heads * m.head_dim_
    full = Job(method="full", compiled=True)
    # add+norm twice (8h each), rotary on q and k (4 B/element), the layout copies (as eager),
    # silu(gate)·up (read two, write one: 6I)
    expected = 2 * 8 * h + 4 * (q + kv) + 4 * (2 * q + 2 * kv) + 6 * inter
    assert _elementwise_bytes_per_token(m, full) == expected
    # one adapter on q_proj with dropout: its input read for A (2·d_in), scale-and-add (6·d_out),
    # the dropped copy (2·d_in); two adapters for qv
    qv = Job(method="lora", lora_targets="qv", lora_dropout=0.1, compiled=True)
    adapters = (2 * h + 6 * q + 2 * h) + (2 * h + 6 * kv + 2 * h)
    assert _elementwise_bytes_per_token(m, qv) == expected + adapters


def test_compiled_small_steps_sit_on_the_launch_floor_below_eagers_dispatch_floor() -> None:
    tiny = MODELS["meta-llama/Llama-3.2-1B"]
    eager = Job(method="lora", seq_len=16, micro_batch=1)
    e = step_time(tiny, eager, H100, 1, None, True)
    c = step_time(tiny, replace(eager, compiled=True), H100, 1, None, True)
    assert e.compute_s == pytest.approx(e.dispatch_s)
    assert c.dispatch_s < e.dispatch_s / 3  # ~12 + 3/adapter launches at 5 µs vs ~40 + 5 ops at 10 µs
