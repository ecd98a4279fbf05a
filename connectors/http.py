"""The one HTTP client factory: timeouts, retries, a size cap, a per-host bound, record/replay.

Every connector gets a `Client` (an `httpx.Client`) from `make_client` and calls `client.fetch(...)`,
which returns a `RawResponse`. The behaviour lives in a stack of transports, each doing one thing:

    HostLimitTransport   at most `per_host` requests in flight to one host (until the body is read)
    RetryTransport       retries 429/5xx and connection errors with exponential backoff and jitter,
                         honouring `Retry-After`; never retries other 4xx, nor a host name that
                         does not resolve (`HostNotFound`: offline, a retry ladder only delays that)
    SizeCapTransport     fails a response whose body grows past `max_bytes` (per request overridable)
    RecordTransport      (record=DIR) writes every exchange to a cassette as it streams through
    HTTPTransport | ReplayTransport (replay=DIR) serves exchanges from a cassette; a request it has
                         no answer for raises `ReplayMiss` instead of touching the network

Retries live here, once; flows do not retry providers again. A body that breaks off mid-way
(connection dropped, peer closed early) is retried like a connection error, and a failed download
leaves no partial spool file behind.

One pass over a body: `fetch` hashes it (`RawResponse.sha256`) and, given `stream=` (a
`BodyParser` factory, see connectors/base.py "Large bodies"), parses it while it arrives; a spooled
body is written and hashed on a helper thread; given `keep=` (a `BodyFilter` factory) only what the
filter keeps is spooled and parsed. `network_transport` reads the socket in 1 MiB pieces.
`fetch_concurrently` runs independent fetches of one provider in parallel (at most `per_host` at a
time), yields them in order, and on the first failure cancels the rest and removes what they
spooled.

Deadlines, not only timeouts: httpx's read timeout restarts with every chunk, so a server that drips
a byte a second would hold a run forever. Every request has an overall deadline
(`request_deadline` seconds, from the first attempt to the last byte, retries and their waits
included), and `provider_deadline(seconds)` bounds everything one provider fetches (a context
manager the pipeline wraps around each connector's fetch). Passing either raises `DeadlineExceeded`.

Secrets: the client is given the credential values it may see. They are replaced by `***` in every
URL, request body, header, response body and error message it records or returns (a 403 that
quotes the key, a GraphQL error echoing a header), so a cassette or raw payload never holds a key,
and replay works without credentials (a connector in replay mode is handed placeholder values that
are redacted the same way, so its requests match the recorded ones).

Cassette format (one exchange = two files under DIR/<host>/):

    <name>.json   {"request": {"method", "url", "body"},
                   "response": {"status", "headers", "body_file"}}
    <name>.body   the response body, byte for byte (`body_file` is relative to the .json file, so a
                  hand-written cassette may point at a shared fixture instead)
"""

from __future__ import annotations

import contextvars
import email.utils
import hashlib
import json
import logging
import queue
import random
import re
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, urlencode, urlsplit, urlunsplit

import httpcore
import httpx

from connectors.base import (
    CHALLENGE_HINT,
    BodyFilter,
    BodyParser,
    DeadlineExceeded,
    FetchError,
    HostNotFound,
    RawResponse,
    ReplayMiss,
    ResponseTooLarge,
    Unreachable,
    challenge_page,
    ends_early,
)

log = logging.getLogger(__name__)

# Who is asking, for a provider's operators: the project, its version, and where to read about it
# and reach its maintainers. `Settings.user_agent` (GPUCOST_USER_AGENT) replaces it, e.g. to name the
# operator of a deployment; the pipeline passes it to `make_client`.
USER_AGENT = "gpucost/0.1.0 (+https://github.com/gpucost/gpucost#readme; GPU price catalog)"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_BYTES_EXTENSION = "gpucost_max_bytes"
DEADLINE_EXTENSION = "gpucost_deadline"  # time.monotonic() by which the request must be done
DEFAULT_REQUEST_DEADLINE = 600.0  # an AWS offer file is hundreds of MB: minutes on a slow link
REDACTED = "***"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Headers worth keeping with a raw response: they explain it or let us revalidate it.
KEPT_HEADERS = (
    "content-type",
    "content-length",
    "etag",
    "last-modified",
    "date",
    "cache-control",
    "retry-after",
)
_CHUNK = 1024 * 1024
# A body is handed to the spool writer and the stream parser in blocks of about this size: large
# enough that per-block Python work and thread hand-offs vanish, small enough to keep memory flat
# (a stream holds a few blocks: the one gathering, the writer's queue; measured as fast as 8 MiB).
_BLOCK = 4 * 1024 * 1024


def _forms(secrets: Iterable[str]) -> list[str]:
    forms = {form for s in secrets if s for form in (s, quote(s, safe=""), quote_plus(s))}
    return sorted(forms, key=len, reverse=True)  # longest first: a form may contain another


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace each secret, as written and as a URL would encode it, with `***`."""
    for form in _forms(secrets):
        text = text.replace(form, REDACTED)
    return text


def redact_bytes(body: bytes, secrets: Iterable[str]) -> bytes:
    """`redact` for a body, byte for byte everywhere else."""
    for form in _forms(secrets):
        body = body.replace(form.encode(), REDACTED.encode())
    return body


class _StreamRedactor:
    """Redacts secrets from a stream of chunks, holding back a tail so none is split unseen."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._forms = [f.encode() for f in _forms(secrets)]
        self._keep = max((len(f) for f in self._forms), default=1) - 1
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self._forms:
            return chunk
        data = self._pending + chunk
        for form in self._forms:
            data = data.replace(form, REDACTED.encode())
        cut = max(0, len(data) - self._keep)
        self._pending = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        rest, self._pending = self._pending, b""
        return rest


_provider_deadline: ContextVar[float | None] = ContextVar("gpucost_provider_deadline", default=None)


@contextmanager
def provider_deadline(seconds: float | None) -> Iterator[None]:
    """Bound every request made inside the block (one provider's fetch) to `seconds` in all."""
    if seconds is None:
        yield
        return
    token = _provider_deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _provider_deadline.reset(token)


_cancelled: ContextVar[threading.Event | None] = ContextVar("gpucost_fetch_cancelled", default=None)


def _check_cancelled(what: str) -> None:
    event = _cancelled.get()
    if event is not None and event.is_set():
        raise FetchError(f"{what}: cancelled, another request of the same provider failed")


def _check_deadline(deadline: float | None, what: str) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineExceeded(
            f"{what}: passed its deadline (a slow or stalled server); raise "
            "GPUCOST_HTTP_REQUEST_DEADLINE_SECONDS or GPUCOST_PROVIDER_DEADLINE_SECONDS if the source is "
            "really this slow"
        )


def request_key(method: str, url: str, body: bytes | str | None) -> str:
    """A stable identity for a request: method, URL with sorted query, body (all redacted)."""
    parts = urlsplit(url)
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    normal_url = urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    return f"{method.upper()} {normal_url}\n{body or ''}"


# --- response streams -------------------------------------------------------------------------


class _FileStream(httpx.SyncByteStream):
    def __init__(self, path: Path) -> None:
        self._path = path

    def __iter__(self) -> Iterator[bytes]:
        with self._path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                yield chunk


class _WatchedStream(httpx.SyncByteStream):
    """Wraps a response stream: counts bytes against a cap, runs a callback once on close."""

    def __init__(
        self,
        inner: httpx.SyncByteStream,
        *,
        max_bytes: int | None = None,
        url: str = "",
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._inner = inner
        self._max_bytes = max_bytes
        self._url = url
        self._on_close = on_close
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        for chunk in self._inner:
            seen += len(chunk)
            if self._max_bytes is not None and seen > self._max_bytes:
                raise ResponseTooLarge(
                    f"{self._url}: body exceeded {self._max_bytes:,} bytes; raise the cap for this "
                    "request (max_bytes=...) if the source really is this large"
                )
            yield chunk

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._inner.close()
        finally:
            if self._on_close is not None:
                self._on_close()


def _sync_stream(response: httpx.Response) -> httpx.SyncByteStream:
    """The body stream of a response from a sync transport.

    httpx types `Response.stream` as sync-or-async; every transport here is sync, so an async-only
    stream is a wiring mistake, said at once rather than as a failed iteration later.
    """
    stream = response.stream
    if not isinstance(stream, httpx.SyncByteStream):
        raise TypeError(f"{type(stream).__name__} is not a sync byte stream; gpucost's clients are sync")
    return stream


def _restream(response: httpx.Response, stream: httpx.SyncByteStream) -> httpx.Response:
    """The same response over a wrapped stream.

    A new Response rather than assigning `.stream`: httpx pre-reads in-memory bodies at
    construction (MockTransport, ReplayTransport), and such a response would never pull the wrapper.
    """
    return httpx.Response(
        response.status_code,
        headers=response.headers,
        stream=stream,
        request=response._request,
        extensions=response.extensions,
    )


# --- the network layer --------------------------------------------------------------------------

# Bytes asked of the socket per read. httpcore asks 64 KiB (HTTP11Connection.READ_NUM_BYTES), so a
# 700 MB offer file arrives as ~10,600 chunks, each passing h11 and every wrapping stream; at 1 MiB
# the per-chunk Python work is 1/16 of that (benchmarks/aws_offer_file.py: the raw httpx read of
# the 694 MB CSV over loopback, 0.30 s -> 0.22 s). A read returns what the socket holds, so a small
# response is not delayed. Over TLS one read returns at most one TLS record (16 KiB) whatever is
# asked: there the link, not the chunk count, sets the pace.
READ_BYTES = 1024 * 1024


class _LargeReadStream(httpcore.NetworkStream):
    """A network stream that asks the socket for at least READ_BYTES per read."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max(max_bytes, READ_BYTES), timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _LargeReadStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _LargeReadBackend(httpcore.NetworkBackend):
    """httpcore's network backend (its public extension point) handing out `_LargeReadStream`s."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return _LargeReadStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return _LargeReadStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def network_transport() -> httpx.HTTPTransport:
    """httpx's HTTP transport over the large-read network backend: what `make_client` sends with.

    httpx builds its httpcore pool without exposing the pool's `network_backend` argument, so the
    backend is swapped on the pool it built (connections read the attribute when they are made).
    Should a future httpcore rename it, reads fall back to 64 KiB: slower, never wrong, and
    tests/test_http_reads.py fails to say so.
    """
    transport = httpx.HTTPTransport(retries=0)
    pool = transport._pool
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, httpcore.NetworkBackend):
        pool._network_backend = _LargeReadBackend(backend)
    return transport


# --- transports ---------------------------------------------------------------------------------


class HostLimitTransport(httpx.BaseTransport):
    """At most `per_host` requests in flight to any one host; a slot is held until the body closes."""

    def __init__(self, inner: httpx.BaseTransport, per_host: int) -> None:
        self._inner = inner
        self._per_host = per_host
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()

    def _slot(self, host: str) -> threading.BoundedSemaphore:
        with self._lock:
            return self._slots.setdefault(host, threading.BoundedSemaphore(self._per_host))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        slot = self._slot(request.url.host)
        slot.acquire()
        try:
            response = self._inner.handle_request(request)
        except BaseException:
            slot.release()
            raise
        return _restream(response, _WatchedStream(_sync_stream(response), on_close=slot.release))

    def close(self) -> None:
        self._inner.close()


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or HTTP-date), None if absent."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# What resolvers say when a name does not resolve (glibc, musl, macOS, Windows), for errors whose
# `socket.gaierror` cause was not kept
_UNRESOLVED = re.compile(
    r"name resolution|name or service not known|nodename nor servname|getaddrinfo failed|"
    r"no address associated with hostname",
    re.IGNORECASE,
)


def name_not_resolved(exc: BaseException) -> bool:
    """Whether a connection error is a host name that did not resolve (DNS), not a refused or
    timed-out connection: the only connection error that retrying cannot mend within a run."""
    seen: BaseException | None = exc
    for _ in range(8):  # httpx -> httpcore -> socket: a short chain; bounded against cycles
        if seen is None:
            break
        if isinstance(seen, socket.gaierror):
            return True
        seen = seen.__cause__ or seen.__context__
    return isinstance(exc, httpx.ConnectError) and bool(_UNRESOLVED.search(str(exc)))


class RetryTransport(httpx.BaseTransport):
    """Retries 429/5xx responses and connection errors; never other 4xx.

    Delay for attempt n (0-based) is `backoff * 2**n` with ±50% jitter, or the server's
    `Retry-After` when it sends one, capped at `max_delay` either way so a hostile header cannot
    stall a run.
    """

    def __init__(
        self,
        inner: httpx.BaseTransport,
        *,
        retries: int = 4,
        backoff: float = 0.5,
        max_delay: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._inner = inner
        self._retries = retries
        self._backoff = backoff
        self._max_delay = max_delay
        self._sleep = sleep

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._max_delay)
        base = self._backoff * (2**attempt)
        return min(base * random.uniform(0.5, 1.5), self._max_delay)

    def _time_left(self, request: httpx.Request, delay: float) -> bool:
        deadline = request.extensions.get(DEADLINE_EXTENSION)
        return deadline is None or time.monotonic() + delay < deadline

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self._inner.handle_request(request)
            except httpx.TransportError as exc:
                delay = self._delay(attempt, None)
                if (
                    isinstance(exc, httpx.UnsupportedProtocol)
                    or name_not_resolved(exc)
                    or attempt >= self._retries
                    or not self._time_left(request, delay)
                ):
                    raise
                self._sleep(delay)
                attempt += 1
                continue
            if response.status_code not in RETRY_STATUSES or attempt >= self._retries:
                return response
            delay = self._delay(attempt, retry_after_seconds(response.headers.get("retry-after")))
            if not self._time_left(request, delay):
                return response  # no time for another try: the caller sees the 429/5xx
            response.close()
            self._sleep(delay)
            attempt += 1

    def close(self) -> None:
        self._inner.close()


class SizeCapTransport(httpx.BaseTransport):
    """Fails a body larger than the cap: at once when Content-Length says so, else while streaming.

    The cap counts bytes as they come over the wire (compressed, when the server compresses).
    """

    def __init__(self, inner: httpx.BaseTransport, max_bytes: int) -> None:
        self._inner = inner
        self._max_bytes = max_bytes

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        cap = int(request.extensions.get(MAX_BYTES_EXTENSION, self._max_bytes))
        response = self._inner.handle_request(request)
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > cap:
            response.close()
            raise ResponseTooLarge(
                f"{request.url.copy_with(query=None)}: Content-Length {int(declared):,} exceeds the "
                f"{cap:,}-byte cap; raise max_bytes for this request if that is expected"
            )
        return _restream(
            response,
            _WatchedStream(
                _sync_stream(response),
                max_bytes=cap,
                url=str(request.url.copy_with(query=None)),
            ),
        )

    def close(self) -> None:
        self._inner.close()


def _slug(url: httpx.URL) -> str:
    tail = url.path.rstrip("/").rsplit("/", 1)[-1] or "root"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", tail)[:60]


class RecordTransport(httpx.BaseTransport):
    """Writes every exchange to a cassette directory while streaming it to the caller."""

    def __init__(self, inner: httpx.BaseTransport, directory: Path, secrets: frozenset[str]) -> None:
        self._inner = inner
        self._dir = directory
        self._secrets = secrets

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        url = redact(str(request.url), self._secrets)
        body = redact(request.content.decode("utf-8", "replace"), self._secrets) or None
        key = request_key(request.method, url, body)
        name = f"{_slug(request.url)}__{hashlib.sha256(key.encode()).hexdigest()[:12]}"
        host_dir = self._dir / request.url.host
        host_dir.mkdir(parents=True, exist_ok=True)
        body_path = host_dir / f"{name}.body"
        part = body_path.with_suffix(".part")
        inner_stream = _sync_stream(response)
        secrets = self._secrets

        class _Tee(httpx.SyncByteStream):
            def __iter__(self) -> Iterator[bytes]:
                with part.open("wb") as out:
                    for chunk in inner_stream:
                        out.write(chunk)
                        yield chunk
                part.replace(body_path)
                headers = {
                    k: redact(v, secrets)
                    for k, v in response.headers.items()
                    # content-encoding too: the body file holds the bytes as sent (maybe gzip)
                    if k.lower() in (*KEPT_HEADERS, "content-encoding") and k.lower() != "content-length"
                }
                meta = {
                    "request": {"method": request.method, "url": url, "body": body},
                    "response": {
                        "status": response.status_code,
                        "headers": headers,
                        "body_file": body_path.name,
                    },
                }
                (host_dir / f"{name}.json").write_text(json.dumps(meta, indent=2) + "\n")

            def close(self) -> None:
                inner_stream.close()

        return _restream(response, _Tee())

    def close(self) -> None:
        self._inner.close()


class ReplayTransport(httpx.BaseTransport):
    """Serves recorded exchanges; a request with no recorded answer raises `ReplayMiss`."""

    def __init__(self, directory: Path, secrets: frozenset[str]) -> None:
        if not directory.is_dir():
            raise FileNotFoundError(f"replay cassette directory {directory} does not exist")
        self._secrets = secrets
        self._exchanges: dict[str, tuple[int, dict[str, str], Path]] = {}
        for meta_path in sorted(directory.rglob("*.json")):
            try:
                meta = json.loads(meta_path.read_text())
                req, resp = meta["request"], meta["response"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # not a cassette entry (e.g. a fixture body that happens to be JSON)
            key = request_key(req["method"], req["url"], req.get("body"))
            body_path = (meta_path.parent / resp["body_file"]).resolve()
            self._exchanges[key] = (int(resp["status"]), dict(resp.get("headers", {})), body_path)
        if not self._exchanges:
            raise FileNotFoundError(f"no cassette entries (*.json with request/response) in {directory}")

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = redact(str(request.url), self._secrets)
        body = redact(request.content.decode("utf-8", "replace"), self._secrets) or None
        key = request_key(request.method, url, body)
        try:
            status, headers, body_path = self._exchanges[key]
        except KeyError:
            raise ReplayMiss(
                f"replay: no recorded answer for {request.method} {url}"
                + (f" with body {body[:200]!r}" if body else "")
                + "; record one with `gpucost refresh --record DIR`"
            ) from None
        return httpx.Response(status, headers=headers, stream=_FileStream(body_path), request=request)


# --- the client -----------------------------------------------------------------------------------


class _SpoolWriter:
    """Writes and hashes a spooled body on a helper thread, in the order the blocks are put.

    File writes and SHA-256 updates of large blocks release the GIL, so they overlap with reading
    the network and parsing on the fetching thread. The queue is short: memory stays a few blocks.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="body-", dir=directory)
        self.path = Path(name)
        self._file = open(fd, "wb")  # noqa: PTH123, SIM115 - mkstemp hands us a descriptor
        self._hash = hashlib.sha256()
        self._blocks: queue.Queue[tuple[bytes, bytes] | None] = queue.Queue(maxsize=4)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="gpucost-spool", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._blocks.get()) is not None:
            if self._error is not None:
                continue  # keep draining so the fetching thread never blocks on a dead writer
            data, hashed = item
            try:
                if data:
                    self._file.write(data)
                self._hash.update(hashed)
            except BaseException as exc:  # disk full, say: raised on the fetching thread
                self._error = exc

    def write(self, data: bytes, hashed: bytes | None = None) -> None:
        """Spool `data`; hash `hashed` (the body as it came), which is `data` unless filtered."""
        if self._error is not None:
            raise self._error
        self._blocks.put((data, data if hashed is None else hashed))

    def finish(self) -> str:
        """Wait for every block to be on disk; the body's hex SHA-256."""
        self._stop()
        if self._error is not None:
            raise self._error
        return self._hash.hexdigest()

    def abort(self) -> None:
        """Stop and remove the file: a failed download leaves nothing behind."""
        self._stop()
        self.path.unlink(missing_ok=True)

    def _stop(self) -> None:
        if self._thread.is_alive():
            self._blocks.put(None)
            self._thread.join()
        self._file.close()


def _dropped(what: str, exc: Exception) -> None:
    log.debug("%s: stream parser dropped (%s: %s); parse reads the body", what, type(exc).__name__, exc)


def _open(stream: Callable[[], BodyParser], what: str) -> BodyParser | None:
    try:
        return stream()
    except Exception as exc:
        _dropped(what, exc)
        return None


def _feed(parser: BodyParser | None, block: bytes, what: str) -> BodyParser | None:
    """Push a block to a stream parser; a parser that raises is dropped (see connectors/base.py)."""
    if parser is None or not block:
        return parser
    try:
        parser.feed(block)
    except Exception as exc:
        _dropped(what, exc)
        return None
    return parser


def _close(parser: BodyParser | None, what: str) -> tuple[Any, ...] | None:
    if parser is None:
        return None
    try:
        return tuple(parser.close())
    except Exception as exc:
        _dropped(what, exc)
        return None


@dataclass(frozen=True, slots=True)
class _Body:
    body: bytes
    path: Path | None
    sha256: str
    parsed: tuple[Any, ...] | None
    prefilter: str | None  # the BodyFilter whose output `path` holds
    wire_bytes: int | None  # the body's size as it came, when `path` holds less


class _Kept:
    """A `BodyFilter` in the client's loop: holds the raw blocks until the filter keeps its first
    byte, so that a filter refusing the body (its only allowed failure) leaves it spooled whole."""

    def __init__(self, body_filter: BodyFilter, what: str) -> None:
        self._filter: BodyFilter | None = body_filter
        self._what = what
        self._held: list[bytes] | None = []  # None once the filter has kept something
        self.name: str | None = body_filter.name

    def feed(self, block: bytes) -> bytes:
        return self._step(lambda f: f.feed(block), block)

    def close(self) -> bytes:
        return self._step(lambda f: f.close(), b"")

    def _step(self, call: Callable[[BodyFilter], bytes], block: bytes) -> bytes:
        if self._filter is None:  # refused earlier: the body is spooled whole
            return block
        try:
            out = call(self._filter)
        except Exception as exc:
            if self._held is None:  # the contract says this cannot happen: fail loudly, lose nothing
                raise FetchError(
                    f"{self._what}: body filter {self.name} failed after keeping part of the body "
                    f"({type(exc).__name__}: {exc}); report this as a bug"
                ) from exc
            log.debug(
                "%s: body filter %s refused the body (%s); spooling it whole", self._what, self.name, exc
            )
            whole, self._filter, self._held, self.name = b"".join([*self._held, block]), None, None, None
            return whole
        if self._held is not None:
            if out:
                self._held = None
            else:
                self._held.append(block)
        return out


# progress(what, bytes received so far, bytes expected or None, finished): called for spooled
# (large) downloads as each block lands, so a runner can show a bar per file
Progress = Callable[[str, int, int | None, bool], None]


class Client(httpx.Client):
    """An `httpx.Client` that knows which values are secrets and returns `RawResponse`s."""

    secrets: frozenset[str]
    spool_dir: Path
    mode: str
    request_deadline: float
    per_host: int
    retries: int
    backoff: float
    sleep: Callable[[float], None]
    progress: Progress | None = None

    def _report(self, what: str, response: httpx.Response, finished: bool) -> None:
        if self.progress is None:
            return
        declared = response.headers.get("content-length")
        total = int(declared) if declared and declared.isdigit() else None
        try:
            self.progress(what, response.num_bytes_downloaded, total, finished)
        except Exception:  # a display must never fail a download
            log.debug("progress display failed for %s", what, exc_info=True)

    def _read_body(
        self,
        response: httpx.Response,
        *,
        spool: bool,
        deadline: float,
        what: str,
        stream: Callable[[], BodyParser] | None = None,
        keep: Callable[[], BodyFilter] | None = None,
    ) -> _Body:
        """The body redacted, in memory or spooled to a file, hashed and (with `stream`) parsed in
        the same pass, (with `keep`) spooled as what the filter keeps; a failure leaves no file."""
        redactor = _StreamRedactor(self.secrets)
        good = 200 <= response.status_code < 300
        parser = _open(stream, what) if stream is not None and good else None
        writer = _SpoolWriter(self.spool_dir) if spool else None
        kept = _Kept(keep(), what) if keep is not None and writer is not None and good else None
        gathered: list[bytes] = []  # the whole body when in memory; else the block being gathered
        size = 0
        wire = 0
        try:
            for chunk in response.iter_bytes():
                _check_deadline(deadline, what)
                _check_cancelled(what)
                piece = redactor.feed(chunk)
                gathered.append(piece)
                size += len(piece)
                if writer is not None and size >= _BLOCK:
                    # one join per block, shared by the writer and the parser (bytes are immutable)
                    block = b"".join(gathered)
                    gathered.clear()
                    wire, size = wire + size, 0
                    data = block if kept is None else kept.feed(block)
                    writer.write(data, block)
                    parser = _feed(parser, data, what)
                    self._report(what, response, False)
            gathered.append(redactor.flush())
            if writer is None:
                body = b"".join(gathered)
                parser = _feed(parser, body, what)
                return _Body(body, None, hashlib.sha256(body).hexdigest(), _close(parser, what), None, None)
            block = b"".join(gathered)
            wire += len(block)
            data = block if kept is None else kept.feed(block) + kept.close()
            writer.write(data, block)
            parser = _feed(parser, data, what)
            self._report(what, response, True)
            name = kept.name if kept is not None else None
            sha = writer.finish()
            return _Body(b"", writer.path, sha, _close(parser, what), name, wire if name else None)
        except BaseException:
            if writer is not None:
                writer.abort()
                self._report(what, response, True)  # the bar goes; the error says why
            raise

    def fetch(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        spool: bool = False,
        ok_statuses: Iterable[int] = (),
        stream: Callable[[], BodyParser] | None = None,
        keep: Callable[[], BodyFilter] | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> RawResponse:
        """Send one request and return exactly what came back, secrets redacted.

        A status of 400 and above raises `FetchError` (after the retry layer has given up on
        429/5xx), unless it is in `ok_statuses`. 304 Not Modified is returned as is. With
        `spool=True` the body is streamed to a file under `spool_dir` instead of memory. With
        `stream`, a 2xx body is also parsed as it arrives by a fresh `stream()` per attempt, and
        the items are kept on `RawResponse.parsed` (see connectors/base.py, "Large bodies").
        With `keep` (spooled bodies only), a 2xx body is spooled, and parsed, as what a fresh
        `keep()` filter keeps of it; `RawResponse.prefilter` names the filter. `timeout` replaces
        the client's timeouts for this request only (a source known to be slow to answer); the
        overall deadline still bounds it.
        """
        if keep is not None and not spool:
            raise ValueError("keep= filters a spooled body: pass spool=True with it")
        started = time.monotonic()
        deadline = started + self.request_deadline
        overall = _provider_deadline.get()
        if overall is not None:
            deadline = min(deadline, overall)
        extensions: dict[str, Any] = {DEADLINE_EXTENSION: deadline}
        if max_bytes is not None:
            extensions[MAX_BYTES_EXTENSION] = max_bytes
        request = self.build_request(
            method,
            url,
            params=params,
            json=json,
            content=content,
            headers=headers,
            extensions=extensions,
            timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
        )
        safe_url = redact(str(request.url), self.secrets)
        what = f"{method.upper()} {safe_url}"
        attempt = 0
        while True:
            _check_deadline(deadline, what)
            _check_cancelled(what)
            fetched_at = datetime.now(UTC)
            try:
                response = self.send(request, stream=True)
            except httpx.TransportError as exc:
                if isinstance(exc, httpx.TimeoutException) and time.monotonic() > deadline:
                    _check_deadline(deadline, what)
                if name_not_resolved(exc):
                    raise HostNotFound(
                        f"{what}: host {request.url.host} did not resolve ({redact(str(exc), self.secrets)})"
                    ) from None
                error = (
                    Unreachable if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) else FetchError
                )
                raise error(f"{what}: {type(exc).__name__}: {redact(str(exc), self.secrets)}") from None
            try:
                read = self._read_body(
                    response, spool=spool, deadline=deadline, what=what, stream=stream, keep=keep
                )
                # a JSON/XML body that stops mid-document was cut off on the way (a proxy, a
                # server that died mid-write, a length it did not send): retried like a drop
                cut = (
                    ends_early(read.body, response.headers.get("content-type", ""))
                    if read.path is None and response.status_code < 300
                    else None
                )
                if cut is None:
                    break
                if attempt >= self.retries:
                    raise FetchError(
                        f"{what}: truncated: retried {attempt} times, and every {cut} body ended "
                        f"early ({len(read.body)} bytes, mid-document): the connection or the server "
                        "cuts it off, the format did not change. Rerun later"
                    )
                delay = min(self.backoff * (2**attempt) * random.uniform(0.5, 1.5), 60.0)
                if time.monotonic() + delay > deadline:
                    _check_deadline(float("-inf"), what)
                self.sleep(delay)
                attempt += 1
            except httpx.TransportError as exc:
                # the body broke off mid-way (dropped connection, peer closed early): like a
                # connection error, worth another try while retries and time are left
                if attempt >= self.retries:
                    raise FetchError(
                        f"{what}: {type(exc).__name__} while reading the body, {attempt + 1} attempts"
                    ) from None
                delay = min(self.backoff * (2**attempt) * random.uniform(0.5, 1.5), 60.0)
                if time.monotonic() + delay > deadline:
                    _check_deadline(float("-inf"), what)
                self.sleep(delay)
                attempt += 1
            finally:
                response.close()
        status = response.status_code
        if read.path is None and challenge_page(response.headers, read.body):
            raise FetchError(f"{what} answered HTTP {status} with a challenge: {CHALLENGE_HINT}")
        if status >= 400 and status not in set(ok_statuses):
            excerpt = read.body[:300].decode("utf-8", "replace").strip()
            if read.path is not None:
                read.path.unlink(missing_ok=True)
            raise FetchError(f"{what} answered HTTP {status}: {excerpt or '(empty body)'}")
        request_body = request.content or None
        elapsed = time.monotonic() - started
        if read.wire_bytes is not None:
            size = read.wire_bytes
        else:
            size = read.path.stat().st_size if read.path is not None else len(read.body)
        # large (spooled) downloads are the long part of a run: say each one as it lands
        log.log(
            logging.INFO if spool else logging.DEBUG,
            "%s %s -> %d, %.1f MB in %.1f s",
            method.upper(),
            safe_url,
            status,
            size / 1e6,
            elapsed,
        )
        return RawResponse(
            url=safe_url,
            method=method.upper(),
            status=status,
            fetched_at=fetched_at,
            headers={
                k.lower(): redact(v, self.secrets)
                for k, v in response.headers.items()
                if k.lower() in KEPT_HEADERS
            },
            content_type=response.headers.get("content-type", ""),
            request_body=(
                redact(request_body.decode("utf-8", "replace"), self.secrets).encode()
                if request_body
                else None
            ),
            body=read.body,
            body_path=read.path,
            sha256=read.sha256,
            parsed=read.parsed,
            prefilter=read.prefilter,
            wire_bytes=read.wire_bytes,
        )


def make_client(
    *,
    secrets: Iterable[str] = (),
    record: Path | None = None,
    replay: Path | None = None,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    per_host: int = 4,
    retries: int = 4,
    backoff: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    spool_dir: Path | None = None,
    transport: httpx.BaseTransport | None = None,
    request_deadline: float = DEFAULT_REQUEST_DEADLINE,
    user_agent: str | None = None,
) -> Client:
    """The one client factory. `transport` replaces the network layer (tests pass a MockTransport);
    `user_agent` is sent with every request (the pipeline passes `Settings.user_agent`; None, as
    when GPUCOST_USER_AGENT is unset, is USER_AGENT)."""
    user_agent = USER_AGENT if user_agent is None else user_agent
    if not user_agent.strip() or any(c in user_agent for c in "\r\n"):
        raise ValueError(f"user_agent must be one non-empty line, got {user_agent!r}")
    if record is not None and replay is not None:
        raise ValueError("record and replay are exclusive: replaying while recording records nothing new")
    secret_set = frozenset(s for s in secrets if s)
    base: httpx.BaseTransport
    if replay is not None:
        base = ReplayTransport(Path(replay), secret_set)
    elif transport is not None:
        base = transport
    else:
        base = network_transport()
    if record is not None:
        base = RecordTransport(base, Path(record), secret_set)
    stack = HostLimitTransport(
        RetryTransport(SizeCapTransport(base, max_bytes), retries=retries, backoff=backoff, sleep=sleep),
        per_host,
    )
    client = Client(
        transport=stack,
        timeout=timeout,
        headers={"User-Agent": user_agent.strip(), "Accept-Encoding": "gzip, deflate"},
        follow_redirects=True,
    )
    client.secrets = secret_set
    client.spool_dir = spool_dir or Path(tempfile.gettempdir()) / "gpucost-spool"
    client.mode = "replay" if replay is not None else "record" if record is not None else "live"
    client.request_deadline = request_deadline
    client.per_host = per_host
    client.retries = retries
    client.backoff = backoff
    client.sleep = sleep
    return client


def remove_spooled(response: RawResponse) -> None:
    """Delete a spooled body once it has been archived."""
    if response.body_path is not None:
        response.body_path.unlink(missing_ok=True)


def _cancellable(cancel: threading.Event, call: Callable[[], RawResponse]) -> RawResponse:
    _cancelled.set(cancel)  # inside the task's own copy of the context
    return call()


def fetch_concurrently(calls: Sequence[Callable[[], RawResponse]], *, workers: int) -> Iterator[RawResponse]:
    """Run independent fetches (`client.fetch` calls) on up to `workers` threads; their responses
    in the order of `calls`, each as soon as it and those before it are done.

    Each call runs in a copy of the caller's context, so `provider_deadline` bounds it as if it
    ran in line. The first failure, in order, is raised as a sequential fetch would raise it, once
    the other calls have stopped: those not started are cancelled, those in flight stop at their
    next chunk, and a body spooled by a call whose response is never yielded is removed. The
    per-host bound of the client still holds whatever `workers` is.
    """
    if workers <= 1 or len(calls) <= 1:
        for call in calls:
            yield call()
        return
    cancel = threading.Event()
    with ThreadPoolExecutor(max_workers=min(workers, len(calls)), thread_name_prefix="gpucost-fetch") as pool:
        futures = [pool.submit(contextvars.copy_context().run, _cancellable, cancel, call) for call in calls]
        handed = 0
        try:
            for future in futures:
                response = future.result()
                handed += 1
                yield response
        finally:
            if handed < len(futures):  # a failure, or the caller stopped early
                cancel.set()
                for future in futures[handed:]:
                    future.cancel()
                for future in futures[handed:]:
                    if not future.cancelled() and future.exception() is None:
                        remove_spooled(future.result())


__all__ = [
    "Client",
    "fetch_concurrently",
    "make_client",
    "name_not_resolved",
    "provider_deadline",
    "redact",
    "redact_bytes",
    "remove_spooled",
    "request_key",
    "retry_after_seconds",
]
