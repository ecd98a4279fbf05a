"""torch DDP's all-reduce buckets (Job.ddp_bucket_view) and the dtype data parallelism reduces in.

With gradient_as_bucket_view=False (torch's, Accelerate's and the HF Trainer's default) the reducer
holds a flat copy of every trained gradient beside `param.grad`; PyTorch PR #41954 measured the
saving of the view as about the gradients' size. The all-reduce, and FSDP without MixedPrecision,
move gradients in their parameter's own dtype."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from benchmarks.memory_accuracy import row_to_case
from finetune import FinetuneJob, Job, memory_per_gpu
from finetune.cost import checkpoint_interval_hours, tokens_per_gpu_step
from finetune.memory import GB, adapter_params, ddp_bucket_bytes, ddp_gradient_bytes, embedding_copy_params
from finetune.time import _comm_bytes_per_micro_step, _exposed_unit_bytes, _network_bytes_per_micro_step
from flows.cli import app
from flows.job_options import JOB_OPTIONS, JobOptions
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_1B = MODELS["meta-llama/Llama-3.2-1B"]
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
FULL_AUTOCAST = Job(method="full", mixed_precision="autocast", seq_len=2048, micro_batch=1)
LORA = Job(method="lora", seq_len=2048, micro_batch=1)


def _gradients_gb(job: Job, n_gpus: int) -> float:
    return memory_per_gpu(LLAMA_1B, job, n_gpus).gradients_gb


def test_ddp_holds_the_gradients_twice_unless_they_view_the_buckets() -> None:
    # fp32 modules under autocast: a 4 B gradient per parameter, and the bucket copy of it
    copied = _gradients_gb(FULL_AUTOCAST, 2)
    viewed = _gradients_gb(replace(FULL_AUTOCAST, ddp_bucket_view=True), 2)
    assert viewed == pytest.approx(4.0 * LLAMA_1B.params / GB)
    # the saving of the view is the gradients' size (PR #41954's measurement)
    assert copied - viewed == pytest.approx(viewed)


def test_the_bucket_is_in_each_parameters_own_dtype() -> None:
    # full fine-tuning: fp32 modules under autocast, bf16 modules otherwise
    assert ddp_gradient_bytes(LLAMA_1B, FULL_AUTOCAST) == pytest.approx(4.0 * LLAMA_1B.params)
    pure = Job(method="full", precision="bf16-pure")
    assert ddp_gradient_bytes(LLAMA_1B, pure) == pytest.approx(2.0 * LLAMA_1B.params)
    bf16_modules = Job(method="full")
    assert ddp_gradient_bytes(LLAMA_1B, bf16_modules) == pytest.approx(2.0 * LLAMA_1B.params)
    # PEFT's adapters are fp32 under bf16-mixed and bf16 under bf16-pure
    adapters = adapter_params(LLAMA_1B, LORA)
    assert ddp_gradient_bytes(LLAMA_1B, LORA) == pytest.approx(4.0 * adapters)
    assert ddp_gradient_bytes(LLAMA_1B, replace(LORA, precision="bf16-pure")) == pytest.approx(2.0 * adapters)
    # a trained head copy keeps the original's bf16
    head = replace(LORA, train_embeddings="head")
    copies = embedding_copy_params(LLAMA_1B, head)
    assert copies > 0
    assert ddp_gradient_bytes(LLAMA_1B, head) == pytest.approx(4.0 * adapters + 2.0 * copies)


def test_a_lora_job_adds_its_adapters_gradients_once_more() -> None:
    copied = memory_per_gpu(LLAMA_8B, LORA, 4)
    viewed = memory_per_gpu(LLAMA_8B, replace(LORA, ddp_bucket_view=True), 4)
    extra = 4.0 * adapter_params(LLAMA_8B, LORA) / GB
    assert copied.gradients_gb - viewed.gradients_gb == pytest.approx(extra)
    assert copied.total_gb - viewed.total_gb == pytest.approx(extra)


@pytest.mark.parametrize(
    ("job", "n_gpus"),
    [
        (FULL_AUTOCAST, 1),  # one GPU: no DDP
        (replace(FULL_AUTOCAST, sharding="zero3"), 4),  # FSDP reduce-scatters its own flat gradient
        (replace(FULL_AUTOCAST, sharding="zero2"), 4),  # DeepSpeed reduces into its partition
        (replace(LORA, sharding="zero3"), 4),
        # bf16 modules with an fp32 master: FSDP NO_SHARD, DeepSpeed or Megatron, not torch DDP
        (Job(method="full", seq_len=2048), 4),
    ],
)
def test_there_is_no_bucket_without_ddp(job: Job, n_gpus: int) -> None:
    assert ddp_bucket_bytes(LLAMA_1B, job, n_gpus) == 0.0
    viewed = replace(job, ddp_bucket_view=True)
    assert memory_per_gpu(LLAMA_1B, job, n_gpus) == memory_per_gpu(LLAMA_1B, viewed, n_gpus)


def test_the_bucket_is_held_in_the_step_and_the_optimizer_step() -> None:
    copied = memory_per_gpu(LLAMA_1B, FULL_AUTOCAST, 2)
    viewed = memory_per_gpu(LLAMA_1B, replace(FULL_AUTOCAST, ddp_bucket_view=True), 2)
    bucket = 4.0 * LLAMA_1B.params / GB
    assert (copied.ddp_bucket_gb, viewed.ddp_bucket_gb) == (pytest.approx(bucket), 0.0)
    assert copied.report()["ddp_bucket_gb"] == pytest.approx(bucket)
    phases, phases_viewed = dict(copied.phases_gb), dict(viewed.phases_gb)
    assert phases["step"] - phases_viewed["step"] == pytest.approx(bucket)
    assert phases["optimizer"] - phases_viewed["optimizer"] == pytest.approx(bucket)
    # DDP wraps the model after it is loaded
    assert phases["load"] == pytest.approx(phases_viewed["load"])


def test_ddp_all_reduces_the_adapters_in_fp32() -> None:
    n = 4
    ring = (n - 1) / n
    adapters = adapter_params(LLAMA_8B, LORA)
    assert _comm_bytes_per_micro_step(LLAMA_8B, LORA, n) == pytest.approx(ring * 2.0 * 4.0 * adapters)
    pure = replace(LORA, precision="bf16-pure")
    assert _comm_bytes_per_micro_step(LLAMA_8B, pure, n) == pytest.approx(ring * 2.0 * 2.0 * adapters)
    # the bucket view changes where the gradients live, not what is all-reduced
    viewed = replace(LORA, ddp_bucket_view=True)
    assert _comm_bytes_per_micro_step(LLAMA_8B, viewed, n) == _comm_bytes_per_micro_step(LLAMA_8B, LORA, n)
    # and once per optimizer step: accumulation divides it
    accumulated = replace(LORA, grad_accumulation=4)
    assert _comm_bytes_per_micro_step(LLAMA_8B, accumulated, n) == pytest.approx(
        _comm_bytes_per_micro_step(LLAMA_8B, LORA, n) / 4
    )


def test_ddp_all_reduces_fp32_modules_gradients_in_fp32() -> None:
    ring = 1 / 2
    full = _comm_bytes_per_micro_step(LLAMA_1B, FULL_AUTOCAST, 2)
    assert full == pytest.approx(ring * 2.0 * 4.0 * LLAMA_1B.params)
    bf16 = _comm_bytes_per_micro_step(LLAMA_1B, replace(FULL_AUTOCAST, mixed_precision="fsdp"), 2)
    assert full == pytest.approx(2 * bf16)


def test_fsdp_without_mixed_precision_gathers_and_reduces_fp32() -> None:
    sharded = replace(FULL_AUTOCAST, sharding="zero3")
    bf16 = replace(sharded, mixed_precision="fsdp")
    for n in (2, 8):
        assert _comm_bytes_per_micro_step(LLAMA_8B, sharded, n) == pytest.approx(
            2 * _comm_bytes_per_micro_step(LLAMA_8B, bf16, n)
        )
        exposed = _exposed_unit_bytes(LLAMA_8B, bf16, n)
        assert _exposed_unit_bytes(LLAMA_8B, sharded, n) == pytest.approx(2 * exposed)
    hybrid, hybrid_bf16 = replace(sharded, sharding="hybrid"), replace(bf16, sharding="hybrid")
    assert _network_bytes_per_micro_step(LLAMA_8B, hybrid, 16, 8) == pytest.approx(
        2 * _network_bytes_per_micro_step(LLAMA_8B, hybrid_bf16, 16, 8)
    )


def test_fsdp_mixed_precision_reduces_lora_adapters_in_bf16() -> None:
    # MixedPrecision's reduce_dtype defaults to its param_dtype, bf16: the fp32 adapters are
    # reduce-scattered as their bf16 compute copies
    sharded = replace(LORA, sharding="zero3")
    ring = 3 / 4
    frozen = _comm_bytes_per_micro_step(LLAMA_8B, sharded, 4) - ring * 2.0 * adapter_params(LLAMA_8B, LORA)
    no_adapters = replace(sharded, lora_rank=1)
    ring_frozen = _comm_bytes_per_micro_step(LLAMA_8B, no_adapters, 4) - ring * 2.0 * adapter_params(
        LLAMA_8B, no_adapters
    )
    assert frozen == pytest.approx(ring_frozen)


def test_the_cli_takes_the_knob_into_the_job() -> None:
    assert JOB_OPTIONS["ddp_bucket_view"][1] is False
    job, _ = JobOptions(model="Llama-3.1-8B", ddp_bucket_view=True).job(sharding="none")
    assert job.ddp_bucket_view is True
    default, _ = JobOptions(model="Llama-3.1-8B").job(sharding="none")
    assert default.ddp_bucket_view is False


def test_memory_on_several_gpus_counts_the_bucket_unless_told_otherwise() -> None:
    args = ["memory", "--model", "meta-llama/Llama-3.2-1B", "--method", "full", "--gpus", "2"]
    args += ["--mixed-precision", "autocast", "--json"]
    runner = CliRunner()
    copied = json.loads(runner.invoke(app, args).stdout)
    viewed = json.loads(runner.invoke(app, [*args, "--ddp-bucket-view"]).stdout)
    assert (copied["job"]["ddp_bucket_view"], viewed["job"]["ddp_bucket_view"]) == (False, True)
    grads, grads_viewed = copied["memory_gb"]["gradients_gb"], viewed["memory_gb"]["gradients_gb"]
    assert grads == pytest.approx(2 * grads_viewed)
    # the answer says how much of the gradients is the bucket copy, in JSON and in words
    assert copied["totals_gb"]["ddp_bucket_gb"] == pytest.approx(grads_viewed)
    assert viewed["totals_gb"]["ddp_bucket_gb"] == 0.0
    text = runner.invoke(app, args[:-1], env={"COLUMNS": "200"}).output
    assert f"gradients include {grads_viewed:.2f} GB of DDP's all-reduce buckets" in text
    assert "all-reduce buckets" not in runner.invoke(app, [*args[:-1], "--ddp-bucket-view"]).output
    help_text = runner.invoke(app, ["memory", "--help"], env={"COLUMNS": "200"}).output
    assert "--ddp-bucket-view" in help_text


def test_fsdp_qlora_ddp_rows_read_as_no_shard() -> None:
    # Answer.AI's "DDP" column ran fsdp_qlora's --sharding_strategy ddp: FSDP NO_SHARD, which
    # all-reduces its flat gradient in place
    row = {
        "model": "Llama-2-7B", "params_b": "6.74", "method": "lora DDP", "precision": "bf16",
        "seq_len": "2048", "micro_batch": "4", "grad_checkpointing": "yes", "optimizer": "AdamW",
        "measured_peak_gb": "22.04", "hardware": "2x RTX 3090 24GB (no NVLink)",
        "source": "AnswerDotAI/fsdp_qlora benchmarks_03_2024.md; peak reserved per GPU GiB",
        "quote": "| LoRA | True | 4 | 22.04 | 881 | (DDP column)",
    }  # fmt: skip
    case = row_to_case(row, MODELS)
    assert case.job is not None
    assert (case.job.sharding, case.n_gpus, case.job.ddp_bucket_view) == ("none", 2, True)
    # a DDP row of another framework keeps torch's default
    other = row_to_case({**row, "source": "an HF Trainer run; GB"}, MODELS)
    assert other.job is not None
    assert other.job.ddp_bucket_view is False


def test_zero2_reduces_every_micro_step_and_gathers_once_per_optimizer_step() -> None:
    # DeepSpeed stage 2 keeps only its gradient partition, so it reduce-scatters in every
    # backward; the updated 16-bit weights are all-gathered after each optimizer step
    zero2 = Job(method="full", sharding="zero2", seq_len=2048)
    ring = 7 / 8
    grads = 2.0 * LLAMA_8B.params
    assert _comm_bytes_per_micro_step(LLAMA_8B, zero2, 8) == pytest.approx(ring * 2.0 * grads)
    for accumulation in (2, 4, 16):
        job = replace(zero2, grad_accumulation=accumulation)
        expected = ring * (grads + grads / accumulation)
        assert _comm_bytes_per_micro_step(LLAMA_8B, job, 8) == pytest.approx(expected)
    # DDP accumulates under no_sync: one all-reduce per optimizer step
    ddp = replace(FULL_AUTOCAST, grad_accumulation=4)
    assert _comm_bytes_per_micro_step(LLAMA_1B, ddp, 2) == pytest.approx(
        _comm_bytes_per_micro_step(LLAMA_1B, FULL_AUTOCAST, 2) / 4
    )
    # and more accumulation never moves more bytes per micro-step
    per_step = [
        _comm_bytes_per_micro_step(LLAMA_8B, replace(zero2, grad_accumulation=k), 8) for k in (1, 2, 4, 8)
    ]
    assert per_step == sorted(per_step, reverse=True)
    # a zero2 LoRA job gathers its updated adapters, as bf16 as their reduced gradients
    lora = replace(LORA, sharding="zero2", grad_accumulation=4)
    adapters = 2.0 * adapter_params(LLAMA_8B, LORA)
    assert _comm_bytes_per_micro_step(LLAMA_8B, lora, 8) == pytest.approx(ring * adapters * (1 + 1 / 4))


def test_the_cli_states_gradient_accumulation() -> None:
    # the optimizer update runs once per N micro-batches: full fine-tuning, whose update is a
    # large share of a small step, gets faster; memory does not change; N reaches the Job
    assert JOB_OPTIONS["grad_accumulation"][1] == 1
    job, _ = JobOptions(model="Llama-3.1-8B", grad_accumulation=8).job(sharding="zero3")
    assert job.grad_accumulation == 8
    args = ["estimate", "--model", "meta-llama/Llama-3.1-8B", "--method", "full", "--gpu", "H100-SXM"]
    args += ["--gpus", "8", "--tokens", "100M", "--json"]
    runner = CliRunner()
    one = json.loads(runner.invoke(app, args).stdout)
    eight = json.loads(runner.invoke(app, [*args, "--grad-accumulation", "8"]).stdout)
    assert (one["job"]["grad_accumulation"], eight["job"]["grad_accumulation"]) == (1, 8)
    assert eight["tokens_per_s"] > one["tokens_per_s"] and eight["hours"] < one["hours"]
    assert eight["memory_gb"] == one["memory_gb"]
    # an optimizer step now trains 8 micro-batches of tokens: a checkpoint every N steps is 8×
    # as far apart
    fjob = FinetuneJob("j", LLAMA_8B.model_id, job, 1e8, 1.0)
    one_job = FinetuneJob("j", LLAMA_8B.model_id, replace(job, grad_accumulation=1), 1e8, 1.0)
    assert tokens_per_gpu_step(fjob) == 8 * tokens_per_gpu_step(one_job)
    hours = checkpoint_interval_hours(None, 100, 10.0, 1e8, tokens_per_gpu_step(fjob), 8)
    assert hours == pytest.approx(
        8 * checkpoint_interval_hours(None, 100, 10.0, 1e8, tokens_per_gpu_step(one_job), 8)
    )
    bad = runner.invoke(app, [*args, "--grad-accumulation", "0"])
    assert bad.exit_code == 2 and "--grad-accumulation" in bad.output
