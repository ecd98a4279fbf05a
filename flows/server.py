"""A local Prefect server that gpucost manages: `gpucost server start|stop|status`.

Runs `prefect server start` in the background on loopback, with its pid, URL and log under
`$GPUCOST_HOME/prefect-server/`. While it runs, `gpucost refresh` is a flow run there (run
tracking, logs, artifacts; the deployments of the README's "Scheduled runs" use the same server);
without it, and without `PREFECT_API_URL`, a refresh runs in-process with no Prefect at all.

The server's database is SQLite in `PREFECT_HOME` unless a PostgreSQL URL is given (`--database`,
or Prefect's own setting `PREFECT_API_DATABASE_CONNECTION_URL`), the database Prefect recommends
once several workers share one server. A plain `postgresql://` URL is given the asyncpg driver
Prefect's server needs. The URL holds a password: it reaches the server only through its
environment, and everything this module writes or says (the `database` file, errors) shows it
with the password as `***` (`redact_url`).

Nothing here imports Prefect: the server is a subprocess, its health a plain HTTP GET.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

HOST = "127.0.0.1"
DEFAULT_PORT = 4200
START_TIMEOUT_SECONDS = 120.0  # a first start migrates a new database: ~20 s on 2 cores
# Prefect's name for the setting and the one it reads first (prefect.settings.models.server.database)
DATABASE_VARIABLES = ("PREFECT_SERVER_DATABASE_CONNECTION_URL", "PREFECT_API_DATABASE_CONNECTION_URL")
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+asyncpg")


@dataclass(frozen=True)
class ServerFiles:
    """Where a managed server keeps its pid, URL and log."""

    root: Path

    @property
    def pid(self) -> Path:
        return self.root / "server.pid"

    @property
    def url(self) -> Path:
        return self.root / "api_url"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def database(self) -> Path:
        """The running server's database URL, password redacted (absent: SQLite)."""
        return self.root / "database"


class DatabaseURLError(ValueError):
    """A database URL the server cannot use; the message shows it redacted and says what to give."""


def redact_url(url: str) -> str:
    """`url` with its password (if any) as `***`; anything unparsable as `***` whole."""
    if "://" not in url:
        return "***" if "@" in url else url  # no URL to take apart: a user:password@ may be in it
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "***"
    if password is None:
        return url
    user = f"{parts.username}:***@" if parts.username else ":***@"
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=user + host))


def database_url(url: str) -> str:
    """The URL Prefect's server is given for `url`: PostgreSQL through asyncpg.

    `postgresql://` and `postgres://` (what psql, libpq and most hosts hand out) become
    `postgresql+asyncpg://`; anything else is refused, since Prefect supports PostgreSQL and the
    default SQLite only, and SQLite needs no URL.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in POSTGRES_SCHEMES:
        raise DatabaseURLError(
            f"the Prefect server's database must be a PostgreSQL URL such as "
            f"postgresql://user:password@host:5432/prefect, not {redact_url(url)!r} "
            "(leave --database out for SQLite in PREFECT_HOME)"
        )
    if importlib.util.find_spec("asyncpg") is None:
        raise DatabaseURLError(
            "PostgreSQL needs the asyncpg driver, which is missing from this environment: "
            "run `uv sync` (it comes with prefect) and start the server again"
        )
    return f"postgresql+asyncpg://{rest}"


def configured_database() -> str | None:
    """The database URL Prefect's own setting names in the environment, if any (first wins)."""
    return next((os.environ[name] for name in DATABASE_VARIABLES if os.environ.get(name)), None)


def running_database(home: Path) -> str | None:
    """The running managed server's database, redacted; None for SQLite (or no server)."""
    try:
        return files(home).database.read_text().strip() or None
    except FileNotFoundError:
        return None


def files(home: Path) -> ServerFiles:
    return ServerFiles(home / "prefect-server")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(home: Path) -> tuple[int, str] | None:
    """(pid, API URL) of the managed server when its process is alive."""
    where = files(home)
    try:
        pid = int(where.pid.read_text().strip())
        url = where.url.read_text().strip()
    except (FileNotFoundError, ValueError):
        return None
    if pid <= 1:
        return None  # garbled: signals to 0, 1 or -n reach our own group, every process, a group
    return (pid, url) if _alive(pid) else None


def healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        return httpx.get(f"{url.rstrip('/')}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def api_url(home: Path) -> str | None:
    """The Prefect API a refresh should use: `PREFECT_API_URL`, else the managed server's."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    found = running(home)
    return found[1] if found else None


def free_port(preferred: int = DEFAULT_PORT) -> int:
    """`preferred` when nothing listens on it, else (or for 0) a port the kernel hands out."""
    if preferred:
        with socket.socket() as probe:
            if probe.connect_ex((HOST, preferred)) != 0:
                return preferred
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def server_command(port: int) -> list[str]:
    return [sys.executable, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(port)]


def start(
    home: Path,
    *,
    port: int | None = None,
    command: Sequence[str] | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
    database: str | None = None,
) -> tuple[int, str]:
    """Start the server in the background (or return the one running); (pid, API URL).

    `database`: a PostgreSQL URL (default: Prefect's setting in the environment, else SQLite).
    Raises `DatabaseURLError` for a URL it cannot use, before anything starts.
    """
    wanted = database or configured_database()
    url_for_prefect = database_url(wanted) if wanted else None
    shown = redact_url(url_for_prefect) if url_for_prefect else None
    found = running(home)
    if found:
        # asked for a database (an option or Prefect's setting): the running server must be on it
        if wanted and shown != running_database(home):
            on = running_database(home) or "SQLite"
            raise RuntimeError(
                f"a Prefect server already runs (pid {found[0]}) on {on}, not on {shown or 'SQLite'}: "
                "run `gpucost server stop` first"
            )
        return found
    if port and free_port(port) != port:
        # whatever answers there would pass the health check below for the server just started
        raise RuntimeError(f"port {port} on {HOST} is already in use; pick another --port, or leave it out")
    where = files(home)
    where.root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    url = f"http://{HOST}:{port}/api"
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    if url_for_prefect:
        # both names: Prefect reads the first it finds, and a stale value of either must not win
        env |= dict.fromkeys(DATABASE_VARIABLES, url_for_prefect)
    with where.log.open("ab") as log:
        process = subprocess.Popen(
            list(command or server_command(port)),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # outlives this command; its own process group for stop()
        )
    where.pid.write_text(f"{process.pid}\n")
    where.url.write_text(url + "\n")
    if shown:
        where.database.write_text(shown + "\n")
    else:
        where.database.unlink(missing_ok=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _forget(where)
            raise RuntimeError(f"the Prefect server exited with {process.returncode}; see {where.log}")
        if healthy(url):
            return process.pid, url
        time.sleep(0.5)
    stop(home)
    raise RuntimeError(f"the Prefect server did not answer within {timeout:.0f} s; see {where.log}")


def stop(home: Path, *, timeout: float = 20.0) -> bool:
    """Stop the managed server; whether one was running."""
    where = files(home)
    found = running(home)
    if not found:
        _forget(where)
        return False
    pid = found[0]
    try:
        leader = os.getpgid(pid) == pid
    except ProcessLookupError:
        leader = False
    if not leader:
        # start() made the server lead its own process group; a pid that leads none is a stale
        # file's, reused by an unrelated process: signal nothing
        _forget(where)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        with contextlib.suppress(ChildProcessError):  # reap it when it is our child (tests)
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)
    _forget(where)
    return True


def _forget(where: ServerFiles) -> None:
    where.pid.unlink(missing_ok=True)
    where.url.unlink(missing_ok=True)
    where.database.unlink(missing_ok=True)
