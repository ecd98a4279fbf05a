"""What a fine-tuning job is: method, precision, optimizer, shapes, loss, quantization (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeVar, get_args

Method = Literal["full", "lora", "qlora"]
Precision = Literal["bf16-mixed", "bf16-pure"]
Optimizer = Literal["adamw", "adamw8bit", "paged-adamw", "paged-adamw8bit"]
# hybrid: HSDP (torch FSDP ShardingStrategy.HYBRID_SHARD): ZeRO-3 inside each node, replicas
# across nodes, so only the gradient all-reduce of each GPU's shard crosses the network.
Sharding = Literal["none", "zero2", "zero3", "hybrid"]
# flash: FlashAttention-2-class kernels (the flash-attn 2 package, PyTorch SDPA's flash backend);
# native: the generation's own fused attention, where it has one beyond FA2 (FlashAttention-3 or
# cuDNN / TransformerEngine fused attention on Hopper, FlashAttention-4 or cuDNN on Blackwell; on
# Ampere and Ada it is FA2-class); flash1: FlashAttention-1-class kernels (flash-attn 1.x, its
# Triton port, PyTorch SDPA's flash backend before torch 2.2); eager: unfused softmax(QKᵀ)V with
# the s×s scores in memory.
Attention = Literal["flash", "native", "flash1", "eager"]
# --- modeltime (issue 23): the kernel stack a job runs on.
# plain: what transformers + PEFT run unless asked otherwise: attention through SDPA
# (attn_implementation defaults to "sdpa"), HF's eager RMSNorm / rotary / SwiGLU / PEFT LoRA ops
# and the fp32 cross-entropy. fused: FlashAttention-2 and fused RMSNorm, RoPE, SwiGLU, LoRA and
# linear-cross-entropy kernels (Liger Kernel's apply_liger_kernel_to_*, Unsloth); both are opt-in
# (TRL `use_liger_kernel=True`, `attn_implementation="flash_attention_2"`).
Kernels = Literal["plain", "fused"]
# qv: q_proj and v_proj (PEFT's default target_modules for Llama-style models, torchtune's
# single-device LoRA recipes); attention: q, k, v, o; all-linear: attention and MLP.
LoraTargets = Literal["qv", "attention", "all-linear"]
# standard: the HF causal-LM loss (full b·s·V logits, upcast to fp32); chunked: torchtune's
# CEWithChunkedOutputLoss (logits in chunks, fp32 one chunk at a time); fused: Liger /
# Cut-Cross-Entropy / Unsloth (the logits are never materialized); compiled: the standard loss
# under torch.compile (torchtitan compiles it with the model since pytorch/torchtitan#1033,
# 2025-04-02): Inductor fuses the fp32 upcast into the cross-entropy's kernels.
Loss = Literal["standard", "chunked", "fused", "compiled"]
# What `qlora` quantizes the frozen base to: NF4 (bitsandbytes, blocksize 64, fp32 absmax), NF4
# with double quantization (QLoRA's default, `bnb_4bit_use_double_quant=True`), or a GPTQ int4
# checkpoint (group size 128, fp16 scales and packed zeros, as Qwen's Q-LoRA recipe uses).
Quant = Literal["nf4", "nf4-dq", "gptq"]
# What gradient checkpointing recomputes. full: HF / torchtune / torchtitan "full" — each layer keeps
# only its input and reruns its whole forward in backward. selective: torchtitan's per-op policy
# (torchtitan/parallelisms/parallelize_llama.py, `_custom_policy`: "Saves output of all compute ops,
# except every second mm"): the SDPA output and every odd-numbered matmul output are kept, every
# even-numbered matmul and all elementwise work are recomputed.
CheckpointPolicy = Literal["full", "selective"]
# How the AdamW update runs. foreach: torch.optim.AdamW's default on CUDA (foreach=None picks the
# multi-tensor path, fused stays off unless asked): one memory pass per `_foreach_*` op. fused: one
# kernel reads parameter, gradient and both moments once and writes them back (torch `fused=True`,
# torchtune's configs `fused: True`, torchtitan's default `optimizer.implementation = "fused"`).
# bitsandbytes' 8-bit and paged optimizers are one fused kernel whatever this says.
OptimizerImpl = Literal["foreach", "fused"]
# Which framework shards a zero3 job, which decides how many parameters are gathered at once.
# fsdp (torch FSDP via HF Accelerate, torchtune, torchtitan, axolotl): the unit computing and the
# one prefetched, plus the root unit (embedding and head). deepspeed (ZeRO stage 3): whatever its
# prefetcher keeps under `stage3_max_live_parameters` (see finetune.memory, DS_MAX_LIVE_PARAMETERS).
Zero3Impl = Literal["fsdp", "deepspeed"]
# Embedding and head trained next to the LoRA adapters, as PEFT's `modules_to_save` does it:
# ModulesToSaveWrapper keeps the frozen original and trains a deep copy (peft/utils/other.py,
# ModulesToSaveWrapper.update). off: adapters only; head: modules_to_save=["lm_head"];
# embed+head: ["embed_tokens", "lm_head"] (Qwen's finetune.py "LoRA (emb)" for new tokens).
TrainEmbeddings = Literal["off", "head", "embed+head"]
# How bf16-mixed gets its bf16 (modelmem, issue 23). fsdp: the modules hold bf16 parameters and an
# fp32 master copy lives in the optimizer (FSDP MixedPrecision(param_dtype=bf16), DeepSpeed bf16,
# HF/axolotl/LLaMA-Factory loading with torch_dtype=bfloat16): every activation is bf16. autocast:
# the modules stay fp32 and torch.autocast casts each matmul's operands to bf16 ("CUDA Ops that
# can autocast to float16/bfloat16": matmul, linear…; other ops run in the widest input type, torch
# docs "Automatic Mixed Precision package - torch.amp"), so the residual stream, the norm outputs
# and the checkpointed layer inputs stay fp32 (4 B per element instead of 2). none: bf16 modules as
# loaded and no autocast at all (a plain training loop): PEFT's fp32 adapters then compute in fp32
# (`Job.fp32_adapters`). Under fsdp on one GPU or DDP, the HF Trainer's bf16=True runs autocast
# over the bf16 modules, which casts PEFT's fp32-cast adapter inputs back to bf16
# (`Job.adapter_input_round_trip`).
MixedPrecision = Literal["fsdp", "autocast", "none"]

# LoRA dropout by recipe when the job does not say: PEFT's LoraConfig and torchtune default to 0
# (nn.Identity, no copy); the QLoRA reference scripts (artidoro/qlora scripts/finetune_guanaco_7b.sh)
# train with lora_dropout 0.1.
DEFAULT_LORA_DROPOUT: dict[str, float] = {"full": 0.0, "lora": 0.0, "qlora": 0.1}


@dataclass(frozen=True)
class Job:
    """One fine-tuning configuration; defaults are the common HF/PEFT choices.

    `padding_efficiency` is the share of computed tokens that are real: 1 for packed data; for
    padded batches, mean sample length / padded length. Throughput counts real tokens.
    `lora_dropout` None means the recipe default of the method (DEFAULT_LORA_DROPOUT).
    """

    method: Method = "lora"
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    seq_len: int = 2048
    micro_batch: int = 1
    grad_checkpointing: bool = True
    attention: Attention = "flash"
    lora_rank: int = 16
    lora_targets: LoraTargets = "all-linear"
    loss: Loss = "standard"
    sharding: Sharding = "none"
    offload: bool = False
    quant: Quant = "nf4-dq"
    lora_dropout: float | None = None
    # bitsandbytes' prepare_model_for_kbit_training casts the non-quantized parameters
    # (embeddings, head, norms) to fp32; PEFT's QLoRA examples call it, axolotl and torchtune do not
    kbit_upcast: bool = False
    padding_efficiency: float = 1.0
    # micro-batches per optimizer step: the optimizer step, DDP's all-reduce and ZeRO-2's weight
    # all-gather run once per `grad_accumulation` micro-steps (ZeRO-2 reduce-scatters every one)
    grad_accumulation: int = 1
    checkpoint_policy: CheckpointPolicy = "full"
    optimizer_impl: OptimizerImpl = "foreach"
    # gradient-norm clipping before the update (HF Trainer max_grad_norm=1.0, torchtitan max_norm=1.0)
    grad_clip: bool = True
    # Tensor-parallel degree: a group of this many GPUs in one node splits every layer, with
    # sequence parallelism (`finetune.tensor_parallel`); data parallelism (`sharding`) runs over
    # the groups. Pipeline parallelism is refused with `OutsideModelError` (`require_data_parallel`).
    tensor_parallel: int = 1
    # With tensor_parallel > 1: sequence parallelism (Korthikanti et al. 2022) splits the norms,
    # residual adds and dropout between the TP regions by sequence (torchtitan's default, Megatron
    # `--sequence-parallel`); False keeps them whole on every GPU of the group (plain Megatron TP,
    # NeMo AutoModel `sequence_parallel: false`). No effect at tensor_parallel 1.
    sequence_parallel: bool = True
    pipeline_parallel: int = 1
    # Loading a full (unsharded) state dict into a ZeRO-3/FSDP model by gathering every parameter
    # on each GPU (FSDP1's summon_full_params path): "caused all parameters to be gathered into
    # each GPU, which can cause OOM" (Lightning-AI/pytorch-lightning PR #18190). False: meta-device
    # init and rank-0 broadcast, one unit at a time (HF/Accelerate, torchtune, torchtitan).
    full_state_dict_load: bool = False
    zero3_impl: Zero3Impl = "fsdp"
    # torch.compile on the model (torchtune's `compile: True`, torchtitan's `--compile`): Inductor
    # fuses the elementwise work between matmuls and launches kernels from generated code
    # (finetune.time counts what that saves). Memory is modelled as eager either way.
    compiled: bool = False
    train_embeddings: TrainEmbeddings = "off"
    # Padded (unpacked) data: the padded length of the longest micro-batch, i.e. the longest sample.
    # The step whose micro-batch holds it is padded to it, so it sets the memory peak; `seq_len`
    # is then the expected padded length of a micro-batch, which sets the time (see
    # `padded_batch_length`). None: packed data, every micro-batch is `seq_len` long.
    peak_seq_len: int | None = None
    # --- modelmem (issue 23): memory-model knobs ---
    # see MixedPrecision; only bf16-mixed has fp32 anywhere to autocast from
    mixed_precision: MixedPrecision = "fsdp"
    # QLoRA quantizes the output head too (frameworks that convert every nn.Linear, lm_head
    # included, e.g. bitsandbytes with llm_int8_skip_modules=[]); transformers' default keeps it bf16
    quantize_head: bool = False
    # LoRA adapters on the output head (PEFT target_modules including "lm_head"): r·(h + V) trained
    lora_head: bool = False
    # The standard loss sees fp32 logits: transformers' causal-LM loss upcasts them
    # (`logits.float()`), and autocast runs log_softmax / cross-entropy in fp32 anyway. False: a
    # model's own loss on 16-bit logits with no autocast around it, e.g. Qwen-1's remote code
    # (QWenLMHeadModel.forward calls CrossEntropyLoss on the lm_head output) under DeepSpeed's
    # fp16/bf16 engine, which casts the module instead of autocasting.
    logits_fp32: bool = True
    # --- modeltime (issue 23) ---
    kernels: Kernels = "plain"
    # --- modelmem (issue 23): the training loop holds the model's output object, and so its
    # logits, until after backward (`output = model(...); output.loss.backward(); output = None`,
    # AnswerDotAI/fsdp_qlora train.py; accelerate's example loops). False: transformers' Trainer,
    # whose compute_loss returns the loss alone, and torchtune, which `del logits` before backward.
    keeps_outputs: bool = False
    # FSDP1 units that hold LoRA adapters and frozen weights in one FlatParameter (a decoder-layer
    # wrap policy with use_orig_params=True, adapters not wrapped apart): the unit's whole flat
    # gradient exists, is kept (sharded) and is reduce-scattered, frozen part included
    # (finetune.memory.mixed_unit_gradient_bytes). PyTorch's FSDP docs: mixing
    # frozen and non-frozen parameters is supported with use_orig_params=True, "but ... the
    # gradient memory usage will be higher than expected (namely, equivalent to not freezing those
    # parameters)". False: adapters in units of their own (PEFT's fsdp_auto_wrap_policy, which
    # transformers' Trainer installs for LoRA) or FSDP2's per-parameter sharding.
    lora_in_fsdp_units: bool = False
    # --- modeltime (issue 23): packed documents, each attending only to itself. Packers that
    # pass each document's boundaries to FlashAttention's varlen kernel (axolotl
    # `sample_packing` with `flash_attention`, TRL `padding_free`, transformers'
    # DataCollatorWithFlattening: position_ids restart per document, and the flash path turns
    # them into cu_seqlens) compute attention within each document, not over the packed row.
    # The mean document length in tokens; None: attention spans the whole `seq_len` (torchtune
    # and torchtitan pack with one causal mask over the row unless asked otherwise).
    doc_len: float | None = None
    # --- modelmem (issue 23): torch DistributedDataParallel (sharding "none" on several GPUs)
    # all-reduces flat buckets, not the gradients themselves: the reducer allocates every bucket
    # at construction (`bucket.gradients`, torch/csrc/distributed/c10d/reducer.cpp), copies each
    # gradient into it as backward makes it and copies the reduced bucket back into `param.grad`,
    # so each GPU holds every trained gradient twice. gradient_as_bucket_view=True makes the
    # gradients views into the buckets instead (pytorch/pytorch PR #41954: peak memory falls by
    # about the gradients' size). False is the default of torch, of Accelerate's
    # DistributedDataParallelKwargs and so of the HF Trainer, whose `_wrap_model` passes only
    # find_unused_parameters, bucket_cap_mb and broadcast_buffers. True: gradient_as_bucket_view,
    # or FSDP NO_SHARD (fsdp_qlora's `--sharding_strategy ddp`), which all-reduces its flat
    # gradient in place. Which unsharded jobs torch DDP runs at all: `runs_torch_ddp`.
    ddp_bucket_view: bool = False
    # --- modelmem (issue 23): DeepSpeed ZeRO-1/2's gradient reduce buffers. With
    # contiguous_gradients (default on), every backward starts by allocating one flat buffer of
    # `reduce_bucket_size` elements in the 16-bit dtype, and a second with overlap_comm
    # (stage_1_and_2.py `setup_buckets`, called from the first gradient hook; released with the
    # partition after the epilogue), whatever the model's size. The elements both hold: DeepSpeed's
    # defaults are 5e8 and overlap_comm off below stage 3 (DeepSpeedZeroConfig: reduce_bucket_size
    # 5e8, overlap_comm None → stage == 3); a config's "auto" is hidden_size² (transformers'
    # DeepSpeed integration), Qwen's ds_config_zero2.json 2 × 2e8 (overlap_comm on), LLaMA-Factory's
    # ds_z2_config.json 5e8 (overlap_comm off). ZeRO-3 under DeepSpeed allocates one such
    # buffer of `reduce_bucket_size` elements per communication dtype when it sets up the
    # optimizer (stage3.py `_setup_for_real_optimizer`: "IPG", `bucket.buffer = torch.empty(
    # self.reduce_bucket_size, ...)` under contiguous_gradients) and keeps it for the run: the same
    # knob is that one buffer's elements there. None: what the common configs give
    # (`finetune.memory.ds_reduce_elements`): 5e8 under ZeRO-2 (DeepSpeed's default, LLaMA-Factory's
    # ds_z2_config.json), hidden_size² under ZeRO-3, whose configs say "auto" (Qwen's
    # ds_config_zero3.json, axolotl's zero3_bf16.json, LLaMA-Factory's ds_z3_config.json).
    ds_reduce_buffer_elements: float | None = None
    # --- modelmem (issue 23): FSDP1 accumulating under `no_sync`. The HF Trainer wraps every
    # micro-batch but an optimizer step's last in `accelerator.no_sync` (all but DeepSpeed), which
    # for an FSDP1 model is `FullyShardedDataParallel.no_sync`; torch's FSDP1 `_post_backward_hook`
    # then returns before the reduce-scatter and `flat_param.grad` stays unsharded, accumulating
    # across the micro-batches ("`.grad` remains the unsharded gradient from prior `no_sync()`
    # iterations", `_finalize_params`). So each GPU holds the trained FlatParameters' whole
    # gradient, and reduce-scatters once per optimizer step. False: FSDP2 (torchtune, torchtitan,
    # Accelerate's fully_shard, which has no `no_sync`), reduce-scattering every micro-batch. Only
    # for FSDP zero3 / hybrid with grad_accumulation > 1. CPU offload included: the unsharded
    # gradient is autograd's, on the GPU (`FlatParamHandle.prepare_gradient_for_backward` keeps a
    # `.grad` of the unsharded size as it is), and torch's FSDP docs list "gradient accumulation
    # outside no_sync() when using CPU offloading" as unsupported, so offloaded FSDP1 jobs that
    # accumulate do it this way.
    fsdp_no_sync: bool = False

    def __post_init__(self) -> None:
        if min(self.seq_len, self.micro_batch, self.lora_rank, self.grad_accumulation) < 1:
            raise ValueError(f"seq_len, micro_batch, lora_rank and grad_accumulation must be ≥ 1: {self}")
        if self.offload and self.sharding == "hybrid":
            raise ValueError("offload is modelled for zero2 / zero3 only; use sharding='zero3' with offload")
        if self.offload and self.sharding == "none":
            raise ValueError("offload needs sharding='zero2' or 'zero3' (DeepSpeed/FSDP CPU offload)")
        if self.lora_dropout is not None and not (0.0 <= self.lora_dropout < 1.0):
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if not (math.isfinite(self.padding_efficiency) and 0.0 < self.padding_efficiency <= 1.0):
            raise ValueError(f"padding_efficiency must be in (0, 1], got {self.padding_efficiency}")
        if min(self.tensor_parallel, self.pipeline_parallel) < 1:
            raise ValueError("tensor_parallel and pipeline_parallel must be ≥ 1 (1 = not used)")
        if self.peak_seq_len is not None and self.peak_seq_len < self.seq_len:
            raise ValueError(
                f"peak_seq_len {self.peak_seq_len} is below seq_len {self.seq_len}: the longest "
                "micro-batch cannot be shorter than the expected one"
            )
        if self.train_embeddings != "off" and self.method == "full":
            raise ValueError(
                "full fine-tuning already trains the embedding and the head; train_embeddings "
                "(PEFT modules_to_save) applies to lora and qlora"
            )
        self._check_memory_knobs()
        self._check_documents()

    def _check_documents(self) -> None:
        if self.doc_len is None:
            return
        if not (math.isfinite(self.doc_len) and 0.0 < self.doc_len < self.seq_len):
            raise ValueError(
                f"doc_len {self.doc_len:g} must be between 0 and seq_len {self.seq_len}: it is the "
                "mean length of the documents packed into each sequence (leave it out when every "
                "sequence is one document)"
            )
        if self.padding_efficiency < 1.0 or self.peak_seq_len is not None:
            raise ValueError(
                "doc_len describes packed data (documents concatenated, attention within each); "
                "padded data has one sample per row: give one or the other"
            )
        if self.attention_kernel == "eager":
            raise ValueError(
                "doc_len needs a fused varlen attention kernel (attention='flash', 'native' or 'flash1'): "
                "eager attention cannot keep packed documents apart without a full s×s mask"
            )

    def _check_memory_knobs(self) -> None:
        elements = self.ds_reduce_buffer_elements
        if elements is not None and not (math.isfinite(elements) and elements >= 0):
            raise ValueError(
                f"ds_reduce_buffer_elements must be a finite count ≥ 0, got {self.ds_reduce_buffer_elements}"
            )
        if self.lora_in_fsdp_units and self.method == "full":
            raise ValueError(
                "lora_in_fsdp_units places LoRA adapters in FSDP units: use method='lora' or 'qlora'"
            )
        if self.mixed_precision == "none" and self.precision != "bf16-mixed":
            raise ValueError(
                "mixed_precision='none' describes bf16 modules with PEFT's fp32 adapters (a plain loop, no "
                "autocast): it needs precision='bf16-mixed' (bf16-pure keeps the adapters in bf16)"
            )
        if self.mixed_precision == "autocast" and self.precision != "bf16-mixed":
            raise ValueError(
                "mixed_precision='autocast' keeps fp32 modules under torch.autocast: it needs "
                "precision='bf16-mixed' (bf16-pure has no fp32 copy to autocast from)"
            )
        if self.quantize_head and self.method != "qlora":
            raise ValueError("quantize_head quantizes the output head of a QLoRA base: use method='qlora'")
        if self.lora_head and self.method == "full":
            raise ValueError("lora_head puts LoRA adapters on the output head: use method='lora' or 'qlora'")
        if self.lora_head and self.train_embeddings != "off":
            raise ValueError(
                "lora_head and train_embeddings both claim the output head (PEFT cannot wrap one module "
                "in LoRA and modules_to_save): choose one"
            )

    @property
    def chunked_ce(self) -> bool:
        """Whether the loss avoids the full fp32 logits (the marts' `chunked_ce` column)."""
        return self.loss != "standard"

    @property
    def attention_kernel(self) -> Attention:
        """The attention kernel the job's stack runs: the fused stack loads FlashAttention-2 where
        `attention` says eager (it never runs eager attention); otherwise the kernel asked for.
        (A model can still force eager: `finetune.memory.attention_impl`.)"""
        return "flash" if self.kernels == "fused" and self.attention == "eager" else self.attention

    @property
    def attention_span(self) -> float:
        """Keys each query of the packed row could attend to on average, before the causal
        half: `seq_len`, or with packed documents (`doc_len`) E[L²]/E[L] of their lengths
        (`attended_length`): a document of L tokens computes L² scores over L tokens."""
        if self.doc_len is None:
            return float(self.seq_len)
        return attended_length(self.doc_len, self.seq_len)

    @property
    def memory_seq_len(self) -> int:
        """The sequence length memory is sized at: the longest padded micro-batch, or seq_len."""
        return self.peak_seq_len if self.peak_seq_len is not None else self.seq_len

    @property
    def dropout(self) -> float:
        if self.method == "full":
            return 0.0
        return DEFAULT_LORA_DROPOUT[self.method] if self.lora_dropout is None else self.lora_dropout

    @property
    def bnb_base(self) -> bool:
        """Whether the frozen base linears are bitsandbytes 4-bit (NF4 QLoRA), not GPTQ."""
        return self.method == "qlora" and self.quant != "gptq"

    @property
    def accumulates_unsharded(self) -> bool:
        """Whether FSDP1 keeps unsharded gradients between optimizer steps (`fsdp_no_sync`)."""
        return (
            self.fsdp_no_sync
            and self.grad_accumulation > 1
            and self.sharding in ("zero3", "hybrid")
            and self.zero3_impl == "fsdp"
        )

    @property
    def runs_torch_ddp(self) -> bool:
        """Whether this job, unsharded on several GPUs, is torch's DistributedDataParallel: LoRA and
        QLoRA (the HF Trainer wraps any model in it), full fine-tuning of fp32 modules under
        autocast or of bf16 ones in pure bf16. Full fine-tuning of bf16 modules with an fp32
        master (bf16-mixed, mixed_precision "fsdp") is held only by frameworks that reduce on
        their own: FSDP NO_SHARD with MixedPrecision, DeepSpeed's bf16 engine, Megatron's DDP into
        its fp32 main_grad buffer."""
        return not (
            self.method == "full" and self.precision == "bf16-mixed" and self.mixed_precision == "fsdp"
        )

    @property
    def runs_deepspeed(self) -> bool:
        """Whether DeepSpeed shards the job: ZeRO-2 always (this model's zero2 is DeepSpeed's),
        ZeRO-3 under `zero3_impl` deepspeed; FSDP runs the other ZeRO-3 and hybrid jobs, DDP none."""
        return self.sharding == "zero2" or (self.sharding == "zero3" and self.zero3_impl == "deepspeed")

    @property
    def mixes_fsdp_units(self) -> bool:
        """Whether FSDP1 holds LoRA adapters and frozen weights in one FlatParameter
        (`lora_in_fsdp_units`) under ZeRO-3/HSDP: only FSDP's flat units mix (DeepSpeed partitions
        per parameter and keeps only the gradients that exist; FSDP2 shards per parameter too)."""
        return (
            self.lora_in_fsdp_units
            and self.method != "full"
            and self.sharding in ("zero3", "hybrid")
            and self.zero3_impl == "fsdp"
        )

    @property
    def fp32_adapters(self) -> bool:
        """Whether each LoRA-adapted linear runs its adapter in fp32, eager (`mixed_precision`
        none): PEFT keeps adapters in fp32 over a bf16 base (get_peft_model's
        autocast_adapter_dtype=True, the default, which is the bf16-mixed LoRA of this model) and,
        with no autocast, casts each adapter's input to fp32 and the sum back to bf16
        (peft/tuners/lora/layer.py Linear.forward, bnb.py Linear4bit.forward). Not under sharding
        (FSDP MixedPrecision and DeepSpeed's bf16 engine cast the adapters to bf16 for compute),
        fused kernels or torch.compile."""
        return self._eager_unsharded_fp32_adapters and self.mixed_precision == "none"

    @property
    def adapter_input_round_trip(self) -> bool:
        """Whether each LoRA-adapted linear casts its bf16 input to fp32 and autocast casts it back
        to bf16 (bf16 modules under the HF Trainer's autocast, bf16=True: `mixed_precision` fsdp on
        one GPU or DDP): lora.Linear.forward casts the input to its fp32 adapter's dtype whatever
        autocast does. bitsandbytes' Linear4bit skips that cast under autocast
        (`requires_conversion = not torch.is_autocast_enabled()`), so QLoRA pays nothing."""
        return (
            self._eager_unsharded_fp32_adapters and self.method == "lora" and self.mixed_precision == "fsdp"
        )

    @property
    def _eager_unsharded_fp32_adapters(self) -> bool:
        """PEFT's fp32 adapters (bf16-mixed LoRA/QLoRA) in an eager, unfused, unsharded job: the
        jobs in which nothing but the adapter's own code decides its dtype."""
        return (
            self.method != "full"
            and self.precision == "bf16-mixed"
            and self.sharding == "none"
            and self.kernels == "plain"
            and not self.compiled
        )


def knobs_without_effect(job: Job, n_gpus: int) -> list[tuple[str, str]]:
    """The knobs `job` sets away from their defaults that change nothing for it on `n_gpus` GPUs,
    as (Job field, why): a knob that describes another sharding, method or setting. Nothing is
    refused for it (a sharding chosen per offer may still make it count); the callers say it."""
    found: list[tuple[str, str]] = []
    if job.method == "full":
        for name in ("lora_rank", "lora_targets", "lora_dropout"):
            if getattr(job, name) != _JOB_DEFAULTS[name]:
                found.append((name, "full fine-tuning has no LoRA adapters"))
    if job.quant != _JOB_DEFAULTS["quant"] and job.method != "qlora":
        found.append(("quant", f"only QLoRA quantizes the base; {job.method} keeps it in 16 bits"))
    if job.checkpoint_policy != "full" and not job.grad_checkpointing:
        found.append(("checkpoint_policy", "without gradient checkpointing nothing is recomputed"))
    if job.optimizer_impl != "foreach" and job.optimizer != "adamw":
        found.append(
            ("optimizer_impl", f"foreach and fused are torch AdamW's implementations, not {job.optimizer}'s")
        )
    if not job.sequence_parallel and job.tensor_parallel == 1:
        found.append(
            ("sequence_parallel", "sequence parallelism splits tensor-parallel groups; there are none")
        )
    if job.zero3_impl != "fsdp" and job.sharding != "zero3":
        found.append(("zero3_impl", f"it picks ZeRO-3's implementation, and the sharding is {job.sharding}"))
    if job.full_state_dict_load and not (job.sharding == "zero3" and n_gpus > 1):
        found.append(("full_state_dict_load", "only a ZeRO-3/FSDP job on several GPUs loads by gathering"))
    if job.ddp_bucket_view and not (job.sharding == "none" and n_gpus > 1 and job.runs_torch_ddp):
        found.append(("ddp_bucket_view", _ddp_bucket_view_idle(job, n_gpus)))
    if job.fsdp_no_sync and not (job.accumulates_unsharded and n_gpus > 1):
        found.append(("fsdp_no_sync", _no_sync_idle(job, n_gpus)))
    if job.ds_reduce_buffer_elements is not None and not job.runs_deepspeed:
        found.append(
            (
                "ds_reduce_buffer_elements",
                "it sizes DeepSpeed's reduce buffer (sharding zero2, or zero3 with --zero3-impl deepspeed)",
            )
        )
    if job.lora_in_fsdp_units and not job.mixes_fsdp_units:
        found.append(
            ("lora_in_fsdp_units", "only FSDP's flat units mix parameters (sharding zero3 or hybrid, FSDP)")
        )
    return found


# each Job field's default, what a knob "set away from its default" is measured against
_JOB_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Job)}


def _ddp_bucket_view_idle(job: Job, n_gpus: int) -> str:
    """Why `ddp_bucket_view` changes nothing for `job` on `n_gpus` (it describes DDP's buckets)."""
    if job.sharding != "none":
        return f"it describes torch DDP's all-reduce buckets; sharding {job.sharding} shards gradients"
    if n_gpus <= 1:
        return "one GPU runs no DDP"
    return "full fine-tuning of bf16 modules with an fp32 master is not reduced by torch DDP"


def _no_sync_idle(job: Job, n_gpus: int) -> str:
    """Why `fsdp_no_sync` changes nothing for `job` on `n_gpus` (FSDP1's unsharded accumulation)."""
    if job.sharding not in ("zero3", "hybrid") or job.zero3_impl != "fsdp":
        return "no_sync is FSDP1's (sharding zero3 or hybrid, FSDP)"
    if job.grad_accumulation <= 1:
        return "with one micro-batch per optimizer step there is nothing to accumulate"
    return "one GPU: FSDP does not shard, so there is no reduce-scatter to defer"


class OutsideModelError(ValueError):
    """The job asks for something the memory/time model does not describe."""


def require_data_parallel(job: Job) -> None:
    """Refuse pipeline-parallel jobs with one line that says what to do instead.

    Pipeline parallelism adds a bubble of (p−1)/m of the step (Narayanan et al. 2021,
    arXiv:2104.04473, §2.2) and keeps m micro-batches of activations in flight; it is not in this
    model, so its figures would be wrong rather than approximate. Tensor parallelism (with
    sequence parallelism) is: `finetune.tensor_parallel`, which also refuses what it cannot
    describe once the model and the GPUs are known.
    """
    if job.pipeline_parallel > 1:
        raise OutsideModelError(
            f"pipeline_parallel={job.pipeline_parallel}: the model covers data parallelism (none / "
            "zero2 / zero3 = DDP, ZeRO-2, ZeRO-3/FSDP) and tensor parallelism inside a node; "
            "estimate the same job with sharding='zero3' (and tensor_parallel if you need it) "
            "over the same GPUs instead"
        )


def _truncated_exponential_rate(mean_len: float, max_len: float) -> float:
    """λ of the density ∝ exp(−λx) on [0, max_len] whose mean is `mean_len` (bisection).

    That density is the maximum-entropy one for a stated mean on a bounded range: the least
    assuming shape that honours the two figures a dataset card or a results file gives. λ < 0
    when the mean is above max_len / 2, 0 (uniform) at max_len / 2.
    """

    def mean(lam: float) -> float:
        return max_len * _law_moments(lam * max_len)[0]

    # λ·max_len from −700 (means within max_len / 700 of max_len; e^700 is near a float's
    # limit) to 1e6 (means down to max_len / 1e6)
    lo, hi = -700.0 / max_len, 1e6 / max_len
    for _ in range(200):
        mid = (lo + hi) / 2
        if mean(mid) > mean_len:  # the mean falls as λ grows
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def attended_length(mean_len: float, max_len: float) -> float:
    """E[L²] / E[L] of document lengths with the stated mean, at most `max_len` long.

    A document of L tokens under causal attention computes L²/2 scores for its L tokens, so
    per token of packed data the scores are E[L²] / (2·E[L]): the attention of a row as long as
    this length. Lengths follow the maximum-entropy law for the mean on [0, max_len]
    (`_truncated_exponential_rate`, as for padded data): about twice the mean for short
    documents (an exponential has E[L²] = 2·E[L]²), `max_len` as the mean approaches it.
    """
    if not (0 < mean_len < max_len):
        raise ValueError(f"need 0 < mean_len < max_len, got {mean_len}, {max_len}")
    first, second = _law_moments(_truncated_exponential_rate(mean_len, max_len) * max_len)
    return max_len * second / first


def _law_moments(t: float) -> tuple[float, float]:
    """E[y] and E[y²] of y = length / max_len under the density ∝ exp(−t·y) on [0, 1]."""
    if t >= 0:
        return _decaying_moments(t)
    # mass near max_len: the moments of 1 − y, which decays at −t, turned back
    near_first, near_second = _decaying_moments(-t)
    return 1 - near_first, 1 - 2 * near_first + near_second


def _decaying_moments(rate: float) -> tuple[float, float]:
    """E[z] and E[z²] for the density ∝ exp(−rate·z) on [0, 1], rate ≥ 0.

    ∫ zᵏ·e^(−rz) dz over [0, 1] is (1 − e^(−r)) / r, (1 − e^(−r)(1 + r)) / r² and
    (2 − e^(−r)(r² + 2r + 2)) / r³ for k = 0, 1, 2; below r = 0.01, where those cancel, their
    Taylor series Σ (−r)ⁿ / (n!·(n + k + 1)) to r³ (exact to r⁴ ≈ 1e-8).
    """
    r = rate
    if r < 1e-2:
        zeroth = 1 - r / 2 + r**2 / 6 - r**3 / 24
        first = 1 / 2 - r / 3 + r**2 / 8 - r**3 / 30
        second = 1 / 3 - r / 4 + r**2 / 10 - r**3 / 36
    else:
        decay = math.exp(-r)
        zeroth = -math.expm1(-r) / r
        first = (1 - decay * (1 + r)) / r**2
        second = (2 - decay * (r * r + 2 * r + 2)) / r**3
    return first / zeroth, second / zeroth


def padded_batch_length(mean_len: float, max_len: float, micro_batch: int) -> float:
    """Expected padded length of a micro-batch padded to its longest sample.

    Sample lengths follow the maximum-entropy law for the stated mean and maximum
    (`_truncated_exponential_rate`); the padded length is the expected maximum of `micro_batch`
    independent samples, E[max] = ∫₀ᴸ (1 − F(x)ᵇ) dx. Divide `mean_len` by it for the
    `padding_efficiency` of a padded (unpacked) dataset.
    """
    if not (0 < mean_len < max_len) or micro_batch < 1:
        raise ValueError(f"need 0 < mean_len < max_len and micro_batch ≥ 1, got {mean_len}, {max_len}")
    lam = _truncated_exponential_rate(mean_len, max_len)

    def cdf(x: float) -> float:
        if abs(lam * max_len) < 1e-9:
            return x / max_len
        return math.expm1(-lam * x) / math.expm1(-lam * max_len)

    # beyond 60 / λ the integrand is below micro_batch · e^-60: integrate where it lives, so
    # short samples under a long maximum get as many panels as any other law
    upper = min(max_len, 60.0 / lam) if lam > 0 else max_len
    steps = 2000  # Simpson's rule; the integrand is smooth, 2000 panels is exact to < 0.01 token
    h = upper / steps
    total = 0.0
    for i in range(steps + 1):
        weight = 1 if i in (0, steps) else (4 if i % 2 else 2)
        total += weight * (1 - cdf(i * h) ** micro_batch)
    return total * h / 3


@dataclass(frozen=True)
class PaddedShape:
    """A padded dataset's micro-batch shape from its mean and longest sample (tokens)."""

    mean_len: float
    max_len: int
    expected_len: float  # expected padded length of one micro-batch (`padded_batch_length`)
    seq_len: int  # expected_len rounded: the Job's seq_len, what the time model computes
    padding_efficiency: float  # mean_len / expected_len: the share of computed tokens that are real


def padded_shape(mean_len: float, max_len: int, micro_batch: int) -> PaddedShape:
    """Job shape for padded (unpacked) data: time at the expected padded length, memory at max_len.

    Raises ValueError with one line saying what to fix for a mean above the maximum or a length
    below one token. A mean equal to the maximum means every sample has that length: no padding.
    """
    if not (math.isfinite(mean_len) and mean_len >= 1) or max_len < 1:
        raise ValueError(f"sample lengths must be ≥ 1 token, got mean {mean_len:g} and max {max_len}")
    if mean_len > max_len:
        raise ValueError(
            f"mean sample length {mean_len:g} is above the longest sample {max_len}: "
            "the mean cannot exceed the maximum"
        )
    if micro_batch < 1:
        raise ValueError(f"micro_batch must be ≥ 1, got {micro_batch}")
    expected = float(max_len) if mean_len == max_len else padded_batch_length(mean_len, max_len, micro_batch)
    seq_len = min(max_len, max(1, round(expected)))
    return PaddedShape(mean_len, max_len, expected, seq_len, min(1.0, mean_len / expected))


# --- the experiment around the training run (bill: issue 21) -----------------------------------

# What is downloaded when a run ends: the adapter alone, the base with the adapter merged in, or
# nothing (the result stays on the provider's storage).
Download = Literal["merged", "adapter", "none"]
# Checkpoint every half hour unless asked otherwise: on spot, each interruption then loses a
# quarter of an hour of work on average (finetune.cost.expected_spot_hours).
DEFAULT_CHECKPOINT_EVERY_HOURS = 0.5
# Without --dataset-gb, the dataset is sized at 4 bytes per token: UTF-8 English text runs about
# 4 characters per token for GPT/Llama-style BPE tokenizers (OpenAI's help article "What are
# tokens and how to count them?", help.openai.com, the rule of thumb checked 2026-12-02), and the
# same corpus pre-tokenized as int32 ids is 4 bytes per token too.
DATASET_BYTES_PER_TOKEN = 4.0


def default_download(method: Method) -> Download:
    """Adapters for LoRA/QLoRA (what PEFT's save_pretrained writes), merged weights for full
    fine-tuning, which has no adapter to download."""
    return "merged" if method == "full" else "adapter"


@dataclass(frozen=True)
class Experiment:
    """What a bill needs beyond one training run: the data it carries and how often it runs.

    `dataset_gb` None: the dataset's tokens × DATASET_BYTES_PER_TOKEN. A checkpoint is written
    every `checkpoint_every_hours` of training, or every `checkpoint_every_steps` optimizer steps
    (at most one of the two; neither: DEFAULT_CHECKPOINT_EVERY_HOURS). `download` None:
    `default_download(method)`. `runs` training runs with `idle_hours` of inspection between
    consecutive ones (runs − 1 gaps).
    """

    dataset_gb: float | None = None
    checkpoint_every_hours: float | None = None
    checkpoint_every_steps: int | None = None
    download: Download | None = None
    runs: int = 1
    idle_hours: float = 0.0

    def __post_init__(self) -> None:
        if self.checkpoint_every_hours is not None and self.checkpoint_every_steps is not None:
            raise ValueError("checkpoint every so many hours or every so many steps: give one, not both")
        if self.checkpoint_every_hours is not None and not (
            math.isfinite(self.checkpoint_every_hours) and self.checkpoint_every_hours > 0
        ):
            raise ValueError(f"checkpoint interval must be > 0 hours, got {self.checkpoint_every_hours}")
        if self.checkpoint_every_steps is not None and self.checkpoint_every_steps < 1:
            raise ValueError(f"checkpoint interval must be ≥ 1 step, got {self.checkpoint_every_steps}")
        if self.runs < 1:
            raise ValueError(f"runs must be ≥ 1, got {self.runs}")
        if not (math.isfinite(self.idle_hours) and self.idle_hours >= 0):
            raise ValueError(f"idle time must be ≥ 0 hours, got {self.idle_hours}")
        if self.dataset_gb is not None and not (math.isfinite(self.dataset_gb) and self.dataset_gb >= 0):
            raise ValueError(f"dataset size must be ≥ 0 GB, got {self.dataset_gb}")

    @property
    def every_hours(self) -> float | None:
        """The interval in hours when it is not stated in steps (the default when neither is)."""
        if self.checkpoint_every_steps is not None:
            return None
        return (
            self.checkpoint_every_hours
            if self.checkpoint_every_hours is not None
            else DEFAULT_CHECKPOINT_EVERY_HOURS
        )


@dataclass(frozen=True)
class FinetuneJob:
    """One row of finetune_jobs.csv: a model, the job knobs and the data it trains on."""

    job_id: str
    model_id: str
    job: Job
    dataset_tokens: int
    epochs: float
    experiment: Experiment = Experiment()

    def __post_init__(self) -> None:
        if self.experiment.download == "adapter" and self.job.method == "full":
            raise ValueError("full fine-tuning trains no adapter: download merged weights or none")

    @property
    def dataset_gb(self) -> float:
        """The dataset's size in GB (1e9 bytes): as stated, or from its tokens."""
        if self.experiment.dataset_gb is not None:
            return self.experiment.dataset_gb
        return self.dataset_tokens * DATASET_BYTES_PER_TOKEN / 1e9

    @property
    def download(self) -> Download:
        return self.experiment.download or default_download(self.job.method)

    @property
    def train_tokens(self) -> float:
        return self.dataset_tokens * self.epochs


def _bool(value: str) -> bool:
    return value.strip().lower() in ("true", "1", "yes")


_T = TypeVar("_T")


def _choice(row: Mapping[str, str], column: str, allowed: tuple[_T, ...], value: str | None = None) -> _T:
    """`row[column]` (or `value`) as one of `allowed`, the values of the column's Literal type."""
    text = row[column] if value is None else value
    for option in allowed:
        if option == text:
            return option
    raise ValueError(f"finetune_jobs.csv: {column}={text!r} is not one of {list(allowed)}; fix the seed row")


def job_from_seed_row(row: Mapping[str, str]) -> FinetuneJob:
    """A FinetuneJob from one row of warehouse/seeds/finetune_jobs.csv."""
    loss = row.get("loss") or ("chunked" if _bool(row.get("chunked_ce") or "false") else "standard")
    return FinetuneJob(
        job_id=row["job_id"],
        model_id=row["model_id"],
        job=Job(
            method=_choice(row, "method", get_args(Method)),
            precision=_choice(row, "precision", get_args(Precision)),
            optimizer=_choice(row, "optimizer", get_args(Optimizer)),
            seq_len=int(row["seq_len"]),
            micro_batch=int(row["micro_batch"]),
            grad_checkpointing=_bool(row["grad_checkpointing"]),
            attention=_choice(row, "attention", get_args(Attention)),
            lora_rank=int(row["lora_rank"]),
            lora_targets=_choice(row, "lora_targets", get_args(LoraTargets)),
            loss=_choice(row, "loss", get_args(Loss), loss),
            sharding=_choice(row, "sharding", get_args(Sharding)),
            offload=_bool(row["offload"]),
        ),
        dataset_tokens=int(row["dataset_tokens"]),
        epochs=float(row["epochs"]),
    )
