-- Current price interval of every offer, with its GPU resolved from the hardware seeds.
-- Only successful provider runs ever write core.offer_prices, so this reads only complete loads.
with

offers as (
    select * from core.offer_prices
    where valid_to is null
        -- a retired provider (seeds/provider_lifecycle.csv) is never current, even before the
        -- next run closes its offers
        and provider not in (select provider from core.provider_lifecycle where state = 'retired')
),

hardware as (
    select * from staging.offer_hardware
),

-- the reference rate each offer was converted with at load (ECB, via core.fx_rates), by its
-- date: core and the mart agree on the rate (a rate that failed the FX guards is never held, so
-- never used); the offers mart flags a stale one.
fx_rates as (
    select currency, usd_per_unit, rate_date, source
    from core.fx_rates
),

-- offers whose newest price read was quarantined after the price they show was last seen: the
-- run held it (price_jump, unit_change, thin_market, spot_above_on_demand, ...), so the price is
-- the last good one, not today's. The reason of the newest hold and when the hold began.
held as (
    select
        offers.provider,
        offers.instance_type,
        offers.region,
        offers.zone,
        offers.pricing_type,
        arg_max(quarantine.reason, quarantine.quarantined_at) as price_held_reason,
        min(quarantine.quarantined_at) as price_held_since
    from offers
    inner join ops.quarantine as quarantine
        on quarantine.offer_key = concat_ws(
            '|', offers.provider, offers.instance_type, offers.region, coalesce(offers.zone, ''),
            offers.pricing_type
        )
        and quarantine.quarantined_at > offers.last_seen_at
    group by all
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
        case
            when offers.currency = 'USD' then offers.price_per_hour
            else coalesce(offers.price_per_hour * fx_rates.usd_per_unit, offers.price_usd_per_hour)
        end as price_usd_per_hour,
        -- the one-time set-up fee per instance (null: none stated), converted with the price's rate
        offers.setup_fee,
        case
            when offers.currency = 'USD' then offers.setup_fee
            else offers.setup_fee
                * coalesce(fx_rates.usd_per_unit, offers.price_usd_per_hour / offers.price_per_hour)
        end as setup_fee_usd,
        -- the most an instance bills in a month where the provider caps its hourly rate (null: no
        -- cap stated), converted with the price's rate
        offers.monthly_price_cap,
        case
            when offers.currency = 'USD' then offers.monthly_price_cap
            else offers.monthly_price_cap
                * coalesce(fx_rates.usd_per_unit, offers.price_usd_per_hour / offers.price_per_hour)
        end as monthly_price_cap_usd,
        case when offers.currency <> 'USD' then fx_rates.usd_per_unit end as fx_usd_per_unit,
        case when offers.currency <> 'USD' then fx_rates.rate_date end as fx_rate_date,
        case when offers.currency <> 'USD' then fx_rates.source end as fx_source,
        -- a "from $X" page price is a lower bound, never an exact price
        coalesce(try_cast(offers.provider_data ->> 'price_is_from' as boolean), false) as price_is_from,
        -- for a marketplace aggregate: which statistic of the host offers the price is (p10, ...)
        offers.provider_data ->> 'price_statistic' as price_statistic,
        offers.scope,
        offers.gpu_name_raw,
        offers.gpu_memory_gb_raw,
        hardware.gpu_name,
        hardware.match_rule,
        coalesce(hardware.gpu_count, nullif(offers.gpu_count, 0)) as gpu_count,
        hardware.vram_gb,
        hardware.vram_gb_seed,
        hardware.vram_gb_stated,
        hardware.vram_source,
        hardware.spec_conflict,
        hardware.variant_source,
        hardware.instance_type_pattern,
        hardware.intra_node_interconnect,
        hardware.intra_node_gbps,
        hardware.inter_node_fabric,
        hardware.inter_node_gbps,
        hardware.gpudirect_rdma,
        -- what the price covers (providers.csv, with its source): gpu | gpu_cpu_ram | gpu_cpu_ram_disk
        providers.price_covers,
        offers.vcpus,
        offers.ram_gb,
        offers.billing_unit,
        offers.available,
        offers.provider_data,
        offers.valid_from as price_since,
        offers.first_seen_at,
        offers.last_seen_at,
        held.price_held_reason,
        held.price_held_since
    from offers
    left join fx_rates
        on offers.currency = fx_rates.currency and offers.fx_rate_date = fx_rates.rate_date
    left join held
        on offers.provider = held.provider
        and offers.instance_type = held.instance_type
        and offers.region = held.region
        and offers.zone is not distinct from held.zone
        and offers.pricing_type = held.pricing_type
    left join core.providers as providers on offers.provider = providers.provider
    left join hardware
        on offers.provider = hardware.provider
        and offers.instance_type = hardware.instance_type
        and offers.gpu_name_raw is not distinct from hardware.gpu_name_raw
        and offers.gpu_memory_gb_raw is not distinct from hardware.gpu_memory_gb_raw
        and offers.gpu_count = hardware.gpu_count_raw
)

select * from final
