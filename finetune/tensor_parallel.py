"""Tensor parallelism with sequence parallelism: what one GPU of a TP group holds and does, and
what the group's collectives move (pure).

A tensor-parallel group of t GPUs inside one node splits each decoder layer (Megatron-LM:
Shoeybi et al. 2019, arXiv:1909.08053, §3): q, k, v, gate and up by output columns, o and down
by input rows, so attention splits by heads and the MLP by its intermediate size; the embedding
and the output head split by vocabulary (a vocab-parallel embedding, and the loss computed on
the vocab-sharded logits: torchtitan's `loss_parallel`, Megatron's vocab-parallel
cross-entropy). Sequence parallelism (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", arXiv:2205.05198, §4.2.2) splits what lies between
those regions — norms, residual adds, dropout — by sequence, so every activation a layer keeps
is 1/t of its size without TP (their §4.2: per layer sbh(10 + 24/t + 5as/(ht)) bytes under
tensor parallelism alone, sbh/t·(34 + 5as/h) with sequence parallelism). This is the layout
torchtitan (`parallelize_llama`: SequenceParallel on the norms) and Megatron
(`--sequence-parallel`) train with, and the default here (`Job.sequence_parallel`). Without it
the norm regions stay whole on every GPU of the group: each GPU then keeps what its slice of the
model keeps, the norms and the residual stream at full size.

One GPU of the group therefore computes what a narrower model computes — t times fewer heads, KV
heads, intermediate columns and vocabulary rows, the same hidden size — on every token of the
micro-batch (`rank_model`); data parallelism (ZeRO/FSDP) then runs over the n/t groups.

Per layer the group runs four collectives each pass, on the b·s·h activations (bf16): in forward
an all-gather of the sequence-sharded input before attention and before the MLP, and a
reduce-scatter of their outputs after o and after down; backward runs the conjugate four; a
recomputed forward (activation checkpointing) runs its four again. The embedding's output is
reduce-scattered into the sequence shards and the final norm's output all-gathered before the
head: two more each in forward and backward. A ring all-gather or reduce-scatter of a tensor of
B bytes moves (t−1)/t·B through each GPU's link; without sequence parallelism each pair is one
all-reduce, which moves the same 2(t−1)/t·B (Korthikanti §4.2.2). They sit on the critical path:
each matmul waits for its gathered input (`finetune.time.tensor_parallel_comm_bytes`). Keeping
1/t of the activations means backward gathers a column-parallel linear's input again for its
weight (or LoRA A) gradient; Korthikanti overlap that gather with the input-gradient GEMM, so it
is not counted. Async TP (torchtitan's micro-pipelined all-gather-matmul, NeMo AutoModel
`enable_async_tensor_parallel`) also hides the forward's collectives behind the matmuls; it is
not modelled, so such runs come out a little slow. Nor is DTensor's eager dispatch overhead: the
stacks that use it compile.
"""

from __future__ import annotations

import math
from dataclasses import asdict

from finetune.architecture import ModelSpec, count_params
from finetune.job import Job, OutsideModelError


def require_tensor_parallel(
    model: ModelSpec, job: Job, n_gpus: int, gpus_per_node: int | None = None
) -> None:
    """Refuse a tensor-parallel job this model cannot describe or these GPUs cannot hold, with one
    line saying what to ask instead. A no-op when `job.tensor_parallel` is 1."""
    refusal = tensor_parallel_refusal(model, job) or group_refusal(job.tensor_parallel, n_gpus, gpus_per_node)
    if refusal:
        raise OutsideModelError(refusal)


def tensor_parallel_refusal(model: ModelSpec, job: Job) -> str | None:
    """Why `job`'s tensor-parallel degree cannot split `model` as modelled, or None (also at t=1)."""
    t = job.tensor_parallel
    if t <= 1:
        return None
    if job.method == "qlora":
        return (
            f"tensor_parallel={t} with qlora: bitsandbytes' 4-bit weights are not split by tensor "
            "parallelism in the stacks this model describes; use method='lora', or qlora with "
            "tensor_parallel=1 and sharding='zero3'"
        )
    if job.offload:
        return f"tensor_parallel={t} with CPU offload is not modelled; leave offload out"
    if job.sharding == "hybrid":
        return f"tensor_parallel={t} with hybrid sharding is not modelled; use sharding='zero3'"
    if model.is_moe:
        return f"tensor_parallel={t} on a mixture of experts (expert parallelism) is not modelled"
    for name, size in (
        ("attention heads", model.attention_heads),
        ("KV heads", model.kv_heads),
        ("intermediate size", model.intermediate_size),
    ):
        if size % t:
            return f"tensor_parallel={t} does not divide {model.model_id}'s {name} ({size}): pick a divisor"
    return None


def group_refusal(t: int, n_gpus: int, gpus_per_node: int | None = None) -> str | None:
    """Why t-way tensor-parallel groups cannot be laid on `n_gpus` GPUs of `gpus_per_node` per
    node (a group stays inside one node's links), or None."""
    node = n_gpus if gpus_per_node is None else gpus_per_node
    if t <= 1 or (n_gpus % t == 0 and node % t == 0):
        return None
    return (
        f"tensor_parallel={t} needs a multiple of {t} GPUs in each node (a TP group stays inside "
        f"one node's links); got {node} per node, {n_gpus} in all"
    )


def rank_model(model: ModelSpec, t: int) -> ModelSpec:
    """What one GPU of a t-way tensor-parallel group holds and computes: t times fewer attention
    and KV heads (head size kept), intermediate columns and vocabulary rows (padded up), the same
    hidden size and layers. Its parameter count keeps the seed's ratio to the architecture's count
    (biases and other small terms the seed includes scale with it); norms are replicated."""
    if t <= 1:
        return model
    narrow = ModelSpec(
        **{
            **asdict(model),
            "attention_heads": model.attention_heads // t,
            "kv_heads": model.kv_heads // t,
            "head_dim": model.head_dim_,
            "intermediate_size": model.intermediate_size // t,
            "vocab_size": math.ceil(model.vocab_size / t),
        }
    )
    scale = count_params(narrow) / count_params(model)
    params = round(model.params * scale)
    active = round(model.active_params * scale)
    return ModelSpec(**{**asdict(narrow), "params": params, "active_params": active})
