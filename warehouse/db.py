"""The DuckDB warehouse: where it lives, how to open it, migrations and seeds.

One file, `$GPUCOST_HOME/warehouse.duckdb` (GPUCOST_HOME defaults to ./data). DuckDB allows one
writer process and, while it holds the file, no readers in other processes: an open that conflicts
fails at once. `connect` turns that failure into `WarehouseBusy`, which says what to do.

Migrations are `migrations/NNN_name.sql`, applied in order and recorded in `ops.migrations`; applying
them again is a no-op, and a recorded migration whose file has since changed is an error (write a new
migration instead of editing an applied one).

Seeds are `seeds/*.csv`, loaded verbatim into `core.<file stem>` on every refresh, in one transaction.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGE_DIR = Path(__file__).resolve().parent
MIGRATIONS_DIR = PACKAGE_DIR / "migrations"
SEEDS_DIR = PACKAGE_DIR / "seeds"
_MIGRATION_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


class Settings(BaseSettings):
    """Settings from the environment (prefix GPUCOST_) or a .env file. Secrets are not here:
    provider credentials are read by name from the environment by the connector that needs them."""

    model_config = SettingsConfigDict(env_prefix="GPUCOST_", env_file=".env", extra="ignore")

    home: Path = Path("data")
    feeds_dir: Path = Path("feeds")
    http_timeout_seconds: float = 30.0
    http_retries: int = 4
    http_backoff_seconds: float = 0.5  # first retry waits about this long, then doubles
    http_per_host: int = 4

    @property
    def warehouse_path(self) -> Path:
        return self.home / "warehouse.duckdb"

    @property
    def raw_dir(self) -> Path:
        return self.home / "raw"


class WarehouseError(Exception):
    """Base for warehouse errors that carry advice for the user."""


class WarehouseBusy(WarehouseError):
    """Another process holds the warehouse file."""


class WarehouseMissing(WarehouseError):
    """No warehouse file yet."""


class MigrationError(WarehouseError):
    """A migration cannot be applied or has been edited after being applied."""


def connect(path: Path | str, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the warehouse with UTC session time. `path=":memory:"` gives a scratch warehouse."""
    path = str(path)
    if read_only and path != ":memory:" and not Path(path).exists():
        raise WarehouseMissing(
            f"no warehouse at {path}; run `gpucost refresh` "
            "(or `gpucost refresh --replay tests/replay`) first"
        )
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(path, read_only=read_only)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            pid = re.search(r"PID (\d+)", str(exc))
            holder = f" (process {pid.group(1)})" if pid else ""
            raise WarehouseBusy(
                f"the warehouse {path} is in use by another process{holder}, most likely a running "
                "refresh; DuckDB allows no readers while it writes. Try again when it finishes."
            ) from None
        raise
    # TIMESTAMPTZ would otherwise come back in the machine's zone name ('Etc/UTC'), which polars
    # refuses to concatenate with 'UTC'.
    con.execute("set TimeZone = 'UTC'")
    return con


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    con.execute("begin transaction")
    try:
        yield con
    except BaseException:
        con.execute("rollback")
        raise
    con.execute("commit")


def migrations(directory: Path = MIGRATIONS_DIR) -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration file, in order."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path.name}: migration files are named NNN_lowercase_name.sql")
        found.append((int(match.group(1)), path.name, path.read_text()))
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migrations share a version number in {directory}")
    return found


def migrate(con: duckdb.DuckDBPyConnection, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations in order; return the names applied (empty when up to date)."""
    con.execute("create schema if not exists ops")
    con.execute(
        "create table if not exists ops.migrations "
        "(version integer primary key, name varchar not null, sha256 varchar not null, "
        "applied_at timestamptz not null default current_timestamp)"
    )
    applied = {
        v: (n, s) for v, n, s in con.execute("select version, name, sha256 from ops.migrations").fetchall()
    }
    done = []
    for version, name, sql in migrations(directory):
        digest = hashlib.sha256(sql.encode()).hexdigest()
        if version in applied:
            if applied[version][1] != digest:
                raise MigrationError(
                    f"migration {name} was edited after it was applied; add a new migration instead"
                )
            continue
        with transaction(con):
            con.execute(sql)
            con.execute(
                "insert into ops.migrations (version, name, sha256) values (?, ?, ?)", [version, name, digest]
            )
        done.append(name)
    return done


def load_seeds(con: duckdb.DuckDBPyConnection, directory: Path = SEEDS_DIR) -> dict[str, int]:
    """Replace every `core.<stem>` seed table from its CSV, in one transaction; rows per table."""
    counts = {}
    with transaction(con):
        for path in sorted(directory.glob("*.csv")):
            table = f"core.{path.stem}"
            con.execute(
                f"create or replace table {table} as "
                "select * from read_csv(?, header = true, auto_detect = true, sample_size = -1)",
                [str(path)],
            )
            counts[table] = con.execute(f"select count(*) from {table}").fetchall()[0][0]
    return counts


def open_warehouse(path: Path | str) -> duckdb.DuckDBPyConnection:
    """Open read-write, migrate and load seeds: the state every writer starts from."""
    con = connect(path)
    migrate(con)
    load_seeds(con)
    return con
