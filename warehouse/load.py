"""Landing a provider's batch: raw archive, validation, and the SCD2 price history.

`land_raw` stores every response body once, content-addressed by its sha256 and compressed, in
the raw archive, and records the exchange in `raw.responses`, so parsing can always be replayed
from what came over the wire (`archived_responses`); both live in `warehouse.archive`.

`load_offers` runs in one transaction per provider:

1. validate: rows a parser flagged (`Offer.problem`), zero, negative, non-finite or absurd prices,
   currencies without a rate in `core.fx_rates`, bad GPU counts and duplicate offer keys go to
   `ops.quarantine` with the raw row and the reason. A quarantined offer keeps its last good price:
   it is *held*, never closed;
2. scope guard: each scope (`Offer.scope_name`) is compared with its own last good load, which is
   the set of its offers still current. A scope that comes back empty, vanished, or lost more than
   `shrink_limit` of its offers is *held*: its last good prices stay current and the run is
   `degraded`; the other scopes load. If no scope loads, the run is `rejected`;
3. anomaly guard: a price that moved more than `jump_factor` (either way) from its current value is
   held and quarantined as `price_jump` with both values, unless `accept_changes` or the previous
   run of the provider held the same move (a change confirmed by two consecutive runs). A price
   that moved by a unit factor (`unit_factors`: the offer's GPU count, x60, x730, x100 or an
   exchange rate, within `UNIT_TOLERANCE`) is held as `unit_change` whatever its size, and no
   repetition confirms it (a misread unit repeats identically every run): only `accept_changes`.
   A marketplace segment of fewer than `market_min_hosts` hosts that moves beyond
   `CONFIRM_FACTOR` is held as `thin_market`, and no repetition confirms it (one host's listing
   repeats identically every run, so a second run is no second witness): the move is published
   once the segment stands on `market_min_hosts` hosts again (then the jump rule above applies),
   or with `accept_changes`. A spot price above the on-demand price of the same instance and
   region (`spot_above_on_demand`) is held where the provider's spot is a fixed discount of
   on-demand (`core.providers.spot_kind = 'fixed_discount'`), and flagged in `provider_data`
   where a market may really price spot above on-demand (AWS, GCP, bid markets).
   While a price is held its offer shows the old price with the reason and since when
   (`price_held_reason`, `price_held_since` in the marts) and its `last_seen_at` ages;
4. merge into `core.offer_prices`, keyed by (provider, instance_type, region, zone, pricing_type):
   an unchanged offer only moves `last_seen_at`; a changed price or hardware closes the current
   interval and opens a new one; an offer absent from a healthy scope is closed. Offers carried
   by an `Unchanged` scope move `last_seen_at`; held offers keep theirs, so freshness stays honest.
   A failed provider run never reaches this step, so it closes nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime
from typing import Any

import duckdb
import polars as pl

from connectors.base import SHRINK_LIMIT, FxRate, Offer, Unchanged
from warehouse.archive import archived_responses, land_raw  # noqa: F401  (re-exported: callers land here)
from warehouse.db import transaction
from warehouse.freshness import stale_fx_rates  # noqa: F401  (re-exported: it was defined here)

# A price moving by more than this factor, up or down, in one run is held for confirmation.
JUMP_FACTOR = 3.0
# Two held prices within this factor of each other are the same move, confirmed by a second run.
CONFIRM_FACTOR = 1.1
# A move within this relative distance of a unit factor is a unit change. Prices are published to
# at least three significant digits ($1.99, $0.439, $27.20), so a price recomputed in another
# unit lands within half a unit of its last digit, <= 0.5 % of the price, of the exact factor:
# 0.5 % catches every such misreading. It also holds an ordinary move that happens to land within
# 0.5 % of exactly 2x on a 2-GPU box (or of the EUR/USD rate): that costs one offer one
# `--accept-changes`, while publishing a per-GPU price as the instance's costs every reader.
UNIT_TOLERANCE = 0.005
# Time and money units a price can be misread in: per minute (60 per hour), per month (730 h,
# connectors.base.HOURS_PER_UNIT) and cents (100 per dollar).
UNIT_FACTORS = (60.0, 730.0, 100.0)
# No GPU rents for more than this per GPU-hour (a GB200 NVL72 rack is ~$42/GPU-h): above it a
# price is a parse error (cents read as dollars, a monthly price read as hourly).
MAX_USD_PER_GPU_HOUR = 2000.0

# A marketplace segment standing on fewer host offers than this is one host's word: a move of it
# beyond CONFIRM_FACTOR is held as `thin_market` until the segment reaches this many hosts or
# --accept-changes publishes it (Settings.market_min_hosts). Why repetition does not confirm it:
# a host's listing stays up for days, so two runs an hour apart read the same one listing twice;
# a second run witnesses the market only when more hosts stand behind the price.
MARKET_MIN_HOSTS = 3
# A rate further than this share from the median of its currency's rates over the last
# FX_BAND_DAYS days is out of band (Settings.fx_band_fraction).
FX_BAND_FRACTION = 0.2
FX_BAND_DAYS = 30

_OFFER_COLUMNS = {
    "provider": pl.String,
    "instance_type": pl.String,
    "region": pl.String,
    "zone": pl.String,
    "pricing_type": pl.String,
    "price_source": pl.String,
    "price_per_hour": pl.Float64,
    "currency": pl.String,
    "price_usd_per_hour": pl.Float64,
    "fx_rate_date": pl.Date,
    "gpu_name_raw": pl.String,
    "gpu_count": pl.Float64,
    "gpu_memory_gb_raw": pl.Float64,
    "vcpus": pl.Float64,
    "ram_gb": pl.Float64,
    "billing_unit": pl.String,
    "setup_fee": pl.Float64,
    "monthly_price_cap": pl.Float64,
    "available": pl.Boolean,
    "provider_data": pl.String,
    "attributes_hash": pl.String,
    "scope": pl.String,
}
# A change in any of these opens a new price interval; provider_data, availability and the
# monthly cap do not (the cap moved out of provider_data: an offer that gains it keeps its interval).
_HASHED = (
    "price_per_hour",
    "currency",
    "price_source",
    "gpu_name_raw",
    "gpu_count",
    "gpu_memory_gb_raw",
    "vcpus",
    "ram_gb",
    "billing_unit",
)


@dataclass
class LoadResult:
    status: str  # ok | degraded | rejected
    offers_parsed: int = 0
    offers_quarantined: int = 0
    offers_loaded: int = 0
    offers_carried: int = 0  # kept current: by an Unchanged scope, a held scope or a held row
    rows_inserted: int = 0
    rows_closed: int = 0
    error: str | None = None
    hint: str | None = None
    quarantine_reasons: dict[str, int] = field(default_factory=dict)
    scopes: dict[str, dict[str, Any]] = field(default_factory=dict)  # scope -> what happened to it

    @property
    def held_scopes(self) -> list[str]:
        return sorted(name for name, outcome in self.scopes.items() if outcome["status"] == "held")


@dataclass(frozen=True)
class Guards:
    """The thresholds of the guards, from settings (`GPUCOST_*`) or a caller."""

    shrink_limit: float = SHRINK_LIMIT
    jump_factor: float = JUMP_FACTOR
    max_usd_per_gpu_hour: float = MAX_USD_PER_GPU_HOUR
    accept_shrink: bool = False
    accept_changes: bool = False
    fx_band_fraction: float = FX_BAND_FRACTION
    market_min_hosts: int = MARKET_MIN_HOSTS


# --- raw (archiving and replay: warehouse/archive.py) ----------------------------------------------


def previous_validators(con: duckdb.DuckDBPyConnection, provider: str) -> dict[str, dict[str, str]]:
    """URL -> kept headers of its latest fetch in any successful run of the provider.

    Not just the last run's: a run that skipped an unchanged file did not fetch it, so the run after
    must still know it was fetched before (else it would download every other time).
    """
    rows = con.execute(
        """
        select url, headers from (
            select
                r.url,
                r.headers,
                row_number() over (partition by r.url order by p.started_at desc, r.seq desc) as newest
            from raw.responses as r
            inner join ops.provider_runs as p
                on r.run_id = p.run_id and r.provider = p.provider
            where p.provider = ? and p.status = 'ok' and r.status in (200, 304)
        )
        where newest = 1
        """,
        [provider],
    ).fetchall()
    return {url: json.loads(headers or "{}") for url, headers in rows}


# --- FX ----------------------------------------------------------------------------------------------


def load_fx_rates(
    con: duckdb.DuckDBPyConnection, run_id: str, rates: Iterable[FxRate], *, now: datetime
) -> int:
    """Write reference rates into `core.fx_rates` (the caller has validated them); rows new or
    changed. A rate already held for its day, unchanged, is not rewritten: reruns add nothing."""
    held = {
        (c, d): r
        for c, d, r in con.execute("select currency, rate_date, usd_per_unit from core.fx_rates").fetchall()
    }
    rows = [
        (r.currency.upper(), r.rate_date, r.usd_per_unit, r.source, run_id, now)
        for r in rates
        if held.get((r.currency.upper(), r.rate_date)) != r.usd_per_unit
    ]
    if rows:
        con.executemany("insert or replace into core.fx_rates values (?, ?, ?, ?, ?, ?)", rows)
    return len(rows)


def fx_band_median(
    con: duckdb.DuckDBPyConnection, currency: str, on: date, days: int = FX_BAND_DAYS
) -> float | None:
    """Median USD per unit of `currency` over the `days` days of rates held up to its newest rate
    before `on` (the rate's own day excluded: a rate is judged by its history, not by itself; the
    window ends at the newest earlier rate, so a gap in the history does not unbound it); None
    when the currency has no earlier rate at all. Only rates that passed the guards are held."""
    (median,) = con.execute(
        """
        with history as (select * from core.fx_rates where currency = ? and rate_date <= ?)
        select median(usd_per_unit) from history
        where rate_date >= (select max(rate_date) from history) - to_days(?)
        """,
        [currency.upper(), on, days],
    ).fetchall()[0]
    return median


def out_of_band(rate: float, median: float | None, fraction: float) -> bool:
    """Whether `rate` lies further than `fraction` (0.2: 20 %) from `median`, either way."""
    return median is not None and median > 0 and abs(rate / median - 1.0) > fraction


def usd_rates(con: duckdb.DuckDBPyConnection, on: date) -> dict[str, tuple[float, date, str]]:
    """Currency -> (USD per unit, rate date, source) of the newest rate held, as of `on`.

    The newest, however old: a rate's date travels with every converted price (marts show it), so
    a stale rate is visible rather than a reason to drop prices; a currency with no rate at all is
    quarantined by `validate`, never converted with a guess.
    """
    rates: dict[str, tuple[float, date, str]] = {"USD": (1.0, on, "identity")}
    rows = con.execute(
        """
        select currency, usd_per_unit, rate_date, source from core.fx_rates
        qualify row_number() over (partition by currency order by rate_date desc) = 1
        """
    ).fetchall()
    for currency, rate, rate_date, source in rows:
        rates[currency] = (rate, rate_date, source)
    return rates


# --- validation --------------------------------------------------------------------------------------


def _invalid_reason(offer: Offer, rates: Mapping[str, tuple[float, date, str]], guards: Guards) -> str | None:
    if offer.problem:
        return offer.problem
    price = offer.price_per_hour
    if price is None or not isinstance(price, int | float) or math.isnan(price) or math.isinf(price):
        return "price is not a finite number"
    if price <= 0:
        return "zero or negative price"
    if offer.currency not in rates:
        return f"unknown currency {offer.currency!r} (no rate in core.fx_rates)"
    count = offer.gpu_count
    if count is None or not isinstance(count, int | float) or not math.isfinite(count) or count < 0:
        return "gpu_count is missing or negative"
    fee = offer.setup_fee
    if fee is not None and (not isinstance(fee, int | float) or not math.isfinite(fee) or fee < 0):
        return f"setup_fee is not a non-negative number: {fee!r}"
    cap = offer.monthly_price_cap
    if cap is not None and (not isinstance(cap, int | float) or not math.isfinite(cap) or cap <= 0):
        return f"monthly_price_cap is not a positive number: {cap!r}"
    usd_per_gpu = price * rates[offer.currency][0] / max(count, 1.0)
    if usd_per_gpu > guards.max_usd_per_gpu_hour:
        return f"absurd price: ${usd_per_gpu:,.2f} per GPU-hour (limit ${guards.max_usd_per_gpu_hour:,.0f})"
    return None


def _attributes_hash(row: Mapping[str, Any]) -> str:
    material_values = [row[name] for name in _HASHED]
    # a stated set-up fee is part of the price (a new fee opens a new interval); left out of the
    # material when unstated, so every offer loaded before the fee existed keeps its hash
    if row.get("setup_fee") is not None:
        material_values.append(["setup_fee", row["setup_fee"]])
    material = json.dumps(material_values, default=str)
    return hashlib.md5(material.encode()).hexdigest()  # identity, not security


def _row(offer: Offer) -> dict[str, Any]:
    row = asdict(offer)
    row.pop("problem")
    row["scope"] = offer.scope_name
    row["provider_data"] = json.dumps(dict(offer.provider_data), sort_keys=True, default=str)
    return row


def validate(
    offers: Iterable[Offer],
    rates: Mapping[str, tuple[float, date, str]] | None = None,
    guards: Guards | None = None,
) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
    """Split offers into loadable rows and (reason, row) rejects; the first of duplicate keys wins."""
    rates = rates if rates is not None else {"USD": (1.0, date.min, "identity")}
    guards = guards or Guards()
    good: list[dict[str, Any]] = []
    bad: list[tuple[str, dict[str, Any]]] = []
    seen: set[tuple[Any, ...]] = set()
    for offer in offers:
        row = _row(offer)
        reason = _invalid_reason(offer, rates, guards)
        if reason is None and offer.key in seen:
            reason = "duplicate offer key in one batch"
        if reason is not None:
            bad.append((reason, row))
            continue
        seen.add(offer.key)
        rate, rate_date, _ = rates[offer.currency]
        row["price_usd_per_hour"] = offer.price_per_hour * rate
        # the rate it used, by date: the mart converts with this one (see 007_fx_bounds.sql)
        row["fx_rate_date"] = None if offer.currency == "USD" else rate_date
        row["attributes_hash"] = _attributes_hash(row)
        good.append(row)
    return good, bad


# --- the guards -----------------------------------------------------------------------------------------

Key = tuple[str, str, str | None, str]  # instance_type, region, zone, pricing_type (provider implied)


def _key(row: Mapping[str, Any]) -> Key:
    return (row["instance_type"], row["region"], row["zone"], row["pricing_type"])


def _key_text(provider: str, key: Key) -> str:
    return "|".join([provider, *(part or "" for part in key)])


@dataclass(frozen=True)
class _Current:
    scope: str
    price_per_hour: float
    currency: str
    fields: Mapping[str, Any]
    price_usd_per_hour: float | None = None
    gpu_count: float | None = None


def _current_offers(con: duckdb.DuckDBPyConnection, provider: str) -> dict[Key, _Current]:
    rows = con.execute(
        "select instance_type, region, zone, pricing_type, price_source, scope, price_per_hour, currency, "
        "price_usd_per_hour, gpu_count from core.offer_prices where provider = ? and valid_to is null",
        [provider],
    ).fetchall()
    current = {}
    for instance_type, region, zone, pricing_type, source, scope, price, currency, usd, count in rows:
        fields = {
            "instance_type": instance_type,
            "region": region,
            "zone": zone,
            "pricing_type": pricing_type,
            "price_source": source,
            "scope": scope,
        }
        current[(instance_type, region, zone, pricing_type)] = _Current(
            scope, price, currency, fields, usd, count
        )
    return current


_UNCHANGED_KEYS = {"instance_type", "region", "zone", "pricing_type", "price_source", "scope"}


def _covered(fields: Mapping[str, Any], scopes: Sequence[Unchanged]) -> bool:
    for unchanged in scopes:
        unknown = set(unchanged.scope) - _UNCHANGED_KEYS
        if unknown:
            raise ValueError(
                f"Unchanged scope keys {sorted(unknown)} are not offer columns {sorted(_UNCHANGED_KEYS)}"
            )
        if all(fields[k] == v for k, v in unchanged.scope.items()):
            return True
    return False


def _thin(row: Mapping[str, Any], min_hosts: int) -> int | None:
    """The host count of a marketplace segment standing on fewer than `min_hosts` host offers;
    None for any other row."""
    if row["price_source"] != "market":
        return None
    hosts = json.loads(row["provider_data"] or "{}").get("host_offers")
    if isinstance(hosts, int | float) and not isinstance(hosts, bool) and hosts < min_hosts:
        return int(hosts)
    return None


# Spot above on-demand. A `fixed_discount` provider (providers.csv spot_kind) publishes spot as a
# share of its on-demand price: a spot price above it is a misread (swapped columns, wrong basis)
# and is held. A market may really ask more: the GCP catalog in ../shared/data/raw/skypilot-format/
# anycloud-gcp-vms-2026-05-20.csv lists A100-80GB and H200 spot up to 1.20x on-demand (24 of
# 31,278 rows); AWS sets a Spot request's default maximum price to the On-Demand price
# (EC2 User Guide, "Maximum price overrides": docs.amazonaws.cn/en_us/AWSEC2/latest/UserGuide/
# ec2-fleet-price-overrides.html, read 2026-12-02)
# but documents no cap on the Spot price itself. So market and bid spot above on-demand is
# published, flagged `spot_above_on_demand` (the ratio) in provider_data, never held.
def spot_caps(con: duckdb.DuckDBPyConnection, provider: str) -> bool:
    """Whether `provider`'s spot price can never exceed its on-demand price: a `fixed_discount`
    provider (core.providers.spot_kind) publishes spot as a share of on-demand."""
    try:
        rows = con.execute("select spot_kind from core.providers where provider = ?", [provider]).fetchall()
    except duckdb.CatalogException:  # seeds not loaded (a bare warehouse): no rule to apply
        return False
    return bool(rows) and rows[0][0] == "fixed_discount"


def spot_above_on_demand(
    rows: Sequence[dict[str, Any]], current: Mapping[Key, _Current]
) -> dict[int, tuple[float, float]]:
    """Index in `rows` -> (spot, on-demand) USD per hour of every spot row priced above the
    on-demand price of the same instance type and region (same zone first, else the regional
    price); the on-demand price is this batch's, else the current one. Compared in USD: the two
    may be published in different currencies."""
    on_demand: dict[tuple[str, str, str | None], float] = {}
    for key, offer in current.items():
        if key[3] == "on_demand" and offer.price_usd_per_hour is not None:
            on_demand[(key[0], key[1], key[2])] = offer.price_usd_per_hour
    for row in rows:
        if row["pricing_type"] == "on_demand":
            on_demand[(row["instance_type"], row["region"], row["zone"])] = row["price_usd_per_hour"]
    found: dict[int, tuple[float, float]] = {}
    for index, row in enumerate(rows):
        if row["pricing_type"] != "spot":
            continue
        base = on_demand.get((row["instance_type"], row["region"], row["zone"]))
        if base is None:
            base = on_demand.get((row["instance_type"], row["region"], None))
        spot = row["price_usd_per_hour"]
        # a cent of rounding between two published prices is no misreading
        if base is not None and spot > base + 0.01:
            found[index] = (spot, base)
    return found


def _priced_currencies(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {c for (c,) in con.execute("select distinct currency from core.offer_prices").fetchall()}


def held_moves(con: duckdb.DuckDBPyConnection, provider: str, run_id: str) -> dict[str, float]:
    """Offer key -> new value of the jumps (prices, rates) held by the provider's previous run."""
    rows = con.execute(
        """
        with previous as (
            select run_id from ops.provider_runs
            where provider = ? and run_id <> ? and status in ('ok', 'degraded', 'rejected')
            order by started_at desc limit 1
        )
        select
            q.offer_key,
            coalesce(q.details ->> 'new_price_per_hour', q.details ->> 'new_usd_per_unit')::double
        from ops.quarantine as q inner join previous using (run_id)
        where q.provider = ? and q.reason = 'price_jump'
        """,
        [provider, run_id, provider],
    ).fetchall()
    return {key: price for key, price in rows if key is not None and price is not None}


def unit_factors(
    gpu_counts: Iterable[float | None], rates: Mapping[str, float], currency: str
) -> dict[str, float]:
    """Name -> factor of every unit change a price in `currency` could suffer: a GPU count (a
    per-GPU price read as the instance's, or back), x60, x730, x100, and the exchange rate of each
    other currency in `rates` (USD per unit) against `currency` (a price read in the wrong
    currency). Factors of 1 (a one-GPU box, a currency at par) are no unit change and are left out.
    """
    factors = {f"x{f:g}": f for f in UNIT_FACTORS}
    for count in gpu_counts:
        if count is not None and math.isfinite(count) and count > 1:
            factors[f"{count:g} GPUs"] = float(count)
    own = rates.get(currency)
    for other, rate in rates.items():
        if other != currency and own and rate > 0 and math.isfinite(rate):
            factors[f"{other}/{currency}"] = rate / own
    return {name: f for name, f in factors.items() if abs(f - 1.0) > UNIT_TOLERANCE}


def unit_change(old: float, new: float, factors: Mapping[str, float]) -> str | None:
    """The unit factor (`unit_factors`) that `new / old` matches, up or down, within
    `UNIT_TOLERANCE`; None when the move is no unit change. "x100" for a price 100x up,
    "/8 GPUs" for one 8x down."""
    if not (old > 0 and new > 0 and math.isfinite(old) and math.isfinite(new)):
        return None
    ratio = new / old
    for name, factor in sorted(factors.items()):
        if abs(ratio / factor - 1.0) <= UNIT_TOLERANCE:
            return name if name.startswith("x") else f"x{name}"
        if abs(ratio * factor - 1.0) <= UNIT_TOLERANCE:
            return f"/{name[1:]}" if name.startswith("x") else f"/{name}"
    return None


def jumped(old: float, new: float, factor: float) -> bool:
    """Whether `new` is more than `factor` times above or below `old`."""
    return _jumped(old, new, factor)


def _jumped(old: float, new: float, factor: float) -> bool:
    return old > 0 and (new > old * factor or new < old / factor)


# --- the merge ------------------------------------------------------------------------------------------


def load_offers(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    provider: str,
    offers: Iterable[Offer],
    unchanged: Sequence[Unchanged] = (),
    *,
    now: datetime,
    accept_shrink: bool = False,
    guards: Guards | None = None,
) -> LoadResult:
    """Validate, guard and merge one provider's batch into the price history, in one transaction."""
    guards = guards or Guards(accept_shrink=accept_shrink)
    if accept_shrink and not guards.accept_shrink:
        guards = replace(guards, accept_shrink=True)
    rates = usd_rates(con, now.date())
    good, bad = validate(offers, rates, guards)
    result = LoadResult(status="ok", offers_parsed=len(good) + len(bad))
    current = _current_offers(con, provider)
    carried = {k for k, c in current.items() if unchanged and _covered(c.fields, unchanged)}

    # 2. scope guard: each scope against its own last good load (its offers still current)
    baseline: dict[str, int] = {}
    for key, offer in current.items():
        if key not in carried:
            baseline[offer.scope] = baseline.get(offer.scope, 0) + 1
    incoming: dict[str, int] = {}
    for row in good:
        incoming[row["scope"]] = incoming.get(row["scope"], 0) + 1
    for scope in sorted(set(baseline) | set(incoming)):
        before, after = baseline.get(scope, 0), incoming.get(scope, 0)
        outcome: dict[str, Any] = {"status": "ok", "offers": after, "last_good": before}
        if before and not guards.accept_shrink:
            if after == 0:
                outcome |= {"status": "held", "reason": "empty or vanished"}
            elif after < before * (1 - guards.shrink_limit):
                outcome |= {"status": "held", "reason": f"shrank from {before} to {after} offers"}
        result.scopes[scope] = outcome
    held_scopes = set(result.held_scopes)

    # 3. anomaly guard, over the rows of healthy scopes
    confirmed = held_moves(con, provider, run_id) if not guards.accept_changes else {}
    # exchange rates a price could be misread by: those of the currencies offers are priced in
    priced = _priced_currencies(con) | {row["currency"] for row in good}
    fx = {c: rate for c, (rate, _, _) in rates.items() if c in priced}
    loadable: list[dict[str, Any]] = []
    above = spot_above_on_demand(good, current)
    capped = bool(above) and spot_caps(con, provider)
    for index, row in enumerate(good):
        if row["scope"] in held_scopes:
            continue
        if index in above:
            spot, base = above[index]
            if capped and not guards.accept_changes:
                row["_spot_above"] = (spot, base)
                bad.append(("spot_above_on_demand", row))
                continue
            data = json.loads(row["provider_data"] or "{}")
            data["spot_above_on_demand"] = round(spot / base, 4)
            row["provider_data"] = json.dumps(data, sort_keys=True, default=str)
        key = _key(row)
        old = current.get(key)
        if old is None or guards.accept_changes:
            loadable.append(row)
            continue
        # a currency that changed is compared in USD: the number alone says nothing
        same = old.currency == row["currency"]
        price_before = old.price_per_hour if same else old.price_usd_per_hour
        price_after = row["price_per_hour"] if same else row["price_usd_per_hour"]
        factors = unit_factors((row["gpu_count"], old.gpu_count), fx, row["currency"])
        unit = unit_change(price_before, price_after, factors) if price_before is not None else None
        if unit is not None:
            row["_old_price_per_hour"] = old.price_per_hour
            row["_old_currency"] = old.currency
            row["_unit_factor"] = unit
            bad.append(("unit_change", row))
            continue
        hosts = _thin(row, guards.market_min_hosts)
        if same and hosts is not None and _jumped(old.price_per_hour, row["price_per_hour"], CONFIRM_FACTOR):
            row["_old_price_per_hour"] = old.price_per_hour
            row["_hosts"] = (hosts, guards.market_min_hosts)
            bad.append(("thin_market", row))
            continue
        if same and _jumped(old.price_per_hour, row["price_per_hour"], guards.jump_factor):
            previous = confirmed.get(_key_text(provider, key))
            if previous is None or _jumped(previous, row["price_per_hour"], CONFIRM_FACTOR):
                row["_old_price_per_hour"] = old.price_per_hour
                bad.append(("price_jump", row))
                continue
        loadable.append(row)

    for reason, _ in bad:
        result.quarantine_reasons[reason] = result.quarantine_reasons.get(reason, 0) + 1
    result.offers_quarantined = len(bad)
    held_rows = {_key(row) for _, row in bad}
    kept = carried | held_rows | {k for k, c in current.items() if c.scope in held_scopes}
    kept &= set(current)
    result.offers_carried = len(kept)

    if not loadable and not kept:
        result.status = "rejected"
        result.error = "the provider returned no valid offers"
        result.hint = "kept its last good prices; a transient empty answer must not wipe a catalog"
        _quarantine(con, run_id, provider, bad, now)
        return result
    if held_scopes and not loadable:
        result.status = "rejected"
    elif held_scopes:
        result.status = "degraded"
    if held_scopes:
        shown = ", ".join(f"{s} ({result.scopes[s]['reason']})" for s in sorted(held_scopes)[:5])
        more = f" and {len(held_scopes) - 5} more" if len(held_scopes) > 5 else ""
        result.error = f"held {len(held_scopes)} scope(s) at their last good prices: {shown}{more}"
        result.hint = (
            "a scope that comes back empty or much smaller keeps its last good prices; if the provider "
            "really dropped these offers, rerun with --accept-shrink"
        )

    with transaction(con):
        _quarantine(con, run_id, provider, bad, now)
        _merge(con, run_id, provider, loadable, kept, carried, now, result)
    result.offers_loaded = len(loadable)
    return result


def _quarantine(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    provider: str,
    bad: Sequence[tuple[str, dict[str, Any]]],
    now: datetime,
) -> None:
    if not bad:
        return
    rows = []
    for reason, row in bad:
        details = None
        if "_old_price_per_hour" in row:
            row = dict(row)
            explained = {
                "old_price_per_hour": row.pop("_old_price_per_hour"),
                "new_price_per_hour": row["price_per_hour"],
                "currency": row["currency"],
            }
            if "_unit_factor" in row:
                explained |= {
                    "old_currency": row.pop("_old_currency"),
                    "unit_factor": row.pop("_unit_factor"),
                }
            if "_hosts" in row:
                hosts, floor = row.pop("_hosts")
                explained |= {"host_offers": hosts, "market_min_hosts": floor}
            details = json.dumps(explained)
        elif "_spot_above" in row:
            row = dict(row)
            spot, base = row.pop("_spot_above")
            details = json.dumps({"spot_usd_per_hour": spot, "on_demand_usd_per_hour": base})
        offer_key = _key_text(provider, _key(row)) if row.get("instance_type") is not None else None
        rows.append((run_id, provider, now, reason, json.dumps(row, default=str), offer_key, details))
    con.executemany("insert into ops.quarantine values (?, ?, ?, ?, ?, ?, ?)", rows)


def _merge(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    provider: str,
    loadable: list[dict[str, Any]],
    kept: set[Key],
    carried: set[Key],
    now: datetime,
    result: LoadResult,
) -> None:
    frame = pl.DataFrame(loadable, schema=_OFFER_COLUMNS) if loadable else pl.DataFrame(schema=_OFFER_COLUMNS)
    key_schema = dict.fromkeys(("instance_type", "region", "zone", "pricing_type"), pl.String)
    kept_frame = pl.DataFrame([dict(zip(key_schema, k, strict=True)) for k in kept], schema=key_schema)
    seen_frame = pl.DataFrame([dict(zip(key_schema, k, strict=True)) for k in carried], schema=key_schema)
    con.register("incoming", frame)
    con.register("kept", kept_frame)
    con.register("carried", seen_frame)
    try:
        key_join = (
            "c.instance_type = {t}.instance_type and c.region = {t}.region "
            "and c.zone is not distinct from {t}.zone and c.pricing_type = {t}.pricing_type"
        )
        on_incoming = key_join.format(t="i")
        # 1. changed offers: close the current interval
        result.rows_closed += con.execute(
            f"""
            update core.offer_prices as c set valid_to = ?, closed_by_run_id = ?
            from incoming as i
            where c.provider = ? and c.valid_to is null and {on_incoming}
                and c.attributes_hash <> i.attributes_hash
            """,
            [now, run_id, provider],
        ).fetchall()[0][0]
        # 2. unchanged offers: seen again
        con.execute(
            f"""
            update core.offer_prices as c
            set last_seen_at = ?, available = i.available, provider_data = i.provider_data::json,
                monthly_price_cap = i.monthly_price_cap,
                scope = i.scope, price_usd_per_hour = i.price_usd_per_hour, fx_rate_date = i.fx_rate_date
            from incoming as i
            where c.provider = ? and c.valid_to is null and {on_incoming}
            """,
            [now, provider],
        )
        # 3. new or changed offers: open an interval
        result.rows_inserted = con.execute(
            f"""
            insert into core.offer_prices by name
            select
                i.provider, i.instance_type, i.region, i.zone, i.pricing_type, i.price_source,
                i.price_per_hour, i.currency, i.price_usd_per_hour, i.fx_rate_date, i.gpu_name_raw,
                i.gpu_count, i.gpu_memory_gb_raw, i.vcpus, i.ram_gb, i.billing_unit, i.setup_fee,
                i.monthly_price_cap, i.available,
                i.provider_data::json as provider_data, i.attributes_hash,
                ? as valid_from, null as valid_to, ? as first_seen_at, ? as last_seen_at,
                ? as opened_by_run_id, null as closed_by_run_id, i.scope
            from incoming as i
            where not exists (
                select 1 from core.offer_prices as c
                where c.provider = i.provider and c.valid_to is null and {on_incoming}
            )
            """,
            [now, now, now, run_id],
        ).fetchall()[0][0]
        # 4. carried over by an Unchanged scope: seen, not closed (held offers keep last_seen_at)
        con.execute(
            f"""
            update core.offer_prices as c set last_seen_at = ?
            from carried as k
            where c.provider = ? and c.valid_to is null and {key_join.format(t="k")}
            """,
            [now, provider],
        )
        # 5. vanished: current offers this run neither loaded nor kept
        result.rows_closed += con.execute(
            f"""
            update core.offer_prices as c set valid_to = ?, closed_by_run_id = ?
            where c.provider = ? and c.valid_to is null
                and not exists (select 1 from incoming as i where {on_incoming})
                and not exists (select 1 from kept as k where {key_join.format(t="k")})
            """,
            [now, run_id, provider],
        ).fetchall()[0][0]
    finally:
        con.unregister("incoming")
        con.unregister("kept")
        con.unregister("carried")
