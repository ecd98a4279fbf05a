"""The memory model against published measured peaks (../shared/data/measured_memory_calibration.csv)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.memory_accuracy import evaluate, row_to_case, summary
from warehouse.seed_models import load_models


def test_median_error_on_calibration_points_under_15_percent(
    shared_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = evaluate(shared_dir / "data" / "measured_memory_calibration.csv")
    with capsys.disabled():
        print()
        for r in results:
            c = r.case
            if r.error_pct is None:
                print(f"  skip  {c.setup}: {c.skip_reason}")
            else:
                print(f"  {r.error_pct:+6.1f}%  {c.setup}: {c.measured_gb:.1f} GB measured, "
                      f"{r.predicted_gb:.1f} predicted")  # fmt: skip
        s = summary(results)
        within, median = s["within_20_share"], s["median_abs_error_pct"]
        print(f"  expressible {s['expressible']:.0f}/{s['points']:.0f}, within ±20%: {within:.0%}")
        print(f"  median |error| {median:.1f}%")
    assert s["expressible"] >= 0.6 * s["points"]
    assert s["median_abs_error_pct"] < 15


def _row(**overrides: str) -> dict[str, str]:
    row = {
        "model": "Llama-2-7B", "params_b": "6.74", "method": "lora", "precision": "bf16",
        "seq_len": "2048", "micro_batch": "2", "grad_checkpointing": "yes", "optimizer": "AdamW",
        "measured_peak_gb": "10", "hardware": "1x A100", "source": "somewhere; GB",
    }  # fmt: skip
    return {**row, **overrides}


def test_row_rules_read_the_rows_own_words() -> None:
    models = load_models()
    case = row_to_case(_row(method="qlora FSDP", hardware="2x RTX 3090", source="x; GiB"), models)
    assert case.job is not None and case.model is not None
    assert (case.job.method, case.job.sharding, case.n_gpus) == ("qlora", "zero3", 2)
    assert case.measured_gb == pytest.approx(10 * 2**30 / 1e9)
    assert case.model.model_id == "meta-llama/Llama-2-7b-hf"
    assert row_to_case(_row(seq_len=""), models).skip_reason
    assert row_to_case(_row(grad_checkpointing="yes (+activation offload)"), models).skip_reason


def test_unknown_model_borrows_the_nearest_seed_architecture() -> None:
    case = row_to_case(_row(model="SomeLab/Unknown-8B", params_b="8.0"), load_models())
    assert case.model is not None and "arch of" in case.note


@pytest.mark.parametrize(
    ("framework", "quote", "compiled"),
    [
        ("torchtune (compile on, chunked CE, packed)", "", True),
        ("torchtune (packed, no compile)", "", False),
        ("torchtitan (FSDP2, no compile, bf16)", "compile is off", False),
        ("torchtune (alpaca, unpacked)", "'| 1 x RTX 4090 | QLoRA ** |' ('**= Uses torch compile')", True),
        ("PEFT method_comparison run.py (plain PyTorch loop)", "", False),
    ],
)
def test_the_throughput_benchmark_reads_torch_compile_from_the_source(
    framework: str, quote: str, compiled: bool
) -> None:
    from benchmarks.throughput_accuracy import ran_compiled

    assert ran_compiled({"framework": framework, "quote": quote}) is compiled
