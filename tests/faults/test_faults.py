"""Every registered connector through the same faults, with the outcomes the pipeline promises.

Parametrized over `connectors.CONNECTORS`, so a connector added later is covered without a line
here; each needs a replay cassette in tests/replay and a case in tests/faults/cases/<slug>.py
saying which exchange carries its prices and how to degrade that body (tests/faults/bodies.py).

For each connector a clean baseline is loaded once from the replay cassette; every fault test
starts from a copy of that warehouse, fetches again through a transport that injects one fault
into the price exchange, lands the batch with the pipeline's own functions (no Prefect: it is
irrelevant here), and checks:

    transport: hang, 429, 503, a body that breaks off      -> failed; every last good price current
               a slow drip                                  -> failed by the deadline, quickly
               one dropped body, then a good one            -> retried: ok, nothing changes
    body:      truncated, empty, price key renamed          -> never `ok` with offers lost; nothing
                                                               closed; no price changed
               one bad row                                  -> quarantined; nothing closed
               one price jump                               -> held as `price_jump`, old price
                                                               current; confirmed by a second run
                                                               (a rate: `fx_out_of_band`, never;
                                                               a thin market segment: `thin_market`,
                                                               never by repetition)
               one unknown GPU                              -> lands, shows in marts.unmapped_gpus

No spool file survives any of them.
"""

from __future__ import annotations

import importlib
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import CONNECTORS
from connectors.base import Connector
from connectors.http import ReplayTransport, make_client
from tests.conftest import REPO
from tests.faults.bodies import BodyFaults
from warehouse.db import open_warehouse
from warehouse.hardware import HardwareCatalog
from warehouse.lifecycle import retired
from warehouse.load import Guards
from warehouse.marts import build_marts
from warehouse.pipeline import ProviderBatch, collect, credentials_for, land

REPLAY = REPO / "tests" / "replay"
SLUGS = sorted(CONNECTORS)
CATALOG = HardwareCatalog.load()
TRANSPORT_FAULTS = ("hang", "http_429", "http_503", "drop_mid_body", "slow_drip")
BODY_FAULTS = ("truncated", "empty", "renamed_key", "bad_row", "price_jump", "unknown_gpu")
DRIP_DEADLINE_SECONDS = 0.3
FX_SOURCE = "ecb"  # the reference-rate connector: loaded first into every baseline


def fault_case(slug: str) -> BodyFaults:
    try:
        module = importlib.import_module(f"tests.faults.cases.{slug}")
    except ModuleNotFoundError:
        pytest.fail(
            f"connector {slug!r} has no fault case: add tests/faults/cases/{slug}.py defining "
            "FAULTS = BodyFaults(...) (see tests/faults/bodies.py)"
        )
    faults = getattr(module, "FAULTS", None)
    assert isinstance(faults, BodyFaults), (
        f"tests/faults/cases/{slug}.py must define FAULTS = BodyFaults(...)"
    )
    return faults


# --- a transport that breaks the price exchange ------------------------------------------------------


class _Dropping(httpx.SyncByteStream):
    """Half the body, then the connection goes away."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def __iter__(self) -> Iterator[bytes]:
        yield self._body[: max(1, len(self._body) // 2)]
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


class _Drip(httpx.SyncByteStream):
    """A byte at a time, each under any read timeout, never finishing in reasonable time."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def __iter__(self) -> Iterator[bytes]:
        for i in range(len(self._body)):
            time.sleep(0.01)
            yield self._body[i : i + 1]


class FaultTransport(httpx.BaseTransport):
    """Serves the cassette, injecting `fault` into exchanges whose URL or body contains `target`.

    `times` limits how many matching requests are broken (None: all of them).
    """

    def __init__(
        self,
        inner: httpx.BaseTransport,
        target: str,
        fault: str,
        mutate: Callable[[bytes], bytes] | None = None,
        times: int | None = None,
    ) -> None:
        self._inner = inner
        self._target = target
        self._fault = fault
        self._mutate = mutate
        self._times = times
        self.hits = 0

    def _matches(self, request: httpx.Request) -> bool:
        return self._target in str(request.url) or self._target in request.content.decode("utf-8", "replace")

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not self._matches(request) or (self._times is not None and self.hits >= self._times):
            return self._inner.handle_request(request)
        self.hits += 1
        if self._fault == "hang":  # what a server that never answers becomes after the read timeout
            raise httpx.ReadTimeout("timed out waiting for the response", request=request)
        if self._fault in ("http_429", "http_503"):
            status = int(self._fault.removeprefix("http_"))
            return httpx.Response(status, headers={"retry-after": "0"}, content=b"busy", request=request)
        recorded = self._inner.handle_request(request)
        body = recorded.read()
        headers = {
            k: v
            for k, v in recorded.headers.items()
            if k.lower() not in ("content-length", "content-encoding")
        }
        if self._fault == "drop_mid_body":
            return httpx.Response(
                recorded.status_code, headers=headers, stream=_Dropping(body), request=request
            )
        if self._fault == "slow_drip":
            return httpx.Response(recorded.status_code, headers=headers, stream=_Drip(body), request=request)
        assert self._mutate is not None
        return httpx.Response(
            recorded.status_code, headers=headers, content=self._mutate(body), request=request
        )


def _mutation(faults: BodyFaults, fault: str) -> Callable[[bytes], bytes]:
    if fault == "truncated":
        return lambda body: body[: len(body) // 3]
    if fault == "empty":
        return lambda body: b""
    return getattr(faults, fault)


# --- the warehouse around one connector ----------------------------------------------------------------


@dataclass
class Run:
    batch: ProviderBatch
    status: str
    run_id: str


class Harness:
    """A warehouse holding one connector's clean baseline, and fault runs against it."""

    def __init__(self, connector: Connector, directory: Path, con: Any = None) -> None:
        self.connector = connector
        self.dir = directory
        self.raw = directory / "raw"
        self.spool = directory / "spool"
        self.con = con or open_warehouse(directory / "warehouse.duckdb")
        self.creds, self.secrets = credentials_for(connector, {}, replay=True)
        self.runs = 0

    def run(self, transport: httpx.BaseTransport, *, deadline: float = 30.0) -> Run:
        self.runs += 1
        run_id = f"fault-{self.runs}-{uuid.uuid4().hex[:8]}"  # copies of a baseline share its history
        client = make_client(
            secrets=self.secrets,
            transport=transport,
            retries=2,
            backoff=0.0,
            sleep=lambda _: None,
            spool_dir=self.spool,
            request_deadline=deadline,
        )
        try:
            batch = collect(self.connector, client, self.creds, None, deadline_seconds=deadline * 4)
        finally:
            client.close()
        outcome = land(self.con, self.raw, run_id, batch, guards=Guards())
        return Run(batch, outcome.status, run_id)

    def offers(self) -> dict[tuple[Any, ...], float]:
        rows = self.con.execute(
            "select instance_type, region, zone, pricing_type, price_per_hour from core.offer_prices "
            "where provider = ? and valid_to is null",
            [self.connector.name],
        ).fetchall()
        return {tuple(r[:4]): r[4] for r in rows}

    def rates(self) -> dict[str, float]:
        rows = self.con.execute(
            "select currency, usd_per_unit from core.fx_rates qualify "
            "row_number() over (partition by currency order by rate_date desc) = 1"
        ).fetchall()
        return dict(rows)

    def state(self) -> dict[Any, float]:
        return {**self.offers(), **{("fx", c): r for c, r in self.rates().items()}}

    def quarantined(self, run_id: str) -> list[str]:
        return [
            r
            for (r,) in self.con.execute(
                "select reason from ops.quarantine where run_id = ?", [run_id]
            ).fetchall()
        ]

    def close(self) -> None:
        self.con.close()


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """slug -> folder holding that connector's clean baseline warehouse (built on first use)."""
    return {}


def _harness(
    slug: str, baselines: dict[str, Path], tmp_path: Path, factory: pytest.TempPathFactory
) -> Harness:
    connector = CONNECTORS[slug]
    if slug not in baselines:
        folder = factory.mktemp(f"baseline-{slug}")
        harness = Harness(connector, folder)
        if FX_SOURCE in CONNECTORS and slug != FX_SOURCE:  # prices in EUR need a reference rate
            rates = Harness(CONNECTORS[FX_SOURCE], folder, con=harness.con)
            assert rates.run(ReplayTransport(REPLAY, frozenset())).status == "ok"
        clean = harness.run(ReplayTransport(REPLAY, frozenset(harness.secrets)))
        assert clean.status == "ok", f"{slug}'s replay cassette does not load cleanly: {clean.batch.error}"
        assert clean.batch.offers or clean.batch.fx_rates, f"{slug}'s replay cassette yields nothing"
        harness.close()
        baselines[slug] = folder
    shutil.copytree(baselines[slug], tmp_path / "wh", dirs_exist_ok=True)
    return Harness(connector, tmp_path / "wh")


@pytest.fixture
def harness_for(baselines, tmp_path, tmp_path_factory) -> Iterator[Callable[[str], Harness]]:
    made: list[Harness] = []

    def make(slug: str) -> Harness:
        harness = _harness(slug, baselines, tmp_path, tmp_path_factory)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()


def _faulty(harness: Harness, faults: BodyFaults, fault: str, times: int | None = None) -> FaultTransport:
    inner = ReplayTransport(REPLAY, frozenset(harness.secrets))
    mutate = _mutation(faults, fault) if fault in BODY_FAULTS else None
    return FaultTransport(inner, faults.target, fault, mutate, times)


def _no_spool_left(harness: Harness) -> None:
    left = [p for p in harness.spool.rglob("*") if p.is_file()] if harness.spool.exists() else []
    assert not left, f"spool files left behind: {left}"


# --- the tests -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("slug", SLUGS)
def test_every_connector_has_a_fault_case_that_matches_its_cassette(slug, harness_for):
    faults = fault_case(slug)
    harness = harness_for(slug)
    transport = _faulty(harness, faults, "bad_row")
    harness.run(transport)
    assert transport.hits >= 1, f"{slug}: no request matched the fault case's target {faults.target!r}"


@pytest.mark.parametrize("fault", TRANSPORT_FAULTS)
@pytest.mark.parametrize("slug", SLUGS)
def test_transport_faults_fail_the_provider_and_keep_its_prices(slug, fault, harness_for):
    faults = fault_case(slug)
    harness = harness_for(slug)
    before = harness.state()
    started = time.monotonic()
    deadline = DRIP_DEADLINE_SECONDS if fault == "slow_drip" else 30.0
    run = harness.run(_faulty(harness, faults, fault), deadline=deadline)
    assert run.status == "failed", (slug, fault, run.status, run.batch.error)
    assert harness.state() == before
    if fault == "slow_drip":
        assert "DeadlineExceeded" in (run.batch.error or ""), run.batch.error
        assert time.monotonic() - started < 10 * DRIP_DEADLINE_SECONDS + 5
    _no_spool_left(harness)


@pytest.mark.parametrize("slug", SLUGS)
def test_a_body_dropped_once_is_retried_and_changes_nothing(slug, harness_for):
    harness = harness_for(slug)
    before = harness.state()
    run = harness.run(_faulty(harness, fault_case(slug), "drop_mid_body", times=1))
    assert run.status == "ok", run.batch.error
    assert harness.state() == before
    _no_spool_left(harness)


@pytest.mark.parametrize("fault", ("truncated", "empty", "renamed_key"))
@pytest.mark.parametrize("slug", SLUGS)
def test_a_degraded_body_never_closes_good_offers(slug, fault, harness_for):
    harness = harness_for(slug)
    before = harness.state()
    run = harness.run(_faulty(harness, fault_case(slug), fault))
    after = harness.state()
    assert {k: after.get(k) for k in before} == before, f"{slug} {fault}: a good price changed or closed"
    if run.status == "ok":  # only if nothing was lost (a page whose table sits before the cut)
        assert after == before and not harness.quarantined(run.run_id), (slug, fault)
    else:
        assert run.status in ("failed", "rejected", "degraded"), run.status
    if fault == "renamed_key":
        assert run.status != "ok", f"{slug}: a renamed price key loaded as a success"
    _no_spool_left(harness)


@pytest.mark.parametrize("slug", SLUGS)
def test_one_bad_row_is_quarantined_and_keeps_its_last_good_price(slug, harness_for):
    harness = harness_for(slug)
    before = harness.state()
    run = harness.run(_faulty(harness, fault_case(slug), "bad_row"))
    assert run.status in ("ok", "degraded"), (run.status, run.batch.error)
    assert harness.quarantined(run.run_id), f"{slug}: the bad row was not quarantined"
    assert harness.state() == before


@pytest.mark.parametrize("slug", SLUGS)
def test_a_price_jump_is_held_then_confirmed_by_the_next_run(slug, harness_for):
    harness = harness_for(slug)
    before = harness.state()
    first = harness.run(_faulty(harness, fault_case(slug), "price_jump"))
    if slug == FX_SOURCE:  # a rate 10x off its month's median: no repetition ever confirms it
        for run in (first, harness.run(_faulty(harness, fault_case(slug), "price_jump"))):
            assert harness.quarantined(run.run_id) == ["fx_out_of_band"], harness.quarantined(run.run_id)
            assert harness.state() == before
        return
    if set(harness.quarantined(first.run_id)) == {"thin_market"}:
        # a marketplace segment with fewer hosts than market_min_hosts: one host's word, repeated,
        # is still one host's word, so no number of identical runs confirms the move
        for run in (first, harness.run(_faulty(harness, fault_case(slug), "price_jump"))):
            assert set(harness.quarantined(run.run_id)) == {"thin_market"}, harness.quarantined(run.run_id)
            assert harness.state() == before, "a held thin-market move must leave the old price current"
        return
    assert "price_jump" in harness.quarantined(first.run_id), (slug, harness.quarantined(first.run_id))
    assert harness.state() == before, "a held price jump must leave the old price current"
    second = harness.run(_faulty(harness, fault_case(slug), "price_jump"))
    assert "price_jump" not in harness.quarantined(second.run_id)
    after = harness.state()
    changed = {k for k in before if after.get(k) != before[k]}
    assert changed and all(after[k] > before[k] * 3 or after[k] < before[k] / 3 for k in changed), changed


@pytest.mark.parametrize("slug", SLUGS)
def test_an_unknown_gpu_lands_and_shows_as_unmapped(slug, harness_for):
    harness = harness_for(slug)
    before = harness.offers()
    run = harness.run(_faulty(harness, fault_case(slug), "unknown_gpu"))
    assert run.status in ("ok", "degraded"), (run.status, run.batch.error)
    if not before:  # a reference-rate source: an unknown currency is a new rate, nothing else
        return
    after = harness.offers()
    assert len(after) >= len(before) - 1
    build_marts(harness.con, catalog=CATALOG)
    unmapped = harness.con.execute(
        "select count(*) from marts.unmapped_gpus where provider = ? and ("
        "gpu_name_raw ilike '%zeta%' or array_to_string(example_instance_types, ' ') ilike '%zeta%')",
        [slug],
    ).fetchall()[0][0]
    if slug in retired():  # it landed (above), but a retired provider's offers are never current
        assert unmapped == 0, f"{slug} is retired: its offers must stay out of the marts"
        return
    assert unmapped, f"{slug}: the unknown GPU did not land in marts.unmapped_gpus"


def test_the_suite_covers_every_registered_connector():
    assert sorted(CONNECTORS) == SLUGS and SLUGS
    missing = [s for s in SLUGS if not (REPO / "tests" / "faults" / "cases" / f"{s}.py").exists()]
    assert not missing, f"connectors without a fault case: {missing}"
