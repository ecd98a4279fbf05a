-- Runs in progress, interrupted or abandoned (a run that died says so: never 'running' forever),
-- newest first.
select
    run_id,
    status,
    started_at,
    error,
from ops.runs
where status in ('running', 'interrupted', 'abandoned')
order by started_at desc
limit 5
