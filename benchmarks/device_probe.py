"""Measure on a lent GPU what the time model's open questions need; score the model against it.

Two halves, one file, so that what was measured and how it is read cannot drift apart:

    # on the device machine (its python3 holds torch, transformers and peft; nothing else needed):
    python3 benchmarks/device_probe.py measure --out "$OUT"          # ~4 min on one H100
    # here, on what came back:
    uv run python benchmarks/device_probe.py compare probe.json [--emit-rows rows.csv]

`measure` imports torch, transformers and peft only, never this project, and writes probe.json:

* gemm: an 8192³ bf16 matmul on randn data, burst (best and median of 20 after warm-up: how MAMF,
  stas00/ml-engineering, reads a card) and sustained (back-to-back for --sustain-s seconds, in
  ~0.5 s windows, with the SM clock and board power NVML reads after each). The sustained/burst
  ratio is the measured figure the Hopper question in benchmarks/README.md lacks ("no source
  gives an H100 bf16 GEMM rate sustained").
* stream: a device-to-device copy of 2 GiB, bytes read + written per second (STREAM_EFFICIENCY).
* attention: PyTorch SDPA forward and backward, causal, bf16, Llama-3.1-8B's 32 heads of 128 at 8k
  tokens, under each backend forced (flash, cuDNN, memory-efficient, math) and under SDPA's own choice;
  fwd + bwd TFLOP/s counted as flash-attention's benchmark counts them (the model's
  ATTENTION_EFFICIENCY and NATIVE_ATTENTION_EFFICIENCY), and which backend SDPA's default ran (the
  forced one whose time it matches). The training jobs run that default, so `compare` prices them
  as `native` where it is cuDNN (and `eager` where it is math).
* chains: transformers' own eager LlamaRMSNorm, apply_rotary_pos_emb and causal-LM loss
  (`logits.float()`, cross-entropy), forward and backward in bf16 at Llama-3.1-8B's shapes on 8k
  tokens. `compare` divides the bytes the time model counts for each (EAGER_RMS_NORM_BYTES,
  EAGER_ROTARY_BYTES, LOSS_BYTES_PER_LOGIT) by the time: the share of bandwidth these chains reach,
  which the model takes as STREAM_EFFICIENCY and Liger-Kernel's A100 timings put at 44–64 %.
* train: fine-tuning steps with transformers + PEFT as a new user runs them (a plain PyTorch loop,
  eager, SDPA attention, HF's causal-LM loss, torch AdamW (foreach), clipping at 1.0, gradient
  checkpointing non-reentrant), on random weights built from the models' published configs
  (no download: the device reaches nothing outside). Each job's median step, tokens/s and peak
  allocated / reserved memory. Llama-3.1-8B LoRA at 2k × 1 is the issue's new-user case.

`compare` reads each train job as a row of benchmarks/data/throughput_extra.csv (`probe_rows`), so
it is scored by the benchmark's own `row_to_case` and `predict` (the knobs the columns cannot say,
eager attention and autocast over fp32 modules, are set on the job afterwards), prints measured
against predicted tokens/s and peak memory, and the GEMM and copy rates against gpus.csv and the
model's efficiencies. `--emit-rows` writes the rows, ready to append to throughput_extra.csv.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PROBE_VERSION = 3
GEMM_N = 8192
COPY_BYTES = 2 * 2**30
# batch, heads, tokens, head dim: Llama-3.1-8B's query heads at 8k, the long-sequence case in
# which attention weighs most; flash-attention's own benchmarks report this shape's class
ATTENTION_SHAPE = (1, 32, 8192, 128)
# SDPA backends the probe forces, by the name torch.nn.attention.SDPBackend gives them
SDPA_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "math": "MATH",
}
# which of the model's attention kernels each backend is (finetune.job.Job.attention): PyTorch's
# flash backend is FlashAttention-2, cuDNN is the GPU's own fused attention, math is unfused
# (the s² scores written and read, as eager); memory-efficient (xformers' kernel) has no figure
BACKEND_KERNEL = {"flash": "flash", "cudnn": "native", "math": "eager"}
# an attention backward's FLOPs in forwards (finetune.time.ATTENTION_BACKWARD_RATIO, the weighting of
# flash-attention's "fwd + bwd" figures): `measure` imports no project code, so it is restated here
ATTENTION_BACKWARD_RATIO = 2.5
# Published config.json fields (huggingface.co/meta-llama/<model>/blob/main/config.json), the same
# figures as warehouse/seeds/llm_models.csv; rope scaling is left out: it changes no FLOP or byte.
MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "Llama-3.1-8B": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
    },
    "Llama-3.2-1B": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
    },
}
# --tiny (a CPU smoke run of the measuring code): two layers, small widths
TINY_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 512,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
    "max_position_embeddings": 512,
}


@dataclass(frozen=True)
class TrainJob:
    """One measured training job, in the vocabulary of throughput_extra.csv and finetune.Job."""

    id: str
    model: str
    method: str  # lora | full
    seq_len: int
    micro_batch: int
    attention: str = "sdpa"  # sdpa | eager (transformers' attn_implementation)
    # the modules' dtype: bfloat16 (dtype="auto" on a bf16 checkpoint, transformers 5's default)
    # or float32 under torch.autocast to bf16 (transformers 4's default load without torch_dtype)
    load_dtype: str = "bfloat16"
    lora_rank: int = 16
    grad_checkpointing: bool = True

    @property
    def autocast(self) -> bool:
        return self.load_dtype == "float32"

    @property
    def precision(self) -> str:
        # fp32 modules under autocast: bf16-mixed. bf16 modules: full fine-tuning keeps its
        # optimizer states in bf16 ("bf16-pure"), while get_peft_model keeps the adapters (and so
        # their AdamW states) in fp32 over a bf16 base (autocast_adapter_dtype=True, its default):
        # bf16-mixed LoRA, whose adapters run in fp32 (finetune.job.Job.fp32_adapters)
        return "bf16-mixed" if self.autocast or self.method == "lora" else "bf16-pure"


JOBS: tuple[TrainJob, ...] = (
    # the new-user case: 8B LoRA, one H100, 2k tokens, micro-batch 1
    TrainJob("P01", "Llama-3.1-8B", "lora", 2048, 1),
    TrainJob("P02", "Llama-3.1-8B", "lora", 2048, 4),
    TrainJob("P03", "Llama-3.1-8B", "lora", 2048, 1, attention="eager"),
    TrainJob("P04", "Llama-3.1-8B", "lora", 2048, 1, load_dtype="float32"),
    TrainJob("P05", "Llama-3.1-8B", "lora", 512, 1),
    TrainJob("P06", "Llama-3.2-1B", "full", 2048, 4),
)


# ---------------------------------------------------------------- pure helpers (tested here)


def matmul_tflops(m: int, n: int, k: int, seconds: float) -> float:
    """TFLOP/s of an m×k by k×n product taking `seconds` (2·m·n·k FLOPs)."""
    return 2.0 * m * n * k / seconds / 1e12


def attention_forward_flops(batch: int, heads: int, seq: int, head_dim: int, causal: bool = True) -> float:
    """FLOPs of one attention forward as flash-attention's benchmarks count them: QKᵀ and PV, two
    s×s×d products per head (4·b·h·s²·d), half of them under a causal mask."""
    flops = 4.0 * batch * heads * seq * seq * head_dim
    return flops / 2 if causal else flops


def fwd_bwd_tflops(forward_flops: float, forward_s: float, backward_s: float) -> float:
    """A forward and its backward (ATTENTION_BACKWARD_RATIO forwards' FLOPs) over their time:
    flash-attention's "fwd + bwd" rate, the figure the model's shares are read from."""
    return (1 + ATTENTION_BACKWARD_RATIO) * forward_flops / (forward_s + backward_s) / 1e12


def default_backend(results: dict[str, dict[str, Any]]) -> str | None:
    """The forced backend SDPA's own choice ran: the one whose fwd + bwd time is nearest the
    default's, by ratio. None when the default or every forced backend failed."""
    default = results.get("default", {}).get("total_s")
    timed = {name: r["total_s"] for name, r in results.items() if name != "default" and r.get("total_s")}
    if not default or not timed:
        return None
    return min(timed, key=lambda name: abs(math.log(timed[name] / default)))


def tail_median(windows: list[dict[str, float]], key: str, tail_s: float) -> float | None:
    """Median of `key` over the windows that end in the last `tail_s` seconds (the sustained
    state: clocks settle under the power limit within seconds to tens of seconds)."""
    if not windows:
        return None
    end = windows[-1]["t_s"]
    values = [w[key] for w in windows if w["t_s"] >= end - tail_s and w.get(key) is not None]
    return statistics.median(values) if values else None


def parse_smi_line(line: str) -> dict[str, float | None]:
    """One `nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits` line."""
    parts = [p.strip() for p in line.split(",")]
    out: dict[str, float | None] = {"sm_mhz": None, "power_w": None}
    for key, raw in zip(("sm_mhz", "power_w"), parts, strict=False):
        try:
            out[key] = float(raw)
        except ValueError:
            out[key] = None  # "[N/A]" on parts that do not report it
    return out


# ---------------------------------------------------------------- measure (device side)


class _Telemetry:
    """SM clock and board power: NVML (nvidia-ml-py) where importable, else nvidia-smi, else none."""

    def __init__(self, index: int = 0) -> None:
        self._nvml: Any = None
        self._handle: Any = None
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            self._nvml, self._handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # no NVML: fall back to nvidia-smi or nothing
            self._nvml = None

    def read(self) -> dict[str, float | None]:
        if self._nvml is not None:
            try:
                nv = self._nvml
                mhz = float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_SM))
                watts = nv.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
                return {"sm_mhz": mhz, "power_w": watts}
            except Exception:
                pass
        try:
            done = subprocess.run(
                ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=5,
                check=True,
            )
            return parse_smi_line(done.stdout.splitlines()[0])
        except Exception:  # no GPU tools here (CPU smoke run)
            return {"sm_mhz": None, "power_w": None}

    def limits(self) -> dict[str, float | None]:
        if self._nvml is None:
            return {"power_limit_w": None, "max_sm_mhz": None}
        nv = self._nvml
        try:
            return {
                "power_limit_w": nv.nvmlDeviceGetEnforcedPowerLimit(self._handle) / 1000.0,
                "max_sm_mhz": float(nv.nvmlDeviceGetMaxClockInfo(self._handle, nv.NVML_CLOCK_SM)),
            }
        except Exception:
            return {"power_limit_w": None, "max_sm_mhz": None}


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure_gemm(torch: Any, device: str, n: int, sustain_s: float, tel: _Telemetry) -> dict[str, Any]:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    _sync(torch, device)
    burst = []
    for _ in range(20):
        t0 = time.perf_counter()
        a @ b
        _sync(torch, device)
        burst.append(matmul_tflops(n, n, n, time.perf_counter() - t0))
    per = n * n * n * 2 / (max(burst) * 1e12)  # seconds per product at the burst rate
    batch = max(1, round(0.5 / per))
    windows: list[dict[str, float]] = []
    start = time.perf_counter()
    while time.perf_counter() - start < sustain_s:
        t0 = time.perf_counter()
        for _ in range(batch):
            a @ b
        _sync(torch, device)
        dt = time.perf_counter() - t0
        windows.append(
            {"t_s": time.perf_counter() - start, "tflops": matmul_tflops(n, n, n, dt / batch), **tel.read()}
        )
    tail = min(20.0, sustain_s / 2)
    return {
        "shape": [n, n, n],
        "burst_best_tflops": max(burst),
        "burst_median_tflops": statistics.median(burst),
        "sustain_s": sustain_s,
        "tail_s": tail,
        "windows": windows,
        "sustained_tflops": tail_median(windows, "tflops", tail),
        "sustained_sm_mhz": tail_median(windows, "sm_mhz", tail),
        "sustained_power_w": tail_median(windows, "power_w", tail),
    }


def measure_copy(torch: Any, device: str, nbytes: int) -> dict[str, Any]:
    src = torch.empty(nbytes // 2, device=device, dtype=torch.bfloat16).normal_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    _sync(torch, device)
    rates = []
    for _ in range(10):
        t0 = time.perf_counter()
        dst.copy_(src)
        _sync(torch, device)
        rates.append(2 * nbytes / (time.perf_counter() - t0) / 1e9)
    return {"bytes": nbytes, "read_plus_write_gbps": statistics.median(rates)}


def _time_fwd_bwd(torch: Any, device: str, forward: Any, iters: int) -> tuple[float, float]:
    """Median seconds of `forward()` and of the backward of what it returns (3 warm-up passes).
    `forward` returns (outputs, incoming gradients, inputs): autograd.grad runs over them."""
    fwd, bwd = [], []
    for i in range(3 + iters):
        _sync(torch, device)
        t0 = time.perf_counter()
        outputs, grads, inputs = forward()
        _sync(torch, device)
        t1 = time.perf_counter()
        torch.autograd.grad(outputs, inputs, grads)
        _sync(torch, device)
        if i >= 3:
            fwd.append(t1 - t0)
            bwd.append(time.perf_counter() - t1)
    return statistics.median(fwd), statistics.median(bwd)


def _time_sdpa(torch: Any, device: str, q: Any, k: Any, v: Any, grad: Any, iters: int) -> tuple[float, float]:
    """Median forward and backward seconds of causal SDPA on q, k, v (3 warm-up passes)."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return _time_fwd_bwd(torch, device, lambda: ((sdpa(q, k, v, is_causal=True),), (grad,), (q, k, v)), iters)


def measure_attention(torch: Any, device: str, tiny: bool, iters: int = 10) -> dict[str, Any]:
    """SDPA fwd + bwd under SDPA's own choice and under each backend forced; a backend this build
    or device cannot run is recorded with its error, not fatal."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, s, d = (1, 2, 128, 64) if tiny else ATTENTION_SHAPE
    q, k, v = (
        torch.randn(b, h, s, d, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(3)
    )
    grad = torch.randn(b, h, s, d, device=device, dtype=torch.bfloat16)
    flops = attention_forward_flops(b, h, s, d)
    results: dict[str, dict[str, Any]] = {}
    for name in ("default", *SDPA_BACKENDS):
        context = (
            contextlib.nullcontext()
            if name == "default"
            else sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[name]))
        )
        try:
            with context:
                forward_s, backward_s = _time_sdpa(torch, device, q, k, v, grad, iters)
            results[name] = {
                "forward_s": forward_s,
                "backward_s": backward_s,
                "total_s": forward_s + backward_s,
                "tflops": fwd_bwd_tflops(flops, forward_s, backward_s),
            }
        except Exception as exc:  # no kernel for this device / build: say so, measure the rest
            results[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return {
        "shape": [b, h, s, d],
        "causal": True,
        "backends": results,
        "default_is": default_backend(results),
    }


# the eager HF op chains the time model prices by their bytes at STREAM_EFFICIENCY (issue 23;
# benchmarks/README.md, "Tested, not adopted"): Llama-3.1-8B's shapes on one sequence of 8k
# tokens, its loss over the 128,256-word vocabulary
CHAIN_TOKENS = 8192
CHAIN_HIDDEN = 4096
CHAIN_HEADS = (32, 8, 128)  # query heads, key/value heads, head dim
CHAIN_VOCAB = 128256


def measure_chains(torch: Any, device: str, tiny: bool, iters: int = 10) -> dict[str, Any]:
    """transformers' own LlamaRMSNorm, apply_rotary_pos_emb and its causal-LM loss (logits.float()
    then cross-entropy), timed forward and backward in bf16 at a training step's shapes; a chain
    this transformers cannot build is recorded with its error."""
    from transformers.models.llama import modeling_llama

    tokens, hidden, vocab = (256, 256, 1024) if tiny else (CHAIN_TOKENS, CHAIN_HIDDEN, CHAIN_VOCAB)
    q_heads, kv_heads, head_dim = (4, 2, 64) if tiny else CHAIN_HEADS
    bf16 = torch.bfloat16

    def rms_norm() -> Any:
        norm = modeling_llama.LlamaRMSNorm(hidden, eps=1e-5).to(device=device, dtype=bf16)
        x = torch.randn(tokens, hidden, device=device, dtype=bf16, requires_grad=True)
        grad = torch.randn(tokens, hidden, device=device, dtype=bf16)
        return lambda: ((norm(x),), (grad,), (x, norm.weight))

    def rotary() -> Any:
        # q and k as HF attention makes them: (1, T, heads, d) viewed as (1, heads, T, d)
        q = torch.randn(1, tokens, q_heads, head_dim, device=device, dtype=bf16, requires_grad=True)
        k = torch.randn(1, tokens, kv_heads, head_dim, device=device, dtype=bf16, requires_grad=True)
        angle = torch.arange(tokens, device=device, dtype=torch.float32)[:, None] * torch.rand(
            head_dim, device=device
        )
        cos, sin = angle.cos().to(bf16)[None], angle.sin().to(bf16)[None]  # (1, T, d), x's dtype
        dq = torch.randn(1, q_heads, tokens, head_dim, device=device, dtype=bf16)
        dk = torch.randn(1, kv_heads, tokens, head_dim, device=device, dtype=bf16)

        def run() -> Any:
            out = modeling_llama.apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
            return tuple(out), (dq, dk), (q, k)

        return run

    def loss() -> Any:
        logits = torch.randn(tokens, vocab, device=device, dtype=bf16, requires_grad=True)
        labels = torch.randint(vocab, (tokens,), device=device)
        one = torch.ones((), device=device)
        f = torch.nn.functional
        return lambda: ((f.cross_entropy(logits.float(), labels),), (one,), (logits,))

    chains: dict[str, dict[str, Any]] = {}
    for name, build in (("rms_norm", rms_norm), ("rotary", rotary), ("loss", loss)):
        try:
            forward_s, backward_s = _time_fwd_bwd(torch, device, build(), iters)
            chains[name] = {"forward_s": forward_s, "backward_s": backward_s}
        except Exception as exc:  # an API this transformers lacks: say so, measure the rest
            chains[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return {
        "tokens": tokens,
        "hidden": hidden,
        "heads": [q_heads, kv_heads, head_dim],
        "vocab": vocab,
        "chains": chains,
    }


def _build_model(job: TrainJob, torch: Any, device: str, tiny: bool) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    fields = TINY_CONFIG if tiny else MODEL_CONFIGS[job.model]
    config = LlamaConfig(**fields, attn_implementation=job.attention)
    dtype = getattr(torch, job.load_dtype)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    if job.grad_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if job.method == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=job.lora_rank, lora_alpha=2 * job.lora_rank, target_modules="all-linear", lora_dropout=0.0
        )
        model = get_peft_model(model, lora)
    return model


def measure_train(
    job: TrainJob, torch: Any, device: str, tiny: bool, steps: int, warmup: int
) -> dict[str, Any]:
    result: dict[str, Any] = {**job.__dict__, "precision": job.precision, "steps": steps, "error": None}
    seq = 64 if tiny else job.seq_len
    result["seq_len"] = seq
    model = optimizer = None
    try:
        model = _build_model(job, torch, device, tiny)
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=1e-4)
        vocab = model.config.vocab_size
        batch = torch.randint(0, vocab, (job.micro_batch, seq), device=device)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        times = []
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=job.autocast):
                loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            _sync(torch, device)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        step = statistics.median(times)
        result.update(
            step_s=times,
            median_step_s=step,
            tokens_per_s=job.micro_batch * seq / step,
            trainable_params=sum(p.numel() for p in params),
        )
        if device == "cuda":
            result["max_allocated_gb"] = torch.cuda.max_memory_allocated() / 1e9
            result["max_reserved_gb"] = torch.cuda.max_memory_reserved() / 1e9
    except Exception as exc:  # one job's failure (OOM, API drift) must not lose the rest
        result["error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        # modules with checkpointing hooks hold reference cycles: collect them before the next
        # model is built, or two 8B models (16-32 GB each) share the card
        del model, optimizer
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    return result


def measure(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        print(
            "device_probe measure needs torch, transformers and peft: run it with the device "
            'machine\'s python3 (`python3 benchmarks/device_probe.py measure --out "$OUT"`), '
            "not in this project's environment",
            file=sys.stderr,
        )
        return 2
    import peft
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.tiny:
        print("no CUDA device: pass --tiny for a CPU smoke run of the measuring code", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tel = _Telemetry()
    env: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "tiny": args.tiny,
        **tel.limits(),
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(
            device_name=props.name,
            sm_count=props.multi_processor_count,
            memory_bytes=props.total_memory,
            capability=[props.major, props.minor],
            cudnn=torch.backends.cudnn.version(),
        )
    report: dict[str, Any] = {
        "probe_version": PROBE_VERSION,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "env": env,
    }
    path = out / "probe.json"

    def save() -> None:  # after every section: a run cut short keeps what it measured
        path.write_text(json.dumps(report, indent=1))

    n = 256 if args.tiny else GEMM_N
    print(f"gemm {n}³ bf16: burst, then {args.sustain_s:.0f} s sustained", flush=True)
    report["gemm"] = measure_gemm(torch, device, n, args.sustain_s, tel)
    save()
    print(
        f"  burst {report['gemm']['burst_best_tflops']:.0f}, "
        f"sustained {report['gemm']['sustained_tflops']:.0f} TFLOP/s",
        flush=True,
    )
    report["copy"] = measure_copy(torch, device, 2**20 if args.tiny else COPY_BYTES)
    save()
    print("attention: SDPA fwd + bwd, default and each backend forced", flush=True)
    report["attention"] = measure_attention(torch, device, args.tiny)
    save()
    print(f"  SDPA's default ran {report['attention']['default_is']}", flush=True)
    print("chains: HF's eager RMSNorm, rotary and loss, fwd + bwd", flush=True)
    report["chains"] = measure_chains(torch, device, args.tiny)
    save()
    report["train"] = []
    for job in JOBS:
        if args.only and job.id not in args.only:
            continue
        print(
            f"train {job.id}: {job.model} {job.method} s={job.seq_len} b={job.micro_batch} "
            f"{job.attention} {job.load_dtype}",
            flush=True,
        )
        res = measure_train(job, torch, device, args.tiny, args.steps, args.warmup)
        report["train"].append(res)
        save()
        print(f"  {res.get('tokens_per_s', 0):,.0f} tok/s  {res['error'] or ''}", flush=True)
    print(f"wrote {path}")
    return 0


# ---------------------------------------------------------------- compare (this side)


def gpu_for_device(name: str, memory_bytes: int | None = None) -> str | None:
    """The gpus.csv row of torch's device name, by the catalogue's own alias table (the
    nvidia-smi names are aliases there, e.g. "H100 80GB HBM3"); the card's memory, in GiB as
    nvidia-smi reports it, picks among parts that share a name (H200 SXM / NVL)."""
    from warehouse.hardware import HardwareCatalog

    gib = memory_bytes / 2**30 if memory_bytes else None
    match = HardwareCatalog.load().resolve("", "", name, gib)
    return match.gpu_name if match else None


def probe_rows(report: dict[str, Any], gpu: str) -> list[dict[str, str]]:
    """Each measured train job as a throughput_extra.csv row (jobs that failed are left out)."""
    env = report["env"]
    date = report["started"][:10]
    stack = f"transformers {env['transformers']} + PEFT {env['peft']}, torch {env['torch']}"
    rows = []
    for res in report.get("train", []):
        if res.get("error") or not res.get("tokens_per_s"):
            continue
        attention = "eager attention" if res["attention"] == "eager" else "SDPA attention"
        modules = (
            "fp32 modules under torch.autocast bf16" if res["load_dtype"] == "float32" else "bf16 modules"
        )
        rows.append(
            {
                "id": res["id"],
                "source": f"device-probe-{date}",
                "model": res["model"],
                "config": res["model"],
                "method": res["method"],
                "precision": res["precision"],
                "optimizer": "adamw",
                "seq_len": str(res["seq_len"]),
                "micro_batch": str(res["micro_batch"]),
                "grad_checkpointing": "yes" if res["grad_checkpointing"] else "no",
                "lora_rank": str(res["lora_rank"]) if res["method"] != "full" else "",
                "lora_targets": "all-linear" if res["method"] != "full" else "",
                "gpu": gpu,
                "gpus": "1",
                "gpus_per_node": "1",
                "intra_link": "",
                "inter_node_gbps": "",
                "sharding": "none",
                "offload": "no",
                "framework": f"{stack}; plain PyTorch loop, eager, no compile, {attention}, {modules}",
                "measured": f"{res['tokens_per_s']:.1f}",
                "unit": "tok/s",
                "tokens_per_unit": "",
                "tokens_per_s": f"{res['tokens_per_s']:.1f}",
                "score": "yes",
                "exclusion_reason": "",
                "source_url": "benchmarks/device_probe.py (measure), this repository",
                "quote": (
                    f"probe.json train[{res['id']}]: median of {res['steps']} steps "
                    f"{res['median_step_s']:.4f} s on {env.get('device_name', env['device'])}"
                ),
                "notes": (
                    f"measured by a gpucost session {date}; random weights from the published config; "
                    "non-reentrant gradient checkpointing, HF causal-LM loss, torch AdamW (foreach), "
                    "clip_grad_norm 1.0, LoRA on every linear but the head, dropout 0"
                ),
                # one GPU: no tensor parallelism
                "tensor_parallel": "",
            }
        )
    return rows


def _job_overrides(res: dict[str, Any], sdpa_default: str | None = None) -> dict[str, object]:
    """The knobs throughput_extra.csv has no column for, as the measured job ran them.
    `sdpa_default`: the backend the probe found SDPA's own choice to run (cuDNN is `native`)."""
    overrides: dict[str, object] = {}
    # an eager job is eager whatever SDPA picks; an SDPA job is what SDPA's default was found to run
    kernel = "eager" if res["attention"] == "eager" else BACKEND_KERNEL.get(sdpa_default or "", "flash")
    if kernel != "flash":  # flash is the Job default
        overrides["attention"] = kernel
    if res["load_dtype"] == "float32":
        overrides["mixed_precision"] = "autocast"
    elif res["method"] == "lora":
        # bf16 modules, PEFT's fp32 adapters and no autocast: the probe's plain loop
        overrides["mixed_precision"] = "none"
    return overrides


def _print_attention(attention: dict[str, Any] | None, spec: dict[str, str], rated: float) -> str | None:
    """The attention table: each backend's fwd + bwd rate against the rated peak, next to the share
    the model prices its kernel at on this generation. Returns the backend SDPA's default ran."""
    from finetune import Accelerator

    if not attention:
        return None
    gpu = Accelerator(tflops=rated, architecture=spec.get("architecture") or None)
    b, h, s, d = attention["shape"]
    print(f"\n| SDPA b={b} h={h} s={s} d={d} causal | fwd + bwd TFLOP/s | of rated | the model prices |")
    print("|---|---|---|---|")
    for name, result in attention["backends"].items():
        kernel = BACKEND_KERNEL.get(name)
        priced = f"{kernel} {gpu.attention_efficiency(kernel):.0%}" if kernel else "—"
        if "error" in result:
            print(f"| {name} | failed: {result['error'][:60]} | | {priced} |")
            continue
        print(f"| {name} | {result['tflops']:.0f} | {result['tflops'] / rated:.1%} | {priced} |")
    default = attention.get("default_is")
    kernel = BACKEND_KERNEL.get(default or "", "flash")
    print(f"\nSDPA's default ran {default}: its training jobs are priced as `--attention {kernel}`")
    return default


def chain_bytes(section: dict[str, Any]) -> dict[str, tuple[float | None, float]]:
    """Bytes the time model counts for each chain the probe timed: (forward, forward + backward).

    RMSNorm and rotary by their eager per-element counts, backward ELEMENTWISE_BACKWARD_RATIO ×
    forward, as `step_time` prices every elementwise byte; the loss by LOSS_BYTES_PER_LOGIT's
    standard count less the head's write of the logits, forward and backward together (the model
    counts no forward share of it apart)."""
    from finetune.time import (
        EAGER_RMS_NORM_BYTES,
        EAGER_ROTARY_BYTES,
        ELEMENTWISE_BACKWARD_RATIO,
        HEAD_LOGIT_WRITE_BYTES,
        LOSS_BYTES_PER_LOGIT,
    )

    tokens, hidden, vocab = section["tokens"], section["hidden"], section["vocab"]
    q_heads, kv_heads, head_dim = section["heads"]
    both = 1 + ELEMENTWISE_BACKWARD_RATIO
    norm = float(EAGER_RMS_NORM_BYTES * tokens * hidden)
    rotary = float(EAGER_ROTARY_BYTES * tokens * (q_heads + kv_heads) * head_dim)
    loss = (LOSS_BYTES_PER_LOGIT["standard"] - HEAD_LOGIT_WRITE_BYTES) * tokens * vocab
    return {"rms_norm": (norm, norm * both), "rotary": (rotary, rotary * both), "loss": (None, loss)}


def _print_chains(section: dict[str, Any] | None, bandwidth_gbps: float) -> None:
    """The eager chains' table: the model's bytes over the measured time, as a share of the
    datasheet bandwidth, against STREAM_EFFICIENCY, at which the model prices them."""
    from finetune.time import STREAM_EFFICIENCY

    if not section or not math.isfinite(bandwidth_gbps):
        return
    counted = chain_bytes(section)
    print(
        f"\n| HF eager chain, {section['tokens']} tokens | forward GB/s | of {bandwidth_gbps:g} "
        "| fwd + bwd GB/s | of it |"
    )
    print("|---|---|---|---|---|")
    for name, result in section["chains"].items():
        if "error" in result:
            print(f"| {name} | failed: {result['error'][:60]} | | | |")
            continue
        forward_bytes, total_bytes = counted[name]
        total = total_bytes / (result["forward_s"] + result["backward_s"]) / 1e9
        if forward_bytes is None:
            forward = "—", "—"
        else:
            rate = forward_bytes / result["forward_s"] / 1e9
            forward = f"{rate:.0f}", f"{rate / bandwidth_gbps:.1%}"
        print(f"| {name} | {forward[0]} | {forward[1]} | {total:.0f} | {total / bandwidth_gbps:.1%} |")
    print(f"\nthe model prices these bytes at STREAM_EFFICIENCY, {STREAM_EFFICIENCY:.0%} of the datasheet")


def compare(args: argparse.Namespace) -> int:
    from benchmarks.throughput_accuracy import load_gpus, predict, row_to_case
    from finetune import memory_per_gpu
    from finetune.time import STREAM_EFFICIENCY
    from warehouse.seed_models import load_models

    report = json.loads(Path(args.probe).read_text())
    env = report["env"]
    if env.get("tiny"):
        print(
            "this probe.json is a --tiny CPU smoke run: it measured the probe's code, not a card",
            file=sys.stderr,
        )
        return 2
    gpu = args.gpu or gpu_for_device(env.get("device_name", ""), env.get("memory_bytes"))
    gpus = load_gpus()
    if gpu is None or gpu not in gpus:
        print(
            f"device {env.get('device_name')!r} has no gpus.csv row this script knows: pass --gpu NAME",
            file=sys.stderr,
        )
        return 2
    spec = gpus[gpu]
    rated = float(spec["bf16_tflops"])
    print(f"# device probe {report['started']} on {env.get('device_name', env['device'])} → gpus.csv {gpu}\n")
    gemm = report.get("gemm")
    if gemm:
        print("| GEMM 8192³ bf16 | TFLOP/s | of rated | SM MHz | W |")
        print("|---|---|---|---|---|")
        for label, value, mhz, watts in (
            ("burst best (MAMF reading)", gemm["burst_best_tflops"], None, None),
            ("burst median", gemm["burst_median_tflops"], None, None),
            (
                f"sustained, last {gemm['tail_s']:.0f} s of {gemm['sustain_s']:.0f}",
                gemm["sustained_tflops"],
                gemm["sustained_sm_mhz"],
                gemm["sustained_power_w"],
            ),
        ):
            clock = f"{mhz:.0f}" if mhz else "—"
            power = f"{watts:.0f}" if watts else "—"
            print(f"| {label} | {value:.0f} | {value / rated:.1%} | {clock} | {power} |")
        ratio = gemm["sustained_tflops"] / gemm["burst_best_tflops"]
        print(f"\nsustained / burst best = {ratio:.3f} (rated {rated:g} TFLOP/s)")
        if spec.get("matmul_tflops"):
            # the seed's measured rate, which the model holds the part to where it is below the
            # rated share: does this device agree with it? Named by the table it came from (MAMF's
            # mean at its best shape, or the square-matrix table for parts MAMF never measured)
            seeded = float(spec["matmul_tflops"])
            median = gemm["burst_median_tflops"]
            table = (
                "MAMF"
                if "Maximum Achievable Matmul FLOPS" in spec["matmul_tflops_source"]
                else "square-matrix table"
            )
            print(f"burst median / gpus.csv matmul_tflops {seeded:g} ({table}) = {median / seeded:.3f}")
    copy = report.get("copy")
    bandwidth = float(spec.get("memory_bandwidth_gbps") or "nan")
    if copy and math.isfinite(bandwidth):
        print(
            f"copy: {copy['read_plus_write_gbps']:.0f} GB/s read+write = "
            f"{copy['read_plus_write_gbps'] / bandwidth:.1%} "
            f"of {bandwidth:g} GB/s (the model's STREAM_EFFICIENCY {STREAM_EFFICIENCY})"
        )
    sdpa_default = _print_attention(report.get("attention"), spec, rated)
    _print_chains(report.get("chains"), bandwidth)
    rows = probe_rows(report, gpu)
    by_id = {r["id"]: r for r in report.get("train", [])}
    models = load_models()
    print(
        "\n| id | job | measured tok/s | predicted tok/s | error % "
        "| alloc GB meas / pred | reserved GB meas / pred |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        res = by_id[row["id"]]
        case = row_to_case(row, models, gpus)
        if case.skip_reason or case.job is None or case.model is None:
            print(
                f"| {row['id']} | {case.setup} | {case.measured_tokens_per_s:,.0f} "
                f"| excluded: {case.skip_reason} | | | |"
            )
            continue
        case = replace(case, job=replace(case.job, **_job_overrides(res, sdpa_default)))  # type: ignore[arg-type]
        assert case.job is not None and case.model is not None
        predicted = predict(case)
        error = (predicted / case.measured_tokens_per_s - 1) * 100
        mem = memory_per_gpu(case.model, case.job, 1)
        alloc = f"{res.get('max_allocated_gb', float('nan')):.1f} / {mem.allocated_gb:.1f}"
        reserved = f"{res.get('max_reserved_gb', float('nan')):.1f} / {mem.reserved_gb:.1f}"
        label = f"{case.setup} {res['attention']} {res['load_dtype']}"
        print(
            f"| {row['id']} | {label} | {case.measured_tokens_per_s:,.0f} | {predicted:,.0f} "
            f"| {error:+.1f} | {alloc} | {reserved} |"
        )
    failed = [r for r in report.get("train", []) if r.get("error")]
    for res in failed:
        print(f"| {res['id']} | failed on the device | | | | | {res['error'][:80]} |")
    if args.emit_rows and rows:
        with Path(args.emit_rows).open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"\nwrote {len(rows)} rows in throughput_extra.csv's columns to {args.emit_rows}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    m = sub.add_parser("measure", help="on the device: write probe.json")
    m.add_argument("--out", default="probe-out", help="folder for probe.json (on the device: $OUT)")
    m.add_argument("--sustain-s", type=float, default=60.0, help="seconds of back-to-back GEMMs")
    m.add_argument("--steps", type=int, default=8, help="timed steps per training job")
    m.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    m.add_argument("--only", nargs="*", help="job ids to run (default: all)")
    m.add_argument("--tiny", action="store_true", help="CPU smoke run: tiny model, short loops")
    c = sub.add_parser("compare", help="here: score the model against probe.json")
    c.add_argument("probe", help="probe.json from `measure`")
    c.add_argument("--gpu", help="gpus.csv name, where the device name maps to none")
    c.add_argument("--emit-rows", help="write the train jobs as throughput_extra.csv rows to this file")
    args = parser.parse_args(argv)
    return measure(args) if args.verb == "measure" else compare(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
