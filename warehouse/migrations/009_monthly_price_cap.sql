-- The most one instance bills in a month (connectors.base.Offer.monthly_price_cap), in the
-- offer's currency, where the provider caps its hourly rate at a monthly price (Hetzner's
-- dedicated servers, Linode). Null: no cap stated. Until now it sat in provider_data
-- (`price_monthly` flagged `price_monthly_is_cap`); the load updates it in place like
-- provider_data, so no interval reopens. The staging view converts it to USD with the offer's
-- own rate, like the price, and the bill charges at most this per 730-hour month held.
alter table core.offer_prices add column if not exists monthly_price_cap double;
-- offers loaded with the cap in provider_data keep it (Hetzner's); an unflagged `price_monthly`
-- (Linode's, DigitalOcean's) is no cap until its connector states one
update core.offer_prices
set monthly_price_cap = try_cast(provider_data ->> 'price_monthly' as double)
where monthly_price_cap is null
    and coalesce(try_cast(provider_data ->> 'price_monthly_is_cap' as boolean), false);
