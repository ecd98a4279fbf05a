"""benchmarks/device_probe.py: the pure helpers, and `compare` scoring a probe.json exactly as the
throughput benchmark scores a row (the `measure` half needs torch and a GPU: it is run on the
device machine, and smoke-run on CPU with --tiny by hand, see benchmarks/README.md)."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks import device_probe as dp
from benchmarks.throughput_accuracy import EXTRA_CSV, load_gpus, predict, row_to_case
from finetune import memory_per_gpu
from finetune.time import ATTENTION_BACKWARD_RATIO
from warehouse.seed_models import load_models


def _report(tiny: bool = False, device_name: str = "NVIDIA H100 80GB HBM3") -> dict:
    """A probe.json in measure's shape, with round invented figures (not a measurement)."""
    train = []
    for i, job in enumerate(dp.JOBS):
        step = 0.25 + 0.05 * i
        tokens = job.seq_len * job.micro_batch
        train.append(
            {
                **job.__dict__,
                "precision": job.precision,
                "steps": 8,
                "error": None,
                "step_s": [step] * 8,
                "median_step_s": step,
                "tokens_per_s": tokens / step,
                "max_allocated_gb": 20.0 + i,
                "max_reserved_gb": 22.0 + i,
            }
        )
    # one job that failed on the device: reported, never scored
    train[-2] = {**train[-2], "error": "OutOfMemoryError: CUDA out of memory", "tokens_per_s": None}
    windows = [
        {"t_s": 0.5 * (k + 1), "tflops": 790.0 - k, "sm_mhz": 1980.0 - 10 * k, "power_w": 690.0}
        for k in range(10)
    ]
    return {
        "probe_version": dp.PROBE_VERSION,
        "started": "2026-12-06T12:00:00+00:00",
        "env": {
            "device": "cuda",
            "device_name": device_name,
            "torch": "2.11.0",
            "transformers": "5.17.0",
            "peft": "0.18.0",
            "tiny": tiny,
        },
        "gemm": {
            "shape": [8192] * 3,
            "burst_best_tflops": 800.0,
            "burst_median_tflops": 795.0,
            "sustain_s": 5.0,
            "tail_s": 2.5,
            "windows": windows,
            "sustained_tflops": dp.tail_median(windows, "tflops", 2.5),
            "sustained_sm_mhz": dp.tail_median(windows, "sm_mhz", 2.5),
            "sustained_power_w": 690.0,
        },
        "copy": {"bytes": dp.COPY_BYTES, "read_plus_write_gbps": 3000.0},
        # SDPA on torch 2.11 on an H100: its default runs cuDNN (times in seconds, invented)
        "attention": {
            "shape": list(dp.ATTENTION_SHAPE),
            "causal": True,
            "backends": {
                "default": _attention(0.0012, 0.0030),
                "flash": _attention(0.0019, 0.0050),
                "cudnn": _attention(0.0012, 0.0031),
                "efficient": {"error": "RuntimeError: No available kernel. Aborting execution."},
            },
            "default_is": "cudnn",
        },
        # the eager chains at Llama-3.1-8B's shapes (seconds invented)
        "chains": {
            "tokens": dp.CHAIN_TOKENS,
            "hidden": dp.CHAIN_HIDDEN,
            "heads": list(dp.CHAIN_HEADS),
            "vocab": dp.CHAIN_VOCAB,
            "chains": {
                "rms_norm": {"forward_s": 0.0004, "backward_s": 0.0009},
                "rotary": {"forward_s": 0.0005, "backward_s": 0.0006},
                "loss": {"error": "RuntimeError: CUDA out of memory"},
            },
        },
        "train": train,
    }


def _attention(forward_s: float, backward_s: float) -> dict:
    flops = dp.attention_forward_flops(*dp.ATTENTION_SHAPE)
    return {
        "forward_s": forward_s,
        "backward_s": backward_s,
        "total_s": forward_s + backward_s,
        "tflops": dp.fwd_bwd_tflops(flops, forward_s, backward_s),
    }


def test_matmul_tflops_counts_two_flops_per_multiply_add():
    # 8192³ in 1.39 ms is the ~790 TFLOP/s an H100 reaches on random data
    assert dp.matmul_tflops(8192, 8192, 8192, 1.0) == pytest.approx(2 * 8192**3 / 1e12)
    assert dp.matmul_tflops(8192, 8192, 8192, 1.3917e-3) == pytest.approx(790.0, rel=1e-3)
    # shape order matters only through the product
    assert dp.matmul_tflops(1024, 4096, 14336, 0.5) == dp.matmul_tflops(14336, 1024, 4096, 0.5)


def test_tail_median_reads_only_the_last_seconds():
    windows = [{"t_s": float(t), "tflops": 800.0 if t < 50 else 700.0} for t in range(1, 61)]
    # the last 10 s ran at 700: the settled rate, not the first seconds' boost
    assert dp.tail_median(windows, "tflops", 10.0) == 700.0
    # the whole run: more windows at 800 than at 700
    assert dp.tail_median(windows, "tflops", 60.0) == 800.0
    assert dp.tail_median([], "tflops", 10.0) is None


def test_tail_median_skips_missing_telemetry():
    windows = [{"t_s": 1.0, "sm_mhz": None}, {"t_s": 2.0, "sm_mhz": 1755.0}, {"t_s": 3.0, "sm_mhz": None}]
    assert dp.tail_median(windows, "sm_mhz", 5.0) == 1755.0
    assert dp.tail_median([{"t_s": 1.0, "sm_mhz": None}], "sm_mhz", 5.0) is None


def test_parse_smi_line_reads_clock_and_power_and_tolerates_na():
    assert dp.parse_smi_line("1980, 698.52") == {"sm_mhz": 1980.0, "power_w": 698.52}
    assert dp.parse_smi_line("1410, [N/A]") == {"sm_mhz": 1410.0, "power_w": None}
    assert dp.parse_smi_line("") == {"sm_mhz": None, "power_w": None}


@pytest.mark.parametrize(
    ("name", "memory_bytes", "gpu"),
    [
        # torch's names and total_memory as the cards report them (81559 MiB on this workplace's H100)
        ("NVIDIA H100 80GB HBM3", 81559 * 2**20, "H100-SXM"),
        ("NVIDIA H100 PCIe", 81559 * 2**20, "H100-PCIe"),
        ("NVIDIA H100 NVL", 95830 * 2**20, "H100-NVL"),
        ("NVIDIA A100-SXM4-80GB", 81920 * 2**20, "A100-80GB-SXM"),
        ("NVIDIA A100-SXM4-40GB", 40960 * 2**20, "A100-40GB-SXM"),
        ("NVIDIA GeForce RTX 4090", 24564 * 2**20, "RTX4090"),
        ("NVIDIA L40S", 46068 * 2**20, "L40S"),
        ("Some Future GPU", None, None),
    ],
)
def test_gpu_for_device_resolves_through_the_catalogue(name, memory_bytes, gpu):
    assert dp.gpu_for_device(name, memory_bytes) == gpu


def test_gpu_for_device_agrees_with_the_connectors_resolution():
    # one mechanism: the probe asks the same HardwareCatalog.resolve the connectors use
    from warehouse.hardware import HardwareCatalog

    catalog = HardwareCatalog.load()
    for name, gib in (("NVIDIA H200", 140.4), ("NVIDIA H100 80GB HBM3", 79.6)):
        match = catalog.resolve("", "", name, gib)
        assert match is not None
        assert dp.gpu_for_device(name, round(gib * 2**30)) == match.gpu_name


def test_job_configs_match_the_seeded_models():
    # the device builds each model from MODEL_CONFIGS; the comparison prices llm_models.csv's row:
    # they must be the same architecture
    models = load_models()
    for name, cfg in dp.MODEL_CONFIGS.items():
        spec = next(m for m in models.values() if m.model_id.endswith(name))
        assert spec.hidden_size == cfg["hidden_size"]
        assert spec.intermediate_size == cfg["intermediate_size"]
        assert spec.layers == cfg["num_hidden_layers"]
        assert spec.attention_heads == cfg["num_attention_heads"]
        assert spec.kv_heads == cfg["num_key_value_heads"]
        assert spec.vocab_size == cfg["vocab_size"]
        assert spec.tied_embeddings == cfg["tie_word_embeddings"]


def test_jobs_have_unique_ids_and_known_models():
    ids = [j.id for j in dp.JOBS]
    assert len(ids) == len(set(ids))
    assert {j.model for j in dp.JOBS} <= set(dp.MODEL_CONFIGS)
    # the new-user case is among them: 8B LoRA at 2k × 1, SDPA, bf16 modules
    assert dp.TrainJob("P01", "Llama-3.1-8B", "lora", 2048, 1) in dp.JOBS


def test_precision_follows_the_module_dtype():
    bf16 = dp.TrainJob("X", "Llama-3.1-8B", "lora", 2048, 1)
    fp32 = dp.TrainJob("Y", "Llama-3.1-8B", "lora", 2048, 1, load_dtype="float32")
    full = dp.TrainJob("Z", "Llama-3.2-1B", "full", 2048, 4)
    # get_peft_model keeps the adapters in fp32 over the bf16 base: bf16-mixed LoRA, no autocast
    assert (bf16.precision, bf16.autocast) == ("bf16-mixed", False)
    assert (fp32.precision, fp32.autocast) == ("bf16-mixed", True)
    # bf16 full fine-tuning keeps AdamW's states in bf16: pure
    assert (full.precision, full.autocast) == ("bf16-pure", False)


def test_probe_rows_have_the_extra_csv_columns_and_leave_out_failures():
    rows = dp.probe_rows(_report(), "H100-SXM")
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    assert all(list(r) == header for r in rows)
    assert [r["id"] for r in rows] == [j.id for j in dp.JOBS if j.id != "P05"]
    full = next(r for r in rows if r["method"] == "full")
    assert full["lora_rank"] == "" and full["lora_targets"] == ""
    # the benchmark reads a framework naming "compile" as compiled unless it says "no compile"
    assert all("no compile" in r["framework"] for r in rows)


def test_probe_rows_read_as_the_measured_jobs():
    models, gpus = load_models(), load_gpus()
    report = _report()
    for row in dp.probe_rows(report, "H100-SXM"):
        case = row_to_case(row, models, gpus)
        assert case.skip_reason is None
        assert case.job is not None and case.gpu is not None
        res = next(r for r in report["train"] if r["id"] == row["id"])
        assert (case.job.seq_len, case.job.micro_batch) == (res["seq_len"], res["micro_batch"])
        assert case.job.method == res["method"] and case.job.precision == res["precision"]
        assert case.job.compiled is False and case.job.kernels == "plain"
        assert case.job.grad_checkpointing is True and case.job.optimizer_impl == "foreach"
        assert case.n_gpus == 1 and case.gpu.tflops == 989.0
        assert case.measured_tokens_per_s == pytest.approx(res["tokens_per_s"], abs=0.05)


def test_attention_flops_count_the_two_products_half_masked():
    # QKᵀ and PV: 2 FLOPs per multiply-add, s×s×d each, per head; causal skips half
    b, h, s, d = dp.ATTENTION_SHAPE
    assert dp.attention_forward_flops(b, h, s, d, causal=False) == 4 * b * h * s * s * d
    assert dp.attention_forward_flops(b, h, s, d) == 2 * b * h * s * s * d


def test_fwd_bwd_rate_is_flash_attentions_own_figure():
    # ROCm/flash-attention issue #142 printed fwd 355.51, bwd 202.12, fwd + bwd 230.54 TFLOP/s:
    # times from those rates give back its combined figure
    flops = dp.attention_forward_flops(2, 16, 16384, 128, causal=False)
    forward_s, backward_s = flops / 355.51e12, 2.5 * flops / 202.12e12
    assert dp.fwd_bwd_tflops(flops, forward_s, backward_s) == pytest.approx(230.54, abs=0.05)
    # the probe restates the model's weighting (measure imports no project code): they must agree
    assert dp.ATTENTION_BACKWARD_RATIO == ATTENTION_BACKWARD_RATIO


def test_default_backend_is_the_forced_one_it_matches():
    results = {
        "default": {"total_s": 0.0042},
        "flash": {"total_s": 0.0069},
        "cudnn": {"total_s": 0.0043},
        "efficient": {"error": "no kernel"},
    }
    assert dp.default_backend(results) == "cudnn"
    # nearest by ratio, not by difference
    assert (
        dp.default_backend({"default": {"total_s": 1.0}, "a": {"total_s": 0.6}, "b": {"total_s": 1.5}}) == "b"
    )
    # nothing to match against, or no default: unknown
    assert dp.default_backend({"default": {"total_s": 1.0}, "flash": {"error": "x"}}) is None
    assert dp.default_backend({"default": {"error": "x"}, "flash": {"total_s": 1.0}}) is None


def test_sdpa_running_cudnn_prices_the_jobs_as_native_attention():
    sdpa = {"method": "full", "attention": "sdpa", "load_dtype": "bfloat16"}
    assert dp._job_overrides(sdpa, "cudnn") == {"attention": "native"}
    assert dp._job_overrides(sdpa, "flash") == {}
    # the math backend materializes the scores: eager; xformers' kernel has no figure of its own
    assert dp._job_overrides(sdpa, "math") == {"attention": "eager"}
    assert dp._job_overrides(sdpa, "efficient") == {}
    assert dp._job_overrides(sdpa, None) == {}
    # a job run with eager attention stays eager whatever SDPA would pick
    assert dp._job_overrides({**sdpa, "attention": "eager"}, "cudnn") == {"attention": "eager"}


def test_job_overrides_set_what_the_columns_cannot_say():
    full = {"method": "full", "attention": "sdpa", "load_dtype": "bfloat16"}
    assert dp._job_overrides(full) == {}
    assert dp._job_overrides({**full, "attention": "eager"}) == {"attention": "eager"}
    assert dp._job_overrides({**full, "load_dtype": "float32"}) == {"mixed_precision": "autocast"}
    # a LoRA job on the bf16 base runs PEFT's fp32 adapters with no autocast: mixed_precision none
    lora = {**full, "method": "lora"}
    assert dp._job_overrides(lora) == {"mixed_precision": "none"}
    assert dp._job_overrides({**lora, "load_dtype": "float32"}) == {"mixed_precision": "autocast"}


def test_compare_prints_the_benchmarks_own_prediction(tmp_path: Path, capsys):
    report = _report()
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(report))
    emitted = tmp_path / "rows.csv"
    assert dp.main(["compare", str(probe), "--emit-rows", str(emitted)]) == 0
    out = capsys.readouterr().out
    models, gpus = load_models(), load_gpus()
    for row in dp.probe_rows(report, "H100-SXM"):
        res = next(r for r in report["train"] if r["id"] == row["id"])
        case = row_to_case(row, models, gpus)
        assert case.job is not None and case.model is not None
        case = replace(case, job=replace(case.job, **dp._job_overrides(res, "cudnn")))
        expected = predict(case)
        line = next(ln for ln in out.splitlines() if ln.startswith(f"| {row['id']} |"))
        assert f"| {expected:,.0f} |" in line
        assert f"{(expected / case.measured_tokens_per_s - 1) * 100:+.1f}" in line
        assert f"/ {memory_per_gpu(case.model, case.job, 1).allocated_gb:.1f}" in line
    # eager attention and autocast change the prediction: the overrides reach the model
    p01 = next(ln for ln in out.splitlines() if ln.startswith("| P01 |"))
    p03 = next(ln for ln in out.splitlines() if ln.startswith("| P03 |"))
    p04 = next(ln for ln in out.splitlines() if ln.startswith("| P04 |"))
    predicted = [float(ln.split("|")[4].replace(",", "")) for ln in (p01, p03, p04)]
    # eager attention is slower; fp32 modules under autocast differ from the bf16 base whose
    # fp32 adapters run without autocast (which is dearer depends on the step: weight casts per
    # step against adapter casts per token)
    assert predicted[1] < predicted[0] and predicted[2] != predicted[0]
    # the failed job is listed with its error, not scored
    assert "| P05 | failed on the device |" in out and "OutOfMemoryError" in out
    # GEMM: burst and sustained against the rated 989 TFLOP/s, and their ratio
    assert "| burst best (MAMF reading) | 800 | 80.9% |" in out
    assert f"sustained / burst best = {report['gemm']['sustained_tflops'] / 800:.3f}" in out
    # and the burst median against the seed's measured H100 SXM rate (MAMF, 794.5)
    median = report["gemm"]["burst_median_tflops"]
    assert f"burst median / gpus.csv matmul_tflops 794.5 (MAMF) = {median / 794.5:.3f}" in out
    assert "copy: 3000 GB/s read+write = 89.6% of 3350 GB/s" in out
    # attention: each backend against the rated peak and the share the model prices its kernel at
    cudnn = report["attention"]["backends"]["cudnn"]["tflops"]
    assert f"| cudnn | {cudnn:.0f} | {cudnn / 989:.1%} | native 58% |" in out
    flash = report["attention"]["backends"]["flash"]["tflops"]
    assert f"| flash | {flash:.0f} | {flash / 989:.1%} | flash 35% |" in out
    assert "| efficient | failed: RuntimeError: No available kernel" in out
    assert "SDPA's default ran cudnn: its training jobs are priced as `--attention native`" in out
    with emitted.open(newline="", encoding="utf-8") as f:
        assert [r["id"] for r in csv.DictReader(f)] == [j.id for j in dp.JOBS if j.id != "P05"]


def test_compare_names_the_table_a_seeded_rate_came_from(tmp_path: Path, capsys):
    # the H100 PCIe's rate is the square-matrix table's (MAMF never measured the part): the line
    # must not call it MAMF
    probe = tmp_path / "probe.json"
    report = _report()
    probe.write_text(json.dumps(report))
    assert dp.main(["compare", str(probe), "--gpu", "H100-PCIe"]) == 0
    out = capsys.readouterr().out
    median = report["gemm"]["burst_median_tflops"]
    line = f"burst median / gpus.csv matmul_tflops 495.93 (square-matrix table) = {median / 495.93:.3f}"
    assert line in out
    assert "(MAMF) =" not in out


def test_compare_refuses_a_tiny_smoke_run(tmp_path: Path, capsys):
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(_report(tiny=True)))
    assert dp.main(["compare", str(probe)]) == 2
    assert "--tiny CPU smoke run" in capsys.readouterr().err


def test_compare_asks_for_gpu_when_the_device_is_unknown(tmp_path: Path, capsys):
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(_report(device_name="Some Future GPU")))
    assert dp.main(["compare", str(probe)]) == 2
    assert "pass --gpu NAME" in capsys.readouterr().err
    # named by hand, it is scored
    assert dp.main(["compare", str(probe), "--gpu", "H200-SXM"]) == 0
    assert "→ gpus.csv H200-SXM" in capsys.readouterr().out


def test_measure_without_torch_says_where_to_run(monkeypatch, capsys, tmp_path: Path):
    # this project's environment has no torch: measure must say so, not fail with a traceback
    import builtins

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    assert dp.main(["measure", "--out", str(tmp_path)]) == 2
    assert "device machine's python3" in capsys.readouterr().err
    assert not (tmp_path / "probe.json").exists()


def test_a_probe_without_the_attention_section_prices_sdpa_as_flash(tmp_path: Path, capsys):
    # a version-1 probe.json (before the attention section) still compares: SDPA's backend is
    # unknown, so its jobs keep the default kernel, and the prediction differs from cuDNN's
    report = _report()
    old = {k: v for k, v in report.items() if k != "attention"}
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(old))
    assert dp.main(["compare", str(probe)]) == 0
    without = capsys.readouterr().out
    assert "SDPA's default ran" not in without
    probe.write_text(json.dumps(report))
    assert dp.main(["compare", str(probe)]) == 0
    with_cudnn = capsys.readouterr().out

    def p01(out: str) -> float:
        line = next(ln for ln in out.splitlines() if ln.startswith("| P01 |"))
        return float(line.split("|")[4].replace(",", ""))

    # cuDNN is the faster kernel on an H100 (0.58 of peak against FA2's 0.35)
    assert p01(with_cudnn) > p01(without)


# --- the eager chains: the model's bytes over the measured time -------------------------------


def test_chain_bytes_are_the_time_models_own_counts():
    from finetune.time import EAGER_RMS_NORM_BYTES, EAGER_ROTARY_BYTES, LOSS_BYTES_PER_LOGIT

    section = {"tokens": 1000, "hidden": 64, "heads": [4, 2, 16], "vocab": 500, "chains": {}}
    counted = dp.chain_bytes(section)
    # backward is priced at twice forward (ELEMENTWISE_BACKWARD_RATIO): three times in all
    assert counted["rms_norm"] == (EAGER_RMS_NORM_BYTES * 1000 * 64, 3 * EAGER_RMS_NORM_BYTES * 1000 * 64)
    assert counted["rotary"] == (EAGER_ROTARY_BYTES * 1000 * 6 * 16, 3 * EAGER_ROTARY_BYTES * 1000 * 6 * 16)
    # the loss starts from logits the head already wrote (its 2 bytes per logit), no forward share
    assert counted["loss"] == (None, (LOSS_BYTES_PER_LOGIT["standard"] - 2) * 1000 * 500)


def test_compare_prints_each_chains_share_of_the_datasheet_bandwidth(tmp_path: Path, capsys):
    report = _report()
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(report))
    assert dp.main(["compare", str(probe)]) == 0
    out = capsys.readouterr().out
    tokens, hidden = dp.CHAIN_TOKENS, dp.CHAIN_HIDDEN
    q_heads, kv_heads, head_dim = dp.CHAIN_HEADS
    norm = 36 * tokens * hidden
    forward = norm / 0.0004 / 1e9
    total = 3 * norm / (0.0004 + 0.0009) / 1e9
    line = next(ln for ln in out.splitlines() if ln.startswith("| rms_norm |"))
    assert line == f"| rms_norm | {forward:.0f} | {forward / 3350:.1%} | {total:.0f} | {total / 3350:.1%} |"
    rotary = 20 * tokens * (q_heads + kv_heads) * head_dim
    line = next(ln for ln in out.splitlines() if ln.startswith("| rotary |"))
    assert f"| {rotary / 0.0005 / 1e9:.0f} |" in line and f"| {3 * rotary / 0.0011 / 1e9:.0f} |" in line
    # a chain that failed on the device is listed with its error, not divided
    assert "| loss | failed: RuntimeError: CUDA out of memory |" in out
    assert "the model prices these bytes at STREAM_EFFICIENCY, 90% of the datasheet" in out


def test_a_probe_from_before_the_chains_prints_no_chain_table(tmp_path: Path, capsys):
    report = _report()
    del report["chains"]
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(report))
    assert dp.main(["compare", str(probe)]) == 0
    assert "HF eager chain" not in capsys.readouterr().out
