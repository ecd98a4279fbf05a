"""FSDP1 units that hold LoRA adapters with frozen weights (Job.lora_in_fsdp_units): the unit's
whole flat gradient is reduce-scattered, so such jobs move more bytes and scale worse."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job, estimate_time
from finetune.architecture import layer_params, linear_params
from finetune.memory import quantized_bytes_per_param
from finetune.time import (
    _comm_bytes_per_micro_step,
    _exposed_unit_bytes,
    _frozen_layer_bytes,
    _network_bytes_per_micro_step,
)
from flows.job_options import JOB_OPTIONS, JobOptions
from tests.factories import H100
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
LORA = Job(method="lora", sharding="zero3", seq_len=1024, micro_batch=1)


def test_mixed_units_reduce_scatter_the_frozen_layers_too() -> None:
    mixed = replace(LORA, lora_in_fsdp_units=True)
    for n in (2, 4, 8):
        ring = (n - 1) / n
        delta = _comm_bytes_per_micro_step(LLAMA_8B, mixed, n) - _comm_bytes_per_micro_step(LLAMA_8B, LORA, n)
        assert delta == pytest.approx(ring * _frozen_layer_bytes(LLAMA_8B, LORA))


def test_the_frozen_layers_are_counted_in_their_storage_dtype() -> None:
    layers = LLAMA_8B.layers * layer_params(LLAMA_8B)
    assert _frozen_layer_bytes(LLAMA_8B, LORA) == pytest.approx(2.0 * layers)
    autocast = replace(LORA, mixed_precision="autocast")
    assert _frozen_layer_bytes(LLAMA_8B, autocast) == pytest.approx(4.0 * layers)
    qlora = replace(LORA, method="qlora")
    linears = linear_params(LLAMA_8B)
    expected = quantized_bytes_per_param(qlora) * linears + 2.0 * (layers - linears)
    assert _frozen_layer_bytes(LLAMA_8B, qlora) == pytest.approx(expected)
    assert _frozen_layer_bytes(LLAMA_8B, qlora) < _frozen_layer_bytes(LLAMA_8B, LORA) / 3


def test_the_last_unit_reduce_scatters_its_whole_gradient() -> None:
    mixed = replace(LORA, lora_in_fsdp_units=True)
    ring = 7 / 8
    delta = _exposed_unit_bytes(LLAMA_8B, mixed, 8) - _exposed_unit_bytes(LLAMA_8B, LORA, 8)
    assert delta == pytest.approx(ring * _frozen_layer_bytes(LLAMA_8B, LORA) / LLAMA_8B.layers)


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
