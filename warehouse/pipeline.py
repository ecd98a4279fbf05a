"""The refresh as plain functions, so it can be tested without an orchestrator.

`flows/refresh.py` only sequences these: `collect` each provider (fetch + parse; concurrent, with
the warehouse closed so readers can use it meanwhile), then `land` each batch (raw archive +
validated load; one writer, one provider at a time), then rebuild the marts and write the feeds. A
provider that fails, is skipped or is rejected never stops the others and never closes its own
offers; one whose scopes were partly held by a guard is `degraded` and loads the healthy ones.

Run states (`ops.runs.status`): `running` while it works; `ok` when every provider that ran loaded
cleanly; `partial` when some loaded and some failed, were rejected or degraded; `failed` when
nothing loaded (or the run itself broke); `interrupted` for a run stopped by Ctrl-C or SIGTERM
(what it landed before stays); `abandoned` for a run whose process died, marked by the next run.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from connectors import CONNECTORS
from connectors.base import (
    Connector,
    ConnectorError,
    Degraded,
    Excluded,
    FetchError,
    FxRate,
    HostNotFound,
    LayoutChanged,
    MissingCredentials,
    Offer,
    RawResponse,
    ReplayMiss,
    Unchanged,
    Unreachable,
    missing_credentials,
)
from connectors.http import Client, provider_deadline, redact, remove_spooled
from warehouse.lifecycle import retired
from warehouse.load import (
    CONFIRM_FACTOR,
    FX_BAND_DAYS,
    JUMP_FACTOR,
    Guards,
    LoadResult,
    fx_band_median,
    held_moves,
    jumped,
    land_raw,
    load_fx_rates,
    load_offers,
    out_of_band,
)

LOADED = ("ok", "degraded")  # provider run statuses whose offers were (at least partly) published
NOT_CLEAN = ("failed", "rejected", "degraded")  # what a run's title and exit code report

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
    fx_rates: list[FxRate] = field(default_factory=list)
    excluded: Counter[str] = field(default_factory=Counter)
    degraded: list[Degraded] = field(default_factory=list)  # the parse said the answer is incomplete
    fetch_seconds: float = 0.0
    error: str | None = None
    hint: str | None = None
    cause: str | None = None  # why it failed, one of CAUSES (failures of one cause share one hint)


@dataclass(frozen=True)
class ProviderOutcome:
    """One row of ops.provider_runs, as the CLI and the artifact show it."""

    provider: str
    status: str  # ok | degraded | failed | skipped | rejected
    offers_parsed: int
    offers_loaded: int
    offers_quarantined: int
    rows_inserted: int
    rows_closed: int
    offers_excluded: int
    fetch_seconds: float
    error: str | None
    hint: str | None
    held_scopes: tuple[str, ...] = ()
    cause: str | None = None  # ProviderBatch.cause for a failed fetch or parse


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


# Why a provider's fetch or parse failed, by the error's class (most specific first).
CAUSES: tuple[tuple[type[BaseException], str], ...] = (
    (MissingCredentials, "missing_credentials"),
    (ReplayMiss, "replay_miss"),
    (HostNotFound, "dns"),
    (Unreachable, "unreachable"),
    (LayoutChanged, "layout"),
    (FetchError, "fetch"),
    (ConnectorError, "connector"),
)
# Said once for every provider that failed for this cause in a run: the advice is the same.
CAUSE_HINTS = {
    "dns": (
        "no host name resolved: this machine looks offline (or its DNS is down); check its network "
        "access. The last good prices stay current; offline, `gpucost refresh --replay tests/replay` "
        "runs on recorded sample data"
    ),
}


def cause_of(exc: BaseException) -> str:
    """The cause a failure is grouped by (`CAUSES`; anything else is a bug)."""
    return next((cause for kind, cause in CAUSES if isinstance(exc, kind)), "bug")


def _hint_for(exc: BaseException, provider: str) -> str:
    if isinstance(exc, ReplayMiss):
        return (
            "the replay cassette has no answer for this request; "
            "record one with `gpucost refresh --record DIR`"
        )
    if isinstance(exc, HostNotFound):
        return f"{provider}'s host name did not resolve; " + CAUSE_HINTS["dns"]
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
    *,
    deadline_seconds: float | None = None,
) -> ProviderBatch:
    """Fetch and parse one provider; never raises for a provider's own failure.

    Everything it fetches must finish within `deadline_seconds`; error text is redacted of the
    provider's credentials (a server may echo a key back in an error message).
    """
    started = time.perf_counter()
    batch = ProviderBatch(provider=connector.name, status="fetched", started_at=datetime.now(UTC))
    missing = missing_credentials(connector, creds)
    if missing:
        error = MissingCredentials(connector.name, missing)
        batch.status, batch.error, batch.cause = "skipped", str(error), "missing_credentials"
        batch.hint = f"export {' '.join(f'{m}=...' for m in missing)} to include {connector.name}"
        return batch
    secrets = [*creds.values(), *getattr(client, "secrets", ())]
    try:
        with provider_deadline(deadline_seconds):
            for response in connector.fetch(client, creds, previous):
                batch.responses.append(response)
        for item in connector.parse(batch.responses):
            if isinstance(item, Unchanged):
                batch.unchanged.append(item)
            elif isinstance(item, Excluded):
                batch.excluded[item.reason] += item.count
            elif isinstance(item, FxRate):
                batch.fx_rates.append(item)
            elif isinstance(item, Degraded):
                batch.degraded.append(item)
            else:
                batch.offers.append(item)
    except ConnectorError as exc:
        batch.status, batch.error, batch.hint = (
            "failed",
            redact(f"{type(exc).__name__}: {exc}", secrets),
            _hint_for(exc, connector.name),
        )
        batch.cause = cause_of(exc)
    except Exception as exc:  # a bug in one connector must not stop the others
        last = traceback.extract_tb(exc.__traceback__)[-1]
        batch.status, batch.cause = "failed", "bug"
        batch.error = redact(
            f"{type(exc).__name__}: {exc} (at {Path(last.filename).name}:{last.lineno})", secrets
        )
        batch.hint = _hint_for(exc, connector.name)
    batch.fetch_seconds = time.perf_counter() - started
    return batch


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


# A run on another host cannot be probed; after this long it is taken as dead.
FOREIGN_RUN_TIMEOUT_HOURS = 6


def mark_abandoned(con: duckdb.DuckDBPyConnection, now: datetime) -> list[str]:
    """Mark `running` runs whose process is gone as `abandoned`; their ids."""
    host = socket.gethostname()
    dead = []
    rows = con.execute("select run_id, pid, hostname, started_at from ops.runs where status = 'running'")
    for run_id, pid, hostname, started_at in rows.fetchall():
        if hostname == host:
            gone = not _alive(pid) or pid == os.getpid()
        else:
            gone = (now - started_at).total_seconds() > FOREIGN_RUN_TIMEOUT_HOURS * 3600
        if gone:
            dead.append(run_id)
    for run_id in dead:
        con.execute(
            "update ops.runs set status = 'abandoned', finished_at = ?, "
            "error = coalesce(error, 'the process running it ended before it finished') where run_id = ?",
            [now, run_id],
        )
    return dead


def start_run(
    con: duckdb.DuckDBPyConnection, run_id: str, mode: str, providers: Sequence[str], flow_run_id: str | None
) -> None:
    now = datetime.now(UTC)
    mark_abandoned(con, now)
    con.execute(
        "insert into ops.runs (run_id, started_at, status, mode, providers, flow_run_id, pid, hostname) "
        "values (?, ?, 'running', ?, ?, ?, ?, ?)",
        [run_id, now, mode, list(providers), flow_run_id, os.getpid(), socket.gethostname()],
    )


def running_run_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The runs recorded as running (this one included): their spool folders are kept."""
    return [r for (r,) in con.execute("select run_id from ops.runs where status = 'running'").fetchall()]


def mark_marts_built(con: duckdb.DuckDBPyConnection, run_id: str, at: datetime) -> None:
    """Record when the run's marts were rebuilt (readers date the marts by it)."""
    con.execute("update ops.runs set marts_built_at = ? where run_id = ?", [at, run_id])


def run_status(outcomes: Sequence[ProviderOutcome], error: str | None = None) -> str:
    """ok | partial | failed for a run's provider outcomes (see the module docstring)."""
    loaded = [o for o in outcomes if o.status in LOADED]
    if error or (outcomes and not loaded and any(o.status != "skipped" for o in outcomes)):
        return "failed"
    if any(o.status in NOT_CLEAN for o in outcomes):
        return "partial"
    return "ok"


def finish_run(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    outcomes: Sequence[ProviderOutcome],
    error: str | None = None,
    *,
    interrupted: bool = False,
) -> str:
    status = "interrupted" if interrupted else run_status(outcomes, error)
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
    guards: Guards | None = None,
) -> ProviderOutcome:
    """Archive the raw responses, load the offers (if the fetch worked), record the provider run."""
    started = time.perf_counter()
    total_bytes = land_raw(con, raw_root, run_id, batch.provider, batch.responses)
    for response in batch.responses:
        remove_spooled(response)
    result = LoadResult(status=batch.status, offers_parsed=len(batch.offers))
    guards = guards or Guards(accept_shrink=accept_shrink)
    connector = CONNECTORS.get(batch.provider)
    limit = getattr(connector, "shrink_limit", None)
    if limit is not None:
        guards = replace(guards, shrink_limit=limit)
    if batch.status == "fetched":
        now = datetime.now(UTC)
        if batch.fx_rates:
            result = _load_rates(con, run_id, batch, now, guards)
        else:
            result = load_offers(
                con, run_id, batch.provider, batch.offers, batch.unchanged, now=now, guards=guards
            )
    status = result.status if batch.status == "fetched" else batch.status
    error = result.error if batch.status == "fetched" else batch.error
    hint = result.hint if batch.status == "fetched" else batch.hint
    if batch.status == "fetched" and batch.degraded and status in LOADED:
        # the connector knows its answer is incomplete: loaded, but never a clean run
        status = "degraded"
        error = "; ".join(filter(None, [error, *(d.reason for d in batch.degraded)]))
        hint = "; ".join(filter(None, [hint, *dict.fromkeys(d.hint for d in batch.degraded)]))
    if result.quarantine_reasons:
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(result.quarantine_reasons.items()))
        note = f"quarantined: {reasons} (see ops.quarantine; --accept-changes publishes price jumps)"
        hint = note if status == "ok" else f"{hint}; {note}" if hint else note
    con.execute(
        """
        insert into ops.provider_runs (
            run_id, provider, status, started_at, finished_at, fetch_seconds, load_seconds,
            responses, bytes, offers_parsed, offers_quarantined, offers_loaded, offers_carried,
            rows_inserted, rows_closed, error, hint, excluded, scopes
        ) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
            json.dumps(result.scopes),
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
        held_scopes=tuple(result.held_scopes),
        cause=batch.cause,
    )


def _load_rates(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    batch: ProviderBatch,
    now: datetime,
    guards: Guards | None = None,
) -> LoadResult:
    """A reference-rate source's batch into core.fx_rates. A rate that is not a finite positive
    number, or moved more than the anomaly guard's factor from the newest stored rate of its
    currency, is quarantined and not used.

    A rate outside `guards.fx_band_fraction` of the median of its currency's last `FX_BAND_DAYS`
    days is quarantined as `fx_out_of_band`, and no repetition confirms it: a wrong rate (a
    misplaced decimal, an inverted quote) comes back identical every run, and the mart would
    convert every price in that currency with it. Only `accept_changes` publishes it. A currency
    with no rate in the window is judged by the jump guard alone."""
    guards = guards or Guards()
    newest = dict(
        con.execute(
            "select currency, usd_per_unit from core.fx_rates "
            "qualify row_number() over (partition by currency order by rate_date desc) = 1"
        ).fetchall()
    )
    confirmed = held_moves(con, batch.provider, run_id)
    good: list[FxRate] = []
    bad: list[tuple[str, FxRate, dict[str, Any] | None]] = []
    for rate in batch.fx_rates:
        old = newest.get(rate.currency)
        previous = confirmed.get(f"{batch.provider}|{rate.currency}")
        if old and previous and not jumped(previous, rate.usd_per_unit, CONFIRM_FACTOR):
            old = None  # the same move held by the previous run: confirmed
        if not (isinstance(rate.usd_per_unit, int | float) and math.isfinite(rate.usd_per_unit)) or (
            rate.usd_per_unit <= 0
        ):
            bad.append(("rate is not a finite positive number", rate, None))
            continue
        median = fx_band_median(con, rate.currency, rate.rate_date)
        if not guards.accept_changes and out_of_band(rate.usd_per_unit, median, guards.fx_band_fraction):
            details = {
                "median_usd_per_unit": median,
                "band_days": FX_BAND_DAYS,
                "band_fraction": guards.fx_band_fraction,
                "new_usd_per_unit": rate.usd_per_unit,
            }
            bad.append(("fx_out_of_band", rate, details))
        elif old and not guards.accept_changes and jumped(old, rate.usd_per_unit, JUMP_FACTOR):
            bad.append(("price_jump", rate, {"old_usd_per_unit": old, "new_usd_per_unit": rate.usd_per_unit}))
        else:
            good.append(rate)
    result = LoadResult(status="ok", offers_parsed=len(batch.fx_rates), offers_quarantined=len(bad))
    if not good:
        result.status, result.error = "rejected", "the source returned no valid rates"
        result.hint = "kept the last good rates; prices in other currencies use them while they are fresh"
    elif bad:
        result.status = "degraded"
        result.error = f"held {len(bad)} rate(s); the newest good ones stay in use"
    for reason, _, _ in bad:
        result.quarantine_reasons[reason] = result.quarantine_reasons.get(reason, 0) + 1
    if bad:
        con.executemany(
            "insert into ops.quarantine values (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    run_id,
                    batch.provider,
                    now,
                    reason,
                    json.dumps(asdict(rate), default=str),
                    f"{batch.provider}|{rate.currency}",
                    json.dumps(details) if details else None,
                )
                for reason, rate, details in bad
            ],
        )
    result.rows_inserted = load_fx_rates(con, run_id, good, now=now)
    result.offers_loaded = len(good)
    return result


def clear_spool(spool_root: Path, keep: Sequence[str] = ()) -> None:
    """Remove spool folders of runs that are over (a killed run leaves its partial downloads)."""
    if not spool_root.is_dir():
        return
    for child in spool_root.iterdir():
        if child.name not in keep:
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)


def default_providers() -> list[str]:
    """The registered providers a refresh or check runs by default: all but the retired ones
    (seeds/provider_lifecycle.csv, warehouse/lifecycle.py)."""
    gone = retired()
    return [name for name in CONNECTORS if name not in gone]


def select_connectors(names: Sequence[str] | None) -> list[Connector]:
    """The connectors to run, in registry order; unknown names raise with the valid ones listed,
    and a retired one raises saying since when, why and what to do."""
    active = default_providers()
    if not names:
        return [CONNECTORS[n] for n in active]
    unknown = [n for n in names if n not in CONNECTORS]
    if unknown:
        raise ValueError(f"unknown provider(s) {', '.join(unknown)}; choose from {', '.join(active)}")
    gone = retired()
    for name in names:
        if name in gone:
            raise ValueError(gone[name].message())
    return [CONNECTORS[n] for n in CONNECTORS if n in names]


def environment() -> dict[str, str]:
    return dict(os.environ)
