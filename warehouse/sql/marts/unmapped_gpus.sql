-- Current offers whose GPU the hardware seeds cannot name: never dropped, never guessed.
-- Fix by adding an alias or instance type row to warehouse/seeds (with a source).
with

offers as (
    select * from staging.stg_offers__current
    where gpu_name is null
),

final as (
    select
        provider,
        gpu_name_raw,
        gpu_memory_gb_raw,
        count(*) as offers,
        list(distinct instance_type order by instance_type)[1:5] as example_instance_types,
        min(first_seen_at) as first_seen_at
    from offers
    group by provider, gpu_name_raw, gpu_memory_gb_raw
    order by offers desc, provider, gpu_name_raw
)

select * from final
