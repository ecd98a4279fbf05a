"""Shared test fixtures.

- No test touches the network: `_no_external_network` makes any connect() to a non-loopback
  address fail the test.
- `shared_raw` points at ../shared/data/raw (other people's captures, never copied into this repo)
  and skips the test with a clear reason when it is absent.
- `prefect_harness` is the one session-scoped Prefect test server; request it only in flow tests.
  A test that ran flows leaves no events worker behind (`drain_prefect_events`).
- `postgres_prefect` is the one session-scoped Prefect server on a real PostgreSQL (tests/postgres.py:
  initdb in a temp dir, loopback, stopped at teardown), started by `gpucost server start
  --database`'s own code; it skips when PostgreSQL is not installed.
- Prefect's home (its memo store, persisted results, profiles) is a temporary folder for the whole
  session unless the caller chose one (`.ci/run` does): a plain `uv run pytest` never writes into
  `~/.prefect`.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
# set before anything imports prefect, which reads its home once
if "PREFECT_HOME" not in os.environ:
    _PREFECT_HOME = tempfile.mkdtemp(prefix="gpucost-tests-prefect-")
    os.environ["PREFECT_HOME"] = _PREFECT_HOME
    atexit.register(shutil.rmtree, _PREFECT_HOME, ignore_errors=True)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_RAW = SHARED / "data" / "raw"


def _is_loopback(address: object) -> bool:
    if not (isinstance(address, tuple) and address):
        return isinstance(address, str | bytes)  # AF_UNIX paths are local
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _no_external_network(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guarded_connect(self: socket.socket, address: object) -> object:
        if not _is_loopback(address):
            pytest.fail(f"test tried to open a socket to {address!r}; tests must stay offline")
        return real_connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: object) -> int:
        if not _is_loopback(address):
            pytest.fail(f"test tried to open a socket to {address!r}; tests must stay offline")
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)


@pytest.fixture(scope="session")
def shared_raw() -> Path:
    """The real provider captures in ../shared/data/raw; skips when they are not there."""
    if not SHARED_RAW.is_dir():
        pytest.skip(f"real captures not found at {SHARED_RAW} (../shared is absent in this checkout)")
    return SHARED_RAW


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared (reference data such as measured_memory_calibration.csv); skips when absent."""
    if not SHARED.is_dir():
        pytest.skip(f"../shared not found at {SHARED}")
    return SHARED


def drain_prefect_events() -> int:
    """Stop the Prefect events workers this process started; the number stopped.

    A flow run's events go to the server through a worker on Prefect's event-loop thread, which
    keeps a websocket open after the run. Its keepalive pings draw from the global `random` module
    (websockets' `ping`: `random.getrandbits(32)`, every 20 s), so one landing while Hypothesis drew
    a test case read as the strategy itself using `random` (a HypothesisDeprecationWarning from
    tests/test_requirements_properties.py in one CI run). Draining sends what is queued and closes
    the websocket; the next flow run starts a new worker. Prefect's own harness drains the same way
    when it stops.
    """
    import sys

    module = sys.modules.get("prefect.events.worker")
    if module is None or not module.EventsWorker._instances:
        return 0
    stopped = len(module.EventsWorker._instances)
    module.EventsWorker.drain_all(at_exit=False)
    return stopped


@pytest.fixture(autouse=True)
def _prefect_events_drained() -> Iterator[None]:
    yield
    drain_prefect_events()


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One temporary Prefect server for the whole session (starting one costs ~10 s)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with (
        prefect_test_harness(server_startup_timeout=120),
        temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
    ):
        yield


@dataclass(frozen=True)
class PostgresPrefect:
    """A Prefect server on PostgreSQL: its API URL, the database (to query directly), its home."""

    api_url: str
    postgres: Any  # tests.postgres.TempPostgres
    home: Path  # the GPUCOST_HOME whose prefect-server/ holds the server's pid, URL and log


# Server settings for a test that must end in minutes (the defaults suit a team's server): a run
# refused a deployment's concurrency slot retries after 3 s instead of 30, the scheduler looks for
# schedules to fill every 5 s instead of 60
POSTGRES_SERVER_SETTINGS = {
    "PREFECT_SERVER_DEPLOYMENTS_CONCURRENCY_SLOT_WAIT_SECONDS": "3",
    "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5",
}


@pytest.fixture(scope="session")
def postgres_prefect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresPrefect]:
    """One PostgreSQL and one Prefect server on it for the whole session (~20 s to start)."""
    from flows import server
    from tests.postgres import TempPostgres, binaries

    found = binaries()
    if found is None:
        pytest.skip("PostgreSQL is not installed (Debian's `postgresql` package; .ci/run installs it)")
    home = tmp_path_factory.mktemp("postgres-prefect")
    postgres = TempPostgres(found)
    saved = {name: os.environ.get(name) for name in (*POSTGRES_SERVER_SETTINGS, "PREFECT_HOME")}
    try:
        postgres.start()
        # the server's own Prefect home and settings: set for start(), which passes its environment on
        os.environ.update(POSTGRES_SERVER_SETTINGS, PREFECT_HOME=str(home / "server-prefect-home"))
        try:
            _, url = server.start(home, port=server.free_port(0), database=postgres.url)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        yield PostgresPrefect(url, postgres, home)
    finally:
        server.stop(home)
        postgres.stop()
