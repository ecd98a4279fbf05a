"""The first run, as a newcomer meets it (issue 22): the README's commands in order, offline.

- "Offline" is a client whose every request fails name resolution (as `getaddrinfo` does with no
  network), put in place of `flows.orchestration.make_client`; "a live run that loads" is the same
  client answering from the replay cassette while the run stays a live one.
- An empty live warehouse (a refresh that loaded nothing) is not "a live warehouse": read commands
  fall back to the replay warehouse when there is one, and otherwise say why each answer is empty.
- A refresh that loads nothing publishes nothing: feeds, page and manifest stay byte-identical.
- The replay's home and its hint hold whatever GPUCOST_HOME is; feeds live under GPUCOST_HOME.
- A folder that is not a cassette is one line and exit 2, with and without a Prefect API.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from connectors.http import make_client
from flows import orchestration
from flows.cli import app
from flows.output import console
from tests.conftest import REPO
from warehouse.db import NO_LIVE_REFRESH, REPLAY_MARKER, SAMPLE_BANNER, Settings, connect, reader_path

REPLAY = REPO / "tests" / "replay"
# the README's first example (README.md, "No internet?"), one line
README_QUERY = (
    "select gpu_name, vram_gb, "
    "min(price_usd_per_gpu_hour) filter (not is_spot) as on_demand_usd_per_gpu_hour, "
    "min(price_usd_per_gpu_hour) filter (is_spot) as spot_usd_per_gpu_hour "
    "from marts.gpu_offers where vram_gb >= 80 group by all order by 3"
)
PROVIDERS = "linode,vultr"  # two public APIs in the cassette: a fast run that loads real rows
runner = CliRunner()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """GPUCOST_HOME in a temp folder, GPUCOST_FEEDS_DIR unset: feeds go where a newcomer's go."""
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "data"))
    for name in ("GPUCOST_FEEDS_DIR", "PREFECT_API_URL", "GPUCOST_FEEDS_URL", "GPUCOST_S3_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # a stray ./feeds would show here
    monkeypatch.setattr(console, "width", 200)
    return tmp_path / "data"


def unresolved(request: httpx.Request) -> httpx.Response:
    try:
        raise socket.gaierror(-3, "Temporary failure in name resolution")
    except socket.gaierror as exc:
        raise httpx.ConnectError(str(exc), request=request) from exc


def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        orchestration,
        "make_client",
        lambda **kw: make_client(**kw, transport=httpx.MockTransport(unresolved)),
    )


def live_from_cassette(monkeypatch: pytest.MonkeyPatch) -> None:
    """A live run whose requests the cassette answers: live mode, real parsed rows, no network."""
    monkeypatch.setattr(orchestration, "make_client", lambda **kw: make_client(**{**kw, "replay": REPLAY}))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


# --- the newcomer's run -------------------------------------------------------------------------------


def test_after_a_failed_first_refresh_every_empty_answer_says_why(home: Path, monkeypatch):
    offline(monkeypatch)
    failed = runner.invoke(app, ["refresh", "--providers", PROVIDERS])
    assert failed.exit_code == 1 and "offline" in error_line(failed)
    assert (home / "warehouse.duckdb").exists()  # the run is recorded ...
    # ... nothing published (the checks before the run made the folder, and left it empty)
    assert snapshot(home / "feeds") == {} and not (home.parent / "feeds").exists()

    sql = runner.invoke(app, ["sql", README_QUERY])
    assert sql.exit_code == 0, sql.output  # an empty table is an answer, and it says why on stderr
    assert NO_LIVE_REFRESH in sql.stderr.replace("\n", " ") and "gpu_name" in sql.stdout
    prices = runner.invoke(app, ["prices", "--gpu", "H100"])
    assert prices.exit_code == 1
    assert "no successful live refresh yet" in error_line(prices) and "loosen" not in prices.output
    estimate = runner.invoke(app, ["estimate", "--model", "Qwen/Qwen2.5-0.5B", "--tokens", "1000000"])
    assert estimate.exit_code != 0 and NO_LIVE_REFRESH in estimate.stderr.replace("\n", " ")
    report = runner.invoke(app, ["report"])
    assert report.exit_code == 0, report.output
    page = (home / "feeds" / "site" / "index.html").read_text()
    assert "0 current GPU offers" in page and "no successful live refresh yet" in page


def test_read_commands_fall_back_to_the_replay_while_the_live_warehouse_is_empty(home: Path, monkeypatch):
    offline(monkeypatch)
    runner.invoke(app, ["refresh", "--providers", PROVIDERS])
    monkeypatch.undo()
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    replay = runner.invoke(app, ["refresh", "--providers", PROVIDERS, "--replay", str(REPLAY)])
    assert replay.exit_code == 0, replay.output
    assert reader_path() == home / "replay" / "warehouse.duckdb"
    sql = runner.invoke(app, ["sql", "select count(*) as offers from marts.gpu_offers"])
    assert sql.exit_code == 0 and SAMPLE_BANNER in sql.stderr.replace("\n", " ")
    assert int(sql.stdout.split("│")[-2]) > 0  # the README's example answers are populated
    prices = runner.invoke(app, ["prices"])
    assert prices.exit_code == 0 and "sample prices (replay cassette, not live)" in prices.stdout


def test_prices_says_loosen_a_filter_only_when_a_filter_removed_rows(home: Path, monkeypatch):
    live_from_cassette(monkeypatch)
    assert runner.invoke(app, ["refresh", "--providers", "linode"]).exit_code == 0
    none = runner.invoke(app, ["prices", "--gpu", "H100", "--max-price", "0.01"])
    assert none.exit_code == 1 and "loosen a filter" in error_line(none)
    everything = runner.invoke(app, ["prices"])
    assert everything.exit_code == 0 and "live prices" in everything.stdout


# --- a refresh that loads nothing publishes nothing ---------------------------------------------------


def test_a_refresh_that_loads_nothing_leaves_feeds_page_and_uploads_byte_identical(home: Path, monkeypatch):
    live_from_cassette(monkeypatch)
    good = runner.invoke(app, ["refresh", "--providers", PROVIDERS])
    assert good.exit_code == 0, good.output
    feeds = home / "feeds"
    before = snapshot(feeds)
    assert "manifest.json" in before and "site/index.html" in before
    uploads: list[Path] = []
    monkeypatch.setattr(orchestration, "publish_if_configured", lambda out: uploads.append(out))
    offline(monkeypatch)
    failed = runner.invoke(app, ["refresh", "--providers", PROVIDERS])
    assert failed.exit_code == 1
    assert snapshot(feeds) == before and uploads == []
    con = connect(home / "warehouse.duckdb", read_only=True)
    statuses = [s for (s,) in con.execute("select status from ops.runs order by started_at").fetchall()]
    con.close()
    assert statuses == ["ok", "failed"]
    # providers skipped for want of credentials load nothing either: a table, and the reason
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    skipped = runner.invoke(app, ["refresh", "--providers", "gcp"])
    assert f"feeds: unchanged (no provider loaded; {feeds} stays as it was)" in skipped.stdout.replace(
        "\n", ""
    )
    assert snapshot(feeds) == before and uploads == []


# --- where things live --------------------------------------------------------------------------------


def test_feeds_and_page_live_under_gpucost_home_unless_feeds_dir_says_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUCOST_FEEDS_DIR", raising=False)
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "h"))
    assert Settings().feeds_dir == tmp_path / "h" / "feeds"
    plain = Settings()
    assert (
        orchestration.feeds_dir_for(plain, tmp_path / "other", replay=False) == tmp_path / "other" / "feeds"
    )
    monkeypatch.setenv("GPUCOST_FEEDS_DIR", str(tmp_path / "pub"))
    chosen = Settings()
    assert chosen.feeds_dir == tmp_path / "pub"
    assert orchestration.feeds_dir_for(chosen, tmp_path / "h", replay=False) == tmp_path / "pub"
    # a replay's feeds stay beside its own warehouse, never in the live (published) folder
    assert orchestration.feeds_dir_for(chosen, tmp_path / "h" / "replay", replay=True) == (
        tmp_path / "h" / "replay" / "feeds"
    )


def test_a_live_refresh_writes_its_feeds_under_gpucost_home_not_the_working_folder(home: Path, monkeypatch):
    live_from_cassette(monkeypatch)
    result = runner.invoke(app, ["refresh", "--providers", "linode"])
    assert result.exit_code == 0, result.output
    assert (home / "feeds" / "manifest.json").is_file() and (home / "feeds" / "site" / "index.html").is_file()
    assert not (home.parent / "feeds").exists()


def test_following_the_replay_hint_never_nests_replay_in_replay(home: Path):
    first = runner.invoke(app, ["refresh", "--providers", "linode", "--replay", str(REPLAY)])
    assert first.exit_code == 0, first.output
    replay_home = home / "replay"
    assert (replay_home / REPLAY_MARKER).is_file()
    hint = first.stdout.replace("\n", " ")
    assert f"GPUCOST_HOME={replay_home} " in hint and (replay_home / "feeds" / "manifest.json").is_file()

    # the newcomer does what the hint says, and replays again
    again = runner.invoke(
        app,
        ["refresh", "--providers", "linode", "--replay", str(REPLAY)],
        env={"GPUCOST_HOME": str(replay_home)},
    )
    assert again.exit_code == 0, again.output
    assert not (replay_home / "replay").exists()
    assert "GPUCOST_HOME is this replay's home" in again.stdout.replace("\n", " ")
    sql = runner.invoke(app, ["sql", "select count(*) from ops.runs"], env={"GPUCOST_HOME": str(replay_home)})
    assert sql.exit_code == 0 and SAMPLE_BANNER in sql.stderr.replace("\n", " ")
    assert sql.stdout.split("│")[-2].strip() == "2"  # both replays in the one replay warehouse


def test_replay_home_is_home_replay_unless_home_is_a_replay_home(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "elsewhere"))
    assert Settings().replay_home == tmp_path / "elsewhere" / "replay"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / REPLAY_MARKER).write_text("")
    assert Settings().replay_home == tmp_path / "elsewhere"


# --- a folder that is not a cassette ------------------------------------------------------------------


def not_a_cassette(tmp_path: Path) -> Path:
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "package.json").write_text('{"name": "not-a-cassette"}')
    return folder


def test_a_folder_that_is_not_a_cassette_is_one_line_naming_what_one_holds(home: Path, tmp_path: Path):
    result = runner.invoke(app, ["refresh", "--replay", str(not_a_cassette(tmp_path))])
    assert result.exit_code == 2, result.output
    line = error_line(result)
    assert "is not a cassette" in line and "request (method, url)" in line and "body_file" in line
    assert not (home / "replay" / "warehouse.duckdb").exists()  # no run recorded at all


def test_a_non_cassette_with_a_prefect_api_is_the_same_line(
    prefect_harness, home: Path, tmp_path, monkeypatch
):
    from prefect.settings import PREFECT_API_URL

    monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    result = runner.invoke(app, ["refresh", "--replay", str(not_a_cassette(tmp_path))])
    assert result.exit_code == 2, result.output
    assert "is not a cassette" in error_line(result)
    assert not (home / "replay" / "warehouse.duckdb").exists()


def test_a_run_whose_cassette_will_not_open_is_recorded_failed_not_running(home: Path, tmp_path: Path):
    plan = orchestration.RefreshPlan(providers=["linode"], replay=str(not_a_cassette(tmp_path)))
    with pytest.raises(FileNotFoundError, match="no cassette entries"):
        orchestration.run_refresh(plan, orchestration.LocalRunner())
    con = connect(home / "replay" / "warehouse.duckdb", read_only=True)
    ((status, error),) = con.execute("select status, error from ops.runs").fetchall()
    con.close()
    assert status == "failed" and "no cassette entries" in error


# --- interrupts ---------------------------------------------------------------------------------------

# A refresh in a subprocess whose every request goes to a loopback server that never answers: the
# run is stuck fetching, as a live run behind a stalled provider is, when the signal comes.
DRIVER = """
import sys
import httpx
from connectors.http import make_client
from flows import orchestration
from flows.cli import app

port = int(sys.argv[1])


class ToLoopback(httpx.HTTPTransport):
    def handle_request(self, request):
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=port)
        return super().handle_request(request)


orchestration.make_client = lambda **kw: make_client(**kw, transport=ToLoopback())
sys.argv = ["gpucost", "refresh", "--providers", sys.argv[2]]
app()
"""


class StallingServer:
    """Accepts connections on loopback, reads the request, never answers."""

    def __init__(self) -> None:
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_stalled_refresh_in_seconds_and_records_it_interrupted(signum, tmp_path: Path):
    import os
    import signal
    import subprocess
    import sys
    import time

    server = StallingServer()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCOST_", "PREFECT_API"))}
    env |= {"GPUCOST_HOME": str(tmp_path / "data"), "GPUCOST_HTTP_RETRIES": "0", "COLUMNS": "300"}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(server.port), PROVIDERS],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90  # imports on a busy 2-core machine
        while len(server.accepted) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(server.accepted) == 2, "both providers' first requests should be in flight"
        sent = time.monotonic()
        proc.send_signal(getattr(signal, signum))
        _, stderr = proc.communicate(timeout=30)
        exited = time.monotonic() - sent
    finally:
        proc.kill()
        server.close()
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert "stopped while fetching, recorded as interrupted; kept nothing" in lines[0]
    assert "the feeds and page are untouched" in lines[0]
    assert exited < 5, f"{signum}: {exited:.1f}s from the signal to the exit"
    con = connect(tmp_path / "data" / "warehouse.duckdb", read_only=True)
    ((status, error, finished),) = con.execute("select status, error, finished_at from ops.runs").fetchall()
    con.close()
    assert (status, finished is not None) == ("interrupted", True)
    assert error == "stopped while fetching: a signal (Ctrl-C or SIGTERM)"


def test_an_interrupt_after_landing_keeps_what_landed_and_says_so(home: Path, monkeypatch):
    live_from_cassette(monkeypatch)

    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(orchestration, "_build_marts", stopped)
    result = runner.invoke(app, ["refresh", "--providers", PROVIDERS])
    assert result.exit_code == 130, result.output
    line = " ".join(result.stderr.split())
    assert "stopped while building the marts, recorded as interrupted" in line
    assert "kept 2 provider(s) landed before the signal (linode, vultr)" in line
    assert not (home / "feeds" / "manifest.json").exists()
    con = connect(home / "warehouse.duckdb", read_only=True)
    runs = con.execute("select status from ops.runs").fetchall()
    landed = con.execute("select distinct provider from core.offer_prices order by 1").fetchall()
    con.close()
    assert runs == [("interrupted",)] and landed == [("linode",), ("vultr",)]


def test_an_interrupted_flow_run_is_cancelled_saying_what_it_kept(monkeypatch):
    from flows import refresh as refresh_module

    summary = orchestration.RefreshSummary(run_id="r1", status="interrupted", mode="live", outcomes=[])

    def stopped(plan, runner):
        raise orchestration.RefreshInterrupted(summary, "fetching")

    monkeypatch.setattr(refresh_module, "run_refresh", stopped)
    state = refresh_module.refresh.fn()
    assert state.is_cancelled()
    assert state.message == "run r1 stopped while fetching, recorded as interrupted; kept nothing; " + (
        "the feeds and page are untouched"
    )
    assert isinstance(state.result(raise_on_failure=False), orchestration.RefreshInterrupted)
