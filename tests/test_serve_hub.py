"""A Hugging Face id that is not in the local cache, with the Hub reachable: resolved from the Hub.

The Hub is our own loopback server (`FakeHub`), reached as huggingface_hub reaches a mirror, by
`HF_ENDPOINT`: it answers `GET /{org}/{name}/resolve/main/config.json` as the Hub does (200 with
the file and its `ETag` / `X-Repo-Commit`; 401 with `X-Error-Code: GatedRepo` without the token
of a gated repo; 404 with `X-Error-Code: RepoNotFound`), or not at all in time. Through both
`gpucost estimate --model org/name` and `/api/estimate`: the answer equals the one for the same
config.json given as a file; each failure is one line for the CLI and one 422 naming `model` for
the API; and nothing but the configured endpoint is ever asked, whatever a request says.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from flows import hf_configs, web
from flows.cli import app as cli
from tests.replay_warehouse import replay_only_home
from tests.served import TINY_CONFIG, running

runner = CliRunner()
OPEN = "gpucost-tests/hub-llama"  # served to anyone
GATED = "gpucost-tests/gated-llama"  # served only with TOKEN
SLOW = "gpucost-tests/slow-llama"  # answers after the client gave up
TOKEN = "hf_test_token_of_our_own"
HUB_CONFIG: dict[str, Any] = {**TINY_CONFIG, "_name_or_path": OPEN, "num_hidden_layers": 12}
JOB = ["--method", "qlora", "--tokens", "50M", "--seq-len", "1024"]
API_JOB = {"method": "qlora", "tokens": "50M", "seq_len": "1024"}


class FakeHub(ThreadingHTTPServer):
    """The Hub's resolve endpoint for three repos, on 127.0.0.1; `asked` holds (path, auth)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _HubHandler)
        self.asked: list[tuple[str, str | None]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _HubHandler(BaseHTTPRequestHandler):
    server: FakeHub

    def do_GET(self) -> None:
        auth = self.headers.get("Authorization")
        self.server.asked.append((self.path, auth))
        repo, _, file = self.path.lstrip("/").partition("/resolve/main/")
        if repo == SLOW:
            time.sleep(3)
            return  # the client gave up long ago: nothing to answer
        if file != "config.json" or repo not in (OPEN, GATED, SLOW):
            self._error(404, "RepoNotFound", "Repository not found")
        elif repo == GATED and auth != f"Bearer {TOKEN}":
            self._error(401, "GatedRepo", "Access to model gpucost-tests/gated-llama is restricted.")
        else:
            body = json.dumps(HUB_CONFIG).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", '"0123456789abcdef0123456789abcdef01234567"')
            self.send_header("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567")
            self.end_headers()
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str) -> None:
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: pytest shows what failed


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replay_only_home(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def hub() -> Iterator[FakeHub]:
    server = FakeHub()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def online(home: Path, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    """The replay warehouse, an empty HF cache, HF_HUB_OFFLINE unset and the Hub at `hub`."""
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "GPUCOST_PULL_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hf_configs, "HUB_TIMEOUT_SECONDS", 0.5)
    hub.asked.clear()
    return hub


@pytest.fixture
def api(online: FakeHub) -> Iterator[httpx.Client]:
    with running(web.create_app()) as url, httpx.Client(base_url=url, timeout=60, trust_env=False) as http:
        yield http


def cli_json(*args: str) -> Any:
    result = runner.invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def without(offers: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    """The ranked rows but for the age of each price (it moves between two asks) and `names`."""
    return [{k: v for k, v in row.items() if k not in {"price_age_hours", *names}} for row in offers]


# -- resolved from the Hub ---------------------------------------------------------------------


def test_cli_estimate_fetches_the_config_from_the_configured_hub(online: FakeHub, tmp_path: Path) -> None:
    fetched = cli_json("estimate", "--model", OPEN, *JOB)
    assert online.asked == [(f"/{OPEN}/resolve/main/config.json", None)]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(HUB_CONFIG), encoding="utf-8")
    given = cli_json("estimate", "--config", str(path), *JOB)
    assert fetched and {row["model_id"] for row in fetched} == {OPEN}
    assert without(fetched, "model_id") == without(given, "model_id")


def test_api_estimate_fetches_the_config_and_answers_what_the_cli_prints(
    online: FakeHub, api: httpx.Client
) -> None:
    answer = api.get("/api/estimate", params={"model": OPEN, **API_JOB})
    assert answer.status_code == 200, answer.text
    assert online.asked == [(f"/{OPEN}/resolve/main/config.json", None)]
    printed = cli_json("estimate", "--model", OPEN, *JOB)
    body = answer.json()
    assert body["model_id"] == OPEN and body["params"] > 0
    assert body["offers"] and without(body["offers"]) == without(printed)


def test_a_gated_repo_is_fetched_with_hf_token(online: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert cli_json("memory", "--model", GATED)["model_id"] == GATED
    assert online.asked == [(f"/{GATED}/resolve/main/config.json", f"Bearer {TOKEN}")]


# -- the Hub says no, or nothing ---------------------------------------------------------------

FAILURES = [
    ("gpucost-tests/no-such-model", "no model 'gpucost-tests/no-such-model' on the Hugging Face Hub"),
    (GATED, "is gated on the Hub: set HF_TOKEN"),
    (SLOW, "cannot reach the Hugging Face Hub for gpucost-tests/slow-llama (ReadTimeout)"),
]


@pytest.mark.parametrize(("model", "words"), FAILURES, ids=["404", "401-gated", "timeout"])
def test_cli_hub_failure_is_one_line(online: FakeHub, model: str, words: str) -> None:
    started = time.monotonic()
    result = runner.invoke(cli, ["estimate", "--model", model, *JOB])
    assert result.exit_code == 1
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert time.monotonic() - started < 3  # the slow Hub is left behind, not waited for
    assert {path for path, _ in online.asked} == {f"/{model}/resolve/main/config.json"}


@pytest.mark.parametrize(("model", "words"), FAILURES, ids=["404", "401-gated", "timeout"])
def test_api_hub_failure_is_one_422_naming_the_model(
    online: FakeHub, api: httpx.Client, model: str, words: str
) -> None:
    answer = api.get("/api/estimate", params={"model": model, **API_JOB})
    assert answer.status_code == 422
    [error] = answer.json()["detail"]
    assert error["field"] == "model" and error["flag"] == "--model"
    assert words in error["message"]


def test_the_token_never_leaves_in_an_answer(
    online: FakeHub, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_not_the_gated_repos_token")
    answer = api.get("/api/estimate", params={"model": GATED, **API_JOB})
    assert answer.status_code == 422
    assert "hf_not_the_gated_repos_token" not in answer.text


# -- only the configured endpoint --------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        "http://127.0.0.1:9/x",
        "https://huggingface.co/org/name",
        "//127.0.0.1/org",
        "org/../../etc",
        "org/name/resolve/main/config.json",
        "127.0.0.1:9/name",
        "org/name?x=1",
        "org/name#frag",
    ],
)
def test_no_model_value_reaches_another_host_or_path(online: FakeHub, api: httpx.Client, model: str) -> None:
    answer = api.get("/api/estimate", params={"model": model, **API_JOB})
    assert answer.status_code == 422
    [error] = answer.json()["detail"]
    assert error["field"] == "model"
    assert online.asked == []  # refused before anything is fetched, from the Hub or elsewhere


def test_hf_endpoint_that_is_not_http_is_refused(online: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "file:///etc")
    result = runner.invoke(cli, ["memory", "--model", OPEN])
    assert result.exit_code == 1
    assert "HF_ENDPOINT='file:///etc' is not an http(s) URL" in result.output
    assert online.asked == []


def test_hub_endpoint_defaults_to_huggingface_co_and_drops_a_trailing_slash() -> None:
    assert hf_configs.hub_endpoint({}) == "https://huggingface.co"
    assert (
        hf_configs.hub_endpoint({"HF_ENDPOINT": "https://hf-mirror.example/ "}) == "https://hf-mirror.example"
    )
