-- Current offers whose stated VRAM and the hardware seed's disagree beyond rounding (rules in
-- warehouse/hardware.py `stated_vram`): kept and flagged, never silently replaced.
-- Fix by checking the source, then correcting the seed (with a source) or the connector.
with

offers as (
    select * from staging.stg_offers__current
    where spec_conflict
),

final as (
    select
        provider,
        gpu_name,
        gpu_name_raw,
        vram_gb_stated,
        vram_gb_seed,
        vram_gb,
        vram_source,
        count(*) as offers,
        list(distinct instance_type order by instance_type)[1:5] as example_instance_types
    from offers
    group by all
    order by provider, gpu_name, gpu_name_raw, vram_gb_stated
)

select * from final
