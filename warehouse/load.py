"""Landing a provider's batch: raw archive, validation, and the SCD2 price history.

`land_raw` stores every response body once, content-addressed under the raw archive
(`<root>/<sha[:2]>/<sha>`), and records the exchange in `raw.responses`, so parsing can always be
replayed from what came over the wire.

`load_offers` runs in one transaction per provider:

1. validate: zero, negative or NaN prices, unknown currencies, bad GPU counts and duplicate offer
   keys go to `ops.quarantine` with the row and the reason; nothing is silently dropped;
2. guard: a batch that shrank by more than half against the provider's last good run (counting
   offers kept current by `Unchanged` scopes) is *rejected*: nothing loads, the old prices stay;
3. merge into `core.offer_prices`, keyed by (provider, instance_type, region, zone, pricing_type):
   an unchanged offer only moves `last_seen_at`; a changed price or hardware closes the current
   interval and opens a new one; an offer absent from this successful run is closed, unless an
   `Unchanged` scope covers it. A failed or rejected provider run never reaches this step, so it
   closes nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from connectors.base import Offer, RawResponse, Unchanged
from warehouse.db import transaction

# USD value of one unit of each currency we accept. Only USD today: we have no FX feed, and a
# price converted with a stale rate would be worse than one held back in quarantine.
USD_PER_UNIT: Mapping[str, float] = {"USD": 1.0}
SHRINK_LIMIT = 0.5

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
    "gpu_name_raw": pl.String,
    "gpu_count": pl.Float64,
    "gpu_memory_gb_raw": pl.Float64,
    "vcpus": pl.Float64,
    "ram_gb": pl.Float64,
    "billing_unit": pl.String,
    "available": pl.Boolean,
    "provider_data": pl.String,
    "attributes_hash": pl.String,
}
# A change in any of these opens a new price interval; provider_data and availability do not.
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
    status: str  # ok | rejected
    offers_parsed: int = 0
    offers_quarantined: int = 0
    offers_loaded: int = 0
    offers_carried: int = 0
    rows_inserted: int = 0
    rows_closed: int = 0
    error: str | None = None
    hint: str | None = None
    quarantine_reasons: dict[str, int] = field(default_factory=dict)


# --- raw --------------------------------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def land_raw(
    con: duckdb.DuckDBPyConnection,
    raw_root: Path,
    run_id: str,
    provider: str,
    responses: Sequence[RawResponse],
) -> int:
    """Archive bodies (each distinct body stored once) and record the exchanges; bytes archived.

    Spooled bodies are moved into the archive, not copied: parse them before landing them.
    """
    rows = []
    total = 0
    for seq, response in enumerate(responses):
        size = response.size_bytes  # before a spooled body moves away
        sha = (
            _sha256_file(response.body_path)
            if response.body_path
            else hashlib.sha256(response.body).hexdigest()
        )
        relative = Path(sha[:2]) / sha
        target = raw_root / relative
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".part")
            if response.body_path is not None:
                # a spooled body (an AWS offer file: hundreds of MB) moves in, a rename when the
                # spool and the archive share a disk; the caller deletes spooled bodies after this
                shutil.move(response.body_path, partial)
            else:
                partial.write_bytes(response.body)
            partial.replace(target)
        total += size
        rows.append(
            (
                run_id,
                provider,
                seq,
                response.method,
                response.url,
                response.request_body.decode("utf-8", "replace") if response.request_body else None,
                response.status,
                response.fetched_at,
                response.content_type,
                json.dumps(dict(response.headers)),
                size,
                sha,
                relative.as_posix(),
            )
        )
    if rows:
        con.executemany("insert into raw.responses values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return total


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


# --- validation --------------------------------------------------------------------------------------


def _invalid_reason(offer: Offer) -> str | None:
    price = offer.price_per_hour
    if price is None or not isinstance(price, int | float) or math.isnan(price) or math.isinf(price):
        return "price is not a finite number"
    if price <= 0:
        return "zero or negative price"
    if offer.currency not in USD_PER_UNIT:
        return f"unknown currency {offer.currency!r} (no USD rate)"
    if offer.gpu_count is None or math.isnan(offer.gpu_count) or offer.gpu_count < 0:
        return "gpu_count is missing or negative"
    return None


def _attributes_hash(row: Mapping[str, Any]) -> str:
    material = json.dumps([row[name] for name in _HASHED], default=str)
    return hashlib.md5(material.encode()).hexdigest()  # identity, not security


def validate(offers: Iterable[Offer]) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
    """Split offers into loadable rows and (reason, row) rejects; the first of duplicate keys wins."""
    good: list[dict[str, Any]] = []
    bad: list[tuple[str, dict[str, Any]]] = []
    seen: set[tuple[Any, ...]] = set()
    for offer in offers:
        row = asdict(offer)
        row["provider_data"] = json.dumps(dict(offer.provider_data), sort_keys=True, default=str)
        reason = _invalid_reason(offer)
        if reason is None and offer.key in seen:
            reason = "duplicate offer key in one batch"
        if reason is not None:
            bad.append((reason, row))
            continue
        seen.add(offer.key)
        row["price_usd_per_hour"] = offer.price_per_hour * USD_PER_UNIT[offer.currency]
        row["attributes_hash"] = _attributes_hash(row)
        good.append(row)
    return good, bad


# --- the merge ------------------------------------------------------------------------------------------


def _last_good_size(con: duckdb.DuckDBPyConnection, provider: str) -> int | None:
    row = con.execute(
        "select offers_loaded + offers_carried from ops.provider_runs "
        "where provider = ? and status = 'ok' order by started_at desc limit 1",
        [provider],
    ).fetchall()
    return row[0][0] if row else None


def _scope_predicate(scopes: Sequence[Unchanged]) -> tuple[str, list[Any]]:
    allowed = {"instance_type", "region", "zone", "pricing_type", "price_source"}
    clauses, params = [], []
    for unchanged in scopes:
        parts = []
        for column, value in sorted(unchanged.scope.items()):
            if column not in allowed:
                raise ValueError(
                    f"Unchanged scope key {column!r} is not an offer key column {sorted(allowed)}"
                )
            parts.append(f"{column} = ?")
            params.append(value)
        clauses.append("(" + " and ".join(parts or ["true"]) + ")")
    return (" or ".join(clauses) if clauses else "false"), params


def load_offers(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    provider: str,
    offers: Iterable[Offer],
    unchanged: Sequence[Unchanged] = (),
    *,
    now: datetime,
    accept_shrink: bool = False,
) -> LoadResult:
    """Validate and merge one provider's batch into the price history, in one transaction."""
    good, bad = validate(offers)
    result = LoadResult(status="ok", offers_parsed=len(good) + len(bad), offers_quarantined=len(bad))
    for reason, _ in bad:
        result.quarantine_reasons[reason] = result.quarantine_reasons.get(reason, 0) + 1
    scope_sql, scope_params = _scope_predicate(unchanged)

    with transaction(con):
        if bad:
            con.executemany(
                "insert into ops.quarantine values (?, ?, ?, ?, ?)",
                [(run_id, provider, now, reason, json.dumps(row, default=str)) for reason, row in bad],
            )
        carried = con.execute(
            "select count(*) from core.offer_prices "
            f"where provider = ? and valid_to is null and ({scope_sql})",
            [provider, *scope_params],
        ).fetchall()[0][0]
        incoming_keys = {(r["instance_type"], r["region"], r["zone"], r["pricing_type"]) for r in good}
        result.offers_carried = carried
        last = _last_good_size(con, provider)
        size = len(good) + carried
        if size == 0:
            result.status = "rejected"
            result.error = "the provider returned no valid offers"
            result.hint = "kept its last good prices; a transient empty answer must not wipe a catalog"
            return result
        if last and size < last * SHRINK_LIMIT and not accept_shrink:
            result.status = "rejected"
            result.error = f"batch shrank from {last} to {size} offers (more than half gone)"
            result.hint = (
                "kept its last good prices; if the provider really dropped these offers, rerun with "
                "--accept-shrink"
            )
            return result

        frame = pl.DataFrame(good, schema=_OFFER_COLUMNS) if good else pl.DataFrame(schema=_OFFER_COLUMNS)
        con.register("incoming", frame)
        try:
            key_join = (
                "c.instance_type = i.instance_type and c.region = i.region "
                "and c.zone is not distinct from i.zone and c.pricing_type = i.pricing_type"
            )
            # 1. changed offers: close the current interval
            result.rows_closed += con.execute(
                f"""
                update core.offer_prices as c set valid_to = ?, closed_by_run_id = ?
                from incoming as i
                where c.provider = ? and c.valid_to is null and {key_join}
                    and c.attributes_hash <> i.attributes_hash
                """,
                [now, run_id, provider],
            ).fetchall()[0][0]
            # 2. unchanged offers: seen again
            con.execute(
                f"""
                update core.offer_prices as c
                set last_seen_at = ?, available = i.available, provider_data = i.provider_data::json
                from incoming as i
                where c.provider = ? and c.valid_to is null and {key_join}
                """,
                [now, provider],
            )
            # 3. new or changed offers: open an interval
            result.rows_inserted = con.execute(
                f"""
                insert into core.offer_prices
                select
                    i.provider, i.instance_type, i.region, i.zone, i.pricing_type, i.price_source,
                    i.price_per_hour, i.currency, i.price_usd_per_hour, i.gpu_name_raw, i.gpu_count,
                    i.gpu_memory_gb_raw, i.vcpus, i.ram_gb, i.billing_unit, i.available,
                    i.provider_data::json, i.attributes_hash,
                    ? as valid_from, null as valid_to, ? as first_seen_at, ? as last_seen_at,
                    ? as opened_by_run_id, null as closed_by_run_id
                from incoming as i
                where not exists (
                    select 1 from core.offer_prices as c
                    where c.provider = i.provider and c.valid_to is null and {key_join}
                )
                """,
                [now, now, now, run_id],
            ).fetchall()[0][0]
            # 4. carried over by an Unchanged scope: seen, not closed
            if unchanged:
                con.execute(
                    f"update core.offer_prices set last_seen_at = ? "
                    f"where provider = ? and valid_to is null and ({scope_sql})",
                    [now, provider, *scope_params],
                )
            # 5. vanished: current offers of this provider that this run neither saw nor carried
            result.rows_closed += con.execute(
                f"""
                update core.offer_prices as c set valid_to = ?, closed_by_run_id = ?
                where c.provider = ? and c.valid_to is null
                    and not ({scope_sql})
                    and not exists (select 1 from incoming as i where {key_join})
                """,
                [now, run_id, provider, *scope_params],
            ).fetchall()[0][0]
        finally:
            con.unregister("incoming")
    result.offers_loaded = len(incoming_keys)
    return result
