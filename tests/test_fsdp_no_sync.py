"""FSDP1 accumulating under `no_sync` (Job.fsdp_no_sync): the HF Trainer's way with FSDP1.

torch's FSDP1 `_post_backward_hook` returns before the reduce-scatter while gradients are not
synced, leaving `flat_param.grad` unsharded and accumulating; the HF Trainer runs every
micro-batch but a step's last under `accelerator.no_sync`. So each GPU holds the trained weights'
whole gradient through the micro-batches, and reduce-scatters once per optimizer step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job, memory_per_gpu
from finetune.memory import GB, adapter_params, compute_gradient_bytes, fsdp_unsharded_gradient_bytes
from finetune.time import _comm_bytes_per_micro_step, _reduced_gradient_bytes
from flows.job_options import JOB_OPTIONS, JobOptions
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
FULL = Job(method="full", sharding="zero3", seq_len=2048, grad_accumulation=4)
NO_SYNC = replace(FULL, fsdp_no_sync=True)


def test_every_gpu_holds_the_whole_bf16_gradient_through_accumulation() -> None:
    synced, unsharded = memory_per_gpu(LLAMA_8B, FULL, 8), memory_per_gpu(LLAMA_8B, NO_SYNC, 8)
    whole = 2.0 * LLAMA_8B.params / GB  # bf16 under FSDP MixedPrecision
    assert unsharded.gradients_gb - synced.gradients_gb == pytest.approx(whole)
    phases, phases_synced = dict(unsharded.phases_gb), dict(synced.phases_gb)
    assert phases["step"] - phases_synced["step"] == pytest.approx(whole)
    # the step's last micro-batch reduce-scatters it before the optimizer runs
    assert phases["optimizer"] == pytest.approx(phases_synced["optimizer"])
    # the same bytes on 8 GPUs or 64: the gradient is not sharded until the step
    assert fsdp_unsharded_gradient_bytes(LLAMA_8B, NO_SYNC, 64) == fsdp_unsharded_gradient_bytes(
        LLAMA_8B, NO_SYNC, 8
    )


def test_the_gradient_is_in_the_flat_parameters_compute_dtype() -> None:
    autocast = replace(NO_SYNC, mixed_precision="autocast")  # no MixedPrecision: fp32
    assert fsdp_unsharded_gradient_bytes(LLAMA_8B, autocast, 8) == pytest.approx(4.0 * LLAMA_8B.params)
    # the same bytes the sharded collectives reduce: one rule for both
    for job in (NO_SYNC, autocast):
        assert fsdp_unsharded_gradient_bytes(LLAMA_8B, job, 8) == compute_gradient_bytes(LLAMA_8B, job)
        assert _reduced_gradient_bytes(LLAMA_8B, job) == compute_gradient_bytes(LLAMA_8B, job)
    lora = replace(NO_SYNC, method="lora")  # only the adapters' units have gradients
    assert fsdp_unsharded_gradient_bytes(LLAMA_8B, lora, 8) == pytest.approx(
        2.0 * adapter_params(LLAMA_8B, lora)
    )


@pytest.mark.parametrize(
    ("job", "n_gpus"),
    [
        (replace(NO_SYNC, grad_accumulation=1), 8),  # nothing to accumulate
        (replace(NO_SYNC, zero3_impl="deepspeed"), 8),  # the HF Trainer skips no_sync for DeepSpeed
        (replace(NO_SYNC, sharding="zero2"), 8),
        (replace(NO_SYNC, sharding="none"), 8),
        (NO_SYNC, 1),  # one GPU: FSDP does not shard
    ],
)
def test_no_unsharded_gradient_outside_fsdp1_accumulation(job: Job, n_gpus: int) -> None:
    assert fsdp_unsharded_gradient_bytes(LLAMA_8B, job, n_gpus) == 0.0
    assert memory_per_gpu(LLAMA_8B, job, n_gpus) == memory_per_gpu(
        LLAMA_8B, replace(job, fsdp_no_sync=False), n_gpus
    )


def test_it_reduce_scatters_once_per_optimizer_step() -> None:
    ring = 7 / 8
    weights = 2.0 * LLAMA_8B.params
    grads = 2.0 * LLAMA_8B.params
    assert _comm_bytes_per_micro_step(LLAMA_8B, FULL, 8) == pytest.approx(ring * (2 * weights + grads))
    assert _comm_bytes_per_micro_step(LLAMA_8B, NO_SYNC, 8) == pytest.approx(ring * (2 * weights + grads / 4))


def test_the_cli_states_it() -> None:
    assert JOB_OPTIONS["fsdp_no_sync"][1] is False
    job, _ = JobOptions(model="Llama-3.1-8B", grad_accumulation=4, fsdp_no_sync=True).job(sharding="zero3")
    assert job.fsdp_no_sync and job.accumulates_unsharded
    # the same options under another sharding are not FSDP1's: nothing changes there
    other, _ = JobOptions(model="Llama-3.1-8B", grad_accumulation=4, fsdp_no_sync=True).job(sharding="none")
    assert not other.accumulates_unsharded


def test_cpu_offload_accumulates_unsharded_on_the_gpu_too() -> None:
    # torch's FSDP docs: no gradient accumulation outside no_sync() under CPU offload, so an
    # offloaded FSDP1 job that accumulates keeps autograd's unsharded gradient on the GPU
    offload = replace(NO_SYNC, offload=True)
    assert offload.accumulates_unsharded
    synced = memory_per_gpu(LLAMA_8B, replace(offload, fsdp_no_sync=False), 8)
    unsharded = memory_per_gpu(LLAMA_8B, offload, 8)
    # the sharded gradients go to the host; the whole unsharded one stays beside the step
    assert (unsharded.gradients_gb - synced.gradients_gb) * GB == pytest.approx(2.0 * LLAMA_8B.params)
    assert (unsharded.total_gb - synced.total_gb) * GB == pytest.approx(2.0 * LLAMA_8B.params)
