"""Parse while the body streams, hash in the same pass, fetch in parallel: the HTTP client's side.

The contract is in connectors/base.py ("Large bodies"); the AWS connector's use of it is tested in
tests/test_aws.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import httpx
import pytest

from connectors import http
from connectors.base import FetchError, RawResponse, ResponseTooLarge
from connectors.http import fetch_concurrently, make_client, remove_spooled

BODY = b"".join(b"line %05d of a large body\n" % i for i in range(20_000))  # ~540 kB


class Recorder:
    """A BodyParser that keeps what it was fed; `close` returns one item: the body's length."""

    made: list[Recorder]

    def __init__(self, fail_at: int | None = None) -> None:
        self.pieces: list[bytes] = []
        self.fail_at = fail_at
        self.closed = False

    def feed(self, chunk: bytes) -> None:
        self.pieces.append(chunk)
        if self.fail_at is not None and sum(map(len, self.pieces)) >= self.fail_at:
            raise ValueError("a parser bug")

    def close(self) -> Iterator[int]:
        self.closed = True
        return iter([len(b"".join(self.pieces))])


def _factory(made: list[Recorder], **kwargs: int) -> object:
    def make() -> Recorder:
        made.append(Recorder(**kwargs))
        return made[-1]

    return make


class Pieces(httpx.SyncByteStream):
    """The body in pieces (1000 bytes, as a slow link delivers); with `drop`, breaks off half-way
    the first time."""

    def __init__(self, body: bytes, drop: list[bool] | None = None, size: int = 1000) -> None:
        self._body, self._drop, self._size = body, drop, size

    def __iter__(self) -> Iterator[bytes]:
        for i in range(0, len(self._body), self._size):
            if self._drop is not None and not self._drop and i >= len(self._body) // 2:
                self._drop.append(True)
                raise httpx.RemoteProtocolError("peer closed connection without sending complete body")
            yield self._body[i : i + self._size]


def _client(handler, **kwargs):
    return make_client(transport=httpx.MockTransport(handler), sleep=lambda _: None, **kwargs)


@pytest.mark.parametrize("spool", [False, True])
def test_the_parser_is_fed_the_whole_body_in_order_and_its_items_kept(tmp_path: Path, spool: bool) -> None:
    made: list[Recorder] = []
    with _client(lambda r: httpx.Response(200, stream=Pieces(BODY)), spool_dir=tmp_path) as client:
        raw = client.fetch("GET", "https://example.test/big", spool=spool, stream=_factory(made))
    assert len(made) == 1 and made[0].closed
    assert b"".join(made[0].pieces) == BODY == raw.read()
    assert raw.parsed == (len(BODY),)
    assert raw.sha256 == hashlib.sha256(BODY).hexdigest()
    assert (raw.body_path is not None) is spool
    remove_spooled(raw)


def test_a_spooled_body_reaches_the_parser_in_large_blocks(tmp_path: Path) -> None:
    made: list[Recorder] = []
    body = b"x" * (20 * 1024 * 1024)
    handler = lambda r: httpx.Response(200, stream=Pieces(body, size=64 * 1024))  # noqa: E731
    with _client(handler, spool_dir=tmp_path) as client:
        raw = client.fetch("GET", "https://example.test/big", spool=True, stream=_factory(made))
    # 320 network chunks of 64 KiB reach the parser as the client's blocks, then the rest
    block = http._BLOCK
    full, rest = divmod(len(body), block)
    assert [len(p) for p in made[0].pieces] == [block] * full + ([rest] if rest else [])
    assert 1 < len(made[0].pieces) < 320
    assert raw.parsed == (len(body),) and raw.read() == body
    remove_spooled(raw)


def test_every_attempt_gets_a_fresh_parser_and_only_the_good_one_counts(tmp_path: Path) -> None:
    made: list[Recorder] = []
    dropped: list[bool] = []
    with _client(lambda r: httpx.Response(200, stream=Pieces(BODY, dropped)), spool_dir=tmp_path) as client:
        raw = client.fetch("GET", "https://example.test/big", spool=True, stream=_factory(made))
    assert dropped and len(made) == 2  # the broken attempt's parser is thrown away
    assert raw.parsed == (len(BODY),) and raw.read() == BODY
    assert [p.name for p in tmp_path.iterdir()] == [raw.body_path.name]  # the broken attempt's file is gone
    remove_spooled(raw)


def test_a_parser_that_raises_is_dropped_and_the_body_still_arrives_whole(tmp_path: Path) -> None:
    made: list[Recorder] = []
    with _client(lambda r: httpx.Response(200, stream=Pieces(BODY)), spool_dir=tmp_path) as client:
        raw = client.fetch("GET", "https://example.test/big", spool=True, stream=_factory(made, fail_at=1))
    assert raw.parsed is None and not made[0].closed
    assert raw.read() == BODY and raw.sha256 == hashlib.sha256(BODY).hexdigest()
    remove_spooled(raw)


@pytest.mark.parametrize("status", [304, 404])
def test_no_parser_for_an_answer_that_is_not_2xx(status: int) -> None:
    made: list[Recorder] = []
    with _client(lambda r: httpx.Response(status, content=b"")) as client:
        raw = client.fetch("GET", "https://example.test/big", stream=_factory(made), ok_statuses=[404])
    assert made == [] and raw.parsed is None


def test_the_parser_and_the_hash_see_the_body_redacted(tmp_path: Path) -> None:
    secret = "s3cr3t-key"
    body = BODY[:5000] + f"echo {secret} back".encode() + BODY[5000:10000]
    made: list[Recorder] = []
    handler = lambda r: httpx.Response(200, stream=Pieces(body))  # noqa: E731 - splits the secret
    with _client(handler, secrets=[secret], spool_dir=tmp_path) as client:
        raw = client.fetch("GET", "https://example.test/big", spool=True, stream=_factory(made))
    redacted = body.replace(secret.encode(), b"***")
    assert b"".join(made[0].pieces) == redacted == raw.read()
    assert raw.sha256 == hashlib.sha256(redacted).hexdigest()
    remove_spooled(raw)


def test_a_body_over_the_cap_while_streaming_leaves_no_spool_file(tmp_path: Path) -> None:
    made: list[Recorder] = []
    with (
        _client(lambda r: httpx.Response(200, stream=Pieces(BODY)), spool_dir=tmp_path) as client,
        pytest.raises(ResponseTooLarge),
    ):
        client.fetch("GET", "https://example.test/big", spool=True, max_bytes=100_000, stream=_factory(made))
    assert list(tmp_path.iterdir()) == []


# --- fetch_concurrently ----------------------------------------------------------------------------


def _response(url: str, body_path: Path | None = None) -> RawResponse:
    return RawResponse(url=url, method="GET", status=200, fetched_at=datetime.now(UTC), body_path=body_path)


def test_fetch_concurrently_runs_calls_in_parallel_and_yields_them_in_order() -> None:
    barrier = threading.Barrier(3, timeout=5)  # passes only if all three run at once

    def call(name: str, delay: float):
        def run() -> RawResponse:
            barrier.wait()
            time.sleep(delay)
            return _response(name)

        return run

    calls = [call("a", 0.2), call("b", 0.0), call("c", 0.1)]
    assert [r.url for r in fetch_concurrently(calls, workers=3)] == ["a", "b", "c"]


def test_fetch_concurrently_with_one_worker_runs_in_line() -> None:
    seen: list[str] = []

    def call(name: str):
        return lambda: seen.append(name) or _response(name)

    results = fetch_concurrently([call("a"), call("b")], workers=1)
    assert seen == []  # nothing runs before it is asked for
    assert next(results).url == "a" and seen == ["a"]
    assert [r.url for r in results] == ["b"]


def test_fetch_concurrently_raises_the_first_failure_in_order_and_removes_unyielded_bodies(
    tmp_path: Path,
) -> None:
    spooled = tmp_path / "later-body"

    def fail_late() -> RawResponse:
        time.sleep(0.1)
        raise FetchError("first in order, last to fail")

    def fail_early() -> RawResponse:
        raise FetchError("second in order")

    def succeed() -> RawResponse:
        spooled.write_bytes(b"spooled")
        return _response("c", spooled)

    results = fetch_concurrently([lambda: _response("a"), fail_late, fail_early, succeed], workers=4)
    assert next(results).url == "a"
    with pytest.raises(FetchError, match="first in order"):
        next(results)
    assert not spooled.exists()  # never handed to the caller, so never archived: removed


def test_fetch_concurrently_closed_early_stops_and_cleans_up(tmp_path: Path) -> None:
    spooled = tmp_path / "body"

    def succeed() -> RawResponse:
        spooled.write_bytes(b"spooled")
        return _response("b", spooled)

    results = fetch_concurrently([lambda: _response("a"), succeed], workers=2)
    assert next(results).url == "a"
    results.close()
    assert not spooled.exists()


def test_a_cancelled_request_stops_at_its_next_chunk_and_leaves_no_file(tmp_path: Path) -> None:
    class Endless(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for _ in range(1000):  # 10 s unless cancelled
                time.sleep(0.01)
                yield b"x" * 1000

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/fails":
            time.sleep(0.1)
            return httpx.Response(404, text="gone")
        return httpx.Response(200, stream=Endless())

    begun = time.monotonic()
    with _client(handler, spool_dir=tmp_path) as client, pytest.raises(FetchError, match="404"):
        list(
            fetch_concurrently(
                [
                    lambda: client.fetch("GET", "https://example.test/fails"),
                    lambda: client.fetch("GET", "https://example.test/endless", spool=True),
                ],
                workers=2,
            )
        )
    assert time.monotonic() - begun < 5
    assert list(tmp_path.iterdir()) == []


# --- the archive takes the hash computed while the body streamed -----------------------------------


def test_land_raw_addresses_a_body_by_the_hash_the_client_computed(tmp_path: Path) -> None:
    from warehouse.db import open_warehouse
    from warehouse.load import land_raw

    with _client(lambda r: httpx.Response(200, content=BODY), spool_dir=tmp_path / "spool") as client:
        raw = client.fetch("GET", "https://example.test/big", spool=True)
    con: duckdb.DuckDBPyConnection = open_warehouse(tmp_path / "wh.duckdb")
    try:
        # A stand-in digest proves land_raw trusts the given hash instead of reading the file again.
        stand_in = "0" * 64
        land_raw(con, tmp_path / "raw", "run-1", "example", [dataclasses.replace(raw, sha256=stand_in)])
        stored = con.execute("select body_sha256 from raw.responses").fetchall()
    finally:
        con.close()
    assert stored == [(stand_in,)]


# --- a body filter: spool only what parsing reads ----------------------------------------------------


class EvenLines:
    """A BodyFilter that keeps the lines ending in an even digit, after a two-line header it checks.

    `refuse` makes it raise while it waits for the header (what a filter may do); `break_at` makes
    it raise after it has kept bytes (what the contract forbids)."""

    name = "even-lines"

    def __init__(self, refuse: bool = False, break_at: int | None = None) -> None:
        self._head = b""
        self._tail = b""
        self._started = False
        self._refuse, self._break_at, self._seen = refuse, break_at, 0

    def feed(self, chunk: bytes) -> bytes:
        self._seen += len(chunk)
        if self._break_at is not None and self._seen >= self._break_at:
            raise ValueError("a filter bug")
        if not self._started:
            self._head += chunk
            if self._head.count(b"\n") < 2:
                return b""
            if self._refuse:
                raise ValueError("not the header this filter knows")
            self._started = True
            header, _, chunk = self._head.partition(b"\n")
            chunk = header + b"\n" + chunk  # the header line is kept whole, as it came
            return self._keep(chunk, first=True)
        return self._keep(chunk)

    def close(self) -> bytes:
        rest, self._tail = self._tail, b""
        return rest if rest[-1:] in b"02468" else b""

    def _keep(self, chunk: bytes, first: bool = False) -> bytes:
        data = self._tail + chunk
        cut = data.rfind(b"\n") + 1
        self._tail = data[cut:]
        lines = data[:cut].splitlines(keepends=True)
        head = [lines.pop(0)] if first else []
        return b"".join(head + [line for line in lines if line[-2:-1] in b"02468"])


def _even(body: bytes) -> bytes:
    lines = body.splitlines(keepends=True)
    return lines[0] + b"".join(line for line in lines[1:] if line[-2:-1] in b"02468")


def test_a_filtered_body_is_spooled_and_parsed_as_kept_but_hashed_and_sized_as_it_came(
    tmp_path: Path,
) -> None:
    made: list[Recorder] = []
    with _client(lambda r: httpx.Response(200, stream=Pieces(BODY)), spool_dir=tmp_path) as client:
        raw = client.fetch(
            "GET", "https://example.test/big", spool=True, stream=_factory(made), keep=EvenLines
        )
    kept = _even(BODY)
    assert len(kept) < len(BODY) * 0.6
    assert raw.read() == kept == b"".join(made[0].pieces)  # the parser reads what the spool holds
    assert raw.parsed == (len(kept),)
    assert raw.prefilter == "even-lines"
    assert (raw.sha256, raw.size_bytes) == (hashlib.sha256(BODY).hexdigest(), len(BODY))
    remove_spooled(raw)


def test_a_filter_that_refuses_the_body_leaves_it_spooled_whole(tmp_path: Path) -> None:
    refusing = lambda: EvenLines(refuse=True)  # noqa: E731
    with _client(lambda r: httpx.Response(200, stream=Pieces(BODY)), spool_dir=tmp_path) as client:
        raw = client.fetch("GET", "https://example.test/big", spool=True, keep=refusing)
    assert raw.read() == BODY and raw.prefilter is None and raw.wire_bytes is None
    assert raw.sha256 == hashlib.sha256(BODY).hexdigest()
    remove_spooled(raw)


def test_a_filter_that_fails_after_keeping_bytes_fails_the_fetch_and_leaves_no_file(tmp_path: Path) -> None:
    # the body must span several client blocks for the filter to have kept some before it breaks
    body = BODY * 20
    breaking = lambda: EvenLines(break_at=len(body) // 2)  # noqa: E731
    with (
        _client(
            lambda r: httpx.Response(200, stream=Pieces(body, size=64 * 1024)), spool_dir=tmp_path
        ) as client,
        pytest.raises(FetchError, match="body filter even-lines failed after keeping part"),
    ):
        client.fetch("GET", "https://example.test/big", spool=True, keep=breaking)
    assert list(tmp_path.iterdir()) == []


def test_a_filter_sees_only_good_answers_and_needs_a_spooled_body(tmp_path: Path) -> None:
    with _client(lambda r: httpx.Response(404, content=b"not here\nat all\n"), spool_dir=tmp_path) as client:
        raw = client.fetch("GET", "https://example.test/big", spool=True, keep=EvenLines, ok_statuses=[404])
        assert raw.read() == b"not here\nat all\n" and raw.prefilter is None
        remove_spooled(raw)
        with pytest.raises(ValueError, match="spool=True"):
            client.fetch("GET", "https://example.test/big", keep=EvenLines)


def test_a_filtered_body_retried_after_breaking_off_keeps_only_the_good_attempt(tmp_path: Path) -> None:
    dropped: list[bool] = []
    with _client(lambda r: httpx.Response(200, stream=Pieces(BODY, dropped)), spool_dir=tmp_path) as client:
        raw = client.fetch("GET", "https://example.test/big", spool=True, keep=EvenLines)
    assert dropped and raw.read() == _even(BODY)
    assert [p.name for p in tmp_path.iterdir()] == [raw.body_path.name]
    remove_spooled(raw)


# --- the network layer reads in large pieces -----------------------------------------------------------


def test_the_client_reads_the_socket_in_pieces_larger_than_httpcore_asks(tmp_path: Path) -> None:
    """httpcore asks for 64 KiB per read; `network_transport` asks for READ_BYTES. Over loopback a
    large body then arrives in pieces above 64 KiB; if a new httpcore stops honouring the swapped
    backend, this fails (downloads would still work, only slower)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = b"y" * (16 * 1024 * 1024)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with (
            httpx.Client(transport=http.network_transport()) as client,
            client.stream("GET", url) as response,
        ):
            sizes = [len(chunk) for chunk in response.iter_raw()]
    finally:
        server.shutdown()
        server.server_close()
    assert sum(sizes) == len(body)
    assert max(sizes) > 64 * 1024
    assert max(sizes) <= http.READ_BYTES


def test_make_client_sends_over_the_large_read_network_layer() -> None:
    with make_client() as client:
        transport = client._transport
        while hasattr(transport, "_inner"):
            transport = transport._inner
    assert isinstance(transport._pool._network_backend, http._LargeReadBackend)
