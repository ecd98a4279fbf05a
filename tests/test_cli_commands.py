"""The commands around the refresh, through the real typer app: what a user sees, the exit code and
what is written.

- `deploy` runs a stand-in `prefect` put first on PATH, which records its arguments and working
  folder and exits with the code a test asks for; one test runs the real `prefect` commands.
- `server start|stop|status` run against stand-ins for `flows.server`'s start and stop (a real
  server start is tests/test_runners.py's); status reads real pid and URL files.
- `gpus`, `unmapped`, `gc`, `export`, `report`, `status` and `sql` run over small warehouses the
  tests build; `refresh` runs offline (a replay, or gcp skipped for want of a key).
- That real `deploy` and the Prefect branch of `refresh` use the session's Prefect test server
  (`prefect_harness`); nothing here starts another.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows import orchestration, server
from flows.cli import app
from flows.output import console
from tests.conftest import REPO
from tests.factories import make_offer
from warehouse.archive import land_raw
from warehouse.db import SEEDS_DIR, WarehouseBusy, connect, migrate, open_warehouse
from warehouse.load import load_offers
from warehouse.marts import build_marts

runner = CliRunner()
REPLAY = REPO / "tests" / "replay"
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("GPUCOST_FEEDS_DIR", str(tmp_path / "feeds"))
    for name in ("PREFECT_API_URL", "GPUCOST_FEEDS_URL", "GPUCOST_S3_ENDPOINT_URL", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(console, "width", 200)  # wide tables whatever COLUMNS says
    return tmp_path / "data"


def live_warehouse(home: Path, *, unmapped: bool = False, marts: bool = True, conflict: bool = False) -> Path:
    """A live warehouse with one AWS H100 offer (and, if asked, one GPU no seed can name, or a
    page stating 288 GB for a B300 whose seed says 270)."""
    path = home / "warehouse.duckdb"
    con = open_warehouse(path)
    try:
        load_offers(con, "r1", "aws", [make_offer("p5.48xlarge", 55.04)], now=NOW)
        if unmapped:
            mystery = make_offer(
                "1x Mystery X1", 1.25, "runpod", region="global", gpu_name_raw="Mystery X1",
                gpu_count=1, gpu_memory_gb_raw=48,
            )  # fmt: skip
            load_offers(con, "r1", "runpod", [mystery], now=NOW)
        if conflict:
            b300 = make_offer(
                "8x NVIDIA B300", 59.2, "hyperstack", region="global", gpu_name_raw="NVIDIA B300",
                gpu_count=8, gpu_memory_gb_raw=288,
            )  # fmt: skip
            load_offers(con, "r1", "hyperstack", [b300], now=NOW)
        if marts:
            build_marts(con)
        con.execute(
            "insert into ops.runs (run_id, started_at, status, mode, providers) "
            "values ('r1', ?, 'ok', 'live', ['aws'])",
            [NOW],
        )
    finally:
        con.close()
    return path


def error_line(result) -> str:
    """The one `error:` line a failing command prints, and no traceback."""
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def only_error_line(result) -> str:
    """`error_line`, when the command printed nothing else."""
    assert [line for line in result.output.splitlines() if line.strip()] == [error_line(result)]
    return error_line(result)


# --- deploy -------------------------------------------------------------------------------------------

FAKE_PREFECT = textwrap.dedent(
    """
    import json, os, pathlib, sys
    here = pathlib.Path(__file__).parent
    line = " ".join(sys.argv[1:])
    call = {"line": line, "cwd": os.getcwd(), "api": os.environ.get("PREFECT_API_URL")}
    with open(here / "calls.jsonl", "a") as log:
        log.write(json.dumps(call) + "\\n")
    fail = json.loads((here / "fail.json").read_text())
    sys.exit(next((code for words, code in fail.items() if words in line), 0))
    """
)
# `prefect work-pool create` makes the pool's `default` queue, so creating it again fails
AS_PREFECT_DOES = {"work-queue create": 1}
DEPLOYMENTS = ("spot-markets-hourly", "all-providers-daily", "adhoc")  # README, "Scheduled runs"
API = "http://127.0.0.1:4200/api"


class FakePrefect:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.fail(AS_PREFECT_DOES)
        self.heartbeat: int | None = 180  # Prefect's default PREFECT_FLOWS_HEARTBEAT_FREQUENCY
        self.automations: list[int] = []  # the heartbeat periods ensure() was called with

    def fail(self, codes: dict[str, int]) -> None:
        """Exit with `code` for a command line that contains its words, 0 otherwise."""
        (self.folder / "fail.json").write_text(json.dumps(codes))

    def calls(self) -> list[dict[str, str]]:
        log = self.folder / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def lines(self) -> list[str]:
        return [call["line"] for call in self.calls()]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout elsewhere than this process's working folder: deploy must run from it."""
    checkout = tmp_path / "checkout"
    (checkout / "flows").mkdir(parents=True)
    (checkout / "flows" / "refresh.py").write_text("")
    (checkout / "deployments").mkdir()
    (checkout / "deployments" / "prefect.yaml").write_text(
        (REPO / "deployments" / "prefect.yaml").read_text()
    )
    monkeypatch.setenv("GPUCOST_PROJECT_DIR", str(checkout))
    monkeypatch.setenv("PREFECT_API_URL", API)
    return checkout


@pytest.fixture
def prefect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePrefect:
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "prefect"
    script.write_text(f"#!{sys.executable}\n{FAKE_PREFECT}")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    fake = FakePrefect(folder)
    # the automation step talks to the API itself (no `prefect` command): recorded, as the calls are
    from flows import automations

    monkeypatch.setattr(automations, "heartbeat_seconds", lambda: fake.heartbeat)
    monkeypatch.setattr(
        automations, "ensure", lambda heartbeat: fake.automations.append(heartbeat) or "created"
    )
    return fake


def automations_name() -> str:
    from flows import automations  # imports Prefect: only in the tests that deploy

    return automations.NAME


def deploy_lines(pool: str) -> list[str]:
    return [
        f"work-pool create {pool} --type process --overwrite",
        f"work-queue create default --pool {pool} --limit 1",
        f"work-queue set-concurrency-limit default 1 --pool {pool}",
        *(
            f"--no-prompt deploy --pool {pool} --prefect-file deployments/prefect.yaml --name {name}"
            for name in DEPLOYMENTS
        ),
    ]


@pytest.mark.parametrize("pool", [None, "nightly"])
def test_deploy_makes_the_pool_its_queue_limit_and_every_deployment_on_that_pool(
    pool: str | None, project: Path, prefect: FakePrefect
):
    result = runner.invoke(app, ["deploy"] if pool is None else ["deploy", "--work-pool", pool])
    assert result.exit_code == 0, result.output
    expected = deploy_lines(pool or "gpucost")
    assert prefect.lines() == expected
    # each step runs in the checkout (prefect.yaml's paths are relative to it) against the API set
    assert {(call["cwd"], call["api"]) for call in prefect.calls()} == {(str(project), API)}
    assert [line for line in result.output.splitlines() if line.startswith("$ ")] == [
        f"$ prefect {line}" for line in expected
    ]
    # last, once the deployments exist: the automation that frees a dead worker's refresh
    assert prefect.automations == [180]
    said = " ".join(result.stdout.split())
    assert f"automation {automations_name()!r} created: a refresh silent for 360 s" in said


def test_deploy_can_register_another_prefect_file(project: Path, prefect: FakePrefect):
    (project / "deployments" / "team.yaml").write_text("deployments: [{name: replay-every-hour}]\n")
    result = runner.invoke(app, ["deploy", "--prefect-file", "deployments/team.yaml"])
    assert result.exit_code == 0, result.output
    assert prefect.lines()[-1] == (
        "--no-prompt deploy --pool gpucost --prefect-file deployments/team.yaml --name replay-every-hour"
    )
    result = runner.invoke(app, ["deploy", "--prefect-file", "deployments/missing.yaml"])
    assert result.exit_code == 2
    assert "no flows/refresh.py or deployments/missing.yaml" in only_error_line(result)


def test_deploy_with_heartbeats_off_warns_that_a_dead_worker_blocks_the_queue(
    project: Path, prefect: FakePrefect
):
    prefect.heartbeat = None
    result = runner.invoke(app, ["deploy"])
    assert result.exit_code == 0, result.output
    assert prefect.automations == []
    warned = " ".join(result.stderr.split())
    assert "PREFECT_FLOWS_HEARTBEAT_FREQUENCY is off: a refresh whose worker dies stays Running" in warned


def test_a_new_queue_gets_its_limit_without_the_fallback(project: Path, prefect: FakePrefect):
    prefect.fail({})
    result = runner.invoke(app, ["deploy"])
    assert result.exit_code == 0, result.output
    assert not any("set-concurrency-limit" in line for line in prefect.lines())
    assert prefect.lines()[1] == "work-queue create default --pool gpucost --limit 1"


@pytest.mark.parametrize(
    ("failing", "ran"),
    [
        ({"work-pool create": 5}, 1),
        ({**AS_PREFECT_DOES, "work-queue set-concurrency-limit": 5}, 3),  # the queue would have no limit
        ({**AS_PREFECT_DOES, "--name all-providers-daily": 5}, 5),
    ],
)
def test_a_failing_deploy_step_stops_there_in_one_line(
    failing: dict[str, int], ran: int, project: Path, prefect: FakePrefect
):
    prefect.fail(failing)
    result = runner.invoke(app, ["deploy"])
    assert result.exit_code == 1, result.output
    assert prefect.lines() == deploy_lines("gpucost")[:ran]
    failed = prefect.lines()[-1]
    assert error_line(result) == f"error: `prefect {failed}` failed (exit 5); see its output above"


def test_deploy_without_prefect_on_path_says_how_to_run_it(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    result = runner.invoke(app, ["deploy"])
    assert result.exit_code == 1
    assert "`prefect` is not on PATH; run `uv run gpucost deploy`" in error_line(result)


def test_deploy_refuses_without_an_api_or_a_prefect_yaml(
    project: Path, prefect: FakePrefect, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("PREFECT_API_URL")
    result = runner.invoke(app, ["deploy"])
    assert result.exit_code == 2 and "PREFECT_API_URL is not set" in only_error_line(result)
    monkeypatch.setenv("PREFECT_API_URL", API)
    (project / "deployments" / "prefect.yaml").unlink()
    result = runner.invoke(app, ["deploy"])
    assert result.exit_code == 2 and "not a gpucost checkout" in only_error_line(result)
    assert prefect.calls() == []


# --- server start | stop | status ----------------------------------------------------------------------


def test_server_start_says_where_it_runs_and_what_to_export(home: Path, monkeypatch: pytest.MonkeyPatch):
    asked = []

    def start(where: Path, *, port: int | None = None, database: str | None = None) -> tuple[int, str]:
        asked.append((where, port, database))
        return 4321, f"http://127.0.0.1:{port or 4200}/api"

    monkeypatch.setattr(server, "start", start)
    result = runner.invoke(app, ["server", "start", "--port", "4555"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "Prefect server running (pid 4321) at http://127.0.0.1:4555/api on SQLite in PREFECT_HOME; "
        "UI at http://127.0.0.1:4555",
        "for deployments and workers: export PREFECT_API_URL=http://127.0.0.1:4555/api",
    ]
    result = runner.invoke(app, ["server", "start"])
    assert result.exit_code == 0 and "at http://127.0.0.1:4200/api" in result.stdout
    # under GPUCOST_HOME; the port and database only when given
    assert asked == [(home, 4555, None), (home, None, None)]


def test_server_start_on_postgres_names_the_database_without_its_password(
    home: Path, monkeypatch: pytest.MonkeyPatch
):
    def start(where: Path, *, port: int | None = None, database: str | None = None) -> tuple[int, str]:
        assert database == "postgresql://team:s3cret@db:5432/prefect"  # the URL as given, to start()
        server.files(where).root.mkdir(parents=True, exist_ok=True)
        server.files(where).database.write_text(server.redact_url(server.database_url(database)) + "\n")
        return 4321, "http://127.0.0.1:4200/api"

    monkeypatch.setattr(server, "start", start)
    result = runner.invoke(app, ["server", "start", "--database", "postgresql://team:s3cret@db:5432/prefect"])
    assert result.exit_code == 0, result.output
    assert "on postgresql+asyncpg://team:***@db:5432/prefect;" in result.stdout
    assert "s3cret" not in result.output


def test_a_database_that_is_not_postgres_is_a_usage_error_without_the_password(home: Path):
    result = runner.invoke(app, ["server", "start", "--database", "mysql://team:s3cret@db/prefect"])
    assert result.exit_code == 2
    line = only_error_line(result)
    assert "must be a PostgreSQL URL" in line and "mysql://team:***@db/prefect" in line
    assert "s3cret" not in result.output
    assert not server.files(home).pid.exists()  # nothing started


def test_a_server_that_will_not_start_is_one_line(home: Path, monkeypatch: pytest.MonkeyPatch):
    def start(where: Path, *, port: int | None = None, database: str | None = None) -> tuple[int, str]:
        raise RuntimeError(f"the Prefect server exited with 1; see {where}/prefect-server/server.log")

    monkeypatch.setattr(server, "start", start)
    result = runner.invoke(app, ["server", "start"])
    assert result.exit_code == 1
    assert only_error_line(result) == (
        f"error: the Prefect server exited with 1; see {home}/prefect-server/server.log"
    )


@pytest.mark.parametrize(
    ("was_running", "says"),
    [(True, "Prefect server stopped"), (False, "no managed Prefect server was running")],
)
def test_server_stop_says_whether_one_ran(was_running: bool, says: str, home: Path, monkeypatch):
    stopped = []
    monkeypatch.setattr(server, "stop", lambda where: stopped.append(where) or was_running)
    result = runner.invoke(app, ["server", "stop"])
    assert result.exit_code == 0 and result.stdout.strip() == says
    assert stopped == [home]


@pytest.mark.parametrize("answers", [True, False])
@pytest.mark.parametrize("database", [None, "postgresql+asyncpg://team:***@db:5432/prefect"])
def test_server_status_names_pid_url_database_health_and_log(
    answers: bool, database: str | None, home: Path, monkeypatch
):
    where = server.files(home)
    where.root.mkdir(parents=True)
    url = f"http://127.0.0.1:{server.free_port(0)}/api"  # nothing listens there
    where.pid.write_text(f"{os.getpid()}\n")  # a live process stands in for the server
    where.url.write_text(url + "\n")
    if database:
        where.database.write_text(database + "\n")  # what start() writes: already redacted
    if answers:
        monkeypatch.setattr(server, "healthy", lambda asked: asked == url)
    result = runner.invoke(app, ["server", "status"])
    assert result.exit_code == 0, result.output
    state = "healthy" if answers else "not answering"
    on = database or "SQLite"
    said = " ".join(result.stdout.split())  # the console wraps a long line
    assert said == f"Prefect server pid {os.getpid()} at {url} on {on}: {state}; log {where.log}"


# --- gpus, unmapped -------------------------------------------------------------------------------------


def test_gpus_prints_the_seed_catalog_by_vendor_without_a_warehouse(home: Path):
    result = runner.invoke(app, ["gpus"])
    assert result.exit_code == 0, result.output
    with (SEEDS_DIR / "gpus.csv").open() as f:
        seeds = sorted((row["vendor"], row["gpu_name"]) for row in csv.DictReader(f))
    shown = [line.split("│")[1].strip() for line in result.stdout.splitlines() if line.startswith("│")]
    assert shown == [name for _, name in seeds]
    assert "canonical GPUs" in result.stdout and "bf16_tflops" in result.stdout
    assert not home.exists()  # the catalog needs no warehouse and writes none


def test_gpus_shows_the_measured_matmul_rate_the_time_model_reads(home: Path):
    # a user comparing an H100 PCIe with an SXM part sees why its plan is slower than the rated
    # ratio: the part is held to its measured rate, shown beside the rated one
    from answers import catalog

    columns, rows = catalog.gpu_catalog()
    assert columns.index("matmul_tflops") == columns.index("bf16_tflops") + 1
    by_name = {row[columns.index("gpu_name")]: row for row in rows}
    rate = columns.index("matmul_tflops")
    assert by_name["H100-PCIe"][rate] == 495.93
    assert by_name["H100-SXM"][rate] == 794.5
    assert by_name["H100-SXM"][columns.index("half_rate_accumulate")] is False
    # measured by neither table; a half-rate part, which large matmuls run at its rated figure
    assert by_name["A10G"][rate] is None
    assert by_name["A10G"][columns.index("half_rate_accumulate")] is True
    printed = runner.invoke(app, ["gpus"])
    assert printed.exit_code == 0 and "matmul_tflops" in printed.stdout
    assert "half_rate_accumulate" in printed.stdout
    assert not home.exists()


def test_unmapped_lists_the_gpu_names_no_seed_can_name(home: Path):
    live_warehouse(home, unmapped=True)
    result = runner.invoke(app, ["unmapped"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if line.startswith("┃"))
    assert [cell.strip() for cell in header.split("┃")[1:6]] == [
        "provider", "gpu_name_raw", "gpu_memory_gb_raw", "offers", "example_instance_types"
    ]  # fmt: skip
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines()]
    rows = [row for row in rows if row]
    assert len(rows) == 1  # the AWS H100 maps
    assert rows[0][:4] == ["runpod", "Mystery X1", "48", "1"] and "1x Mystery X1" in rows[0][4]


def test_unmapped_says_so_when_every_offer_maps(home: Path):
    live_warehouse(home)
    result = runner.invoke(app, ["unmapped"])
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "every current offer maps to a canonical GPU",
        "spec_conflicts: 0 offers state a VRAM the seeds disagree with",
    ]


def test_unmapped_lists_spec_conflicts(home: Path):
    # the stated 288 GB is kept beside the seed's 270 and flagged, not silently replaced
    live_warehouse(home, conflict=True)
    result = runner.invoke(app, ["unmapped"])
    assert result.exit_code == 0, result.output
    assert "spec_conflicts: 1 offers state a VRAM the seeds disagree with" in result.stdout
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines()]
    rows = [row for row in rows if row]
    assert rows == [
        ["hyperstack", "B300", "NVIDIA B300", "288", "270", "270", "seed:below_source", "1", rows[0][8]]
    ]


def test_unmapped_before_any_refresh_is_one_line(home: Path):
    live_warehouse(home, marts=False)
    result = runner.invoke(app, ["unmapped"])
    assert result.exit_code == 1
    assert only_error_line(result) == "error: no marts yet; run `gpucost refresh` first"


# --- gc ------------------------------------------------------------------------------------------------


def _archive(home: Path) -> Path:
    """An old run that changed no price (its body is due) and a recent one; the warehouse path."""
    from connectors.base import RawResponse

    path = home / "warehouse.duckdb"
    con = connect(path)
    migrate(con)
    for run_id, at, body in (("old", NOW - timedelta(days=45), b"o" * 4000), ("new", NOW, b"n" * 4000)):
        response = RawResponse(
            url=f"https://x.test/{run_id}", method="GET", status=200, fetched_at=at, body=body
        )
        land_raw(con, home / "raw", run_id, "runpod", [response])
        con.execute(
            "insert into ops.runs (run_id, started_at, status, mode, providers) "
            "values (?, ?, 'ok', 'live', [])",
            [run_id, at],
        )
        con.execute(
            "insert into ops.provider_runs "
            "(run_id, provider, status, started_at, rows_inserted, rows_closed) "
            "values (?, 'runpod', 'ok', ?, 0, 0)",
            [run_id, at],
        )
    con.close()
    return path


def _gc_rows(result) -> dict[str, str]:
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines()]
    return {row[0]: row[1] for row in rows if len(row) == 3}


def test_gc_reports_what_it_keeps_and_frees_and_warns_of_bodies_gone_by_hand(home: Path):
    _archive(home)
    bodies = sorted((home / "raw").rglob("*.zst"))
    assert len(bodies) == 2
    dry = runner.invoke(app, ["gc", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    rows = _gc_rows(dry)
    assert rows["kept: the rest of the last 30 days"] == "1"
    assert rows["would remove: older, changed no price"] == "1"
    assert rows["would remove: files no exchange references"] == "0"
    assert sorted((home / "raw").rglob("*.zst")) == bodies
    # someone deletes every body by hand: gc still runs, says so on stderr, and frees nothing
    for body in bodies:
        body.unlink()
    real = runner.invoke(app, ["gc"])
    assert real.exit_code == 0, real.output
    assert "freed 0.0 MB" in real.stdout and _gc_rows(real)["removed: older, changed no price"] == "0"
    assert "2 archived bodies are missing from disk (moved or deleted by hand)" in real.stderr


def test_gc_on_a_busy_warehouse_is_one_line_and_removes_nothing(home: Path):
    path = _archive(home)
    bodies = sorted((home / "raw").rglob("*.zst"))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, sys; c = duckdb.connect({str(path)!r}); print('ok', flush=True); "
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ok"
        result = runner.invoke(app, ["gc"])
    finally:
        holder.communicate("", timeout=30)
    assert result.exit_code == 1 and "in use by another process" in only_error_line(result)
    assert sorted((home / "raw").rglob("*.zst")) == bodies


def test_gc_with_a_negative_retention_names_the_setting(home: Path, monkeypatch: pytest.MonkeyPatch):
    _archive(home)
    monkeypatch.setenv("GPUCOST_RAW_RETENTION_DAYS", "-1")
    result = runner.invoke(app, ["gc"])
    assert result.exit_code == 1
    assert only_error_line(result) == (
        "error: retention_days must be 0 or more, got -1 (GPUCOST_RAW_RETENTION_DAYS)"
    )
    assert len(list((home / "raw").rglob("*.zst"))) == 2


# --- export, report, status, sql --------------------------------------------------------------------------


def test_export_refuses_an_unknown_format(home: Path):
    result = runner.invoke(app, ["export", "--format", "xlsx"])
    assert result.exit_code == 2
    assert only_error_line(result) == "error: --format must be one of csv, parquet, both; got 'xlsx'"


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["export"], "no marts to export yet; run `gpucost refresh` first"),
        (["report"], "no marts to build the page from yet; run `gpucost refresh` first"),
    ],
)
def test_export_and_report_before_any_refresh_are_one_line(command: list[str], says: str, home: Path):
    live_warehouse(home, marts=False)
    result = runner.invoke(app, command)
    assert result.exit_code == 1 and only_error_line(result) == f"error: {says}"


def test_status_before_any_provider_ran_is_one_line(home: Path):
    open_warehouse(home / "warehouse.duckdb").close()
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 1
    # one line, with why there is nothing (no provider ever loaded) folded in
    assert only_error_line(result).startswith(
        "error: no runs recorded yet; run `gpucost refresh` (no successful live refresh yet:"
    )


@pytest.mark.parametrize("query", ["", ";", "  ;  ; "])
def test_sql_without_a_statement_is_a_usage_error(query: str, home: Path):
    live_warehouse(home, marts=False)
    result = runner.invoke(app, ["sql", query])
    assert result.exit_code == 2 and only_error_line(result) == "error: no SQL statement given"


def test_sql_tables_title_each_result_only_when_there_are_several(home: Path):
    live_warehouse(home, marts=False)
    one = runner.invoke(app, ["sql", "select 41 + 1 as answer"])
    assert one.exit_code == 0, one.output
    assert "answer" in one.stdout and "42" in one.stdout and "statement" not in one.stdout
    two = runner.invoke(app, ["sql", "select 'first' as a; select 'second' as b"])
    assert two.exit_code == 0, two.output
    text = two.stdout
    assert text.index("statement 1") < text.index("first") < text.index("statement 2") < text.index("second")


def test_sql_shows_200_rows_and_says_how_many_more(home: Path):
    live_warehouse(home, marts=False)
    result = runner.invoke(app, ["sql", "select range as n from range(205)"])
    assert result.exit_code == 0, result.output
    shown = [line.split("│")[1].strip() for line in result.stdout.splitlines() if line.startswith("│")]
    assert shown == [str(n) for n in range(200)]
    assert result.stdout.splitlines()[-1] == "... 5 more rows (use `gpucost sql` with LIMIT, or `export`)"


# --- refresh: what goes wrong after the checks, publishing, the Prefect runner -----------------------------


def test_refresh_refuses_an_unwritable_record_folder_before_fetching(home: Path, tmp_path: Path):
    (tmp_path / "a-file").write_text("not a folder")
    result = runner.invoke(
        app, ["refresh", "--providers", "oci", "--record", str(tmp_path / "a-file" / "rec")]
    )
    assert result.exit_code == 1 and "record folder" in only_error_line(result)
    assert not (home / "warehouse.duckdb").exists()


def _busy(path: Path) -> None:
    raise WarehouseBusy(f"the warehouse {path} is in use by another process (process 4242); try again")


def test_a_warehouse_taken_between_the_checks_and_the_load_is_one_line(home: Path, monkeypatch):
    monkeypatch.setattr(orchestration, "open_warehouse", _busy)
    result = runner.invoke(app, ["refresh", "--providers", "oci", "--replay", str(REPLAY)])
    assert result.exit_code == 1, result.output
    assert "in use by another process (process 4242)" in error_line(result)


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A local S3-compatible server (moto) on loopback and a bucket; no AWS credentials set yet."""
    from moto.server import ThreadedMotoServer

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask 169.254.169.254
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    bucket = f"gpucost-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("GPUCOST_S3_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("GPUCOST_FEEDS_URL", f"s3://{bucket}/feeds")
    yield endpoint, bucket
    moto.stop()


def test_export_writes_the_feeds_then_says_why_publishing_them_failed(home: Path, tmp_path: Path, s3):
    _, bucket = s3
    live_warehouse(home)
    result = runner.invoke(app, ["export", "--format", "csv", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert error_line(result).startswith(f"error: no AWS credentials to publish to s3://{bucket}/feeds: set")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    written = [line.split()[0] for line in result.stdout.splitlines()]
    assert written == [str(tmp_path / "out" / entry["name"]) for entry in manifest["files"]]


def test_a_live_refresh_publishes_its_feeds_and_says_when_publishing_failed(home: Path, s3, monkeypatch):
    from connectors.http import make_client
    from warehouse.publish import s3_client

    endpoint, bucket = s3
    # a live run answered by the cassette: it loads (a run that loads nothing publishes nothing)
    monkeypatch.setattr(orchestration, "make_client", lambda **kw: make_client(**{**kw, "replay": REPLAY}))
    failed = runner.invoke(app, ["refresh", "--providers", "linode"])
    assert failed.exit_code == 1, failed.output
    line = error_line(failed)
    assert line.startswith("error: the refresh loaded, but publishing the feeds failed: no AWS credentials")
    assert (home.parent / "feeds" / "manifest.json").exists()  # the local feeds are written all the same

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "gpucost-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "gpucost-test-secret")
    s3_client(endpoint).create_bucket(Bucket=bucket)
    published = runner.invoke(app, ["refresh", "--providers", "linode"])
    assert published.exit_code == 0, published.output
    files = len(json.loads((home.parent / "feeds" / "manifest.json").read_text())["files"])
    assert f"published {files + 1} files to s3://{bucket}/feeds (manifest last)" in published.stdout


def test_refresh_with_a_prefect_api_is_a_flow_run_there(prefect_harness, home: Path, monkeypatch):
    from prefect.settings import PREFECT_API_URL

    # Prefect configures its log handlers on the first `from prefect import flow`, on the stderr of
    # the moment: make that pytest's, not a CliRunner stream that closes after one command
    import flows.refresh  # noqa: F401

    monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())  # as `gpucost server start` says
    result = runner.invoke(app, ["refresh", "--providers", "oci", "--replay", str(REPLAY)])
    assert result.exit_code == 0, result.output
    assert "runner: prefect" in result.stdout and "Prefect start-up and teardown" in result.stdout
    assert "ran in-process without Prefect" not in result.stdout
    assert (home / "replay" / "warehouse.duckdb").exists()

    monkeypatch.setattr(orchestration, "open_warehouse", _busy)  # the flow run fails, not the command
    result = runner.invoke(app, ["refresh", "--providers", "oci", "--replay", str(REPLAY)])
    assert result.exit_code == 1, result.output
    assert "in use by another process (process 4242)" in error_line(result)


def test_deploy_registers_every_deployment_on_the_pool_asked_for(prefect_harness, monkeypatch):
    """The real `prefect` commands against the session's test server."""
    from prefect.automations import Automation
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import WorkPoolFilter, WorkPoolFilterName
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    import flows.refresh  # noqa: F401  (see test_refresh_with_a_prefect_api_is_a_flow_run_there)
    from flows import automations

    pool = f"gpucost-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    monkeypatch.setenv("GPUCOST_PROJECT_DIR", str(REPO))
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 45}):  # the harness turns them off
        result = runner.invoke(app, ["deploy", "--work-pool", pool])
        assert result.exit_code == 0, result.output
        again = runner.invoke(app, ["deploy", "--work-pool", pool])  # a second deploy updates it
        assert again.exit_code == 0 and f"{automations.NAME!r} updated" in again.stdout
    with get_client(sync_client=True) as client:
        try:
            made = client.read_automations_by_name(automations.NAME)
            assert len(made) == 1 and made[0].enabled
            assert made[0].trigger.within.total_seconds() == 90  # type: ignore[union-attr]
            assert made[0].actions[0].type == "change-flow-run-state"
            deployments = client.read_deployments(
                work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[pool]))
            )
            assert sorted(d.name for d in deployments) == sorted(DEPLOYMENTS)
            assert {d.work_queue_name for d in deployments} == {"default"}
            assert client.read_work_queue_by_name("default", work_pool_name=pool).concurrency_limit == 1
            crons = {d.name: [s.schedule.cron for s in d.schedules] for d in deployments}
            assert crons == {
                "spot-markets-hourly": ["15 * * * *"],
                "all-providers-daily": ["30 3 * * *"],
                "adhoc": [],
            }
        finally:
            for deployment in client.read_deployments(
                work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[pool]))
            ):
                client.delete_deployment(deployment.id)
            client.delete_work_pool(pool)
            for automation in client.read_automations_by_name(automations.NAME):
                Automation.read(id=automation.id).delete()


# The command, in its own process, with the warehouse taken after the command's own checks, inside
# the flow run (as `_busy` above does in-process): the flow-run log goes to that process's terminal.
BUSY_IN_THE_FLOW = """
import sys
import flows.orchestration as orchestration
from warehouse.db import WarehouseBusy

def busy(path):
    raise WarehouseBusy(f"the warehouse {path} is in use by another process (process 4242); try again")

orchestration.open_warehouse = busy
from flows.cli import app
sys.argv = ["gpucost", *sys.argv[1:]]
app()
"""


def test_a_warehouse_busy_inside_a_prefect_flow_run_prints_no_traceback(prefect_harness, home: Path):
    """The issue's case: with a Prefect API configured, Prefect's engine logged the flow's
    WarehouseBusy with a full traceback on the terminal, above the command's one line."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", BUSY_IN_THE_FLOW, "refresh", "--providers", "oci", "--replay", str(REPLAY)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "in use by another process (process 4242)" in errors[0], output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert "Finished in state Failed('WarehouseBusy: the warehouse" in output  # the flow run says why
    assert done.returncode == 1
