-- Which exchange rate each converted price used (issue 19: core and the mart agree on the rate).
-- `price_usd_per_hour` of a non-USD offer is its price times the rate of `fx_rate_date`, written
-- at load and refreshed whenever the offer is seen again; the mart reads the same rate by that
-- date instead of converting again with whatever rate is newest. Null for USD prices.
alter table core.offer_prices add column if not exists fx_rate_date date;

-- Rows written before: the mart converted them with the newest rate of their currency, so that is
-- the rate they are recorded with (the marts show the same figures after the migration).
update core.offer_prices as o
set fx_rate_date = r.rate_date, price_usd_per_hour = o.price_per_hour * r.usd_per_unit
from (
    select currency, rate_date, usd_per_unit from core.fx_rates
    qualify row_number() over (partition by currency order by rate_date desc) = 1
) as r
where o.currency = r.currency and o.currency <> 'USD';
