-- `gpucost gpus`: the canonical GPUs of the seeds with the specs the model reads.
select
    gpu_name,
    vendor,
    architecture,
    vram_gb,
    memory_type,
    memory_bandwidth_gbps,
    bf16_tflops,
    fp8_tflops,
    nvlink_gbps,
    form_factor,
from core.gpus
order by vendor, gpu_name
