"""Peak memory per GPU of one fine-tuning job (pure).

Units: bytes inside, **GB = 1e9 bytes** (`_gb`) in `MemoryBreakdown`, like `vram_gb` in the GPU
seeds. DeepSpeed's estimators print GiB (2**30); the tests convert.

Peak = the largest of three phases, and `MemoryBreakdown.peak_phase` says which:

* load: the frozen or trained weights in their storage dtype, plus one layer in bf16 (bitsandbytes
  quantizes on load one linear at a time; FSDP materializes one unit before sharding it);
* step (forward + backward): model states (weights, gradients, optimizer state) + activations +
  logits + the allocator's fragmentation on those transients;
* optimizer step: model states + the temporaries of torch's foreach AdamW (one state-sized
  tensor list for sqrt(v)); activations and logits are freed by then.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, arXiv:1910.02054) with DeepSpeed's
byte accounting, so that `model_states_bytes` equals `estimate_zero2_model_states_mem_needs` /
`estimate_zero3_model_states_mem_needs` (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py)
exactly for bf16-mixed AdamW. Activations count the tensors autograd saves in a Hugging Face
Llama-style decoder layer (Korthikanti et al. 2022, arXiv:2205.05198, Table 2, redone for RMSNorm,
SwiGLU or plain MLPs, GQA and FlashAttention; `_layer_activation_bytes_per_token` lists the terms).

Totals: `allocated_gb` is what torch.cuda.max_memory_allocated reports (tensors), `reserved_gb`
adds the caching allocator's fragmentation (max_memory_reserved), and `device_gb` = `total_gb`
adds the CUDA context (what nvidia-smi shows). Fit decisions use `total_gb`, the device total.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from finetune.architecture import (
    ModelSpec,
    _attention_params_per_layer,
    _mlp_params_per_layer,
    largest_layer_params,
    layer_params,
    linear_params,
)
from finetune.job import (
    Job,
    MixedPrecision,
    Optimizer,
    OutsideModelError,
    Precision,
    Sharding,
    require_data_parallel,
)
from finetune.tensor_parallel import rank_model, require_tensor_parallel, tensor_parallel_refusal

GB = 1e9

# --- Constants. Each is a physical quantity with its source, none is fitted to a measured row. ---

# Bytes per quantized weight. NF4: 4 bits + one fp32 absmax per 64 weights = 4.5 bits; with double
# quantization the absmax is 8-bit with one fp32 constant per 256 of them = 4.127 bits (Dettmers
# et al. 2023, QLoRA, arXiv:2305.14314, section 2). GPTQ int4 (AutoGPTQ, group size 128): 4 bits +
# an fp16 scale and a packed 4-bit zero per group of 128 = 4.156 bits.
QUANT_BYTES_PER_PARAM: dict[str, float] = {
    "nf4": (4 + 32 / 64) / 8,
    "nf4-dq": (4 + 8 / 64 + 32 / (64 * 256)) / 8,
    "gptq": (4 + 16 / 128 + 4 / 128) / 8,
}
NF4_DQ_BYTES_PER_PARAM = QUANT_BYTES_PER_PARAM["nf4-dq"]
# The packed 4-bit codes alone (two per byte). Under FSDP / ZeRO-3 only these are the parameter's
# data, flattened and sharded (bitsandbytes' `bnb_4bit_quant_storage`: four codes per bf16
# element); the rest of QUANT_BYTES_PER_PARAM is the statistics (absmax, nested absmax, GPTQ
# scales and zeros), held in `Params4bit.quant_state` or as buffers, which FSDP neither shards nor
# offloads: "FSDP only syncs parameters and buffers, so the quant_state isn't copied", and every
# rank quantizes to build its own whole quant_state (AnswerDotAI/fsdp_qlora train.py,
# load_and_quantize); FSDP keeps buffers whole on every rank.
QUANT_CODE_BYTES_PER_PARAM = 4 / 8
# Bytes per logit element, by loss (b·s·V elements):
# * standard (HF causal-LM loss): bf16 logits (2), the fp32 upcast for the loss (4), its fp32
#   gradient (4) and the bf16 gradient flowing back into the head (2) = 12;
# * chunked (torchtune CEWithChunkedOutputLoss): the bf16 logits of every chunk stay saved for
#   backward (2); the fp32 upcast exists for one chunk at a time (1/8 of b·s·V by torchtune's
#   default num_output_chunks = 8) — torchtune measures −8.1 GiB on Llama-3.2-3B at b·s·V = 1.05e9,
#   ≈ 8 of the 10 bytes the fp32 copies take;
# * fused (Liger, Cut-Cross-Entropy, Unsloth): logits are computed blockwise and never stored;
#   what remains is one block, negligible;
# * compiled (the standard loss under torch.compile): Inductor fuses the `.float()` upcast into
#   the cross-entropy's reductions and its backward into one pointwise kernel, so the fp32 copy and
#   its fp32 gradient live only in registers; the loss graph saves the bf16 logits (2) and writes
#   their bf16 gradient (2) = 4. torchtitan's PR enabling it (pytorch/torchtitan#1033, 2025-04-02)
#   reports the "reduction of memory" without a figure; two runs after it are in
#   benchmarks/data/memory_extra.csv (Llama-3.1-8B on MI300X and B200, b·s·V = 1.05e9).
LOGITS_BYTES_PER_ELEMENT: dict[str, float] = {
    "standard": 12.0,
    "chunked": 2.0 + 8.0 / 8,
    "fused": 0.0,
    "compiled": 4.0,
}
# The standard loss on 16-bit logits (Job.logits_fp32 False): the logits (2), the 16-bit working
# copy the loss keeps (the shifted .contiguous() / log_softmax output, 2), its gradient (2) and the
# gradient into the head (2): each fp32 tensor of the 12 above becomes a 16-bit one.
LOGITS_16BIT_BYTES_PER_ELEMENT = 8.0
# Gemma 2's final soft-capping (tanh(x/30)·30) keeps one more fp32 copy of the logits for backward.
SOFTCAP_LOGITS_BYTES_PER_ELEMENT = 4.0
# LoRA on the head (peft/tuners/lora/layer.py Linear.forward: result = base_layer(x), then
# result = result + lora_B(lora_A(dropout(x))) * scaling): the bf16 lora_B output is a second
# b·s·V tensor next to the base logits at the end of the forward.
LORA_HEAD_LOGITS_BYTES_PER_ELEMENT = 2.0
# CUDA context + cuBLAS/cuDNN workspaces: gpu_poor assumes 650 MB, its README 0.5–1 GB.
CUDA_CONTEXT_GB = 0.5
# Caching-allocator fragmentation on the tensors that come and go each step (activations, logits):
# reserved/allocated = 10.22/9.16 GiB in Answer.AI's 7B LoRA run; PyTorch docs cite 5–15%.
ALLOCATOR_FRAGMENTATION = 0.10
# Optimizer state bytes per trained parameter: AdamW m and v in fp32 (8); bitsandbytes 8-bit
# AdamW keeps them in 1 byte each (2); paged variants have the same steady state (QLoRA paper).
OPTIMIZER_STATE_BYTES: dict[str, float] = {
    "adamw": 8.0,
    "paged-adamw": 8.0,
    "adamw8bit": 2.0,
    "paged-adamw8bit": 2.0,
}
# torch.optim.AdamW's foreach implementation (the default on CUDA since torch 2.0) allocates
# sqrt(v) as a new tensor list (`torch._foreach_sqrt(exp_avg_sqs)` in _multi_tensor_adamw): one
# state-sized temporary of v's dtype. bitsandbytes' 8-bit optimizers update in place (no foreach).
FOREACH_TEMPORARIES = 1.0
# Live decoder units under FSDP/ZeRO-3: the one computing and the one prefetched (FSDP
# forward_prefetch/backward_prefetch = BACKWARD_PRE, one unit ahead). CPU offload keeps one more in
# flight, the host-to-device copy of the unit after next (DeepSpeed's offload prefetch queue).
LIVE_UNITS = 2
LIVE_UNITS_OFFLOAD = 3


# FSDP CPU offload copies a unit's shard to the GPU before all-gathering it, as a new tensor beside
# the unsharded buffer (FlatParamHandle.pre_unshard: "elif self._offload_params and ... device !=
# self.device: self.flat_param_to(self.device, non_blocking=True)", "This creates a new tensor
# distinct from any attributes"; torch/distributed/fsdp/_flat_param.py), freed at reshard: each
# live unit costs 1 + 1/N of its size on the GPU.
def fsdp_offload_live_factor(n_gpus: int) -> float:
    return 1.0 + 1.0 / max(1, n_gpus)


# DeepSpeed ZeRO-3 (zero3_impl="deepspeed") gathers by budget, not by unit. Defaults from
# deepspeed/runtime/zero/config.py (DeepSpeedZeroConfig): stage3_max_live_parameters 1e9,
# stage3_prefetch_bucket_size 5e7, stage3_param_persistence_threshold 1e5, stage3_max_reuse_distance
# 1e9; HF Trainer's "auto" (transformers integrations/deepspeed.py, trainer_config_finalize) sets
# only the bucket to 0.9·h² and the threshold to 10·h. In PartitionedParameterCoordinator
# (deepspeed/runtime/zero/partitioned_param_coordinator.py) `fetch_sub_module` gathers the module
# about to run, then prefetches upcoming parameters while min(max_live − available, bucket) > 0;
# the loop takes a whole parameter before it tests that limit, so the lead grows until the budget
# stops it and can pass it by one parameter, at worst the V×h embedding or head. Live set:
# min(whole model, DS_MAX_LIVE_PARAMETERS + the largest parameter), plus the persisted ones
# (`deepspeed_live_bytes`; tests/test_finetune_deepspeed.py replays those rules). Without
# checkpointing, HF's 0.9·h² bucket on a model whose every weight is larger keeps the lead at one
# weight, and this overstates that case by up to the budget.
DS_MAX_LIVE_PARAMETERS = 1e9
# Parameters below this many elements are never partitioned (`ds_persist`): each rank holds them
# whole. That is every norm weight (h elements); HF's "auto" 10·h keeps the same ones.
DS_PARAM_PERSISTENCE_THRESHOLD = 1e5
# Bytes per element the budget counts: bf16, and for 4-bit bitsandbytes weights the bf16
# `bnb_4bit_quant_storage` that ZeRO-3 sharding needs (four 4-bit weights per element).
DS_STORAGE_ELEMENT_BYTES = 2.0
# DeepSpeed ZeRO-3 keeps each rank's gradient partition in its gradient-accumulation dtype,
# which is the model's dtype unless the config sets `data_types.grad_accum_dtype`
# (engine.get_data_types; stage3.py allocates `grad_partitions_flat_buffer` with
# dtype=self.gradient_accumulation_dtype): 2 B/param under bf16, since DeepSpeed #1453 (2022-01)
# and unchanged through #8056 (2026-06). The fp32 gradient the optimizer reads exists only in the
# step, for one sub-group at a time: `_prepare_fp32_grad_for_sub_group` flattens the sub-group's
# bf16 partitions (a bf16 copy) and casts that to fp32, the optimizer steps that sub-group alone
# (`_optimizer_step` sets the param group to its flat fp32 partition), `_release_sub_group` drops
# the fp32 gradient. A sub-group closes once its parameters' partitions reach sub_group_size
# elements (`_create_fp16_sub_groups`), so it can pass that size by one parameter; the default
# is 1e9 (DeepSpeedZeroConfig.sub_group_size), as Qwen's and LLaMA-Factory's ZeRO-3 configs set;
# axolotl's deepspeed_configs/zero3_bf16.json sets 0, one weight per sub-group, a smaller transient.
DS_SUB_GROUP_SIZE = 1e9
# PEFT modules_to_save wrappers per TrainEmbeddings choice: each trains a deep copy of a V×h matrix
# and keeps the frozen original (ModulesToSaveWrapper.update in peft/utils/other.py). On a tied
# model the copy breaks the tie: PEFT's default (ensure_weight_tying=False) "treats as separate"
# a tied lm_head in modules_to_save, and warns, then treats as separate, when both are listed
# (PEFT docs, developer_guides/lora.md "Weight tying"); the shared original stays frozen.
EMBEDDING_COPIES: dict[str, int] = {"off": 0, "head": 1, "embed+head": 2}
# GPTQ act-order index: one int32 group index per input row of every quantized linear (`g_idx`,
# AutoGPTQ QuantLinear.__init__: torch.tensor([i // group_size for i in range(infeatures)],
# dtype=torch.int32)).
GPTQ_G_IDX_BYTES = 4.0
# Bytes of one fp32 element: the modules under autocast, and the fp32 activations it leaves.
FP32_BYTES = 4.0
BF16_BYTES = 2.0


@dataclass(frozen=True)
class MemoryBreakdown:
    """Peak memory per GPU in GB (1e9 bytes). `total_gb` is the device total (`device_gb`)."""

    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    activations_gb: float
    logits_gb: float
    overhead_gb: float
    total_gb: float
    allocated_gb: float = 0.0
    reserved_gb: float = 0.0
    peak_phase: str = "step"
    phases_gb: tuple[tuple[str, float], ...] = ()
    # the part of gradients_gb that is torch DDP's bucket copy (`ddp_bucket_bytes`)
    ddp_bucket_gb: float = 0.0

    @property
    def device_gb(self) -> float:
        return self.total_gb

    def as_dict(self) -> dict[str, float]:
        """The component columns of marts.finetune_requirements (GB)."""
        return {
            "weights_gb": self.weights_gb,
            "gradients_gb": self.gradients_gb,
            "optimizer_gb": self.optimizer_gb,
            "activations_gb": self.activations_gb,
            "logits_gb": self.logits_gb,
            "overhead_gb": self.overhead_gb,
            "total_gb": self.total_gb,
        }

    def report(self) -> dict[str, Any]:
        """Everything, for --json: components, allocated / reserved / device totals, phases."""
        return {
            **self.as_dict(),
            "allocated_gb": self.allocated_gb,
            "reserved_gb": self.reserved_gb,
            "device_gb": self.device_gb,
            "peak_phase": self.peak_phase,
            "phases_gb": dict(self.phases_gb),
            "ddp_bucket_gb": self.ddp_bucket_gb,
        }


# --- Trainable parameters -------------------------------------------------------------------------


def _lora_params_per_layer(m: ModelSpec, rank: int, targets: str) -> int:
    h, q_out, kv_out = m.hidden_size, m.attention_heads * m.head_dim_, m.kv_heads * m.head_dim_
    # LoRA on W (d_in→d_out) adds A (r×d_in) and B (d_out×r): r·(d_in + d_out) (Hu et al. 2021).
    if targets == "qv":
        return rank * ((h + q_out) + (h + kv_out))
    attn = rank * ((h + q_out) + 2 * (h + kv_out) + (q_out + h))
    if targets == "attention":
        return attn
    n_mats = 3 if m.gated_mlp else 2
    experts = m.num_experts if m.is_moe and m.num_experts else 1
    return attn + experts * n_mats * rank * (h + m.intermediate_size)


def adapter_params(model: ModelSpec, job: Job) -> int:
    """The LoRA A/B matrices of a LoRA or QLoRA job (0 for full fine-tuning), with the head's
    own pair (r·(h + V)) under `lora_head`."""
    if job.method == "full":
        return 0
    head = job.lora_rank * (model.hidden_size + model.vocab_size) if job.lora_head else 0
    return model.layers * _lora_params_per_layer(model, job.lora_rank, job.lora_targets) + head


def embedding_copy_params(model: ModelSpec, job: Job) -> int:
    """Parameters of the trained embedding / head copies (PEFT modules_to_save), V·h each.

    Tied or not, each wrapped module adds one trainable V×h copy: a tied model's shared matrix
    stays as the frozen original of both. bitsandbytes never quantizes these matrices
    (transformers' `get_keys_to_not_convert` keeps the tied weights, else the output embedding,
    out of the 4-bit conversion), so under QLoRA they copy the unquantized bf16 (or k-bit
    upcast fp32) matrix.
    """
    if job.method == "full":
        return 0
    return EMBEDDING_COPIES[job.train_embeddings] * model.vocab_size * model.hidden_size


def trains_head(job: Job) -> bool:
    """Whether the output head's weight gets a gradient (full fine-tuning, or a trained copy)."""
    return job.method == "full" or job.train_embeddings != "off"


def trainable_params(model: ModelSpec, job: Job) -> int:
    """All parameters for full fine-tuning; for LoRA and QLoRA the adapters plus any trained
    embedding / head copies, as PEFT's print_trainable_parameters counts them."""
    if job.method == "full":
        return model.params
    return adapter_params(model, job) + embedding_copy_params(model, job)


# --- Model states (weights, gradients, optimizer) ------------------------------------------------


@dataclass(frozen=True)
class StateBytes:
    weights: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def bytes_per_param(
    precision: Precision, optimizer: Optimizer, mixed_precision: MixedPrecision = "fsdp"
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per trained parameter, unsharded.

    bf16-mixed (DeepSpeed's accounting, stage_1_and_2.py: "2 = params_16bit, 18 = 2_grads_16bit +
    4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit"): 2 | 4 | 4 master + m,v.
    With AdamW that is 2 + 4 + 12 = 18 B/param, LLaMA-Factory's `18x`; the bf16 gradient is a
    transient bucket except in ZeRO-2, where DeepSpeed keeps a 2 B/param partition of it.
    bf16-pure (LLaMA-Factory pure_bf16, torchtune, litgpt bf16-true): 2 | 2 | m,v in bf16 = 8 B/param
    with AdamW (LLaMA-Factory `8x`). 8-bit AdamW (bitsandbytes) keeps m,v in 1 byte each; paged
    variants have the same steady state and only spill to CPU under pressure (QLoRA paper).
    Autocast over fp32 modules (mixed_precision="autocast"): the fp32 parameter is the master,
    its gradient is fp32, the optimizer keeps m, v only: 4 | 4 | 8 = 16 B/param (torch.amp); the
    bf16 casts of the weights are a step transient (`autocast_cast_bytes`).
    """
    states = OPTIMIZER_STATE_BYTES[optimizer]
    if precision == "bf16-mixed" and mixed_precision == "autocast":
        return FP32_BYTES, FP32_BYTES, states
    if precision == "bf16-mixed":
        return 2.0, 4.0, 4.0 + states
    # torch AdamW keeps m, v in the parameter dtype (bf16); bitsandbytes' 32-bit paged AdamW
    # keeps them in fp32 whatever the parameter dtype
    return 2.0, 2.0, states / 2 if optimizer == "adamw" else states


def model_states_bytes(
    params: float,
    largest_layer: float,
    precision: Precision,
    optimizer: Optimizer,
    sharding: Sharding,
    n_gpus: int,
    offload: bool,
    gathered_weights: float | None = None,
    mixed_precision: MixedPrecision = "fsdp",
    deepspeed: bool = False,
) -> StateBytes:
    """Per-GPU weight/gradient/optimizer bytes for fully trained parameters under ZeRO stages.

    ZeRO-2 (estimate_zero2_model_states_mem_needs): 2Ψ + 18Ψ/N, or 2Ψ with CPU offload; of its 18,
    the "4_grads_32bit" exist only in the optimizer step, one param group at a time
    (stage_1_and_2.py `step`), so the states kept between steps are 2Ψ + 16Ψ/N and the optimizer
    phase adds the fp32 gradient (`_fp32_gradient_elements`).
    ZeRO-3 (estimate_zero3_model_states_mem_needs): 4·largest_layer + 18Ψ/N; params+optimizer
    offload leaves 4·largest_layer (the gathered bf16 layer and its bf16 gradient).
    `gathered_weights` replaces the estimator's gathered bf16 weights (2·largest_layer) with a
    framework's own live set; the bf16 gradient of the unit being reduced stays.
    No sharding (DDP) replicates everything: 18Ψ for bf16-mixed AdamW.
    Under autocast the gathered unit and its gradient are fp32 (FSDP MixedPrecision off).
    ZeRO-3 under DeepSpeed (`deepspeed`) keeps the gradient partition in bf16: 2Ψ/N, the fp32
    gradient being a per-sub-group transient of the optimizer step (DS_SUB_GROUP_SIZE); FSDP keeps
    its sharded gradient in the fp32 master's dtype.
    """
    w, g, o = bytes_per_param(precision, optimizer, mixed_precision)
    autocast = precision == "bf16-mixed" and mixed_precision == "autocast"
    bf16_partition = _deepspeed_keeps_bf16_gradient(precision, mixed_precision)
    n = max(1, n_gpus)
    if sharding == "none":
        return StateBytes(w * params, g * params, o * params)
    if sharding == "zero2":
        if offload:
            return StateBytes(w * params, 0.0, 0.0)
        # DeepSpeed keeps the 16-bit gradient partition (`grads_in_partition`, dtype=self.dtype:
        # the estimator's "2_grads_16bit"); its fp32 copy is the optimizer step's
        g_zero2 = BF16_BYTES if bf16_partition else g
        return StateBytes(w * params, g_zero2 * params / n, o * params / n)
    gathered = (FP32_BYTES if autocast else BF16_BYTES) * largest_layer
    live = gathered if gathered_weights is None else gathered_weights
    if offload:
        return StateBytes(live, gathered, 0.0)
    if deepspeed and bf16_partition:
        g = BF16_BYTES
    return StateBytes(live + w * params / n, gathered + g * params / n, o * params / n)


def quantized_bytes_per_param(job: Job) -> float:
    return QUANT_BYTES_PER_PARAM[job.quant]


def _module_bytes(job: Job) -> float:
    """Bytes per element of an unquantized module parameter: fp32 under autocast, else bf16."""
    return FP32_BYTES if job.mixed_precision == "autocast" else BF16_BYTES


def _unquantized_bytes_per_param(job: Job) -> float:
    """Embeddings, head and norms of a frozen base: bf16, or fp32 after k-bit preparation or
    under autocast (fp32 modules)."""
    if job.method == "qlora" and job.kbit_upcast:
        return FP32_BYTES
    return _module_bytes(job)


def _frozen_weight_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes of the frozen base model under LoRA (bf16) or QLoRA (quantized linears, rest bf16)."""
    if job.method == "lora":
        return _module_bytes(job) * model.params
    quantized = quantized_params(model, job)
    rest = _unquantized_bytes_per_param(job) * (model.params - quantized)
    if job.quantize_head and model.tied_embeddings:
        # a tied head quantized apart from the embedding: the bf16 embedding stays for the lookup
        rest += _unquantized_bytes_per_param(job) * model.vocab_size * model.hidden_size
    return QUANT_CODE_BYTES_PER_PARAM * quantized + rest + per_rank_frozen_bytes(model, job)


def largest_quantized_bf16_bytes(model: ModelSpec, job: Job) -> float:
    """The bf16 copy of the largest quantized weight (h×I, or the V×h head under quantize_head).

    It exists twice over: at load, transformers moves each checkpoint tensor to the GPU in bf16 and
    bitsandbytes quantizes it there (`Params4bit.to(cuda)` → `_quantize`: the bf16 tensor, then
    `quantize_4bit`), one tensor at a time (`_load_state_dict_into_meta_model` loops over the
    state dict); in the step, bitsandbytes / GPTQ dequantize one linear at a time to bf16 for its
    matmul. Either way the caching allocator keeps the freed block reserved for the next one.
    """
    largest = max(model.vocab_size, model.intermediate_size) if job.quantize_head else model.intermediate_size
    return BF16_BYTES * model.hidden_size * largest


def per_rank_frozen_bytes(model: ModelSpec, job: Job) -> float:
    """What every GPU holds whole of a quantized base, sharded or offloaded or not: the quant
    statistics (QUANT_CODE_BYTES_PER_PARAM explains why FSDP leaves them), GPTQ's g_idx buffers
    and the bf16 block one linear dequantizes into (`largest_quantized_bf16_bytes`)."""
    if job.method != "qlora":
        return 0.0
    statistics = (quantized_bytes_per_param(job) - QUANT_CODE_BYTES_PER_PARAM) * quantized_params(model, job)
    g_idx = GPTQ_G_IDX_BYTES * _quantized_input_rows(model, job) if job.quant == "gptq" else 0.0
    return statistics + g_idx + largest_quantized_bf16_bytes(model, job)


def quantized_params(model: ModelSpec, job: Job) -> int:
    """Parameters QLoRA stores quantized: the decoder's linears, plus the head with quantize_head."""
    head = model.vocab_size * model.hidden_size if job.quantize_head else 0
    return linear_params(model) + head


def _quantized_input_rows(model: ModelSpec, job: Job) -> int:
    """Sum of d_in over every quantized linear (GPTQ keeps one g_idx entry per input row)."""
    h, inter = model.hidden_size, model.intermediate_size
    q_out = model.attention_heads * model.head_dim_
    experts = model.num_experts if model.is_moe and model.num_experts else 1
    mlp = (2 * h if model.gated_mlp else h) + inter
    per_layer = 3 * h + q_out + experts * mlp
    return model.layers * per_layer + (h if job.quantize_head else 0)


def _decoder_unit_frozen_bytes(model: ModelSpec, job: Job) -> float:
    """One decoder layer of a frozen base in its storage dtype (quantized linears under QLoRA)."""
    linears = _attention_params_per_layer(model) + _mlp_params_per_layer(model)
    # a gathered unit holds the codes only: the statistics never leave each rank
    per_linear = QUANT_CODE_BYTES_PER_PARAM if job.method == "qlora" else _module_bytes(job)
    return per_linear * linears + _unquantized_bytes_per_param(job) * 2 * model.hidden_size


def _root_unit_frozen_bytes(model: ModelSpec, job: Job) -> float:
    """The FSDP root unit: embedding and (untied) head, gathered for the whole step."""
    vh = model.vocab_size * model.hidden_size
    if job.quantize_head:  # the embedding stays unquantized, the head is stored like the linears
        return (_unquantized_bytes_per_param(job) + quantized_bytes_per_param(job)) * vh
    return _unquantized_bytes_per_param(job) * vh * (1 if model.tied_embeddings else 2)


def _persisted_params(model: ModelSpec) -> int:
    """Parameters DeepSpeed never partitions (fewer than DS_PARAM_PERSISTENCE_THRESHOLD elements):
    the two norms per layer and the final norm (h each), and MoE routers (h·E) when that small."""
    small = DS_PARAM_PERSISTENCE_THRESHOLD
    norms = (2 * model.layers + 1) * model.hidden_size if model.hidden_size < small else 0
    router = model.hidden_size * (model.num_experts or 0) if model.is_moe else 0
    return norms + (model.layers * router if 0 < router < small else 0)


def deepspeed_live_bytes(total: float, largest: float, persisted: float) -> float:
    """Bytes DeepSpeed ZeRO-3 holds gathered at once: the prefetch budget (DS_MAX_LIVE_PARAMETERS
    elements) plus the one parameter that may pass it (`largest` bytes), never more than the whole
    model (`total`); plus the persisted small parameters, which every rank holds whole."""
    budget = DS_MAX_LIVE_PARAMETERS * DS_STORAGE_ELEMENT_BYTES
    return min(total, budget + largest + persisted)


def _largest_param_bytes(model: ModelSpec, linear_bytes: float, other_bytes: float) -> float:
    """The largest single weight: the V×h embedding / head, or one h×I MLP matrix."""
    return max(
        other_bytes * model.vocab_size * model.hidden_size,
        linear_bytes * model.hidden_size * model.intermediate_size,
    )


def _copy_bytes_per_param(job: Job) -> tuple[float, float, float]:
    """(weight, gradient, optimizer) bytes per parameter of a trained embedding / head copy.

    The copy is a deep copy of the original, so it keeps the original's dtype (bf16, or fp32 after
    k-bit preparation) under either precision; its gradient has that dtype, and torch's AdamW keeps
    m and v in it too (bitsandbytes' optimizers keep their own: 1 B each 8-bit, fp32 32-bit paged).
    Qwen's "LoRA (emb)" row fits this: 6.7 → 13.7 GB for two V×h copies of Qwen-1.8B (623M
    parameters, bf16 weights, AdamW) = 8 B per parameter + the 2 B sqrt(v) of the foreach step.
    """
    w = _unquantized_bytes_per_param(job)
    states = OPTIMIZER_STATE_BYTES[job.optimizer]
    return w, w, (w * 2 if job.optimizer == "adamw" else states)


def _adapter_bytes(job: Job) -> float:
    """Bytes per LoRA adapter parameter (and so per element of its gradient): fp32 under mixed
    precision (PEFT keeps them fp32; they are their own master copy), bf16 under pure bf16."""
    return FP32_BYTES if job.precision == "bf16-mixed" else BF16_BYTES


def ddp_gradient_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes of one copy of every trained gradient in its parameter's own dtype, as torch DDP
    holds and all-reduces it: the modules' dtype for full fine-tuning (fp32 under autocast, else
    bf16), the adapters' (`_adapter_bytes`) and the trained embedding / head copies' for LoRA."""
    if job.method == "full":
        return _module_bytes(job) * model.params
    copy_g = _copy_bytes_per_param(job)[1]
    return _adapter_bytes(job) * adapter_params(model, job) + copy_g * embedding_copy_params(model, job)


def ddp_bucket_bytes(model: ModelSpec, job: Job, n_gpus: int) -> float:
    """The flat buckets torch DDP keeps beside the gradients on each GPU (`Job.ddp_bucket_view`):
    one more copy of the trained gradients, from construction on; 0 on one GPU (no DDP), with
    gradient_as_bucket_view or FSDP NO_SHARD, under ZeRO/FSDP sharding and where the job is not
    torch DDP's (`Job.runs_torch_ddp`)."""
    if job.sharding != "none" or n_gpus <= 1 or job.ddp_bucket_view or not job.runs_torch_ddp:
        return 0.0
    return ddp_gradient_bytes(model, job)


def model_states(model: ModelSpec, job: Job, n_gpus: int) -> StateBytes:
    """Per-GPU weights, gradients (DDP's bucket copy included) and optimizer state of `job`
    during the training step."""
    states = _sharded_model_states(model, job, n_gpus)
    bucket = ddp_bucket_bytes(model, job, n_gpus)
    return replace(states, gradients=states.gradients + bucket) if bucket else states


def _sharded_model_states(model: ModelSpec, job: Job, n_gpus: int) -> StateBytes:
    """Weights, gradients and optimizer state per GPU as the sharding places them."""
    n = max(1, n_gpus)
    deepspeed = job.sharding == "zero3" and job.zero3_impl == "deepspeed"
    if job.method == "full":
        live = None
        if deepspeed:
            persisted = 2.0 * _persisted_params(model)
            live = deepspeed_live_bytes(2.0 * model.params, _largest_param_bytes(model, 2.0, 2.0), persisted)
            # gathered at full size next to the rank's own partition, as below; with one rank
            # DeepSpeed does not gather at all (all_gather_coalesced returns
            # _no_gather_coalesced when num_partitions == 1)
            live = live if job.offload or n > 1 else 0.0
        elif job.offload and job.sharding == "zero3":
            live = _module_bytes(job) * largest_layer_params(model) * fsdp_offload_live_factor(n)
        return model_states_bytes(
            model.params,
            largest_layer_params(model),
            job.precision,
            job.optimizer,
            job.sharding,
            n_gpus,
            job.offload,
            gathered_weights=live,
            mixed_precision=job.mixed_precision,
            deepspeed=deepspeed,
        )
    frozen = _frozen_weight_bytes(model, job)
    copies = embedding_copy_params(model, job)
    copy_w, copy_g, copy_o = _copy_bytes_per_param(job)
    # the trained copies are parameters like the base's, sharded and gathered with it
    weights = frozen + copy_w * copies
    if job.sharding == "zero3":
        if deepspeed:
            rest = _unquantized_bytes_per_param(job)
            per_linear = quantized_bytes_per_param(job) if job.method == "qlora" else _module_bytes(job)
            largest = _largest_param_bytes(model, per_linear, rest)
            gathered = deepspeed_live_bytes(weights, largest, rest * _persisted_params(model))
        else:
            unit = _decoder_unit_frozen_bytes(model, job)
            # FSDP: the root unit (embedding + head, and their trained copies) stays gathered
            # through the step, and LIVE_UNITS decoder layers are gathered at once (the one
            # computing, the one prefetched)
            units = min(model.layers, LIVE_UNITS_OFFLOAD if job.offload else LIVE_UNITS)
            root = _root_unit_frozen_bytes(model, job) + copy_w * copies
            gathered = root + units * unit
            if job.offload:
                gathered *= fsdp_offload_live_factor(n)
        # The gathered set is a full-size buffer beside each GPU's own shard: FSDP all-gathers a
        # unit into "a padded unsharded tensor that serves as the all-gather destination"
        # (FlatParamHandle.init_flat_param_attributes, torch/distributed/fsdp/_flat_param.py:
        # flat_param.numel() * world_size) while `_local_shard` stays; DeepSpeed replaces
        # param.data with the full tensor and keeps `ds_tensor`. One GPU gathers nothing: FSDP
        # switches FULL_SHARD to NO_SHARD at world size 1, DeepSpeed skips the gather.
        # the quant statistics and the dequantization block stay whole on every rank
        kept = per_rank_frozen_bytes(model, job)
        if job.offload:
            weights = gathered + kept
        elif n > 1:
            weights = (weights - kept) / n + kept + gathered
    t = adapter_params(model, job)
    adapter_w = _adapter_bytes(job)
    w_b, g_b, o_b = adapter_w, adapter_w, OPTIMIZER_STATE_BYTES[job.optimizer]
    if job.precision == "bf16-pure" and job.optimizer == "adamw":
        o_b = o_b / 2
    shard = n if job.sharding != "none" else 1
    opt = 0.0 if job.offload else (o_b * t + copy_o * copies) / shard
    # mixed FSDP1 units keep their frozen part's gradient shard too (one GPU: NO_SHARD, all of it)
    frozen_g = mixed_unit_gradient_bytes(model, job) / n
    grads = 0.0 if job.offload else (g_b * t + copy_g * copies) / shard + frozen_g
    return StateBytes(weights + w_b * t, grads, opt)


# --- Activations -------------------------------------------------------------------------------


def layer_linears(model: ModelSpec) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    """(name, d_in, d_out) of one decoder layer's linears: attention (q, k, v read h; o reads the
    attention output, a·d) and one expert's MLP (gate, up, down; a plain MLP's fc1 is "up", fc2
    "down")."""
    h, inter = model.hidden_size, model.intermediate_size
    q, kv = model.attention_heads * model.head_dim_, model.kv_heads * model.head_dim_
    attention = [("q", h, q), ("k", h, kv), ("v", h, kv), ("o", q, h)]
    up_down = [("up", h, inter), ("down", inter, h)]
    return attention, ([("gate", h, inter), *up_down] if model.gated_mlp else up_down)


# the linears each `lora_targets` adapts; None: every one
LORA_TARGET_LINEARS: dict[str, frozenset[str] | None] = {
    "qv": frozenset({"q", "v"}),
    "attention": frozenset({"q", "k", "v", "o"}),
    "all-linear": None,
}


def is_adapted(job: Job, name: str) -> bool:
    """Whether the job puts a LoRA adapter on the layer's linear `name` (never under full)."""
    targets = LORA_TARGET_LINEARS[job.lora_targets]
    return job.method != "full" and (targets is None or name in targets)


def adapted_linears(model: ModelSpec, job: Job) -> list[tuple[int, int]]:
    """(d_in, d_out) of one layer's LoRA-adapted linears (none for full fine-tuning), the MLP's
    once per routed expert."""
    attention, mlp = layer_linears(model)
    experts = model.experts_per_token if model.is_moe and model.experts_per_token else 1
    adapted_attention = [(d_in, d_out) for name, d_in, d_out in attention if is_adapted(job, name)]
    return adapted_attention + [(d_in, d_out) for name, d_in, d_out in mlp if is_adapted(job, name)] * experts


def _adapted_linear_inputs(model: ModelSpec, job: Job) -> float:
    """Sum of d_in over the LoRA-adapted linears of one layer (what LoRA dropout copies)."""
    return float(sum(d_in for d_in, _ in adapted_linears(model, job)))


def _autocast_linear_input_bytes(model: ModelSpec, job: Job) -> tuple[float, float]:
    """(attention, MLP) bytes per token that one layer's linears keep of their inputs under
    autocast over fp32 modules (`mixed_precision` autocast), adapters and LoRA dropout included;
    the attention output, which FlashAttention keeps anyway, is counted with attention.

    torch.autocast casts an activation anew at every call: its cast cache holds only leaves that
    require grad (aten/src/ATen/autocast_mode.cpp, `cached_cast`: `arg.requires_grad() &&
    arg.is_leaf()`). The normed residual stream is fp32 here, so q, k and v (and gate and up) each
    cast it to bf16, and each linear that needs its input for a gradient keeps its own copy:
    * full fine-tuning: every linear (its weight trains);
    * bitsandbytes 4-bit bases: Linear4bit casts its input to the compute dtype and MatMul4Bit
      keeps that cast; its output goes back to the input's dtype, fp32, so the MLP's inner
      tensors and down's input are fp32 too (the caller doubles the inner ones);
    * LoRA adapters: lora_A keeps autocast's bf16 cast of its input. PEFT's lora.Linear first
      casts a bf16 input (o, down) to its fp32 adapter's dtype, so those keep their own copy as
      well; its bnb and GPTQ layers skip that cast under autocast
      (`requires_conversion = not torch.is_autocast_enabled()`) and share the bf16 input
      (huggingface/peft @5d602fdb, tuners/lora/layer.py, bnb.py, gptq.py). Dropout adds its
      1-byte mask and puts its own output, not the shared input, under lora_A.
    A frozen fp32 base keeps only its weight's cast (`saved_weight_bytes_per_layer`).
    """
    bnb = job.bnb_base
    mask = 1.0 if job.method != "full" and job.dropout > 0 else 0.0

    def kept(name: str, d_in: int) -> float:
        # the normed stream is fp32; down reads fp32 only behind a bnb base's fp32 outputs
        fp32_input = name in ("q", "k", "v", "gate", "up") or (name == "down" and bnb)
        base = BF16_BYTES * d_in if (job.method == "full" or bnb) and fp32_input else 0.0
        # an adapter keeps a copy of its own unless it reads a bf16 input as it is (bnb/GPTQ
        # layers, no dropout): then it shares that input
        copies = is_adapted(job, name) and (fp32_input or job.method == "lora" or mask > 0)
        return base + ((BF16_BYTES + mask) * d_in if copies else 0.0)

    attention, mlp = layer_linears(model)
    attention_bytes = sum(kept(name, d_in) for name, d_in, _ in attention)
    mlp_bytes = sum(kept(name, d_in) for name, d_in, _ in mlp)
    # down's bf16 input (the MLP product), kept once by whatever reads it without a copy: the
    # trained down, or a GPTQ adapter without dropout (bnb's is fp32 and cast, counted above)
    gptq_adapter_reads_it = job.method == "qlora" and not bnb and is_adapted(job, "down") and not mask
    shares_down_input = job.method == "full" or gptq_adapter_reads_it
    return attention_bytes, mlp_bytes + (BF16_BYTES * model.intermediate_size if shares_down_input else 0.0)


def attention_impl(model: ModelSpec, job: Job) -> str:
    """The attention kernel that runs, for memory and time alike: the job's stack
    (`Job.attention_kernel`), except that on the plain stack Gemma 2's attention soft-capping has
    no SDPA kernel, so transformers falls back to eager. The fused stack's FlashAttention-2
    takes the soft-cap (its `softcap` argument, FlashAttention ≥ 2.6)."""
    if job.kernels == "plain" and model.attn_logit_softcapping:
        return "eager"
    return job.attention_kernel


def require_expressible(model: ModelSpec, job: Job) -> None:
    """Refuse a job that `model` cannot run as stated, with one line saying what to ask instead.
    `Job` checks what it can see alone (packed documents need a fused varlen kernel, flash or
    native); whether the model forces eager attention, or whether its heads and MLP split t ways
    under tensor parallelism (`finetune.tensor_parallel.tensor_parallel_refusal`), it cannot see."""
    refusal = tensor_parallel_refusal(model, job)
    if refusal:
        raise OutsideModelError(refusal)
    if job.doc_len is not None and attention_impl(model, job) == "eager":
        raise OutsideModelError(
            f"doc_len with {model.model_id} on the plain stack: transformers runs its soft-capped "
            "attention eagerly (SDPA has no soft-cap), and eager attention cannot keep packed "
            "documents apart without a full s×s mask; use kernels='fused' (FlashAttention ≥ 2.6 "
            "takes the soft-cap) or leave doc_len out"
        )


def _layer_activation_bytes_per_token(model: ModelSpec, job: Job, seq_len: int) -> float:
    """Bytes autograd saves per token in one decoder layer (HF Llama-style, bf16).

    A frozen nn.Linear does not save its input (autograd keeps the input only to form the weight
    gradient), so LoRA saves less than full fine-tuning; a LoRA-adapted linear saves it again
    (lora_A needs it). Terms, in bytes per token:
    * RMSNorm ×2: HF upcasts to fp32 and keeps it (4h), plus the bf16 normed input if the norm
      weight trains (2h); nn.LayerNorm (Phi, Falcon, GPT-J …) keeps its bf16 input only (2h);
      a parallel block (Phi, GPT-J, CodeGen, Falcon-7B) has one norm, not two;
    * q/k/v input (2h), gate/up input (2h, shared with q/k/v in a parallel block), down input
      (2I): when that linear trains, is adapted, or is a bitsandbytes 4-bit linear (QLoRA);
    * FlashAttention: q and out (2·a·d each), k and v (2·kv·d each), log-sum-exp (negligible);
      eager attention instead keeps q, k, v repeated to all heads and the fp32 + bf16 softmax
      (6·a·s, Korthikanti's 5·a·s²·b per sequence with an fp32 softmax);
    * gated MLP: gate output, activation output and up output (6I); plain MLP: fc1 output (2I),
      plus 6I for a GELU written in torch ops (gelu_new); the activation output is fc2's input;
    * LoRA dropout > 0: PEFT applies nn.Dropout to each adapter's input: a bf16 copy and a 1-byte
      mask per element of every adapted linear's input (3·d_in);
    * MoE: the above for each of the k routed experts plus the dispatched token copy (2h·k);
    * autocast over fp32 modules: each linear casts its input anew, so the inputs (and dropout's
      copies) are `_autocast_linear_input_bytes`'s, and a bitsandbytes base's fp32 outputs make
      the MLP's inner tensors fp32.
    """
    h, inter = model.hidden_size, model.intermediate_size
    q_out, kv_out = model.attention_heads * model.head_dim_, model.kv_heads * model.head_dim_
    full = job.method == "full"
    # bitsandbytes' MatMul4Bit saves its input whenever that input needs a gradient
    # (`ctx.tensors = (A, B)`), so NF4 QLoRA keeps every linear input like full fine-tuning does.
    # GPTQ's training path (AutoGPTQ QuantLinear, exllama off) dequantizes the weight and calls
    # torch.matmul(x, weight): autograd keeps the dequantized weight, not x, because only x needs
    # a gradient (`gptq_saved_weight_bytes`)
    saves_inputs = full or job.bnb_base
    adapted_mlp = saves_inputs or job.lora_targets == "all-linear"
    autocast = job.mixed_precision == "autocast"
    n_norms = model.norms_per_layer
    if model.layer_norm:
        # F.layer_norm keeps its input (bf16; fp32 under autocast, which runs layer_norm in fp32)
        # and a per-token mean/rstd; its weight gradient needs nothing more
        norms = n_norms * (FP32_BYTES if autocast else BF16_BYTES) * h
    else:
        # the normed output kept for a trained norm weight's gradient: fp32 under autocast
        normed = FP32_BYTES * h if autocast else BF16_BYTES * h
        norms = n_norms * (4 * h + (normed if full else 0))
    qkv_in = 2 * h
    eager = attention_impl(model, job) == "eager"
    if not eager:
        attn = 2 * q_out + 4 * kv_out + 2 * q_out
    else:
        attn = 6 * q_out + 6 * model.attention_heads * seq_len + 2 * q_out
    # gated: gate output (kept by the activation), activation output and up output (kept by the
    # product); plain: fc1 output (kept by the activation), plus the tanh-GELU's own tensors. The
    # product / activation output is the down / fc2 input, counted in mlp_in when it is kept.
    tanh_gelu = 6 * inter if model.tanh_gelu_ops else 0
    mlp_inner = 6 * inter if model.gated_mlp else 2 * inter + tanh_gelu
    # a parallel block's fc1 reads the normed tensor q/k/v already keep (counted in qkv_in)
    up_in = 0 if model.parallel_block else 2 * h
    mlp_in = (up_in + 2 * inter) if adapted_mlp else 0
    mlp: float = mlp_inner + mlp_in
    linear_attention = 0.0
    if autocast:
        linear_attention, linear_mlp = _autocast_linear_input_bytes(model, job)
        # a bitsandbytes base returns its input's dtype: fp32 gate, activation and up outputs
        mlp = mlp_inner * (FP32_BYTES / BF16_BYTES if job.bnb_base else 1.0) + linear_mlp
    if model.is_moe and model.experts_per_token:
        mlp = model.experts_per_token * (mlp + 2 * h)
    if autocast:
        return float(norms + linear_attention + attn + mlp)
    dropout = 3.0 * _adapted_linear_inputs(model, job) if job.dropout > 0 else 0.0
    if job.fp32_adapters or job.adapter_input_round_trip:
        # PEFT casts the input of each adapted linear to its fp32 adapter's dtype, so lora_A keeps
        # a copy of its own (q, k and v each one): fp32 without autocast (4·d_in), or autocast's
        # bf16 cast of it under the HF Trainer (2·d_in); plus dropout's 1-byte mask when on (its
        # output is what lora_A keeps). A frozen bf16 base then keeps none of the shared bf16
        # inputs the adapters needed; bitsandbytes' 4-bit base still keeps its own.
        own = FP32_BYTES if job.fp32_adapters else BF16_BYTES
        kept = (own + (1.0 if job.dropout > 0 else 0.0)) * _adapted_linear_inputs(model, job)
        shared = 0.0 if saves_inputs else qkv_in + mlp_in
        return float(norms + qkv_in + attn + mlp) - shared + kept
    return float(norms + qkv_in + attn + mlp) + dropout


def _selective_saved_bytes_per_token(model: ModelSpec) -> float:
    """What torchtitan's selective per-op checkpointing keeps per token and layer (bf16).

    The layer input (the checkpoint's own input, 2h), the outputs of the odd-numbered matmuls —
    q (2·a·d) and v (2·kv·d), then gate (2I; fc1 for a plain MLP) — and the SDPA output (2·a·d;
    its log-sum-exp is negligible). See `finetune.job.CheckpointPolicy`.
    """
    h, inter = model.hidden_size, model.intermediate_size
    q, kv = model.attention_heads * model.head_dim_, model.kv_heads * model.head_dim_
    experts = model.experts_per_token if model.is_moe and model.experts_per_token else 1
    return float(2 * h + 2 * q + 2 * kv + 2 * q + experts * 2 * inter)


def saved_weight_bytes_per_layer(model: ModelSpec, job: Job) -> float:
    """16-bit weight copies a frozen linear leaves saved for backward, per layer whose
    activations are live: a fixed cost, whatever the tokens.

    F.linear / torch.matmul save the other operand of whichever input needs a gradient; for a
    frozen linear only x does, so autograd keeps the weight operand. That operand is a fresh
    tensor when it is made on the fly: GPTQ's dequantized fp16 weight (AutoGPTQ QuantLinear's
    torch path), or autocast's bf16 cast of a frozen fp32 weight (not cached: autocast caches
    casts of leaves that require grad only). A bf16 LoRA base saves a view of itself (free),
    bitsandbytes' MatMul4Bit saves the 4-bit weight it already holds.
    """
    gptq = job.method == "qlora" and job.quant == "gptq"
    cast = job.method == "lora" and job.mixed_precision == "autocast"
    if not (gptq or cast):
        return 0.0
    return BF16_BYTES * (_attention_params_per_layer(model) + _mlp_params_per_layer(model))


def autocast_cast_bytes(model: ModelSpec, job: Job) -> float:
    """bf16 casts of the trained fp32 parameters that torch.autocast caches for the whole
    forward region (its weight-cast cache, cleared when the outermost autocast exits).

    Only leaves that require grad are cached; FSDP's unsharded parameters are views of its flat
    parameter, which the cache skips, so a zero3 job keeps none.
    """
    if job.mixed_precision != "autocast" or job.sharding == "zero3":
        return 0.0
    return BF16_BYTES * trainable_params(model, job)


def activation_bytes(model: ModelSpec, job: Job) -> float:
    """Activation bytes per GPU for one micro-batch at its peak (end of the forward pass).

    Without checkpointing every layer's saved tensors are alive. With (HF) gradient checkpointing
    each layer keeps only its input (2·s·b·h in bf16, Korthikanti's "full recompute"; 4·s·b·h under
    autocast, where the residual stream is fp32), plus one layer's recomputed activations during
    its backward. The final norm and head input add 8h per token (10h under autocast: the final
    norm's output is fp32). Weight copies saved per live layer: `saved_weight_bytes_per_layer`.
    """
    # padded data: the longest micro-batch (job.peak_seq_len) sets the peak
    seq = job.memory_seq_len
    tokens = seq * job.micro_batch
    per_layer = _layer_activation_bytes_per_token(model, job, seq) * tokens
    autocast = job.mixed_precision == "autocast"
    head = (8.0 + (FP32_BYTES - BF16_BYTES if autocast else 0.0)) * model.hidden_size * tokens
    residual = FP32_BYTES if autocast else BF16_BYTES
    saved_weights = saved_weight_bytes_per_layer(model, job)
    if job.grad_checkpointing and job.checkpoint_policy == "selective":
        kept = _selective_saved_bytes_per_token(model) * tokens
        # the checkpoint's own input is the residual stream: fp32 under autocast
        kept += (residual - BF16_BYTES) * model.hidden_size * tokens
        return kept * model.layers + per_layer + head + saved_weights
    if job.grad_checkpointing:
        return residual * model.hidden_size * tokens * model.layers + per_layer + head + saved_weights
    return (per_layer + saved_weights) * model.layers + head


def recomputed_layer_bytes(model: ModelSpec, job: Job) -> float:
    """The one layer's activations that checkpointing recomputes during that layer's backward (0
    without checkpointing, where every layer's are alive at the end of the forward)."""
    if not job.grad_checkpointing:
        return 0.0
    seq = job.memory_seq_len
    return _layer_activation_bytes_per_token(model, job, seq) * seq * job.micro_batch


def step_transient_bytes(model: ModelSpec, job: Job) -> tuple[float, float]:
    """(activations, logits) alive together at the step's peak.

    Without checkpointing every layer's activations are still saved when the loss runs, so the
    two add. With checkpointing the loss and the recomputed layer never coexist: the loss's
    backward runs first and frees what it saved (backward without retain_graph), and the first
    layer is recomputed only after. Of the logits only what the loop keeps outlives that
    (`returned_logits_bytes`, there at the loss too): transformers' Trainer keeps the loss alone
    (`compute_loss` returns `outputs` only when `return_outputs`). The peak is the checkpoints,
    the kept logits and the larger of the loss's transients and the recomputed layer.
    """
    acts = activation_bytes(model, job)
    # the kept logits are the forward's returned tensor, a copy apart from what the loss saves
    logits = logits_bytes(model, job) + returned_logits_bytes(model, job)
    recompute = recomputed_layer_bytes(model, job)
    if recompute == 0.0:
        return acts, logits
    kept = returned_logits_bytes(model, job)
    if logits >= recompute + kept:
        return acts - recompute, logits
    return acts, kept


def returned_logits_bytes(model: ModelSpec, job: Job) -> float:
    """The logits a loop that keeps the output object (`Job.keeps_outputs`) holds through the
    backward: the tensor the causal-LM forward returns, fp32 where that forward upcasts before
    its loss (transformers' Llama/Mistral `logits = logits.float()`, the 2024 releases
    fsdp_qlora ran), 16-bit where the model computes its loss on 16-bit logits. Fused losses
    return none."""
    if not job.keeps_outputs or job.loss == "fused":
        return 0.0
    per = FP32_BYTES if job.logits_fp32 else BF16_BYTES
    return per * job.memory_seq_len * job.micro_batch * model.vocab_size


def logits_bytes(model: ModelSpec, job: Job) -> float:
    """b·s·V logits at the bytes per element of the job's loss (LOGITS_BYTES_PER_ELEMENT)."""
    per = LOGITS_BYTES_PER_ELEMENT[job.loss]
    if job.loss == "standard" and not job.logits_fp32:
        per = LOGITS_16BIT_BYTES_PER_ELEMENT
    if model.final_logit_softcapping and job.loss != "fused":
        per += SOFTCAP_LOGITS_BYTES_PER_ELEMENT
    if job.lora_head and job.loss != "fused":
        # the head's lora_B output (b·s·V, bf16) exists beside the base logits until PEFT adds it
        per += LORA_HEAD_LOGITS_BYTES_PER_ELEMENT
    return per * job.memory_seq_len * job.micro_batch * model.vocab_size


def _deepspeed_keeps_bf16_gradient(precision: Precision, mixed_precision: MixedPrecision) -> bool:
    """Whether DeepSpeed's gradient partition is 16-bit where the optimizer's master is fp32:
    bf16-mixed with bf16 modules (under autocast the modules, so their gradients, are fp32; under
    bf16-pure the master is 16-bit too, nothing to cast)."""
    return precision == "bf16-mixed" and mixed_precision != "autocast"


def _fp32_gradient_in_step(job: Job) -> bool:
    """Whether the optimizer step makes the fp32 gradient from a kept bf16 partition on the GPU:
    full fine-tuning under DeepSpeed ZeRO-2, or ZeRO-3 under DeepSpeed (see DS_SUB_GROUP_SIZE);
    FSDP and DDP keep an fp32 gradient throughout, offload steps on the CPU."""
    deepspeed = job.sharding == "zero2" or (job.sharding == "zero3" and job.zero3_impl == "deepspeed")
    return (
        deepspeed
        and job.method == "full"
        and not job.offload
        and _deepspeed_keeps_bf16_gradient(job.precision, job.mixed_precision)
    )


def _fp32_gradient_elements(model: ModelSpec, job: Job, n_gpus: int) -> float:
    """Elements the optimizer step holds an fp32 gradient for at once: ZeRO-3's largest
    sub-group, or ZeRO-2's largest param group (`_optimizer_step` steps one at a time). HF
    Trainer's weight-decay group holds every weight, all but the norms and biases, so the rank's
    whole partition is taken (the no-decay group is under 0.1 % of it)."""
    if job.sharding == "zero3":
        return deepspeed_sub_group_elements(model, n_gpus)
    return model.params / max(1, n_gpus)


def deepspeed_sub_group_elements(model: ModelSpec, n_gpus: int) -> float:
    """Elements of one rank's largest optimizer sub-group under DeepSpeed ZeRO-3.

    Each parameter is partitioned over the ranks on its own, and sub-groups are cut from the
    parameter group in its order (`_create_fp16_sub_groups`): HF Trainer's weight-decay group
    lists the embedding, each decoder layer's weights (attention, then every expert's MLP and the
    router) and the untied head (`named_parameters` order; norms and biases go to the small
    no-decay group). A sub-group closes at the weight that brings it to DS_SUB_GROUP_SIZE.
    """
    n = max(1, n_gpus)
    vh = model.vocab_size * model.hidden_size
    attention, mlp = layer_linears(model)
    experts = model.num_experts if model.is_moe and model.num_experts else 1
    router = [model.hidden_size * experts] if model.is_moe else []
    mlp_weights = [d_in * d_out for _, d_in, d_out in mlp] * experts
    layer = [d_in * d_out for _, d_in, d_out in attention] + mlp_weights
    weights = [vh, *(layer + router) * model.layers, *([] if model.tied_embeddings else [vh])]
    largest = current = 0.0
    for size in weights:
        current += size / n
        if current >= DS_SUB_GROUP_SIZE:
            largest, current = max(largest, current), 0.0
    return max(largest, current)


def compute_gradient_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes of one whole copy of the trained gradients in the compute dtype, as FSDP and
    DeepSpeed produce and reduce them: bf16 under FSDP MixedPrecision (reduce_dtype defaults to
    param_dtype) and DeepSpeed's bf16 engine, which cast even PEFT's fp32 adapters; fp32 without a
    MixedPrecision policy (autocast over fp32 modules). DDP's own: `ddp_gradient_bytes`."""
    return _module_bytes(job) * trainable_params(model, job)


def mixed_unit_gradient_bytes(model: ModelSpec, job: Job) -> float:
    """The frozen part of the decoder units' flat gradients where FSDP1 holds LoRA adapters and
    frozen weights in one FlatParameter (`Job.mixes_fsdp_units`); 0 elsewhere.

    Autograd reaches the adapters through views of the unit's FlatParameter, so its gradient is
    one flat tensor of the whole unit, frozen part included, in the FlatParameter's dtype: the
    frozen layers in their storage dtype (`_decoder_unit_frozen_bytes`: bf16, fp32 under autocast,
    QLoRA's 4-bit codes packed into the float quant_storage). PyTorch's FSDP API docs on mixing
    frozen and trained parameters under use_orig_params=True: "the gradient memory usage will be
    higher than expected (namely, equivalent to not freezing those parameters)". It is
    reduce-scattered, so it also costs communication (finetune.time).
    """
    if not job.mixes_fsdp_units:
        return 0.0
    return model.layers * _decoder_unit_frozen_bytes(model, job)


def fsdp_unsharded_gradient_bytes(model: ModelSpec, job: Job, n_gpus: int) -> float:
    """Unsharded FSDP1 gradients beside the sharded ones in the step, 0 on one GPU (FSDP does not
    shard there):
    * accumulating under `no_sync` (`Job.accumulates_unsharded`): the trained FlatParameters'
      whole gradient (`compute_gradient_bytes`), mixed units' frozen part included, on every GPU
      through the micro-batches of a step;
    * otherwise, units mixing adapters and frozen weights (`mixed_unit_gradient_bytes`): one
      unit's whole flat gradient, from its backward until its reduce-scatter has run (adapter-only
      units' are too small to count)."""
    if n_gpus <= 1:
        return 0.0
    mixed = mixed_unit_gradient_bytes(model, job)
    if job.accumulates_unsharded:
        return compute_gradient_bytes(model, job) + mixed
    return mixed / model.layers


# DeepSpeed's reduce_bucket_size default (DeepSpeedZeroConfig), which ZeRO-2 configs keep
DS_REDUCE_BUCKET_SIZE = 5e8


def ds_reduce_buffer_bytes(model: ModelSpec, job: Job) -> float:
    """DeepSpeed's gradient reduce buffers (`ds_reduce_elements` in the modules' 16-bit dtype, fp32
    ones under autocast): ZeRO-2's, held through backward, and ZeRO-3's IPG buffer, held from the
    optimizer's setup on (`ds_buffer_held_throughout`); 0 for FSDP and DDP."""
    if not job.runs_deepspeed:
        return 0.0
    return _module_bytes(job) * ds_reduce_elements(model, job)


def ds_reduce_elements(model: ModelSpec, job: Job) -> float:
    """Elements of DeepSpeed's reduce buffers: as stated (`Job.ds_reduce_buffer_elements`), else
    the common configs': DeepSpeed's default bucket under ZeRO-2, "auto" under ZeRO-3, which
    transformers' DeepSpeed integration fills with hidden_size² (`trainer_config_finalize`)."""
    if job.ds_reduce_buffer_elements is not None:
        return job.ds_reduce_buffer_elements
    return float(model.hidden_size**2) if job.sharding == "zero3" else DS_REDUCE_BUCKET_SIZE


def ds_buffer_held_throughout(job: Job) -> bool:
    """Whether DeepSpeed's reduce buffer outlives the backward pass: ZeRO-3 allocates its IPG
    buffer once, when it sets up the optimizer, so it sits in the optimizer step's peak too."""
    return job.runs_deepspeed and job.sharding == "zero3"


def _optimizer_temporaries(model: ModelSpec, job: Job, n_gpus: int) -> float:
    """Bytes the optimizer step allocates on top of the states (foreach AdamW's sqrt(v))."""
    if job.optimizer != "adamw" or job.offload or job.optimizer_impl != "foreach":
        return 0.0
    shard = max(1, n_gpus) if job.sharding != "none" else 1
    v_bytes = 4.0 if job.precision == "bf16-mixed" else 2.0
    if _fp32_gradient_in_step(job):
        # DeepSpeed hands the optimizer one group's flat fp32 partition at a time
        return FOREACH_TEMPORARIES * v_bytes * _fp32_gradient_elements(model, job, n_gpus)
    if job.method == "full":
        return FOREACH_TEMPORARIES * v_bytes * model.params / shard
    # a trained embedding / head copy keeps v in its own dtype (see _copy_bytes_per_param)
    copy_v = _copy_bytes_per_param(job)[0]
    v = v_bytes * adapter_params(model, job) + copy_v * embedding_copy_params(model, job)
    return FOREACH_TEMPORARIES * v / shard


@lru_cache(maxsize=8192)
def memory_per_gpu(model: ModelSpec, job: Job, n_gpus: int = 1) -> MemoryBreakdown:
    """Peak memory per GPU in GB for `job` on `n_gpus`: data-parallel (sharded per job.sharding)
    over its tensor-parallel groups of `job.tensor_parallel` GPUs.

    Kept per (model, job, GPUs): a refresh asks it of one job on every machine of each GPU count
    (placement, and the time model's paged optimizer), and everything it reads is frozen."""
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be ≥ 1, got {n_gpus}")
    require_data_parallel(job)
    require_expressible(model, job)
    require_tensor_parallel(model, job, n_gpus)
    # Tensor parallelism (`finetune.tensor_parallel`): each GPU holds its TP rank's slice of the
    # model, sharded by `job.sharding` over the n/t data-parallel groups, and of the logits (a
    # vocab-parallel loss); with sequence parallelism 1/t of every activation, without it the
    # slice's own (the norm regions whole on every GPU of the group)
    tp = job.tensor_parallel
    held, job = rank_model(model, tp), replace(job, tensor_parallel=1)
    n_gpus //= tp
    states = model_states(held, job, n_gpus)
    if job.sequence_parallel:
        acts, logits = (b / tp for b in step_transient_bytes(model, job))
    else:
        acts, logits = step_transient_bytes(held, job)
    fragmentation = ALLOCATOR_FRAGMENTATION * (acts + logits)
    context = CUDA_CONTEXT_GB * GB
    casts = autocast_cast_bytes(held, job)
    # allocated as backward starts (ZeRO-2's reduce buffers), at the optimizer's setup (ZeRO-3's)
    # or kept from the micro-batches before (FSDP1's unsharded gradients): beside the activations
    # that backward still holds
    ds_buffer = ds_reduce_buffer_bytes(held, job)
    gradient_buffers = ds_buffer + fsdp_unsharded_gradient_bytes(held, job, n_gpus)
    step_allocated = states.total + acts + logits + casts + gradient_buffers
    temporaries = _optimizer_temporaries(held, job, n_gpus)
    step_grads = 0.0
    if _fp32_gradient_in_step(job):
        # one group's fp32 gradient; next to it first the flattened bf16 copy it is cast from,
        # then the optimizer's temporaries (DS_SUB_GROUP_SIZE)
        group = _fp32_gradient_elements(held, job, n_gpus)
        step_grads = FP32_BYTES * group
        temporaries = max(BF16_BYTES * group, temporaries)
    # ZeRO-3's IPG buffer stays allocated through the optimizer step
    step_grads += ds_buffer if ds_buffer_held_throughout(job) else 0.0
    optimizer_allocated = states.total + step_grads + temporaries
    # load: the weights as stored (bitsandbytes quantizes one linear at a time on load: the
    # dequantization buffer in the weights covers it); FSDP materializes one decoder unit in bf16
    # before sharding it
    sharded_load = job.sharding == "zero3" and n_gpus > 1
    unit_on_load = 2.0 * layer_params(held) if sharded_load else 0.0
    if sharded_load and job.full_state_dict_load:
        # every parameter gathered on each GPU at once, in bf16, next to the GPU's own shard
        unit_on_load = 2.0 * held.params
    load_allocated = states.weights + unit_on_load
    phases = {
        "load": load_allocated + context,
        "step": step_allocated + fragmentation + context,
        "optimizer": optimizer_allocated + context,
    }
    phase = max(phases, key=lambda k: phases[k])
    allocated = {"load": load_allocated, "step": step_allocated, "optimizer": optimizer_allocated}[phase]
    reserved = allocated + (fragmentation if phase == "step" else 0.0)
    total = phases[phase]
    if phase == "step":
        parts = [states.weights + casts, states.gradients + gradient_buffers, states.optimizer, acts, logits]
    elif phase == "optimizer":
        parts = [states.weights, states.gradients + step_grads, states.optimizer + temporaries, 0, 0]
    else:
        parts = [load_allocated, 0.0, 0.0, 0.0, 0.0]
    w, g, o, a, lg = (p / GB for p in parts)
    return MemoryBreakdown(
        weights_gb=w,
        gradients_gb=g,
        optimizer_gb=o,
        activations_gb=a,
        logits_gb=lg,
        overhead_gb=(total - sum(parts)) / GB,
        total_gb=total / GB,
        allocated_gb=allocated / GB,
        reserved_gb=reserved / GB,
        peak_phase=phase,
        phases_gb=tuple((k, v / GB) for k, v in phases.items()),
        ddp_bucket_gb=ddp_bucket_bytes(held, job, n_gpus) / GB if phase != "load" else 0.0,
    )
