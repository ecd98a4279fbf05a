-- What `gpucost prices` and `gpucost estimate` show of each current offer, before any filter
-- (answers/prices.py wraps this in `select ... where ...` with `?` parameters).
with

offers as (
    select * from marts.gpu_offers
),

final as (
    select
        offers.gpu_name,
        offers.provider,
        offers.instance_type,
        offers.region,
        offers.zone,
        offers.pricing_type,
        offers.is_spot,
        offers.price_source,
        offers.price_statistic,
        offers.price_is_from,
        offers.price_usd_per_gpu_hour,
        offers.price_usd_per_hour,
        offers.gpu_count,
        offers.vram_gb,
        offers.vram_gb_stated,
        offers.vram_source,
        offers.spec_conflict,
        offers.total_vram_gb,
        offers.intra_node_interconnect,
        offers.inter_node_gbps,
        offers.spot_kind,
        offers.price_covers,
        offers.available,
        -- how it bills beyond the hourly figure (answers/billing.py): unit, serverless, the
        -- published price and fee in the offer's currency, a monthly cap the provider states
        offers.billing_granularity,
        offers.serverless,
        offers.currency,
        offers.price_per_hour as published_price_per_hour,
        offers.setup_fee,
        offers.monthly_price_cap,
        -- AWS' Spot Advisor band: the share of instances interrupted over the trailing month
        try_cast(offers.provider_data ->> 'interruption_rate_min' as double) as interruption_rate_min,
        try_cast(offers.provider_data ->> 'interruption_rate_max' as double) as interruption_rate_max,
        offers.price_since,
        offers.last_seen_at,
        offers.provider_state,
        offers.provider_failing_since,
        offers.is_stale
    from offers
    where offers.gpu_count > 0 and offers.price_usd_per_hour > 0
)

select * from final
