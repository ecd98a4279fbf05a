"""The refresh as a Prefect flow: `flows.orchestration.run_refresh` driven by Prefect tasks.

Thin on purpose: the sequence is written once in `flows.orchestration` (the CLI drives the same
sequence without Prefect when no Prefect API is configured); here each step becomes a task run,
credentials may come from Secret blocks, and the summary becomes table artifacts. Retries live in
the HTTP client, not here.

Final states, for Prefect automations: `Completed` when every provider loaded cleanly (or was
skipped for missing credentials); `Completed` named **`Partial`** when some loaded and some
failed, were rejected or degraded (alert on the flow-run state name `Partial`); `Failed` when
nothing loaded. A provider that was already stale when the run began (failing for longer than
GPUCOST_STALE_AFTER_HOURS) and fails again counts for neither: its offers are out of every answer
already, and the state's message names it (`RefreshSummary.unclean` in flows/orchestration.py is
the rule, shared with the CLI's exit code); `Cancelled` when a signal stopped it (the run is
recorded `interrupted`, the message says what it kept). Retired providers (seeds/provider_lifecycle.csv) are
not in the default provider set. `--replay` writes to its own warehouse and feeds under
`$GPUCOST_HOME/replay/`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_progress_artifact, create_table_artifact, update_progress_artifact
from prefect.blocks.system import Secret
from prefect.cache_policies import NO_CACHE
from prefect.context import get_run_context
from prefect.states import Cancelled, Completed, Failed, State
from prefect.task_runners import ThreadPoolTaskRunner

from flows.orchestration import RefreshInterrupted, RefreshPlan, RefreshSummary, describe_batch, run_refresh
from warehouse.db import WarehouseError
from warehouse.pipeline import ProviderBatch

T = TypeVar("T")

# Connectors log progress with the standard library (large downloads at INFO); Prefect attaches its
# handlers to them (PREFECT_LOGGING_EXTRA_LOGGERS=connectors, set in flows/__init__), we set the level.
logging.getLogger("connectors").setLevel(logging.INFO)

__all__ = ["RefreshSummary", "block_name", "final_state", "refresh", "secrets_from_blocks"]


def block_name(variable: str) -> str:
    """The Prefect Secret block a credential may live in: GOOGLE_API_KEY -> google-api-key."""
    return variable.lower().replace("_", "-")


def secrets_from_blocks(variables: Sequence[str]) -> dict[str, str]:
    """Credentials missing from the environment, from Prefect Secret blocks where they exist.

    Scheduled runs on a worker take their credentials from Secret blocks rather than the worker's
    environment; a missing block is not an error (the provider is then skipped as usual).
    """
    found = {}
    for variable in variables:
        try:
            # Prefect types load() as sync-or-awaitable (sync_compatible); called from sync code it is sync
            found[variable] = Secret.load(block_name(variable)).get()  # type: ignore[union-attr]
        except ValueError:  # no such block
            continue
    return found


@task(name="fetch_provider", cache_policy=NO_CACHE)
def fetch_provider(provider: str, job: Callable[[], ProviderBatch]) -> ProviderBatch:
    batch = job()
    logger = get_run_logger()
    (logger.info if batch.status == "fetched" else logger.warning)(describe_batch(batch))
    return batch


@task(name="step", cache_policy=NO_CACHE, task_run_name="{name}")
def run_step(name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return fn(*args)


class PrefectRunner:
    """Each provider's fetch a concurrent task run, each later step a task run of its own."""

    name = "prefect"

    def run_id_of_orchestrator(self) -> str | None:
        # only called inside the refresh flow, where the run context has a flow run
        return str(get_run_context().flow_run.id)  # type: ignore[union-attr]

    def extra_secrets(self, names: Sequence[str]) -> dict[str, str]:
        return secrets_from_blocks(names)

    def fetch_all(self, jobs: Sequence[tuple[str, Callable[[], ProviderBatch]]]) -> list[ProviderBatch]:
        from prefect.futures import wait

        futures = [fetch_provider.submit(provider, job) for provider, job in jobs]
        # short slices, as LocalRunner does: Ctrl-C or SIGTERM takes effect at once, not when the
        # slowest request ends (a signal may land on a fetching thread)
        while wait(futures, timeout=0.2).not_done:
            pass
        return [future.result() for future in futures]

    def step(self, name: str, fn: Callable[..., T], *args: Any) -> T:
        # a task called inside a flow returns its result; Prefect's stubs allow a coroutine too
        return run_step(name, fn, args)  # type: ignore[return-value]

    def publish(self, summary: RefreshSummary) -> None:
        _publish_artifact(summary)

    def downloads(self) -> ArtifactDownloads:
        return ArtifactDownloads()


class ArtifactDownloads:
    """A Prefect progress artifact per large download, updated every 5 % (each update is an API
    call, so not per block)."""

    STEP_PERCENT = 5.0

    def __init__(self) -> None:
        self._artifacts: dict[str, tuple[Any, float]] = {}
        self._lock = threading.Lock()

    def __call__(self, what: str, received: int, total: int | None, finished: bool) -> None:
        if not total:
            return  # no Content-Length: no percentage to show
        percent = 100.0 if finished else min(99.0, 100.0 * received / total)
        with self._lock:
            artifact, shown = self._artifacts.get(what, (None, -100.0))
            if artifact is not None and not finished and percent - shown < self.STEP_PERCENT:
                return
            if artifact is None:
                artifact = create_progress_artifact(percent, description=f"downloading {what}")
            else:
                update_progress_artifact(artifact, percent)
            self._artifacts[what] = (artifact, percent)

    def close(self) -> None:
        return None


# max_workers: every provider fetches at once (they wait on the network, not the CPU); 32 covers
# the registry with room, and the HTTP client's per-host bound still applies
# Prefect 3.9 types the runner's future parameter so that a plain ThreadPoolTaskRunner does not match
@flow(name="refresh", task_runner=ThreadPoolTaskRunner(max_workers=32), log_prints=True)  # type: ignore[arg-type]
def refresh(
    providers: list[str] | None = None,
    replay: str | None = None,
    record: str | None = None,
    accept_shrink: bool = False,
    accept_changes: bool = False,
    home: str | None = None,
    feeds_dir: str | None = None,
) -> State:
    """Scrape providers into the warehouse, rebuild marts and feeds.

    providers: slugs to refresh (default: every registered connector).
    replay: a cassette directory to serve every HTTP exchange from (offline, recorded sample data);
        the run writes to `$GPUCOST_HOME/replay/`, never to the live warehouse.
    record: a directory to record every HTTP exchange into.
    accept_shrink / accept_changes: publish scopes that shrank and price jumps the guards would hold.
    """
    plan = RefreshPlan(providers, replay, record, accept_shrink, accept_changes, home, feeds_dir)
    try:
        summary = run_refresh(plan, PrefectRunner())
    except WarehouseError as exc:
        # a condition the user acts on (a busy or unreadable warehouse), not a bug: a failed flow
        # run saying it in one line; raised, Prefect's engine would log a traceback to the terminal
        return Failed(message=f"{type(exc).__name__}: {exc}", data=exc)
    except RefreshInterrupted as exc:
        # stopped by Ctrl-C or SIGTERM, recorded `interrupted`: a cancelled flow run saying what it
        # kept, and the CLI prints the same line and exits 130
        return Cancelled(message=exc.kept(), data=exc)
    return final_state(summary)


def final_state(summary: RefreshSummary) -> State:
    """The flow run's state: what a Prefect automation alerts on (see the module docstring)."""
    bad = summary.unclean
    names = ", ".join(f"{o.provider} {o.status}" for o in bad)
    stale = ", ".join(o.provider for o in summary.still_failing)
    still = f"; still failing, stale and out of the answers: {stale}" if stale else ""
    if summary.status == "failed" and (bad or not stale):
        return Failed(message=f"nothing loaded: {names or 'no provider ran'}{still}", data=summary)
    if bad:
        return Completed(
            name="Partial", message=f"some providers did not load cleanly: {names}{still}", data=summary
        )
    return Completed(message=f"{len(summary.outcomes)} providers refreshed{still}", data=summary)


def _publish_artifact(summary: RefreshSummary) -> None:
    create_table_artifact(
        key="gpucost-refresh",
        table=[
            {
                "provider": o.provider,
                "status": o.status,
                "offers_parsed": o.offers_parsed,
                "offers_loaded": o.offers_loaded,
                "quarantined": o.offers_quarantined,
                "excluded_by_rule": o.offers_excluded,
                "history_rows_added": o.rows_inserted,
                "history_rows_closed": o.rows_closed,
                "fetch_seconds": round(o.fetch_seconds, 2),
                "held_scopes": ", ".join(o.held_scopes),
                "error": o.error or "",
                "what_to_do": o.hint or "",
            }
            for o in summary.outcomes
        ],
        description=f"gpucost refresh {summary.run_id} ({summary.mode}): {summary.status}"
        + (" (replay: recorded sample data, not live prices)" if summary.mode == "replay" else ""),
    )
    if summary.cheapest:
        create_table_artifact(
            key="gpucost-cheapest-gpus",
            table=summary.cheapest,
            description="Cheapest current offer per GPU model, per GPU-hour"
            + (" (replay: recorded sample data)" if summary.mode == "replay" else ""),
        )
