"""A part's measured large-matmul rate (gpus.csv `matmul_tflops`) bounds its GEMM efficiency.

GEMM_EFFICIENCY (0.80) is the share of dense peak that an H100's best-shape bf16 matmul reaches
(MAMF). Parts whose own best-shape rate is lower (B200, GB200, and AMD's MI300X at 51 %) cannot
beat it on a training GEMM, so the model holds them to it; parts measured higher keep 0.80. The
rate travels from the seed through the offer frame and `Hardware` into the `Accelerator` as a
share of the part's own peak. Parts the MAMF table never measured take the figure of a second
table of large bf16 matmuls (zzc0721/torch-performance-test-data), which reads within 3 % of MAMF
on the four parts both measured: the power-capped cards (H100 PCIe at 350 W, L40S, L4 at 72 W)
are the ones it moves.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from answers.estimate import StatedHardware, find_gpu, stated_offer
from finetune import Accelerator, FinetuneJob, Job, ModelSpec
from finetune.offer import hardware_of
from finetune.placement import Hardware, MemoryTable, place_at, plan_job
from finetune.time import GEMM_EFFICIENCY, GEMM_EFFICIENCY_HALF_RATE, estimate_time, matmul_share
from warehouse.hardware import HardwareCatalog
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B: ModelSpec = MODELS["meta-llama/Llama-3.1-8B"]
# the two measurements a seeded rate may cite: MAMF (searched shapes, mean of 100) and, for parts it
# never measured, the square-matrix table (best of 1024..10240, 30 timed after 10 warm-up)
MAMF = "Maximum Achievable Matmul FLOPS"
SQUARE_TABLE = "zzc0721/torch-performance-test-data"
MEASURED_TABLES = (MAMF, SQUARE_TABLE)
FULL = Job(method="full", seq_len=8192, micro_batch=1, grad_checkpointing=True)


@pytest.fixture(scope="module")
def hw() -> HardwareCatalog:
    return HardwareCatalog.load()


# --- the seed ------------------------------------------------------------------------------------


def test_every_measured_rate_cites_its_measurement_and_is_below_the_peak(hw: HardwareCatalog) -> None:
    measured = [g for g in hw.gpus.values() if g.matmul_tflops is not None]
    assert measured, "no GPU has a measured matmul rate"
    for g in measured:
        source = g.matmul_tflops_source
        assert any(table in source for table in MEASURED_TABLES), g.gpu_name
        # the figure is quoted in its source text, so the two cannot drift apart
        assert f"{g.matmul_tflops}" in source or f"{g.matmul_tflops:.1f}" in source, g.gpu_name
        assert g.bf16_tflops is not None, g.gpu_name  # a share needs the peak it is a share of
        # a measured rate above the dense peak would be a unit or variant mix-up; below a third
        # of it, a broken software stack rather than the part
        assert g.matmul_tflops is not None and g.bf16_tflops / 3 < g.matmul_tflops < g.bf16_tflops, g.gpu_name
    # a source without a rate would cite nothing
    assert all(not g.matmul_tflops_source for g in hw.gpus.values() if g.matmul_tflops is None)


def test_every_priced_amd_part_has_its_own_measured_rate(hw: HardwareCatalog) -> None:
    # the rated 0.80 is an NVIDIA measurement; CDNA parts reach far less (MI300X 51 %), and the
    # model has no AMD constant left to fall back on
    priced_amd = [g for g in hw.gpus.values() if g.architecture.startswith("CDNA") and g.bf16_tflops]
    assert {g.gpu_name for g in priced_amd} == {"MI300X", "MI325X", "MI355X"}
    assert all(g.matmul_tflops is not None for g in priced_amd)


def test_the_seed_holds_the_mamf_table_figures(hw: HardwareCatalog) -> None:
    # stas00/ml-engineering @744d01e, BF16 MAMF (mean of 100 matmuls at the best shape)
    expected = {"H100-SXM": 794.5, "A100-80GB-SXM": 271.2, "B200": 1745.0, "MI300X": 668.4, "MI325X": 784.9}
    assert {name: hw.gpus[name].matmul_tflops for name in expected} == expected
    # "H200 is the same" (the H100 SXM row's note): the same GH100 at the same clocks
    assert hw.gpus["H200-SXM"].matmul_tflops == hw.gpus["H100-SXM"].matmul_tflops
    # GH200 was measured as the 900 W 141 GB part; the seed's GH200 is the 96 GB one
    assert hw.gpus["GH200"].matmul_tflops is None


def test_parts_mamf_never_measured_take_the_square_matrix_table(hw: HardwareCatalog) -> None:
    # zzc0721/torch-performance-test-data database.md @9d82827, BF16 column
    expected = {"L40S": 269.15, "L4": 70.89, "H100-PCIe": 495.93, "RTXA6000": 123.34, "RTXA4000": 62.78}
    assert {name: hw.gpus[name].matmul_tflops for name in expected} == expected
    assert all(SQUARE_TABLE in hw.gpus[name].matmul_tflops_source for name in expected)
    # a part both tables measured keeps MAMF's figure: its search over shapes finds the better one
    assert all(
        MAMF in g.matmul_tflops_source
        for g in hw.gpus.values()
        if g.matmul_tflops and g.gpu_name not in expected
    )
    # the A100 PCIe stays unmeasured: MAMF's "A100 PCIe" does not say which of the 40 GB (250 W)
    # and 80 GB (300 W) parts it was, and the square table's is one contributor's 40 GB card
    assert hw.gpus["A100-40GB-PCIe"].matmul_tflops is None and hw.gpus["A100-80GB-PCIe"].matmul_tflops is None


def test_the_power_capped_pcie_hopper_is_held_below_the_sxm_part(hw: HardwareCatalog) -> None:
    # the same GH100 at 350 W reaches 65.6 % of its rated peak where the 700 W SXM part reaches 80 %:
    # a PCIe plan's matmuls now take 0.80 / 0.656 = 1.22x what the rated figure alone priced
    pcie = hw.gpus["H100-PCIe"]
    share = matmul_share(pcie.matmul_tflops, pcie.bf16_tflops)
    assert share == pytest.approx(0.656, abs=0.001)
    rated = Accelerator(tflops=756.0, memory_bandwidth_gbps=2000.0, architecture="Hopper")
    measured = replace(rated, matmul_share=share)
    slow = estimate_time(LLAMA_8B, FULL, 1e9, 1, 1, 756.0, None, None, gpu=measured).step
    fast = estimate_time(LLAMA_8B, FULL, 1e9, 1, 1, 756.0, None, None, gpu=rated).step
    assert slow.matmul_s / fast.matmul_s == pytest.approx(GEMM_EFFICIENCY / share, rel=1e-9)
    # nothing but the matmuls moves: the memory-bound terms do not depend on the tensor rate
    assert slow.elementwise_s == fast.elementwise_s and slow.comm_s == fast.comm_s


# --- the efficiency ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("share", "expected"),
    [(None, GEMM_EFFICIENCY), (0.869, GEMM_EFFICIENCY), (0.80, GEMM_EFFICIENCY), (0.514, 0.514)],
    ids=["unmeasured", "A100-above", "equal", "MI300X-below"],
)
def test_the_efficiency_is_the_rated_share_held_to_the_measured_one(
    share: float | None, expected: float
) -> None:
    assert Accelerator(tflops=1000.0, matmul_share=share).gemm_efficiency == pytest.approx(expected)


@pytest.mark.parametrize(
    ("name", "efficiency"),
    [
        ("MI300X", 668.4 / 1307),
        ("B200", 1745.0 / 2250),
        ("H100-SXM", GEMM_EFFICIENCY),
        ("L40S", 269.15 / 362),
        ("RTXA4000", GEMM_EFFICIENCY),  # 62.78 of 76.7 is 81.9 %: measured above 0.80 keeps 0.80
        ("A10", GEMM_EFFICIENCY),  # measured by neither table
        # measured by neither table, and rated at half rate: large GEMMs reach the rated figure
        ("A10G", GEMM_EFFICIENCY_HALF_RATE),
    ],
)
def test_a_stated_gpu_reaches_the_estimate_with_its_measured_share(name: str, efficiency: float) -> None:
    gpu = find_gpu(name)
    row = stated_offer(gpu, StatedHardware(gpu=name))
    assert row["matmul_tflops"] == gpu.matmul_tflops
    hardware = hardware_of(row)
    assert hardware.matmul_tflops == gpu.matmul_tflops
    share = None if hardware.matmul_tflops is None else hardware.matmul_tflops / (hardware.tensor_tflops or 1)
    accelerator = Accelerator(
        tflops=1.0, matmul_share=share, half_rate_accumulate=hardware.half_rate_accumulate
    )
    assert accelerator.gemm_efficiency == pytest.approx(efficiency)


def _plan_hours(hardware: Hardware, model: ModelSpec = LLAMA_8B, job: Job = FULL) -> float:
    fjob = FinetuneJob("job", model.model_id, job, 100_000_000, 1.0)
    memory = MemoryTable().for_job(model, fjob.job)
    # the job's own sharding on one node: this is about the matmul rate, not which sharding wins
    placed = place_at(memory, hardware.gpus_per_node, hardware.vram_gb, 1, job.sharding)
    plan = plan_job(fjob, hardware, placed, memory)
    assert plan.estimated_hours is not None, plan.unpriced_reason
    return plan.estimated_hours


def test_an_mi300x_plan_prices_its_matmuls_at_the_measured_rate() -> None:
    mi300x = hardware_of(stated_offer(find_gpu("MI300X"), StatedHardware(gpu="MI300X", gpus_per_node=8)))
    measured = _plan_hours(mi300x)
    rated = _plan_hours(replace(mi300x, matmul_tflops=None))
    # slower, but by less than the whole ratio of shares: attention, elementwise work and the
    # optimizer do not run on the GEMM rate
    assert 1.0 < measured / rated < GEMM_EFFICIENCY / (668.4 / 1307)
    # and the plan is the time model's own, with the share carried into the Accelerator
    gpu = Accelerator(
        tflops=1307.0,
        memory_bandwidth_gbps=mi300x.memory_bandwidth_gbps,
        architecture=mi300x.architecture,
        vram_gb=mi300x.vram_gb,
        pcie_gen=mi300x.pcie_gen,
        matmul_share=668.4 / 1307.0,
    )
    intra = (mi300x.intra_node_gbytes_per_s or 0) * 8
    direct = estimate_time(LLAMA_8B, FULL, 100_000_000, 8, 8, 1307.0 * 8, intra, None, gpu=gpu)
    assert measured == pytest.approx(direct.hours)


def test_a_slice_is_held_to_the_share_of_the_whole_part() -> None:
    # a slice (MIG, or an MI300X partition) has a share of the part's peak and bandwidth; the
    # measured rate is the whole part's, so it bounds the slice as a share, not as TFLOPS (as
    # TFLOPS it would sit above half the peak and bound nothing)
    whole = hardware_of(stated_offer(find_gpu("MI300X"), StatedHardware(gpu="MI300X")))
    half = replace(whole, gpu_count=0.5, vram_gb=whole.vram_gb / 2)
    lora = replace(FULL, method="lora")

    def slowdown(hardware: Hardware) -> float:
        return _plan_hours(hardware, LLAMA_8B, lora) / _plan_hours(
            replace(hardware, matmul_tflops=None), LLAMA_8B, lora
        )

    # it binds the slice (slower than at 0.80 of its peak share), and by no more than the matmuls'
    # own ratio, 0.80 / 0.511 = 1.57: the rest of the step does not slow
    assert 1.0 < slowdown(half) < 0.80 / matmul_share(668.4, 1307.0)
    # the same share of the same work: the slice slows by what the whole part does (only the
    # fixed per-launch costs, which do not halve with the slice, dilute it a little)
    assert slowdown(half) == pytest.approx(slowdown(whole), rel=0.02)


def test_the_share_needs_both_figures() -> None:
    assert matmul_share(668.4, 1307.0) == pytest.approx(0.5114, abs=1e-4)
    # an unmeasured part, or one without a dense peak (no tensor cores), has no share
    assert matmul_share(None, 1307.0) is None
    assert matmul_share(668.4, None) is None
