"""A team's setup, end to end: a Prefect server on PostgreSQL, scheduled refreshes, two process workers.

On the session's `postgres_prefect` (a real PostgreSQL in a temp dir; the server started by
`gpucost server start --database`'s code), `gpucost deploy --prefect-file` registers a replay
deployment made from deployments/prefect.yaml's `adhoc` entry (same pool, queue, pull step,
entrypoint and concurrency limit) with a schedule of three runs two seconds apart, and two
`prefect worker start` processes serve it. Then, in order:

1. the three scheduled runs all complete, never two at once, with only the deployment's own
   concurrency limit between the workers (the queue's limit is lifted for this part): a run that
   was refused its slot waited (`AwaitingConcurrencySlot`) and ran later, none was lost;
2. with the queue's limit back (as `gpucost deploy` leaves it), the worker running a refresh is
   killed with its flow-run process mid-run (SIGKILL: a lost machine). The run stays `Running` in
   Prefect until the automation `gpucost deploy` made sets it `Crashed` (two missed heartbeats;
   the workers send one every 30 s here), the next refresh then runs on the other worker and marks
   the dead run `abandoned` in the warehouse (warehouse.pipeline.mark_abandoned).

Flow-run states, task runs and artifacts are read from PostgreSQL directly, the warehouse's runs
from its DuckDB file. Every process (workers, their flow runs) is ended by its pid at teardown,
also when a test fails; the server and PostgreSQL end with the session.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml

from tests.conftest import REPO, PostgresPrefect

REPLAY = REPO / "tests" / "replay"
POOL = "gpucost-team"
DEPLOYMENT = "replay-scheduled"
SCHEDULED_RUNS = 3
# a short refresh for the scheduled runs; the one killed runs every provider, so it is mid-run long
# enough to be caught there
SCHEDULED_PROVIDERS = ["oci", "lambdalabs"]
HEARTBEAT_SECONDS = 30  # Prefect's minimum
BIN = Path(sys.executable).parent  # gpucost and prefect of this environment
T = TypeVar("T")


def _wait(what: str, check: Callable[[], T | None], timeout: float, team: Team) -> T:
    """Poll `check` each second until it returns something truthy; fail naming `what` and the logs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1.0)
    pytest.fail(f"{what}: not within {timeout:.0f} s\n{team.logs()}")


def _descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children first), read from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _flow_run_of(pid: int) -> str | None:
    """The flow run a process executes, from the environment the process worker gave it."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    found = [v for v in environ if v.startswith(b"PREFECT__FLOW_RUN_ID=")]
    return found[0].split(b"=", 1)[1].decode() if found else None


@dataclass
class Team:
    """The workers, their environment and the places the test reads."""

    prefect: PostgresPrefect
    root: Path
    env: dict[str, str]
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def warehouse(self) -> Path:
        return self.root / "gpucost-home" / "replay" / "warehouse.duckdb"

    def start_worker(self, name: str) -> None:
        home = self.root / f"prefect-home-{name}"
        home.mkdir()
        with (self.root / f"{name}.log").open("ab") as log:
            self.workers[name] = subprocess.Popen(
                [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--name", name,
                 "--type", "process"],
                env={**self.env, "PREFECT_HOME": str(home)},
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip

    def kill_worker(self, name: str) -> list[int]:
        """SIGKILL a worker and every process below it, as a lost machine would; their pids."""
        worker = self.workers[name]
        gone = [*_descendants(worker.pid), worker.pid]
        for pid in gone:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        worker.wait(timeout=30)
        return gone

    def stop(self) -> None:
        for name in list(self.workers):
            if self.workers[name].poll() is None:
                self.kill_worker(name)

    def logs(self) -> str:
        return "\n".join(
            f"--- {log.name} (last 3000 characters)\n{log.read_text(errors='replace')[-3000:]}"
            for log in sorted(self.root.glob("*.log"))
        )

    def api(self, method: str, path: str, body: Any = None) -> Any:
        response = httpx.request(method, f"{self.prefect.api_url}{path}", json=body, timeout=30)
        response.raise_for_status()
        return response.json() if response.content else None

    def sql(self, query: str, *args: object) -> list[dict[str, Any]]:
        return self.prefect.postgres.execute(query, *args)

    def runs(self) -> list[dict[str, Any]]:
        """The deployment's flow runs, from PostgreSQL, oldest expected start first."""
        return self.sql(
            "select r.id::text as id, r.state_type::text as state, r.state_name, r.auto_scheduled, "
            "r.parameters::text as parameters from flow_run r join deployment d on d.id = r.deployment_id "
            "where d.name = $1 order by r.expected_start_time, r.created",
            DEPLOYMENT,
        )

    def states(self, run_id: str) -> list[tuple[str, str, datetime]]:
        rows = self.sql(
            "select type::text as type, name, timestamp from flow_run_state "
            "where flow_run_id = $1::uuid order by timestamp",
            run_id,
        )
        return [(r["type"], r["name"], r["timestamp"]) for r in rows]

    def state(self, run_id: str) -> str:
        return str(self.sql("select state_type::text as t from flow_run where id = $1::uuid", run_id)[0]["t"])

    def set_queue_limit(self, limit: int | None) -> None:
        self.api("PATCH", f"/work_pools/{POOL}/queues/default", {"concurrency_limit": limit})


def _three_runs(start: datetime) -> dict[str, str]:
    """A schedule of SCHEDULED_RUNS runs two seconds apart from `start`."""
    rule = f"DTSTART:{start:%Y%m%dT%H%M%SZ}\nRRULE:FREQ=SECONDLY;INTERVAL=2;COUNT={SCHEDULED_RUNS}"
    return {"rrule": rule, "timezone": "UTC"}


def _deployments_file(root: Path) -> Path:
    """deployments/prefect.yaml with its `adhoc` entry alone, on a replay, with a paused schedule
    (how long deploying takes here is anyone's guess: the schedule starts once the workers run)."""
    spec = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    adhoc = next(d for d in spec["deployments"] if d["name"] == "adhoc")
    later = _three_runs(datetime.now(UTC) + timedelta(days=1))
    spec["deployments"] = [
        {
            **adhoc,
            "name": DEPLOYMENT,
            "parameters": {"replay": str(REPLAY), "providers": SCHEDULED_PROVIDERS},
            "schedules": [{**later, "active": False}],
        }
    ]
    path = root / "team.prefect.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def team(postgres_prefect: PostgresPrefect, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    root = tmp_path_factory.mktemp("team")
    (root / "gpucost-home").mkdir()
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PREFECT_API_URL": postgres_prefect.api_url,
        "PREFECT_HOME": str(root / "prefect-home-deploy"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "GPUCOST_HOME": str(root / "gpucost-home"),
        "GPUCOST_PROJECT_DIR": str(REPO),
        "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_SECONDS),
        "PREFECT_WORKER_QUERY_SECONDS": "2",  # poll often: the test waits on it
    }
    for name in ("PREFECT_API_KEY", "GPUCOST_FEEDS_URL", "GPUCOST_PULL_URL"):
        env.pop(name, None)  # never publish or pull from a test
    team = Team(postgres_prefect, root, env)
    try:
        deployments = _deployments_file(root)
        with (root / "deploy.log").open("wb") as log:
            deployed = subprocess.run(
                [str(BIN / "gpucost"), "deploy", "--work-pool", POOL, "--prefect-file", str(deployments)],
                env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, timeout=300, check=False,
            )  # fmt: skip
        assert deployed.returncode == 0, team.logs()
        team.start_worker("worker-a")
        team.start_worker("worker-b")
        # both workers polling: the schedule starts 10 s from now
        (schedule,) = team.sql(
            "select s.id::text as id, d.id::text as deployment from deployment_schedule s "
            "join deployment d on d.id = s.deployment_id where d.name = $1",
            DEPLOYMENT,
        )
        start = (datetime.now(UTC) + timedelta(seconds=10)).replace(microsecond=0)
        team.api(
            "PATCH",
            f"/deployments/{schedule['deployment']}/schedules/{schedule['id']}",
            {"schedule": _three_runs(start), "active": True},
        )
        yield team
    finally:
        team.stop()


def _running_intervals(team: Team, run_ids: list[str]) -> list[tuple[datetime, datetime]]:
    """(entered Running, left it) per run, from its state history in PostgreSQL."""
    intervals = []
    for run_id in run_ids:
        states = team.states(run_id)
        began = next(ts for kind, _, ts in states if kind == "RUNNING")
        ended = next(ts for kind, _, ts in states if ts > began and kind != "RUNNING")
        intervals.append((began, ended))
    return sorted(intervals)


def _never_overlap(intervals: list[tuple[datetime, datetime]]) -> bool:
    return all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(intervals))


def _warehouse_runs(team: Team) -> dict[str, dict[str, Any]]:
    """ops.runs of the replay warehouse, by flow run id (read while no refresh runs)."""
    import duckdb

    with duckdb.connect(str(team.warehouse), read_only=True) as con:
        rows = con.execute(
            "select flow_run_id, run_id, status, started_at, finished_at, error from ops.runs"
        ).fetchall()
    return {
        row[0]: dict(zip(("run_id", "status", "started_at", "finished_at", "error"), row[1:], strict=True))
        for row in rows
    }


def test_scheduled_refreshes_run_one_at_a_time_across_two_workers(team: Team) -> None:
    team.set_queue_limit(None)  # only the deployment's concurrency limit stands between the workers

    def all_done() -> list[dict[str, Any]] | None:
        runs = team.runs()
        done = len(runs) == SCHEDULED_RUNS and all(r["state"] == "COMPLETED" for r in runs)
        return runs if done else None

    runs = _wait(f"{SCHEDULED_RUNS} scheduled refreshes completed", all_done, 420, team)
    assert all(r["auto_scheduled"] for r in runs)  # made by the server's scheduler, not by the test
    ids = [r["id"] for r in runs]
    assert _never_overlap(_running_intervals(team, ids)), [team.states(i) for i in ids]
    # both workers were offered the runs at once: the limit refused a start, the run waited and ran
    waited = [i for i in ids if any(name == "AwaitingConcurrencySlot" for _, name, _ in team.states(i))]
    assert waited, [team.states(i) for i in ids]

    # the warehouse agrees: one ok run per flow run, one after another
    recorded = _warehouse_runs(team)
    assert {i: recorded[i]["status"] for i in ids} == dict.fromkeys(ids, "ok")
    assert _never_overlap(sorted((recorded[i]["started_at"], recorded[i]["finished_at"]) for i in ids))

    # each run's summary artifact is in PostgreSQL, with the providers it refreshed
    artifacts = team.sql(
        "select flow_run_id::text as flow_run_id, data from artifact where key = 'gpucost-refresh'"
    )
    by_run = {a["flow_run_id"]: json.loads(a["data"]) for a in artifacts}
    assert set(ids) <= set(by_run)
    for run_id in ids:
        table = by_run[run_id]
        rows = json.loads(table) if isinstance(table, str) else table
        assert {row["provider"] for row in rows} >= set(SCHEDULED_PROVIDERS)
        assert all(row["status"] == "ok" for row in rows if row["provider"] in SCHEDULED_PROVIDERS)


def test_a_worker_killed_mid_run_leaves_a_run_the_next_one_recovers(team: Team) -> None:
    team.set_queue_limit(1)  # as `gpucost deploy` leaves it: a dead run would hold this slot for ever
    deployment = team.api("POST", "/deployments/filter", {"deployments": {"name": {"any_": [DEPLOYMENT]}}})[0]
    # every provider: long enough to be caught mid-run
    doomed = team.api(
        "POST", f"/deployments/{deployment['id']}/create_flow_run", {"parameters": {"providers": None}}
    )["id"]

    def fetching() -> bool:
        # its fetch tasks exist once the run has recorded itself in the warehouse (start_run)
        tasks = team.sql("select count(*) as n from task_run where flow_run_id = $1::uuid", doomed)[0]["n"]
        return tasks > 0 and team.state(doomed) == "RUNNING"

    _wait("the refresh to be killed is fetching", fetching, 240, team)
    owner, process = next(
        (name, pid)
        for name, worker in team.workers.items()
        for pid in _descendants(worker.pid)
        if _flow_run_of(pid) == doomed
    )
    killed = team.kill_worker(owner)
    assert process in killed
    assert team.state(doomed) == "RUNNING", "the refresh finished before its worker was killed"
    recovery = team.api("POST", f"/deployments/{deployment['id']}/create_flow_run", {})["id"]

    def settled() -> bool:
        states = {r["id"]: r["state"] for r in team.runs()}
        return states[doomed] == "CRASHED" and states[recovery] == "COMPLETED"

    # two missed heartbeats (60 s) after the last one, plus the next run
    _wait("the dead run Crashed and the next one completed", settled, 300, team)
    crashed_at = next(ts for kind, _, ts in team.states(doomed) if kind == "CRASHED")
    recovered_from = next(ts for kind, _, ts in team.states(recovery) if kind == "RUNNING")
    assert recovered_from >= crashed_at  # the queue and the deployment held the next run until then
    said = team.sql(
        "select message from flow_run_state where flow_run_id = $1::uuid and type = 'CRASHED'", doomed
    )
    assert "no heartbeat" in said[0]["message"]  # the automation's, not some other crash

    recorded = _warehouse_runs(team)
    assert recorded[doomed]["status"] == "abandoned"
    assert recorded[doomed]["error"] == "the process running it ended before it finished"
    assert recorded[recovery]["status"] == "ok"
    # marked by the next run as it started
    assert recorded[doomed]["finished_at"] <= recorded[recovery]["finished_at"]
    assert all(team.workers[name].poll() is None for name in team.workers if name != owner)


def test_the_database_password_is_in_no_log_or_file(team: Team) -> None:
    # after the server, the deploy, both workers and their flow runs have written what they write
    from urllib.parse import quote

    secret = team.prefect.postgres.password
    written = [*team.root.glob("*.log"), *(team.prefect.home / "prefect-server").iterdir()]
    assert any(path.name == "server.log" for path in written)
    for path in written:
        text = path.read_text(errors="replace")
        assert secret not in text and quote(secret, safe="") not in text, path
    assert (
        (team.prefect.home / "prefect-server" / "database")
        .read_text()
        .startswith("postgresql+asyncpg://gpucost:***@")
    )
