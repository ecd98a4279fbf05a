"""At the fewest nodes that fit, the placement runs the sharding with the shortest time (the same
price per hour, so the cheapest), the lightest among equals; one GPU has nothing to shard."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import duckdb
import pytest

from finetune import FinetuneJob, Job
from finetune.placement import Hardware, JobMemory, candidate_shardings, place, place_at, plan_job
from tests.test_finetune_marts import H100_NODE, MODELS, costs
from warehouse.db import connect

LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
# eight 270 GB GPUs on NVLink: a full fine-tune of an 8B model fits them unsharded
B300_NODE: dict[str, Any] = {
    **H100_NODE,
    "instance_type": "b300-8x",
    "gpu_name": "B300",
    "vram_gb": 270.0,
    "bf16_tflops": 2250.0,
    "intra_node_gbps": 1800.0,
    "pcie_gen": 6,
}


def b300(gpus: int = 8) -> Hardware:
    """B300 as gpus.csv states it, `gpus` to a node on NVLink 5 (900 GB/s per direction)."""
    return Hardware(
        gpu_name="B300", gpu_count=float(gpus), vram_gb=270.0, tensor_tflops=2250.0,
        intra_node_gbytes_per_s=900.0 if gpus > 1 else None, inter_node_gbits_per_s=3200.0,
        memory_bandwidth_gbps=7700.0, architecture="Blackwell Ultra", pcie_gen=6, matmul_tflops=1769.0,
    )  # fmt: skip


def full_job(**knobs: Any) -> FinetuneJob:
    return FinetuneJob("full", LLAMA_8B.model_id, Job(method="full", seq_len=4096, **knobs), 10**8, 1.0)


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(":memory:")
    yield con
    con.close()


def plans_by_sharding(fjob: FinetuneJob, hw: Hardware) -> dict[str, float]:
    """Each sharding's hours on exactly one node of `hw`, stated one at a time."""
    memory = JobMemory(LLAMA_8B, fjob.job)
    hours = {}
    for sharding in ("none", "zero2", "zero3"):
        placed = place_at(memory, hw.gpus_per_node, hw.vram_gb, 1, sharding)  # type: ignore[arg-type]
        plan = plan_job(fjob, hw, placed, memory)
        assert plan.fits and plan.sharding == sharding and plan.estimated_hours is not None
        hours[sharding] = plan.estimated_hours
    return hours


def test_a_full_fine_tune_that_fits_unsharded_runs_zero2_which_shards_the_update() -> None:
    fjob, hw = full_job(), b300()
    hours = plans_by_sharding(fjob, hw)
    # DDP runs the AdamW update over all 8B parameters on every GPU; ZeRO-2 an eighth of it
    assert hours["zero2"] < hours["none"]
    memory = JobMemory(LLAMA_8B, fjob.job)
    placed = place(memory, hw.gpus_per_node, hw.vram_gb, 4)
    # DDP fits (the lightest); the heavier two fit as well and are timed
    assert memory.variants[placed.variant][0] == "none" and placed.nodes == 1
    assert [memory.variants[v][0] for v in placed.alternatives] == ["zero2", "zero3"]
    chosen = plan_job(fjob, hw, placed, memory)
    assert chosen.sharding == min(hours, key=hours.__getitem__) == "zero2"
    assert chosen.estimated_hours == pytest.approx(min(hours.values()))
    assert chosen.total_gb == pytest.approx(memory.get(placed.alternatives[0], 8).total_gb)


def test_the_mart_prices_the_fastest_fitting_sharding(con: duckdb.DuckDBPyConnection) -> None:
    (row,) = costs(con, [full_job()], B300_NODE)
    assert row["fits"] and row["priced"] and row["sharding"] == "zero2"
    assert row["nodes_used"] == 1 and row["gpus_used"] == 8


def test_one_gpu_runs_the_lightest_that_fits() -> None:
    hw = b300(1)
    lora = FinetuneJob("lora", LLAMA_8B.model_id, Job(method="lora"), 10**8, 1.0)
    memory = JobMemory(LLAMA_8B, lora.job)
    for placed in (place(memory, 1, hw.vram_gb, 1), place_at(memory, 1, hw.vram_gb, 1)):
        assert memory.variants[placed.variant][0] == "none" and placed.alternatives == ()
        assert plan_job(lora, hw, placed, memory).sharding == "none"


def test_equal_times_keep_the_lightest() -> None:
    # the same variant twice over: equal hours, and the first is kept
    fjob, hw = full_job(), b300()
    memory = JobMemory(LLAMA_8B, fjob.job)
    placed = place_at(memory, 8, hw.vram_gb, 1, "zero2")
    assert placed.alternatives == ()  # a stated sharding is the only one timed
    doubled = replace(placed, alternatives=(placed.variant,))
    assert plan_job(fjob, hw, doubled, memory) == plan_job(fjob, hw, placed, memory)


def test_ddp_is_never_an_alternative_across_nodes() -> None:
    memory = JobMemory(MODELS["meta-llama/Llama-3.1-70B"], Job(method="full", seq_len=4096))
    placed = place(memory, 8, 80.0, 4)
    assert placed.fits and placed.nodes > 1
    assert all(memory.variants[v][0] != "none" for v in (placed.variant, *placed.alternatives))


def test_the_candidate_shardings_are_those_the_memory_table_holds() -> None:
    # one list for the placement and for the ranking's knob warning: offload rules out DDP
    assert candidate_shardings(Job()) == ["none", "zero2", "zero3"]
    offload = Job(method="full", sharding="zero3", offload=True)
    assert candidate_shardings(offload) == ["zero2", "zero3"]
    assert [s for s, _ in JobMemory(LLAMA_8B, offload).variants] == candidate_shardings(offload)
