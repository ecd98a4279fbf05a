"""The refresh, written once: the sequence every runner drives.

    check and record the run, close retired providers' offers, note which providers are stale (a
    short write) -> fetch + parse every provider at once (warehouse closed) -> land one provider at
    a time (reference rates first) -> rebuild marts -> write feeds -> finish the run and summarise it

A run in which no provider loaded (every one failed, was rejected or skipped) publishes nothing:
the feeds, the page and their published copies stay as the last good run left them, byte for
byte. A run stopped by Ctrl-C or SIGTERM (`KeyboardInterrupt` in the main thread) is recorded as
`interrupted` with what it had landed: each provider lands in its own transaction, so a provider
lands whole or not at all; `RefreshInterrupted` carries the summary to the caller. Fetching threads
are daemons: an interrupted run does not wait for their in-flight requests.

What a run's outcome means for its caller (the CLI's exit code, the flow's final state) is
`RefreshSummary.unclean`: the providers that failed, were rejected or degraded *and were not
already stale when the run began*. A provider failing for longer than
`Settings.stale_after_hours` is already excluded from every answer; failing again is news to no
one, so it is reported in one line (`still_failing`) and does not fail the run, or every refresh
would exit 1 until someone deletes the provider. Retired providers do not run at all. Failures
share one hint per cause (`warehouse.pipeline.CAUSE_HINTS`); a run in which every provider failed
because no host name resolved is `offline`, said once.

A `Runner` decides only *how* each step executes: `flows.refresh` drives it with Prefect tasks (a
flow run with task states, logs and artifacts on a Prefect server), `LocalRunner` here with a plain
thread pool in this process, without importing Prefect (a one-off `gpucost refresh` then costs the
pipeline's own seconds instead of a temporary server's start-up). Neither holds a copy of the logic.

This module imports no Prefect; the business steps themselves live in `warehouse.pipeline`,
`warehouse.marts` and `warehouse.export`.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import httpx

from answers.catalog import cheapest_per_gpu
from answers.report import SITE_DIR_NAME, write_report
from connectors.base import Connector
from connectors.http import make_client
from warehouse.db import Settings, check_mode, mark_replay_home, open_warehouse, open_warehouse_when_free
from warehouse.export import write_feeds
from warehouse.lifecycle import close_retired, retired, stale_providers
from warehouse.load import Guards, previous_validators
from warehouse.marts import build_marts
from warehouse.pipeline import (
    LOADED,
    ProviderBatch,
    ProviderOutcome,
    clear_spool,
    collect,
    credentials_for,
    environment,
    finish_run,
    land,
    mark_marts_built,
    new_run_id,
    running_run_ids,
    select_connectors,
    start_run,
)
from warehouse.publish import PublishError, publish_if_configured

if TYPE_CHECKING:  # only annotates the connection variable
    import duckdb

T = TypeVar("T")
log = logging.getLogger("gpucost.refresh")


@dataclass
class RefreshSummary:
    run_id: str
    status: str
    mode: str
    outcomes: list[ProviderOutcome]
    mart_rows: dict[str, int] = field(default_factory=dict)
    feeds: list[str] = field(default_factory=list)
    cheapest: list[dict[str, object]] = field(default_factory=list)
    pipeline_seconds: float = 0.0
    runner: str = "local"
    report: str | None = None  # the comparison page written next to the feeds
    published: str | None = None  # what publishing to GPUCOST_FEEDS_URL did, when it is set
    publish_error: str | None = None
    # providers stale when the run began (provider -> failing since) and retired offers it closed
    stale: dict[str, datetime] = field(default_factory=dict)
    retired_closed: dict[str, int] = field(default_factory=dict)
    feeds_dir: str | None = None  # where the feeds and the page are (or would have been) written

    @property
    def loaded(self) -> list[ProviderOutcome]:
        """Providers whose offers (or rates) this run loaded, at least partly."""
        return [o for o in self.outcomes if o.status in LOADED]

    @property
    def failed(self) -> list[ProviderOutcome]:
        return [o for o in self.outcomes if o.status in ("failed", "rejected")]

    @property
    def degraded(self) -> list[ProviderOutcome]:
        return [o for o in self.outcomes if o.status == "degraded"]

    @property
    def unclean(self) -> list[ProviderOutcome]:
        """Failed, rejected or degraded, and not already stale: what fails the run (module docstring)."""
        return [o for o in self.failed + self.degraded if o.provider not in self.stale]

    @property
    def still_failing(self) -> list[ProviderOutcome]:
        """Providers stale when the run began that did not load this time either."""
        return [o for o in self.failed + self.degraded if o.provider in self.stale]

    @property
    def offline(self) -> bool:
        """Whether every provider that ran failed because no host name resolved."""
        ran = [o for o in self.outcomes if o.status != "skipped"]
        return bool(ran) and all(o.cause == "dns" for o in ran)


@dataclass(frozen=True)
class RefreshPlan:
    """What one refresh is asked to do (the flow's parameters, the CLI's options)."""

    providers: Sequence[str] | None = None
    replay: str | None = None
    record: str | None = None
    accept_shrink: bool = False
    accept_changes: bool = False
    home: str | None = None
    feeds_dir: str | None = None

    @property
    def mode(self) -> str:
        return "replay" if self.replay else "record" if self.record else "live"


class RefreshInterrupted(Exception):
    """The run was stopped by a signal (Ctrl-C, SIGTERM); recorded as `interrupted`.

    An Exception, not a KeyboardInterrupt, so that it reaches the caller as a result (a Prefect
    flow's failed state carries it) rather than as a crash.
    """

    def __init__(self, summary: RefreshSummary, stage: str) -> None:
        self.summary = summary
        self.stage = stage  # what the run was doing when stopped
        super().__init__(f"interrupted while {stage}")

    def kept(self) -> str:
        """One line: what the interrupted run left in the warehouse and the feeds."""
        loaded = self.summary.loaded
        names = ", ".join(sorted(o.provider for o in loaded))
        kept = (
            f"kept {len(loaded)} provider(s) landed before the signal ({names})" if loaded else "kept nothing"
        )
        feeds = "the feeds are this run's" if self.summary.feeds else "the feeds and page are untouched"
        run = self.summary.run_id
        return f"run {run} stopped while {self.stage}, recorded as interrupted; {kept}; {feeds}"


class Runner(Protocol):
    """How the steps of a refresh execute."""

    name: str

    def run_id_of_orchestrator(self) -> str | None:
        """The orchestrator's id for this run (a Prefect flow run id), recorded in ops.runs."""
        ...

    def extra_secrets(self, names: Sequence[str]) -> dict[str, str]:
        """Credentials the environment lacks, from wherever the runner keeps them."""
        ...

    def fetch_all(self, jobs: Sequence[tuple[str, Callable[[], ProviderBatch]]]) -> list[ProviderBatch]:
        """Run every provider's fetch + parse at once; the batches in the order of `jobs`."""
        ...

    def step(self, name: str, fn: Callable[..., T], *args: Any) -> T:
        """One named step (land a provider, build marts, write feeds)."""
        ...

    def publish(self, summary: RefreshSummary) -> None:
        """Make the summary visible where the runner's users look."""
        ...

    def downloads(self) -> DownloadProgress | None:
        """Where large downloads report their progress (a bar per file), if anywhere."""
        ...


class DownloadProgress(Protocol):
    def __call__(self, what: str, received: int, total: int | None, finished: bool) -> None: ...

    def close(self) -> None: ...


class TerminalDownloads:
    """A rich progress bar per large download, on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        from flows.output import err

        self._bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        )
        self._tasks: dict[str, Any] = {}
        self._started = False
        self._lock = threading.Lock()

    def __call__(self, what: str, received: int, total: int | None, finished: bool) -> None:
        with self._lock:
            if not self._started:
                self._bars.start()
                self._started = True
            task = self._tasks.get(what)
            if task is None:
                label = what.split("?")[0].rsplit("/", 3)[-3:]
                task = self._tasks[what] = self._bars.add_task("/".join(label), total=total)
            self._bars.update(task, completed=received, total=total)
            if finished:
                self._bars.remove_task(self._tasks.pop(what))

    def close(self) -> None:
        with self._lock:
            if self._started:
                self._bars.stop()


class LocalRunner:
    """Every provider in its own thread, steps called directly, progress to the standard logger."""

    name = "local"

    def run_id_of_orchestrator(self) -> str | None:
        return None

    def extra_secrets(self, names: Sequence[str]) -> dict[str, str]:
        return {}

    def fetch_all(self, jobs: Sequence[tuple[str, Callable[[], ProviderBatch]]]) -> list[ProviderBatch]:
        # one thread per provider: they wait on the network, not the CPU. Daemon threads, not a
        # ThreadPoolExecutor (whose workers the interpreter joins at exit): on Ctrl-C the main
        # thread leaves at once and in-flight requests end with the process, not at their timeout.
        futures: list[Future[ProviderBatch]] = []
        for provider, job in jobs:
            future: Future[ProviderBatch] = Future()
            threading.Thread(
                target=_run_into, args=(job, future), name=f"fetch-{provider}", daemon=True
            ).start()
            futures.append(future)
        # a signal may land on a fetching thread, and Python runs its handler only when the main
        # thread wakes: wait in short slices so Ctrl-C and SIGTERM take effect within a fraction of
        # a second instead of when the slowest request ends
        while wait(futures, timeout=0.2).not_done:
            pass
        return [future.result() for future in futures]

    def step(self, name: str, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)

    def publish(self, summary: RefreshSummary) -> None:
        return None

    def downloads(self) -> DownloadProgress | None:
        return TerminalDownloads()


def _run_into(job: Callable[[], ProviderBatch], future: Future[ProviderBatch]) -> None:
    try:
        future.set_result(job())
    except BaseException as exc:  # the caller's future.result() raises it
        future.set_exception(exc)


def describe_batch(batch: ProviderBatch) -> str:
    if batch.status == "fetched":
        return (
            f"{batch.provider}: {len(batch.responses)} responses, {len(batch.offers)} offers, "
            f"{len(batch.unchanged)} unchanged scopes in {batch.fetch_seconds:.1f}s"
        )
    return f"{batch.provider} {batch.status}: {batch.error}"


def describe_outcome(outcome: ProviderOutcome) -> str:
    return (
        f"{outcome.provider}: {outcome.status}, {outcome.offers_loaded} loaded, "
        f"{outcome.offers_quarantined} quarantined, "
        f"+{outcome.rows_inserted}/-{outcome.rows_closed} history rows"
    )


def run_refresh(plan: RefreshPlan, runner: Runner) -> RefreshSummary:
    """Scrape the plan's providers into the warehouse, rebuild marts and feeds; the summary."""
    started = time.perf_counter()
    settings = Settings()
    home_dir = Path(plan.home) if plan.home else settings.replay_home if plan.replay else settings.home
    out_dir = Path(plan.feeds_dir) if plan.feeds_dir else feeds_dir_for(settings, home_dir, bool(plan.replay))
    connectors = select_connectors(list(plan.providers) if plan.providers else None)
    if plan.replay:
        log.warning(
            "replay mode: prices come from the recorded sample data in %s, not live APIs; writing to %s",
            plan.replay,
            home_dir,
        )
    guards = Guards(
        jump_factor=settings.price_jump_factor,
        max_usd_per_gpu_hour=settings.max_usd_per_gpu_hour,
        accept_shrink=plan.accept_shrink,
        accept_changes=plan.accept_changes or settings.accept_changes,
        fx_band_fraction=settings.fx_band_fraction,
        market_min_hosts=settings.market_min_hosts,
    )
    env = environment()
    if not plan.replay:
        wanted = {n for c in connectors for n in (*c.requires, *getattr(c, "optional", ()))}
        env |= runner.extra_secrets(sorted(n for n in wanted if not env.get(n)))
    creds = {c.name: credentials_for(c, env, replay=bool(plan.replay)) for c in connectors}
    secrets = [s for _, values in creds.values() for s in values]
    run_id = new_run_id(datetime.now(UTC))
    warehouse_path = home_dir / settings.warehouse_path.name
    spool_root = home_dir / "spool"

    # 1. a short write: record the run's start; read what earlier fetches validated
    con: duckdb.DuckDBPyConnection | None  # closed (None) while the providers fetch
    con = open_warehouse(warehouse_path)
    try:
        check_mode(con, plan.mode, warehouse_path)
        if plan.replay:
            mark_replay_home(home_dir)
        start_run(con, run_id, plan.mode, [c.name for c in connectors], runner.run_id_of_orchestrator())
        running = running_run_ids(con)
        previous = {c.name: previous_validators(con, c.name) for c in connectors}
        began = datetime.now(UTC)
        closed = close_retired(con, run_id, began, retired())
        stale = stale_providers(con, began, settings.stale_after_hours)
    finally:
        con.close()
    for provider, count in closed.items():
        log.warning("%s is retired: closed its %d open offers", provider, count)
    clear_spool(spool_root, keep=running)

    outcomes: list[ProviderOutcome] = []
    summary = RefreshSummary(
        run_id=run_id,
        status="failed",
        mode=plan.mode,
        outcomes=outcomes,
        runner=runner.name,
        stale=stale,
        retired_closed=closed,
        feeds_dir=str(out_dir),
    )
    client: Any = None
    progress: DownloadProgress | None = None
    con = None
    stage = "starting the HTTP client"
    try:
        # inside the try: a cassette that will not open fails the run, never leaves it `running`
        client = make_client(
            secrets=secrets,
            timeout=httpx.Timeout(settings.http_timeout_seconds, connect=10.0),
            retries=settings.http_retries,
            backoff=settings.http_backoff_seconds,
            per_host=settings.http_per_host,
            replay=Path(plan.replay) if plan.replay else None,
            record=Path(plan.record) if plan.record else None,
            spool_dir=spool_root / run_id,
            request_deadline=settings.http_request_deadline_seconds,
            user_agent=settings.user_agent,
        )
        progress = runner.downloads()
        client.progress = progress
        # 2. fetch and parse every provider at once, with the warehouse closed
        stage = "fetching"
        batches = runner.fetch_all(
            [
                (c.name, _fetch_job(c, client, creds[c.name][0], previous[c.name], settings))
                for c in connectors
            ]
        )
        # 3. one writer: reference rates first (prices in other currencies use them), then offers
        stage = "landing"
        con = open_warehouse_when_free(warehouse_path)
        for batch in sorted(batches, key=lambda b: not b.fx_rates):
            outcome = runner.step(
                f"load {batch.provider}", _land, con, home_dir / "raw", run_id, batch, guards
            )
            log.log(logging.DEBUG if outcome.cause == "dns" else logging.INFO, describe_outcome(outcome))
            outcomes.append(outcome)
        order = [c.name for c in connectors]
        outcomes.sort(key=lambda o: order.index(o.provider))
        stage = "building the marts"
        summary.mart_rows = runner.step("build marts", _build_marts, con, settings.stale_after_hours)
        mark_marts_built(con, run_id, datetime.now(UTC))
        if summary.loaded:
            stage = "writing the feeds"
            summary.feeds = runner.step(
                "write feeds", _write_feeds, con, out_dir, run_id, plan.mode == "replay"
            )
            stage = "writing the page"
            summary.report = str(runner.step("write report", write_report, con, out_dir / SITE_DIR_NAME))
        else:
            log.warning("no provider loaded: the feeds and the page in %s stay as they were", out_dir)
        summary.status = finish_run(con, run_id, outcomes)
        summary.cheapest = cheapest_per_gpu(con)
    except BaseException as exc:
        from duckdb import InterruptException  # DuckDB's own, for a signal during a query

        interrupted = isinstance(exc, KeyboardInterrupt | InterruptException)
        if con is None:
            con = open_warehouse_when_free(warehouse_path)
        detail = "a signal (Ctrl-C or SIGTERM)" if interrupted else f"{type(exc).__name__}: {exc}"
        summary.status = finish_run(
            con, run_id, outcomes, error=f"stopped while {stage}: {detail}" if interrupted else detail,
            interrupted=interrupted,
        )  # fmt: skip
        if interrupted:
            raise RefreshInterrupted(summary, stage) from None
        raise
    finally:
        if client is not None:
            client.close()
        if progress is not None:
            progress.close()
        if con is not None:
            con.close()
        shutil.rmtree(spool_root / run_id, ignore_errors=True)
    # 4. beyond this machine (GPUCOST_FEEDS_URL): data first, manifest last. A failed upload is not a
    # failed load: the warehouse and the local feeds are complete; the run says so and the CLI fails.
    if summary.loaded:
        try:
            summary.published = runner.step("publish feeds", publish_if_configured, out_dir)
        except PublishError as exc:
            summary.publish_error = str(exc)
            log.error("publishing the feeds failed: %s", exc)
    summary.pipeline_seconds = time.perf_counter() - started
    runner.publish(summary)
    return summary


def feeds_dir_for(settings: Settings, home: Path, replay: bool) -> Path:
    """Where a run writing to `home` puts its feeds and page: GPUCOST_FEEDS_DIR when set (never
    for a replay, whose feeds stay beside its own warehouse), else `home/feeds`."""
    explicit = "feeds_dir" in settings.given
    return settings.feeds_dir if explicit and not replay else home / "feeds"


def _fetch_job(
    connector: Connector,
    client: Any,
    creds: dict[str, str],
    previous: dict[str, dict[str, str]],
    settings: Settings,
) -> Callable[[], ProviderBatch]:
    def job() -> ProviderBatch:
        batch = collect(
            connector, client, creds, previous, deadline_seconds=settings.provider_deadline_seconds
        )
        # an unresolved host name is said once for the whole run (RefreshSummary.offline, CAUSE_HINTS)
        level = (
            logging.INFO
            if batch.status == "fetched"
            else logging.DEBUG
            if batch.cause == "dns"
            else logging.WARNING
        )
        log.log(level, describe_batch(batch))
        return batch

    return job


def _land(con: Any, raw_root: Path, run_id: str, batch: ProviderBatch, guards: Guards) -> ProviderOutcome:
    return land(con, raw_root, run_id, batch, guards=guards)


def _build_marts(con: Any, stale_after_hours: float) -> dict[str, int]:
    from warehouse import finetune_marts as finetune

    return build_marts(con, finetune=finetune.build_finetune_marts, stale_after_hours=stale_after_hours)


def _write_feeds(con: Any, out_dir: Path, run_id: str, sample: bool) -> list[str]:
    return [str(path) for path, _ in write_feeds(con, out_dir, run_id=run_id, sample=sample)]
