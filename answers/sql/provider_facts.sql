-- `gpucost providers`: each provider's storage, egress and billing facts with their sources.
-- Seed columns are read with try_cast: read_csv's auto-detection types a column by its values,
-- so one that is empty in every row comes back as VARCHAR.
with

providers as (
    select * from core.providers
),

storage as (
    select * from core.provider_storage
),

final as (
    select
        providers.provider,
        providers.display_name,
        providers.billing_granularity,
        try_cast(providers.minimum_charge_seconds as double) as minimum_charge_seconds,
        coalesce(try_cast(providers.serverless as boolean), false) as serverless,
        try_cast(storage.storage_persists_on_stop as boolean) as storage_persists_on_stop,
        nullif(trim(storage.volume_kind), '') as volume_kind,
        try_cast(storage.volume_price_per_gb_month as double) as volume_price_per_gb_month,
        try_cast(storage.egress_price_per_gb as double) as egress_price_per_gb,
        try_cast(storage.egress_free_gb_per_month as double) as egress_free_gb_per_month,
        try_cast(storage.ingress_price_per_gb as double) as ingress_price_per_gb,
        try_cast(storage.stopped_instance_bills as boolean) as stopped_instance_bills,
        try_cast(storage.boot_minutes as double) as boot_minutes,
        try_cast(storage.internet_gbits_per_s as double) as internet_gbits_per_s,
        try_cast(storage.disk_write_gbytes_per_s as double) as disk_write_gbytes_per_s,
        nullif(trim(storage.currency), '') as currency,
        nullif(trim(storage.source), '') as source,
        try_cast(storage.checked as date) as checked,
        nullif(trim(storage.notes), '') as notes,
    from providers
    left join storage
        on storage.provider = providers.provider
)

select * from final
order by provider
