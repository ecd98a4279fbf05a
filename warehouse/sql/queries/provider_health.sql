-- Each provider's health as of `now` (parameter 1), with `stale_after_hours` (parameter 2):
-- failing since its first failed or rejected run after its last good one (ok or degraded: both
-- published prices), and stale once that is longer ago than the setting. warehouse/lifecycle.py
-- materialises it as staging.provider_health for the marts and reads it for `gpucost status`.
with

runs as (
    select * from ops.provider_runs
    where run_id not in (select run_id from ops.runs where status = 'running')
),

last_good as (
    select provider, max(started_at) as last_good_started_at, max(finished_at) as last_good_at
    from runs
    where status in ('ok', 'degraded')
    group by provider
),

failures as (
    select
        runs.provider,
        min(runs.started_at) as failing_since,
        count(*) as failed_runs,
        arg_max(runs.error, runs.started_at) as last_error,
        arg_max(runs.hint, runs.started_at) as last_hint
    from runs
    left join last_good on runs.provider = last_good.provider
    where runs.status in ('failed', 'rejected')
        and (last_good.last_good_started_at is null or runs.started_at > last_good.last_good_started_at)
    group by runs.provider
),

final as (
    select
        failures.provider,
        case
            when epoch(?::timestamptz) - epoch(failures.failing_since) > ? * 3600 then 'stale'
            else 'active'
        end as provider_state,
        failures.failing_since as provider_failing_since,
        last_good.last_good_at,
        failures.failed_runs,
        failures.last_error,
        failures.last_hint
    from failures
    left join last_good on failures.provider = last_good.provider
)

select * from final
order by provider
