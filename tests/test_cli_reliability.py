"""Bad input gets one clear line and a non-zero exit before any Prefect server starts; `sql` is
read-only in every sense; `deploy` checks its environment; the deployments queue, never overlap."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from flows.cli import app
from tests.conftest import REPO
from warehouse.db import open_warehouse

runner = CliRunner()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("GPUCOST_FEEDS_DIR", str(tmp_path / "feeds"))
    return tmp_path / "data"


def _warehouse(home: Path, mode: str = "live") -> Path:
    """A warehouse with one run of `mode` and one price (one without prices is "no live refresh yet")."""
    from datetime import UTC, datetime

    from tests.factories import make_offer
    from warehouse.load import load_offers

    path = home / "warehouse.duckdb"
    con = open_warehouse(path)
    load_offers(con, "r1", "aws", [make_offer("p5.48xlarge", 55.04)], now=datetime.now(UTC))
    con.execute(
        "insert into ops.runs (run_id, started_at, status, mode, providers) "
        "values ('r1', now(), 'ok', ?, ['aws'])",
        [mode],
    )
    con.close()
    return path


def _one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["--replay", "no/such/folder"],
        ["--providers", "aws,nope", "--replay", "tests/replay"],
        ["--replay", "tests/replay", "--record", "out"],
    ],
)
def test_refresh_refuses_bad_input_in_one_line(home, args):
    result = runner.invoke(app, ["refresh", *args])
    assert result.exit_code in (1, 2)
    _one_error_line(result)


def test_an_empty_replay_folder_is_refused(home, tmp_path):
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["refresh", "--replay", str(tmp_path / "empty")])
    line = _one_error_line(result)
    assert result.exit_code == 2 and "holds no recorded exchanges" in line and "a cassette is" in line


def test_an_unwritable_feeds_folder_is_refused(home, tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("GPUCOST_FEEDS_DIR", str(tmp_path / "a-file" / "feeds"))
    result = runner.invoke(app, ["refresh", "--providers", "aws"])
    assert result.exit_code == 1 and "feeds folder" in _one_error_line(result)
    result = runner.invoke(app, ["export", "--out", str(tmp_path / "a-file" / "out")])
    assert result.exit_code == 1 and "--out folder" in _one_error_line(result)


def test_a_warehouse_held_by_another_writer_is_refused(home):
    path = _warehouse(home)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import duckdb, sys, time
                con = duckdb.connect({str(path)!r})
                print("ready", flush=True)
                sys.stdin.read()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        result = runner.invoke(app, ["refresh", "--providers", "aws"])
        assert result.exit_code == 1 and "in use by another process" in _one_error_line(result)
    finally:
        holder.communicate("", timeout=30)


def test_replay_and_live_data_never_share_a_warehouse(home, tmp_path):
    _warehouse(home, mode="replay")
    result = runner.invoke(app, ["refresh", "--providers", "aws"])
    assert result.exit_code == 1 and "holds recorded sample data" in _one_error_line(result)
    live_home = tmp_path / "live"
    _warehouse(live_home / "replay", mode="live")
    from warehouse.db import WarehouseError, check_mode, connect

    con = connect(live_home / "replay" / "warehouse.duckdb", read_only=True)
    try:
        with pytest.raises(WarehouseError, match="holds live prices"):
            check_mode(con, "replay", live_home / "replay" / "warehouse.duckdb")
    finally:
        con.close()


@pytest.mark.parametrize(
    "query",
    [
        "copy (select 1) to '/tmp/gpucost-leak.csv'",
        "attach '/tmp/gpucost-other.duckdb' as other",
        "install httpfs",
        "load httpfs",
        "export database '/tmp/gpucost-export'",
        "select * from read_csv('/etc/passwd')",
        "create table core.x as select 1",
        "set enable_external_access = true",
    ],
)
def test_sql_refuses_anything_that_writes_or_reaches_outside(home, query):
    _warehouse(home)
    result = runner.invoke(app, ["sql", query])
    assert result.exit_code == 1, result.output
    line = _one_error_line(result)
    assert "refused" in line or "Error" in line
    assert not Path("/tmp/gpucost-leak.csv").exists()


def test_sql_runs_every_statement_and_shows_every_result(home):
    _warehouse(home)
    result = runner.invoke(app, ["sql", "select 1 as a; select 2 as b", "--csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["# statement 1", "a", "1", "# statement 2", "b", "2"]


def test_read_commands_say_when_the_warehouse_holds_sample_data(home):
    _warehouse(home / "replay", mode="replay")  # only a replay warehouse exists
    result = runner.invoke(app, ["sql", "select count(*) as runs from ops.runs", "--csv"])
    assert result.exit_code == 0 and result.stdout.splitlines() == ["runs", "1"]
    assert "sample data" in result.stderr


def test_status_shows_abandoned_runs(home):
    path = _warehouse(home)
    import duckdb

    con = duckdb.connect(str(path))
    con.execute(
        "insert into ops.runs (run_id, started_at, status, mode, providers, error) "
        "values ('r0', now(), 'abandoned', 'live', ['aws'], 'the process ended before it finished')"
    )
    con.execute(
        "insert into ops.provider_runs (run_id, provider, status, started_at, error) "
        "values ('r1', 'aws', 'degraded', now(), 'held 1 scope(s)')"
    )
    con.close()
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    assert "degraded" in result.output and "run r0 abandoned" in result.output


def test_deploy_refuses_without_the_project_dir(monkeypatch):
    monkeypatch.delenv("GPUCOST_PROJECT_DIR", raising=False)
    result = runner.invoke(app, ["deploy"])
    assert result.exit_code == 2 and "GPUCOST_PROJECT_DIR is not set" in _one_error_line(result)
    monkeypatch.setenv("GPUCOST_PROJECT_DIR", "/")
    result = runner.invoke(app, ["deploy"])
    assert result.exit_code == 2 and "not a gpucost checkout" in _one_error_line(result)


def test_every_deployment_queues_instead_of_overlapping():
    from prefect.cli.deploy._models import PrefectYamlModel

    config = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    model = PrefectYamlModel.model_validate(config)
    assert model.deployments
    for deployment in model.deployments:
        limit = deployment.concurrency_limit
        assert limit.limit == 1 and limit.collision_strategy == "ENQUEUE", deployment.name
