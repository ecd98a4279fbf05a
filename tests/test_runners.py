"""One orchestration, two runners: the in-process runner needs no Prefect, and the managed Prefect
server starts, answers and stops. (The Prefect runner itself is exercised by tests/test_flow.py.)"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows import server
from flows.orchestration import LocalRunner, RefreshPlan, run_refresh
from tests.conftest import REPO

REPLAY = REPO / "tests" / "replay"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("GPUCOST_FEEDS_DIR", str(tmp_path / "feeds"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return tmp_path / "data"


def test_the_local_runner_drives_the_same_steps(home):
    summary = run_refresh(RefreshPlan(providers=["oci", "runpod"], replay=str(REPLAY)), LocalRunner())
    assert summary.status == "ok" and summary.runner == "local"
    assert [o.provider for o in summary.outcomes] == ["runpod", "oci"]  # registry order
    assert all(o.offers_loaded > 0 for o in summary.outcomes)
    assert (home / "replay" / "warehouse.duckdb").exists()
    assert "marts.gpu_offers" in summary.mart_rows and summary.feeds
    # every refresh writes the comparison page next to the feeds
    assert summary.report and Path(summary.report).name == "index.html" and Path(summary.report).exists()


def test_a_refresh_without_a_prefect_api_never_imports_prefect(home):
    script = textwrap.dedent(
        """
        import sys
        from typer.testing import CliRunner
        from flows.cli import app
        result = CliRunner().invoke(app, ["refresh", "--providers", "oci", "--replay", "tests/replay"])
        print(result.exit_code, "prefect" in sys.modules, "runner: local" in result.output)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, env=os.environ, timeout=120
    )
    assert done.stdout.split()[-3:] == ["0", "False", "True"], done.stdout + done.stderr


def test_the_refresh_command_says_how_to_get_prefect_tracking(home):
    from flows.cli import app

    result = CliRunner().invoke(app, ["refresh", "--providers", "oci", "--replay", str(REPLAY)])
    assert result.exit_code == 0, result.output
    assert "runner: local" in result.output and "gpucost server start" in result.output
    assert "(the whole command)" in result.output


# --- the managed server, with a stand-in that answers /api/health like Prefect's -----------------

STAND_IN = textwrap.dedent(
    """
    import http.server, sys
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/api/health" else 404)
            self.end_headers()
            self.wfile.write(b"true")
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
    """
)


def test_the_managed_server_starts_answers_and_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    port = server.free_port(0)
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    pid, url = server.start(tmp_path, port=port, command=[sys.executable, str(script), str(port)], timeout=30)
    try:
        assert url == f"http://127.0.0.1:{port}/api"
        assert server.running(tmp_path) == (pid, url) and server.healthy(url)
        assert server.api_url(tmp_path) == url  # a refresh would use it
        assert server.start(tmp_path) == (pid, url)  # a second start finds the running one
        monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:1/api")
        assert server.api_url(tmp_path) == "http://127.0.0.1:1/api"  # the environment wins
    finally:
        assert server.stop(tmp_path)
    assert server.running(tmp_path) is None and not server.files(tmp_path).pid.exists()
    assert server.stop(tmp_path) is False


def test_a_server_that_dies_at_start_says_where_its_log_is(tmp_path: Path):
    with pytest.raises(RuntimeError, match=r"exited with 3; see .*server\.log"):
        server.start(
            tmp_path, port=server.free_port(0), command=[sys.executable, "-c", "raise SystemExit(3)"]
        )
    assert server.running(tmp_path) is None


def test_server_status_without_a_server_exits_3(home):
    from flows.cli import app

    result = CliRunner().invoke(app, ["server", "status"])
    assert result.exit_code == 3 and "refreshes run in-process" in result.output


def test_a_replay_refresh_never_publishes_sample_data(home, monkeypatch):
    monkeypatch.setenv("GPUCOST_FEEDS_URL", "s3://bucket/gpucost")
    summary = run_refresh(RefreshPlan(providers=["oci"], replay=str(REPLAY)), LocalRunner())
    assert summary.status == "ok" and summary.publish_error is None
    assert "not published" in (summary.published or "") and "sample data" in summary.published


def test_a_malformed_feeds_url_fails_before_anything_starts(home, monkeypatch):
    from flows.cli import app

    monkeypatch.setenv("GPUCOST_FEEDS_URL", "ftp://nowhere")
    result = CliRunner().invoke(app, ["refresh", "--providers", "oci", "--replay", str(REPLAY)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert not (home / "replay" / "warehouse.duckdb").exists()


# --- progress of large downloads ------------------------------------------------------------------------


def test_spooled_downloads_report_progress_as_blocks_land(tmp_path: Path):
    import httpx

    from connectors.http import make_client

    mib = b"x" * (1024 * 1024)
    body = mib * 9  # a little over two 4 MiB blocks, arriving a MiB at a time

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-length": str(len(body))}, content=iter([mib] * 9))

    client = make_client(transport=httpx.MockTransport(handler), spool_dir=tmp_path)
    seen: list[tuple[int, int | None, bool]] = []
    client.progress = lambda what, received, total, finished: seen.append((received, total, finished))
    raw = client.fetch("GET", "https://example.test/offer-file.csv", spool=True)
    assert raw.body_path is not None and raw.size_bytes == len(body)
    assert [finished for *_, finished in seen] == [False, False, True]
    assert [received for received, *_ in seen] == sorted(received for received, *_ in seen)
    assert seen[-1][:2] == (len(body), len(body))
    seen.clear()
    client.fetch("GET", "https://example.test/small.json")  # in memory: no bar for small answers
    assert seen == []


def test_a_progress_display_that_fails_never_fails_the_download(tmp_path: Path):
    import httpx

    from connectors.http import make_client

    client = make_client(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, content=b"y" * 10)), spool_dir=tmp_path
    )

    def broken(*_args):
        raise RuntimeError("terminal went away")

    client.progress = broken
    assert client.fetch("GET", "https://example.test/f", spool=True).size_bytes == 10


def test_prefect_progress_artifacts_update_every_five_percent(monkeypatch):
    import flows.refresh as prefect_runner

    calls: list[tuple[str, float]] = []
    monkeypatch.setattr(
        prefect_runner, "create_progress_artifact", lambda p, description: calls.append(("new", p)) or "a1"
    )
    monkeypatch.setattr(prefect_runner, "update_progress_artifact", lambda a, p: calls.append(("update", p)))
    downloads = prefect_runner.ArtifactDownloads()
    total = 1000
    for received in range(0, total, 10):  # a hundred blocks of 1 %
        downloads("GET https://x/offer.csv", received, total, False)
    downloads("GET https://x/offer.csv", total, total, True)
    downloads("GET https://x/unsized", 5, None, True)  # no Content-Length: nothing to show
    assert calls[0] == ("new", 0.0) and calls[-1] == ("update", 100.0)
    assert 20 <= len(calls) <= 22  # every 5 %, not every block
    assert all(b - a >= 5 for (_, a), (_, b) in itertools.pairwise(calls))


def test_terminal_bars_stay_silent_off_a_terminal():
    from flows.orchestration import TerminalDownloads

    bars = TerminalDownloads()
    bars("GET https://x/a.csv", 10, 100, False)
    bars("GET https://x/a.csv", 100, 100, True)
    bars.close()
    assert bars._tasks == {}
