"""`--interconnect host` (issue 23): GPUs of one node that share PCIe without peer-to-peer access
(VMs with IOMMU, as NCCL's troubleshooting guide describes; GeForce cards always) stage every
collective through host memory. A user states it; the time model then prices the staged,
non-overlapped communication it already prices for GeForce cards."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from answers.estimate import StatedHardware, find_gpu, on_hardware, stated_offer
from benchmarks.throughput_accuracy import EXTRA_CSV, load_gpus, row_to_case
from finetune import FinetuneJob, Job
from finetune.offer import (
    HOST_STAGED,
    PCIE_X16_GBYTES_PER_S,
    hardware_of,
    intra_node_gbytes_per_s,
    stated_links,
)
from flows.cli import app
from warehouse.hardware import HardwareCatalog
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_70B = MODELS["meta-llama/Llama-2-70b-hf"]
# 70B QLoRA sharded over four 24 GB cards at one sequence per GPU: the all-gathers are a large
# share of the step, as in Answer.AI's rented RTX A5000 rows
QLORA = Job(method="qlora", seq_len=2048, micro_batch=1, sharding="zero3")


# --- the stated link ----------------------------------------------------------------------------


@pytest.mark.parametrize("form_factor", ["PCIe", "SXM", None])
def test_host_is_pcie_without_peer_to_peer_on_any_board(form_factor: str | None) -> None:
    assert stated_links(form_factor, 900.0, 4, "host") == (HOST_STAGED, None)


def test_one_gpu_has_no_link_whatever_is_stated() -> None:
    assert stated_links("PCIe", None, 1, "host") == ("none", None)


def test_a_host_staged_node_moves_bytes_at_its_pcie_rate() -> None:
    assert intra_node_gbytes_per_s(None, 4, HOST_STAGED, 4) == PCIE_X16_GBYTES_PER_S[4]
    assert intra_node_gbytes_per_s(None, 4, HOST_STAGED, 5) == PCIE_X16_GBYTES_PER_S[5]
    # one GPU: nothing to move
    assert intra_node_gbytes_per_s(None, 1, HOST_STAGED, 4) is None


@pytest.mark.parametrize(
    ("gpu", "interconnect", "p2p"),
    [
        ("RTXA5000", "pcie", True),
        ("RTXA5000", "host", False),
        ("H100-SXM", None, True),
        ("H100-SXM", "host", False),
        # GeForce cards never have it
        ("RTX4090", "pcie", False),
        ("RTX4090", "host", False),
    ],
)
def test_offer_hardware_has_p2p_unless_stated_or_geforce(gpu: str, interconnect: str, p2p: bool) -> None:
    hw = StatedHardware(gpu=gpu, gpus_per_node=4, interconnect=interconnect)  # type: ignore[arg-type]
    assert hardware_of(stated_offer(find_gpu(gpu), hw)).p2p is p2p


# --- the estimate -------------------------------------------------------------------------------


def _estimate(gpu: str, interconnect: str) -> tuple[float, float]:
    fjob = FinetuneJob("host", LLAMA_70B.model_id, QLORA, 2_000_000, 1.0)
    hw = StatedHardware(gpu=gpu, gpus_per_node=4, interconnect=interconnect, sharding="zero3")  # type: ignore[arg-type]
    answer = on_hardware(fjob, LLAMA_70B, hw)
    assert answer.row["fits"] and answer.hours is not None
    return answer.hours, answer.row["comm_hours"]


def test_staging_through_host_memory_is_slower_than_pcie_peer_to_peer() -> None:
    p2p_hours, p2p_comm = _estimate("RTXA5000", "pcie")
    host_hours, host_comm = _estimate("RTXA5000", "host")
    # the staged collectives no longer hide behind compute
    assert host_hours > p2p_hours
    # and, sharing the node's host memory, they are no faster than P2P over the same x16 links
    assert host_comm >= p2p_comm


def test_a_geforce_node_is_host_staged_either_way() -> None:
    assert _estimate("RTX4090", "host") == pytest.approx(_estimate("RTX4090", "pcie"))


def test_the_command_states_the_link_it_priced() -> None:
    args = ["estimate", "--model", "Llama-2-70b-hf", "--method", "qlora", "--gpu", "RTXA5000", "--gpus", "4"]
    args += ["--sharding", "zero3", "--tokens", "2M"]
    runner = CliRunner()
    host = runner.invoke(app, [*args, "--interconnect", "host", "--json"])
    pcie = runner.invoke(app, [*args, "--interconnect", "pcie", "--json"])
    assert host.exit_code == 0, host.output
    assert pcie.exit_code == 0, pcie.output
    assert json.loads(host.output)["interconnect"] == HOST_STAGED
    assert json.loads(host.output)["tokens_per_s"] < json.loads(pcie.output)["tokens_per_s"]
    table = runner.invoke(app, [*args, "--interconnect", "host"])
    assert table.exit_code == 0 and f"({HOST_STAGED})" in table.output


@pytest.mark.parametrize(
    ("gpu", "gpus", "interconnect", "hinted"),
    [
        ("RTXA5000", "4", "pcie", True),
        # stated already, one GPU, NVLink, or a GeForce card that is host-staged anyway
        ("RTXA5000", "4", "host", False),
        ("RTXA5000", "1", "pcie", False),
        ("H100-SXM", "4", "nvlink", False),
        ("RTX4090", "4", "pcie", False),
    ],
)
def test_a_pcie_estimate_says_it_assumed_peer_to_peer(
    gpu: str, gpus: str, interconnect: str, hinted: bool
) -> None:
    args = ["estimate", "--model", "Llama-3.2-3B", "--method", "lora", "--gpu", gpu, "--gpus", gpus]
    result = CliRunner().invoke(app, [*args, "--interconnect", interconnect, "--tokens", "10M"])
    assert result.exit_code == 0, result.output
    assert ("--interconnect host times" in result.output) is hinted


def test_the_help_says_what_host_means() -> None:
    result = CliRunner().invoke(app, ["estimate", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "without peer-to-peer" in result.output


# --- the benchmark's reading --------------------------------------------------------------------


def test_a_benchmark_row_that_states_host_is_read_without_p2p(tmp_path: Path) -> None:
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        row = next(r for r in csv.DictReader(f) if r["id"] == "X16")
    gpus = load_gpus()
    as_stated = row_to_case(row, MODELS, gpus)
    host = row_to_case({**row, "intra_link": "host"}, MODELS, gpus)
    assert as_stated.gpu is not None and host.gpu is not None
    assert as_stated.gpu.p2p and not host.gpu.p2p
    # the same x16 rate either way: only who copies the bytes changes
    assert host.intra_node_gbps == as_stated.intra_node_gbps


# --- rented boxes whose provider states no interconnect ----------------------------------------


def _instance_type_rows() -> list[dict[str, str]]:
    seeds = Path(__file__).resolve().parent.parent / "warehouse" / "seeds"
    with (seeds / "instance_types.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_seed_row_that_assumes_no_p2p_says_so_in_its_interconnect() -> None:
    # the notes of these rows (vast, lium, linode, tensordock, jarvislabs) assumed no P2P before
    # the vocabulary could say it; the interconnect now carries the assumption the notes state
    gpus = HardwareCatalog.load().gpus
    assumed = [r for r in _instance_type_rows() if "no P2P assumed" in r["notes"]]
    assert {r["provider"] for r in assumed} == {"vast", "lium", "linode", "tensordock", "jarvislabs"}
    assert len(assumed) == 23
    assert all(r["intra_node_interconnect"] == HOST_STAGED for r in assumed)
    assert not any(gpus[r["gpu_name"]].form_factor.startswith("SXM") for r in assumed)
    # GPUs on one SXM board reach each other at least over P2P: those rows keep PCIe and say why
    sxm = [r for r in _instance_type_rows() if "host staging (no P2P) is not" in r["notes"]]
    assert {r["gpu_name"] for r in sxm} == {"A100-80GB-SXM", "A100-40GB-SXM", "H100-SXM", "H200-SXM"}
    assert all(r["intra_node_interconnect"] == "PCIe" for r in sxm)


@pytest.mark.parametrize(
    ("provider", "instance_type", "gpu_raw", "gpu_count"),
    [
        ("vast", "4x RTX A6000 48GB (verified)", "RTX A6000", 4),
        ("jarvislabs", "4x A5000 container", "A5000", 4),
        ("tensordock", "2x rtxa6000-pcie-48gb (tier-1)", "rtxa6000-pcie-48gb", 2),
    ],
)
def test_a_workstation_rental_resolves_host_staged_and_prices_without_p2p(
    provider: str, instance_type: str, gpu_raw: str, gpu_count: int
) -> None:
    match = HardwareCatalog.load().resolve(provider, instance_type, gpu_raw, None, gpu_count)
    assert match is not None and match.intra_node_interconnect == HOST_STAGED, match
    gpu = find_gpu(match.gpu_name)
    offer = stated_offer(gpu, StatedHardware(gpu=gpu.gpu_name, gpus_per_node=gpu_count))
    offer["intra_node_interconnect"] = match.intra_node_interconnect
    assert hardware_of(offer).p2p is False
    # the same card stated with P2P keeps it: the reading is the rental's, not the card's
    assert hardware_of(stated_offer(gpu, StatedHardware(gpu=gpu.gpu_name, gpus_per_node=gpu_count))).p2p
