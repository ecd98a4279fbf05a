-- Per job and pricing type, the cheapest offers that fit and are priced, one per instance type.
with

fits as (
    select * from marts.finetune_costs
    where fits and priced
),

per_instance as (
    select
        *,
        row_number() over (
            partition by job_id, provider, instance_type, pricing_type
            order by cost_usd, region, zone nulls first
        ) as region_rank
    from fits
),

ranked as (
    select
        *,
        row_number() over (
            partition by job_id, pricing_type
            order by cost_usd, provider, instance_type
        ) as rank
    from per_instance
    where region_rank = 1
),

final as (
    select
        job_id,
        pricing_type,
        rank,
        provider,
        instance_type,
        region,
        price_source,
        gpu_name,
        gpu_count,
        price_usd_per_hour,
        gpus_used,
        nodes_used,
        sharding,
        total_gb,
        usable_vram_gb,
        estimated_hours,
        billed_hours,
        on_demand_cost_usd,
        expected_spot_cost_usd,
        cost_usd,
        usd_per_million_tokens,
        interruptions_per_hour,
        fabric_warning
    from ranked
    where rank <= $top
)

select * from final
order by job_id, pricing_type, rank
