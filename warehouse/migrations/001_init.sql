-- Schemas and the tables every later layer relies on.
-- raw: what came over the wire; ops: run bookkeeping; core: history and reference data;
-- staging: views over core; marts: what people query.
create schema if not exists raw;
create schema if not exists ops;
create schema if not exists core;
create schema if not exists staging;
create schema if not exists marts;

create table if not exists ops.runs (
    run_id varchar primary key,
    started_at timestamptz not null,
    finished_at timestamptz,
    status varchar not null,            -- running | ok | partial | failed
    mode varchar not null,              -- live | replay | record
    providers varchar[] not null,
    flow_run_id varchar,
    marts_built_at timestamptz,
    error varchar
);

create table if not exists ops.provider_runs (
    run_id varchar not null,
    provider varchar not null,
    status varchar not null,            -- ok | failed | skipped | rejected
    started_at timestamptz not null,
    finished_at timestamptz,
    fetch_seconds double,
    load_seconds double,
    responses integer not null default 0,
    bytes bigint not null default 0,
    offers_parsed integer not null default 0,
    offers_quarantined integer not null default 0,
    offers_loaded integer not null default 0,
    offers_carried integer not null default 0,   -- kept current by an Unchanged scope
    rows_inserted integer not null default 0,
    rows_closed integer not null default 0,
    error varchar,
    hint varchar,
    primary key (run_id, provider)
);

create table if not exists ops.quarantine (
    run_id varchar not null,
    provider varchar not null,
    quarantined_at timestamptz not null,
    reason varchar not null,
    offer json not null
);

create table if not exists raw.responses (
    run_id varchar not null,
    provider varchar not null,
    seq integer not null,
    method varchar not null,
    url varchar not null,               -- credentials redacted
    request_body varchar,               -- credentials redacted
    status integer not null,
    fetched_at timestamptz not null,
    content_type varchar,
    headers json,
    bytes bigint not null,
    body_sha256 varchar not null,
    payload_path varchar not null,      -- relative to the raw archive root
    primary key (run_id, provider, seq)
);

create table if not exists core.offer_prices (
    provider varchar not null,
    instance_type varchar not null,
    region varchar not null,
    zone varchar,
    pricing_type varchar not null,
    price_source varchar not null,
    price_per_hour double not null,
    currency varchar not null,
    price_usd_per_hour double not null,
    gpu_name_raw varchar,
    gpu_count double not null,
    gpu_memory_gb_raw double,
    vcpus double,
    ram_gb double,
    billing_unit varchar,
    available boolean,
    provider_data json,
    attributes_hash varchar not null,   -- what makes a new interval: price, source, hardware
    valid_from timestamptz not null,
    valid_to timestamptz,               -- null = current
    first_seen_at timestamptz not null,
    last_seen_at timestamptz not null,
    opened_by_run_id varchar not null,
    closed_by_run_id varchar
);
