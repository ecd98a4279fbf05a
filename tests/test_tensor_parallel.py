"""Tensor parallelism with sequence parallelism: one GPU of a TP group holds its slice of the model
and 1/t of the activations, computes its slice, and waits for the group's collectives."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from finetune import FinetuneJob, Job, OutsideModelError, count_params, estimate_time, memory_per_gpu
from finetune.memory import BF16_BYTES, step_transient_bytes
from finetune.placement import Hardware, MemoryTable, place, place_at, plan_job
from finetune.tensor_parallel import group_refusal, rank_model, tensor_parallel_refusal
from finetune.time import COMM_EFFICIENCY, step_time
from finetune.time import tensor_parallel_comm_bytes as comm_bytes_per_micro_step
from tests.factories import H100, RTX4090
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
LLAMA_70B = MODELS["meta-llama/Llama-3.1-70B"]
QWEN_32B = MODELS["Qwen/Qwen2.5-32B"]
NVLINK_GBITS = 450 * 8  # H100 SXM: 450 GB/s per direction


def _time(job: Job, model=LLAMA_70B, n: int = 8, intra: float | None = NVLINK_GBITS, gpu=H100):
    return estimate_time(model, job, 1e9, n, n, gpu.tflops, intra, None, gpu=gpu)


# --- what one GPU of the group holds ------------------------------------------------------------


@pytest.mark.parametrize("t", [2, 4, 8])
def test_a_rank_holds_a_t_th_of_heads_columns_and_vocabulary(t: int) -> None:
    rank = rank_model(LLAMA_70B, t)
    assert (rank.attention_heads, rank.kv_heads) == (64 // t, 8 // t)
    assert rank.intermediate_size == 28672 // t and rank.vocab_size == math.ceil(128256 / t)
    # the hidden size and the head size stay: the GEMMs keep their inner dimension
    assert (rank.hidden_size, rank.head_dim_, rank.layers) == (8192, 128, 80)
    # a t-th of every matrix; the norms (two per layer and the final one) are replicated
    norms = (2 * 80 + 1) * 8192
    assert rank.params == pytest.approx((LLAMA_70B.params - norms) / t + norms, rel=1e-6)
    assert rank.params == round(LLAMA_70B.params * count_params(rank) / count_params(LLAMA_70B))


def test_one_way_tensor_parallelism_changes_nothing() -> None:
    assert rank_model(LLAMA_8B, 1) is LLAMA_8B
    job = Job(method="full", sharding="zero3", seq_len=4096)
    assert comm_bytes_per_micro_step(LLAMA_8B, job) == 0.0
    assert _time(job, LLAMA_8B).step.tensor_parallel_s == 0.0


@pytest.mark.parametrize("method", ["full", "lora"])
def test_sequence_parallelism_keeps_a_t_th_of_every_activation(method: str) -> None:
    # Korthikanti et al. 2022 §4.2: with sequence parallelism every saved activation is 1/t
    job = Job(method=method, sharding="zero3", seq_len=4096, micro_batch=2)
    plain = memory_per_gpu(LLAMA_70B, job, 8)
    for t in (2, 4, 8):
        split = memory_per_gpu(LLAMA_70B, replace(job, tensor_parallel=t), 8)
        assert split.activations_gb == pytest.approx(plain.activations_gb / t)
        assert split.logits_gb == pytest.approx(plain.logits_gb / t)


def test_without_sequence_parallelism_the_norm_regions_stay_whole() -> None:
    job = Job(method="lora", sharding="zero3", seq_len=4096, micro_batch=2, tensor_parallel=2)
    with_sp = memory_per_gpu(LLAMA_70B, job, 8)
    without = memory_per_gpu(LLAMA_70B, replace(job, sequence_parallel=False), 8)
    assert without.activations_gb > with_sp.activations_gb
    # each GPU keeps what its slice of the model keeps (checkpointed inputs at the full hidden size)
    acts, _ = step_transient_bytes(rank_model(LLAMA_70B, 2), replace(job, tensor_parallel=1))
    assert without.activations_gb == pytest.approx(acts / 1e9)
    # the model states do not depend on it
    assert without.weights_gb == pytest.approx(with_sp.weights_gb)


def test_unsharded_tensor_parallel_weights_split_t_ways() -> None:
    # DDP over TP groups: each GPU keeps its rank's slice whole (weights, gradients, optimizer)
    job = Job(method="full", sharding="none", seq_len=1024)
    one = memory_per_gpu(LLAMA_8B, job, 1)
    for t in (2, 4, 8):
        split = memory_per_gpu(LLAMA_8B, replace(job, tensor_parallel=t), t)
        for part in ("weights_gb", "gradients_gb", "optimizer_gb"):
            # a t-th, but for the replicated norms (0.003 % of the model, t times over)
            assert getattr(split, part) == pytest.approx(getattr(one, part) / t, rel=5e-4)


def test_more_tensor_parallelism_never_needs_more_memory_per_gpu() -> None:
    for job in (
        Job(method="full", sharding="zero3", seq_len=8192, micro_batch=1),
        Job(method="lora", sharding="none", seq_len=32768, micro_batch=1),
    ):
        totals = [
            memory_per_gpu(LLAMA_70B, replace(job, tensor_parallel=t), 8).total_gb for t in (1, 2, 4, 8)
        ]
        assert totals == sorted(totals, reverse=True), totals


# --- what the group cannot do -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "words"),
    [
        (Job(method="qlora", sharding="zero3", tensor_parallel=2), "qlora"),
        (Job(method="full", sharding="zero3", offload=True, tensor_parallel=2), "offload"),
        (Job(method="full", sharding="hybrid", tensor_parallel=2), "hybrid"),
        # 32 heads do not split three ways
        (Job(method="full", sharding="zero3", tensor_parallel=3), "attention heads"),
        # 8 KV heads do not split 16 ways
        (Job(method="full", sharding="zero3", tensor_parallel=16), "KV heads"),
    ],
)
def test_what_the_model_cannot_split_is_refused_with_the_reason(job: Job, words: str) -> None:
    reason = tensor_parallel_refusal(LLAMA_8B, job)
    assert reason is not None and words in reason
    with pytest.raises(OutsideModelError, match=words):
        memory_per_gpu(LLAMA_8B, job, 48)
    with pytest.raises(OutsideModelError, match=words):
        _time(job, LLAMA_8B, n=48)


def test_a_group_stays_inside_a_node() -> None:
    assert group_refusal(2, 8, 8) is None and group_refusal(8, 16, 8) is None
    # 8-way groups do not fit 4-GPU nodes, 2-way ones do not fit 3 GPUs
    assert "multiple of 8" in (group_refusal(8, 16, 4) or "")
    assert "multiple of 2" in (group_refusal(2, 3, 3) or "")
    job = Job(method="lora", sharding="zero3", tensor_parallel=8)
    with pytest.raises(OutsideModelError, match="multiple of 8"):
        estimate_time(LLAMA_8B, job, 1e9, 16, 4, H100.tflops, NVLINK_GBITS, 3200, gpu=H100)
    with pytest.raises(OutsideModelError, match="multiple of 8"):
        memory_per_gpu(LLAMA_8B, job, 4)


def _hardware(gpus_per_node: int) -> Hardware:
    return Hardware("H100-SXM", gpus_per_node, 80.0, 989.0, 450.0, 3200.0, memory_bandwidth_gbps=3350.0)


def test_an_offer_whose_nodes_cannot_hold_a_group_is_unplaceable_with_its_reason() -> None:
    job = Job(method="lora", tensor_parallel=8)
    memory = MemoryTable().for_job(LLAMA_70B, job)
    fjob = FinetuneJob("tp", LLAMA_70B.model_id, job, 10**9, 1.0)
    for placement in (place(memory, 4, 80.0, 8), place_at(memory, 4, 80.0, 2)):
        assert not placement.fits and placement.refusal is not None and math.isnan(placement.total_gb)
        plan = plan_job(fjob, _hardware(4), placement, memory)
        assert plan.unpriced_reason == placement.refusal and plan.estimated_hours is None
    # 8-GPU nodes hold the group: placed and timed as usual
    placed = place(memory, 8, 80.0, 8)
    assert placed.fits and placed.refusal is None
    plan = plan_job(fjob, _hardware(8), placed, memory)
    assert plan.unpriced_reason is None and plan.estimated_hours is not None and plan.estimated_hours > 0


# --- time ---------------------------------------------------------------------------------------


def test_the_group_moves_four_activation_collectives_per_layer_and_pass() -> None:
    job = Job(method="lora", sharding="zero3", seq_len=4096, micro_batch=2, tensor_parallel=2)
    activation = BF16_BYTES * 8192 * 4096 * 2
    # forward, recomputed forward and backward: 4 per layer each; the embedding and head 4 more
    collectives = 4 * 80 * 3 + 4
    assert comm_bytes_per_micro_step(LLAMA_70B, job) == pytest.approx(0.5 * activation * collectives)
    no_recompute = replace(job, grad_checkpointing=False)
    assert comm_bytes_per_micro_step(LLAMA_70B, no_recompute) == pytest.approx(
        0.5 * activation * (4 * 80 * 2 + 4)
    )
    # a ring moves (t−1)/t of the tensor through each link: 8-way moves 7/4 of 2-way's bytes
    eight = replace(job, tensor_parallel=8)
    assert comm_bytes_per_micro_step(LLAMA_70B, eight) == pytest.approx(
        comm_bytes_per_micro_step(LLAMA_70B, job) * (7 / 8) / (1 / 2)
    )
    # without sequence parallelism the all-reduces move the same bytes
    assert comm_bytes_per_micro_step(LLAMA_70B, replace(job, sequence_parallel=False)) == pytest.approx(
        comm_bytes_per_micro_step(LLAMA_70B, job)
    )


def test_the_collectives_cross_the_node_links_unoverlapped() -> None:
    job = Job(method="lora", sharding="zero3", seq_len=4096, micro_batch=2, tensor_parallel=2)
    step = _time(job).step
    assert step is not None
    link = NVLINK_GBITS * 1e9 / 8 * COMM_EFFICIENCY
    assert step.tensor_parallel_s == pytest.approx(comm_bytes_per_micro_step(LLAMA_70B, job) / link)
    # nothing hides them: the step is the overlapped data-parallel step plus the TP collectives
    overlapped = max(step.compute_s, step.comm_s + step.network_s) + step.exposed_comm_s
    assert step.total_s == pytest.approx(overlapped + step.tensor_parallel_s)
    # a faster link shortens them, an unknown one cannot be timed
    assert _time(job, intra=2 * NVLINK_GBITS).step.tensor_parallel_s < step.tensor_parallel_s
    unknown = _time(job, intra=None)
    assert math.isinf(unknown.hours) and unknown.warning is not None


def test_a_rank_computes_a_t_th_of_the_matmuls_and_attention() -> None:
    job = Job(method="full", sharding="none", seq_len=8192, micro_batch=1, grad_checkpointing=False)
    whole = step_time(LLAMA_70B, job, H100, 1, None, True)
    half = step_time(
        LLAMA_70B, replace(job, tensor_parallel=2), H100, 2, None, True, 2, tp_link_bytes_per_s=1e12
    )
    # the narrower GEMMs run at their own shapes' efficiency: within a few % of half the time
    assert half.matmul_s == pytest.approx(whole.matmul_s / 2, rel=0.05)
    assert half.attention_s == pytest.approx(whole.attention_s / 2)
    # the norms run on half the tokens, the rest on half the columns: less than the whole layer's
    assert half.elementwise_s < whole.elementwise_s


def test_throughput_counts_each_group_once() -> None:
    # two GPUs on one micro-batch: faster than one GPU on it, never twice as fast
    job = Job(method="lora", sharding="none", seq_len=4096, micro_batch=2)
    one = estimate_time(LLAMA_8B, job, 1e9, 1, 1, H100.tflops, None, None, gpu=H100)
    two = estimate_time(
        LLAMA_8B, replace(job, tensor_parallel=2), 1e9, 2, 2, H100.tflops, NVLINK_GBITS, None, gpu=H100
    )
    assert one.tokens_per_s < two.tokens_per_s < 2 * one.tokens_per_s
    # MFU is over all the GPUs: the split costs utilization
    assert two.utilization < one.utilization


def test_a_pcie_card_without_p2p_pays_for_tensor_parallelism_through_the_host() -> None:
    job = Job(method="lora", sharding="none", seq_len=2048, micro_batch=1, tensor_parallel=2)
    staged = estimate_time(LLAMA_8B, job, 1e9, 2, 2, RTX4090.tflops, 32 * 8, None, gpu=RTX4090)
    nvlink = estimate_time(LLAMA_8B, job, 1e9, 2, 2, H100.tflops, NVLINK_GBITS, None, gpu=H100)
    assert staged.step.tensor_parallel_s > 10 * nvlink.step.tensor_parallel_s


def test_qwen_32b_splits_its_40_heads_and_8_kv_heads_two_ways() -> None:
    job = Job(method="lora", sharding="zero3", seq_len=4096, micro_batch=2, tensor_parallel=2)
    assert tensor_parallel_refusal(QWEN_32B, job) is None
    # 40 heads do not split 16 ways
    assert "attention heads" in (tensor_parallel_refusal(QWEN_32B, replace(job, tensor_parallel=16)) or "")
    assert _time(job, QWEN_32B).tokens_per_s > 0


# --- the benchmark reads the rows' tensor-parallel degree ---------------------------------------


@pytest.mark.parametrize(("row_id", "sequence_parallel"), [("X46", True), ("X47", False)])
def test_the_benchmark_reads_the_tensor_parallel_column(row_id: str, sequence_parallel: bool) -> None:
    from benchmarks.throughput_accuracy import EXTRA_CSV, load_gpus, predict, row_to_case
    from tests.factories import benchmark_row

    case = row_to_case(benchmark_row(EXTRA_CSV, row_id), MODELS, load_gpus())
    assert case.job is not None and case.skip_reason is None
    # NeMo AutoModel's recipes: TP 2 over 8 GPUs, X47's without sequence parallelism ("WITHOUT
    # sequence parallel" in its framework column)
    assert (case.job.tensor_parallel, case.job.sequence_parallel) == (2, sequence_parallel)
    assert case.n_gpus == 8 and math.isfinite(predict(case)) and predict(case) > 0


@pytest.mark.parametrize(("row_id", "policy"), [("X50", "full"), ("X51", "selective")])
def test_torchtitans_tp_rows_run_on_the_hosts_the_file_names(row_id: str, policy: str) -> None:
    from benchmarks.throughput_accuracy import EXTRA_CSV, load_gpus, row_to_case
    from tests.factories import benchmark_row

    case = row_to_case(benchmark_row(EXTRA_CSV, row_id), MODELS, load_gpus())
    assert case.job is not None and case.skip_reason is None
    # the 96 GB HBM2e H100 at 500 W, 8 per host, 400 Gb/s per GPU between hosts
    assert case.gpu_name == "H100-96GB-SXM" and case.inter_node_gbps == 3200.0
    # TP 8 inside each host with sequence parallelism, FSDP over the groups, compiled, fused AdamW
    assert (case.job.tensor_parallel, case.job.sequence_parallel) == (8, True)
    assert case.job.compiled and case.job.optimizer_impl == "fused"
    assert case.job.checkpoint_policy == policy and case.job.grad_checkpointing


def test_rows_without_the_column_stay_data_parallel() -> None:
    from benchmarks.throughput_accuracy import EXTRA_CSV, load_gpus, row_to_case
    from tests.factories import benchmark_row

    # the shared calibration rows have no tensor_parallel column at all
    row = {k: v for k, v in benchmark_row(EXTRA_CSV, "X35").items() if k != "tensor_parallel"}
    case = row_to_case(row, MODELS, load_gpus())
    assert case.job is not None and case.job.tensor_parallel == 1
