"""`gpucost check` (warehouse/check.py), and a refresh with no network at all: an unresolved host
name is not retried, and the refresh says "offline" once, in seconds."""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from connectors import CONNECTORS
from connectors.base import HostNotFound, Offer, Unreachable
from connectors.http import make_client, name_not_resolved
from flows.cli import app
from tests.conftest import REPO
from warehouse.check import Baseline, judge
from warehouse.pipeline import CAUSE_HINTS, ProviderBatch, collect, default_providers

REPLAY = REPO / "tests" / "replay"
runner = CliRunner()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("GPUCOST_FEEDS_DIR", str(tmp_path / "feeds"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)  # the refresh runs in-process
    return tmp_path / "data"


def unresolved(request: httpx.Request) -> httpx.Response:
    """What httpx raises when getaddrinfo fails: a ConnectError caused by socket.gaierror."""
    try:
        raise socket.gaierror(-3, "Temporary failure in name resolution")
    except socket.gaierror as exc:
        raise httpx.ConnectError(str(exc), request=request) from exc


# --- an unresolved host name ------------------------------------------------------------------------


def test_a_name_resolution_failure_is_told_from_other_connection_errors():
    request = httpx.Request("GET", "https://example.invalid/")
    with pytest.raises(httpx.ConnectError) as caught:
        unresolved(request)
    assert name_not_resolved(caught.value)
    # a message alone (the cause not kept) is read too; a refused connection is not a DNS failure
    assert name_not_resolved(httpx.ConnectError("[Errno -2] Name or service not known"))
    assert not name_not_resolved(httpx.ConnectError("[Errno 111] Connection refused"))


def test_an_unresolved_host_is_not_retried_and_raises_host_not_found():
    calls, slept = [], []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.host)
        return unresolved(request)

    client = make_client(transport=httpx.MockTransport(handler), retries=4, sleep=slept.append)
    with pytest.raises(HostNotFound, match=r"host example\.invalid did not resolve"):
        client.fetch("GET", "https://example.invalid/prices")
    assert (calls, slept) == (["example.invalid"], [])
    # a refused connection still gets the retry ladder
    refused = make_client(
        transport=httpx.MockTransport(lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused"))),
        retries=2,
        sleep=slept.append,
    )
    with pytest.raises(Unreachable) as caught:
        refused.fetch("GET", "https://example.invalid/prices")
    assert not isinstance(caught.value, HostNotFound) and len(slept) == 2


def test_a_provider_whose_host_does_not_resolve_fails_with_the_dns_cause():
    client = make_client(transport=httpx.MockTransport(unresolved))
    batch = collect(CONNECTORS["vultr"], client, {})
    assert (batch.status, batch.cause) == ("failed", "dns")
    assert CAUSE_HINTS["dns"] in (batch.hint or "")


def test_a_refresh_with_no_network_fails_in_seconds_saying_offline_once(home, monkeypatch):
    from flows import orchestration

    def offline_client(**kwargs):
        return make_client(**kwargs, transport=httpx.MockTransport(unresolved))

    monkeypatch.setattr(orchestration, "make_client", offline_client)
    # the real retry settings: without the no-retry rule each request would wait ~7 s of backoff
    started = time.perf_counter()
    result = runner.invoke(app, ["refresh"])
    wall = time.perf_counter() - started
    assert result.exit_code == 1, result.output
    assert result.output.count(CAUSE_HINTS["dns"]) == 1, result.output
    skipped = result.output.count(" skipped: missing ")  # providers without credentials do not run
    ran = len(default_providers()) - skipped
    assert f"error: offline: none of the {ran} providers' hosts resolved" in result.output
    # one line (rich may wrap it): no table, no per-provider error
    assert "(live): failed" not in result.output and "what to do" not in result.output
    assert wall < 30, wall  # mostly building empty marts; a retry ladder alone is 7 s per request


# --- gpucost check ----------------------------------------------------------------------------------


def batch(offers: list[str], status: str = "fetched", cause: str | None = None) -> ProviderBatch:
    from datetime import UTC, datetime

    made = [
        Offer("p", name, "r", "on_demand", "list", 1.0, "USD", "H100", 1.0)  # type: ignore[arg-type]
        for name in offers
    ]
    return ProviderBatch("p", status, datetime.now(UTC), offers=made, cause=cause, error="E", hint="H")


def test_judge_compares_a_parse_with_the_warehouses_current_offers():
    before = Baseline(4, frozenset({"a", "b", "c", "d"}))
    ok = judge(batch(["a", "b", "c", "e"]), before)
    assert (ok.status, ok.reachable, ok.parsed, ok.offers, ok.offers_before) == ("ok", True, True, 4, 4)
    assert (ok.appeared, ok.gone, ok.passed) == (("e",), ("d",), True)
    shrunk = judge(batch(["a"]), before)
    assert shrunk.passed and "--accept-shrink" in (shrunk.hint or "")
    empty = judge(batch([]), before)
    assert (empty.status, empty.parsed, empty.passed) == ("failed", False, False)
    down = judge(batch([], "failed", "dns"), before)
    assert (down.status, down.reachable, down.passed, down.hint) == ("unreachable", False, False, "H")
    broken = judge(batch([], "failed", "layout"), None)
    assert (broken.status, broken.reachable, broken.parsed, broken.offers_before) == (
        "failed",
        True,
        False,
        None,
    )
    from connectors.base import Unchanged

    carried = batch(["a"])
    carried.unchanged.append(Unchanged({"region": "us-east-1"}))
    kept = judge(carried, before)
    assert kept.passed and kept.gone == () and "1 part(s) unchanged" in (kept.hint or "")
    nothing_new = batch([])
    nothing_new.unchanged.append(Unchanged({"region": "us-east-1"}))
    assert judge(nothing_new, before).status == "ok"
    skipped = judge(batch([], "skipped", "missing_credentials"), before)
    assert (skipped.status, skipped.reachable, skipped.passed) == ("skipped", None, True)


def test_check_replays_offline_loads_nothing_and_compares_with_the_last_good_run(home):
    result = runner.invoke(app, ["check", "--providers", "vultr,linode", "--replay", str(REPLAY), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["provider"]: r for r in json.loads(result.output)}
    assert set(rows) == {"vultr", "linode"}
    assert all(r["status"] == "ok" and r["offers"] > 0 and r["offers_before"] is None for r in rows.values())
    assert not (home / "warehouse.duckdb").exists() and not (home / "replay").exists()
    # after a refresh of the same cassette, nothing changed
    assert runner.invoke(app, ["refresh", "--providers", "vultr", "--replay", str(REPLAY)]).exit_code == 0
    result = runner.invoke(app, ["check", "--providers", "vultr", "--replay", str(REPLAY)])
    assert result.exit_code == 0, result.output
    (vultr,) = [line for line in result.output.splitlines() if "vultr" in line]
    count = rows["vultr"]["offers"]
    assert f"{count}→{count}" in vultr and "type" not in vultr


def test_check_exits_non_zero_when_a_source_cannot_be_read(home, tmp_path):
    cassette = tmp_path / "replay"
    shutil.copytree(REPLAY / "api.vultr.com", cassette / "api.vultr.com")  # linode's answers left out
    shutil.copytree(REPO / "tests" / "fixtures", tmp_path / "fixtures")  # bodies the cassette points at
    result = runner.invoke(app, ["check", "--providers", "vultr,linode", "--replay", str(cassette)])
    assert result.exit_code == 1
    assert "1 source(s) did not pass: linode (unreachable)" in result.output
    assert runner.invoke(app, ["check", "--providers", "cudo"]).exit_code == 2


def test_check_with_no_network_says_the_offline_hint_once(home, monkeypatch):
    import flows.cli  # noqa: F401  (the command imports make_client from connectors.http)
    from connectors import http

    real = http.make_client
    monkeypatch.setattr(
        http, "make_client", lambda **kw: real(**kw, transport=httpx.MockTransport(unresolved))
    )
    result = runner.invoke(app, ["check", "--providers", "vultr,linode,oci"], terminal_width=200)
    assert result.exit_code == 1
    assert result.output.count(CAUSE_HINTS["dns"]) == 1, result.output
    assert (
        "3 source(s) did not pass: oci (unreachable), vultr (unreachable), linode (unreachable)"
        in result.output
    )
