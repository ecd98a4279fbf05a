-- `gpucost gpus`: the canonical GPUs of the seeds with the specs the model reads.
select
    gpu_name,
    vendor,
    architecture,
    vram_gb,
    memory_type,
    memory_bandwidth_gbps,
    bf16_tflops,
    -- the measured large-matmul rate the time model holds the part to (empty: the share below)
    matmul_tflops,
    -- true: bf16_tflops is the half rate FP32 accumulation runs at (GeForce, L40, A10G), which
    -- large matmuls reach in full; false: the model takes 0.80 of it (or matmul_tflops)
    coalesce(try_cast(half_rate_accumulate as boolean), false) as half_rate_accumulate,
    fp8_tflops,
    nvlink_gbps,
    form_factor,
from core.gpus
order by vendor, gpu_name
