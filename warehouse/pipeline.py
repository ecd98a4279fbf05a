"""The refresh as plain functions, so it can be tested without an orchestrator.

`flows/refresh.py` only sequences these: `collect` each provider (fetch + parse; concurrent), then
`land` each batch (raw archive + validated load; one writer, one provider at a time), then rebuild
the marts and write the feeds. A provider that fails, is skipped or is rejected never stops the
others and never closes its own offers.
"""

from __future__ import annotations

import json
import os
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from connectors import CONNECTORS
from connectors.base import (
    Connector,
    ConnectorError,
    Excluded,
    FetchError,
    LayoutChanged,
    MissingCredentials,
    Offer,
    RawResponse,
    ReplayMiss,
    Unchanged,
    Unreachable,
    missing_credentials,
)
from connectors.http import Client, remove_spooled
from warehouse.load import LoadResult, land_raw, load_offers

REPLAY_PLACEHOLDER = "replay-placeholder"


@dataclass
class ProviderBatch:
    """What one provider's fetch + parse produced."""

    provider: str
    status: str  # fetched | failed | skipped
    started_at: datetime
    responses: list[RawResponse] = field(default_factory=list)
    offers: list[Offer] = field(default_factory=list)
    unchanged: list[Unchanged] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)
    fetch_seconds: float = 0.0
    error: str | None = None
    hint: str | None = None


@dataclass(frozen=True)
class ProviderOutcome:
    """One row of ops.provider_runs, as the CLI and the artifact show it."""

    provider: str
    status: str  # ok | failed | skipped | rejected
    offers_parsed: int
    offers_loaded: int
    offers_quarantined: int
    rows_inserted: int
    rows_closed: int
    offers_excluded: int
    fetch_seconds: float
    error: str | None
    hint: str | None


def new_run_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def credentials_for(
    connector: Connector, env: Mapping[str, str], *, replay: bool
) -> tuple[dict[str, str], list[str]]:
    """(creds, secret values to redact). In replay mode missing credentials get a placeholder,
    which is redacted like a real key so requests match the cassette."""
    names = (*connector.requires, *getattr(connector, "optional", ()))
    creds = {name: env[name] for name in names if env.get(name)}
    if replay:
        for name in connector.requires:
            creds.setdefault(name, f"{REPLAY_PLACEHOLDER}-{name}")
    return creds, list(creds.values())


def _hint_for(exc: BaseException, provider: str) -> str:
    if isinstance(exc, ReplayMiss):
        return (
            "the replay cassette has no answer for this request; "
            "record one with `gpucost refresh --record DIR`"
        )
    if isinstance(exc, LayoutChanged):
        return (
            f"{provider}'s payload no longer has the shape the parser expects; the raw responses of this "
            "run are archived (see raw.responses) for whoever updates the parser"
        )
    if isinstance(exc, Unreachable):
        return (
            f"{provider} could not be reached (no connection); its last good prices stay current. "
            "Check this machine's network access; offline, `gpucost refresh --replay tests/replay` "
            "runs on recorded sample data"
        )
    if isinstance(exc, FetchError):
        return (
            f"{provider} could not be fetched after retries; its last good prices stay current. "
            "Check the provider's status page and rerun later"
        )
    return "unexpected error: this is a bug in gpucost; please report it with the traceback in the logs"


def collect(
    connector: Connector,
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> ProviderBatch:
    """Fetch and parse one provider; never raises for a provider's own failure."""
    started = time.perf_counter()
    batch = ProviderBatch(provider=connector.name, status="fetched", started_at=datetime.now(UTC))
    missing = missing_credentials(connector, creds)
    if missing:
        error = MissingCredentials(connector.name, missing)
        batch.status, batch.error = "skipped", str(error)
        batch.hint = f"export {' '.join(f'{m}=...' for m in missing)} to include {connector.name}"
        return batch
    try:
        for response in connector.fetch(client, creds, previous):
            batch.responses.append(response)
        for item in connector.parse(batch.responses):
            if isinstance(item, Unchanged):
                batch.unchanged.append(item)
            elif isinstance(item, Excluded):
                batch.excluded[item.reason] += item.count
            else:
                batch.offers.append(item)
    except ConnectorError as exc:
        batch.status, batch.error, batch.hint = (
            "failed",
            f"{type(exc).__name__}: {exc}",
            _hint_for(exc, connector.name),
        )
    except Exception as exc:  # a bug in one connector must not stop the others
        last = traceback.extract_tb(exc.__traceback__)[-1]
        batch.status = "failed"
        batch.error = f"{type(exc).__name__}: {exc} (at {Path(last.filename).name}:{last.lineno})"
        batch.hint = _hint_for(exc, connector.name)
    batch.fetch_seconds = time.perf_counter() - started
    return batch


def start_run(
    con: duckdb.DuckDBPyConnection, run_id: str, mode: str, providers: Sequence[str], flow_run_id: str | None
) -> None:
    con.execute(
        "insert into ops.runs (run_id, started_at, status, mode, providers, flow_run_id) "
        "values (?, ?, 'running', ?, ?, ?)",
        [run_id, datetime.now(UTC), mode, list(providers), flow_run_id],
    )


def finish_run(
    con: duckdb.DuckDBPyConnection, run_id: str, outcomes: Sequence[ProviderOutcome], error: str | None = None
) -> str:
    failed = [o for o in outcomes if o.status in ("failed", "rejected")]
    if error:
        status = "failed"
    elif not failed:
        status = "ok"
    else:
        status = "partial" if len(failed) < len(outcomes) else "failed"
    con.execute(
        "update ops.runs set finished_at = ?, status = ?, error = ? where run_id = ?",
        [datetime.now(UTC), status, error, run_id],
    )
    return status


def land(
    con: duckdb.DuckDBPyConnection,
    raw_root: Path,
    run_id: str,
    batch: ProviderBatch,
    *,
    accept_shrink: bool = False,
) -> ProviderOutcome:
    """Archive the raw responses, load the offers (if the fetch worked), record the provider run."""
    started = time.perf_counter()
    total_bytes = land_raw(con, raw_root, run_id, batch.provider, batch.responses)
    for response in batch.responses:
        remove_spooled(response)
    result = LoadResult(status=batch.status, offers_parsed=len(batch.offers))
    if batch.status == "fetched":
        result = load_offers(
            con,
            run_id,
            batch.provider,
            batch.offers,
            batch.unchanged,
            now=datetime.now(UTC),
            accept_shrink=accept_shrink,
        )
    status = result.status if batch.status == "fetched" else batch.status
    error = result.error if batch.status == "fetched" else batch.error
    hint = result.hint if batch.status == "fetched" else batch.hint
    if status == "ok" and result.quarantine_reasons:
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(result.quarantine_reasons.items()))
        hint = f"quarantined: {reasons} (see ops.quarantine)"
    con.execute(
        """
        insert into ops.provider_runs (
            run_id, provider, status, started_at, finished_at, fetch_seconds, load_seconds,
            responses, bytes, offers_parsed, offers_quarantined, offers_loaded, offers_carried,
            rows_inserted, rows_closed, error, hint, excluded
        ) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        [
            run_id,
            batch.provider,
            status,
            batch.started_at,
            datetime.now(UTC),
            batch.fetch_seconds,
            time.perf_counter() - started,
            len(batch.responses),
            total_bytes,
            result.offers_parsed,
            result.offers_quarantined,
            result.offers_loaded,
            result.offers_carried,
            result.rows_inserted,
            result.rows_closed,
            error,
            hint,
            json.dumps(dict(sorted(batch.excluded.items()))),
        ],
    )
    return ProviderOutcome(
        provider=batch.provider,
        status=status,
        offers_parsed=result.offers_parsed,
        offers_loaded=result.offers_loaded,
        offers_quarantined=result.offers_quarantined,
        rows_inserted=result.rows_inserted,
        rows_closed=result.rows_closed,
        offers_excluded=sum(batch.excluded.values()),
        fetch_seconds=batch.fetch_seconds,
        error=error,
        hint=hint,
    )


def select_connectors(names: Sequence[str] | None) -> list[Connector]:
    """The connectors to run, in registry order; unknown names raise with the valid ones listed."""
    if not names:
        return list(CONNECTORS.values())
    unknown = [n for n in names if n not in CONNECTORS]
    if unknown:
        raise ValueError(f"unknown provider(s) {', '.join(unknown)}; choose from {', '.join(CONNECTORS)}")
    return [CONNECTORS[n] for n in CONNECTORS if n in names]


def environment() -> dict[str, str]:
    return dict(os.environ)
