"""Fine-tuning requirements: memory per GPU, time and cost of one job (pure, no I/O but `load_models`).

Units. Memory is in **GB = 1e9 bytes** (`_gb`), like `vram_gb` in the GPU seeds. DeepSpeed's
estimators print GiB (2**30); the tests convert. Time is in hours (`_hours`), money in USD (`_usd`),
bandwidth in **gigabits per second** (`_gbps`), compute in TFLOPS (1e12 FLOP/s).

Memory per GPU = model states + activations + logits + runtime overhead, where

* model states (weights, gradients, optimizer state) follow the ZeRO paper (Rajbhandari et al. 2020,
  arXiv:1910.02054) with DeepSpeed's byte accounting, so that `model_states_bytes` equals
  `estimate_zero2_model_states_mem_needs` / `estimate_zero3_model_states_mem_needs`
  (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py) exactly for bf16-mixed AdamW;
* activations count the tensors autograd saves in a Hugging Face Llama-style decoder layer, the
  same accounting as Korthikanti et al. 2022 (arXiv:2205.05198, Table 2) but for RMSNorm, SwiGLU,
  grouped-query attention and FlashAttention (`_layer_activation_bytes` lists every term);
* logits are b·s·V elements held as bf16 + fp32 copy + fp32 gradient (HF upcasts for the loss);
* overhead is the CUDA context and the caching allocator's fragmentation (constants below).

Time = hardware FLOPs / (GPUs × dense bf16 TFLOPS × utilization), bounded below by the data-parallel
communication a sharded job must move over the offer's links (roofline: the slower one sets the pace,
since ZeRO/FSDP prefetch overlaps the two). Cost = time rounded up to the billing granularity × price.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

Method = Literal["full", "lora", "qlora"]
Precision = Literal["bf16-mixed", "bf16-pure"]
Optimizer = Literal["adamw", "adamw8bit", "paged-adamw8bit"]
Sharding = Literal["none", "zero2", "zero3"]
Attention = Literal["flash", "eager"]
LoraTargets = Literal["attention", "all-linear"]
Granularity = Literal["second", "minute", "hour"]

GB = 1e9
SEEDS_DIR = Path(__file__).resolve().parent / "seeds"

# --- Constants. Each is a physical quantity with its source, none is fitted to a measured row. ---

# NF4 with double quantization: 4 bits + 8-bit absmax per 64 + fp32 per 256 absmax = 4.127 bits
# (Dettmers et al. 2023, QLoRA, arXiv:2305.14314, section 2).
NF4_DQ_BYTES_PER_PARAM = (4 + 8 / 64 + 32 / (64 * 256)) / 8
# HF causal-LM heads: bf16 logits, an fp32 copy for the loss, and its fp32 gradient = 10 B/element.
LOGITS_BYTES_PER_ELEMENT = 12.0
# Chunked / fused cross-entropy (torchtune CEWithChunkedOutputLoss, Liger, Cut-Cross-Entropy) keeps
# at most the bf16 logits: torchtune measures −8.1 GiB on Llama-3.2-3B at b·s·V = 1.05e9, i.e. it
# removes ≈ 8 of the 10 bytes.
CHUNKED_LOGITS_BYTES_PER_ELEMENT = 2.0
# CUDA context + cuBLAS/cuDNN workspaces: gpu_poor assumes 650 MB, its README 0.5–1 GB. We keep the
# low end because most published peaks are torch.cuda.max_memory_* numbers, which exclude it.
CUDA_CONTEXT_GB = 0.5
# Caching-allocator fragmentation on the tensors that come and go each step (activations, logits):
# reserved/allocated = 10.22/9.16 GiB in Answer.AI's 7B LoRA run; PyTorch docs cite 5–15%.
ALLOCATOR_FRAGMENTATION = 0.10
# bytes per trainable LoRA parameter: fp32 adapter (4) + fp32 grad (4) under mixed precision;
# 2 + 2 when the whole model is bf16 (litgpt bf16-true). Optimizer bytes come from OPTIMIZER_STATE.
OPTIMIZER_STATE_BYTES: dict[str, float] = {"adamw": 8.0, "adamw8bit": 2.0, "paged-adamw8bit": 2.0}

# Utilization of dense bf16 peak on *hardware* FLOPs (recompute included). Full fine-tuning: 0.40,
# the middle of llm-foundry's H100 bf16 HFU (41–57%) discounted for unpacked fine-tuning data
# (A100 HFU 56–74%, H100 40–57%). LoRA: 0.30, the reference's "25–40% MFU on 4N" for HF/PEFT.
UTILIZATION: dict[str, float] = {"full": 0.40, "lora": 0.30, "qlora": 0.30}
# NF4 dequantization on every matmul: litgpt Llama-2-7B 3.83 vs 2.36 min/1k iters (1.62×), the
# reference's range 1.3–1.6×; we take 1.4.
QLORA_SLOWDOWN = 1.4
# NCCL ring collectives reach ~75% of link bandwidth (nccl-tests busbw on NVLink/IB).
COMM_EFFICIENCY = 0.75
# Below this per-node network bandwidth a multi-node sharded job is flagged, not silently priced:
# 400 Gb/s is the smallest fabric sold for multi-node training (AWS p4d 4×100 Gb/s EFA).
FAST_FABRIC_GBPS = 400.0


@dataclass(frozen=True)
class ModelSpec:
    """Architecture facts of a decoder (or encoder-decoder) transformer, from its config.json."""

    model_id: str
    params: int
    active_params: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    max_context: int
    num_experts: int | None = None
    experts_per_token: int | None = None
    head_dim: int | None = None
    gated_mlp: bool = True

    @property
    def head_dim_(self) -> int:
        return self.head_dim or self.hidden_size // self.attention_heads

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts and self.num_experts > 1)


@dataclass(frozen=True)
class Job:
    """One fine-tuning configuration; defaults are the common HF/PEFT choices."""

    method: Method = "lora"
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    seq_len: int = 2048
    micro_batch: int = 1
    grad_checkpointing: bool = True
    attention: Attention = "flash"
    lora_rank: int = 16
    lora_targets: LoraTargets = "all-linear"
    chunked_ce: bool = False
    sharding: Sharding = "none"
    offload: bool = False

    def __post_init__(self) -> None:
        if self.seq_len < 1 or self.micro_batch < 1 or self.lora_rank < 1:
            raise ValueError(f"seq_len, micro_batch and lora_rank must be ≥ 1: {self}")
        if self.offload and self.sharding == "none":
            raise ValueError("offload needs sharding='zero2' or 'zero3' (DeepSpeed/FSDP CPU offload)")


@dataclass(frozen=True)
class MemoryBreakdown:
    """Peak memory per GPU in GB (1e9 bytes)."""

    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    activations_gb: float
    logits_gb: float
    overhead_gb: float
    total_gb: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class TimeEstimate:
    hours: float
    compute_hours: float
    comm_hours: float
    utilization: float
    nodes: int
    multi_node: bool
    needs_fast_fabric_warning: bool
    warning: str | None = None


# --- Parameter counts ---------------------------------------------------------------------------


def _attention_params_per_layer(m: ModelSpec) -> int:
    q_out = m.attention_heads * m.head_dim_
    kv_out = m.kv_heads * m.head_dim_
    return m.hidden_size * q_out + 2 * m.hidden_size * kv_out + q_out * m.hidden_size


def _mlp_params_per_expert(m: ModelSpec) -> int:
    return (3 if m.gated_mlp else 2) * m.hidden_size * m.intermediate_size


def _mlp_params_per_layer(m: ModelSpec, active: bool = False) -> int:
    experts = (m.experts_per_token if active else m.num_experts) if m.is_moe else 1
    router = m.hidden_size * m.num_experts if m.is_moe and m.num_experts else 0
    return int(experts or 1) * _mlp_params_per_expert(m) + router


def embedding_params(m: ModelSpec) -> int:
    """Input embedding plus an untied output head (V·h each)."""
    return m.vocab_size * m.hidden_size * (1 if m.tied_embeddings else 2)


def linear_params(m: ModelSpec) -> int:
    """Parameters in the decoder's nn.Linear layers: what QLoRA quantizes."""
    return m.layers * (_attention_params_per_layer(m) + _mlp_params_per_layer(m))


def count_params(m: ModelSpec, active: bool = False) -> int:
    """Parameters implied by the architecture: embeddings + L·(attention + MLP + 2 norms) + norm.

    Biases are ignored (Qwen2's q/k/v biases are < 0.01% of the model).
    """
    per_layer = _attention_params_per_layer(m) + _mlp_params_per_layer(m, active) + 2 * m.hidden_size
    return embedding_params(m) + m.layers * per_layer + m.hidden_size


def largest_layer_params(m: ModelSpec) -> int:
    """The largest unit gathered whole under ZeRO-3/FSDP: one decoder layer or the embedding.

    FSDP wraps one decoder layer per unit (transformer_layer_cls_to_wrap in HF, torchtune, axolotl);
    DeepSpeed's estimator calls this `largest_layer_params`.
    """
    layer = _attention_params_per_layer(m) + _mlp_params_per_layer(m) + 2 * m.hidden_size
    return max(layer, m.vocab_size * m.hidden_size)


def _lora_params_per_layer(m: ModelSpec, rank: int, targets: LoraTargets) -> int:
    h, q_out, kv_out = m.hidden_size, m.attention_heads * m.head_dim_, m.kv_heads * m.head_dim_
    # LoRA on W (d_in→d_out) adds A (r×d_in) and B (d_out×r): r·(d_in + d_out) (Hu et al. 2021).
    attn = rank * ((h + q_out) + 2 * (h + kv_out) + (q_out + h))
    if targets == "attention":
        return attn
    n_mats = 3 if m.gated_mlp else 2
    experts = m.num_experts if m.is_moe and m.num_experts else 1
    return attn + experts * n_mats * rank * (h + m.intermediate_size)


def trainable_params(model: ModelSpec, job: Job) -> int:
    """All parameters for full fine-tuning; the LoRA A/B matrices for LoRA and QLoRA."""
    if job.method == "full":
        return model.params
    return model.layers * _lora_params_per_layer(model, job.lora_rank, job.lora_targets)


# --- Model states (weights, gradients, optimizer) ------------------------------------------------


@dataclass(frozen=True)
class StateBytes:
    weights: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def bytes_per_param(precision: Precision, optimizer: Optimizer) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per trained parameter, unsharded.

    bf16-mixed (DeepSpeed's accounting, stage_1_and_2.py: "2 = params_16bit, 18 = 2_grads_16bit +
    4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit"): 2 | 4 | 4 master + m,v.
    With AdamW that is 2 + 4 + 12 = 18 B/param, LLaMA-Factory's `18x`; the bf16 gradient is a
    transient bucket except in ZeRO-2, where DeepSpeed keeps a 2 B/param partition of it.
    bf16-pure (LLaMA-Factory pure_bf16, torchtune, litgpt bf16-true): 2 | 2 | m,v in bf16 = 8 B/param
    with AdamW (LLaMA-Factory `8x`). 8-bit AdamW (bitsandbytes) keeps m,v in 1 byte each; paged
    variants have the same steady state and only spill to CPU under pressure (QLoRA paper).
    """
    states = OPTIMIZER_STATE_BYTES[optimizer]
    if precision == "bf16-mixed":
        return 2.0, 4.0, 4.0 + states
    return 2.0, 2.0, states / 2 if optimizer == "adamw" else states


def model_states_bytes(
    params: float,
    largest_layer: float,
    precision: Precision,
    optimizer: Optimizer,
    sharding: Sharding,
    n_gpus: int,
    offload: bool,
) -> StateBytes:
    """Per-GPU weight/gradient/optimizer bytes for fully trained parameters under ZeRO stages.

    ZeRO-2 (estimate_zero2_model_states_mem_needs): 2Ψ + 18Ψ/N, or 2Ψ with CPU offload.
    ZeRO-3 (estimate_zero3_model_states_mem_needs): 4·largest_layer + 18Ψ/N; params+optimizer
    offload leaves 4·largest_layer (the gathered bf16 layer and its bf16 gradient).
    No sharding (DDP) replicates everything: 18Ψ for bf16-mixed AdamW.
    """
    w, g, o = bytes_per_param(precision, optimizer)
    n = max(1, n_gpus)
    if sharding == "none":
        return StateBytes(w * params, g * params, o * params)
    if sharding == "zero2":
        if offload:
            return StateBytes(w * params, 0.0, 0.0)
        # the 16-bit gradient partition DeepSpeed keeps next to the fp32 one (the "2_grads_16bit")
        g_zero2 = g + (2.0 if precision == "bf16-mixed" else 0.0)
        return StateBytes(w * params, g_zero2 * params / n, o * params / n)
    gathered = 2.0 * largest_layer
    if offload:
        return StateBytes(gathered, gathered, 0.0)
    return StateBytes(gathered + w * params / n, gathered + g * params / n, o * params / n)


def _frozen_weight_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes of the frozen base model under LoRA (bf16) or QLoRA (NF4-DQ linears, rest bf16)."""
    if job.method == "lora":
        return 2.0 * model.params
    quantized = linear_params(model)
    # bitsandbytes dequantizes one linear at a time to bf16 for the matmul
    dequant_buffer = 2.0 * model.hidden_size * model.intermediate_size
    return NF4_DQ_BYTES_PER_PARAM * quantized + 2.0 * (model.params - quantized) + dequant_buffer


def _largest_unit_frozen_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes of the largest FSDP unit of a frozen base in its storage dtype.

    The embedding stays bf16 under QLoRA while a decoder layer's linears are NF4, so the unit's own
    dtype counts, not the model's average bytes per parameter (which falls as layers are added).
    """
    linears = _attention_params_per_layer(model) + _mlp_params_per_layer(model)
    per_linear = NF4_DQ_BYTES_PER_PARAM if job.method == "qlora" else 2.0
    layer_bytes = per_linear * linears + 2.0 * 2 * model.hidden_size
    embedding_bytes = 2.0 * model.vocab_size * model.hidden_size
    return max(layer_bytes, embedding_bytes)


def _states(model: ModelSpec, job: Job, n_gpus: int) -> StateBytes:
    if job.method == "full":
        return model_states_bytes(
            model.params,
            largest_layer_params(model),
            job.precision,
            job.optimizer,
            job.sharding,
            n_gpus,
            job.offload,
        )
    n = max(1, n_gpus)
    frozen = _frozen_weight_bytes(model, job)
    if job.sharding == "zero3":
        # frozen base is sharded; one gathered layer in its storage dtype is live at a time
        # FSDP prefetches the next unit while the current one computes: two units are live
        gathered = 2 * _largest_unit_frozen_bytes(model, job)
        frozen = gathered + (0.0 if job.offload else frozen / n)
    # adapters: fp32 under mixed precision (they are their own master copy), bf16 under pure bf16
    t = trainable_params(model, job)
    adapter_w = 4.0 if job.precision == "bf16-mixed" else 2.0
    w_b, g_b, o_b = adapter_w, adapter_w, OPTIMIZER_STATE_BYTES[job.optimizer]
    if job.precision == "bf16-pure" and job.optimizer == "adamw":
        o_b = o_b / 2
    shard = n if job.sharding != "none" else 1
    opt = 0.0 if job.offload else o_b * t / shard
    grads = 0.0 if job.offload else g_b * t / shard
    return StateBytes(frozen + w_b * t, grads, opt)


# --- Activations -------------------------------------------------------------------------------


def _layer_activation_bytes_per_token(model: ModelSpec, job: Job, seq_len: int) -> float:
    """Bytes autograd saves per token in one decoder layer (HF Llama-style, bf16, no dropout).

    A frozen nn.Linear does not save its input (autograd keeps the input only to form the weight
    gradient), so LoRA/QLoRA save less than full fine-tuning; a LoRA-adapted linear saves it again
    (lora_A needs it). Terms, in bytes per token:
    * RMSNorm ×2: HF upcasts to fp32 and keeps it (4h), plus the bf16 normed input if the norm
      weight trains (2h);
    * q/k/v input (2h), gate/up input (2h), down input (2I): when that linear trains, is adapted,
      or is a bitsandbytes 4-bit linear (QLoRA);
    * FlashAttention: q and out (2·a·d each), k and v (2·kv·d each), log-sum-exp (negligible);
      eager attention instead keeps q, k, v repeated to all heads and the fp32 + bf16 softmax
      (6·a·s, Korthikanti's 5·a·s²·b per sequence with an fp32 softmax);
    * SwiGLU: gate output, SiLU output and up output (6I); GELU MLP: fc1 output (2I);
    * MoE: the above for each of the k routed experts plus the dispatched token copy (2h·k).
    """
    h, inter = model.hidden_size, model.intermediate_size
    q_out, kv_out = model.attention_heads * model.head_dim_, model.kv_heads * model.head_dim_
    full = job.method == "full"
    # bitsandbytes' MatMul4Bit saves its input whenever that input needs a gradient
    # (`ctx.tensors = (A, B)`), so QLoRA keeps every linear input like full fine-tuning does
    saves_inputs = full or job.method == "qlora"
    adapted_mlp = saves_inputs or job.lora_targets == "all-linear"
    norms = 2 * (4 * h + (2 * h if full else 0))
    qkv_in = 2 * h
    if job.attention == "flash":
        attn = 2 * q_out + 4 * kv_out + 2 * q_out
    else:
        attn = 6 * q_out + 6 * model.attention_heads * seq_len + 2 * q_out
    mlp_inner = 6 * inter if model.gated_mlp else 2 * inter
    mlp_in = (2 * h + 2 * inter) if adapted_mlp else 0
    mlp = mlp_inner + mlp_in
    if model.is_moe and model.experts_per_token:
        mlp = model.experts_per_token * (mlp + 2 * h)
    return float(norms + qkv_in + attn + mlp)


def activation_bytes(model: ModelSpec, job: Job) -> float:
    """Activation bytes per GPU for one micro-batch at its peak (end of the forward pass).

    Without checkpointing every layer's saved tensors are alive. With (HF) gradient checkpointing
    each layer keeps only its bf16 input (2·s·b·h, Korthikanti's "full recompute"), plus one layer's
    recomputed activations during its backward. The final norm and head input add 8h per token.
    """
    tokens = job.seq_len * job.micro_batch
    per_layer = _layer_activation_bytes_per_token(model, job, job.seq_len) * tokens
    head = 8.0 * model.hidden_size * tokens
    if job.grad_checkpointing:
        return 2.0 * model.hidden_size * tokens * model.layers + per_layer + head
    return per_layer * model.layers + head


def logits_bytes(model: ModelSpec, job: Job) -> float:
    """b·s·V logits: 10 B/element with the HF loss, 2 with chunked or fused cross-entropy."""
    per = CHUNKED_LOGITS_BYTES_PER_ELEMENT if job.chunked_ce else LOGITS_BYTES_PER_ELEMENT
    return per * job.seq_len * job.micro_batch * model.vocab_size


def memory_per_gpu(model: ModelSpec, job: Job, n_gpus: int = 1) -> MemoryBreakdown:
    """Peak memory per GPU in GB for `job` data-parallel over `n_gpus` (sharded per job.sharding)."""
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be ≥ 1, got {n_gpus}")
    states = _states(model, job, n_gpus)
    acts = activation_bytes(model, job)
    logits = logits_bytes(model, job)
    overhead = CUDA_CONTEXT_GB * GB + ALLOCATOR_FRAGMENTATION * (acts + logits)
    parts = [states.weights, states.gradients, states.optimizer, acts, logits, overhead]
    w, g, o, a, lg, ov = (p / GB for p in parts)
    return MemoryBreakdown(w, g, o, a, lg, ov, sum(parts) / GB)


# --- Time --------------------------------------------------------------------------------------


def _compute_params(model: ModelSpec) -> int:
    """Parameters that do matmul work per token: active params minus the embedding lookup."""
    lookup = 0 if model.tied_embeddings else model.vocab_size * model.hidden_size
    return model.active_params - lookup


def flops_per_token(model: ModelSpec, job: Job) -> float:
    """Hardware FLOPs per trained token.

    Full: 6N + 12·L·d·s (Kaplan et al. 2020; attention term from llm-foundry's
    `attn_flops_per_seq = L·2·2·d·s²`, ×3 for fwd+bwd). LoRA/QLoRA: the frozen weights need no
    weight gradient, so 4N + 8·L·d·s, plus 6 per adapter parameter (NeMo's LoRA TFLOP/s match 4N).
    Gradient checkpointing recomputes the forward: + 2N + 4·L·d·s.
    """
    n = _compute_params(model)
    attn_fwd = 4.0 * model.layers * model.attention_heads * model.head_dim_ * job.seq_len
    fwd = 2.0 * n + attn_fwd
    if job.method == "full":
        total = 3.0 * fwd
    else:
        # the attention core has no weights: its backward is 2× forward for LoRA too
        total = 4.0 * n + 3.0 * attn_fwd + 6.0 * trainable_params(model, job)
    return total + (fwd if job.grad_checkpointing else 0.0)


def _collective_bytes_per_step(model: ModelSpec, job: Job) -> float:
    """Bytes each GPU sends per micro-step for data parallelism (ring, ×(N−1)/N applied later).

    DDP all-reduces bf16 gradients (2× their bytes); ZeRO-2 reduce-scatters them and all-gathers
    the updated weights (2×); ZeRO-3 all-gathers weights for forward and backward and
    reduce-scatters gradients (3× parameter bytes, ZeRO paper §7). Frozen LoRA weights are only
    gathered (ZeRO-3) and have no gradients.
    """
    t = 2.0 * trainable_params(model, job)
    if job.method == "full":
        return (3.0 if job.sharding == "zero3" else 2.0) * t
    base = _frozen_weight_bytes(model, job) if job.sharding == "zero3" else 0.0
    return 2.0 * base + 2.0 * t


def estimate_time(
    model: ModelSpec,
    job: Job,
    tokens: float,
    n_gpus: int,
    gpus_per_node: int,
    bf16_tflops: float,
    intra_node_gbps: float | None,
    inter_node_gbps: float | None,
) -> TimeEstimate:
    """Wall-clock hours to train `tokens` tokens (dataset tokens × epochs).

    compute = tokens · flops_per_token / (n_gpus · bf16_tflops·1e12 · utilization); QLoRA is
    QLORA_SLOWDOWN slower. comm = steps · bytes·(N−1)/N / (bandwidth · COMM_EFFICIENCY), where the
    bandwidth is `intra_node_gbps` (per GPU, Gb/s: NVLink or PCIe) inside a node and
    `inter_node_gbps` (per node, Gb/s, shared by its GPUs) across nodes. hours = max(compute, comm).
    """
    if n_gpus < 1 or gpus_per_node < 1 or bf16_tflops <= 0:
        raise ValueError("n_gpus, gpus_per_node and bf16_tflops must be positive")
    util = UTILIZATION[job.method]
    slowdown = QLORA_SLOWDOWN if job.method == "qlora" else 1.0
    compute_s = tokens * flops_per_token(model, job) * slowdown / (n_gpus * bf16_tflops * 1e12 * util)
    nodes = math.ceil(n_gpus / gpus_per_node)
    multi_node = nodes > 1
    warning: str | None = None
    comm_s = 0.0
    if n_gpus > 1:
        steps = tokens / (job.seq_len * job.micro_batch * n_gpus)
        volume = _collective_bytes_per_step(model, job) * (n_gpus - 1) / n_gpus
        if multi_node:
            link_gbps = inter_node_gbps / gpus_per_node if inter_node_gbps else None
        else:
            link_gbps = intra_node_gbps
        if link_gbps is None or link_gbps <= 0:
            comm_s = math.inf
            warning = "no interconnect bandwidth known for a " + (
                "multi-node job" if multi_node else "multi-GPU job"
            )
        else:
            comm_s = steps * volume * 8 / (link_gbps * 1e9 * COMM_EFFICIENCY)
    slow_fabric = multi_node and (inter_node_gbps or 0.0) < FAST_FABRIC_GBPS
    if slow_fabric and warning is None:
        warning = f"multi-node over {inter_node_gbps} Gb/s (< {FAST_FABRIC_GBPS:.0f}): no fast fabric"
    hours = max(compute_s, comm_s) / 3600
    return TimeEstimate(
        hours=hours,
        compute_hours=compute_s / 3600,
        comm_hours=comm_s / 3600,
        utilization=util / slowdown,
        nodes=nodes,
        multi_node=multi_node,
        needs_fast_fabric_warning=slow_fabric,
        warning=warning,
    )


# --- Cost --------------------------------------------------------------------------------------

_UNITS_PER_HOUR: dict[str, int] = {"second": 3600, "minute": 60, "hour": 1}


def billed_hours(hours: float, granularity: Granularity, minimum_hours: float = 0.0) -> float:
    """`hours` rounded up to whole billing units, and at least `minimum_hours`; never below `hours`."""
    if hours < 0 or math.isnan(hours):
        raise ValueError(f"hours must be ≥ 0, got {hours}")
    if math.isinf(hours):
        return hours
    units = _UNITS_PER_HOUR[granularity]
    q = hours * units
    # tolerate float noise (0.1 h · 3600 = 360.00000000000006) without ever billing under `hours`
    n = math.ceil(q - 1e-9 * max(1.0, q))
    billed = n / units
    if billed < hours:
        billed = (n + 1) / units
    return max(billed, minimum_hours)


def run_cost(
    hours: float,
    price_per_hour: float,
    granularity: Granularity = "second",
    nodes: int = 1,
    minimum_hours: float = 0.0,
) -> float:
    """On-demand USD: billed hours × price per instance-hour × instances (nodes)."""
    return billed_hours(hours, granularity, minimum_hours) * price_per_hour * nodes


def expected_spot_hours(
    hours: float,
    interruptions_per_hour: float,
    checkpoint_interval_hours: float,
    restart_overhead_hours: float,
) -> float:
    """Expected wall-clock hours on spot for `hours` of useful work.

    Interruptions arrive as a Poisson process (rate λ per wall-clock hour). Each one loses on
    average half a checkpoint interval of work (uniform arrival within the interval) plus the restart
    overhead R (new instance, reload, resume). Wall time W then solves W = H + λ·W·(c/2 + R), so
    W = H / (1 − λ·(c/2 + R)); when λ·(c/2 + R) ≥ 1 the job never finishes (inf).
    """
    loss_per_interruption = checkpoint_interval_hours / 2 + restart_overhead_hours
    waste = interruptions_per_hour * loss_per_interruption
    if waste >= 1:
        return math.inf
    return hours / (1 - waste)


def expected_spot_cost(
    hours: float,
    price_per_hour: float,
    interruptions_per_hour: float,
    checkpoint_interval_hours: float,
    restart_overhead_hours: float,
    granularity: Granularity = "second",
    nodes: int = 1,
) -> float:
    """Expected spot USD: expected_spot_hours rounded to the billing unit × price × nodes."""
    wall = expected_spot_hours(
        hours, interruptions_per_hour, checkpoint_interval_hours, restart_overhead_hours
    )
    return run_cost(wall, price_per_hour, granularity, nodes)


def cost_per_million_tokens(cost_usd: float, tokens: float) -> float:
    return cost_usd / tokens * 1e6


# --- Model specs from seeds and HF configs ------------------------------------------------------


def _bool(value: str) -> bool:
    return value.strip().lower() in ("true", "1", "yes")


def _opt_int(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


def load_models(path: Path | None = None) -> dict[str, ModelSpec]:
    """ModelSpecs from llm_models.csv (default: warehouse/seeds/llm_models.csv), keyed by model_id."""
    path = path or SEEDS_DIR / "llm_models.csv"
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    models: dict[str, ModelSpec] = {}
    for row in rows:
        spec = ModelSpec(
            model_id=row["model_id"],
            params=int(row["params"]),
            active_params=int(row["active_params"]),
            layers=int(row["layers"]),
            hidden_size=int(row["hidden_size"]),
            attention_heads=int(row["attention_heads"]),
            kv_heads=int(row["kv_heads"]),
            intermediate_size=int(row["intermediate_size"]),
            vocab_size=int(row["vocab_size"]),
            tied_embeddings=_bool(row["tied_embeddings"]),
            max_context=int(row["max_context"]),
            num_experts=_opt_int(row.get("num_experts")),
            experts_per_token=_opt_int(row.get("experts_per_token")),
            head_dim=_opt_int(row.get("head_dim")),
            gated_mlp=_bool(row.get("gated_mlp") or "true"),
        )
        models[spec.model_id] = spec
    return models


def _first(config: Mapping[str, object], *keys: str, default: object = None) -> object:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def model_from_hf_config(config: Mapping[str, object], model_id: str) -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json dict.

    Understands Llama/Mistral/Qwen2/Qwen3/Gemma/Phi keys (hidden_size, num_hidden_layers,
    num_attention_heads, num_key_value_heads, intermediate_size, head_dim), Mixtral/Qwen-MoE experts
    (num_local_experts | num_experts, num_experts_per_tok, moe_intermediate_size), Gemma 3's nested
    text_config, Qwen 1 (intermediate_size counts both SwiGLU branches, seq_length), Falcon
    (n_layer, n_head, multi_query, num_kv_heads, ffn_hidden_size), GPT-NeoX and T5 (d_model, d_ff,
    d_kv, num_heads, num_layers + num_decoder_layers; decoder layers count double for their
    cross-attention). Parameters are computed from the architecture unless the config states them.
    """
    text = config.get("text_config")
    if isinstance(text, Mapping):
        config = {**config, **text}
    model_type = str(config.get("model_type", "")).lower()
    is_t5 = model_type in ("t5", "mt5", "umt5") or "d_model" in config

    def num(*keys: str, default: object = None) -> int:
        value = _first(config, *keys, default=default)
        if value is None:
            raise ValueError(f"{model_id}: config.json has none of {keys}; cannot size the model")
        return int(value)  # type: ignore[call-overload]

    hidden = num("hidden_size", "d_model", "n_embd")
    heads = num("num_attention_heads", "n_head", "num_heads")
    head_dim_cfg = _first(config, "head_dim", "d_kv")
    dec = 0
    if is_t5:
        enc = num("num_layers")
        dec = num("num_decoder_layers", default=enc)
        layers = enc + dec
        inter = num("d_ff")
        gated = str(config.get("feed_forward_proj", "relu")).startswith("gated")
        kv_heads = heads
        tied = bool(config.get("tie_word_embeddings", True))
    else:
        layers = num("num_hidden_layers", "n_layer", "num_layers")
        if (
            model_type == "falcon"
            and config.get("multi_query")
            and not config.get("new_decoder_architecture")
        ):
            kv_heads = 1
        else:
            kv_heads = num("num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads)
        inter = num(
            "moe_intermediate_size",
            "intermediate_size",
            "ffn_hidden_size",
            "n_inner",
            default=4 * hidden,
        )
        if model_type == "qwen":  # Qwen 1: intermediate_size covers w1 and w2 together
            inter //= 2
        gated = model_type not in ("falcon", "gpt_neox", "gpt2", "bloom", "gpt_bigcode", "opt")
        # transformers' PretrainedConfig defaults tie_word_embeddings to True
        tied = bool(config.get("tie_word_embeddings", True))
    experts = _first(config, "num_local_experts", "num_experts", "n_routed_experts")
    per_token = _first(config, "num_experts_per_tok", "experts_per_token", "top_k")
    spec = ModelSpec(
        model_id=model_id,
        params=0,
        active_params=0,
        layers=layers,
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=kv_heads,
        intermediate_size=inter,
        vocab_size=num("vocab_size", "padded_vocab_size"),
        tied_embeddings=tied,
        max_context=num(
            "max_position_embeddings",
            "seq_length",
            "n_positions",
            "max_sequence_length",
            default=2048 if not is_t5 else 512,
        ),
        num_experts=int(experts) if experts else None,  # type: ignore[call-overload]
        experts_per_token=int(per_token) if experts and per_token else None,  # type: ignore[call-overload]
        head_dim=int(head_dim_cfg) if head_dim_cfg else None,  # type: ignore[call-overload]
        gated_mlp=gated,
    )
    stated = _first(config, "num_parameters", "n_params")
    if stated:
        params = int(stated)  # type: ignore[call-overload]
    elif is_t5:
        # encoder-decoder: each decoder layer adds cross-attention and a third norm
        attn = _attention_params_per_layer(spec)
        params = count_params(spec) + dec * (attn + hidden)
    else:
        params = count_params(spec)
    active = count_params(spec, active=True) if spec.is_moe else params
    return ModelSpec(**{**asdict(spec), "params": params, "active_params": active})


@dataclass(frozen=True)
class FinetuneJob:
    """One row of finetune_jobs.csv: a model, the job knobs and the data it trains on."""

    job_id: str
    model_id: str
    job: Job
    dataset_tokens: int
    epochs: float

    @property
    def train_tokens(self) -> float:
        return self.dataset_tokens * self.epochs


def load_finetune_jobs(path: Path | None = None) -> list[FinetuneJob]:
    """The default job grid (warehouse/seeds/finetune_jobs.csv)."""
    path = path or SEEDS_DIR / "finetune_jobs.csv"
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [
        FinetuneJob(
            job_id=row["job_id"],
            model_id=row["model_id"],
            job=Job(
                method=row["method"],  # type: ignore[arg-type]
                precision=row["precision"],  # type: ignore[arg-type]
                optimizer=row["optimizer"],  # type: ignore[arg-type]
                seq_len=int(row["seq_len"]),
                micro_batch=int(row["micro_batch"]),
                grad_checkpointing=_bool(row["grad_checkpointing"]),
                attention=row["attention"],  # type: ignore[arg-type]
                lora_rank=int(row["lora_rank"]),
                lora_targets=row["lora_targets"],  # type: ignore[arg-type]
                chunked_ce=_bool(row["chunked_ce"]),
                sharding=row["sharding"],  # type: ignore[arg-type]
                offload=_bool(row["offload"]),
            ),
            dataset_tokens=int(row["dataset_tokens"]),
            epochs=float(row["epochs"]),
        )
        for row in rows
    ]
