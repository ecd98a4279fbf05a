"""Small builders shared by the tests."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from connectors.base import Offer
from finetune import Accelerator

# Datasheet parts for the time model's tests: dense bf16 TFLOPS, DRAM GB/s, generation, VRAM and
# host link (A100 / H100 / B200 / MI300X datasheets; RTX 4090 at its FP32-accumulate rate, Ada
# whitepaper, no P2P). No SM count and no measured matmul rate, so GEMM_EFFICIENCY applies without
# tile quantization; a test that needs either says so with dataclasses.replace.
A100 = Accelerator(tflops=312.0, memory_bandwidth_gbps=2039.0, architecture="Ampere", vram_gb=80, pcie_gen=4)
H100 = Accelerator(tflops=989.0, memory_bandwidth_gbps=3350.0, architecture="Hopper", vram_gb=80, pcie_gen=5)
B200 = Accelerator(
    tflops=2250.0, memory_bandwidth_gbps=8000.0, architecture="Blackwell", vram_gb=180, pcie_gen=5
)
MI300X = Accelerator(
    tflops=1307.0, memory_bandwidth_gbps=5300.0, architecture="CDNA 3", vram_gb=192, pcie_gen=5
)
RTX4090 = Accelerator(
    tflops=165.0, memory_bandwidth_gbps=1008.0, architecture="Ada Lovelace", vram_gb=24, p2p=False, pcie_gen=4
)


def make_offer(instance_type: str, price: float, provider: str = "aws", **overrides: Any) -> Offer:
    """An on-demand USD list offer in us-east-1; gpu_count 0 means "not stated" (resolved by type)."""
    fields: dict[str, Any] = {
        "provider": provider,
        "instance_type": instance_type,
        "region": "us-east-1",
        "pricing_type": "on_demand",
        "price_source": "list",
        "price_per_hour": price,
        "currency": "USD",
        "gpu_name_raw": None,
        "gpu_count": 0.0,
    }
    return Offer(**{**fields, **overrides})


def benchmark_row(path: Path, row_id: str) -> dict[str, str]:
    """One row of a benchmark CSV (`benchmarks/data/*.csv`) by its `id`."""
    with path.open(newline="", encoding="utf-8") as handle:
        return next(r for r in csv.DictReader(handle) if r["id"] == row_id)


# `gpucost estimate` on stated hardware: 8× H100 SXM under ZeRO-3, 8k tokens, as JSON
H100_ESTIMATE_ARGS = [
    "estimate", "--model", "Llama-3.1-8B", "--method", "full", "--gpu", "H100-SXM", "--gpus", "8",
    "--sharding", "zero3", "--seq-len", "8192", "--tokens", "100M", "--json",
]  # fmt: skip


def estimate_json(*extra: str) -> dict[str, Any]:
    """`gpucost estimate` with H100_ESTIMATE_ARGS and `extra`, its JSON (the command must succeed)."""
    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, [*H100_ESTIMATE_ARGS, *extra])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))
