"""Wall-clock time of one fine-tuning job: a per-step roofline (pure).

Units: FLOPs, bytes and seconds inside; hours out (`_hours`). Compute in TFLOPS (1e12 FLOP/s),
memory bandwidth in GB/s (1e9 B/s, `memory_bandwidth_gbps` in gpus.csv), links in **gigabits** per
second (`_gbits_per_s` arguments of `estimate_time`).

One micro-step on one GPU processes T = seq_len × micro_batch tokens (padding included). Its time
is the slowest of what the GPU must do and what the CPU must dispatch (kernels run asynchronously,
so the launch floor only shows when the GPU work is shorter):

* matmuls: FLOPs / (dense peak × GEMM_EFFICIENCY; parts whose bf16 rate with FP32 accumulation
  is half their tensor rate, gpus.csv `half_rate_accumulate` (GeForce cards among them), reach
  that rated figure: GEMM_EFFICIENCY_HALF_RATE),
  but never less than reading the weights once per pass at memory bandwidth (small steps are
  bound by the weight traffic, not the FLOPs). Passes: forward; input gradient; weight gradient
  (full fine-tuning only: frozen weights need none); recompute (gradient checkpointing). Where
  the GPU's SM count is known, each GEMM's output shape (`gemm_shapes`) also pays its tile and
  wave quantization (`tile_efficiency`);
* attention core: FlashAttention's causal kernels skip the masked half of the s² blocks; backward
  is 2.5× forward (FlashAttention-2, Dao 2023, §3.2: five matmuls against two); at the kernel
  efficiency of the GPU generation, FA2-class (ATTENTION_EFFICIENCY; higher on parts with fewer
  tensor FLOPs per SM per clock than the part it was measured on, `narrow_tensor_attention_share`),
  the generation's own kernel (`Job.attention` "native": NATIVE_ATTENTION_EFFICIENCY) or FA1-class
  ("flash1": FA2's figure over FA2_SPEEDUP_OVER_FA1); eager attention computes and stores the full
  s² scores;
* elementwise work (norms, rotary, activations, residuals, LoRA adapters, dropout): bytes at
  memory bandwidth (`_elementwise_bytes_per_token` lists them; a compiled job, `Job.compiled`,
  moves only each fused region's inputs and outputs). This term is why H100s reach a
  lower fraction of their peak than A100s: 295 dense FLOPs per byte of bandwidth against 153;
* QLoRA: every pass that needs the frozen weights dequantizes them (read the 4-bit weight and its
  constants, write bf16): a per-step cost proportional to parameters, not to tokens, in bytes and
  in the operators each rebuild dispatches (NF4_DEQUANT_OPS; the head too under `quantize_head`).
  A GPTQ base (`quant="gptq"`) is dequantized by a chain of PyTorch ops
  (GPTQ_DEQUANT_BYTES_PER_WEIGHT) in forward and each recompute, and each linear's input is cast
  to fp16 for the fp16 GEMM;
* the kernel stack (`Job.kernels`): plain counts transformers' and PEFT's eager ops; fused
  (FlashAttention-2, Liger / Unsloth kernels) moves each fused kernel's inputs and outputs once,
  dispatches fewer ops and replaces the fp32 loss with linear-cross-entropy;
* data-parallel communication over the link (NVLink, PCIe P2P, host-staged PCIe or the network):
  overlapped with compute when the GPUs talk peer to peer; added to it when they cannot (GeForce
  cards have no P2P, nor do GPUs stated as `--interconnect host`: NCCL stages every transfer
  through host memory);
* the CPU's dispatch floor: eager PyTorch pays ~10 µs per operator; a compiled job's generated
  code pays the CUDA launch per fused kernel (~5 µs);
* autocast over fp32 modules (`Job.mixed_precision == "autocast"`): every linear call casts its
  fp32 weight to bf16 (forward and each recompute; the casts' backward casts trained weights'
  gradients back to fp32), casts its fp32 input, and the residual stream, norms and rotary run
  in fp32 (`_autocast_elementwise_bytes_per_token`);
* the loss over the vocabulary: the b·s·V logits are upcast, soft-maxed and differentiated by
  elementwise kernels, bytes at memory bandwidth by loss (LOSS_BYTES_PER_LOGIT);
* once per optimizer step (every `grad_accumulation` micro-steps): gradient clipping and the
  optimizer update, memory bound over parameter, gradient and state bytes, one pass per kernel
  (foreach AdamW runs eight, fused one); over PCIe for the part that is offloaded or, for paged
  optimizers, paged out because it does not fit;
* FSDP CPU offload (ZeRO-3 with `offload`): each GPU's parameter shards are copied up from the
  host before forward and before backward, over its PCIe link, on FSDP's pre-unshard stream
  that the all-gathers wait for: priced with the communication (hidden when it overlaps);
* FSDP1 units mixing LoRA adapters with frozen weights (`Job.lora_in_fsdp_units`): the whole
  unit's flat gradient is reduce-scattered, frozen part included;
* ZeRO-3/FSDP: the first unit's all-gather and the last unit's reduce-scatter of every step have
  no compute to hide behind (FSDP prefetches one unit ahead): exposed on top of the overlap.
  Host-staged traffic (no P2P) also shares the node's host memory bandwidth between its GPUs;
* hybrid sharding (HSDP): ZeRO-3 over the GPUs of one node on the in-node link, then each GPU's
  gradient shard all-reduced with its replicas in the other nodes over its share of the network,
  after the in-node reduce-scatter on the same stream (`network_s`);
* tensor parallelism with sequence parallelism (`finetune.tensor_parallel`): each GPU computes
  its TP rank's slice of every layer (t times fewer heads and intermediate columns; the norms on
  1/t of the tokens under sequence parallelism), data parallelism runs over the n/t groups, and
  the group's collectives on the activations cross the node's links on the critical path
  (`tensor_parallel_s`).

Gradient checkpointing recomputes the decoder layers' forward (the head is outside them): all of
it under the `full` policy; under torchtitan's `selective` per-op policy the even-numbered matmuls
of each layer and its elementwise work, but not the attention core (its output is saved).
Pipeline-parallel jobs are refused (`require_data_parallel`).

Throughput counts real tokens: T × padding_efficiency per micro-step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from finetune.architecture import (
    ModelSpec,
    _attention_params_per_layer,
    _mlp_params_per_layer,
    layer_params,
    linear_params,
    matmul_params,
)
from finetune.job import Job, require_data_parallel
from finetune.memory import (
    BF16_BYTES,
    GB,
    OPTIMIZER_STATE_BYTES,
    _copy_bytes_per_param,
    _frozen_weight_bytes,
    _module_bytes,
    adapted_linears,
    adapter_params,
    attention_impl,
    compute_gradient_bytes,
    ddp_gradient_bytes,
    embedding_copy_params,
    memory_per_gpu,
    mixed_unit_gradient_bytes,
    quantized_bytes_per_param,
    require_expressible,
    trainable_params,
    trains_head,
)
from finetune.tensor_parallel import rank_model, require_tensor_parallel

# --- Constants. Each is a physical quantity with its source; none is fitted to a measured row. ---

# Share of dense peak that large bf16 GEMMs reach: the Maximum Achievable Matmul FLOPS (MAMF)
# table (stas00/ml-engineering, compute/accelerator/README.md @744d01e: the mean of 100 matmuls at
# the best shape found) measures 80.3 % on H100 SXM, 86.9 % on A100 SXM, 81.1 % on A100 PCIe,
# 83.8 % on GH200. A part whose own measured rate is lower (gpus.csv `matmul_tflops`: B200
# 77.6 %, GB200, MI300X 51.4 %, MI325X, MI355X; for parts MAMF never measured, a table of square
# bf16 torch.mm that reads within 3 % of MAMF where both measured: H100 PCIe 65.6 %, L40S 74.4 %,
# L4 58.6 %, RTX A6000 79.7 %) is held to it: no training GEMM beats the best
# shape's mean (`Accelerator.matmul_share`). A part measured higher keeps 0.80: A100's 86.9 %
# is at its best shape, and pricing the A100 rows at it moved them further from their
# measurements (benchmarks/README.md, "Workstation and Ada rows").
GEMM_EFFICIENCY = 0.80
# GeForce cards run bf16/fp16 tensor math with FP32 accumulation (what training uses, and what
# gpus.csv rates them at) at half the FP16-accumulate rate (NVIDIA Ada GPU Architecture
# whitepaper, appendix table: RTX 4090 165.2 TFLOPS with FP32 accumulate, 330.3 with FP16
# accumulate; GA102 whitepaper: RTX 3090 71 / 142; RTX Blackwell whitepaper: RTX 5090 209.5 /
# 419). At half rate the tensor cores draw operands and power at half the pace, so what holds
# full-rate parts to GEMM_EFFICIENCY does not bind: measured large bf16 torch.matmul reaches the
# rated figure or more (zzc0721/torch-performance-test-data database.md @0785868, best of 1024²…
# 10240²: RTX 4090 24 GB 170.06, 173.31, 162.39, 163.09 of 165.2 = 98–105 %; RTX 3090 76.34,
# 76.68, 76.58 of 71 = 108 %; RTX 5090 236.03, 242.18 of 209.5 = 113–116 %; in the same table
# full-rate parts reach A100 SXM 264.53 of 312 = 85 %, H100 789.24 of 989 = 80 %, RTX A6000
# 123.34 of 154.8 = 80 %, as GEMM_EFFICIENCY says). We take the rated figure itself, 1.0: what
# is above it is GPU Boost clocking past the rated boost clock, which varies by board and
# cooling and which no datasheet states. Two datacenter parts are rated the same way and measure
# the same: the L20 (119.5 rated, 114.14 measured, database.md @9d82827) and the A10G (70 rated,
# 69.47 measured, issue #126 of the same repository); gpus.csv `half_rate_accumulate` marks
# which parts these are, the L40 (181, half the L40S on the same die) among them.
GEMM_EFFICIENCY_HALF_RATE = 1.0
# A GEMM's M×N output is computed in tiles, one per thread block (CTA). The largest bf16
# tensor-core tiles, 256×128 and 128×256, are the most efficient, and the big shapes behind
# GEMM_EFFICIENCY run on them (NVIDIA, "Matrix Multiplication Background User's Guide", Deep
# Learning Performance documentation, § GPU implementation: tile sizes from 256×128/128×256,
# most efficient, down to 64×64). CUTLASS builds them for bf16 on every GPU from Ampere on
# (NVIDIA/cutlass python/cutlass_library/generator.py, GenerateSM80_TensorOp_16816:
# [256, 128, 32] and [128, 256, 32], 3 stages, min_cc 80). The same guide, § Dimension
# quantization effects: an output that does not divide into whole tiles still computes the
# partial tiles whole (tile quantization), and tiles run in waves of one per SM, so a last wave
# with fewer tiles than SMs leaves the others idle (wave quantization).
GEMM_TILE = (256, 128)
# One such tile per SM at a time: its fp32 accumulators alone, 256 × 128 × 4 B = 128 KiB, are
# half of an SM's 256 KiB register file (64 K 32-bit registers per SM on Ampere, Ada and Hopper:
# the A100, Ada and H100 architecture whitepapers), so a wave is `sm_count` tiles.
GEMM_TILES_PER_SM = 1
# Share of dense peak that FlashAttention-2-class kernels (FA2, PyTorch SDPA's flash backend)
# reach, by generation. Ampere/Ada: FA2 forward+backward ≈ 50–73 % of A100 peak (Dao 2023,
# arXiv:2307.08691, abstract and fig. 4–6): 0.6. Hopper: FA2 reaches 35 % of H100 peak (Shah et
# al. 2024, FlashAttention-3, arXiv:2407.08608, abstract); common fine-tuning stacks run FA2
# kernels there, and so does any generation without a figure of its own (the default).
# Datacenter Blackwell (B200, GB200; Blackwell Ultra B300/GB300 runs the same kernels at the same
# dense peak): FA2 has no path to their tensor cores but the sm80 one and runs at about Hopper's
# absolute rate. flash-attn 2.7.4 on a B200, head dim 64, fwd + bwd 320.70 / 312.45 / 332.97 /
# 345.80 TFLOPS at 2k / 4k / 8k / 16k tokens (Dao-AILab/flash-attention issue #1589, 2025-04):
# the median, 326.8 of 2250, is 0.15 (forward alone at head dim 128, 315–362 TFLOPS from 1k to
# 16k: meta-pytorch/tritonbench PR #171, 2025-03). Their own kernels (cuDNN, FA4) are `native`.
# RTX Blackwell (sm120: GeForce RTX 50, RTX PRO Blackwell; NVIDIA's "RTX Blackwell GPU
# Architecture" whitepaper, 2025) has neither wgmma nor tcgen05: its tensor cores run the SM80-era
# mma.sync FA2 is built on (Dao-AILab/flash-attention PR #2599, 2026-05), with Ada's ~100 KB of
# shared memory per SM (PR #2592): Ada's figure, 0.6.
# CDNA 3 (MI300X, MI325X): ROCm's FlashAttention-2 (the Composable Kernel build of flash-attn that
# axolotl and transformers' flash_attention_2 load there; SDPA's default AOTriton backend has no
# published figure), bf16, head dim 128, 16k tokens, batch 1/2/4/8: fwd + bwd
# 223.08, 230.54, 231.57, 228.36 TFLOPS (forward 310–356, backward 194–207) on an MI300X under
# ROCm 6.3.2 (ROCm/flash-attention issue #142, 2025-05): the median, 229.45 of 1307.4, is 0.18.
# The Ampere, Ada and RTX Blackwell figure is the A100's. Their other parts do fewer tensor FLOPs
# per SM per clock (gpus.csv `tensor_flops_per_sm_clock`: GA100 2,048; GA10x, AD10x and GB20x
# 1,024, 512 at half rate) while the rest of the kernel runs at least as fast per SM per clock, so
# their share of their own rated figure is higher (`narrow_tensor_attention_share`).
ATTENTION_EFFICIENCY: dict[str, float] = {
    "Ampere": 0.60,
    "Ada Lovelace": 0.60,
    "RTX Blackwell": 0.60,
    "Blackwell": 0.15,
    "Blackwell Ultra": 0.15,
    "CDNA 3": 0.18,
}
ATTENTION_EFFICIENCY_DEFAULT = 0.35
# Share of dense peak that a generation's own fused attention reaches (`Job.attention` "native"),
# where it has one beyond FA2. Hopper: FlashAttention-3 is 1.5–2.0× FA2 in forward and 1.5–1.75×
# in backward, and beats cuDNN from 1k tokens (Shah et al. 2024, §4.1); at the midpoints, over
# one forward and 2.5 forwards' worth of backward, 3.5 / (1/1.75 + 2.5/1.625) = 1.66× FA2's 0.35:
# 0.58. Blackwell: FlashAttention-4 on a B200, head dim 128, causal, 8k tokens, 1418 TFLOPS
# forward and 1208 backward (Dao-AILab/flash-attention PR #2280, 2026-02), 3.5 / (1/1418 +
# 2.5/1208) = 1261 of 2250: 0.56. Elsewhere native is FA2-class: the generation's flash figure.
# PyTorch SDPA (transformers' default attention) runs cuDNN first on sm90/sm100 once its cuDNN is
# newer than 9.15.0 (aten sdp_utils.cpp `check_prefer_cudnn_attention`; the wheels bundle one from
# torch 2.11: huggingface/transformers PR #48163, 2026-08): such stacks are "native" there.
# Dense tensor FLOP per SM per clock of the part the Ampere/Ada/RTX Blackwell figure was measured on:
# the A100 (GA100: four Tensor Cores of 256 FP16/BF16 FMA per clock, A100 whitepaper), and the
# generations that take its figure.
ATTENTION_MEASURED_FLOPS_PER_SM_CLOCK = 2048
# Every part of those generations that accumulates in FP32 at half rate is a GA10x, AD10x or GB20x
# die (GA100 has none): 512 per SM per clock, what gpus.csv states for each of them.
HALF_RATE_FLOPS_PER_SM_CLOCK = 512
A100_ATTENTION_GENERATIONS = frozenset({"Ampere", "Ada Lovelace", "RTX Blackwell"})
NATIVE_ATTENTION_EFFICIENCY: dict[str, float] = {
    "Hopper": 0.58,
    "Blackwell": 0.56,
    "Blackwell Ultra": 0.56,
}
# FlashAttention-1-class kernels (`Job.attention` "flash1": flash-attn 1.x, its Triton port that
# llm-foundry's `attn_impl: triton` runs, PyTorch SDPA's flash backend before torch 2.2) run at the
# FA2 figure over FA2's speed-up on them: "around 2× speedup compared to FlashAttention" (Dao 2023,
# arXiv:2307.08691, abstract). On Ampere that is 0.30 of peak, inside the abstract's own range for
# FlashAttention, "only 25-40% of the theoretical maximum FLOPs/s". Both skip the causal mask's
# upper blocks as FA2 does (flash_attn_triton.py: `end_n = … tl.minimum((start_m + 1) * BLOCK_M,
# seqlen_k)` when IS_CAUSAL) and keep no s² scores, so only the rate differs.
FA2_SPEEDUP_OVER_FA1 = 2.0
# FlashAttention-2 backward = 2.5 × forward FLOPs (5 matmuls vs 2; Dao 2023 §3.2).
ATTENTION_BACKWARD_RATIO = 2.5
# Causal masking: FlashAttention skips the blocks above the diagonal, half of s² (Dao 2023 §3.1).
CAUSAL_FRACTION = 0.5
# Share of datasheet DRAM bandwidth that streaming kernels reach: BabelStream triad reaches about
# 90 % on A100 and H100 (UoB-HPC BabelStream results; NVIDIA's own STREAM figures agree).
STREAM_EFFICIENCY = 0.90
# Bytes per element of transformers' eager LlamaRMSNorm in bf16: the upcast reads 2 and writes 4,
# pow reads and writes fp32 (8), mean reads it (4), x·rsqrt reads and writes fp32 (8), the downcast
# reads 4 and writes 2 (6), ·weight reads and writes bf16 (4): 36.
EAGER_RMS_NORM_BYTES = 36
# Bytes per q or k element of HF's eager rotary, `q * cos + rotate_half(q) * sin` with
# rotate_half(x) = cat((-x2, x1)) over the halves of head_dim (transformers modeling_llama.py),
# bf16: the negation reads and writes half the elements (2), the cat reads both halves and
# writes the rotated copy (4), each product reads its operand and writes one (4 + 4; cos and sin
# are one row per position, shared by the heads), the sum reads two and writes one (6): 20.
# Liger-Kernel's own measurement of this HF function (benchmark/data/all_benchmark_data.csv @
# ead96b61, 'rope', 'huggingface', forward, A100-SXM4-80GB, 2024-09-03: 32 q and 8 kv heads of
# 256, one sequence; 1.933 ms at 8,192 positions, 3.817 ms at 16,384) moves these 20 bytes at
# 0.89 TB/s, 44 % of the part's 2,039 GB/s: a floor on its time, not an overcount.
EAGER_ROTARY_BYTES = 20
# The same rotary under autocast over fp32 modules, where cos and sin are fp32: the products write
# fp32 (+2 each), the sum reads two fp32 and writes one (+6), then SDPA casts q and k back to bf16
# (read 4, write 2): 20 → 36 per element, +16 (`_autocast_elementwise_bytes_per_token`).
AUTOCAST_ROTARY_EXTRA_BYTES = 16
# Elementwise backward traffic ≈ 2 × forward: each op's backward reads its saved input(s) and the
# incoming gradient and writes the input gradient (the same tensors as forward, plus one).
ELEMENTWISE_BACKWARD_RATIO = 2.0
# Eager PyTorch dispatch costs on the order of 10 µs of CPU per operator (Horace He, "Making Deep
# Learning Go Brrrr From First Principles", 2022: overhead section); CUDA's own launch is ~5 µs.
DISPATCH_SECONDS_PER_OP = 10e-6
# Operators one HF Llama-style decoder layer dispatches in forward (2 RMSNorms × 6 ops, 4 attention
# linears, rotary ≈ 10, SDPA + reshapes ≈ 6, MLP 3 linears + 2, two residual adds), counted from
# LlamaDecoderLayer.forward; each LoRA-adapted linear adds dropout, A, B, scale and add (5).
OPS_PER_LAYER_FORWARD = 40
# Of those, what other block kinds do not dispatch (`_eager_ops_per_layer_forward`): an RMSNorm's
# 6 ops against F.layer_norm's one native op, and the rotary's ≈ 10.
RMS_NORM_OPS = 6
LAYER_NORM_OPS = 1
ROTARY_OPS = 10
OPS_PER_ADAPTER = 5
# Autograd dispatches about as many backward ops as forward ones, plus the accumulate steps: 1.5×.
BACKWARD_OPS_RATIO = 1.5
# torch.compile (Job.compiled): TorchInductor fuses each chain of pointwise and reduction ops
# between two matmuls into one kernel that reads the chain's inputs once and writes its outputs
# once (Ansel et al. 2024, "PyTorch 2", ASPLOS, TorchInductor's fusion), and its generated wrapper
# launches kernels without eager's per-op dispatch, so each costs the CUDA launch alone (~5 µs,
# as above). Kernels of one compiled Llama-style layer forward: 7 projections, the attention
# core, 4 fused regions (residual add + norm twice, rotary, the MLP activation); each LoRA
# adapter adds its A and B matmuls and one fused scale-and-add.
LAUNCH_SECONDS_PER_KERNEL = 5e-6
COMPILED_KERNELS_PER_LAYER_FORWARD = 12
COMPILED_KERNELS_PER_ADAPTER = 3
# --- modeltime (issue 23) ---
# kernels="fused" (Liger Kernel / Unsloth) dispatches, per Llama-style layer forward: 7
# projections, the FlashAttention call, 2 RMSNorms, 2 residual adds, 1 rotary (Liger's
# LigerRopeFunction rotates q and k in one kernel), 1 SwiGLU (LigerSiLUMulFunction) and the layout
# copies around attention (4): 18; each LoRA adapter its A and B matmuls and one fused add (3).
FUSED_OPS_PER_LAYER_FORWARD = 18
FUSED_OPS_PER_ADAPTER = 3
# GPTQ int4 under transformers/PEFT training (exllama kernels have no backward, so training loads
# auto-gptq's qlinear_cuda_old QuantLinear): for inputs of kernel_switch_threshold (128) rows or
# more its forward dequantizes the whole weight with PyTorch ops, then runs torch.matmul in fp16
# (AutoGPTQ/AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py, QuantLinear.forward).
# Bytes per weight element of that chain: bitwise_right_shift of the int32 words into int32
# (read 0.5, write 4), .to(int8) (4 + 1), bitwise_and in place (1 + 1), weight − zeros (1 + 1),
# scales · (…) into fp16 (1 + 2) = 16.5. torch.matmul saves the fp16 weight for backward, so the
# chain runs in forward and again in each recompute, not in backward (bitsandbytes' MatMul4Bit
# dequantizes again in backward instead).
GPTQ_DEQUANT_BYTES_PER_WEIGHT = 16.5
# ops of that forward per GPTQ linear: zeros shift, cast, and, +1; weight shift, cast, and; sub;
# mul; x.half()
GPTQ_OPS_PER_LINEAR = 10
# x.half() before the fp16 GEMM: read 2 B and write 2 B per input element, per forward pass
GPTQ_INPUT_CAST_BYTES = 4.0
# An NF4 base (bitsandbytes' Linear4bit) runs every linear call as MatMul4Bit, which rebuilds the
# bf16 weight with F.dequantize_4bit(B, quant_state).to(A.dtype).t() before the GEMM in forward,
# and again in backward (it saves the 4-bit weight, not the bf16 one); a recompute repeats the
# forward. Operators one such rebuild dispatches (bitsandbytes 0.43.0, functional.py
# dequantize_4bit and dequantize_blockwise, autograd/_functions.py MatMul4Bit): under double
# quantization the nested absmax first (torch.empty, quant_state.code.to(device), the blockwise
# kernel, `absmax += offset`), then the codes (torch.empty, the NF4 kernel), then .to and .t(): 8;
# without it 4. The kernels launch through ctypes between torch.cuda.set_device calls that are
# not counted, so this is a floor. Unsloth's own fast_dequantize launches the same two kernels
# into a reused buffer (fewer operators); torchtune's NF4Tensor dequantizes with a chain of
# PyTorch ops (more); neither is told apart here.
NF4_DEQUANT_OPS: dict[str, int] = {"nf4": 4, "nf4-dq": 8}
# torch.autocast over fp32 modules (Job.mixed_precision="autocast"). Each F.linear call casts its
# fp32 operands to bf16, one aten::_to_copy each (read 4 B, write 2 B per element): the weight and
# the input when it is fp32 (ATen autocast_mode.cpp, cached_cast). Only casts of leaves that
# require grad are cached, and the cache is cleared when the outermost autocast region exits, at
# the end of each forward and of each checkpoint's recompute, so a weight is cast once per pass
# that uses it whether it is trained or frozen. The cast's backward (ToCopyBackward) turns a
# trained weight's bf16 gradient into its fp32 .grad: read 2 B, write 4 B per parameter.
AUTOCAST_CAST_BYTES = 6.0
# Ops one autocast linear call adds to eager dispatch: the weight cast and the input cast.
AUTOCAST_OPS_PER_LINEAR = 2
# PEFT keeps LoRA adapters in fp32 under a bf16 base (get_peft_model's autocast_adapter_dtype=True,
# the default: "cast adapter weights using float16 and bfloat16 to float32"), which is what the
# bf16-mixed memory model counts (4 B per adapter weight). Eager and without autocast, each adapted
# linear then runs its adapter in fp32 (huggingface/peft src/peft/tuners/lora/layer.py
# Linear.forward and bnb.py Linear4bit.forward, via LoraLayer._cast_input_dtype):
# x.to(fp32) reads 2 and writes 4 per input element, and lora_A reads the fp32 copy (4): 10 per
# d_in, against 2 for a bf16 adapter; dropout, when on, copies fp32 (read 4, write 4, mask 1): 9.
# lora.Linear: lora_B writes fp32 (4), `* scaling` reads 4 and writes 4, `result + ·` reads the
# bf16 result and the fp32 branch and writes fp32 (2 + 4 + 4), `result.to(bf16)` reads 4 and
# writes 2: 28 per d_out. bnb Linear4bit: result.clone() (2 + 2), lora_B writes fp32 (4),
# `* scaling` (4 + 4), `output.to(bf16)` (4 + 2), `result + output` in bf16 (2 + 2 + 2): 28.
# Nothing of this runs where the adapters are cast to bf16 for compute: FSDP's MixedPrecision
# (param_dtype bf16), DeepSpeed's bf16 engine (module.bfloat16()), compiled or fused stacks.
FP32_ADAPTER_IN_BYTES = 10
# The same branch with bf16 adapters (lora.Linear, eager): lora_B writes bf16 (2), `* scaling`
# reads 2 and writes 2 (4), `result + ·` reads both and writes the sum (6): 12 per d_out. A
# dispatch-level count of PEFT 0.21.2 on transformers 5.25's LlamaDecoderLayer (CPU, bf16, r 16 on
# all seven linears) finds the scale's `mul` at 4 and the `add` at 6 bytes per output element;
# lora_B's write is the matmul's own output.
EAGER_ADAPTER_OUT_BYTES = 12
# PEFT's LoRA layer over a bitsandbytes 4-bit base (tuners/lora/bnb.py, Linear4bit.forward) first
# copies the frozen output, "As per Tim Dettmers, for 4bit, we need to defensively clone here":
# `result.clone()` reads 2 and writes 2 per output element. The fp32 count above includes it; GPTQ's
# LoRA layer (tuners/lora/gptq.py) and lora.Linear do not clone.
BNB_RESULT_CLONE_BYTES = 4
# Dropout on the branch's input, CUDA's fused native_dropout: reads the input (2), writes the
# dropped copy (2) and the bool mask (1): 5 per d_in.
EAGER_DROPOUT_BYTES = 5
# The bf16 branch's backward, op by op, instead of ELEMENTWISE_BACKWARD_RATIO × its forward:
# `* scaling`'s backward scales the incoming gradient (read 2, write 2 per d_out); lora_B's weight
# gradient and input gradient each read that gradient (2 + 2); lora_A's weight gradient reads the
# input (2 per d_in), its input gradient writes one (2), and autograd adds it to the frozen
# path's gradient of the same input (read 2 + 2, write 2): 8 per d_out, 10 per d_in. The clone
# over a bitsandbytes base passes its gradient on untouched. Dropout's backward multiplies the
# gradient by the saved mask (read 2 + 1, write 2): 5 per d_in. benchmarks/eager_bytes.py's count
# of PEFT 0.21.2's backward finds the elementwise part, the scale at 4 per d_out and the
# accumulation at 6 per d_in; the rest is the adapters' matmuls' own reads and writes.
EAGER_ADAPTER_BACKWARD_OUT_BYTES = 8
EAGER_ADAPTER_BACKWARD_IN_BYTES = 10
DROPOUT_BACKWARD_BYTES = 5
FP32_ADAPTER_DROPOUT_BYTES = 9
FP32_ADAPTER_OUT_BYTES = 28
# Their backward moves about what their forward moved, op by op: each cast's backward casts the
# gradient back (the same 6), the scaling's multiplies it (8), the add's passes it on and casts the
# bf16 side's (6), and lora_B's two backward GEMMs read the fp32 gradient (4 + 4): 28 per d_out;
# lora_A's input gradient is written in fp32 and cast back, and its weight gradient reads the fp32
# input (about 10 per d_in against the forward's 8). So 1×, not ELEMENTWISE_BACKWARD_RATIO.
FP32_ADAPTER_BACKWARD_RATIO = 1.0
# the input cast and the output cast (lora.Linear's result.to, bnb's output.to; bnb's clone besides)
FP32_ADAPTER_OPS = 2
# bf16 modules under the HF Trainer's autocast (Job.adapter_input_round_trip): lora.Linear still
# casts its bf16 input to the fp32 adapter's dtype (read 2, write 4) and autocast casts it back to
# bf16 for lora_A (read 4, write 2), AUTOCAST_CAST_BYTES each way: 12 per d_in; the branch runs in
# bf16. Backward casts the input gradient the same two ways (1×). Two ops: the two casts.
ROUND_TRIP_BYTES = 2 * AUTOCAST_CAST_BYTES
# NCCL ring collectives reach ~75 % of link bandwidth (nccl-tests busbw on NVLink and InfiniBand).
COMM_EFFICIENCY = 0.75
# PCIe x16, per direction, GB/s, by generation (PCI-SIG: 8/16/32/64 GT/s per lane, 128b/130b).
PCIE_X16_GBYTES_PER_S: dict[int, float] = {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0}
# Without P2P, NCCL's SHM transport copies GPU → host buffer → GPU: every byte crosses PCIe twice,
# but on two links: up the sender's, down the receiver's. PCIe links are dual simplex (one lane
# pair per direction, PCI-SIG base spec), so in a ring, where every GPU sends and receives at
# once, each GPU's link carries one traversal per direction: the per-direction x16 rate, as P2P
# through the root complex. Host memory, which sees each byte written and read, is the extra cost.
HOST_STAGED_TRAVERSALS_PER_DIRECTION = 1
# Host memory bandwidth one node's CPU optimizer (ZeRO-Offload / FSDP CPU offload) streams at:
# one socket of 8 DDR4-3200 channels = 8 × 25.6 GB/s = 204.8 GB/s (JEDEC DDR4-3200, 8 B per
# transfer; AMD EPYC Rome/Milan as in DGX A100), shared by the node's GPUs' optimizer shards.
HOST_MEMORY_GBYTES_PER_S = 204.8
# Below this per-node network bandwidth a multi-node sharded job is flagged, not silently priced:
# 400 Gb/s is the smallest fabric sold for multi-node training (AWS p4d 4×100 Gb/s EFA).
FAST_FABRIC_GBPS = 400.0
# When a GPU's memory bandwidth is unknown, assume H100 SXM's 295 dense FLOPs per byte
# (989 TFLOPS / 3.35 TB/s), the most bandwidth-starved datacenter part in gpus.csv: never optimistic.
FALLBACK_FLOPS_PER_BYTE = 989e12 / 3350e9
# Bytes read + written per logit (b·s·V elements) by the loss, counted from the kernels each path
# runs. standard (transformers' ForCausalLMLoss: `logits.float()` then F.cross_entropy) and
# chunked (torchtune's CEWithChunkedOutputLoss: the same ops one chunk at a time): write the bf16
# logits (2); upcast, read 2 write 4 (6); log_softmax, two reads for max and sum plus one write
# (12); nll_loss's backward zero-fills a dense fp32 gradient the size of the logits before it
# writes the targets' entries (4: PyTorch aten/src/ATen/native/cuda/Loss.cu,
# nll_loss_backward_out_cuda, `grad_input.zero_()`); log_softmax's backward reads its output and
# that gradient and writes the input gradient (12); the gradient cast back to bf16, read 4 write
# 2 (6) = 42. A dispatch-level count of transformers 5.25's path on the CPU (every aten op's
# inputs and outputs, views excluded; benchmarks/README.md) lists exactly these seven ops. fused (Liger's
# FusedLinearCrossEntropy, Cut-Cross-Entropy): each block of logits is written once in bf16 (2),
# read twice (online softmax, then the in-place gradient, 4) and the gradient written (2) = 8.
# compiled (the standard loss under torch.compile): the head writes the bf16 logits (2); Inductor's
# cross-entropy reads them for the row max and again for the sum of exponentials (4), the upcast
# fused into both; its backward reads them once more and writes the bf16 gradient (4) = 10.
# the first term of each count above: the head writes the logits in bf16
HEAD_LOGIT_WRITE_BYTES = 2.0
LOSS_BYTES_PER_LOGIT: dict[str, float] = {"standard": 42.0, "chunked": 42.0, "fused": 8.0, "compiled": 10.0}
# Tensor-parallel collectives (`finetune.tensor_parallel`, Korthikanti et al. 2022 §4.2.2): per
# decoder layer and pass two all-gathers and two reduce-scatters around attention and the MLP; outside
# the layers the embedding's reduce-scatter and the head input's all-gather, forward and backward.
TP_COLLECTIVES_PER_LAYER_PASS = 4
TP_COLLECTIVES_OUTSIDE_LAYERS = 4
# Gemma 2's final soft-cap (tanh(x/30)·30) adds a forward and a backward elementwise pass over
# the fp32 logits: read 4 write 4, each way.
SOFTCAP_BYTES_PER_LOGIT = 16.0


def matmul_share(matmul_tflops: float | None, peak_tflops: float | None) -> float | None:
    """A part's measured large-matmul rate (gpus.csv `matmul_tflops`) as a share of its dense
    peak: a share, so a slice's share of the peak keeps it. None where either is unknown."""
    return matmul_tflops / peak_tflops if matmul_tflops and peak_tflops else None


@dataclass(frozen=True)
class Accelerator:
    """What of one GPU sets the pace: dense tensor TFLOPS, memory bandwidth (GB/s), generation."""

    tflops: float
    memory_bandwidth_gbps: float | None = None
    architecture: str | None = None
    vram_gb: float | None = None
    p2p: bool = True
    pcie_gen: int | None = None
    # streaming multiprocessors (gpus.csv `sm_count`); None: GEMMs at the flat big-shape efficiency
    sm_count: int | None = None
    # bf16 with FP32 accumulation at half rate (gpus.csv `half_rate_accumulate`)
    half_rate_accumulate: bool = False
    # measured large-matmul rate / `tflops` (gpus.csv `matmul_tflops`, MAMF); None: not measured
    matmul_share: float | None = None
    # dense tensor FLOP per SM per clock (gpus.csv `tensor_flops_per_sm_clock`); None: not stated
    tensor_flops_per_sm_clock: float | None = None

    @property
    def bandwidth_bytes_per_s(self) -> float:
        if self.memory_bandwidth_gbps:
            return self.memory_bandwidth_gbps * 1e9
        return self.tflops * 1e12 / FALLBACK_FLOPS_PER_BYTE

    @property
    def is_amd(self) -> bool:
        return (self.architecture or "").upper().startswith("CDNA")

    @property
    def gemm_efficiency(self) -> float:
        """Share of `tflops` that large GEMMs reach (before tile and wave quantization).

        The rated figure's share (GEMM_EFFICIENCY, or GEMM_EFFICIENCY_HALF_RATE on half-rate parts),
        held to the part's own measured best-shape rate where that is lower.
        """
        rated = GEMM_EFFICIENCY_HALF_RATE if self.half_rate_accumulate else GEMM_EFFICIENCY
        return rated if self.matmul_share is None else min(rated, self.matmul_share)

    def attention_efficiency(self, kernel: str = "flash") -> float:
        """Share of `tflops` the attention `kernel` reaches: FlashAttention-2's class on this
        generation, for "native" the generation's own kernel where it has one beyond FA2, for
        "flash1" FlashAttention-1's class (FA2's figure over FA2_SPEEDUP_OVER_FA1). Eager
        attention's matmuls run at FA2's rate too; its score traffic is priced apart."""
        flash = ATTENTION_EFFICIENCY.get(self.architecture or "", ATTENTION_EFFICIENCY_DEFAULT)
        if kernel == "native":
            share = NATIVE_ATTENTION_EFFICIENCY.get(self.architecture or "", flash)
        elif kernel == "flash1":
            share = flash / FA2_SPEEDUP_OVER_FA1
        else:
            share = flash
        return narrow_tensor_attention_share(share, self.tensor_rate_ratio)

    @property
    def tensor_rate_ratio(self) -> float:
        """This part's dense tensor FLOPs per SM per clock over those of the part its generation's
        attention figure was measured on: the A100's for Ampere, Ada and RTX Blackwell; 1 for the
        generations measured on their own parts. A part whose rate is not stated counts as the
        A100 (its die is unknown), unless it accumulates at half rate, which only the narrow dies do
        (HALF_RATE_FLOPS_PER_SM_CLOCK)."""
        if self.architecture not in A100_ATTENTION_GENERATIONS:
            return 1.0
        per_sm = self.tensor_flops_per_sm_clock or (
            HALF_RATE_FLOPS_PER_SM_CLOCK
            if self.half_rate_accumulate
            else ATTENTION_MEASURED_FLOPS_PER_SM_CLOCK
        )
        return per_sm / ATTENTION_MEASURED_FLOPS_PER_SM_CLOCK


def narrow_tensor_attention_share(share: float, ratio: float) -> float:
    """An attention kernel's share of a part's rated figure, from its `share` on the part it was
    measured on, where this part does `ratio` of that part's tensor FLOPs per SM per clock.

    Of the kernel's time on the measured part, `share` is its matmuls at the dense peak and
    1 − share the rest (softmax's exponentials on the SFU, rescaling, loads). With 1/ratio as long
    for the matmuls and the rest unchanged per SM per clock, the matmuls are
    (share / ratio) / (share / ratio + 1 − share) = share / (share + ratio·(1 − share)) of it. The
    rest does not slow down: the SFU's exponentials run at 16 per clock per SM on compute
    capability 8.0, 8.6 and 8.9 alike (CUDA C++ Programming Guide, "Arithmetic Instructions"
    throughput table), and GA10x and AD10x do twice GA100's FP32 per SM (RTX Blackwell is read as
    Ada). FA2's 0.6 on the A100 becomes 0.75 at half its rate per SM (RTX A6000, L40S) and 0.857
    at a quarter (GeForce cards with FP32 accumulation). At ratio 1/2 this is the reasoning
    GEMM_EFFICIENCY_HALF_RATE rests on: what is not the tensor cores stops being the bottleneck.
    """
    return share / (share + ratio * (1.0 - share))


@dataclass(frozen=True)
class StepTime:
    """Seconds of one micro-step on one GPU, by component (optimizer amortized per micro-step)."""

    matmul_s: float
    attention_s: float
    elementwise_s: float
    dequant_s: float
    dispatch_s: float
    optimizer_s: float
    comm_s: float
    overlapped: bool
    loss_s: float = 0.0
    # communication that nothing overlaps (FSDP's first all-gather and last reduce-scatter)
    exposed_comm_s: float = 0.0

    # hybrid sharding: the gradient all-reduce across nodes (on top of the in-node comm_s)
    network_s: float = 0.0
    # tensor parallelism: the TP group's collectives, on the critical path (nothing overlaps them)
    tensor_parallel_s: float = 0.0

    @property
    def compute_s(self) -> float:
        gpu = (
            self.matmul_s
            + self.attention_s
            + self.elementwise_s
            + self.loss_s
            + self.dequant_s
            + self.optimizer_s
        )
        return max(gpu, self.dispatch_s)

    @property
    def total_s(self) -> float:
        # FSDP runs the in-node reduce-scatter and the cross-node all-reduce of one unit on the
        # same stream, one after the other
        comm = self.comm_s + self.network_s
        if self.overlapped:
            return max(self.compute_s, comm) + self.exposed_comm_s + self.tensor_parallel_s
        return self.compute_s + comm + self.tensor_parallel_s


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
    tokens_per_s: float = 0.0
    step: StepTime | None = None


# --- FLOPs -------------------------------------------------------------------------------------


def _passes(job: Job) -> tuple[int, int]:
    """(passes over all matmul weights, passes that need the frozen weights), recompute apart.

    Forward and input gradient always; weight gradient for full fine-tuning. Recompute covers the
    decoder layers only and is added by `_recompute_params`.
    """
    weight_passes = 2
    flop_passes = weight_passes + (1 if job.method == "full" else 0)
    return flop_passes, weight_passes


def _recomputed_matmul_params(model: ModelSpec) -> float:
    """Matmul parameters of one layer that torchtitan's selective policy recomputes.

    The policy counts aten.mm calls in execution order and recomputes every second one: q, k, v,
    o, then gate, up, down (torchtitan's FeedForward runs w2(silu(w1(x)) · w3(x)): w1, w3, w2) —
    k, o and up; for a plain MLP (q, k, v, o, fc1, fc2): k, o and fc2.
    """
    h, inter = model.hidden_size, model.intermediate_size
    q, kv = model.attention_heads * model.head_dim_, model.kv_heads * model.head_dim_
    experts = model.experts_per_token if model.is_moe and model.experts_per_token else 1
    attention = h * kv + q * h  # k and o
    mlp = h * inter if model.gated_mlp else inter * h  # up, or fc2
    return float(attention + experts * mlp)


def _recompute_params(model: ModelSpec, job: Job) -> float:
    """Matmul parameters rerun per token by gradient checkpointing (decoder layers, not the head)."""
    if not job.grad_checkpointing:
        return 0.0
    if job.checkpoint_policy == "selective":
        return model.layers * _recomputed_matmul_params(model)
    dense = _attention_params_per_layer(model) + _mlp_params_per_layer(model, active=True)
    return float(model.layers * dense)


def tile_efficiency(m: int, n: int, sm_count: int) -> float:
    """Share of the SMs' tile slots in which an m×n GEMM output does useful work (≤ 1).

    The output is cut into ceil(m/tm) · ceil(n/tn) tiles of GEMM_TILE, in whichever of its two
    orientations wastes less; they run in ceil(tiles / (sm_count · GEMM_TILES_PER_SM)) waves,
    each as long as one whole tile, against m · n useful outputs. The reduction length does not
    enter: every tile of one GEMM steps through the same K. cuBLAS's heuristics may choose a
    smaller, less efficient tile (or split K) for a small output; that choice is not modelled, so
    for small outputs this is the loss on the largest tile, an upper bound.
    """
    if m < 1 or n < 1 or sm_count < 1:
        raise ValueError(f"GEMM output and SM count must be positive, got {m}×{n} on {sm_count} SMs")
    slots = sm_count * GEMM_TILES_PER_SM
    best = 0.0
    for tm, tn in (GEMM_TILE, GEMM_TILE[::-1]):
        waves = math.ceil(math.ceil(m / tm) * math.ceil(n / tn) / slots)
        best = max(best, m * n / (waves * slots * tm * tn))
    return best


@dataclass(frozen=True)
class Gemm:
    """One GEMM shape of a micro-step: an m×n output reduced over k, run `calls` times."""

    m: int
    n: int
    k: int
    calls: float

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.calls


def gemm_shapes(model: ModelSpec, job: Job, tokens: int) -> list[Gemm]:
    """The GEMMs of one micro-step over `tokens` rows that `_passes` and `_recompute_params` count:
    every decoder linear and the head, LoRA adapters apart (`_adapter_flops_per_token`).

    A linear of d_in → d_out over T rows (Y = X·W) runs forward as a T×d_out output reduced over
    d_in (again in each recompute); its input gradient dX = dY·Wᵀ is a T×d_in output reduced over
    d_out; its weight gradient dW = Xᵀ·dY (full fine-tuning) a d_in×d_out output reduced over the
    T rows. A routed expert sees tokens × experts_per_token / num_experts rows on average; the
    router (h → num_experts logits, under 0.01 % of the FLOPs) is left out.
    """
    h, inter, vocab = model.hidden_size, model.intermediate_size, model.vocab_size
    q, kv = model.attention_heads * model.head_dim_, model.kv_heads * model.head_dim_
    # (d_in, d_out, rows, instances per layer, recomputed under the selective policy: k, o, up/fc2)
    rows, per_layer = tokens, 1
    if model.is_moe and model.experts_per_token and model.num_experts:
        rows = max(1, math.ceil(tokens * model.experts_per_token / model.num_experts))
        per_layer = model.num_experts
    mlp = (
        [
            (h, inter, rows, per_layer, False),
            (h, inter, rows, per_layer, True),
            (inter, h, rows, per_layer, False),
        ]
        if model.gated_mlp
        else [(h, inter, rows, per_layer, False), (inter, h, rows, per_layer, True)]
    )
    linears = [(h, q, tokens, 1, False), (h, kv, tokens, 1, True), (h, kv, tokens, 1, False)]
    linears += [(q, h, tokens, 1, True), *mlp]
    full = job.method == "full"
    shapes = []
    for d_in, d_out, m, instances, selective in linears:
        calls = model.layers * instances
        recomputed = job.grad_checkpointing and (job.checkpoint_policy == "full" or selective)
        shapes.append(Gemm(m, d_out, d_in, calls * (2 if recomputed else 1)))
        shapes.append(Gemm(m, d_in, d_out, calls))
        if full:
            shapes.append(Gemm(d_in, d_out, m, calls))
    # the head (h → V) is outside the checkpointed layers
    shapes += [Gemm(tokens, vocab, h, 1), Gemm(tokens, h, vocab, 1)]
    if full:
        shapes.append(Gemm(h, vocab, tokens, 1))
    return shapes


def gemm_shape_efficiency(model: ModelSpec, job: Job, gpu: Accelerator, tokens: int) -> float:
    """Share of dense peak the step's GEMMs reach: the big-shape efficiency times each shape's
    tile efficiency on the GPU's SMs, FLOP-weighted over `gemm_shapes` (a harmonic mean: the
    time adds up). Without an SM count, and on AMD (whose tiles GEMM_TILE does not describe),
    the flat big-shape efficiency as before."""
    if gpu.sm_count is None or gpu.is_amd:
        return gpu.gemm_efficiency
    shapes = gemm_shapes(model, job, tokens)
    flops = sum(g.flops for g in shapes)
    slot_flops = sum(g.flops / tile_efficiency(g.m, g.n, gpu.sm_count) for g in shapes)
    return gpu.gemm_efficiency * flops / slot_flops


def _attention_recompute(job: Job) -> int:
    """Attention-core forwards rerun in backward: one under full recompute, none under selective
    (the policy saves the SDPA output)."""
    return 1 if job.grad_checkpointing and job.checkpoint_policy == "full" else 0


def _attention_forward_flops_per_token(model: ModelSpec, job: Job) -> float:
    """QKᵀ and PV: 2 matmuls × 2·s·a·d FLOPs per token per layer (llm-foundry's attn_flops), s
    the keys a query sees: the row, or its own document in packed data (`Job.attention_span`)."""
    core = 4.0 * model.layers * model.attention_heads * model.head_dim_ * job.attention_span
    return core * (CAUSAL_FRACTION if _skips_masked_blocks(model, job) else 1.0)


def _skips_masked_blocks(model: ModelSpec, job: Job) -> bool:
    """Whether the attention kernel skips the causal mask's upper half.

    FlashAttention does (and the fused stack's FlashAttention-2 unpads a padded batch). The plain
    stack's SDPA only runs causal without a mask: transformers' sdpa_attention_forward sets
    `is_causal = query.shape[2] > 1 and attention_mask is None and …`, so a padded batch passes
    its 4-D mask and every s² block is computed.
    """
    if attention_impl(model, job) == "eager":
        return False
    padded = job.padding_efficiency < 1.0 or job.peak_seq_len is not None
    return job.kernels == "fused" or not padded


def loss_impl(job: Job) -> str:
    """The loss path: the fused stack's linear-cross-entropy (Liger's apply_liger_kernel_to_llama
    turns fused_linear_cross_entropy on by default) replaces the standard fp32 one."""
    return "fused" if job.kernels == "fused" and job.loss == "standard" else job.loss


def flops_per_token(model: ModelSpec, job: Job) -> float:
    """Hardware FLOPs per computed token (recompute included).

    Matmuls: 2N per pass (`_passes`), so 6N for full fine-tuning and 4N for LoRA (NeMo's LoRA
    TFLOP/s match 4N), + 2 per recomputed decoder parameter with gradient checkpointing (2N less
    the head under the full policy); adapters 6 per adapter parameter. Attention: forward
    4·L·a·d·s (halved when causal FlashAttention skips masked blocks), backward 2.5× forward,
    full recompute + 1× forward.
    """
    flop_passes, _ = _passes(job)
    n = matmul_params(model)
    attn = _attention_forward_flops_per_token(model, job)
    attn_total = attn * (1 + ATTENTION_BACKWARD_RATIO + _attention_recompute(job))
    adapters = _adapter_flops_per_token(model, job)
    return 2.0 * n * flop_passes + 2.0 * _recompute_params(model, job) + attn_total + adapters


def _adapter_flops_per_token(model: ModelSpec, job: Job) -> float:
    """Matmul FLOPs per token of what LoRA / QLoRA train besides the frozen passes.

    Adapters: 6 per adapter parameter. A trained head copy (PEFT modules_to_save) replaces the
    frozen head in every pass, so only its weight gradient is new: 2·V·h. An embedding copy's
    gradient scatters the incoming gradients into rows: memory work, no matmul.
    """
    if job.method == "full":
        return 0.0
    head = 2.0 * model.vocab_size * model.hidden_size if trains_head(job) else 0.0
    return 6.0 * adapter_params(model, job) + head


def model_flops_per_token(model: ModelSpec, job: Job) -> float:
    """Model FLOPs (no recompute): 6N full, 4N LoRA; the numerator of MFU."""
    n = matmul_params(model)
    return (6.0 if job.method == "full" else 4.0) * n


# --- memory traffic ------------------------------------------------------------------------------


def _elementwise_bytes_per_token(model: ModelSpec, job: Job, sequence_split: int = 1) -> float:
    """Forward bytes read + written per token by one layer's non-matmul ops (bf16, eager HF).

    * RMSNorm (LlamaRMSNorm: upcast to fp32, square, mean, rsqrt·x, downcast, ·weight):
      EAGER_RMS_NORM_BYTES·h each, ×2;
      a LayerNorm family's F.layer_norm (`model.layer_norm`) 4h; a parallel block has one norm;
    * rotary on q and k (EAGER_ROTARY_BYTES per element: the cos/sin products, rotate_half's
      negated half and cat, the sum); none where the family has no rotary (`model.rotary`: learned
      positions, ALiBi);
    * attention layout (transposes to and from heads): read + write q, k, v and the output, 4 B each;
    * gated MLP activation (silu(gate) · up): 10I; plain MLP activation: 4I;
    * two residual adds: 6h each;
    * each LoRA-adapted linear: read its input for A (2·d_in), write B's output, scale it and add it
      to the frozen output (EAGER_ADAPTER_OUT_BYTES·d_out); with dropout, a copy of the input and
      its mask (5·d_in).

    Fused kernels (`job.kernels == "fused"`, Liger / Unsloth): as compiled, except that the RMSNorm
    kernel does not absorb the residual add (4h per norm plus 6h per add).

    Compiled (`job.compiled`), each fused region moves only its inputs and outputs, bf16: residual
    add + RMSNorm reads the stream and the branch and writes the sum and the normed copy (8h, twice);
    rotary reads and writes q and k (4 bytes per element); silu(gate) · up reads two and writes one
    (6I); an adapter's scale-and-add reads B's and the frozen output and writes the sum (6·d_out),
    and dropout draws its mask in the kernel and writes only the dropped copy (2·d_in). The
    attention layout copies are counted as eager (the projections read them as matmul inputs).

    Under sequence parallelism (`sequence_split` = the tensor-parallel degree) each GPU runs the
    norms and residual adds on its 1/t of the tokens: that term is divided by it.
    """
    h, inter = model.hidden_size, model.intermediate_size
    q, kv = model.attention_heads * model.head_dim_, model.kv_heads * model.head_dim_
    experts = model.experts_per_token if model.is_moe and model.experts_per_token else 1
    layout = attention_layout_bytes(model)
    n_norms = model.norms_per_layer
    if job.compiled:
        norms_and_residuals = 2 * 8 * h
        rotary = 4 * (q + kv)
        act = experts * (6 if model.gated_mlp else 4) * inter
        adapter_out, dropout_in = 6, 2
    elif job.kernels == "fused":
        # Liger's RMSNorm reads x and writes y (4h, no residual fusion), the residual adds stay
        # eager (6h); rotary in place on q and k; SwiGLU and the adapters as one kernel each
        norms_and_residuals = n_norms * 4 * h + 2 * 6 * h
        rotary = 4 * (q + kv)
        act = experts * (6 if model.gated_mlp else 4) * inter
        adapter_out, dropout_in = 6, 2
    else:
        # F.layer_norm is one native kernel: it reads x and writes y, 4h in bf16
        norm = 4 if model.layer_norm else EAGER_RMS_NORM_BYTES
        norms_and_residuals = n_norms * norm * h + 2 * 6 * h
        rotary = EAGER_ROTARY_BYTES * (q + kv)
        act = experts * (10 if model.gated_mlp else 4) * inter
        adapter_out, dropout_in = _eager_adapter_out_bytes(job), EAGER_DROPOUT_BYTES
    if not model.rotary:
        rotary = 0
    total = float(norms_and_residuals / sequence_split + rotary + layout + act)
    return total + _adapter_forward_bytes(model, job, adapter_out, dropout_in)


def attention_layout_bytes(model: ModelSpec) -> int:
    """Forward bytes per token of the layout copies around attention (transposes to and from heads):
    q, k, v and the output read and written once each, bf16. Which copies a stack makes depends on
    its transformers version (repeat_kv, `.contiguous()`), so this is the count's one term that
    benchmarks/eager_bytes.py does not compare."""
    q, kv = model.attention_heads * model.head_dim_, model.kv_heads * model.head_dim_
    return 4 * (2 * q + 2 * kv)


def _adapter_forward_bytes(model: ModelSpec, job: Job, adapter_out: int, dropout_in: int) -> float:
    """Forward bytes per token of one layer's LoRA branches: A reads each input (2·d_in), the branch
    moves `adapter_out` per output element, dropout `dropout_in` per input element."""
    total = 0.0
    for d_in, d_out in adapted_linears(model, job):
        total += 2 * d_in + adapter_out * d_out + (dropout_in * d_in if job.dropout > 0 else 0)
    return total


def _eager_adapter_backward_excess(model: ModelSpec, job: Job) -> float:
    """Bytes per token per layer that the eager bf16 LoRA branches' counted backward
    (EAGER_ADAPTER_BACKWARD_*) moves beyond ELEMENTWISE_BACKWARD_RATIO × their forward, which
    `step_time` charges every elementwise byte (negative: the branch's backward moves less). 0 for
    the fused and compiled stacks, whose adapter kernels no count has checked."""
    if job.compiled or job.kernels != "plain":
        return 0.0
    forward = _adapter_forward_bytes(model, job, _eager_adapter_out_bytes(job), EAGER_DROPOUT_BYTES)
    backward = 0.0
    for d_in, d_out in adapted_linears(model, job):
        backward += EAGER_ADAPTER_BACKWARD_IN_BYTES * d_in + EAGER_ADAPTER_BACKWARD_OUT_BYTES * d_out
        backward += DROPOUT_BACKWARD_BYTES * d_in if job.dropout > 0 else 0
    return backward - ELEMENTWISE_BACKWARD_RATIO * forward


def _eager_adapter_out_bytes(job: Job) -> int:
    """Bytes per output element of one eager bf16 LoRA branch beyond A's input read: B's write,
    the scale and the add, and over a bitsandbytes base PEFT's defensive clone of the frozen
    output."""
    bnb_base = job.method == "qlora" and job.quant != "gptq"
    return EAGER_ADAPTER_OUT_BYTES + (BNB_RESULT_CLONE_BYTES if bnb_base else 0)


def _eager_ops_per_layer_forward(model: ModelSpec) -> int:
    """Operators one eager layer dispatches in forward: the Llama count (OPS_PER_LAYER_FORWARD)
    less what the block kind does not run, RMSNorm's extra ops where F.layer_norm is one, the
    second norm of a parallel block, the rotary where the family has none."""
    norm_ops = LAYER_NORM_OPS if model.layer_norm else RMS_NORM_OPS
    n_norms = model.norms_per_layer
    ops = OPS_PER_LAYER_FORWARD - 2 * RMS_NORM_OPS + n_norms * norm_ops
    return ops - (0 if model.rotary else ROTARY_OPS)


def _fp32_adapter_bytes_per_token(model: ModelSpec, job: Job) -> float:
    """Forward bytes per token that one layer's fp32 adapters move beyond the bf16 adapters
    `_elementwise_bytes_per_token` counts (eager plain: 2·d_in + EAGER_ADAPTER_OUT_BYTES·d_out,
    5·d_in for dropout):
    the fp32 branch without autocast (`Job.fp32_adapters`, FP32_ADAPTER_*), or the input's cast
    to fp32 and back under the HF Trainer's autocast (`Job.adapter_input_round_trip`,
    ROUND_TRIP_BYTES); 0 where the adapters compute in bf16."""
    if job.adapter_input_round_trip:
        return ROUND_TRIP_BYTES * sum(d_in for d_in, _ in adapted_linears(model, job))
    if not job.fp32_adapters:
        return 0.0
    extra = 0.0
    branch = _eager_adapter_out_bytes(job)
    for d_in, d_out in adapted_linears(model, job):
        extra += (FP32_ADAPTER_IN_BYTES - 2) * d_in + (FP32_ADAPTER_OUT_BYTES - branch) * d_out
        if job.dropout > 0:
            extra += (FP32_ADAPTER_DROPOUT_BYTES - 5) * d_in
    return extra


def _autocast_elementwise_bytes_per_token(model: ModelSpec, job: Job) -> float:
    """Forward bytes per token that one layer's elementwise work adds under autocast over fp32
    modules (0 otherwise), against the bf16 counts of `_elementwise_bytes_per_token`.

    The residual stream is fp32: each residual add reads it (4 B) and the bf16 branch output and
    writes fp32, 10h instead of 6h. An eager LlamaRMSNorm on an fp32 stream skips its two dtype
    casts (28h instead of 36h); Liger's kernel reads and writes fp32 (8h instead of 4h). Every
    linear that reads the fp32 normed stream (q, k, v; gate and up, or fc1) casts it to bf16
    (6 B per element), and so does the lora_A of each adapted linear that reads it. transformers'
    rotary embedding returns cos and sin in the hidden states' dtype, fp32 here, so the two
    products write fp32 (6 B each, not 4) and the sum reads and writes it (12, not 6): 30 B per
    element against EAGER_ROTARY_BYTES' 20 (rotate_half's copy stays bf16; cos and sin are one
    row per position), and SDPA casts q and k back (6): +16 per element of q and k
    (AUTOCAST_ROTARY_EXTRA_BYTES); Liger's rotary kernel works in place in q's dtype. A compiled
    job fuses the casts into its regions: only the stream's own reads and writes widen (+4h per
    region).
    """
    if job.mixed_precision != "autocast":  # Job allows autocast only under bf16-mixed
        return 0.0
    h = model.hidden_size
    q, kv = model.attention_heads * model.head_dim_, model.kv_heads * model.head_dim_
    if job.compiled:
        return 2 * 4.0 * h
    experts = model.experts_per_token if model.is_moe and model.experts_per_token else 1
    residuals = 2 * 4.0 * h
    if model.layer_norm:
        # F.layer_norm runs in fp32 under autocast (autocast's fp32 list): it reads and writes
        # 8h, not the 4h its bf16 run counts in `_elementwise_bytes_per_token`
        norms = model.norms_per_layer * 4.0 * h
    elif job.kernels == "fused":
        norms = model.norms_per_layer * 4.0 * h
    else:
        norms = -model.norms_per_layer * 8.0 * h
    stream_readers = 3 + (2 if model.gated_mlp else 1) * experts
    casts = AUTOCAST_CAST_BYTES * h * stream_readers
    rotary = 0.0 if job.kernels == "fused" or not model.rotary else AUTOCAST_ROTARY_EXTRA_BYTES * (q + kv)
    adapted = 0.0
    if job.method != "full":
        readers = 2 if job.lora_targets == "qv" else 3  # q, v (qv) or q, k, v; o reads bf16
        if job.lora_targets == "all-linear":
            readers += (2 if model.gated_mlp else 1) * experts
        adapted = AUTOCAST_CAST_BYTES * h * readers
    return residuals + norms + casts + rotary + adapted


def _autocast_weight_cast_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes of autocast's weight casts per micro-step (0 unless autocast over fp32 modules):
    every matmul weight once per pass that uses it (forward and the recomputed layers), plus the
    casts' backward for the trained parameters. A QLoRA base is dequantized by bitsandbytes into
    its compute dtype, not cast by autocast."""
    if job.mixed_precision != "autocast" or job.method == "qlora":
        return 0.0
    passes = matmul_params(model) + _recompute_params(model, job)
    return AUTOCAST_CAST_BYTES * (passes + trainable_params(model, job))


def _linears_per_layer(model: ModelSpec) -> int:
    """nn.Linear modules of one decoder layer: q, k, v, o and the MLP's (of the routed experts)."""
    experts = model.experts_per_token if model.is_moe and model.experts_per_token else 1
    return 4 + (3 if model.gated_mlp else 2) * experts


def _linear_input_elements_per_token(model: ModelSpec) -> float:
    """Input elements per token that the decoder's linears read, each linear its own copy:
    q, k, v read h each, o the attention output, the MLP h per input projection and I for down."""
    h, inter = model.hidden_size, model.intermediate_size
    q = model.attention_heads * model.head_dim_
    experts = model.experts_per_token if model.is_moe and model.experts_per_token else 1
    mlp = (2 * h if model.gated_mlp else h) + inter
    return float(model.layers * (3 * h + q + experts * mlp))


def _n_adapters(model: ModelSpec, job: Job) -> int:
    return len(adapted_linears(model, job)) * model.layers


def _frozen_weight_read_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes of (active) weights a GEMM pass reads in bf16: 2 B per matmul parameter."""
    return 2.0 * matmul_params(model)


def optimizer_bytes_per_param(job: Job, param_bytes: float | None = None) -> float:
    """Bytes gradient clipping and the optimizer update move per trained parameter.

    `param_bytes` is for parameters stored in another dtype than the job's master weights (a
    trained embedding / head copy keeps its original's: p = g = param_bytes, torch AdamW's
    moments in it too, no master copy).

    With p = parameter (master) bytes, g = gradient bytes, s = one moment's bytes:
    * fused (torch fused=True, every bitsandbytes optimizer): read p, g, m, v, write p, m, v:
      2p + g + 4s;
    * foreach (torch.optim.AdamW's default, `_multi_tensor_adamw` in torch/optim/adamw.py, torch
      2.x): `_foreach_mul_(params)` for weight decay 2p, `_foreach_lerp_(exp_avgs, grads)` 2s + g,
      `_foreach_mul_(exp_avg_sqs)` 2s, `_foreach_addcmul_(exp_avg_sqs, grads, grads)` 2s + g (the
      same gradient twice is one DRAM read), `_foreach_sqrt` 2s, `_foreach_div_` 2s,
      `_foreach_add_(eps)` 2s, `_foreach_addcdiv_(params, exp_avgs, denom)` 2p + 2s:
      4p + 14s + 2g;
    * full fine-tuning under bf16-mixed then writes the bf16 working copy from the fp32 master
      (read 4, write 2: DeepSpeed's and FSDP1's copy after the step);
    * clipping (`clip_grad_norm_`, foreach): the norm reads the gradients, the scaling reads and
      writes them: 3g.
    """
    mixed = job.precision == "bf16-mixed"
    full = job.method == "full"
    # fp32 master (or fp32 LoRA adapters, their own master) under bf16-mixed; bf16 under bf16-pure
    p = g = 4.0 if mixed else 2.0
    bnb = job.optimizer != "adamw"
    states = OPTIMIZER_STATE_BYTES[job.optimizer]
    if not bnb and not mixed:
        states /= 2  # torch keeps m, v in the parameter dtype (bf16)
    if param_bytes is not None:
        p = g = param_bytes
        states = 2 * param_bytes if not bnb else OPTIMIZER_STATE_BYTES[job.optimizer]
        mixed = False  # no separate master copy to write back
    s = states / 2
    fused = bnb or job.optimizer_impl == "fused"
    update = 2 * p + g + 4 * s if fused else 4 * p + 14 * s + 2 * g
    copy = 6.0 if mixed and full else 0.0
    clip = 3 * g if job.grad_clip else 0.0
    return update + copy + clip


def _optimizer_bytes(model: ModelSpec, job: Job, n_gpus: int) -> float:
    """Bytes the optimizer step reads and writes on one GPU (its shard of the trained params)."""
    shard = n_gpus if job.sharding != "none" else 1
    if job.method == "full":
        return optimizer_bytes_per_param(job) * model.params / shard
    copies = embedding_copy_params(model, job)
    per_copy = optimizer_bytes_per_param(job, _copy_bytes_per_param(job)[0]) if copies else 0.0
    return (optimizer_bytes_per_param(job) * adapter_params(model, job) + per_copy * copies) / shard


def _comm_bytes_per_micro_step(model: ModelSpec, job: Job, n_gpus: int) -> float:
    """Bytes each GPU moves per micro-step for data parallelism, ring factor (N−1)/N included.

    DDP all-reduces the gradients (2× their bytes) once per optimizer step (the HF Trainer,
    Accelerate and Lightning accumulate under `no_sync`); DeepSpeed ZeRO-2 reduce-scatters them
    every micro-step, since it keeps only its partition of them (stage_1_and_2.py,
    `reduce_ready_partitions_and_remove_grads` reduces whenever gradients are partitioned, not only
    at the accumulation boundary), and all-gathers the updated 16-bit weights once per optimizer
    step (`all_gather_dp_groups` in `step`); ZeRO-3/FSDP all-gathers the
    weights for forward and for backward and reduce-scatters the gradients every micro-step
    (3× parameter bytes, ZeRO paper §7): weights in the modules' dtype, gradients as
    `_reduced_gradient_bytes` says. A frozen base under ZeRO-3 is gathered in its storage
    dtype and has no gradients, unless FSDP1 holds it in one FlatParameter with the adapters
    (`Job.lora_in_fsdp_units`): then each unit's whole flat gradient is reduce-scattered.
    """
    if n_gpus <= 1:
        return 0.0
    ring = (n_gpus - 1) / n_gpus
    grads = _reduced_gradient_bytes(model, job)
    # the decoder units' flat gradients cover their frozen weights too (`Job.lora_in_fsdp_units`)
    grads += mixed_unit_gradient_bytes(model, job)
    if job.sharding in ("zero3", "hybrid"):
        weights = _gathered_weight_bytes(model, job)
        # trained embedding / head copies are gathered with the base (their own dtype)
        weights += _copy_bytes_per_param(job)[0] * embedding_copy_params(model, job)
        # FSDP1 under no_sync reduce-scatters once per optimizer step (`Job.fsdp_no_sync`)
        reduced = grads / job.grad_accumulation if job.accumulates_unsharded else grads
        return ring * (2.0 * weights + reduced)
    if job.sharding == "zero2":
        # the updated weights are the trained parameters in the same 16-bit dtype as their gradients
        return ring * grads * (1.0 + 1.0 / job.grad_accumulation)
    return ring * 2.0 * grads / job.grad_accumulation


def _reduced_gradient_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes of the trained gradients as data parallelism reduces them: DDP each parameter's own
    gradient (`ddp_gradient_bytes`: fp32 for PEFT's adapters and for fp32 modules under
    autocast), ZeRO and FSDP the compute dtype's (`compute_gradient_bytes`)."""
    if job.sharding == "none":
        return ddp_gradient_bytes(model, job)
    return compute_gradient_bytes(model, job)


def _gathered_weight_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes of the whole model as ZeRO-3/FSDP gathers it: the modules' dtype for full
    fine-tuning (fp32 without a MixedPrecision policy), the frozen base in its storage dtype."""
    if job.method == "full":
        return _module_bytes(job) * model.params
    return _frozen_weight_bytes(model, job)


def tensor_parallel_comm_bytes(model: ModelSpec, job: Job) -> float:
    """Bytes each GPU of a tensor-parallel group moves per micro-step in the group's collectives on
    the b·s·h bf16 activations, ring factor (t−1)/t included (0 at t=1).

    Forward passes: one, plus one recompute under activation checkpointing (either policy: the
    selective one recomputes matmuls whose gathered inputs it did not keep); backward: one.
    """
    t = job.tensor_parallel
    if t <= 1:
        return 0.0
    activation = BF16_BYTES * model.hidden_size * job.seq_len * job.micro_batch
    passes = 1 + (1 if job.grad_checkpointing else 0) + 1
    collectives = TP_COLLECTIVES_PER_LAYER_PASS * model.layers * passes + TP_COLLECTIVES_OUTSIDE_LAYERS
    return (t - 1) / t * activation * collectives


def _network_bytes_per_micro_step(model: ModelSpec, job: Job, n_gpus: int, gpus_per_node: int) -> float:
    """Hybrid sharding across nodes: bytes each GPU all-reduces over the network per micro-step.

    HSDP (torch FSDP HYBRID_SHARD) reduce-scatters the gradients inside the node, then each GPU
    all-reduces its 1/g shard with the GPUs holding the same shard in the other nodes: 2 × shard
    bytes × (nodes − 1)/nodes, once per optimizer step (accumulation runs under no_sync).
    """
    nodes = math.ceil(n_gpus / gpus_per_node)
    if job.sharding != "hybrid" or nodes <= 1:
        return 0.0
    grads = _reduced_gradient_bytes(model, job)
    grads += mixed_unit_gradient_bytes(model, job)
    shard = grads / min(n_gpus, gpus_per_node)
    return 2.0 * shard * (nodes - 1) / nodes / job.grad_accumulation


def step_time(
    model: ModelSpec,
    job: Job,
    gpu: Accelerator,
    n_gpus: int,
    link_bytes_per_s: float | None,
    overlapped: bool,
    gpus_per_node: int | None = None,
    network_bytes_per_s: float | None = None,
    tp_link_bytes_per_s: float | None = None,
) -> StepTime:
    """Seconds of one micro-step on one GPU (see the module docstring for each term).

    Under hybrid sharding across nodes `link_bytes_per_s` is the in-node link the shards are
    gathered over and `network_bytes_per_s` each GPU's share of the node's network. A
    tensor-parallel job (`job.tensor_parallel` > 1) is `n_gpus` / t groups of t GPUs: each GPU
    computes its TP rank's slice (`finetune.tensor_parallel.rank_model`), with the norms on 1/t of
    the tokens under sequence parallelism, data parallelism runs over the groups, and the group's
    collectives cross `tp_link_bytes_per_s` (the in-node link), unoverlapped.
    """
    require_data_parallel(job)
    require_expressible(model, job)
    require_tensor_parallel(model, job, n_gpus, gpus_per_node)
    tp = job.tensor_parallel
    sequence_split = tp if job.sequence_parallel else 1
    tensor_parallel_s = 0.0
    if tp > 1:
        tp_bytes = tensor_parallel_comm_bytes(model, job)
        tp_link = (tp_link_bytes_per_s or 0.0) * COMM_EFFICIENCY
        tensor_parallel_s = tp_bytes / tp_link if tp_link > 0 else math.inf
        model, job = rank_model(model, tp), replace(job, tensor_parallel=1)
        n_gpus //= tp
        gpus_per_node = None if gpus_per_node is None else gpus_per_node // tp
    compute = _compute_terms(model, job, gpu, sequence_split)

    node_gpus = n_gpus if gpus_per_node is None else min(n_gpus, gpus_per_node)
    # hybrid shards inside the node only
    shard_group = node_gpus if job.sharding == "hybrid" else n_gpus
    # a hybrid job's optimizer state is sharded like ZeRO-3 over the node's GPUs
    opt_job, opt_gpus = (
        (replace(job, sharding="zero3"), shard_group) if job.sharding == "hybrid" else (job, n_gpus)
    )
    optimizer_s = (
        _optimizer_step_seconds(model, opt_job, gpu, opt_gpus, gpus_per_node) / job.grad_accumulation
    )
    offload_copy_s = _offload_param_copy_seconds(model, job, gpu, n_gpus)

    comm_bytes = _comm_bytes_per_micro_step(model, job, shard_group)
    network_s = 0.0
    network_bytes = _network_bytes_per_micro_step(model, job, n_gpus, node_gpus)
    if network_bytes:
        network_s = (
            network_bytes / (network_bytes_per_s * COMM_EFFICIENCY) if network_bytes_per_s else math.inf
        )
    exposed_comm_s = 0.0
    if comm_bytes == 0:
        comm_s = 0.0
    elif link_bytes_per_s is None or link_bytes_per_s <= 0:
        comm_s = math.inf
    else:
        link = link_bytes_per_s * COMM_EFFICIENCY
        comm_s = comm_bytes / link
        if job.sharding in ("zero3", "hybrid") and overlapped:
            exposed_comm_s = _exposed_unit_bytes(model, job, shard_group) / link
    # the offloaded shards' host-to-GPU copies run on FSDP's pre-unshard stream, which each unit's
    # all-gather waits for: they queue with the communication, not with the compute
    comm_s += offload_copy_s
    return StepTime(
        compute.matmul_s,
        compute.attention_s,
        compute.elementwise_s,
        compute.dequant_s,
        compute.dispatch_s,
        optimizer_s,
        comm_s,
        overlapped,
        loss_s=compute.loss_s,
        exposed_comm_s=exposed_comm_s,
        network_s=network_s,
        tensor_parallel_s=tensor_parallel_s,
    )


@dataclass(frozen=True)
class _ComputeTerms:
    """Seconds of one micro-step's compute on one GPU, by term (`StepTime`'s fields of that name)."""

    matmul_s: float
    attention_s: float
    elementwise_s: float
    dequant_s: float
    dispatch_s: float
    loss_s: float


@lru_cache(maxsize=4096)
def _compute_terms(model: ModelSpec, job: Job, gpu: Accelerator, sequence_split: int) -> _ComputeTerms:
    """`step_time`'s compute terms: they depend on the job and the GPU, never on how many GPUs
    share it or how they are linked, so one job on the many machines of one GPU model (a refresh
    plans every job on every distinct offer hardware) computes them once."""
    tokens = job.seq_len * job.micro_batch
    peak = gpu.tflops * 1e12
    bw = gpu.bandwidth_bytes_per_s * STREAM_EFFICIENCY
    flop_passes, weight_passes = _passes(job)
    n = matmul_params(model)
    recompute = _recompute_params(model, job)
    # the decoder and head GEMMs at their shapes' efficiency; the rank-r adapters (bandwidth
    # bound: their bytes are in the elementwise term) at the flat one
    gemm_flops = (2.0 * n * flop_passes + 2.0 * recompute) * tokens
    adapter_flops = _adapter_flops_per_token(model, job) * tokens
    gemm_s = gemm_flops / (peak * gemm_shape_efficiency(model, job, gpu, tokens))
    gemm_s += adapter_flops / (peak * gpu.gemm_efficiency)
    weight_traffic = _frozen_weight_read_bytes(model, job) * flop_passes + 2.0 * recompute
    matmul_s = max(gemm_s, weight_traffic / bw)

    attn_fwd = _attention_forward_flops_per_token(model, job) * tokens
    attn_flops = attn_fwd * (1 + ATTENTION_BACKWARD_RATIO + _attention_recompute(job))
    kernel = attention_impl(model, job)
    attention_s = attn_flops / (peak * gpu.attention_efficiency(kernel))
    if kernel == "eager":
        # scores, fp32 softmax and its bf16 copy written and read back, fwd and bwd: ~42 B per score
        scores = model.layers * model.attention_heads * job.seq_len * tokens
        attention_s += 42.0 * scores / bw

    fwd_passes = 1 + (1 if job.grad_checkpointing else 0)
    per_token = _elementwise_bytes_per_token(model, job, sequence_split=sequence_split)
    per_token += _autocast_elementwise_bytes_per_token(model, job)
    elementwise = per_token * model.layers * tokens
    elementwise *= fwd_passes + ELEMENTWISE_BACKWARD_RATIO
    # the eager LoRA branches' backward by its own count, not the ratio
    elementwise += _eager_adapter_backward_excess(model, job) * model.layers * tokens
    elementwise += (
        _fp32_adapter_bytes_per_token(model, job)
        * model.layers
        * tokens
        * (fwd_passes + FP32_ADAPTER_BACKWARD_RATIO)
    )
    elementwise_s = (elementwise + _autocast_weight_cast_bytes(model, job)) / bw

    loss = loss_impl(job)
    logit_bytes = LOSS_BYTES_PER_LOGIT[loss]
    if model.final_logit_softcapping and loss != "fused":
        logit_bytes += SOFTCAP_BYTES_PER_LOGIT
    loss_s = logit_bytes * model.vocab_size * tokens / bw

    dequant_s = 0.0
    # operators the dequantization dispatches in one micro-step
    dequant_ops = 0
    if job.method == "qlora" and job.quant == "gptq":
        # forward and each recompute rebuild the fp16 weight (backward reuses the saved copy)
        # and cast the linear's input to fp16; no autograd graph (frozen weight), no backward ops
        passes = fwd_passes
        dequant_s = linear_params(model) * GPTQ_DEQUANT_BYTES_PER_WEIGHT * passes / bw
        dequant_s += _linear_input_elements_per_token(model) * tokens * GPTQ_INPUT_CAST_BYTES * passes / bw
        dequant_ops = GPTQ_OPS_PER_LINEAR * _linears_per_layer(model) * model.layers * passes
    elif job.method == "qlora":
        per_pass = linear_params(model) * (quantized_bytes_per_param(job) + 2.0)
        # every recomputed layer dequantizes its weights again
        passes = weight_passes + (1 if job.grad_checkpointing else 0)
        dequant_s = per_pass * passes / bw
        calls = _linears_per_layer(model) * model.layers * passes
        if job.quantize_head:
            # the head sits outside the checkpointed layers: forward and backward only
            head = model.vocab_size * model.hidden_size
            dequant_s += head * (quantized_bytes_per_param(job) + 2.0) * weight_passes / bw
            calls += weight_passes
        dequant_ops = NF4_DEQUANT_OPS[job.quant] * calls

    if job.compiled:
        kernels = COMPILED_KERNELS_PER_LAYER_FORWARD * model.layers
        kernels += COMPILED_KERNELS_PER_ADAPTER * _n_adapters(model, job)
        dispatch_s = kernels * (fwd_passes + BACKWARD_OPS_RATIO) * LAUNCH_SECONDS_PER_KERNEL
    else:
        fused = job.kernels == "fused"
        per_layer = FUSED_OPS_PER_LAYER_FORWARD if fused else _eager_ops_per_layer_forward(model)
        per_adapter = FUSED_OPS_PER_ADAPTER if fused else OPS_PER_ADAPTER
        if job.fp32_adapters or job.adapter_input_round_trip:
            per_adapter += FP32_ADAPTER_OPS
        ops_fwd = per_layer * model.layers + per_adapter * _n_adapters(model, job)
        if job.mixed_precision == "autocast":
            ops_fwd += AUTOCAST_OPS_PER_LINEAR * (
                _linears_per_layer(model) * model.layers + _n_adapters(model, job)
            )
        dispatch_s = ops_fwd * (fwd_passes + BACKWARD_OPS_RATIO) * DISPATCH_SECONDS_PER_OP
    dispatch_s += dequant_ops * (LAUNCH_SECONDS_PER_KERNEL if job.compiled else DISPATCH_SECONDS_PER_OP)

    return _ComputeTerms(matmul_s, attention_s, elementwise_s, dequant_s, dispatch_s, loss_s)


def _offload_param_copy_seconds(model: ModelSpec, job: Job, gpu: Accelerator, n_gpus: int) -> float:
    """FSDP CPU offload (ZeRO-3 with `offload`): seconds per micro-step to copy this GPU's parameter
    shards from the host, once before forward and once before backward, over its PCIe x16 link.

    FSDP1 issues each copy in `FlatParamHandle.pre_unshard` on its pre-unshard stream and the
    unit's all-gather waits for it (torch/distributed/fsdp/_runtime_utils.py, `_unshard`): the
    copies run beside the compute stream, in line with the collectives.
    """
    if not (job.offload and job.sharding == "zero3"):
        return 0.0
    return 2.0 * _gathered_weight_bytes(model, job) / n_gpus / (_pcie_bytes_per_s(gpu) * COMM_EFFICIENCY)


def _exposed_unit_bytes(model: ModelSpec, job: Job, n_gpus: int) -> float:
    """Bytes of the collectives nothing overlaps under ZeRO-3/FSDP: one decoder unit's all-gather
    before the first forward (nothing runs before it) and its gradient reduce-scatter after the
    last backward (the optimizer waits for it), ring factor (N−1)/N."""
    ring = (n_gpus - 1) / n_gpus
    unit = layer_params(model)
    full = _module_bytes(job) * unit
    gathered = full if job.method == "full" else _frozen_weight_bytes(model, job) / model.layers
    grads = full if job.method == "full" else 0.0
    if job.mixes_fsdp_units:
        grads = mixed_unit_gradient_bytes(model, job) / model.layers
    return ring * (gathered + grads)


def _pcie_bytes_per_s(gpu: Accelerator) -> float:
    return PCIE_X16_GBYTES_PER_S.get(gpu.pcie_gen or 4, PCIE_X16_GBYTES_PER_S[4]) * 1e9


def _optimizer_step_seconds(
    model: ModelSpec, job: Job, gpu: Accelerator, n_gpus: int, gpus_per_node: int | None = None
) -> float:
    """One optimizer update: memory bound on the GPU; the offloaded or paged-out part over PCIe.

    CPU offload (ZeRO-Offload) moves the bf16 gradients down and the bf16 weights back up every
    step (4 B per trained parameter of the shard). A paged optimizer whose states do not fit in
    VRAM pages them in and back out over PCIe (2 × the bytes that do not fit).
    """
    shard = n_gpus if job.sharding != "none" else 1
    t = trainable_params(model, job) / shard
    if job.offload:
        # gradients down and weights up over PCIe, and the update itself on the host, where all
        # of the node's shards share the host memory bandwidth; host optimizers (DeepSpeedCPUAdam,
        # torch's fused CPU AdamW) update in one pass
        pcie = 4.0 * t / (_pcie_bytes_per_s(gpu) * COMM_EFFICIENCY)
        node_gpus = min(n_gpus, max(1, n_gpus if gpus_per_node is None else gpus_per_node))
        host_job = replace(job, optimizer_impl="fused")
        host = _optimizer_bytes(model, host_job, n_gpus) * node_gpus / (HOST_MEMORY_GBYTES_PER_S * 1e9)
        return pcie + host
    seconds = _optimizer_bytes(model, job, n_gpus) / (gpu.bandwidth_bytes_per_s * STREAM_EFFICIENCY)
    if job.optimizer.startswith("paged") and gpu.vram_gb:
        need = memory_per_gpu(model, job, n_gpus)
        paged_out = min(max(0.0, need.total_gb - gpu.vram_gb), need.optimizer_gb) * GB
        seconds += 2.0 * paged_out / (_pcie_bytes_per_s(gpu) * COMM_EFFICIENCY)
    return seconds


def link_bytes_per_s(
    gpu: Accelerator,
    n_gpus: int,
    gpus_per_node: int,
    intra_node_gbits_per_s: float | None,
    inter_node_gbits_per_s: float | None,
) -> tuple[float | None, bool]:
    """(bytes/s each GPU's collectives see, whether they overlap with compute).

    Across nodes a flat collective runs one ring (channel) per NIC, each carrying its 1/g of the
    data and crossing the node boundary on its own NIC: a GPU's whole ring volume (n−1)/n·S moves
    at the node's network rate, not at its 1/g share of it (NCCL's bus bandwidth: two and three
    8× A100 nodes with 4× 200 Gb/s HDR each measure 91 and 84.8–96 GB/s all-reduce busbw against
    "200G x 4 / 8" = 100 GB/s, NVIDIA/nccl-tests issues #100, 2022-01, and #119, 2022-11), capped
    by the in-node hop each ring also makes (host-staged without P2P). Inside a node, GPUs with P2P
    use `intra_node_gbits_per_s` (NVLink, or PCIe P2P); GPUs without P2P (GeForce, or a node
    stated as `finetune.offer.HOST_STAGED`) stage through host memory: the per-direction PCIe x16
    rate of their generation (the sender's write and the receiver's read cross different links),
    capped by the node's host memory bandwidth shared by its GPUs' staging, not overlapped.
    """
    in_node: float | None
    if not gpu.p2p:
        # every staged byte is written to and read from host memory once, by all of the node's
        # GPUs at the same time: their host-memory traffic shares HOST_MEMORY_GBYTES_PER_S
        staged = _pcie_bytes_per_s(gpu) / HOST_STAGED_TRAVERSALS_PER_DIRECTION
        host_share = HOST_MEMORY_GBYTES_PER_S * 1e9 / (2 * min(n_gpus, gpus_per_node))
        in_node, overlapped = min(staged, host_share), False
    elif intra_node_gbits_per_s is None or intra_node_gbits_per_s <= 0:
        in_node, overlapped = None, True
    else:
        in_node, overlapped = intra_node_gbits_per_s * 1e9 / 8, True
    if math.ceil(n_gpus / gpus_per_node) <= 1:
        return in_node, overlapped
    if not inter_node_gbits_per_s:
        return None, True
    network = inter_node_gbits_per_s * 1e9 / 8
    return (network if in_node is None else min(network, in_node)), overlapped


def estimate_time(
    model: ModelSpec,
    job: Job,
    tokens: float,
    n_gpus: int,
    gpus_per_node: int,
    bf16_tflops: float,
    intra_node_gbits_per_s: float | None,
    inter_node_gbits_per_s: float | None,
    *,
    gpu: Accelerator | None = None,
) -> TimeEstimate:
    """Wall-clock hours to train `tokens` real tokens (dataset tokens × epochs) on `n_gpus`.

    `intra_node_gbits_per_s` is per GPU and direction (NVLink or PCIe), `inter_node_gbits_per_s`
    per node (shared by its GPUs). `gpu` adds memory bandwidth, generation, VRAM and P2P; without
    it the GPU is a P2P-capable one of `bf16_tflops` with FALLBACK_FLOPS_PER_BYTE.
    """
    if n_gpus < 1 or gpus_per_node < 1 or not bf16_tflops > 0:
        raise ValueError("n_gpus, gpus_per_node and bf16_tflops must be positive")
    if not (math.isfinite(tokens) and tokens > 0):
        raise ValueError(f"tokens must be a positive finite number, got {tokens}")
    gpu = gpu or Accelerator(tflops=bf16_tflops)
    nodes = math.ceil(n_gpus / gpus_per_node)
    multi_node = nodes > 1
    network: float | None = None
    if job.sharding == "hybrid" and multi_node:
        # shards are gathered over the in-node link; only the replicas' all-reduce crosses nodes
        link, overlapped = link_bytes_per_s(
            gpu, gpus_per_node, gpus_per_node, intra_node_gbits_per_s, inter_node_gbits_per_s
        )
        network = inter_node_gbits_per_s * 1e9 / 8 / gpus_per_node if inter_node_gbits_per_s else None
    else:
        link, overlapped = link_bytes_per_s(
            gpu, n_gpus, gpus_per_node, intra_node_gbits_per_s, inter_node_gbits_per_s
        )
    tp_link = None
    if job.tensor_parallel > 1:
        # a TP group's collectives stay on its node's links, which all of the node's GPUs use at once
        tp_link, _ = link_bytes_per_s(gpu, gpus_per_node, gpus_per_node, intra_node_gbits_per_s, None)
    step = step_time(
        model, job, gpu, n_gpus, link, overlapped, gpus_per_node, network, tp_link_bytes_per_s=tp_link
    )
    warning: str | None = None
    if math.isinf(step.comm_s) or math.isinf(step.network_s) or math.isinf(step.tensor_parallel_s):
        warning = "no interconnect bandwidth known for a " + (
            "multi-node job" if multi_node else "multi-GPU job"
        )
    # each tensor-parallel group of t GPUs trains on one micro-batch
    data_parallel = n_gpus // job.tensor_parallel
    real_tokens_per_step = job.seq_len * job.micro_batch * job.padding_efficiency * data_parallel
    steps = tokens / real_tokens_per_step
    slow_fabric = multi_node and (inter_node_gbits_per_s or 0.0) < FAST_FABRIC_GBPS
    if slow_fabric and warning is None:
        warning = f"multi-node over {inter_node_gbits_per_s} Gb/s (< {FAST_FABRIC_GBPS:.0f}): no fast fabric"
    seconds = steps * step.total_s
    tokens_per_s = tokens / seconds if seconds > 0 and math.isfinite(seconds) else 0.0
    mfu = (
        model_flops_per_token(model, job) * tokens_per_s / (n_gpus * bf16_tflops * 1e12)
        if tokens_per_s
        else 0.0
    )
    return TimeEstimate(
        hours=seconds / 3600,
        compute_hours=steps * step.compute_s / 3600,
        comm_hours=steps * (step.comm_s + step.network_s + step.tensor_parallel_s) / 3600,
        utilization=mfu,
        nodes=nodes,
        multi_node=multi_node,
        needs_fast_fabric_warning=slow_fabric,
        warning=warning,
        tokens_per_s=tokens_per_s,
        step=step,
    )
