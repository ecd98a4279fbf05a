-- Each provider's last finished run (its last good refresh is answers.status.last_good, added there)
-- and its health as the marts last computed it (staging.provider_health, warehouse/lifecycle.py):
-- `fresh`, `failing` since its first failed run after its last good one, or `stale` once failing
-- for longer than GPUCOST_STALE_AFTER_HOURS, when its offers leave the comparison.
with

finished as (
    select * from ops.provider_runs
    where run_id not in (select run_id from ops.runs where status = 'running')
),

last_run as (
    select * from finished
    qualify row_number() over (partition by provider order by started_at desc) = 1
),

held_prices as (
    select run_id, provider, count(*) as held_prices
    from ops.quarantine
    -- every guard that holds a moved price at its last good value (warehouse/load.py)
    where reason in ('price_jump', 'unit_change', 'thin_market', 'spot_above_on_demand')
    group by run_id, provider
),

current_offers as (
    select provider, count(*) as current_offers
    from marts.gpu_offers
    group by provider
),

health as (
    select * from staging.provider_health
),

final as (
    select
        last_run.provider,
        last_run.status,
        case
            when health.provider_state = 'stale' then 'stale'
            when health.provider is not null then 'failing'
            else 'fresh'
        end as provider_state,
        epoch(health.provider_failing_since)::bigint as provider_failing_since,
        health.failed_runs,
        last_run.run_id,
        epoch(last_run.started_at)::bigint as started_at,
        epoch(last_run.finished_at)::bigint as finished_at,
        last_run.offers_loaded,
        last_run.offers_quarantined,
        coalesce(held_prices.held_prices, 0) as held_prices,
        coalesce(current_offers.current_offers, 0) as current_offers,
        last_run.error,
        last_run.hint,
        coalesce(last_run.scopes::varchar, '{}') as scopes
    from last_run
    left join held_prices
        on last_run.run_id = held_prices.run_id and last_run.provider = held_prices.provider
    left join current_offers on last_run.provider = current_offers.provider
    left join health on last_run.provider = health.provider
)

select * from final
order by provider
