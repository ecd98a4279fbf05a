"""FSDP1 units that hold LoRA adapters with frozen weights (Job.lora_in_fsdp_units): the unit's
whole flat gradient exists, is kept as a shard and is reduce-scattered, so such jobs hold more
memory, move more bytes and scale worse."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job, estimate_time
from finetune.architecture import layer_params, linear_params
from finetune.memory import (
    GB,
    QUANT_CODE_BYTES_PER_PARAM,
    memory_per_gpu,
    mixed_unit_gradient_bytes,
    quantized_bytes_per_param,
)
from finetune.time import (
    _comm_bytes_per_micro_step,
    _exposed_unit_bytes,
    _network_bytes_per_micro_step,
)
from flows.job_options import JOB_OPTIONS, JobOptions
from tests.factories import H100
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
LORA = Job(method="lora", sharding="zero3", seq_len=1024, micro_batch=1)
MIXED = replace(LORA, lora_in_fsdp_units=True)


def test_mixed_units_reduce_scatter_the_frozen_layers_too() -> None:
    mixed = replace(LORA, lora_in_fsdp_units=True)
    for n in (2, 4, 8):
        ring = (n - 1) / n
        delta = _comm_bytes_per_micro_step(LLAMA_8B, mixed, n) - _comm_bytes_per_micro_step(LLAMA_8B, LORA, n)
        assert delta == pytest.approx(ring * mixed_unit_gradient_bytes(LLAMA_8B, mixed))


def test_the_frozen_layers_are_counted_in_their_storage_dtype() -> None:
    layers = LLAMA_8B.layers * layer_params(LLAMA_8B)
    assert mixed_unit_gradient_bytes(LLAMA_8B, MIXED) == pytest.approx(2.0 * layers)
    autocast = replace(MIXED, mixed_precision="autocast")
    assert mixed_unit_gradient_bytes(LLAMA_8B, autocast) == pytest.approx(4.0 * layers)
    # QLoRA's FlatParameter holds the 4-bit codes packed into quant_storage; the quantization
    # statistics stay outside it on every rank, so its gradient has no room for them
    qlora = replace(MIXED, method="qlora")
    linears = linear_params(LLAMA_8B)
    expected = QUANT_CODE_BYTES_PER_PARAM * linears + 2.0 * (layers - linears)
    assert mixed_unit_gradient_bytes(LLAMA_8B, qlora) == pytest.approx(expected)
    assert mixed_unit_gradient_bytes(LLAMA_8B, qlora) < quantized_bytes_per_param(qlora) * linears + 2.0 * (
        layers - linears
    )
    assert mixed_unit_gradient_bytes(LLAMA_8B, qlora) < mixed_unit_gradient_bytes(LLAMA_8B, MIXED) / 3


def test_units_that_do_not_mix_have_no_frozen_gradient() -> None:
    assert mixed_unit_gradient_bytes(LLAMA_8B, LORA) == 0.0
    for job in (replace(MIXED, zero3_impl="deepspeed"), replace(MIXED, sharding="zero2")):
        assert not job.mixes_fsdp_units
        assert mixed_unit_gradient_bytes(LLAMA_8B, job) == 0.0
    assert replace(MIXED, sharding="hybrid").mixes_fsdp_units


def test_the_last_unit_reduce_scatters_its_whole_gradient() -> None:
    mixed = replace(LORA, lora_in_fsdp_units=True)
    ring = 7 / 8
    delta = _exposed_unit_bytes(LLAMA_8B, mixed, 8) - _exposed_unit_bytes(LLAMA_8B, LORA, 8)
    assert delta == pytest.approx(ring * mixed_unit_gradient_bytes(LLAMA_8B, mixed) / LLAMA_8B.layers)


def test_hybrid_replicas_all_reduce_the_whole_unit_gradient_shard() -> None:
    hybrid = replace(LORA, sharding="hybrid")
    mixed = replace(hybrid, lora_in_fsdp_units=True)
    assert _network_bytes_per_micro_step(LLAMA_8B, mixed, 16, 8) > _network_bytes_per_micro_step(
        LLAMA_8B, hybrid, 16, 8
    )


@pytest.mark.parametrize(
    "job",
    [
        replace(LORA, zero3_impl="deepspeed"),  # DeepSpeed reduces only the gradients that exist
        replace(LORA, sharding="none"),
        replace(LORA, sharding="zero2"),
    ],
)
def test_only_fsdp_zero3_units_mix(job: Job) -> None:
    mixed = replace(job, lora_in_fsdp_units=True)
    assert _comm_bytes_per_micro_step(LLAMA_8B, mixed, 4) == _comm_bytes_per_micro_step(LLAMA_8B, job, 4)


def test_mixed_units_are_slower_where_the_link_is_the_bottleneck() -> None:
    # 4 GPUs over PCIe Gen5 x16 P2P (512 Gb/s): the reduce-scatter no longer hides behind compute
    def tps(job: Job) -> float:
        return estimate_time(LLAMA_8B, job, 1e8, 4, 4, H100.tflops, 512.0, None, gpu=H100).tokens_per_s

    assert tps(replace(LORA, lora_in_fsdp_units=True)) < tps(LORA)
    # one GPU has nothing to reduce-scatter
    one = estimate_time(
        LLAMA_8B, replace(LORA, sharding="none", lora_in_fsdp_units=True), 1e8, 1, 1, 989.0, None, None
    )
    assert (
        one.tokens_per_s
        == estimate_time(LLAMA_8B, replace(LORA, sharding="none"), 1e8, 1, 1, 989.0, None, None).tokens_per_s
    )


def test_full_fine_tuning_has_no_adapters_to_place() -> None:
    with pytest.raises(ValueError, match="lora_in_fsdp_units"):
        Job(method="full", lora_in_fsdp_units=True)


def test_the_cli_takes_the_knob_into_the_job() -> None:
    assert JOB_OPTIONS["lora_in_fsdp_units"][1] is False
    job, _ = JobOptions(model="Llama-3.1-8B", lora_in_fsdp_units=True).job(sharding="zero3")
    assert job.lora_in_fsdp_units is True


# --- memory: "equivalent to not freezing those parameters" (PyTorch FSDP API docs) ---


@pytest.mark.parametrize("n", [2, 4, 8])
def test_each_gpu_keeps_its_shard_of_the_frozen_gradient_and_one_whole_unit(n: int) -> None:
    plain, mixed = memory_per_gpu(LLAMA_8B, LORA, n), memory_per_gpu(LLAMA_8B, MIXED, n)
    frozen = mixed_unit_gradient_bytes(LLAMA_8B, MIXED)
    # the sharded flat gradient lives from the first backward to the optimizer step; one unit's
    # unsharded gradient waits for its reduce-scatter beside the activations backward holds
    expected = frozen / n + frozen / LLAMA_8B.layers
    assert (mixed.gradients_gb - plain.gradients_gb) * GB == pytest.approx(expected)
    assert (mixed.total_gb - plain.total_gb) * GB == pytest.approx(expected)
    assert mixed.peak_phase == plain.peak_phase == "step"


def test_one_gpu_keeps_the_whole_flat_gradient() -> None:
    # FSDP runs NO_SHARD on one GPU: flat_param.grad is the whole unit's, kept, nothing to scatter
    plain, mixed = memory_per_gpu(LLAMA_8B, LORA, 1), memory_per_gpu(LLAMA_8B, MIXED, 1)
    frozen = mixed_unit_gradient_bytes(LLAMA_8B, MIXED)
    assert (mixed.gradients_gb - plain.gradients_gb) * GB == pytest.approx(frozen)


def test_no_sync_accumulates_the_whole_mixed_gradient() -> None:
    accumulating = replace(LORA, grad_accumulation=4, fsdp_no_sync=True)
    plain = memory_per_gpu(LLAMA_8B, accumulating, 8)
    mixed = memory_per_gpu(LLAMA_8B, replace(accumulating, lora_in_fsdp_units=True), 8)
    frozen = mixed_unit_gradient_bytes(LLAMA_8B, MIXED)
    # every unit's unsharded flat gradient stays through the micro-batches, beside the shard
    assert (mixed.gradients_gb - plain.gradients_gb) * GB == pytest.approx(frozen + frozen / 8)


def test_cpu_offload_moves_the_shard_but_not_the_unit_being_reduced() -> None:
    offload = replace(LORA, offload=True)
    plain = memory_per_gpu(LLAMA_8B, offload, 4)
    mixed = memory_per_gpu(LLAMA_8B, replace(offload, lora_in_fsdp_units=True), 4)
    unit = mixed_unit_gradient_bytes(LLAMA_8B, MIXED) / LLAMA_8B.layers
    assert (mixed.gradients_gb - plain.gradients_gb) * GB == pytest.approx(unit)


def test_mixed_units_cost_memory_in_proportion_to_the_frozen_base() -> None:
    qlora = replace(LORA, method="qlora")
    lora_cost = memory_per_gpu(LLAMA_8B, MIXED, 4).total_gb - memory_per_gpu(LLAMA_8B, LORA, 4).total_gb
    qlora_cost = (
        memory_per_gpu(LLAMA_8B, replace(qlora, lora_in_fsdp_units=True), 4).total_gb
        - memory_per_gpu(LLAMA_8B, qlora, 4).total_gb
    )
    assert 0 < qlora_cost < lora_cost / 3
    # DeepSpeed keeps only the gradients that exist: the knob changes nothing there
    deepspeed = replace(LORA, zero3_impl="deepspeed")
    assert memory_per_gpu(LLAMA_8B, replace(deepspeed, lora_in_fsdp_units=True), 4) == memory_per_gpu(
        LLAMA_8B, deepspeed, 4
    )
