-- Current offers with a canonical GPU that marts.gpu_offers leaves out, and why: an offer that
-- vanishes from the answers says so here (and in `gpucost status`), never silently. Today the
-- one rule is the absurd converted price (GPUCOST_MAX_USD_PER_GPU_HOUR, the load's rule applied
-- again to the USD the mart publishes), `absurd_price`; any other drop reads `left_out`.
with

offers as (
    select * from staging.stg_offers__current
    where gpu_name is not null and gpu_count > 0
),

published as (
    select provider, instance_type, region, zone, pricing_type from marts.gpu_offers
),

final as (
    select
        offers.provider,
        offers.instance_type,
        offers.region,
        offers.zone,
        offers.pricing_type,
        offers.price_per_hour,
        offers.currency,
        offers.fx_rate_date,
        offers.price_usd_per_hour / offers.gpu_count as price_usd_per_gpu_hour,
        -- the rule's name; the figure is price_usd_per_gpu_hour beside it
        case
            when offers.price_usd_per_hour / offers.gpu_count > getvariable('max_usd_per_gpu_hour')
                then 'absurd_price'
            else 'left_out'
        end as drop_reason,
        offers.last_seen_at
    from offers
    anti join published
        on offers.provider = published.provider
        and offers.instance_type = published.instance_type
        and offers.region = published.region
        and offers.zone is not distinct from published.zone
        and offers.pricing_type = published.pricing_type
)

select * from final
order by provider, instance_type, region, pricing_type
