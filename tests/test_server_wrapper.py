"""`flows.server` beyond tests/test_runners.py: its pid and URL files, stale pids, a port in use,
health, the log, and stopping a server that ignores SIGTERM or has children.

No real Prefect server starts here: `STAND_IN` (written by us) answers `/api/health` the way
`prefect server start` does, and can be told to ignore SIGTERM, start a child, or never answer.
Every process a test starts is stopped by it, or by the `started` fixture, by its own pid and
group. Never write a pid of 0 or 1 where `stop` could read it: `killpg(1)` is `kill(-1)`, a
signal to every process the user may signal.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows import server

STAND_IN = textwrap.dedent(
    """
    import http.server, os, signal, subprocess, sys, time
    port, flags = int(sys.argv[1]), sys.argv[2:]
    env = [os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED"), os.environ.get("DO_NOT_TRACK")]
    print("stand-in on", port, "env", *env, flush=True)
    if "--ignore-term" in flags:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--child" in flags:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(flags[flags.index("--child") + 1], "w") as out:
            out.write(str(child.pid))
    if "--silent" in flags:
        time.sleep(120)
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/api/health" else 404)
            self.end_headers()
            self.wfile.write(b"true")
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return tmp_path / "home"


STARTED: list[int] = []  # pids `_start` started, for the `started` fixture to end


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[Path]:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    yield script
    # a test that failed half-way leaves no server behind: each group start() made, by its pid
    while STARTED:
        pid = STARTED.pop()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
        _gone(pid)


def _start(home: Path, script: Path, *flags: str, timeout: float = 30) -> tuple[int, str]:
    port = server.free_port(0)
    command = [sys.executable, str(script), str(port), *flags]
    pid, url = server.start(home, port=port, command=command, timeout=timeout)
    STARTED.append(pid)
    return pid, url


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether `pid` has exited (a zombie counts as exited), reaping it when it is our child."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _write_files(
    home: Path, pid: object, url: str | None = "http://127.0.0.1:4200/api"
) -> server.ServerFiles:
    where = server.files(home)
    where.root.mkdir(parents=True, exist_ok=True)
    where.pid.write_text(f"{pid}\n")
    if url is not None:
        where.url.write_text(f"  {url}\n")
    return where


# --- files and running() --------------------------------------------------------------------------


def test_the_files_live_under_gpucost_home(tmp_path: Path) -> None:
    where = server.files(tmp_path)
    assert (where.pid, where.url, where.log) == (
        tmp_path / "prefect-server" / "server.pid",
        tmp_path / "prefect-server" / "api_url",
        tmp_path / "prefect-server" / "server.log",
    )


def test_running_reads_a_live_pid_and_the_stripped_url(home: Path) -> None:
    _write_files(home, os.getpid())  # a live process stands in for the server
    assert server.running(home) == (os.getpid(), "http://127.0.0.1:4200/api")


@pytest.mark.parametrize(
    ("pid", "url"),
    [
        ("not-a-pid", "http://127.0.0.1:4200/api"),  # a garbled file
        ("", "http://127.0.0.1:4200/api"),
        (os.getpid(), None),  # a start that died between writing the two files
    ],
)
def test_unreadable_files_mean_no_server(home: Path, pid: object, url: str | None) -> None:
    _write_files(home, pid, url)
    assert server.running(home) is None


def test_no_files_mean_no_server(home: Path) -> None:
    assert server.running(home) is None and server.api_url(home) is None


def test_a_stale_pid_means_no_server(home: Path) -> None:
    _write_files(home, _dead_pid())
    assert server.running(home) is None
    assert server.api_url(home) is None  # a refresh then runs in-process


def test_a_process_we_may_not_signal_is_alive(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # another user's process (EPERM) exists: it is not taken for a stale pid
    def kill(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(server.os, "kill", kill)
    pid = _dead_pid()  # nothing would be hurt if it were signalled
    _write_files(home, pid)
    assert server.running(home) == (pid, "http://127.0.0.1:4200/api")


@pytest.mark.parametrize("pid", [0, 1, -1, -4200])
def test_a_pid_that_names_a_group_or_every_process_is_garbled(home: Path, pid: int) -> None:
    # os.kill(0 | 1 | -n, 0) succeeds: without this, stop() would signal our own process group
    # (0) or every process (1, as killpg(1) is kill(-1)). Only running() is called here.
    _write_files(home, pid)
    assert server.running(home) is None and server.api_url(home) is None


def test_an_empty_prefect_api_url_is_unset(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_files(home, os.getpid())
    monkeypatch.setenv("PREFECT_API_URL", "")
    assert server.api_url(home) == "http://127.0.0.1:4200/api"


# --- ports and command ------------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    """A port something listens on (and answers nothing)."""
    with socket.socket() as sock:
        sock.bind((server.HOST, 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_free_preferred_port_is_used() -> None:
    port = server.free_port(0)
    assert server.free_port(port) == port


def test_a_port_in_use_gives_way_to_a_free_one(listener: int) -> None:
    other = server.free_port(listener)
    assert other != listener
    with socket.socket() as probe:
        probe.bind((server.HOST, other))  # it really is free


def test_the_server_command_is_prefect_on_loopback() -> None:
    assert server.server_command(4321) == [
        sys.executable,
        "-m",
        "prefect",
        "server",
        "start",
        "--host",
        "127.0.0.1",
        "--port",
        "4321",
    ]


# --- health -----------------------------------------------------------------------------------------


@pytest.fixture
def health_server() -> Iterator[str]:
    """A loopback HTTP server: /ok/health answers 200, /down/health 503, /slow/health after 1 s."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/slow"):
                time.sleep(1.0)
            self.send_response(200 if self.path == "/ok/health" else 503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer((server.HOST, 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{server.HOST}:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_health_is_a_200_on_the_api_health_route(health_server: str) -> None:
    assert server.healthy(f"{health_server}/ok")
    assert server.healthy(f"{health_server}/ok/")  # a trailing slash in the URL file
    assert not server.healthy(f"{health_server}/down")


def test_a_server_slower_than_the_timeout_is_not_healthy(health_server: str) -> None:
    assert not server.healthy(f"{health_server}/slow", timeout=0.2)


def test_nothing_listening_is_not_healthy() -> None:
    assert not server.healthy(f"http://127.0.0.1:{server.free_port(0)}/api", timeout=1)


# --- start ------------------------------------------------------------------------------------------


def test_start_writes_pid_and_url_files_and_logs_without_analytics(home: Path, stand_in: Path) -> None:
    pid, url = _start(home, stand_in)
    where = server.files(home)
    assert where.pid.read_text() == f"{pid}\n"
    assert where.url.read_text() == f"{url}\n"
    assert server.healthy(url)
    log = where.log.read_text()
    assert f"stand-in on {url.split(':')[-1].removesuffix('/api')} env false 1" in log


def test_start_without_a_port_takes_the_one_free_port_offers(
    home: Path, stand_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = server.free_port(0)
    monkeypatch.setattr(server, "free_port", lambda preferred=server.DEFAULT_PORT: port)
    pid, url = server.start(home, command=[sys.executable, str(stand_in), str(port)], timeout=30)
    STARTED.append(pid)
    assert url == f"http://127.0.0.1:{port}/api" and server.healthy(url)


def test_start_over_a_stale_pid_file_starts_a_new_server(home: Path, stand_in: Path) -> None:
    _write_files(home, _dead_pid(), "http://127.0.0.1:1/api")
    pid, url = _start(home, stand_in)
    assert server.running(home) == (pid, url) and url != "http://127.0.0.1:1/api"


def test_the_log_keeps_every_start(home: Path, stand_in: Path) -> None:
    _start(home, stand_in)
    assert server.stop(home)
    _start(home, stand_in)
    assert server.files(home).log.read_text().count("stand-in on") == 2


def test_a_server_that_dies_leaves_its_reason_in_the_log_and_no_pid_file(home: Path) -> None:
    command = [
        sys.executable,
        "-c",
        "import sys; print('boom: address in use', file=sys.stderr); sys.exit(2)",
    ]
    with pytest.raises(RuntimeError, match=r"exited with 2; see .*server\.log$"):
        server.start(home, port=server.free_port(0), command=command)
    where = server.files(home)
    assert "boom: address in use" in where.log.read_text()
    assert not where.pid.exists() and not where.url.exists()


def test_a_server_that_never_answers_is_stopped_and_named(home: Path, stand_in: Path) -> None:
    with pytest.raises(RuntimeError, match=r"did not answer within 1 s; see .*server\.log$"):
        _start(home, stand_in, "--silent", timeout=1)
    assert server.running(home) is None and not server.files(home).pid.exists()


def test_an_explicit_port_in_use_is_refused_before_anything_starts(
    home: Path, stand_in: Path, tmp_path: Path
) -> None:
    # another server answering /api/health there would otherwise pass for the one just started
    class Healthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    other = http.server.ThreadingHTTPServer((server.HOST, 0), Healthy)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = int(other.server_address[1])
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    try:
        with pytest.raises(RuntimeError, match=rf"port {port} on 127\.0\.0\.1 is already in use; .*--port"):
            server.start(home, port=port, command=command, timeout=5)
    finally:
        other.shutdown()
        other.server_close()
    assert not marker.exists() and server.running(home) is None


# --- stop -------------------------------------------------------------------------------------------


def test_stop_kills_a_server_that_ignores_sigterm(home: Path, stand_in: Path) -> None:
    pid, _ = _start(home, stand_in, "--ignore-term")
    started = time.monotonic()
    assert server.stop(home, timeout=1)
    assert _gone(pid) and time.monotonic() - started < 10
    assert not server.files(home).pid.exists()


def test_stop_ends_the_servers_children_too(home: Path, stand_in: Path, tmp_path: Path) -> None:
    # `prefect server start` runs its API in child processes: the whole process group goes
    child_file = tmp_path / "child.pid"
    pid, _ = _start(home, stand_in, "--child", str(child_file))
    child = int(child_file.read_text())
    assert not _gone(child, within=0.1)
    assert server.stop(home)
    assert _gone(pid) and _gone(child)


def test_stop_with_a_stale_pid_file_cleans_up_and_says_none_ran(home: Path) -> None:
    where = _write_files(home, _dead_pid())
    assert server.stop(home) is False
    assert not where.pid.exists() and not where.url.exists()


def test_stop_never_signals_a_process_that_reused_a_stale_pid(home: Path) -> None:
    # start() makes the server a process-group leader; a pid that leads no group is someone else's
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        where = _write_files(home, bystander.pid)
        assert server.stop(home, timeout=0.5) is False
        assert bystander.poll() is None  # untouched
        assert not where.pid.exists() and not where.url.exists()
    finally:
        bystander.kill()
        bystander.wait()


# --- the database: PostgreSQL URLs, redacted ---------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+asyncpg://team:s3cret@db:5432/prefect", "postgresql+asyncpg://team:***@db:5432/prefect"),
        ("postgresql://team:p%40ss%2Fw@db/prefect", "postgresql://team:***@db/prefect"),  # escaped @ and /
        ("postgresql://:s3cret@db/prefect", "postgresql://:***@db/prefect"),  # a password, no user
        ("postgresql://team@db/prefect", "postgresql://team@db/prefect"),  # nothing to hide
        ("postgresql://team:s3cret@[::1/prefect", "***"),  # unparsable: nothing of it is shown
        ("team:s3cret@db/prefect", "***"),  # no scheme: a password may still be in it
        ("prefect.db", "prefect.db"),
    ],
)
def test_redact_url_hides_the_password_only(url: str, shown: str) -> None:
    assert server.redact_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://team:s3cret@db:5432/prefect",
        "postgres://team:s3cret@db:5432/prefect",  # the form Heroku and others hand out
        "postgresql+asyncpg://team:s3cret@db:5432/prefect",
        "POSTGRESQL://team:s3cret@db:5432/prefect",
    ],
)
def test_a_postgres_url_gets_the_asyncpg_driver_prefect_needs(url: str) -> None:
    assert server.database_url(url) == "postgresql+asyncpg://team:s3cret@db:5432/prefect"


def test_a_unix_socket_url_keeps_its_query() -> None:
    url = "postgresql:///prefect?host=/var/run/postgresql"
    assert server.database_url(url) == "postgresql+asyncpg:///prefect?host=/var/run/postgresql"


@pytest.mark.parametrize(
    "url", ["mysql://team:s3cret@db/prefect", "sqlite:///tmp/prefect.db", "team:s3cret@db/prefect"]
)
def test_a_url_prefect_cannot_use_is_refused_redacted(url: str) -> None:
    with pytest.raises(server.DatabaseURLError, match="must be a PostgreSQL URL") as raised:
        server.database_url(url)
    assert "s3cret" not in str(raised.value)


def test_a_missing_asyncpg_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(server.DatabaseURLError, match=r"asyncpg driver.*uv sync"):
        server.database_url("postgresql://team:s3cret@db/prefect")


SHOW_ENV = textwrap.dedent(
    """
    import os, sys
    names = ["PREFECT_SERVER_DATABASE_CONNECTION_URL", "PREFECT_API_DATABASE_CONNECTION_URL"]
    with open(sys.argv[2], "w") as out:
        out.write("\\n".join(os.environ.get(name, "-") for name in names))
    sys.argv = [sys.argv[3], sys.argv[1]]
    exec(open(sys.argv[0]).read(), {"__name__": "__main__"})
    """
)


def _start_showing_env(home: Path, stand_in: Path, tmp_path: Path, **options: str) -> tuple[list[str], str]:
    """Start the stand-in through a wrapper that writes the database variables it was given."""
    wrapper, seen = tmp_path / "show_env.py", tmp_path / "env.txt"
    wrapper.write_text(SHOW_ENV)
    port = server.free_port(0)
    pid, url = server.start(
        home, port=port, command=[sys.executable, str(wrapper), str(port), str(seen), str(stand_in)],
        timeout=30, **options,
    )  # fmt: skip
    STARTED.append(pid)
    return seen.read_text().splitlines(), url


def test_the_database_reaches_the_server_by_its_environment_only(
    home: Path, stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql://old:stale@elsewhere/db")
    seen, _ = _start_showing_env(
        home, stand_in, tmp_path, database="postgresql://team:s3cret@db:5432/prefect"
    )
    # both of Prefect's names, so a stale value of either cannot win
    assert seen == ["postgresql+asyncpg://team:s3cret@db:5432/prefect"] * 2
    where = server.files(home)
    assert where.database.read_text() == "postgresql+asyncpg://team:***@db:5432/prefect\n"
    assert server.running_database(home) == "postgresql+asyncpg://team:***@db:5432/prefect"
    for written in where.root.iterdir():  # the pid, URL, database and log files
        assert "s3cret" not in written.read_text(), written
    assert server.stop(home)
    assert not where.database.exists() and server.running_database(home) is None


def test_prefects_own_setting_is_the_default_database(
    home: Path, stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgres://team:s3cret@db/prefect")
    seen, _ = _start_showing_env(home, stand_in, tmp_path)
    assert seen == ["postgresql+asyncpg://team:s3cret@db/prefect"] * 2
    assert server.running_database(home) == "postgresql+asyncpg://team:***@db/prefect"


def test_without_a_database_the_server_keeps_sqlite(home: Path, stand_in: Path, tmp_path: Path) -> None:
    seen, _ = _start_showing_env(home, stand_in, tmp_path)
    assert seen == ["-", "-"] and server.running_database(home) is None


def test_a_running_server_on_another_database_is_not_taken_for_the_one_asked(
    home: Path, stand_in: Path, tmp_path: Path
) -> None:
    pid, url = _start(home, stand_in)  # on SQLite
    with pytest.raises(
        RuntimeError, match=r"already runs .* on SQLite, not on postgresql\+asyncpg://team:\*\*\*@db"
    ):
        server.start(home, database="postgresql://team:s3cret@db/prefect")
    assert server.start(home) == (pid, url)  # asking for nothing in particular finds it
