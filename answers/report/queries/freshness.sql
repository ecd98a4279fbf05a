-- Each provider's last finished run (its last good refresh is answers.status.last_good, added there).
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

final as (
    select
        last_run.provider,
        last_run.status,
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
)

select * from final
order by provider
