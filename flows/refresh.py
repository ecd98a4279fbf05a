"""The refresh flow: fetch every provider concurrently, land each, rebuild marts, write feeds.

Thin on purpose: every step is a function in `warehouse.pipeline` / `warehouse.marts` /
`warehouse.export`, testable without Prefect. Retries live in the HTTP client, not here.

The warehouse is opened for writing twice, briefly: to record the run's start (and read the
validators of earlier fetches), and after every provider has been fetched and parsed, to land
them. During the downloads it is closed, so `gpucost sql`, `estimate` and `status` answer.

Final states, for Prefect automations: `Completed` when every provider loaded cleanly (or was
skipped for missing credentials); `Completed` named **`Partial`** when some loaded and some
failed, were rejected or degraded (alert on the flow-run state name `Partial`); `Failed` when
nothing loaded. `--replay` writes to its own warehouse and feeds under `$GPUCOST_HOME/replay/`.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.blocks.system import Secret
from prefect.cache_policies import NO_CACHE
from prefect.context import get_run_context
from prefect.states import Completed, Failed, State
from prefect.task_runners import ThreadPoolTaskRunner

from connectors.base import Connector
from connectors.http import Client, make_client
from warehouse import finetune
from warehouse.db import Settings, check_mode, open_warehouse, open_warehouse_when_free
from warehouse.export import write_feeds
from warehouse.load import Guards, previous_validators
from warehouse.marts import build_marts
from warehouse.pipeline import (
    NOT_CLEAN,
    ProviderBatch,
    ProviderOutcome,
    clear_spool,
    collect,
    credentials_for,
    environment,
    finish_run,
    land,
    new_run_id,
    select_connectors,
    start_run,
)

# Connectors log progress with the standard library (large downloads at INFO); Prefect attaches its
# handlers to them (PREFECT_LOGGING_EXTRA_LOGGERS=connectors, set in flows/__init__), we set the level.
logging.getLogger("connectors").setLevel(logging.INFO)


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

    @property
    def failed(self) -> list[ProviderOutcome]:
        return [o for o in self.outcomes if o.status in ("failed", "rejected")]

    @property
    def degraded(self) -> list[ProviderOutcome]:
        return [o for o in self.outcomes if o.status == "degraded"]


def block_name(variable: str) -> str:
    """The Prefect Secret block a credential may live in: GOOGLE_API_KEY -> google-api-key."""
    return variable.lower().replace("_", "-")


def secrets_from_blocks(variables: list[str]) -> dict[str, str]:
    """Credentials missing from the environment, from Prefect Secret blocks where they exist.

    Scheduled runs on a worker take their credentials from Secret blocks rather than the worker's
    environment; a missing block is not an error (the provider is then skipped as usual).
    """
    found = {}
    for variable in variables:
        try:
            found[variable] = Secret.load(block_name(variable)).get()
        except ValueError:  # no such block
            continue
    return found


@task(name="fetch_provider", cache_policy=NO_CACHE)
def fetch_provider(
    connector: Connector,
    client: Client,
    creds: dict[str, str],
    previous: dict[str, dict[str, str]],
    deadline_seconds: float,
) -> ProviderBatch:
    batch = collect(connector, client, creds, previous, deadline_seconds=deadline_seconds)
    logger = get_run_logger()
    if batch.status == "fetched":
        logger.info(
            "%s: %d responses, %d offers, %d unchanged scopes in %.1fs",
            batch.provider,
            len(batch.responses),
            len(batch.offers),
            len(batch.unchanged),
            batch.fetch_seconds,
        )
    else:
        logger.warning("%s %s: %s", batch.provider, batch.status, batch.error)
    return batch


@task(name="load_offers", cache_policy=NO_CACHE)
def load_provider(con, raw_root: Path, run_id: str, batch: ProviderBatch, guards: Guards) -> ProviderOutcome:
    outcome = land(con, raw_root, run_id, batch, guards=guards)
    get_run_logger().info(
        "%s: %s, %d loaded, %d quarantined, +%d/-%d history rows",
        outcome.provider,
        outcome.status,
        outcome.offers_loaded,
        outcome.offers_quarantined,
        outcome.rows_inserted,
        outcome.rows_closed,
    )
    return outcome


@task(name="build_marts", cache_policy=NO_CACHE)
def build_marts_task(con) -> dict[str, int]:
    return build_marts(con, finetune=finetune.build_finetune_marts)


@task(name="write_feeds", cache_policy=NO_CACHE)
def write_feeds_task(con, out_dir: Path) -> list[str]:
    return [str(path) for path, _ in write_feeds(con, out_dir)]


@flow(name="refresh", task_runner=ThreadPoolTaskRunner(max_workers=4), log_prints=True)
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
    started = time.perf_counter()
    logger = get_run_logger()
    settings = Settings()
    home_dir = Path(home) if home else settings.replay_home if replay else settings.home
    out_dir = Path(feeds_dir) if feeds_dir else home_dir / "feeds" if replay else settings.feeds_dir
    mode = "replay" if replay else "record" if record else "live"
    connectors = select_connectors(providers)
    if replay:
        logger.warning(
            "replay mode: prices come from the recorded sample data in %s, not live APIs; writing to %s",
            replay,
            home_dir,
        )
    guards = Guards(
        jump_factor=settings.price_jump_factor,
        max_usd_per_gpu_hour=settings.max_usd_per_gpu_hour,
        accept_shrink=accept_shrink,
        accept_changes=accept_changes or settings.accept_changes,
    )

    env = environment()
    if not replay:
        wanted = {n for c in connectors for n in (*c.requires, *getattr(c, "optional", ()))}
        env |= secrets_from_blocks(sorted(n for n in wanted if not env.get(n)))
    creds = {c.name: credentials_for(c, env, replay=bool(replay)) for c in connectors}
    secrets = [s for _, values in creds.values() for s in values]
    run_id = new_run_id(datetime.now(UTC))
    warehouse_path = home_dir / settings.warehouse_path.name
    spool_root = home_dir / "spool"

    # 1. a short write: record the run's start; read what earlier fetches validated
    con = open_warehouse(warehouse_path)
    try:
        check_mode(con, mode, warehouse_path)
        flow_run_id = str(get_run_context().flow_run.id)  # type: ignore[union-attr]
        start_run(con, run_id, mode, [c.name for c in connectors], flow_run_id)
        running = [
            r for (r,) in con.execute("select run_id from ops.runs where status = 'running'").fetchall()
        ]
        previous = {c.name: previous_validators(con, c.name) for c in connectors}
    finally:
        con.close()
    clear_spool(spool_root, keep=running)

    client = make_client(
        secrets=secrets,
        timeout=httpx.Timeout(settings.http_timeout_seconds, connect=10.0),
        retries=settings.http_retries,
        backoff=settings.http_backoff_seconds,
        per_host=settings.http_per_host,
        replay=Path(replay) if replay else None,
        record=Path(record) if record else None,
        spool_dir=spool_root / run_id,
        request_deadline=settings.http_request_deadline_seconds,
    )
    outcomes: list[ProviderOutcome] = []
    summary = RefreshSummary(run_id=run_id, status="failed", mode=mode, outcomes=outcomes)
    con = None
    try:
        # 2. fetch and parse every provider, concurrently, with the warehouse closed
        futures = [
            fetch_provider.submit(
                c, client, creds[c.name][0], previous[c.name], settings.provider_deadline_seconds
            )
            for c in connectors
        ]
        batches = [future.result() for future in futures]
        # 3. one writer: reference rates first (prices in other currencies use them), then offers
        con = open_warehouse_when_free(warehouse_path)
        for batch in sorted(batches, key=lambda b: not b.fx_rates):
            outcomes.append(load_provider(con, home_dir / "raw", run_id, batch, guards))
        outcomes.sort(key=lambda o: [c.name for c in connectors].index(o.provider))
        summary.mart_rows = build_marts_task(con)
        con.execute("update ops.runs set marts_built_at = ? where run_id = ?", [datetime.now(UTC), run_id])
        summary.feeds = write_feeds_task(con, out_dir)
        summary.status = finish_run(con, run_id, outcomes)
        cheapest = con.sql(
            """
            select gpu_name, provider, instance_type, region, pricing_type, price_source,
                round(price_usd_per_gpu_hour, 4) as usd_per_gpu_hour
            from marts.gpu_offers
            qualify row_number() over (partition by gpu_name order by price_usd_per_gpu_hour) = 1
            order by vram_gb desc, usd_per_gpu_hour
            limit 25
            """
        )
        summary.cheapest = [dict(zip(cheapest.columns, row, strict=True)) for row in cheapest.fetchall()]
    except BaseException as exc:
        if con is None:
            con = open_warehouse_when_free(warehouse_path)
        finish_run(con, run_id, outcomes, error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        client.close()
        if con is not None:
            con.close()
        shutil.rmtree(spool_root / run_id, ignore_errors=True)
    summary.pipeline_seconds = time.perf_counter() - started
    _publish_artifact(summary)
    return final_state(summary)


def final_state(summary: RefreshSummary) -> State:
    """The flow run's state: what a Prefect automation alerts on (see the module docstring)."""
    bad = [o for o in summary.outcomes if o.status in NOT_CLEAN]
    names = ", ".join(f"{o.provider} {o.status}" for o in bad)
    if summary.status == "failed":
        return Failed(message=f"nothing loaded: {names or 'no provider ran'}", data=summary)
    if summary.status == "partial":
        return Completed(
            name="Partial", message=f"some providers did not load cleanly: {names}", data=summary
        )
    return Completed(message=f"{len(summary.outcomes)} providers refreshed", data=summary)


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
