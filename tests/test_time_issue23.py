"""Issue 23's time terms: kernel stack, GPTQ's dequantize-then-GEMM, host-staged FSDP, hybrid
sharding. Each test states the physical expectation the term must meet."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.throughput_accuracy import (
    EXTRA_CSV,
    evaluate,
    hardware_class,
    load_gpus,
    row_to_case,
    summary,
)
from finetune import Accelerator, Job, ModelSpec, estimate_time
from finetune.architecture import linear_params
from finetune.memory import QUANT_BYTES_PER_PARAM
from finetune.placement import JobMemory, place_at
from finetune.time import (
    GPTQ_DEQUANT_BYTES_PER_WEIGHT,
    HOST_MEMORY_GBYTES_PER_S,
    STREAM_EFFICIENCY,
    link_bytes_per_s,
    loss_impl,
    step_time,
)
from tests.factories import A100, B200, H100, RTX4090
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
RTX6000_ADA = Accelerator(
    tflops=364.0, memory_bandwidth_gbps=960.0, architecture="Ada Lovelace", vram_gb=48, pcie_gen=4
)


def _tps(
    model: ModelSpec, job: Job, gpu: Accelerator, n: int = 1, per_node: int | None = None, **links
) -> float:
    per_node = per_node or n
    t = estimate_time(
        model, job, 1e8, n, per_node, gpu.tflops, links.get("intra"), links.get("inter"), gpu=gpu
    )
    return t.tokens_per_s


# --- kernels: plain (default HF/PEFT) vs fused (FlashAttention-2 + Liger/Unsloth) ------------


def test_the_default_stack_is_the_plain_one() -> None:
    assert Job().kernels == "plain"


def test_fused_kernels_are_faster_than_the_plain_stack_on_the_same_job() -> None:
    plain = Job(method="lora", seq_len=2048, micro_batch=1)
    fused = replace(plain, kernels="fused")
    assert _tps(LLAMA_8B, fused, H100) > _tps(LLAMA_8B, plain, H100)


def test_fused_stack_moves_fewer_elementwise_bytes_and_dispatches_fewer_ops() -> None:
    plain = Job(method="lora", seq_len=2048, micro_batch=1)
    a = step_time(LLAMA_8B, plain, H100, 1, None, True)
    b = step_time(LLAMA_8B, replace(plain, kernels="fused"), H100, 1, None, True)
    assert b.elementwise_s < a.elementwise_s
    assert b.dispatch_s < a.dispatch_s
    assert b.loss_s < a.loss_s  # linear-cross-entropy never writes the fp32 logits


def test_fused_stack_runs_flash_attention_and_the_fused_loss_whatever_was_asked() -> None:
    job = Job(attention="eager", loss="standard", kernels="fused")
    assert job.attention_kernel == "flash"
    assert loss_impl(job) == "fused"
    # the plain stack keeps what the job asks
    assert replace(job, kernels="plain").attention_kernel == "eager"
    assert loss_impl(replace(job, kernels="plain", loss="chunked")) == "chunked"


# --- GPTQ: dequantize with PyTorch ops, then an fp16 GEMM --------------------------------------


def test_gptq_is_slower_than_nf4_at_small_steps() -> None:
    nf4 = Job(method="qlora", quant="nf4", seq_len=512, micro_batch=1)
    gptq = replace(nf4, quant="gptq")
    assert _tps(LLAMA_8B, gptq, RTX4090) < 0.9 * _tps(LLAMA_8B, nf4, RTX4090)


def test_gptq_and_nf4_agree_within_ten_percent_at_8k_tokens_per_step() -> None:
    nf4 = Job(method="qlora", quant="nf4", seq_len=8192, micro_batch=1)
    gptq = replace(nf4, quant="gptq")
    ratio = _tps(LLAMA_8B, gptq, RTX4090) / _tps(LLAMA_8B, nf4, RTX4090)
    assert 0.9 <= ratio < 1.0


def test_gptq_dequantization_runs_in_forward_and_recompute_only() -> None:
    job = Job(method="qlora", quant="gptq", seq_len=128, micro_batch=1)
    with_gc = step_time(LLAMA_8B, job, H100, 1, None, True).dequant_s
    without = step_time(LLAMA_8B, replace(job, grad_checkpointing=False), H100, 1, None, True).dequant_s
    # the weight term is per step, not per token; the input casts scale with the forward passes
    bw = 3350e9 * STREAM_EFFICIENCY
    weights_one_pass = linear_params(LLAMA_8B) * GPTQ_DEQUANT_BYTES_PER_WEIGHT / bw
    assert without == pytest.approx(weights_one_pass, rel=0.05)
    assert with_gc == pytest.approx(2 * without)


# --- FSDP over PCIe without P2P ----------------------------------------------------------------


def test_host_staged_fsdp_is_slower_than_p2p_pcie_at_micro_batch_1() -> None:
    job = Job(method="lora", sharding="zero3", seq_len=2048, micro_batch=1)
    # the same card with P2P over PCIe 4.0 x16 (32 GB/s = 256 Gb/s), overlapped with compute
    p2p = replace(RTX4090, p2p=True)
    staged = _tps(LLAMA_8B, job, RTX4090, n=4)
    direct = _tps(LLAMA_8B, job, p2p, n=4, intra=256.0)
    assert staged < direct


def test_host_staging_shares_the_host_memory_bandwidth_between_the_node_gpus() -> None:
    two, _ = link_bytes_per_s(RTX4090, 2, 2, None, None)
    eight, overlapped = link_bytes_per_s(RTX4090, 8, 8, None, None)
    # PCIe 4.0 x16 per direction: the two crossings are up the sender's link and down the
    # receiver's, concurrent in a ring (host memory, 204.8 / 4 GB/s, is not the limit at two)
    assert two == pytest.approx(32e9)
    # eight GPUs each write and read every staged byte in host memory: 204.8 GB/s / 16
    assert eight == pytest.approx(HOST_MEMORY_GBYTES_PER_S * 1e9 / 16)
    assert not overlapped


# --- hybrid sharding (HSDP) --------------------------------------------------------------------


def test_hybrid_beats_zero3_across_nodes_on_a_slow_network() -> None:
    job = Job(method="full", sharding="zero3", seq_len=2048, micro_batch=1)
    links = {"intra": 900 / 2 * 8, "inter": 400.0}
    zero3 = _tps(LLAMA_8B, job, H100, n=32, per_node=8, **links)
    hybrid = _tps(LLAMA_8B, replace(job, sharding="hybrid"), H100, n=32, per_node=8, **links)
    # zero3 moves every shard across the network each micro-step (3 collectives of the bf16
    # weights); hybrid only all-reduces each GPU's gradient shard with its replicas
    assert hybrid > zero3


def test_hybrid_on_one_node_is_zero3() -> None:
    job = Job(method="full", sharding="zero3", seq_len=2048, micro_batch=2)
    intra = 900 / 2 * 8
    assert _tps(LLAMA_8B, replace(job, sharding="hybrid"), H100, n=8, intra=intra) == pytest.approx(
        _tps(LLAMA_8B, job, H100, n=8, intra=intra)
    )


def test_hybrid_slows_down_as_the_network_does() -> None:
    job = Job(method="full", sharding="hybrid", seq_len=2048, micro_batch=1)
    fast = _tps(LLAMA_8B, job, H100, n=32, per_node=8, intra=3600.0, inter=3200.0)
    slow = _tps(LLAMA_8B, job, H100, n=32, per_node=8, intra=3600.0, inter=100.0)
    assert slow < fast


def test_hybrid_without_a_known_network_is_not_timed() -> None:
    job = Job(method="full", sharding="hybrid", seq_len=2048, micro_batch=1)
    t = estimate_time(LLAMA_8B, job, 1e8, 16, 8, H100.tflops, 3600.0, None, gpu=H100)
    assert t.tokens_per_s == 0.0
    assert t.warning and "interconnect" in t.warning


def test_hybrid_refuses_offload() -> None:
    with pytest.raises(ValueError, match="offload"):
        Job(method="full", sharding="hybrid", offload=True)


def test_hybrid_memory_is_zero3_over_one_node() -> None:
    memory = JobMemory(LLAMA_8B, Job(method="full"))
    placed = place_at(memory, 8, 80.0, 4, sharding="hybrid")
    sharding, job = memory.variants[placed.variant]
    assert sharding == "hybrid" and job.sharding == "hybrid"
    zero3 = next(i for i, (s, _) in enumerate(memory.variants) if s == "zero3")
    assert placed.total_gb == pytest.approx(memory.get(zero3, 8).total_gb)
    # automatic placement never picks hybrid
    assert memory.variants[place_at(memory, 8, 80.0, 4).variant][0] != "hybrid"


# --- what does not scale with FLOPS ------------------------------------------------------------


def test_b200_over_h100_depends_on_the_job() -> None:
    datasheet = B200.tflops / H100.tflops
    big = Job(method="full", seq_len=8192, micro_batch=4, grad_checkpointing=False, kernels="fused")
    small = Job(method="lora", seq_len=256, micro_batch=1)
    r_big = _tps(LLAMA_8B, big, B200) / _tps(LLAMA_8B, big, H100)
    r_small = _tps(LLAMA_8B, small, B200) / _tps(LLAMA_8B, small, H100)
    # the dispatch-bound small step gains less than the datasheet ratio
    assert r_small < 0.8 * datasheet
    assert abs(r_big - r_small) > 0.2


# --- the benchmark's own set and classes -------------------------------------------------------


def test_hardware_classes_follow_the_catalogue_model_names() -> None:
    gpus = load_gpus()
    assert hardware_class(gpus["RTX4090"]) == "consumer"
    assert hardware_class(gpus["RTXA6000"]) == "workstation"
    assert hardware_class(gpus["L40S"]) == "datacenter"
    assert hardware_class(gpus["MI300X"]) == "datacenter"


def test_extra_rows_each_carry_a_source_and_a_quote() -> None:
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows
    for row in rows:
        assert row["source_url"].startswith("https://"), row["id"]
        assert row["quote"].strip(), row["id"]
        assert row["score"] in ("yes", "no"), row["id"]
        if row["score"] == "no":
            assert row["exclusion_reason"].strip(), row["id"]


def test_extra_rows_are_scored_as_their_own_set() -> None:
    results = evaluate(EXTRA_CSV)
    s = summary(results)
    scored = [r for r in results if r.error_pct is not None]
    assert s["cases"] == len(scored) > 0


def test_unsloth_and_liger_rows_run_the_fused_stack(tmp_path: Path) -> None:
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        row = next(csv.DictReader(f))
    row = {**row, "framework": "Unsloth 2024.8", "score": "yes"}
    case = row_to_case(row, MODELS, load_gpus())
    assert case.job is not None and case.job.kernels == "fused"
    plain = row_to_case({**row, "framework": "transformers Trainer"}, MODELS, load_gpus())
    assert plain.job is not None and plain.job.kernels == "plain"


# --- the terms' own arithmetic -----------------------------------------------------------------


def test_hybrid_network_bytes_are_the_shard_all_reduce_between_replicas() -> None:
    from finetune.memory import trainable_params
    from finetune.time import _network_bytes_per_micro_step

    job = Job(method="full", sharding="hybrid")
    shard = 2.0 * trainable_params(LLAMA_8B, job) / 8
    # four replicas: a ring all-reduce moves 2 × (4 − 1)/4 of the shard
    assert _network_bytes_per_micro_step(LLAMA_8B, job, 32, 8) == pytest.approx(2 * shard * 3 / 4)
    assert _network_bytes_per_micro_step(LLAMA_8B, job, 8, 8) == 0.0  # one node: nothing crosses
    accumulated = replace(job, grad_accumulation=4)
    assert _network_bytes_per_micro_step(LLAMA_8B, accumulated, 32, 8) == pytest.approx(shard * 3 / 8)
    assert _network_bytes_per_micro_step(LLAMA_8B, replace(job, sharding="zero3"), 32, 8) == 0.0


def test_linear_inputs_count_each_projection_its_own_copy() -> None:
    from finetune.time import _linear_input_elements_per_token, _linears_per_layer

    h, inter = LLAMA_8B.hidden_size, LLAMA_8B.intermediate_size
    q = LLAMA_8B.attention_heads * LLAMA_8B.head_dim_
    assert _linears_per_layer(LLAMA_8B) == 7
    assert _linear_input_elements_per_token(LLAMA_8B) == LLAMA_8B.layers * (3 * h + q + 2 * h + inter)


def test_gptq_dispatches_its_dequantization_ops_in_forward_passes() -> None:
    # against LoRA on the same base: bf16-pure, so neither pays PEFT's fp32-adapter operators
    lora = Job(method="lora", precision="bf16-pure", seq_len=128, micro_batch=1)
    a = step_time(LLAMA_8B, lora, H100, 1, None, True).dispatch_s
    b = step_time(LLAMA_8B, replace(lora, method="qlora", quant="gptq"), H100, 1, None, True).dispatch_s
    # 10 ops × 7 linears × 32 layers × (forward + recompute) × 10 µs
    assert b - a == pytest.approx(10 * 7 * 32 * 2 * 10e-6)


# --- bitsandbytes NF4: MatMul4Bit rebuilds the bf16 weight in every pass ----------------------


def _dispatch(job: Job, model: ModelSpec = LLAMA_8B) -> float:
    return step_time(model, job, H100, 1, None, True).dispatch_s


def test_nf4_dispatches_its_dequantization_in_forward_backward_and_recompute() -> None:
    lora = Job(method="lora", precision="bf16-pure", seq_len=128, micro_batch=1)
    nf4_dq = replace(lora, method="qlora", quant="nf4-dq")
    # 8 operators (nested absmax, then the codes, then .to and .t()) per linear call; 7 linears ×
    # 32 layers; forward, backward (MatMul4Bit dequantizes again) and the recompute; 10 µs each
    assert _dispatch(nf4_dq) - _dispatch(lora) == pytest.approx(8 * 7 * 32 * 3 * 10e-6)
    no_recompute = replace(lora, grad_checkpointing=False)
    assert _dispatch(replace(no_recompute, method="qlora", quant="nf4-dq")) - _dispatch(
        no_recompute
    ) == pytest.approx(8 * 7 * 32 * 2 * 10e-6)
    # without double quantization there is no nested absmax to rebuild: 4 operators
    assert _dispatch(nf4_dq) - _dispatch(replace(nf4_dq, quant="nf4")) == pytest.approx(
        4 * 7 * 32 * 3 * 10e-6
    )


def test_nf4_dequantization_under_compile_pays_the_launch_not_the_dispatch() -> None:
    lora = Job(method="lora", precision="bf16-pure", seq_len=128, micro_batch=1, compiled=True)
    qlora = replace(lora, method="qlora")
    assert _dispatch(qlora) - _dispatch(lora) == pytest.approx(8 * 7 * 32 * 3 * 5e-6)


def test_a_quantized_head_is_dequantized_in_forward_and_backward_too() -> None:
    qlora = Job(method="qlora", precision="bf16-pure", seq_len=128, micro_batch=1)
    head = replace(qlora, quantize_head=True)
    plain, quantized = (step_time(LLAMA_8B, j, H100, 1, None, True) for j in (qlora, head))
    # one more linear call in forward and in backward; the head is outside the recomputed layers
    assert quantized.dispatch_s - plain.dispatch_s == pytest.approx(8 * 2 * 10e-6)
    head_params = LLAMA_8B.vocab_size * LLAMA_8B.hidden_size
    bw = 3350e9 * STREAM_EFFICIENCY
    rebuild = head_params * (QUANT_BYTES_PER_PARAM["nf4-dq"] + 2.0) * 2 / bw
    assert quantized.dequant_s - plain.dequant_s == pytest.approx(rebuild)


def test_qlora_is_slower_than_lora_at_small_steps_on_fast_gpus() -> None:
    # at 256-1,024 tokens an 8B step on an H100 or B200 waits on the CPU; NF4 adds operators to
    # every linear call, so it cannot be faster than LoRA there (it was, before they were counted)
    for gpu in (H100, B200):
        for seq in (256, 512, 1024):
            lora = Job(method="lora", seq_len=seq, micro_batch=1)
            assert _tps(LLAMA_8B, replace(lora, method="qlora"), gpu) < _tps(LLAMA_8B, lora, gpu)


def test_nf4_operators_leave_a_gpu_bound_step_alone() -> None:
    # 8 × 2,048 tokens of 70B QLoRA on two 4090s: minutes of GPU work per step, milliseconds of CPU
    job = Job(method="qlora", seq_len=2048, micro_batch=8, sharding="zero3")
    step = step_time(MODELS["meta-llama/Llama-2-70b-hf"], job, RTX4090, 2, 32e9, False)
    assert step.dispatch_s < 0.1 * step.compute_s


def test_hybrid_optimizer_is_sharded_over_the_node_only() -> None:
    job = Job(method="full", sharding="hybrid", seq_len=2048)
    hybrid = step_time(LLAMA_8B, job, H100, 32, 3600e9 / 8, True, 8, 50e9).optimizer_s
    zero3 = step_time(LLAMA_8B, replace(job, sharding="zero3"), H100, 8, 3600e9 / 8, True, 8).optimizer_s
    assert hybrid == pytest.approx(zero3)


def test_hybrid_placement_refuses_offload_in_one_line() -> None:
    memory = JobMemory(LLAMA_8B, Job(method="full", sharding="zero3", offload=True))
    with pytest.raises(ValueError, match="hybrid is modelled without offload"):
        place_at(memory, 8, 80.0, 2, sharding="hybrid")


def test_the_benchmark_reads_compile_off_from_a_results_file() -> None:
    from benchmarks.throughput_accuracy import ran_compiled

    assert not ran_compiled({"framework": "PEFT run.py", "quote": "train_config compile false"})
    assert not ran_compiled({"framework": "torchtune (no compile)", "quote": ""})
    assert ran_compiled({"framework": "torchtune (compile on)", "quote": ""})


def test_the_benchmark_sets_only_the_job_fields_the_model_has() -> None:
    from benchmarks.throughput_accuracy import _job

    job = _job(method="lora", kernels="fused", field_of_a_later_model=1)
    assert job.kernels == "fused" and job.method == "lora"


def test_plain_sdpa_computes_every_block_of_a_padded_batch() -> None:
    from finetune.time import flops_per_token

    packed = Job(method="lora", seq_len=1024, micro_batch=4)
    padded = replace(packed, padding_efficiency=0.6)
    # the mask a padded batch passes turns SDPA's causal block skipping off (all s² blocks) …
    assert flops_per_token(LLAMA_8B, padded) > flops_per_token(LLAMA_8B, packed)
    # … while FlashAttention-2 on the fused stack still runs causal
    fused = replace(packed, kernels="fused")
    assert flops_per_token(LLAMA_8B, replace(fused, padding_efficiency=0.6)) == flops_per_token(
        LLAMA_8B, fused
    )


def test_a_flat_collective_across_nodes_runs_at_the_node_network_rate() -> None:
    # one ring per NIC: a GPU's whole ring volume moves at the node's rate (NCCL busbw ≈ the
    # node's NICs together: 8× A100 with 4× 200 Gb/s measure 85-96 GB/s against 100 GB/s)
    rate, overlapped = link_bytes_per_s(A100, 16, 8, 600 / 2 * 8, 800.0)
    assert rate == pytest.approx(100e9)
    assert overlapped
    # capped by the in-node link each ring also crosses (a 3200 Gb/s node over 8 × 50 GB/s NVLink)
    capped, _ = link_bytes_per_s(A100, 16, 8, 50 * 8, 3200.0)
    assert capped == pytest.approx(50e9)
    # not stated: no rate
    assert link_bytes_per_s(A100, 16, 8, 600 / 2 * 8, None) == (None, True)


def test_a_cross_node_ring_of_cards_without_p2p_is_held_to_the_host_staged_hop() -> None:
    staged, _ = link_bytes_per_s(RTX4090, 8, 8, None, None)
    across, overlapped = link_bytes_per_s(RTX4090, 16, 8, None, 3200.0)
    assert across == pytest.approx(staged)
    assert not overlapped
