select run_id, status, mode, epoch(started_at)::bigint as started_at,
    epoch(finished_at)::bigint as finished_at
from ops.runs
where status <> 'running'
order by started_at desc
limit 1
