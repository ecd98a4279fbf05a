-- Every price interval ever held, with its GPU description (resolved to a canonical GPU in Python,
-- as the marts do for current offers: closed offers are in no mart).
select
    provider,
    instance_type,
    gpu_name_raw,
    gpu_memory_gb_raw,
    gpu_count,
    pricing_type,
    price_usd_per_hour,
    valid_from,
    valid_to
from core.offer_prices
where price_usd_per_hour is not null
