-- The comparison table's rows, before the page groups them: the offer with the cheapest $/GPU-hour
-- of each GPU x provider x pricing type x region and of each value of what the page filters on
-- (VRAM per GPU, interconnect in and between nodes), so a filter never hides a cheaper offer
-- that passes it behind one that does not. Parameters: $include_stale; an offer its provider marks
-- unavailable now (available = false) is left out unless $include_unavailable
-- (`gpucost report --include-unavailable`).
with

offers as (
    select * from marts.gpu_offers
    where price_usd_per_gpu_hour is not null
        -- a stale provider's offers (warehouse/lifecycle.py) only with `gpucost report --include-stale`
        and (not is_stale or $include_stale)
        and (coalesce(available, true) or $include_unavailable)
),

ranked as (
    select
        *,
        count(*) over region_offers as offers,
        row_number() over (
            region_offers
            order by price_usd_per_gpu_hour, price_usd_per_hour, instance_type, zone nulls first
        ) as region_rank
    from offers
    window region_offers as (
        partition by
            gpu_name,
            provider,
            is_spot,
            region,
            vram_gb,
            intra_node_interconnect,
            inter_node_fabric
    )
),

final as (
    select
        gpu_name,
        provider,
        is_spot,
        region,
        zone,
        instance_type,
        price_source,
        price_usd_per_gpu_hour,
        price_usd_per_hour,
        currency,
        price_is_from,
        price_statistic,
        price_covers,
        available,
        gpu_count,
        vram_gb,
        total_vram_gb,
        intra_node_interconnect,
        intra_node_gbps,
        inter_node_fabric,
        inter_node_gbps,
        billing_granularity,
        minimum_charge_seconds,
        -- what answers.billing.billing_rule reads: the rule in words, beside the hourly figure
        serverless,
        price_per_hour as published_price_per_hour,
        setup_fee,
        monthly_price_cap,
        epoch(last_seen_at)::bigint as last_seen_at,
        epoch(price_since)::bigint as price_since,
        offers
    from ranked
    where region_rank = 1
)

select * from final
order by gpu_name, provider, is_spot, region
