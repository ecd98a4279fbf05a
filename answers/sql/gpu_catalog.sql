-- `gpucost gpus`: the canonical GPUs of the seeds with the specs the model reads.
select
    gpu_name,
    vendor,
    architecture,
    vram_gb,
    memory_type,
    memory_bandwidth_gbps,
    bf16_tflops,
    -- the measured large-matmul rate the time model holds the part to (empty: 0.80 of bf16_tflops)
    matmul_tflops,
    fp8_tflops,
    nvlink_gbps,
    form_factor,
from core.gpus
order by vendor, gpu_name
