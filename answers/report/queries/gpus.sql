select
    gpu_name,
    vendor,
    memory_type,
    memory_bandwidth_gbps,
    bf16_tflops,
    fp8_tflops,
    supports_bf16,
    supports_fp8,
    form_factor
from core.gpus
where gpu_name in (select gpu_name from marts.gpu_offers)
order by gpu_name
