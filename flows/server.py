"""A local Prefect server that gpucost manages: `gpucost server start|stop|status`.

Runs `prefect server start` in the background on loopback, with its pid, URL and log under
`$GPUCOST_HOME/prefect-server/`. While it runs, `gpucost refresh` is a flow run there (run
tracking, logs, artifacts; the deployments of the README's "Scheduled runs" use the same server);
without it, and without `PREFECT_API_URL`, a refresh runs in-process with no Prefect at all.

Nothing here imports Prefect: the server is a subprocess, its health a plain HTTP GET.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

HOST = "127.0.0.1"
DEFAULT_PORT = 4200
START_TIMEOUT_SECONDS = 120.0  # a first start migrates a new database: ~20 s on 2 cores


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
) -> tuple[int, str]:
    """Start the server in the background (or return the one running); (pid, API URL)."""
    found = running(home)
    if found:
        return found
    if port and free_port(port) != port:
        # whatever answers there would pass the health check below for the server just started
        raise RuntimeError(f"port {port} on {HOST} is already in use; pick another --port, or leave it out")
    where = files(home)
    where.root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    url = f"http://{HOST}:{port}/api"
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
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
