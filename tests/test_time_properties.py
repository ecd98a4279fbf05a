"""Hypothesis properties of the time model (issue 23: "property tests stay"), on every part of
gpus.csv as the planner sees it: whatever the job, a step takes a finite, positive time at no
more than the part's peak, and more of any resource (tensor rate, memory bandwidth, the links)
never makes a job slower. Each term of `finetune.time` is a cost that such a resource divides,
so a violation is a term priced against the wrong resource or a max() that flips."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from answers.estimate import StatedHardware, stated_offer
from finetune import Accelerator, Job, ModelSpec, TimeEstimate, estimate_time
from finetune.offer import hardware_of
from tests.test_requirements_properties import jobs, model_specs
from warehouse.hardware import HardwareCatalog


def _parts() -> list[Accelerator]:
    """One GPU of each gpus.csv part with a tensor rate, built by the planner's own path (the
    stated one-GPU offer → `hardware_of` → `Hardware.accelerator`)."""
    parts = []
    for spec in HardwareCatalog.load().gpus.values():
        hw = hardware_of(stated_offer(spec, StatedHardware(gpu=spec.gpu_name)))
        if hw.node_tflops:
            parts.append(hw.accelerator(hw.node_tflops))
    return parts


PARTS = _parts()
GPU_COUNTS = st.sampled_from([1, 2, 4, 8, 16])
# per-GPU link Gb/s: host-staged PCIe 3 … NVLink 5, used for the link inside and between nodes
LINKS = st.sampled_from([25.0, 100.0, 400.0, 3600.0])
MORE = st.floats(min_value=1.01, max_value=4.0)


def _estimate(
    model: ModelSpec, job: Job, n: int, gpu: Accelerator, link: float, tokens: float = 1e9
) -> TimeEstimate:
    try:
        return estimate_time(model, job, tokens, n, min(n, 8), gpu.tflops, link, link, gpu=gpu)
    except ValueError:
        # jobs the model refuses with a message (an architecture it cannot state): not this test's
        assume(False)
        raise


def test_the_parts_cover_every_generation_and_vendor() -> None:
    # the strategies below draw from these: a seed change that dropped a family would go unseen
    archs = {p.architecture for p in PARTS}
    assert {"Ampere", "Ada Lovelace", "Hopper", "Blackwell", "CDNA 3"} <= archs
    assert any(p.half_rate_accumulate for p in PARTS) and any(not p.p2p for p in PARTS)
    assert any(p.sm_count for p in PARTS) and any(p.matmul_share for p in PARTS)


@settings(max_examples=200, deadline=None)
@given(model_specs(), jobs(), GPU_COUNTS, st.sampled_from(PARTS), LINKS)
def test_every_job_takes_finite_positive_time_at_most_at_peak(
    model: ModelSpec, job: Job, n: int, gpu: Accelerator, link: float
) -> None:
    est = _estimate(model, job, n, gpu, link)
    assert math.isfinite(est.hours) and est.hours > 0
    assert est.tokens_per_s > 0
    # model FLOPs over the part's rated peak: no term may run faster than the silicon
    assert 0 < est.utilization <= 1


# the tensor rate (its measured share, matmul_share, is of the part's own peak, so it scales with
# it) and the memory bandwidth
@pytest.mark.parametrize("resource", ["tflops", "memory_bandwidth_gbps"])
@settings(max_examples=200, deadline=None)
@given(model_specs(), jobs(), GPU_COUNTS, st.sampled_from(PARTS), LINKS, MORE)
def test_more_of_a_gpu_resource_never_slows_a_job(
    resource: str, model: ModelSpec, job: Job, n: int, gpu: Accelerator, link: float, more: float
) -> None:
    value = getattr(gpu, resource)
    assume(value is not None)
    better = replace(gpu, **{resource: value * more})
    assert _estimate(model, job, n, better, link).hours <= _estimate(model, job, n, gpu, link).hours


@settings(max_examples=200, deadline=None)
@given(model_specs(), jobs(), GPU_COUNTS, st.sampled_from(PARTS), LINKS, MORE)
def test_a_faster_link_never_slows_a_job(
    model: ModelSpec, job: Job, n: int, gpu: Accelerator, link: float, more: float
) -> None:
    assert _estimate(model, job, n, gpu, link * more).hours <= _estimate(model, job, n, gpu, link).hours


@settings(max_examples=100, deadline=None)
@given(model_specs(), jobs(), GPU_COUNTS, st.sampled_from(PARTS), LINKS, st.floats(1e6, 1e12))
def test_time_is_proportional_to_tokens(
    model: ModelSpec, job: Job, n: int, gpu: Accelerator, link: float, tokens: float
) -> None:
    # the bill is linear in dataset tokens × epochs because the step time does not depend on them
    once = _estimate(model, job, n, gpu, link, tokens)
    twice = _estimate(model, job, n, gpu, link, 2 * tokens)
    assert twice.hours == pytest.approx(2 * once.hours, rel=1e-9)
    assert twice.tokens_per_s == pytest.approx(once.tokens_per_s, rel=1e-9)
