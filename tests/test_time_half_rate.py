"""Half-rate FP32 accumulation (issue 23): gpus.csv rates a GeForce card (and the L40, the RTX 6000
Ada and the A10G) at its bf16 rate with FP32 accumulation, half its tensor rate, and measured large
GEMMs reach that rated figure (GEMM_EFFICIENCY_HALF_RATE), where full-rate parts reach
GEMM_EFFICIENCY of theirs. Which parts run at half rate is a column of gpus.csv with its source,
not a rule on the name."""

from __future__ import annotations

import csv
from dataclasses import replace

import pytest

from answers.estimate import StatedHardware, find_gpu, stated_offer
from benchmarks.throughput_accuracy import EXTRA_CSV, load_gpus, row_to_case
from finetune import Accelerator, FinetuneJob, Job, estimate_time
from finetune.offer import hardware_of
from finetune.placement import Hardware, MemoryTable, place, plan_job
from finetune.time import (
    ATTENTION_EFFICIENCY,
    ATTENTION_EFFICIENCY_DEFAULT,
    FA2_SPEEDUP_OVER_FA1,
    GEMM_EFFICIENCY,
    GEMM_EFFICIENCY_HALF_RATE,
    gemm_shape_efficiency,
    narrow_tensor_attention_share,
    step_time,
)
from warehouse.hardware import GpuSpec, HardwareCatalog
from warehouse.seed_models import load_models

LLAMA_8B = load_models()["meta-llama/Llama-3.1-8B"]
RTX4090 = Accelerator(
    tflops=165.0,
    memory_bandwidth_gbps=1008.0,
    architecture="Ada Lovelace",
    vram_gb=24,
    p2p=False,
    sm_count=128,
    half_rate_accumulate=True,
    tensor_flops_per_sm_clock=512,
)
LORA = Job(method="lora", precision="bf16-mixed", seq_len=2048, micro_batch=2, grad_checkpointing=True)
# 3B: fits one 24 GB card in bf16 LoRA
LLAMA_3B = load_models()["meta-llama/Llama-3.2-3B"]


@pytest.fixture(scope="module")
def gpus() -> dict[str, GpuSpec]:
    return HardwareCatalog.load().gpus


def test_every_geforce_rtx_card_the_l40_its_workstation_twin_and_the_a10g_accumulate_at_half_rate(
    gpus: dict[str, GpuSpec],
) -> None:
    half = {name for name, g in gpus.items() if g.half_rate_accumulate}
    geforce_rtx = {name for name, g in gpus.items() if g.model.startswith("GeForce RTX")}
    assert half == geforce_rtx | {"L40", "RTX6000-Ada", "A10G"}
    # the other professional and datacenter parts of the same dies run it at full rate
    for name in ("RTXA6000", "RTXA5000", "L40S", "A10", "A40", "L4", "H100-SXM"):
        assert not gpus[name].half_rate_accumulate, name


def test_each_half_rate_row_says_where_it_comes_from(gpus: dict[str, GpuSpec]) -> None:
    for g in gpus.values():
        assert bool(g.half_rate_accumulate_source) is g.half_rate_accumulate, g.gpu_name
    # a GeForce row cites its generation's whitepaper; the L40, RTX 6000 Ada and A10G rows
    # their own evidence
    assert "Ada GPU Architecture whitepaper" in gpus["RTX4090"].half_rate_accumulate_source
    assert "datasheet" in gpus["L40"].half_rate_accumulate_source
    assert "69.47" in gpus["A10G"].half_rate_accumulate_source
    # the RTX 6000 Ada's datasheet is silent: it cites its datacenter twin and a measured training run
    assert "L40" in gpus["RTX6000-Ada"].half_rate_accumulate_source
    assert "lambdal/deeplearning-benchmark" in gpus["RTX6000-Ada"].half_rate_accumulate_source


@pytest.mark.parametrize(
    ("name", "measured_tflops"),
    [
        # large bf16 torch.mm (10240²): zzc0721/torch-performance-test-data issue #126
        ("A10G", 69.47),
    ],
)
def test_a_half_rate_rating_is_what_a_large_gemm_measures(
    gpus: dict[str, GpuSpec], name: str, measured_tflops: float
) -> None:
    # at 0.80 of it (the full-rate share) the A10G would be priced 20 % slower than it measures
    rated = gpus[name].bf16_tflops
    assert rated is not None
    assert measured_tflops / rated == pytest.approx(GEMM_EFFICIENCY_HALF_RATE, abs=0.02)
    assert measured_tflops > 1.2 * GEMM_EFFICIENCY * rated


def test_the_half_rate_rows_are_sms_times_boost_times_512(gpus: dict[str, GpuSpec]) -> None:
    # the per-SM rate the rating implies: 512 FLOP/clock at the rated boost clock (TechPowerUp)
    boost_mhz = {"L40": 2490, "RTX6000-Ada": 2505, "A10G": 1710}
    for name, mhz in boost_mhz.items():
        g = gpus[name]
        assert g.sm_count is not None and g.bf16_tflops is not None
        assert g.sm_count * mhz * 1e6 * 512 / 1e12 == pytest.approx(g.bf16_tflops, abs=0.1), name
    # and the L40S, the L40's die at full rate, is 1024 per SM per clock: twice the L40's rating
    l40s = gpus["L40S"]
    assert l40s.sm_count == gpus["L40"].sm_count
    assert l40s.bf16_tflops == pytest.approx(2 * (gpus["L40"].bf16_tflops or 0), rel=0.01)


def test_the_rtx_6000_ada_is_rated_as_the_l40_not_at_its_fp16_accumulate_rate(
    gpus: dict[str, GpuSpec],
) -> None:
    ada, l40 = gpus["RTX6000-Ada"], gpus["L40"]
    # the same 142-SM AD102 at 300 W: per SM and MHz the workstation card gets the L40's rate
    # (NVIDIA rates the L40 at 2490 MHz: 142 x 2490 x 512 = 181.05), not the L40S's twice that
    assert ada.sm_count == l40.sm_count == 142
    assert ada.bf16_tflops is not None and l40.bf16_tflops is not None
    assert ada.bf16_tflops / 2505 == pytest.approx(l40.bf16_tflops / 2490, rel=0.001)
    # FP8 with FP32 accumulate halves with it, as on the L40; INT8 (INT32 accumulate) stays at full
    # rate, as on the 4090
    assert ada.fp8_tflops is not None and l40.fp8_tflops is not None
    assert ada.fp8_tflops / 2505 == pytest.approx(l40.fp8_tflops / 2490, rel=0.005)
    assert ada.int8_tops == pytest.approx(4 * ada.bf16_tflops, rel=0.001)
    assert gpus["RTX4090"].int8_tops == pytest.approx(4 * (gpus["RTX4090"].bf16_tflops or 0), rel=0.01)


def test_the_constant_is_the_rated_figure_and_above_the_full_rate_share() -> None:
    # measured half-rate GEMMs reach 98-116 % of the rated figure; the model takes the figure
    assert GEMM_EFFICIENCY_HALF_RATE == 1.0
    assert GEMM_EFFICIENCY_HALF_RATE > GEMM_EFFICIENCY


def test_the_gpu_reports_the_share_of_its_rate_that_gemms_reach() -> None:
    assert RTX4090.gemm_efficiency == GEMM_EFFICIENCY_HALF_RATE
    assert replace(RTX4090, half_rate_accumulate=False).gemm_efficiency == GEMM_EFFICIENCY
    # a measured best-shape rate below the rated share holds the part to it, whatever the flag
    slow = replace(RTX4090, matmul_share=0.7)
    assert slow.gemm_efficiency == 0.7
    # and one above it does not lift it past the rated figure (boost clocks vary by board)
    assert replace(RTX4090, matmul_share=1.05).gemm_efficiency == GEMM_EFFICIENCY_HALF_RATE


def test_tile_and_wave_quantization_still_apply_on_top() -> None:
    full_rate = replace(RTX4090, half_rate_accumulate=False)
    for tokens in (840, 4096, 16384):
        half = gemm_shape_efficiency(LLAMA_8B, LORA, RTX4090, tokens)
        full = gemm_shape_efficiency(LLAMA_8B, LORA, full_rate, tokens)
        # the same shape losses, scaled by the big-shape share
        assert half / full == pytest.approx(GEMM_EFFICIENCY_HALF_RATE / GEMM_EFFICIENCY)
        assert half <= GEMM_EFFICIENCY_HALF_RATE


def test_only_the_matmuls_and_the_attention_kernels_speed_up() -> None:
    # the same die at full rate: twice the tensor FLOPs per SM per clock
    full_rate = replace(RTX4090, half_rate_accumulate=False, tensor_flops_per_sm_clock=1024)
    half = step_time(LLAMA_8B, LORA, RTX4090, 1, None, True)
    full = step_time(LLAMA_8B, LORA, full_rate, 1, None, True)
    # this step is compute bound, so the matmuls scale by the ratio of the two shares
    assert full.matmul_s / half.matmul_s == pytest.approx(GEMM_EFFICIENCY_HALF_RATE / GEMM_EFFICIENCY)
    # and FlashAttention's share of the rated figure rises from 0.75 to 0.857 (A100's 0.6 at a
    # half and at a quarter of its tensor FLOPs per SM per clock)
    assert ATTENTION_EFFICIENCY["Ada Lovelace"] == 0.6
    assert full.attention_s / half.attention_s == pytest.approx((2.4 / 2.8) / 0.75)
    assert (half.elementwise_s, half.loss_s, half.dequant_s, half.dispatch_s) == (
        full.elementwise_s,
        full.loss_s,
        full.dequant_s,
        full.dispatch_s,
    )
    assert half.total_s < full.total_s


def test_a_memory_bound_step_is_not_sped_up_below_its_weight_reads() -> None:
    # eight tokens per step on a 8B model: the weights' reads, not the FLOPs, set the matmul time
    # (flat GEMM efficiency here: a 256-row tile over 8 rows would make the FLOPs the bound)
    tiny = replace(LORA, seq_len=8, micro_batch=1)
    flat = replace(RTX4090, sm_count=None)
    half = step_time(LLAMA_8B, tiny, flat, 1, None, True)
    full = step_time(LLAMA_8B, tiny, replace(flat, half_rate_accumulate=False), 1, None, True)
    assert half.matmul_s == pytest.approx(full.matmul_s)


# --- from the seeds to the estimate -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "half_rate"),
    [("RTX4090", True), ("RTX3090", True), ("L40", True), ("A10G", True), ("L40S", False), ("A10", False)],
)
def test_stated_and_offer_hardware_read_the_flag_from_the_seed(name: str, half_rate: bool) -> None:
    row = stated_offer(find_gpu(name), StatedHardware(gpu=name))
    assert hardware_of(row).half_rate_accumulate is half_rate


def test_plans_of_a_geforce_offer_run_at_its_rated_figure() -> None:
    fjob = FinetuneJob("lora", LLAMA_3B.model_id, LORA, 10_000_000, 1.0)
    memory = MemoryTable().for_job(LLAMA_3B, fjob.job)

    def hours(half_rate: bool) -> float:
        hw = Hardware(
            "RTX4090",
            1.0,
            24.0,
            165.0,
            None,
            None,
            1008.0,
            "Ada Lovelace",
            False,
            4,
            128,
            half_rate,
            tensor_flops_per_sm_clock=512 if half_rate else 1024,
        )
        plan = plan_job(fjob, hw, place(memory, hw.gpus_per_node, hw.vram_gb, 1), memory)
        assert plan.estimated_hours is not None
        return plan.estimated_hours

    assert hours(True) < hours(False)
    # and the plan is the time model's, with the flag carried into the Accelerator
    gpu = replace(RTX4090, pcie_gen=4)
    direct = estimate_time(LLAMA_3B, LORA, 10_000_000, 1, 1, 165.0, None, None, gpu=gpu)
    assert hours(True) == pytest.approx(direct.hours)


def test_the_throughput_benchmark_reads_the_flag_from_the_seed() -> None:
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    gpus, models = load_gpus(), load_models()
    # X04: 2× RTX 4090; X20: 2× A100 40 GB
    geforce = row_to_case(rows["X04"], models, gpus).gpu
    a100 = row_to_case(rows["X20"], models, gpus).gpu
    assert geforce is not None and geforce.half_rate_accumulate
    assert a100 is not None and not a100.half_rate_accumulate


# --- attention kernels on parts with fewer tensor FLOPs per SM per clock than the A100 --------------


def test_the_a100_share_carries_to_a_narrower_part_with_the_rest_of_the_kernel_unchanged() -> None:
    # FA2's 0.6 on the A100: matmuls 0.6 of the time, the rest 0.4. At half the A100's tensor
    # FLOPs per SM per clock (RTX A6000, L40S) the matmuls take 1.2 and the rest 0.4: 0.75 of it;
    # at a quarter (a GeForce card with FP32 accumulation) 2.4 and 0.4: 0.857
    assert narrow_tensor_attention_share(0.6, 1.0) == pytest.approx(0.6)
    assert narrow_tensor_attention_share(0.6, 0.5) == pytest.approx(0.75)
    assert narrow_tensor_attention_share(0.6, 0.25) == pytest.approx(2.4 / 2.8)
    # a kernel that is all matmul stays at its rated figure, one with no matmul has no share
    assert narrow_tensor_attention_share(1.0, 0.25) == pytest.approx(1.0)
    assert narrow_tensor_attention_share(0.0, 0.25) == 0.0
    # the narrower the part, the higher the share, never above the rated figure
    for share in (0.15, 0.3, 0.35, 0.58, 0.6):
        shares = [narrow_tensor_attention_share(share, r) for r in (1.0, 0.5, 0.25)]
        assert share == pytest.approx(shares[0])
        assert shares[0] < shares[1] < shares[2] < 1.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # the part FA2's figure was measured on, then GA102 / AD102 at full and at half rate
        ("A100-80GB-SXM", 0.6),
        ("RTXA5000", 0.75),
        ("RTXA6000", 0.75),
        ("L40S", 0.75),
        ("RTX-PRO-6000", 0.75),
        ("RTX4090", 2.4 / 2.8),
        ("RTX3090", 2.4 / 2.8),
        ("L40", 2.4 / 2.8),
        ("A10G", 2.4 / 2.8),
    ],
)
def test_each_part_reads_its_share_from_its_own_seed_rate(name: str, expected: float) -> None:
    # stated hardware takes the seed's tensor_flops_per_sm_clock into the time model's Accelerator
    offer = stated_offer(find_gpu(name), StatedHardware(gpu=name))
    gpu = hardware_of(offer).accelerator(165.0)
    assert gpu.attention_efficiency("flash") == pytest.approx(expected)


def test_generations_measured_on_their_own_parts_keep_their_figure() -> None:
    # Hopper's, datacenter Blackwell's and CDNA 3's FA2 figures were measured on those parts: a
    # per-SM rate changes nothing there
    for arch in ("Hopper", "Blackwell", "CDNA 3"):
        plain = Accelerator(tflops=989.0, architecture=arch)
        stated = replace(plain, tensor_flops_per_sm_clock=4096)
        assert (
            stated.attention_efficiency()
            == plain.attention_efficiency()
            == ATTENTION_EFFICIENCY.get(arch, ATTENTION_EFFICIENCY_DEFAULT)
        )
    # a part whose rate the seed does not state counts as the A100 (its die is unknown), unless it
    # accumulates at half rate: only the narrow dies do, at 512 per SM per clock, a quarter
    unstated = Accelerator(tflops=100.0, architecture="Ada Lovelace")
    assert unstated.attention_efficiency() == pytest.approx(0.6)
    half = replace(unstated, half_rate_accumulate=True)
    assert half.attention_efficiency() == pytest.approx(2.4 / 2.8)
    assert half.attention_efficiency() == replace(half, tensor_flops_per_sm_clock=512).attention_efficiency()


def test_the_rated_figure_is_halved_but_attention_slows_by_less_than_twice() -> None:
    # the L40 is the L40S's die at half rate: 181 × 0.857 against 362 × 0.75, 1.75× slower
    l40s = replace(
        RTX4090, tflops=362.0, half_rate_accumulate=False, sm_count=142, tensor_flops_per_sm_clock=1024
    )
    l40 = replace(l40s, tflops=181.0, half_rate_accumulate=True, tensor_flops_per_sm_clock=512)
    long = replace(LORA, seq_len=16384, micro_batch=1)
    fast = step_time(LLAMA_8B, long, l40s, 1, None, True)
    slow = step_time(LLAMA_8B, long, l40, 1, None, True)
    assert slow.attention_s / fast.attention_s == pytest.approx(2 * 0.75 / (2.4 / 2.8))


@pytest.mark.parametrize("kernel", ["flash", "native", "flash1", "eager"])
def test_every_attention_kernel_on_a_narrow_part_gets_the_derived_share(kernel: str) -> None:
    a100_rate = replace(RTX4090, half_rate_accumulate=False, tensor_flops_per_sm_clock=2048)
    assert RTX4090.attention_efficiency(kernel) == pytest.approx(
        narrow_tensor_attention_share(a100_rate.attention_efficiency(kernel), 0.25)
    )
    if kernel == "flash1":
        assert a100_rate.attention_efficiency(kernel) == pytest.approx(
            ATTENTION_EFFICIENCY["Ada Lovelace"] / FA2_SPEEDUP_OVER_FA1
        )


def test_a_long_context_4090_run_gains_from_it_and_a_short_one_barely() -> None:
    # Answer.AI's dual 4090 (X13, X14): Mistral 7B QLoRA, 24,576 tokens a step as 12 x 2,048 or
    # 1 x 24,576; only the long rows' attention is large enough to move
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    models, gpus = load_models(), load_gpus()
    steps = {}
    for row_id in ("X13", "X14"):
        case = row_to_case(rows[row_id], models, gpus)
        assert case.model is not None and case.job is not None and case.gpu is not None
        assert case.gpu.tensor_flops_per_sm_clock == 512  # read from the seed
        at_a100_rate = replace(case.gpu, half_rate_accumulate=False, tensor_flops_per_sm_clock=2048)
        steps[row_id] = [
            estimate_time(
                case.model,
                case.job,
                1e9,
                case.n_gpus,
                case.gpus_per_node,
                g.tflops,
                case.intra_node_gbps,
                case.inter_node_gbps,
                gpu=g,
            ).step
            for g in (case.gpu, at_a100_rate)
        ]
    for narrow, wide in steps.values():
        assert narrow.attention_s < wide.attention_s
    long_gain = steps["X14"][1].attention_s - steps["X14"][0].attention_s
    short_gain = steps["X13"][1].attention_s - steps["X13"][0].attention_s
    assert long_gain > 10 * short_gain
