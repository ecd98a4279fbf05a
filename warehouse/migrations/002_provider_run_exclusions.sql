-- What each provider run's parser left out on purpose, by reason: {"windows": 145, ...}.
alter table ops.provider_runs add column if not exists excluded json;
