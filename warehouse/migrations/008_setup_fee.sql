-- A one-time set-up fee per instance (connectors.base.Offer.setup_fee), in the offer's currency,
-- on top of the price: a dedicated server's (Hetzner's GEX line). Null: the source states none.
-- The staging view converts it to USD with the offer's own rate, like the price, and the bill
-- charges it once per instance per experiment (finetune.cost, item `fees`).
alter table core.offer_prices add column if not exists setup_fee double;
