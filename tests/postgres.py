"""A throwaway PostgreSQL for tests: Debian's `postgresql` server binaries, in a temp dir, on loopback.

`TempPostgres` runs `initdb` into a temporary folder (password authentication, a generated
password), starts `postgres` on a free 127.0.0.1 port with its unix socket in that folder (never
/var/run/postgresql), creates a database, and stops the server and removes the folder on `stop()`,
whatever state the tests left it in. PostgreSQL refuses to run as root: under root the server runs
as the `postgres` user Debian's package creates, and the folder is handed to it.

`binaries()` finds the server programs (on PATH, else under /usr/lib/postgresql/<major>/bin, where
Debian puts them); None when PostgreSQL is not installed, and the tests using it skip saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SERVER_PROGRAMS = ("initdb", "postgres")


def binaries() -> Path | None:
    """The folder holding initdb and postgres, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found and shutil.which("postgres"):
        return Path(os.path.realpath(found)).parent
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    for folder in debian if Path("/usr/lib/postgresql").is_dir() else []:
        if all((folder / program).is_file() for program in SERVER_PROGRAMS):
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class TempPostgres:
    """One PostgreSQL server in a temporary folder; `start()`, then `url`, then `stop()`."""

    bin_dir: Path
    database: str = "prefect"
    user: str = "gpucost"
    # a password with characters a URL must escape, so that redaction is tested on a real one
    password: str = field(default_factory=lambda: "pw/" + secrets.token_urlsafe(12) + "@:")
    root: Path = field(init=False)
    port: int = field(init=False, default=0)
    process: subprocess.Popen[bytes] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="gpucost-pg-"))

    @property
    def url(self) -> str:
        """A plain `postgresql://` URL, the form a user writes (the password percent-encoded)."""
        from urllib.parse import quote

        password = quote(self.password, safe="")
        return f"postgresql://{self.user}:{password}@127.0.0.1:{self.port}/{self.database}"

    def _as_server_user(self) -> dict[str, Any]:
        if os.geteuid() != 0:
            return {}
        owner = pwd.getpwnam("postgres")
        for path in (self.root, *self.root.rglob("*")):
            os.chown(path, owner.pw_uid, owner.pw_gid)
        return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}

    def start(self, timeout: float = 60.0) -> None:
        data, sockets = self.root / "data", self.root / "sockets"
        sockets.mkdir()
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        log = self.root / "postgres.log"
        log.touch()
        as_owner = self._as_server_user()
        init = subprocess.run(
            [str(self.bin_dir / "initdb"), "-D", str(data), "-U", self.user, "--pwfile", str(pwfile),
             "--auth=scram-sha-256", "-E", "UTF8", "--no-sync", "--no-instructions"],
            capture_output=True, check=False, cwd=self.root, **as_owner,
        )  # fmt: skip
        pwfile.unlink()
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed ({init.returncode}): {init.stderr.decode(errors='replace')}")
        self.port = _free_port()
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(self.bin_dir / "postgres"), "-D", str(data), "-p", str(self.port),
                 "-k", str(sockets), "-c", "listen_addresses=127.0.0.1",
                 # a test database: durability is not needed, speed on 2 shared cores is
                 "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                 "-c", "max_connections=100"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.root,
                start_new_session=True, **as_owner,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                said = log.read_text()[-2000:]
                raise RuntimeError(f"postgres exited with {self.process.returncode}: {said}")
            try:
                self.execute("select 1", database="postgres")
                break
            except (OSError, ConnectionError) as exc:  # not listening yet, or starting up
                last: Exception = exc
            except Exception as exc:  # asyncpg's CannotConnectNowError while it starts
                last = exc
            time.sleep(0.2)
        else:
            raise RuntimeError(f"postgres did not accept connections within {timeout:.0f} s: {last}")
        self.execute(f'create database "{self.database}"', database="postgres")

    def execute(self, sql: str, *args: object, database: str | None = None) -> list[dict[str, Any]]:
        """Run one statement (asyncpg, the driver Prefect itself uses); the rows as dicts."""
        import asyncpg

        async def run() -> list[dict[str, Any]]:
            con = await asyncpg.connect(
                host="127.0.0.1", port=self.port, user=self.user, password=self.password,
                database=database or self.database, timeout=10,
            )  # fmt: skip
            try:
                return [dict(row) for row in await con.fetch(sql, *args)]
            finally:
                await con.close()

        return asyncio.run(run())

    def stop(self) -> None:
        """Stop the server (fast shutdown, then SIGKILL) and remove its folder."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)  # PostgreSQL's "fast" shutdown
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)
