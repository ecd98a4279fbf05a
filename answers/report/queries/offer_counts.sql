-- Why the comparison may be empty: the current offers and how many of them the page leaves out,
-- and whether any refresh ever published prices (a provider run `ok` or `degraded`).
-- Parameters: $include_stale, $include_unavailable (as queries/offers.sql).
with

offers as (
    select * from marts.gpu_offers
),

counts as (
    select
        count(*) as current_offers,
        count(*) filter (where price_usd_per_gpu_hour is null) as unpriced,
        count(*) filter (
            where price_usd_per_gpu_hour is not null and is_stale and not $include_stale
        ) as stale,
        count(*) filter (
            where price_usd_per_gpu_hour is not null
                and (not is_stale or $include_stale)
                and not coalesce(available, true)
                and not $include_unavailable
        ) as unavailable,
        string_agg(distinct provider, ', ' order by provider) filter (
            where is_stale and not $include_stale
        ) as stale_providers
    from offers
),

good_runs as (
    select count(*) as good_runs
    from ops.provider_runs
    where status in ('ok', 'degraded')
),

final as (
    select counts.*, good_runs.good_runs
    from counts
    cross join good_runs
)

select * from final
