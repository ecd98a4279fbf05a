"""The DuckDB warehouse: where it lives, how to open it, migrations and seeds.

One file, `$GPUCOST_HOME/warehouse.duckdb` (GPUCOST_HOME defaults to ./data); feeds and the page
under `$GPUCOST_HOME/feeds` unless GPUCOST_FEEDS_DIR says otherwise; a replay's own warehouse and
feeds under `Settings.replay_home` (warehouse/settings.py). DuckDB allows one
writer process and, while it holds the file, no readers in other processes: an open that conflicts
fails at once. `connect` turns that failure into `WarehouseBusy`, which says what to do.

Migrations are `migrations/NNN_name.sql`, applied in order and recorded in `ops.migrations`; applying
them again is a no-op, and a recorded migration whose file has since changed is an error (write a new
migration instead of editing an applied one).

Seeds are `seeds/*.csv`, loaded verbatim into `core.<file stem>` on every refresh, in one transaction.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from warehouse.errors import WarehouseError

# the settings live apart, without DuckDB, so that the CLI checks them cheaply; named here too
from warehouse.settings import REPLAY_MARKER, Settings

if TYPE_CHECKING:  # polars is imported when a frame is asked for: `gpucost sql` and `prices` never load it
    import polars as pl

PACKAGE_DIR = Path(__file__).resolve().parent
MIGRATIONS_DIR = PACKAGE_DIR / "migrations"
SEEDS_DIR = PACKAGE_DIR / "seeds"
_MIGRATION_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


def mark_replay_home(folder: Path) -> None:
    """Mark `folder` as a replay's home, so `Settings.replay_home` finds it from inside too."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / REPLAY_MARKER
    if not marker.is_file():
        marker.write_text("written by `gpucost refresh --replay`: this folder holds recorded sample data\n")


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
        # not a DuckDB file, a folder, unreadable: one line for the user, not a traceback
        raise WarehouseError(
            f"cannot open the warehouse {path} ({exc}); move it aside, or point GPUCOST_HOME at "
            "another folder"
        ) from None
    # TIMESTAMPTZ would otherwise come back in the machine's zone name ('Etc/UTC'), which polars
    # refuses to concatenate with 'UTC'. Set for the whole DuckDB instance: connections to one file
    # in one process share it (two `gpucost serve` requests at once), and one that `open_reader`
    # sandboxed has its configuration locked, the zone included, so the next connection finds it set.
    if not _locked(con):
        con.execute("set global TimeZone = 'UTC'")
    return con


# `query_frame` asks for Arrow from a DB-API result on purpose: the one copy it makes costs far
# less than the second bind of `con.sql(...)` it saves (query_frame's docstring)
warnings.filterwarnings(
    "ignore", message="Arrow output on a DB-API result makes an extra copy of the rows", category=UserWarning
)


def query_frame(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None
) -> pl.DataFrame:
    """The rows of one query as a polars frame, the query bound once.

    `con.sql(sql).pl()` binds a query twice in DuckDB 2's Python client: once to describe the
    relation `sql` returns, again when `pl` runs it. For a small query that is nothing; for the
    bill's (`warehouse.finetune_marts._COSTS_SQL`, a dozen stages over ~100 columns) binding is
    most of its time, so each question paid for it twice. This runs it once and reads the result
    as Arrow (one copy of the rows, milliseconds at 10k rows). The same rows and types.
    """
    import polars as pl

    if params is None:
        con.execute(sql)
    else:
        con.execute(sql, list(params))
    return pl.from_arrow(con.to_arrow_table(), rechunk=False)  # type: ignore[return-value]


def _locked(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute("select current_setting('lock_configuration')").fetchall()[0][0])


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
    try:
        migrate(con)
        load_seeds(con)
    except BaseException:
        con.close()
        raise
    return con


def open_warehouse_when_free(
    path: Path | str, *, wait_seconds: float = 120.0, sleep: Callable[[float], None] = time.sleep
) -> duckdb.DuckDBPyConnection:
    """`open_warehouse`, waiting while readers (`gpucost sql`, `estimate`) hold the file briefly."""
    deadline = time.monotonic() + wait_seconds
    delay = 0.25
    while True:
        try:
            return open_warehouse(path)
        except WarehouseBusy:
            if time.monotonic() + delay > deadline:
                raise
            sleep(delay)
            delay = min(delay * 2, 5.0)


SAMPLE_MODES = frozenset({"replay"})


def warehouse_modes(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The modes (live, record, replay) of the runs this warehouse holds data from."""
    try:
        return {m for (m,) in con.execute("select distinct mode from ops.runs").fetchall()}
    except duckdb.CatalogException:
        return set()


def holds_sample_data(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse was filled from a replay cassette (recorded sample data)."""
    return bool(warehouse_modes(con) & SAMPLE_MODES)


def check_mode(con: duckdb.DuckDBPyConnection, mode: str, path: Path | str) -> None:
    """Refuse to mix recorded sample data and live prices in one warehouse.

    Otherwise sample prices would become the "last good prices" a failed live run keeps current.
    """
    modes = warehouse_modes(con)
    if mode in SAMPLE_MODES and modes - SAMPLE_MODES:
        raise WarehouseError(
            f"{path} holds live prices; --replay writes to its own warehouse under "
            "$GPUCOST_HOME/replay/ (do not point GPUCOST_HOME at a live warehouse for a replay)"
        )
    if mode not in SAMPLE_MODES and modes & SAMPLE_MODES:
        raise WarehouseError(
            f"{path} holds recorded sample data from --replay; a live refresh must not mix with it. "
            f"Point GPUCOST_HOME at another folder, or delete {Path(path).parent} to start over"
        )


SAMPLE_BANNER = "sample data: these prices come from a replay cassette (recorded sample data), not live APIs"


NO_LIVE_REFRESH = (
    "no successful live refresh yet: run `gpucost refresh`, or offline "
    "`gpucost refresh --replay tests/replay`, which the read commands then use"
)


def holds_prices(path: Path) -> bool:
    """Whether the warehouse at `path` holds any offer price: a refresh loaded at least one provider.

    A refresh in which every provider failed (offline, say) leaves a warehouse with runs and seeds
    and no prices: not "a live warehouse" for the read commands. A warehouse another process holds
    counts as holding prices, so that the reader meets its busy error instead of other data.
    """
    if not path.exists():
        return False
    try:
        con = connect(path, read_only=True)
    except WarehouseError:
        return True
    try:
        return _has_prices(con)
    finally:
        con.close()


def reader_path(settings: Settings | None = None) -> Path:
    """The warehouse read commands use: the live one once a refresh loaded prices into it, else
    the replay one when it exists, else the live one (empty or missing: `open_reader` says why)."""
    settings = settings or Settings()
    if settings.pull_url:
        return settings.home / "pulled" / "warehouse.duckdb"  # warehouse.pull.reader_warehouse
    live = settings.warehouse_path
    replay = settings.replay_home / live.name
    if replay != live and replay.exists() and not holds_prices(live):
        return replay
    return live


def open_reader(
    settings: Settings | None = None, *, sandbox: bool = True
) -> tuple[duckdb.DuckDBPyConnection, str | None]:
    """A read-only connection, and a banner to print (stderr) when it holds sample data
    (`SAMPLE_BANNER`) or no prices at all (`NO_LIVE_REFRESH`: why every answer will be empty).

    Sandboxed by default (`export` opts out to write its files): no file system or network access
    (`COPY ... TO`, `ATTACH`, `INSTALL`/`LOAD`, `EXPORT DATABASE`, `read_csv('/etc/...')` all fail)
    and the settings are locked, so SQL a user types can read the warehouse and nothing else.
    """
    settings = settings or Settings()
    path = reader_path(settings)
    if settings.pull_url and not path.exists():
        raise WarehouseMissing(
            f"nothing pulled yet from GPUCOST_PULL_URL={settings.pull_url}; run `gpucost pull`"
        )
    with _OPENING:  # connect and sandbox as one step: another thread may share the instance
        con = _sandboxed(connect(path, read_only=True), sandbox=sandbox)
    try:
        banner = reader_banner(data_banner(con), settings)
    except BaseException:
        con.close()
        raise
    return con, banner


def data_banner(con: duckdb.DuckDBPyConnection) -> str | None:
    """What the warehouse `con` holds, as the read commands say it: sample data
    (`SAMPLE_BANNER`), no prices at all (`NO_LIVE_REFRESH`), or None for live prices. It is a
    fact of the file, so a reader that keeps a copy of the file keeps it (`gpucost serve`)."""
    return SAMPLE_BANNER if holds_sample_data(con) else None if _has_prices(con) else NO_LIVE_REFRESH


def reader_banner(data: str | None, settings: Settings | None = None) -> str | None:
    """The banner of a warehouse whose `data_banner` is `data`: that, or for live prices read
    from a pulled publication how old the publication is now (it ages while a reader runs)."""
    settings = settings or Settings()
    if settings.pull_url and data is None:
        return publication_line(settings.home)
    return data


def snapshot(con: duckdb.DuckDBPyConnection, relations: Sequence[str]) -> duckdb.DuckDBPyConnection:
    """A new in-memory database holding a copy of each of `relations` ("schema.name") of the
    warehouse `con` reads, under the same names, with the same column types.

    For a long-lived reader (`gpucost serve`): it answers from the copy, so no question holds the
    file's lock (a refresh in another process can always write) or pays for opening the file,
    and reads the file again only when it changes. Relations that do not exist are left out.
    """
    copy = connect(":memory:")
    try:
        for relation in relations:
            schema, name = relation.split(".")
            if not relation_exists(con, relation):
                continue
            columns = con.execute(
                "select column_name, data_type from information_schema.columns "
                "where table_schema = ? and table_name = ? order by ordinal_position",
                [schema, name],
            ).fetchall()
            rows = con.sql(f"select * from {schema}.{name}").to_arrow_table()
            copy.execute(f"create schema if not exists {schema}")
            # declared, not inferred from Arrow: a JSON column would come back as VARCHAR
            declared = ", ".join(f'"{column}" {data_type}' for column, data_type in columns)
            copy.execute(f"create table {schema}.{name} ({declared})")
            copy.register("snapshot_rows", rows)
            try:
                copy.execute(f"insert into {schema}.{name} select * from snapshot_rows")
            finally:
                copy.unregister("snapshot_rows")
    except BaseException:
        copy.close()
        raise
    return copy


def relation_exists(con: duckdb.DuckDBPyConnection, relation: str) -> bool:
    """Whether `relation` ("schema.name") is a table or view of the database `con` reads."""
    schema, name = relation.split(".")
    found = con.execute(
        "select count(*) from information_schema.tables where table_schema = ? and table_name = ?",
        [schema, name],
    ).fetchall()
    return bool(found[0][0])


# held while a reader connects and is sandboxed (two threads of `gpucost serve` share an instance)
_OPENING = threading.Lock()


def _sandboxed(con: duckdb.DuckDBPyConnection, *, sandbox: bool) -> duckdb.DuckDBPyConnection:
    """`con` with the sandbox settings of `open_reader` (none unless `sandbox`)."""
    try:
        # locked: another reader of this process sandboxed the instance this connection shares
        if sandbox and not _locked(con):
            for setting in (
                "enable_external_access = false",
                "autoinstall_known_extensions = false",
                "autoload_known_extensions = false",
                "allow_community_extensions = false",
                "lock_configuration = true",
            ):
                con.execute(f"set {setting}")
    except BaseException:
        con.close()
        raise
    return con


def _has_prices(con: duckdb.DuckDBPyConnection) -> bool:
    try:
        return bool(con.execute("select exists (select 1 from core.offer_prices)").fetchall()[0][0])
    except duckdb.CatalogException:
        return False


def publication_line(home: Path, now: datetime | None = None) -> str | None:
    """'pulled publication ... generated ... (N h old)' for the read commands; None without a pull."""
    path = home / "pulled" / "manifest.json"  # warehouse.pull keeps the last one pulled there
    if not path.exists():
        return None
    held = json.loads(path.read_text())
    generated = datetime.fromisoformat(held["generated_at"].replace("Z", "+00:00"))
    from warehouse.freshness import format_age

    age = format_age(((now or datetime.now(UTC)) - generated).total_seconds() / 3600)
    return f"answers from the pulled publication generated {held['generated_at']} ({age} old)"
