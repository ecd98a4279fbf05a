-- Current price interval of every offer, with its GPU resolved from the hardware seeds.
-- Only successful provider runs ever write core.offer_prices, so this reads only complete loads.
with

offers as (
    select * from core.offer_prices
    where valid_to is null
),

hardware as (
    select * from staging.offer_hardware
),

final as (
    select
        offers.provider,
        offers.instance_type,
        offers.region,
        offers.zone,
        offers.pricing_type,
        offers.pricing_type = 'spot' as is_spot,
        offers.price_source,
        offers.price_per_hour,
        offers.currency,
        offers.price_usd_per_hour,
        offers.gpu_name_raw,
        offers.gpu_memory_gb_raw,
        hardware.gpu_name,
        hardware.match_rule,
        coalesce(hardware.gpu_count, nullif(offers.gpu_count, 0)) as gpu_count,
        hardware.vram_gb,
        hardware.instance_type_pattern,
        hardware.intra_node_interconnect,
        hardware.intra_node_gbps,
        hardware.inter_node_fabric,
        hardware.inter_node_gbps,
        hardware.gpudirect_rdma,
        offers.vcpus,
        offers.ram_gb,
        offers.billing_unit,
        offers.available,
        offers.provider_data,
        offers.valid_from as price_since,
        offers.first_seen_at,
        offers.last_seen_at
    from offers
    left join hardware
        on offers.provider = hardware.provider
        and offers.instance_type = hardware.instance_type
        and offers.gpu_name_raw is not distinct from hardware.gpu_name_raw
        and offers.gpu_memory_gb_raw is not distinct from hardware.gpu_memory_gb_raw
        and offers.gpu_count = hardware.gpu_count_raw
)

select * from final
