"""`gpucost check`: fetch each source once, parse it, load nothing, and say what would change.

A check is the fetch + parse half of a refresh (`warehouse.pipeline.collect`, the same HTTP client,
retries, deadlines and redaction), run for every provider at once, and compared with what the
warehouse holds now: the provider's current offers, i.e. those of its last good run. Nothing is
written: not the warehouse, not the raw archive, not the feeds; spooled bodies are removed.

Per provider it answers: could the source be reached (`reachable`: False when no host name
resolved, no connection could be made, or a replay cassette has no answer), did its answer parse
(`parsed`), how many offers it holds, how that compares with the warehouse (`offers_before` →
`offers`, instance types that appeared or are gone), and what to do. A check `passed` unless a
source was unreachable, failed or parsed to nothing; a provider skipped for missing credentials
neither passes nor fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import duckdb

from connectors.base import SHRINK_LIMIT, Connector
from connectors.http import Client, remove_spooled
from warehouse.pipeline import ProviderBatch, collect

UNREACHABLE_CAUSES = frozenset({"dns", "unreachable", "replay_miss"})


@dataclass(frozen=True)
class Baseline:
    """A provider's current offers in the warehouse (its last good run)."""

    offers: int
    instance_types: frozenset[str]


@dataclass(frozen=True)
class CheckResult:
    """One provider's check (module docstring); `status` is ok | skipped | unreachable | failed."""

    provider: str
    status: str
    reachable: bool | None  # None: skipped, nothing was asked
    parsed: bool | None
    offers: int
    offers_before: int | None  # None: the warehouse holds no current offers of it
    appeared: tuple[str, ...]
    gone: tuple[str, ...]
    fetch_seconds: float
    error: str | None
    hint: str | None
    cause: str | None = None  # warehouse.pipeline.CAUSES, for a failed fetch or parse

    @property
    def passed(self) -> bool:
        return self.status in ("ok", "skipped")


def baselines(con: duckdb.DuckDBPyConnection, providers: Sequence[str]) -> dict[str, Baseline]:
    """Each provider's current offers (count, instance types) in the warehouse."""
    rows = con.execute(
        "select provider, count(*), list(distinct instance_type) from core.offer_prices "
        "where valid_to is null and list_contains(?, provider) group by provider",
        [list(providers)],
    ).fetchall()
    return {provider: Baseline(count, frozenset(types)) for provider, count, types in rows}


def judge(batch: ProviderBatch, before: Baseline | None) -> CheckResult:
    """A collected batch, compared with the warehouse's baseline of its provider."""
    count = len(batch.offers) or len(batch.fx_rates)
    types = {offer.instance_type for offer in batch.offers}
    appeared = tuple(sorted(types - before.instance_types)) if before and types else ()
    # parts not re-read (unchanged since the last good run: AWS's versioned offer files) still hold
    # their offers, so nothing can be called gone
    gone = (
        tuple(sorted(before.instance_types - types))
        if before and batch.offers and not batch.unchanged
        else ()
    )
    hint = batch.hint
    if batch.status == "skipped":
        status, reachable, parsed = "skipped", None, None
    elif batch.status != "fetched":
        reachable = batch.cause not in UNREACHABLE_CAUSES
        status, parsed = ("failed" if reachable else "unreachable"), False
    elif not count and not batch.unchanged:
        status, reachable, parsed = "failed", True, False
        hint = "the answer parsed to no offers: has the source changed its format? (a refresh would hold it)"
    else:
        status, reachable, parsed = "ok", True, True
        if batch.unchanged:  # `offers` counts only what was re-read
            hint = f"{len(batch.unchanged)} part(s) unchanged since the last good run, not re-read"
        elif before and batch.offers and len(batch.offers) < before.offers * (1 - SHRINK_LIMIT):
            hint = (
                f"{before.offers} current offers would shrink to {len(batch.offers)}: a refresh holds "
                "shrunk scopes at their last good prices (`gpucost refresh --accept-shrink` takes them)"
            )
    return CheckResult(
        provider=batch.provider,
        status=status,
        reachable=reachable,
        parsed=parsed,
        offers=count,
        offers_before=before.offers if before else None,
        appeared=appeared,
        gone=gone,
        fetch_seconds=batch.fetch_seconds,
        error=batch.error,
        hint=hint,
        cause=batch.cause,
    )


def check(
    connectors: Sequence[Connector],
    client: Client,
    creds: Mapping[str, Mapping[str, str]],
    before: Mapping[str, Baseline],
    *,
    previous: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None,
    deadline_seconds: float | None = None,
) -> list[CheckResult]:
    """Collect every provider at once (one thread each: they wait on the network) and judge each;
    results in the order of `connectors`. `previous` (the validators of each provider's last good
    run, `warehouse.load.previous_validators`) lets a connector skip what has not changed."""

    def one(connector: Connector) -> CheckResult:
        validators = (previous or {}).get(connector.name)
        batch = collect(
            connector, client, creds[connector.name], validators, deadline_seconds=deadline_seconds
        )
        for response in batch.responses:
            remove_spooled(response)
        return judge(batch, before.get(connector.name))

    if not connectors:
        return []
    with ThreadPoolExecutor(max_workers=len(connectors), thread_name_prefix="check") as pool:
        return list(pool.map(one, connectors))
