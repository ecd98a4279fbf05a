-- One row per current GPU offer: price, canonical GPU and its specs, interconnect, billing.
-- Column names here are a contract (DESIGN.md); feeds pin their own column lists on top.
with

offers as (
    select * from staging.stg_offers__current
    where gpu_name is not null
),

gpus as (
    select * from core.gpus
),

providers as (
    select * from core.providers
),

-- failing providers only (warehouse/lifecycle.py); every other provider is active
provider_health as (
    select * from staging.provider_health
),

final as (
    select
        offers.provider,
        offers.instance_type,
        offers.region,
        offers.zone,
        offers.pricing_type,
        offers.is_spot,
        offers.price_source,
        offers.price_usd_per_hour,
        offers.price_per_hour,
        offers.currency,
        offers.setup_fee,
        offers.setup_fee_usd,
        offers.monthly_price_cap,
        offers.monthly_price_cap_usd,
        offers.fx_usd_per_unit,
        offers.fx_rate_date,
        offers.fx_source,
        -- a rate older than the stale limit is shown, never silently used (marts.py sets the variable)
        coalesce(
            offers.currency <> 'USD'
            and date_diff('day', offers.fx_rate_date, current_date) > getvariable('fx_stale_after_days'),
            false
        ) as fx_rate_stale,
        offers.price_is_from,
        offers.price_statistic,
        offers.gpu_name,
        gpus.model as gpu_model,
        -- null when the source does not state the variant and no provider doc does (hardware.py)
        case when offers.variant_source <> 'seed_default' then gpus.form_factor end as gpu_variant,
        offers.variant_source,
        offers.gpu_name_raw,
        offers.gpu_count,
        offers.vram_gb,
        -- the provider's own per-GPU figure, and which figure vram_gb publishes (hardware.py)
        offers.vram_gb_stated,
        offers.vram_source,
        offers.spec_conflict,
        offers.vram_gb * offers.gpu_count as total_vram_gb,
        gpus.memory_type,
        gpus.memory_bandwidth_gbps,
        gpus.bf16_tflops,
        gpus.fp8_tflops,
        coalesce(
            offers.intra_node_interconnect,
            case
                when offers.gpu_count <= 1 then 'none'
                when gpus.form_factor ilike 'SXM%' then 'NVSwitch'
                when gpus.nvlink_gbps = 0 then 'PCIe'
            end
        ) as intra_node_interconnect,
        coalesce(
            offers.intra_node_gbps,
            case
                when offers.gpu_count <= 1 then 0
                when gpus.form_factor ilike 'SXM%' then gpus.nvlink_gbps
            end
        ) as intra_node_gbps,
        case
            when offers.intra_node_interconnect is not null then 'instance_type'
            when offers.gpu_count <= 1 then 'single_gpu'
            -- an SXM board only exists on an HGX baseboard, whose GPUs meet in NVSwitch
            when gpus.form_factor ilike 'SXM%' then 'sxm_form_factor'
            -- a GPU without NVLink can only talk to its neighbours over PCIe
            when gpus.nvlink_gbps = 0 then 'gpu_has_no_nvlink'
        end as interconnect_source,
        offers.inter_node_fabric,
        offers.inter_node_gbps,
        offers.gpudirect_rdma,
        offers.price_usd_per_hour / offers.gpu_count as price_usd_per_gpu_hour,
        offers.price_usd_per_hour / (offers.vram_gb * offers.gpu_count) as price_usd_per_vram_gb_hour,
        providers.billing_granularity,
        providers.minimum_charge_seconds,
        providers.spot_kind,
        coalesce(providers.serverless, false) as serverless,
        offers.price_covers,
        offers.vcpus,
        offers.ram_gb,
        offers.available,
        offers.match_rule,
        offers.provider_data,
        offers.price_since,
        offers.last_seen_at,
        offers.price_held_reason,
        offers.price_held_since,
        coalesce(provider_health.provider_state, 'active') as provider_state,
        provider_health.provider_failing_since,
        coalesce(provider_health.provider_state = 'stale', false) as is_stale
    from offers
    left join gpus on offers.gpu_name = gpus.gpu_name
    left join providers on offers.provider = providers.provider
    left join provider_health on offers.provider = provider_health.provider
    where offers.gpu_count > 0
        -- the load's absurd-price rule, on the converted USD the mart publishes: a held row whose
        -- conversion is absurd never shows (the dropped_offers mart says which and why, and
        -- `gpucost status` counts them); getvariable: marts.py sets it
        and offers.price_usd_per_hour / offers.gpu_count <= getvariable('max_usd_per_gpu_hour')
)

select * from final
