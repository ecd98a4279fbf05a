"""The HTTP client: retries, Retry-After, no retry on 4xx, size cap, redaction, record/replay."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from connectors.base import FetchError, ReplayMiss, ResponseTooLarge, Unreachable
from connectors.http import make_client, request_key, retry_after_seconds


def _client(handler, **kw):
    sleeps: list[float] = []
    client = make_client(transport=httpx.MockTransport(handler), sleep=sleeps.append, **kw)
    return client, sleeps


def test_retries_5xx_then_succeeds():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) < 3:
            return httpx.Response(503, text="busy")
        return httpx.Response(200, json={"ok": True})

    client, sleeps = _client(handler, backoff=0.1)
    raw = client.fetch("GET", "https://example.test/a")
    assert raw.status == 200 and raw.json() == {"ok": True}
    assert len(calls) == 3
    assert len(sleeps) == 2
    # exponential backoff with ±50% jitter: 0.1 then 0.2
    assert 0.05 <= sleeps[0] <= 0.15 and 0.1 <= sleeps[1] <= 0.3


def test_retry_after_seconds_is_honoured_on_429():
    calls = []

    def handler(request):
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(429, headers={"Retry-After": "7"})
        return httpx.Response(200, text="fine")

    client, sleeps = _client(handler)
    assert client.fetch("GET", "https://example.test/x").body == b"fine"
    assert sleeps == [7.0]


def test_retry_after_http_date_and_cap():
    now = time.time()
    later = format_datetime(datetime.fromtimestamp(now, UTC) + timedelta(seconds=30), usegmt=True)
    assert 28 <= retry_after_seconds(later, now=now) <= 31
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("garbage") is None

    def handler(request):
        return httpx.Response(503, headers={"Retry-After": "100000"})

    client, sleeps = _client(handler, retries=2)
    with pytest.raises(FetchError, match="HTTP 503"):
        client.fetch("GET", "https://example.test/slow")
    assert sleeps == [60.0, 60.0]  # capped at max_delay, two retries, then the error


def test_no_retry_on_404():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(404, text="no such thing")

    client, sleeps = _client(handler)
    with pytest.raises(FetchError, match=r"HTTP 404: no such thing"):
        client.fetch("GET", "https://example.test/missing")
    assert calls == [1] and sleeps == []


def test_connection_errors_are_retried_then_reported():
    calls = []

    def handler(request):
        calls.append(1)
        raise httpx.ConnectError("refused", request=request)

    client, sleeps = _client(handler, retries=3)
    with pytest.raises(Unreachable, match="ConnectError"):
        client.fetch("GET", "https://example.test/down")
    assert len(calls) == 4 and len(sleeps) == 3


def test_size_cap_by_content_length_and_while_streaming():
    def declared(request):
        return httpx.Response(200, content=b"x" * 2000)

    client, _ = _client(declared, max_bytes=1000)
    with pytest.raises(ResponseTooLarge, match="exceeds the 1,000-byte cap"):
        client.fetch("GET", "https://example.test/big")

    def undeclared(request):
        def gen():
            for _ in range(10):
                yield b"y" * 300

        return httpx.Response(200, content=gen())

    client, _ = _client(undeclared, max_bytes=1000)
    with pytest.raises(ResponseTooLarge, match="exceeded 1,000 bytes"):
        client.fetch("GET", "https://example.test/stream")
    # a per-request cap overrides the client's
    raw = client.fetch("GET", "https://example.test/stream", max_bytes=10_000)
    assert raw.size_bytes == 3000


def test_spooled_body_goes_to_disk(tmp_path: Path):
    client, _ = _client(lambda r: httpx.Response(200, content=b"z" * 5000), spool_dir=tmp_path)
    raw = client.fetch("GET", "https://example.test/file", spool=True)
    assert raw.body == b"" and raw.body_path is not None and raw.body_path.parent == tmp_path
    assert raw.read() == b"z" * 5000 and raw.size_bytes == 5000


def test_secrets_are_redacted_everywhere():
    seen = []

    def handler(request):
        seen.append(str(request.url))
        return httpx.Response(400, text=f"bad key {request.url.params['key']}")

    client, _ = _client(handler, secrets=["s3cr3t"])
    with pytest.raises(FetchError) as info:
        client.fetch("GET", "https://example.test/skus", params={"key": "s3cr3t"})
    assert "s3cr3t" in seen[0]  # the real request carries it...
    assert "s3cr3t" not in str(info.value)  # ...the error does not
    client, _ = _client(lambda r: httpx.Response(200, text="ok"), secrets=["s3cr3t"])
    raw = client.fetch("POST", "https://example.test/q?key=s3cr3t", json={"token": "s3cr3t"})
    assert "s3cr3t" not in raw.url and b"s3cr3t" not in (raw.request_body or b"")
    assert "key=***" in raw.url


def test_per_host_concurrency_bound():
    active = 0
    peak = 0
    lock = threading.Lock()

    def handler(request):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.02)
        with lock:
            active -= 1
        return httpx.Response(200, text="ok")

    client, _ = _client(handler, per_host=2)
    threads = [
        threading.Thread(target=client.fetch, args=("GET", f"https://example.test/{i}")) for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 2


def test_record_then_replay_roundtrip_without_the_secret(tmp_path: Path):
    def handler(request):
        return httpx.Response(200, json={"page": request.url.params.get("page")}, headers={"ETag": '"v1"'})

    recorder = make_client(transport=httpx.MockTransport(handler), record=tmp_path, secrets=["k3y"])
    first = recorder.fetch("GET", "https://api.example.test/items", params={"page": "1", "key": "k3y"})
    recorder.fetch("POST", "https://api.example.test/graphql", json={"query": "{ a }"})
    files = sorted(p.name for p in (tmp_path / "api.example.test").iterdir())
    assert len(files) == 4  # a .json and a .body per exchange
    assert all("k3y" not in (tmp_path / "api.example.test" / f).read_text() for f in files)

    # replay with a different placeholder value: it is redacted to *** too, so it matches
    player = make_client(replay=tmp_path, secrets=["placeholder"])
    again = player.fetch("GET", "https://api.example.test/items", params={"key": "placeholder", "page": "1"})
    assert again.json() == first.json() == {"page": "1"}
    assert again.headers["etag"] == '"v1"'
    assert player.fetch("POST", "https://api.example.test/graphql", json={"query": "{ a }"}).status == 200
    with pytest.raises(ReplayMiss, match=r"no recorded answer for GET https://api\.example\.test/other"):
        player.fetch("GET", "https://api.example.test/other")


def test_replay_body_file_may_point_at_a_shared_fixture(tmp_path: Path):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "body.json").write_text('{"a": 1}')
    host = tmp_path / "cassette" / "h.test"
    host.mkdir(parents=True)
    (host / "x.json").write_text(
        json.dumps(
            {
                "request": {"method": "GET", "url": "https://h.test/x?b=2&a=1", "body": None},
                "response": {"status": 200, "headers": {}, "body_file": "../../fixtures/body.json"},
            }
        )
    )
    player = make_client(replay=tmp_path / "cassette")
    assert player.fetch("GET", "https://h.test/x?a=1&b=2").json() == {"a": 1}  # query order ignored


def test_request_key_normalizes_query_order():
    assert request_key("get", "https://a/b?y=1&x=2", None) == request_key("GET", "https://a/b?x=2&y=1", b"")


def test_record_and_replay_are_exclusive(tmp_path: Path):
    with pytest.raises(ValueError, match="exclusive"):
        make_client(record=tmp_path, replay=tmp_path)


def test_url_encoded_secrets_are_redacted_too():
    client, _ = _client(lambda r: httpx.Response(200, text="ok"), secrets=["abc+def/ghi="])
    raw = client.fetch("GET", "https://example.test/skus", params={"key": "abc+def/ghi="})
    assert "abc" not in raw.url and raw.url.endswith("key=***")


def test_every_request_names_the_project_and_a_contact_and_a_setting_replaces_it():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    default, _ = _client(handler)
    default.fetch("GET", "https://example.test/a")
    agent = seen[-1].headers["user-agent"]
    # a provider's operator can tell who asks and where to write: project/version and a URL
    assert agent.startswith("gpucost/") and "(+https://" in agent
    own, _ = _client(handler, user_agent="acme-prices/2 (+https://acme.example/contact)")
    own.fetch("GET", "https://example.test/b")
    assert seen[-1].headers["user-agent"] == "acme-prices/2 (+https://acme.example/contact)"


@pytest.mark.parametrize("agent", ["", "   ", "two\nlines", "a\r\nX-Injected: 1"])
def test_a_user_agent_that_is_not_one_line_is_refused(agent: str):
    # a header value with a line break would be a header injection; an empty one names nobody
    with pytest.raises(ValueError, match="one non-empty line"):
        make_client(transport=httpx.MockTransport(lambda r: httpx.Response(200)), user_agent=agent)


def test_a_per_request_timeout_replaces_the_clients_for_that_request_only():
    timeouts: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"])
        return httpx.Response(200, json={})

    client, _ = _client(handler, timeout=httpx.Timeout(30.0, connect=10.0))
    client.fetch("GET", "https://example.test/slow", timeout=httpx.Timeout(180.0, connect=10.0))
    client.fetch("GET", "https://example.test/fast")
    assert timeouts[0]["read"] == 180.0 and timeouts[0]["connect"] == 10.0
    assert timeouts[1]["read"] == 30.0  # the next request is back on the client's own
