"""Transfers over each GPU's PCIe link. FSDP CPU offload: the parameter shards' host-to-GPU
copies run on FSDP's pre-unshard stream (FSDP1 `_unshard`; FSDP2 copies in its all-gather
copy-in stream), so they queue with the collectives, beside the compute. Host staging (no P2P):
the sender's and the receiver's PCIe crossings are on different links, concurrent in a ring."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Accelerator, Job
from finetune.time import (
    COMM_EFFICIENCY,
    HOST_MEMORY_GBYTES_PER_S,
    PCIE_X16_GBYTES_PER_S,
    link_bytes_per_s,
    step_time,
)
from tests.factories import A100
from warehouse.seed_models import load_models

LLAMA_8B = load_models()["meta-llama/Llama-3.1-8B"]
# PCIe 4 boards: one with P2P (collectives overlap compute), one GeForce without (host-staged)
RTX4090 = Accelerator(
    tflops=165.2, memory_bandwidth_gbps=1008.0, architecture="Ada Lovelace", vram_gb=24, p2p=False, pcie_gen=4
)
FULL = Job(method="full", precision="bf16-pure", sharding="zero3", seq_len=2048, micro_batch=2)
NVLINK = 300e9  # bytes/s per direction: A100 SXM NVLink 3, 600 GB/s bidirectional


def _copy_seconds(n_gpus: int) -> float:
    # bf16 shards (2 B per parameter) copied up before forward and before backward, over x16 PCIe 4
    return 2 * 2.0 * LLAMA_8B.params / n_gpus / (PCIE_X16_GBYTES_PER_S[4] * 1e9 * COMM_EFFICIENCY)


def test_offload_copy_is_priced_on_the_communication_side() -> None:
    # scale: the copy is exactly 2 passes × shard bytes over the PCIe link, counted with comm
    plain = step_time(LLAMA_8B, FULL, A100, 8, NVLINK, True)
    off = step_time(LLAMA_8B, replace(FULL, offload=True), A100, 8, NVLINK, True)
    assert off.comm_s - plain.comm_s == pytest.approx(_copy_seconds(8), rel=1e-9)
    # 2 × 16 GB / 8 / 24 GB/s ≈ 0.17 s for an 8B model: a real cost, not a rounding term
    assert 0.1 < _copy_seconds(8) < 0.25


def test_offload_copy_hides_behind_compute_when_collectives_overlap() -> None:
    # direction: with P2P the copy adds nothing while compute outlasts comm + copy
    off = step_time(LLAMA_8B, replace(FULL, offload=True, micro_batch=8), A100, 8, NVLINK, True)
    assert off.compute_s > off.comm_s
    assert off.total_s == pytest.approx(off.compute_s + off.exposed_comm_s)


def test_offload_copy_still_adds_when_collectives_do_not_overlap() -> None:
    # host-staged GeForce traffic is added to compute, and the copy with it: the same total as
    # pricing the copy on the compute side
    job = replace(FULL, offload=True)
    plain = step_time(LLAMA_8B, replace(job, offload=False), RTX4090, 2, 16e9, False)
    off = step_time(LLAMA_8B, job, RTX4090, 2, 16e9, False)
    assert not off.overlapped
    copy = off.comm_s - plain.comm_s
    assert copy == pytest.approx(_copy_seconds(2), rel=1e-9)
    assert off.total_s == pytest.approx(off.compute_s + off.comm_s)


def test_no_copy_when_only_the_optimizer_is_offloaded() -> None:
    # ZeRO-2 offload (ZeRO-Offload) keeps the parameters on the GPU: nothing to copy up, so the
    # communication is the same as without offload; no sharding means no copy at all
    zero2 = replace(FULL, sharding="zero2")
    plain = step_time(LLAMA_8B, zero2, A100, 8, NVLINK, True)
    off = step_time(LLAMA_8B, replace(zero2, offload=True), A100, 8, NVLINK, True)
    assert off.comm_s == plain.comm_s
    assert step_time(LLAMA_8B, replace(FULL, sharding="none"), A100, 1, None, True).comm_s == 0.0


# --- host staging (no P2P): the two PCIe crossings run on different links ---------------------


def test_host_staged_ring_runs_at_the_per_direction_pcie_rate() -> None:
    # scale: each GPU's link carries its sends upward and its receives downward at once (PCIe is
    # dual simplex), so a staged ring is not slower than one direction of x16 on PCIe, as P2P is
    staged, overlapped = link_bytes_per_s(RTX4090, 2, 2, None, None)
    assert staged == pytest.approx(PCIE_X16_GBYTES_PER_S[4] * 1e9)
    assert not overlapped
    # PCIe 5 doubles it while host memory (204.8 GB/s / 2 per GPU / 2 GPUs) still allows it
    gen5, _ = link_bytes_per_s(replace(RTX4090, pcie_gen=5), 2, 2, None, None)
    assert gen5 == pytest.approx(min(64e9, HOST_MEMORY_GBYTES_PER_S * 1e9 / 4))


def test_host_staging_is_still_slower_than_p2p_it_cannot_overlap() -> None:
    # direction: the same bytes, added to compute instead of hidden behind it
    job = Job(method="lora", sharding="zero3", seq_len=2048, micro_batch=1)
    link = PCIE_X16_GBYTES_PER_S[4] * 1e9
    staged = step_time(LLAMA_8B, job, RTX4090, 2, link, False)
    direct = step_time(LLAMA_8B, job, replace(RTX4090, p2p=True), 2, link, True)
    assert staged.comm_s == pytest.approx(direct.comm_s)
    assert staged.total_s > direct.total_s
