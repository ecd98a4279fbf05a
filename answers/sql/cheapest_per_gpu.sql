-- The refresh artifact's table: the cheapest current offer of each GPU, largest VRAM first.
with

offers as (
    select * from marts.gpu_offers
    where not is_stale  -- a stale provider's prices left every answer
),

final as (
    select
        gpu_name,
        provider,
        instance_type,
        region,
        pricing_type,
        price_source,
        round(price_usd_per_gpu_hour, 4) as usd_per_gpu_hour,
        vram_gb,
    from offers
    qualify row_number() over (partition by gpu_name order by price_usd_per_gpu_hour) = 1
)

select * exclude (vram_gb) from final
order by vram_gb desc, usd_per_gpu_hour
limit 25
