"""The fine-tuning model: what a job needs in memory, how long it runs, what it costs (pure).

No DuckDB, no I/O: `warehouse/` builds its marts from these functions and reads the seeds;
`answers/` prices one job with them; `flows/` resolves Hugging Face configs. Modules by concern:

* `architecture`: ModelSpec from a config.json or a seed row; parameter counts;
* `job`: the job's knobs (method, precision, optimizer, loss, quantization, shapes, padded data,
  trained embedding / head copies, ZeRO-3 framework);
* `memory`: peak memory per GPU by phase (load, step, optimizer), allocated / reserved / device;
* `time`: a per-step roofline (matmuls, attention, memory traffic, dequantization, dispatch,
  optimizer, communication);
* `tensor_parallel`: what one GPU of a tensor-parallel group (with sequence parallelism) holds
  and computes, and what the group's collectives move;
* `cost`: billing granularity, minimum charges, spot interruptions;
* `placement`: fewest nodes and fastest sharding that fit given hardware (or exactly the stated
  nodes, `place_at`), and its time;
* `offer`: the one translation of an offer or a stated GPU into these inputs, units in the names
  (`intra_node_gbytes_per_s` per direction, `inter_node_gbits_per_s` per node), P2P, the spot
  interruption rate, billing granularity, node limits, fp16 on GPUs without bf16.
"""

from finetune.architecture import (
    ModelSpec,
    count_params,
    embedding_params,
    largest_layer_params,
    linear_params,
    model_from_hf_config,
    model_from_seed_row,
)
from finetune.cost import (
    Granularity,
    billed_hours,
    cost_per_million_tokens,
    expected_spot_cost,
    expected_spot_hours,
    run_cost,
)
from finetune.job import (
    Attention,
    CheckpointPolicy,
    FinetuneJob,
    Job,
    Kernels,
    LoraTargets,
    Loss,
    Method,
    Optimizer,
    OptimizerImpl,
    OutsideModelError,
    PaddedShape,
    Precision,
    Quant,
    Sharding,
    TrainEmbeddings,
    Zero3Impl,
    job_from_seed_row,
    padded_batch_length,
    padded_shape,
    require_data_parallel,
)
from finetune.memory import (
    GB,
    MemoryBreakdown,
    activation_bytes,
    adapter_params,
    bytes_per_param,
    deepspeed_live_bytes,
    embedding_copy_params,
    logits_bytes,
    memory_per_gpu,
    model_states,
    model_states_bytes,
    require_expressible,
    trainable_params,
)
from finetune.time import (
    FAST_FABRIC_GBPS,
    Accelerator,
    TimeEstimate,
    estimate_time,
    flops_per_token,
)

__all__ = [
    "FAST_FABRIC_GBPS",
    "GB",
    "Accelerator",
    "Attention",
    "CheckpointPolicy",
    "FinetuneJob",
    "Granularity",
    "Job",
    "Kernels",
    "LoraTargets",
    "Loss",
    "MemoryBreakdown",
    "Method",
    "ModelSpec",
    "Optimizer",
    "OptimizerImpl",
    "OutsideModelError",
    "PaddedShape",
    "Precision",
    "Quant",
    "Sharding",
    "TimeEstimate",
    "TrainEmbeddings",
    "Zero3Impl",
    "activation_bytes",
    "adapter_params",
    "billed_hours",
    "bytes_per_param",
    "cost_per_million_tokens",
    "count_params",
    "deepspeed_live_bytes",
    "embedding_copy_params",
    "embedding_params",
    "estimate_time",
    "expected_spot_cost",
    "expected_spot_hours",
    "flops_per_token",
    "job_from_seed_row",
    "largest_layer_params",
    "linear_params",
    "logits_bytes",
    "memory_per_gpu",
    "model_from_hf_config",
    "model_from_seed_row",
    "model_states",
    "model_states_bytes",
    "padded_batch_length",
    "padded_shape",
    "require_data_parallel",
    "require_expressible",
    "run_cost",
    "trainable_params",
]
