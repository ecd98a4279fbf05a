-- `gpucost status`: each provider's last finished run, what it loaded, held back and closed.
with

finished as (
    select * from ops.provider_runs
    where run_id not in (select run_id from ops.runs where status = 'running')
),

final as (
    select
        provider,
        status,
        strftime(finished_at, '%Y-%m-%d %H:%M') as finished_utc,
        offers_loaded as loaded,
        offers_quarantined as quarantined,
        coalesce(excluded::varchar, '{}') as excluded_by_rule,
        rows_inserted as history_added,
        rows_closed as history_closed,
        coalesce(error, '') as error,
    from finished
    qualify row_number() over (partition by provider order by started_at desc) = 1
)

select * from final
order by provider
