"""The refresh flow: fetch every provider concurrently, land each, rebuild marts, write feeds.

Thin on purpose: every step is a function in `warehouse.pipeline` / `warehouse.marts` /
`warehouse.export`, testable without Prefect. Retries live in the HTTP client, not here.
"""

from __future__ import annotations

import logging
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
from prefect.task_runners import ThreadPoolTaskRunner

from connectors.base import Connector
from connectors.http import Client, make_client
from warehouse import finetune
from warehouse.db import Settings, open_warehouse
from warehouse.export import write_feeds
from warehouse.load import previous_validators
from warehouse.marts import build_marts
from warehouse.pipeline import (
    ProviderBatch,
    ProviderOutcome,
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
    connector: Connector, client: Client, creds: dict[str, str], previous: dict[str, dict[str, str]]
) -> ProviderBatch:
    batch = collect(connector, client, creds, previous)
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
def load_provider(
    con, raw_root: Path, run_id: str, batch: ProviderBatch, accept_shrink: bool
) -> ProviderOutcome:
    outcome = land(con, raw_root, run_id, batch, accept_shrink=accept_shrink)
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
    home: str | None = None,
    feeds_dir: str | None = None,
) -> RefreshSummary:
    """Scrape providers into the warehouse, rebuild marts and feeds.

    providers: slugs to refresh (default: every registered connector).
    replay: a cassette directory to serve every HTTP exchange from (offline, recorded sample data).
    record: a directory to record every HTTP exchange into.
    """
    started = time.perf_counter()
    logger = get_run_logger()
    settings = Settings()
    home_dir = Path(home) if home else settings.home
    out_dir = Path(feeds_dir) if feeds_dir else settings.feeds_dir
    mode = "replay" if replay else "record" if record else "live"
    connectors = select_connectors(providers)
    if replay:
        logger.warning("replay mode: prices come from the recorded sample data in %s, not live APIs", replay)

    env = environment()
    if not replay:
        wanted = {n for c in connectors for n in (*c.requires, *getattr(c, "optional", ()))}
        env |= secrets_from_blocks(sorted(n for n in wanted if not env.get(n)))
    creds = {c.name: credentials_for(c, env, replay=bool(replay)) for c in connectors}
    secrets = [s for _, values in creds.values() for s in values]
    run_id = new_run_id(datetime.now(UTC))
    con = open_warehouse(home_dir / settings.warehouse_path.name)
    client = make_client(
        secrets=secrets,
        timeout=httpx.Timeout(settings.http_timeout_seconds, connect=10.0),
        retries=settings.http_retries,
        backoff=settings.http_backoff_seconds,
        per_host=settings.http_per_host,
        replay=Path(replay) if replay else None,
        record=Path(record) if record else None,
        spool_dir=home_dir / "spool",
    )
    outcomes: list[ProviderOutcome] = []
    summary = RefreshSummary(run_id=run_id, status="failed", mode=mode, outcomes=outcomes)
    try:
        flow_run_id = str(get_run_context().flow_run.id)  # type: ignore[union-attr]
        start_run(con, run_id, mode, [c.name for c in connectors], flow_run_id)
        futures = [
            fetch_provider.submit(c, client, creds[c.name][0], previous_validators(con, c.name))
            for c in connectors
        ]
        # One writer: load each provider in turn, as its fetch completes, in registry order.
        for future in futures:
            outcomes.append(load_provider(con, home_dir / "raw", run_id, future.result(), accept_shrink))
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
        finish_run(con, run_id, outcomes, error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        client.close()
        con.close()
    summary.pipeline_seconds = time.perf_counter() - started
    _publish_artifact(summary)
    return summary


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
                "error": o.error or "",
                "what_to_do": o.hint or "",
            }
            for o in summary.outcomes
        ],
        description=f"gpucost refresh {summary.run_id} ({summary.mode}): {summary.status}",
    )
    if summary.cheapest:
        create_table_artifact(
            key="gpucost-cheapest-gpus",
            table=summary.cheapest,
            description="Cheapest current offer per GPU model, per GPU-hour"
            + (" (replay: recorded sample data)" if summary.mode == "replay" else ""),
        )
