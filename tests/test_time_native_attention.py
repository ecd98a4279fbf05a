"""The GPU's own fused attention (issue 23): `Job.attention` "native" prices attention at the
share of peak that a generation's own kernel reaches where it has one beyond FlashAttention-2
(FlashAttention-3, cuDNN or TransformerEngine on Hopper; FlashAttention-4 or cuDNN on Blackwell),
and at the FA2-class figure elsewhere; "flash1" (FlashAttention-1-class: flash-attn 1.x, its Triton
port that llm-foundry's `attn_impl: triton` runs, SDPA's flash backend before torch 2.2) at the FA2
figure over FA2's stated "around 2×" speed-up on them (Dao 2023, abstract). Memory does not
change: every fused kernel keeps O(s)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from typer.testing import CliRunner

from benchmarks.throughput_accuracy import EXTRA_CSV, load_gpus, row_to_case
from finetune import Accelerator, Job, estimate_time, memory_per_gpu
from finetune.time import (
    ATTENTION_EFFICIENCY,
    ATTENTION_EFFICIENCY_DEFAULT,
    FA2_SPEEDUP_OVER_FA1,
    NATIVE_ATTENTION_EFFICIENCY,
)
from flows.cli import app
from flows.job_options import JobOptions
from tests.factories import A100, B200, H100, MI300X, benchmark_row, estimate_json
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
LONG = Job(method="full", seq_len=8192, micro_batch=1, sharding="zero3")


def _step(job: Job, gpu: Accelerator):  # type: ignore[no-untyped-def]
    return estimate_time(LLAMA_8B, job, 1e9, 8, 8, gpu.tflops, 3600.0, None, gpu=gpu).step


# --- the constants are the arithmetic their sources give ----------------------------------------


def test_hopper_native_is_flashattention_3s_speed_up_over_fa2() -> None:
    # Shah et al. 2024 §4.1: FA3 is 1.5–2.0× FA2 forward, 1.5–1.75× backward; backward is 2.5
    # forwards' worth of FLOPs, so the whole pass speeds up by the FLOP-weighted harmonic mean
    speed_up = 3.5 / (1 / ((1.5 + 2.0) / 2) + 2.5 / ((1.5 + 1.75) / 2))
    assert speed_up == pytest.approx(1.66, abs=0.005)
    assert NATIVE_ATTENTION_EFFICIENCY["Hopper"] == round(ATTENTION_EFFICIENCY_DEFAULT * speed_up, 2)


def test_blackwell_native_is_flashattention_4s_measured_pass() -> None:
    # Dao-AILab/flash-attention PR #2280: B200, head dim 128, causal, 8k tokens, 1418.1 TFLOPS
    # forward, 1208.6 backward (2-CTA); one forward and 2.5 forwards' worth of backward
    rate = 3.5 / (1 / 1418.1 + 2.5 / 1208.6)
    assert rate == pytest.approx(1262, abs=1)
    assert NATIVE_ATTENTION_EFFICIENCY["Blackwell"] == round(rate / 2250, 2)
    # Blackwell Ultra (B300) runs the same sm100-family kernels at the same dense peak
    assert NATIVE_ATTENTION_EFFICIENCY["Blackwell Ultra"] == NATIVE_ATTENTION_EFFICIENCY["Blackwell"]


def test_datacenter_blackwell_flash_share_is_fa2s_measured_pass_on_a_b200() -> None:
    # Dao-AILab/flash-attention issue #1589: flash-attn 2.7.4 on a B200, head dim 64, the
    # benchmark's fwd + bwd at 2k, 4k, 8k and 16k tokens; the median over the dense peak
    passes = sorted([320.70, 312.45, 332.97, 345.80])
    median = (passes[1] + passes[2]) / 2
    assert median == pytest.approx(326.835)
    assert ATTENTION_EFFICIENCY["Blackwell"] == round(median / 2250, 2)
    # about Hopper's absolute FA2 rate (0.35 × 989 = 346 TFLOPS): FA2 gains nothing from sm100
    assert median == pytest.approx(ATTENTION_EFFICIENCY_DEFAULT * 989, rel=0.06)
    # B300 runs the same kernels at the same dense peak
    assert ATTENTION_EFFICIENCY["Blackwell Ultra"] == ATTENTION_EFFICIENCY["Blackwell"]


def test_rtx_blackwell_runs_fa2_on_the_mma_path_ada_does() -> None:
    # sm120 has no wgmma or tcgen05: FA2's mma.sync is its tensor-core path, as on Ada
    assert ATTENTION_EFFICIENCY["RTX Blackwell"] == ATTENTION_EFFICIENCY["Ada Lovelace"]
    # and it has no native kernel beyond FA2's class
    assert "RTX Blackwell" not in NATIVE_ATTENTION_EFFICIENCY


def test_cdna3_flash_share_is_rocm_fa2s_measured_pass() -> None:
    # ROCm/flash-attention issue #142 (MI300X, ROCm 6.3.2): the benchmark's own fwd + bwd rate,
    # head dim 128, 16k tokens, at batch 1, 2, 4 and 8; the median over the dense peak
    passes = sorted([223.08, 230.54, 231.57, 228.36])
    median = (passes[1] + passes[2]) / 2
    assert median == pytest.approx(229.45)
    assert ATTENTION_EFFICIENCY["CDNA 3"] == round(median / 1307.4, 2)
    # the benchmark's fwd + bwd is the same FLOP-weighted pass the Hopper and Blackwell figures use
    weighted = 3.5 / (1 / 355.51 + 2.5 / 202.12)
    assert weighted == pytest.approx(230.54, abs=0.05)
    # and ROCm's FA2 sits below the FA2-on-Hopper figure other generations default to
    assert ATTENTION_EFFICIENCY["CDNA 3"] < ATTENTION_EFFICIENCY_DEFAULT


def test_cdna3_attention_costs_rocm_fa2s_share() -> None:
    # the same part with no generation named takes the default figure: only attention moves
    cdna3 = _step(LONG, MI300X)
    as_default = _step(LONG, replace(MI300X, architecture=None))
    assert cdna3.attention_s == pytest.approx(as_default.attention_s * 0.35 / 0.18, rel=1e-9)
    assert cdna3.matmul_s == as_default.matmul_s


def test_native_is_faster_than_fa2_where_a_generation_has_its_own_kernel() -> None:
    for architecture, native in NATIVE_ATTENTION_EFFICIENCY.items():
        assert native > ATTENTION_EFFICIENCY.get(architecture, ATTENTION_EFFICIENCY_DEFAULT)


# --- the time model -----------------------------------------------------------------------------


def test_native_attention_on_hopper_costs_fa2s_share_over_fa3s() -> None:
    flash = _step(LONG, H100)
    native = _step(replace(LONG, attention="native"), H100)
    assert native.attention_s == pytest.approx(flash.attention_s * 0.35 / 0.58, rel=1e-9)
    # attention is all that moves
    assert native.matmul_s == flash.matmul_s
    assert native.elementwise_s == flash.elementwise_s
    assert native.total_s < flash.total_s


def test_native_attention_on_blackwell_is_fa4s_share() -> None:
    # FA2 on a B200 reaches 0.15 of peak, its own kernels 0.56: 3.7× faster attention
    flash = _step(LONG, B200)
    native = _step(replace(LONG, attention="native"), B200)
    assert native.attention_s == pytest.approx(flash.attention_s * 0.15 / 0.56, rel=1e-9)


@pytest.mark.parametrize("gpu", [A100, MI300X], ids=["Ampere", "CDNA 3"])
def test_native_is_the_fa2_class_figure_where_there_is_no_other_kernel(gpu: Accelerator) -> None:
    # Ampere and Ada have no kernel beyond FA2's class (cuDNN runs at its speed); no sourced
    # figure for ROCm's kernels: both keep their flash figure
    assert _step(replace(LONG, attention="native"), gpu) == _step(LONG, gpu)


def test_native_skips_the_causal_upper_half_as_flash_does() -> None:
    # eager computes every score; both fused kernels skip the masked blocks
    eager = _step(replace(LONG, attention="eager"), H100)
    native = _step(replace(LONG, attention="native"), H100)
    flash = _step(LONG, H100)
    assert native.attention_s < flash.attention_s < eager.attention_s


def test_the_longer_the_sequence_the_more_native_attention_gains() -> None:
    def gain(seq_len: int) -> float:
        job = replace(LONG, seq_len=seq_len)
        return _step(job, H100).total_s / _step(replace(job, attention="native"), H100).total_s

    assert 1.0 < gain(2048) < gain(8192) < gain(32768)


# --- the job and memory -------------------------------------------------------------------------


def test_the_fused_stack_keeps_native_attention_and_never_runs_eager() -> None:
    assert Job(kernels="fused", attention="native").attention_kernel == "native"
    assert Job(kernels="fused", attention="eager").attention_kernel == "flash"
    assert Job(kernels="fused").attention_kernel == "flash"
    assert Job(attention="eager").attention_kernel == "eager"


def test_packed_documents_run_on_native_attention_and_not_on_eager() -> None:
    assert Job(seq_len=8192, doc_len=500.0, attention="native").doc_len == 500.0
    with pytest.raises(ValueError, match="attention='flash', 'native' or 'flash1'"):
        Job(seq_len=8192, doc_len=500.0, attention="eager")


@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_memory_does_not_depend_on_which_fused_kernel_runs(method: str) -> None:
    job = Job(method=method, seq_len=8192, micro_batch=2)  # type: ignore[arg-type]
    flash = memory_per_gpu(LLAMA_8B, job, 1)
    native = memory_per_gpu(LLAMA_8B, replace(job, attention="native"), 1)
    assert native.total_gb == flash.total_gb
    assert memory_per_gpu(LLAMA_8B, replace(job, attention="eager"), 1).total_gb > flash.total_gb


# --- the command line ---------------------------------------------------------------------------


def test_the_option_reaches_the_job() -> None:
    job, _ = JobOptions(model="Llama-3.1-8B", attention="native").job(sharding="none")
    assert job.attention == "native"


def test_the_estimate_on_an_h100_is_faster_with_native_attention() -> None:
    native = estimate_json("--attention", "native")
    assert native["job"]["attention"] == "native"
    assert native["tokens_per_s"] > estimate_json()["tokens_per_s"]


def test_an_unknown_attention_is_refused_naming_the_choices() -> None:
    result = CliRunner().invoke(app, ["estimate", "--model", "Llama-3.1-8B", "--attention", "cudnn"])
    assert result.exit_code != 0
    assert "native" in result.output


# --- the benchmark's reading --------------------------------------------------------------------


def _row(row_id: str) -> dict[str, str]:
    return benchmark_row(EXTRA_CSV, row_id)


def test_the_benchmark_reads_transformerengine_stacks_as_native_attention() -> None:
    gpus = load_gpus()
    # NeMo's SFT and LoRA on TransformerEngine layers: "TransformerEngine layers/fused attention"
    for row_id in ("X35", "X38"):
        row = _row(row_id)
        assert "TransformerEngine layers/fused attention" in row["framework"]
        case = row_to_case(row, MODELS, gpus)
        assert case.job is not None and case.job.attention == "native"
    # a stack that does not name its kernel runs FA2-class attention: AutoModel's rows say
    # "attention implementation not pinned", Answer.AI's fsdp_qlora runs transformers' SDPA
    for row_id in ("X33", "X05"):
        case = row_to_case(_row(row_id), MODELS, gpus)
        assert case.job is not None and case.job.attention == "flash"


# --- FlashAttention-1-class kernels ("flash1") ----------------------------------------------------


def test_ampere_flash1_falls_inside_the_papers_own_range_for_flashattention() -> None:
    # the abstract: FlashAttention reaches "only 25-40% of the theoretical maximum FLOPs/s";
    # FA2's Ampere figure (0.6) over its "around 2×" speed-up lands inside that range
    share = A100.attention_efficiency("flash1")
    assert share == pytest.approx(ATTENTION_EFFICIENCY["Ampere"] / FA2_SPEEDUP_OVER_FA1)
    assert 0.25 <= share <= 0.40


@pytest.mark.parametrize("gpu", [A100, H100, B200], ids=["Ampere", "Hopper", "Blackwell"])
def test_flash1_is_half_the_flash_rate_on_every_generation(gpu: Accelerator) -> None:
    assert gpu.attention_efficiency("flash1") == pytest.approx(gpu.attention_efficiency("flash") / 2)


def test_flash1_doubles_the_attention_time_and_moves_nothing_else() -> None:
    flash = _step(LONG, A100)
    flash1 = _step(replace(LONG, attention="flash1"), A100)
    assert flash1.attention_s == pytest.approx(2 * flash.attention_s, rel=1e-12)
    assert flash1.matmul_s == flash.matmul_s
    assert flash1.elementwise_s == flash.elementwise_s
    assert flash1.comm_s == flash.comm_s
    assert flash1.total_s > flash.total_s


def test_flash1_skips_the_causal_upper_half_as_flash_does() -> None:
    # eager computes every score at FA2's rate (2× the FLOPs); flash1 half as many at half the
    # rate: the same matmul seconds, without eager's score traffic
    flash1 = _step(replace(LONG, attention="flash1"), A100)
    eager = _step(replace(LONG, attention="eager"), A100)
    assert flash1.attention_s < eager.attention_s


def test_flash1_matters_more_the_longer_the_sequence() -> None:
    def slowdown(seq_len: int) -> float:
        job = replace(LONG, seq_len=seq_len)
        return _step(replace(job, attention="flash1"), A100).total_s / _step(job, A100).total_s

    assert 1.0 < slowdown(1024) < slowdown(8192) < slowdown(32768)


@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_flash1_keeps_flash_memory(method: str) -> None:
    job = Job(method=method, seq_len=8192, micro_batch=2)
    flash = memory_per_gpu(LLAMA_8B, job, 1)
    assert memory_per_gpu(LLAMA_8B, replace(job, attention="flash1"), 1) == flash


def test_packed_documents_run_on_flash1() -> None:
    # flash-attn 1.x has a varlen (unpadded) kernel too
    assert Job(seq_len=8192, doc_len=500.0, attention="flash1").doc_len == 500.0


def test_the_cli_prices_flash1_slower_than_flash() -> None:
    flash1 = estimate_json("--attention", "flash1")
    assert flash1["tokens_per_s"] < estimate_json()["tokens_per_s"]
