-- Provider lifecycle (warehouse/lifecycle.py): why an interval was closed when no load of its
-- provider closed it. A retired provider's open offers are closed by the next run with
-- 'retired: <reason>'; intervals closed by a load (a changed price, a vanished offer) keep null.
alter table core.offer_prices add column if not exists closed_reason varchar;
