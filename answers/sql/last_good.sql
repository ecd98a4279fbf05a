-- When each provider last published prices: its latest finished run that loaded (ok or degraded).
select
    provider,
    max(finished_at) as last_good_at,
    epoch(max(finished_at))::bigint as last_good_epoch,
from ops.provider_runs
where status in ('ok', 'degraded') and finished_at is not null
group by provider
order by provider
