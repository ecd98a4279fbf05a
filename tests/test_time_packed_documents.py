"""Packed documents attended apart (issue 23): packers that hand each document's boundaries to
FlashAttention's varlen kernel (axolotl sample_packing, TRL padding_free) compute attention within
each document, not over the packed row. `Job.doc_len` states the mean document length; the time
model prices attention at E[L²]/E[L] of the lengths (`attended_length`), and nothing else moves."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from benchmarks.throughput_accuracy import EXTRA_CSV, load_gpus, row_to_case
from finetune import Job, estimate_time, memory_per_gpu
from finetune.job import _truncated_exponential_rate, attended_length, padded_batch_length
from flows.cli import app
from flows.job_options import JobOptions
from tests.factories import H100, benchmark_row, estimate_json
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
# axolotl's Llama-3.1-8B full fine-tune on MI300X (benchmarks/data X43): 8,192-token rows packed
# with conversations of 446.5 tokens on average
PACKED = Job(method="full", seq_len=8192, micro_batch=8, sharding="zero3")


def _moments_by_sum(mean_len: float, max_len: float, panels: int = 200_000) -> float:
    """E[L²]/E[L] of the same law by a plain midpoint sum: an independent check of the closed form."""
    lam = _truncated_exponential_rate(mean_len, max_len)
    h = max_len / panels
    xs = [(i + 0.5) * h for i in range(panels)]
    # the density's shape, shifted so that its largest value is 1 whichever way it decays
    top = 0.0 if lam >= 0 else -lam * max_len
    pairs = [(math.exp(-lam * x - top), x) for x in xs]
    return sum(w * x * x for w, x in pairs) / sum(w * x for w, x in pairs)


# --- the attended length ------------------------------------------------------------------------


@pytest.mark.parametrize(("mean_len", "max_len"), [(446.5, 8192), (1000, 4096), (2048, 4096), (3500, 4096)])
def test_the_closed_form_matches_a_direct_sum(mean_len: float, max_len: float) -> None:
    assert attended_length(mean_len, max_len) == pytest.approx(_moments_by_sum(mean_len, max_len), rel=1e-4)


def test_short_documents_attend_twice_their_mean() -> None:
    # far below the cap the law is exponential, whose E[L²] is 2·E[L]²
    assert attended_length(100, 1_000_000) == pytest.approx(200, rel=1e-3)
    # which holds however far below the cap (the rate is no longer clamped at max_len / 100)
    assert attended_length(10, 100_000) == pytest.approx(20, rel=1e-3)


def test_half_the_cap_is_the_uniform_law() -> None:
    # uniform on [0, M]: E[L²]/E[L] = (M²/3) / (M/2) = 2M/3
    assert attended_length(4096, 8192) == pytest.approx(2 * 8192 / 3, rel=1e-6)


@pytest.mark.parametrize("max_len", [2048, 8192, 131072])
def test_the_length_lies_between_the_mean_and_the_cap_and_grows_with_the_mean(max_len: int) -> None:
    means = [max_len * f for f in (0.001, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99)]
    lengths = [attended_length(m, max_len) for m in means]
    # E[L²] ≥ E[L]² (Cauchy–Schwarz) and L ≤ max_len
    assert all(m <= length <= max_len for m, length in zip(means, lengths, strict=True))
    assert lengths == sorted(lengths)
    # near the cap every document fills the row
    assert lengths[-1] == pytest.approx(max_len, rel=0.01)


@pytest.mark.parametrize(("mean_len", "max_len"), [(0, 8192), (8192, 8192), (9000, 8192), (-1, 8192)])
def test_a_mean_outside_the_row_is_refused(mean_len: float, max_len: float) -> None:
    with pytest.raises(ValueError, match="0 < mean_len < max_len"):
        attended_length(mean_len, max_len)


def test_padded_batches_of_short_samples_are_no_longer_clamped() -> None:
    # the maximum of b exponential lengths has mean μ·(1 + 1/2 + … + 1/b); before this change the
    # rate search stopped at a mean of max_len / 100 and gave 208 tokens here instead of 20.8
    assert padded_batch_length(10, 10_000, 4) == pytest.approx(10 * (1 + 1 / 2 + 1 / 3 + 1 / 4), rel=1e-3)
    assert padded_batch_length(10, 10_000, 1) == pytest.approx(10, rel=1e-3)


# --- the Job ------------------------------------------------------------------------------------


def test_without_documents_attention_spans_the_row() -> None:
    assert PACKED.attention_span == 8192


def test_with_documents_attention_spans_their_attended_length() -> None:
    assert replace(PACKED, doc_len=446.5).attention_span == pytest.approx(attended_length(446.5, 8192))
    # about twice the mean, far below the row
    assert replace(PACKED, doc_len=446.5).attention_span == pytest.approx(893, rel=1e-3)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"doc_len": 8192.0}, "between 0 and seq_len"),
        ({"doc_len": 0.0}, "between 0 and seq_len"),
        ({"doc_len": math.nan}, "between 0 and seq_len"),
        ({"doc_len": 400.0, "peak_seq_len": 9000}, "padded data"),
        ({"doc_len": 400.0, "padding_efficiency": 0.5}, "padded data"),
        ({"doc_len": 400.0, "attention": "eager"}, "varlen"),
    ],
)
def test_documents_that_cannot_be_packed_so_are_refused(knobs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replace(PACKED, **knobs)  # type: ignore[arg-type]


def test_the_fused_stack_loads_flash_attention_whatever_attention_says() -> None:
    job = replace(PACKED, doc_len=400.0, attention="eager", kernels="fused")
    assert job.attention_span == pytest.approx(attended_length(400.0, 8192))


# --- what it changes ----------------------------------------------------------------------------


def _step(job: Job) -> object:
    step = estimate_time(LLAMA_8B, job, 1e9, 8, 8, H100.tflops, 3600.0, None, gpu=H100).step
    assert step is not None
    return step


def test_only_attention_time_falls_in_proportion_to_the_span() -> None:
    whole, apart = _step(PACKED), _step(replace(PACKED, doc_len=446.5))
    ratio = attended_length(446.5, 8192) / 8192
    assert apart.attention_s == pytest.approx(whole.attention_s * ratio)  # type: ignore[attr-defined]
    for part in ("matmul_s", "elementwise_s", "loss_s", "optimizer_s", "comm_s", "dispatch_s"):
        assert getattr(apart, part) == pytest.approx(getattr(whole, part)), part


def test_a_row_of_one_document_would_cost_more_attention_than_short_ones() -> None:
    spans = [_step(replace(PACKED, doc_len=d)).attention_s for d in (200.0, 1000.0, 4000.0)]  # type: ignore[attr-defined]
    assert spans == sorted(spans)
    assert spans[-1] < _step(PACKED).attention_s  # type: ignore[attr-defined]


def test_memory_does_not_depend_on_the_documents() -> None:
    # FlashAttention keeps O(s) state per row whether it attends across documents or not
    whole = memory_per_gpu(LLAMA_8B, PACKED, 8)
    apart = memory_per_gpu(LLAMA_8B, replace(PACKED, doc_len=446.5), 8)
    assert apart.as_dict() == whole.as_dict()


# --- the command line ---------------------------------------------------------------------------


def test_the_option_reaches_the_job() -> None:
    job, _ = JobOptions(model="Llama-3.1-8B", seq_len=8192, doc_len=446.5).job(sharding="none")
    assert job.doc_len == 446.5


def test_the_estimate_is_faster_with_short_documents() -> None:
    assert estimate_json("--doc-len", "446.5")["tokens_per_s"] > estimate_json()["tokens_per_s"]


def test_a_document_longer_than_the_row_is_refused_in_one_line() -> None:
    args = ["estimate", "--model", "Llama-3.1-8B", "--seq-len", "2048", "--doc-len", "3000"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0
    assert "doc_len 3000 must be between 0 and seq_len 2048" in result.output


# --- the benchmark's reading --------------------------------------------------------------------


def _row(row_id: str) -> dict[str, str]:
    return benchmark_row(EXTRA_CSV, row_id)


def test_the_benchmark_reads_the_documents_the_notes_state() -> None:
    case = row_to_case(_row("X43"), MODELS, load_gpus())
    assert case.job is not None and case.job.doc_len == 446.5
    # a torchtitan row packs without document masking: attention over the whole row
    titan = row_to_case(_row("X30"), MODELS, load_gpus())
    assert titan.job is not None and titan.job.doc_len is None


def test_megatron_on_transformer_engine_reads_as_the_fused_stack() -> None:
    case = row_to_case(_row("X35"), MODELS, load_gpus())
    assert case.job is not None and case.job.kernels == "fused"
    automodel = row_to_case(_row("X33"), MODELS, load_gpus())
    assert automodel.job is not None and automodel.job.kernels == "plain"


# --- one attention rule for memory and time -----------------------------------------------------

GEMMA_2 = MODELS["google/gemma-2-9b"]
GEMMA_JOB = Job(method="lora", seq_len=4096)


def test_a_soft_capped_model_runs_eager_attention_on_the_plain_stack_for_time_too() -> None:
    # memory already counted Gemma 2's s² scores on the plain stack; time priced FlashAttention
    from finetune.memory import attention_impl

    assert attention_impl(GEMMA_2, GEMMA_JOB) == "eager"
    assert attention_impl(LLAMA_8B, GEMMA_JOB) == "flash"
    plain = estimate_time(GEMMA_2, GEMMA_JOB, 1e9, 1, 1, H100.tflops, None, None, gpu=H100).step
    asked = estimate_time(
        GEMMA_2, replace(GEMMA_JOB, attention="eager"), 1e9, 1, 1, H100.tflops, None, None, gpu=H100
    )
    assert plain is not None and asked.step is not None
    assert plain.attention_s == pytest.approx(asked.step.attention_s)


def test_the_fused_stack_takes_the_soft_cap_in_flash_attention_for_memory_too() -> None:
    from finetune.memory import attention_impl

    fused = replace(GEMMA_JOB, kernels="fused")
    assert attention_impl(GEMMA_2, fused) == "flash"
    # an eager request on the fused stack is what the fused stack's FlashAttention holds
    assert (
        memory_per_gpu(LLAMA_8B, replace(fused, attention="eager")).as_dict()
        == memory_per_gpu(LLAMA_8B, fused).as_dict()
    )
    # un-checkpointed every layer keeps its attention: the plain stack's eager s² scores show
    kept, kept_fused = replace(GEMMA_JOB, grad_checkpointing=False), replace(fused, grad_checkpointing=False)
    assert memory_per_gpu(GEMMA_2, kept_fused).activations_gb < memory_per_gpu(GEMMA_2, kept).activations_gb


def test_a_soft_capped_model_cannot_keep_documents_apart_on_the_plain_stack() -> None:
    # Job alone cannot see that Gemma 2 forces eager attention on the plain stack; the model and the
    # job together refuse it, in time and memory alike, and the fused stack's FlashAttention runs it
    from finetune import require_expressible
    from finetune.job import OutsideModelError

    apart = replace(GEMMA_JOB, doc_len=300.0)
    with pytest.raises(OutsideModelError, match="kernels='fused'"):
        require_expressible(GEMMA_2, apart)
    with pytest.raises(OutsideModelError, match="eager"):
        estimate_time(GEMMA_2, apart, 1e9, 1, 1, H100.tflops, None, None, gpu=H100)
    with pytest.raises(OutsideModelError, match="eager"):
        memory_per_gpu(GEMMA_2, apart)
    fused = replace(apart, kernels="fused")
    require_expressible(GEMMA_2, fused)
    assert estimate_time(GEMMA_2, fused, 1e9, 1, 1, H100.tflops, None, None, gpu=H100).step is not None
    # a model without the soft-cap runs SDPA's flash backend on the plain stack: documents apart are fine
    require_expressible(LLAMA_8B, apart)
    # and Gemma 2 without packed documents is a job eager attention runs
    require_expressible(GEMMA_2, GEMMA_JOB)


@pytest.mark.parametrize("command", ["estimate", "memory"])
def test_the_command_line_refuses_documents_apart_under_eager_attention_in_one_line(command: str) -> None:
    args = [command, "--model", "google/gemma-2-9b", "--seq-len", "4096", "--doc-len", "300"]
    if command == "estimate":  # on stated hardware: no warehouse needed
        args += ["--gpu", "H100-SXM", "--tokens", "10M"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 1, refused.output
    assert "doc_len with google/gemma-2-9b on the plain stack" in refused.output
    assert "Traceback" not in refused.output
    fused = CliRunner().invoke(app, [*args, "--kernels", "fused", "--json"])
    assert fused.exit_code == 0, fused.output


def test_the_law_moments_behind_the_rate_search_are_continuous_where_the_series_takes_over() -> None:
    from finetune.job import _law_moments

    for t in (1e-2, -1e-2):
        below, above = _law_moments(t * (1 - 1e-9)), _law_moments(t * (1 + 1e-9))
        assert below == pytest.approx(above, rel=1e-7)
