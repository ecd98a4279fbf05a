-- Per job and pricing type, the offers that fit and are priced with the smallest whole bill
-- (total_usd), one per instance type.
with

-- an offer its provider marks unavailable now ranks only with $include_unavailable
fits as (
    select * from marts.finetune_costs as costs
    where fits and priced
        and ($include_unavailable or not exists (
            select 1 from marts.gpu_offers as offers
            where offers.available = false
                and offers.provider = costs.provider
                and offers.instance_type = costs.instance_type
                and offers.region = costs.region
                and offers.zone is not distinct from costs.zone
                and offers.pricing_type = costs.pricing_type
        ))
),

per_instance as (
    select
        *,
        row_number() over (
            partition by job_id, provider, instance_type, pricing_type
            order by total_usd, region, zone nulls first
        ) as region_rank
    from fits
),

ranked as (
    select
        *,
        row_number() over (
            partition by job_id, pricing_type
            order by total_usd, provider, instance_type
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
        total_usd,
        bill_unknown_items,
        interruptions_per_hour,
        fabric_warning
    from ranked
    where rank <= $top
)

select * from final
order by job_id, pricing_type, rank
