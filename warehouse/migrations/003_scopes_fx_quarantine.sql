-- Scoped guards, FX rates, richer quarantine and honest run bookkeeping (issue: nothing degraded
-- gets published).

-- The part of a provider's answer each offer came from; guards compare a scope with its own last
-- good load. Rows written before scopes existed get the default scope a connector implies.
alter table core.offer_prices add column if not exists scope varchar;
update core.offer_prices set scope = pricing_type || ':' || region where scope is null;

-- What each scope of a provider run did: {"on_demand:us-east-1": {"status": "ok", ...}, ...}.
alter table ops.provider_runs add column if not exists scopes json;

-- A quarantined row's offer key and the values that explain the reason (a held price jump keeps
-- the published price and the new one side by side).
alter table ops.quarantine add column if not exists offer_key varchar;
alter table ops.quarantine add column if not exists details json;

-- Which process runs a refresh, so the next run can tell a dead one (status `abandoned`) from one
-- still fetching on this host.
alter table ops.runs add column if not exists pid integer;
alter table ops.runs add column if not exists hostname varchar;

create table if not exists core.fx_rates (
    currency varchar not null,
    rate_date date not null,
    usd_per_unit double not null,       -- US dollars for one unit of `currency`
    source varchar not null,
    run_id varchar not null,
    loaded_at timestamptz not null,
    primary key (currency, rate_date)
);
