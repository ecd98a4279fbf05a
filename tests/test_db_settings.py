"""Where settings come from and what a bad one does; opening the warehouse when it is busy, not a
warehouse, or fails half-way (never left held); migrations' rules; and the data dictionary's command
(`python -m warehouse.feeds_doc [--check]`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from typer.testing import CliRunner

from flows.cli import app
from tests.conftest import REPO
from warehouse import db, dictionary, feeds_doc
from warehouse.db import (
    MigrationError,
    Settings,
    WarehouseBusy,
    WarehouseError,
    check_mode,
    connect,
    migrate,
    migrations,
    open_reader,
    open_warehouse,
    open_warehouse_when_free,
    transaction,
)
from warehouse.settings import setting_names

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No GPUCOST_* from the machine, and a working directory with no .env of its own."""
    for field in setting_names():
        monkeypatch.delenv(f"GPUCOST_{field.upper()}", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert "Traceback" not in result.output
    return lines[0]


# --- settings --------------------------------------------------------------------------------------


def test_settings_come_from_dotenv_and_the_environment_wins(tmp_path: Path, monkeypatch):
    (tmp_path / ".env").write_text(
        "GPUCOST_HOME=from-dotenv\n"
        "GPUCOST_RAW_RETENTION_DAYS=7\n"
        "GPUCOST_PRICE_JUMP_FACTOR=5\n"
        "GOOGLE_API_KEY=not-a-setting\n"  # credentials live in the same .env and are not settings
    )
    monkeypatch.setenv("GPUCOST_RAW_RETENTION_DAYS", "9")
    settings = Settings()
    assert settings.home == Path("from-dotenv")
    assert settings.warehouse_path == Path("from-dotenv/warehouse.duckdb")
    assert settings.replay_home == Path("from-dotenv/replay")
    assert (settings.raw_retention_days, settings.price_jump_factor) == (9, 5.0)
    assert not hasattr(settings, "google_api_key")


def test_defaults_without_environment_or_dotenv():
    settings = Settings()
    assert settings.warehouse_path == Path("data/warehouse.duckdb")
    assert settings.feeds_dir == Path("data/feeds")  # beside the warehouse, not the working folder
    assert settings.raw_retention_days == 30 and settings.price_jump_factor == 3.0
    assert settings.accept_changes is False


@pytest.mark.parametrize("where", ["environment", ".env"])
def test_a_malformed_setting_is_one_line_naming_the_variable(where: str, tmp_path: Path, monkeypatch):
    if where == "environment":
        monkeypatch.setenv("GPUCOST_RAW_RETENTION_DAYS", "thirty")
    else:
        (tmp_path / ".env").write_text("GPUCOST_RAW_RETENTION_DAYS=thirty\n")
    for command in (["gc"], ["status"], ["sql", "select 1"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, result.output
        line = _error_line(result)
        assert "GPUCOST_RAW_RETENTION_DAYS='thirty'" in line and "valid integer" in line
    assert not (tmp_path / "data").exists()  # refused before anything was opened or created


def test_the_user_agent_setting_defaults_to_the_project_and_reads_the_environment(monkeypatch):
    import httpx

    from connectors.http import USER_AGENT, make_client

    assert Settings().user_agent is None  # unset: the client's own default, the project's
    with make_client(transport=httpx.MockTransport(lambda r: httpx.Response(200)), user_agent=None) as client:
        assert client.headers["user-agent"] == USER_AGENT
    monkeypatch.setenv("GPUCOST_USER_AGENT", "  acme-gpu-prices/1 (+https://acme.example/ops)  ")
    assert Settings().user_agent == "acme-gpu-prices/1 (+https://acme.example/ops)"  # stripped


def test_a_blank_user_agent_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv("GPUCOST_USER_AGENT", " ")
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 2, result.output
    assert "GPUCOST_USER_AGENT" in _error_line(result)


# --- opening the warehouse ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["not a database", "a folder"])
def test_a_warehouse_path_that_is_not_a_duckdb_file_is_one_line(kind: str, tmp_path: Path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    path = home / "warehouse.duckdb"
    if kind == "a folder":
        path.mkdir()
    else:
        path.write_text("name,price\nH100,2.5\n")
    with pytest.raises(WarehouseError, match=r"cannot open the warehouse .*warehouse\.duckdb.*GPUCOST_HOME"):
        connect(path, read_only=True)
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    for command in (["sql", "select 1"], ["refresh", "--providers", "oci"], ["gc"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 1, (command, result.output)
        assert "cannot open the warehouse" in _error_line(result)


HOLDER = textwrap.dedent(
    """
    import duckdb, sys
    con = duckdb.connect(sys.argv[1], read_only=True)  # a reader such as `gpucost sql`
    print("holding", flush=True)
    sys.stdin.readline()
    con.close()
    """
)


def test_a_writer_waits_for_a_reader_and_gives_up_naming_it(tmp_path: Path):
    path = tmp_path / "warehouse.duckdb"
    open_warehouse(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(WarehouseBusy, match=rf"in use by another process \(process {holder.pid}\)"):
            open_warehouse_when_free(path, wait_seconds=0)

        waits: list[float] = []

        def sleep(seconds: float) -> None:  # the reader finishes while the writer waits
            waits.append(seconds)
            holder.communicate("done\n", timeout=30)

        con = open_warehouse_when_free(path, wait_seconds=30, sleep=sleep)
        try:
            assert waits == [0.25]
            assert con.execute("select count(*) from core.gpus").fetchall()[0][0] > 0  # migrated, seeded
        finally:
            con.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_waits_double_up_to_five_seconds_and_never_pass_the_deadline(monkeypatch):
    clock = SimpleNamespace(now=0.0)
    waits: list[float] = []

    def busy(path):
        raise WarehouseBusy("held")

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.now += seconds

    monkeypatch.setattr(db, "open_warehouse", busy)
    monkeypatch.setattr(db, "time", SimpleNamespace(monotonic=lambda: clock.now))
    with pytest.raises(WarehouseBusy):
        open_warehouse_when_free("w.duckdb", wait_seconds=20, sleep=sleep)
    # 0.25 s doubling, capped at 5 s; a sixth 5 s wait would end at 22.75 s, past the 20 s deadline
    assert waits == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def _held_in_this_process(path: Path) -> bool:
    """Whether a connection to `path` is still open here: DuckDB then refuses one of another kind."""
    try:
        duckdb.connect(str(path), read_only=True).close()
    except duckdb.ConnectionException:
        return True
    return False


def test_a_migration_that_fails_leaves_the_warehouse_closed(tmp_path: Path):
    path = tmp_path / "warehouse.duckdb"
    con = open_warehouse(path)
    con.execute("update ops.migrations set sha256 = 'edited' where version = 1")
    con.close()
    with pytest.raises(MigrationError, match="edited after it was applied; add a new migration") as failed:
        open_warehouse(path)
    assert not _held_in_this_process(path), failed.value  # the traceback still references the frame


def test_a_reader_that_fails_to_open_leaves_the_warehouse_closed(tmp_path: Path, monkeypatch):
    path = tmp_path / "warehouse.duckdb"
    open_warehouse(path).close()

    def broken(con):
        raise RuntimeError("disk went away")

    monkeypatch.setattr(db, "holds_sample_data", broken)
    with pytest.raises(RuntimeError, match="disk went away") as failed:
        open_reader(Settings(home=tmp_path))
    con = connect(path)  # read-write: refused while the reader's read-only connection were open
    con.close()
    assert failed.value


def test_a_duckdb_file_gpucost_never_ran_on_reads_as_live_data(tmp_path: Path, monkeypatch):
    path = tmp_path / "warehouse.duckdb"
    plain = duckdb.connect(str(path))
    plain.execute("create table notes as select 'hello' as note")
    plain.close()
    con = connect(path, read_only=True)
    try:
        assert db.warehouse_modes(con) == set() and not db.holds_sample_data(con)
        check_mode(con, "live", path)  # neither kind of run refuses it
        check_mode(con, "replay", path)
    finally:
        con.close()
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    result = runner.invoke(app, ["sql", "select note from notes", "--csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["note", "hello"] and "sample data" not in result.stderr


def test_a_transaction_rolls_back_on_any_exception_and_reraises_it():
    con = connect(":memory:")
    con.execute("create table t (n integer)")
    for exc in (ValueError("bad row"), KeyboardInterrupt()):
        with pytest.raises(type(exc)), transaction(con):
            con.execute("insert into t values (1)")
            raise exc
    with transaction(con):
        con.execute("insert into t values (2)")
    assert con.execute("select n from t").fetchall() == [(2,)]


# --- migrations' rules --------------------------------------------------------------------------------


def test_migrations_apply_in_version_order_once(tmp_path: Path):
    (tmp_path / "002_second.sql").write_text("insert into ops.log values ('second')")
    (tmp_path / "001_first.sql").write_text(
        "create table ops.log (step varchar); insert into ops.log values ('first')"
    )
    con = connect(":memory:")
    assert migrate(con, tmp_path) == ["001_first.sql", "002_second.sql"]
    assert migrate(con, tmp_path) == []
    assert con.execute("select step from ops.log").fetchall() == [("first",), ("second",)]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (["001_init.sql", "2_oops.sql"], r"2_oops\.sql: migration files are named NNN_lowercase_name\.sql"),
        (["001_init.sql", "001_Init.sql"], "NNN_lowercase_name"),
        (["001_init.sql", "001_again.sql"], "two migrations share a version number"),
    ],
)
def test_badly_named_or_numbered_migrations_are_refused(files: list[str], message: str, tmp_path: Path):
    for name in files:
        (tmp_path / name).write_text("select 1")
    with pytest.raises(MigrationError, match=message):
        migrations(tmp_path)
    con = connect(":memory:")
    with pytest.raises(MigrationError):
        migrate(con, tmp_path)
    assert con.execute("select count(*) from ops.migrations").fetchall() == [(0,)]  # nothing applied


# --- the data dictionary's command ------------------------------------------------------------------


def test_a_column_defined_twice_is_refused():
    price = dictionary.Column("price_usd_per_hour", "DOUBLE", "USD per hour", "Instance price.")
    with pytest.raises(ValueError, match="'price_usd_per_hour' is defined twice"):
        dictionary._registry([price, price])


def test_the_dictionary_command_writes_the_doc_and_check_says_when_it_is_stale(
    tmp_path: Path, monkeypatch, capsys
):
    doc = tmp_path / "docs" / "feeds.md"
    monkeypatch.setattr(feeds_doc, "DOC_PATH", doc)
    assert feeds_doc.main(["--check"]) == 1  # missing counts as stale
    assert "is stale; run `uv run python -m warehouse.feeds_doc`" in capsys.readouterr().err
    assert feeds_doc.main([]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {doc}"
    assert doc.read_text().startswith("# Feeds: the data dictionary")
    assert feeds_doc.main(["--check"]) == 0 and capsys.readouterr().err == ""
    doc.write_text(doc.read_text().replace("Timestamps are UTC.", "Timestamps are local."))
    assert feeds_doc.main(["--check"]) == 1
    assert f"{doc} is stale" in capsys.readouterr().err


def test_python_m_warehouse_feeds_doc_check_passes_on_the_committed_doc():
    done = subprocess.run(
        [sys.executable, "-m", "warehouse.feeds_doc", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
