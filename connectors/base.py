"""The connector contract: what every provider module implements and returns.

A connector turns one provider's public API or pricing page into `Offer` records, in two steps that
never mix:

    fetch(client, creds, previous) -> Iterator[RawResponse]   I/O only: exactly what came over the wire
    parse(responses)  -> Iterator[Offer | Unchanged | Excluded]   pure: no I/O, no clock, no globals

Keeping them apart means every parse can be replayed from the raw archive, and every parser is
tested on recorded responses without a network.

Large bodies: parse while they stream (opt-in, per request). Downloading a body whole and then
reading it again to parse it costs the download time plus the parse time; for an AWS offer file
(hundreds of MB per region) that is most of a run. A connector may instead hand the HTTP client a
`BodyParser` factory with the request, `client.fetch(..., spool=True, stream=make_parser)`. In one
pass over the body, the client then tees every chunk, after redaction, three ways:

    spool file     the body byte for byte, as before: the raw archive stays the source of truth
    SHA-256        `RawResponse.sha256`: the archive addresses the body without reading it again
    the parser     `feed(chunk)` for each piece in order, `close()` -> the parse items, kept on
                   `RawResponse.parsed`

and `parse(responses)` stays pure: for a response that carries `parsed` it yields those items; for
any other (one rebuilt from the archive, a test's, a replay of a cassette) it parses the body. The
streaming and the archive paths must share their code (the archive path feeds the file through the
same `BodyParser`), so they agree by construction; test them against each other with odd chunk
sizes. The fetch keeps every behaviour it has, which is why the parser is pushed chunks rather
than given an iterator to pull from: the client keeps its own loop (deadline per chunk, redaction,
retries), and a push parser runs inline in it, with no thread hand-off per chunk:

- a parser is made fresh for every attempt, and only for a 2xx answer: a body that breaks off and
  is retried is never half-parsed into the result;
- a parser that raises is dropped and the body still downloads and spools whole, `parsed` is left
  None, and `parse` meets the same error on the body (a `LayoutChanged` is still a parse error,
  with the raw responses archived for whoever fixes the parser);
- transport errors, the size cap, deadlines and redaction apply exactly as to any spooled body, and
  a failed download leaves no partial spool file.

A connector may also hand the client a `BodyFilter` factory, `client.fetch(..., spool=True,
stream=make_parser, keep=make_filter)`, for a body of which parsing reads a small part (an AWS
offer file: one line in a hundred). The filter is the archive's prefilter run while the body
streams: the hash still covers every byte as it came, but the spool file, and the parser, get only
what the filter keeps. `RawResponse.prefilter` then names the filter (the archive stores the spool
under that name without reading the whole body again) and `size_bytes` stays the size as it came.
Nothing is lost for parsing: a prefilter's output parses exactly like the body, and a second pass
of the filter keeps all of it. A filter may raise only before it has returned its first kept byte
(reading a header it does not recognise); the client then spools the body whole, as without one.

The spool write and the hash run on a helper thread (both release the GIL), so on a fast link the
parser, not the disk, sets the pace. A streamed parse is CPU work inside the fetch: the
`fetch_seconds` of a provider run then include it. `connectors.http.fetch_concurrently` runs a
connector's independent requests (AWS's region files) in parallel within the per-host bound.

Errors (all subclass `ConnectorError`)::

    ConnectorError            anything a connector raises on purpose
    ├── MissingCredentials    a required env var is absent -> the provider is *skipped*, not failed
    ├── LayoutChanged         a payload or page no longer has the shape the parser expects
    └── FetchError            the provider could not be fetched (after the HTTP layer's retries)
        ├── Unreachable       no connection at all: DNS, refused, connect timeout
        │   └── HostNotFound  the host name did not resolve: never retried (offline, or DNS down)
        ├── ResponseTooLarge  a body exceeded the size cap
        ├── DeadlineExceeded  a request or a whole provider passed its overall deadline
        └── ReplayMiss        replay mode met a request the cassette has no answer for

A module may also declare `optional: tuple[str, ...]`: credentials it uses when they are set (a
higher rate limit, say) but does not need; they are passed in `creds` and redacted like the rest.

Incremental sources: `previous` maps each URL fetched in the provider's last successful run to the
headers kept with it (`etag`, `last-modified`, ...). A connector may use it to send conditional
requests or to skip a versioned file it already has; for every part it did not re-read, `parse`
yields an `Unchanged(scope)` so the warehouse keeps that part's offers current instead of closing
them as vanished.

Rows a connector leaves out on purpose (a Windows meter, a Capacity Block placeholder, a $0 preview
SKU) are yielded as `Excluded(reason, count)`, so every run records what it left out and why; rows
that look like offers but are invalid (NaN price, unknown currency) are yielded as offers and the
warehouse quarantines them.

An answer that parsed but is known to be incomplete (a search capped at its result limit, say) is
said with a `Degraded(reason, hint)` item beside the offers: the offers still load, and the
provider run is marked `degraded` with the reason and the hint (what to do: "set VAST_API_KEY"),
so an incomplete catalog never reads as a clean run. It holds no scope and closes nothing by
itself; the scope guards still apply to what did load.

An unknown GPU name is *not* an error: the offer lands with its raw name and shows up in the
unmapped-GPU report. Never filter rows by an allow-list of known GPUs or instance families: a
new family must land (unmapped), not vanish.

Scopes. A provider's answer covers parts that fail on their own: an AWS region's offer file, the
AWS spot feed, an Azure region, RunPod's secure vs community cloud, one section of a pricing page.
Every `Offer` names the part it came from in `scope` (a short string; when left `None` it is
`"<pricing_type>:<region>"`, see `Offer.scope_name`). The warehouse guards each scope against its
own last good load: a scope that comes back empty, vanishes, or shrinks past the connector's
`shrink_limit` (module attribute, default `SHRINK_LIMIT`: the share of a scope's offers that may
disappear in one run) keeps its last good prices and marks the provider run `degraded`, while the
healthy scopes load. So choose scopes that succeed or fail together: one fetched body, or one
table of a page. A marketplace, whose per-country offer counts swing from minute to minute,
declares one scope for the whole market (a drop to zero is still caught) and a laxer
`shrink_limit`.

Wrong rows. A row whose price is wrong or missing (NaN, $0, negative, absurd, unknown currency,
or a required price key absent: a renamed key must not read as "not offered") is still yielded,
as an `Offer` whose `problem` says what is wrong (use `math.nan` for a price that could not be
read). The warehouse quarantines it with its raw values and keeps that offer's last good price.
A rule-based omission is `Excluded`; a wrong row is a flagged `Offer`: never both, never neither.

Units. Parsers read prices in whatever unit the source publishes and convert them once, with
`per_hour(amount, unit)`; per GPU vs per instance is settled in the parser (an offer's price is
always for the whole instance, `gpu_count` GPUs). Currencies stay as published: the warehouse
converts to USD from `core.fx_rates` (loaded from `FxRate` items, see `connectors.ecb`).

Units live in field names (`price_per_hour` is in `currency` per hour; `gpu_memory_gb_raw` is GB per
GPU as the provider states it, converted from MiB where the source gives MiB).

Paged APIs. A listing read page by page goes through `paginate(fetch_page, next_token, max_pages=...)`
(azure, digitalocean, gcp, scaleway, vultr): a next-page token (cursor, page token, next URL) seen a
second time and a page past the connector's `MAX_PAGES` both raise `LayoutChanged`, so a listing
whose paging loops fails the run instead of running forever. linode checks its stated `pages`
before fetching any (it knows the count from page 1).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal, Protocol, runtime_checkable

PricingType = Literal["on_demand", "spot"]
PriceSource = Literal["list", "market", "estimated"]
BillingUnit = Literal["second", "minute", "hour", "month"]

PRICING_TYPES: tuple[PricingType, ...] = ("on_demand", "spot")
PRICE_SOURCES: tuple[PriceSource, ...] = ("list", "market", "estimated")
# Share of a scope's offers that may vanish in one run before the scope is held as degraded.
SHRINK_LIMIT = 0.5
# Hours per unit a price may be published in. A month is 730 h (8760 h / 12), the convention of
# AWS, Google Cloud and Azure price calculators; a provider that bills another month says so in
# its own module.
HOURS_PER_UNIT: Mapping[str, float] = {
    "second": 1 / 3600,
    "minute": 1 / 60,
    "hour": 1.0,
    "day": 24.0,
    "week": 168.0,
    "month": 730.0,
}


class ConnectorError(Exception):
    """Base class for errors a connector raises on purpose."""


class MissingCredentials(ConnectorError):
    """A required credential is absent. The provider is skipped with status `skipped`."""

    def __init__(self, provider: str, missing: Sequence[str]) -> None:
        self.provider = provider
        self.missing = tuple(missing)
        names = ", ".join(self.missing)
        super().__init__(f"skipped: missing {names} (set it in the environment or .env to enable)")


class LayoutChanged(ConnectorError):
    """The payload or page does not have the shape the parser was written for.

    The message must say which key or selector matched nothing, so whoever reads it knows where
    to look: "`Items` missing from page 3; has the Retail Prices API changed its envelope?"
    """


class FetchError(ConnectorError):
    """The provider could not be fetched, after the HTTP layer's own retries."""


class Unreachable(FetchError):
    """The host could not be reached at all (DNS failure, connection refused, connect timeout)."""


class HostNotFound(Unreachable):
    """The host name did not resolve. Not retried: with no network every provider fails this way
    at once, and the refresh says so in one line (flows/orchestration.py) instead of a retry ladder."""


class ResponseTooLarge(FetchError):
    """A response body exceeded the client's size cap."""


class DeadlineExceeded(FetchError):
    """A request, or everything one provider fetches, took longer than its overall deadline."""


class ReplayMiss(FetchError):
    """Replay mode met a request for which the cassette holds no recorded answer."""


@dataclass(frozen=True, slots=True)
class RawResponse:
    """One HTTP exchange, exactly as it came over the wire.

    `url` never carries credentials (the HTTP layer redacts secret values to `***`), and neither do
    `request_body` or `headers`. Small bodies are held in `body`; a large body (an AWS offer file
    is gigabytes) is spooled to disk and referenced by `body_path`, with `body` left empty, so that
    parsers can stream it with `open()` in constant memory.

    Two fields are derived from the body in the pass that read it (see "Large bodies" above), never
    needed to re-parse it: `sha256`, its hex digest (the archive's address; None when the response
    was not made by the HTTP client), and `parsed`, the items a streaming parser produced from
    exactly this body (None when nothing was streamed, or the parser failed).
    """

    url: str
    method: str
    status: int
    fetched_at: datetime  # UTC
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = ""
    request_body: bytes | None = None
    body: bytes = b""
    body_path: Path | None = None
    sha256: str | None = None
    parsed: tuple[Any, ...] | None = field(default=None, compare=False, repr=False)
    # Set when the body held is what a `BodyFilter` of this name kept of the body as it came
    # (`sha256` and `wire_bytes` still describe the body as it came).
    prefilter: str | None = None
    wire_bytes: int | None = None

    def open(self) -> BinaryIO:
        """A binary stream over the body, wherever it is held."""
        if self.body_path is not None:
            return self.body_path.open("rb")
        import io

        return io.BytesIO(self.body)

    def read(self) -> bytes:
        """The whole body in memory. Use `open()` for bodies that may be large."""
        if self.body_path is not None:
            return self.body_path.read_bytes()
        return self.body

    def json(self) -> Any:
        try:
            return json.loads(self.read())
        except json.JSONDecodeError as exc:
            if json_ends_early(exc):
                raise FetchError(
                    f"{self.url}: truncated: the JSON body ends early, mid-value at byte {exc.pos} "
                    f"({exc.msg}): the connection or the server cut it off, the format did not "
                    "change. Rerun later"
                ) from exc
            raise LayoutChanged(
                f"{self.url}: expected JSON, got {self.content_type or 'unknown content'} "
                f"({exc.msg} at byte {exc.pos}); has the endpoint changed its format?"
            ) from exc

    @property
    def size_bytes(self) -> int:
        """The body's size as it came over the wire (a prefiltered body holds less)."""
        if self.wire_bytes is not None:
            return self.wire_bytes
        return self.body_path.stat().st_size if self.body_path is not None else len(self.body)


@dataclass(frozen=True, slots=True)
class Offer:
    """One price for one rentable thing.

    The offer key is (provider, instance_type, region, zone, pricing_type); the warehouse keeps its
    price history as intervals. `price_source` says how real the price is: `list` is a published
    rate, `market` a live spot/bid market price, `estimated` a price derived by a rule (OCI's
    preemptible = 50% of list) and never to be presented as a market price.
    """

    provider: str
    instance_type: str
    region: str
    pricing_type: PricingType
    price_source: PriceSource
    price_per_hour: float
    currency: str
    gpu_name_raw: str | None
    gpu_count: float  # fractional GPUs exist (Azure NVadsA10 v5, AWS g6f)
    zone: str | None = None
    gpu_memory_gb_raw: float | None = None  # per GPU, as the provider states it
    vcpus: float | None = None
    ram_gb: float | None = None
    billing_unit: BillingUnit | None = None  # only when the source states it
    # one-time fee per instance on top of the price (a dedicated server's set-up fee), in
    # `currency`; None: the source states none. The bill charges it once per experiment.
    setup_fee: float | None = None
    # the most one instance bills in a month, in `currency`, where the provider's own terms say
    # the rate is capped ("you will never pay more than the monthly price"); None: no cap stated
    monthly_price_cap: float | None = None
    available: bool | None = None
    provider_data: Mapping[str, Any] = field(default_factory=dict)
    scope: str | None = None  # the part of the answer it came from; None = "<pricing_type>:<region>"
    problem: str | None = None  # set by a parser that knows the row is wrong: it is quarantined

    def __post_init__(self) -> None:
        if self.pricing_type not in PRICING_TYPES:
            raise ValueError(f"pricing_type must be one of {PRICING_TYPES}, got {self.pricing_type!r}")
        if self.price_source not in PRICE_SOURCES:
            raise ValueError(f"price_source must be one of {PRICE_SOURCES}, got {self.price_source!r}")

    @property
    def key(self) -> tuple[str, str, str, str | None, str]:
        return (self.provider, self.instance_type, self.region, self.zone, self.pricing_type)

    @property
    def scope_name(self) -> str:
        """The scope the guards compare against its last good load (see the module docstring)."""
        return self.scope or f"{self.pricing_type}:{self.region}"


@dataclass(frozen=True, slots=True)
class Unchanged:
    """A part of a provider's catalog that was not re-read this run because it has not changed.

    `scope` names the offers it covers by Offer field values, e.g.
    `{"region": "us-east-1", "pricing_type": "on_demand"}`. Currently open offers of the provider
    that match every item of the scope stay current (their `last_seen_at` moves) and are not closed.
    """

    scope: Mapping[str, str]
    reason: str = "unchanged since the last successful run"


@dataclass(frozen=True, slots=True)
class Excluded:
    """Source rows deliberately not turned into offers: `count` of them, for one `reason`."""

    reason: str
    detail: str = ""
    count: int = 1


@dataclass(frozen=True, slots=True)
class Degraded:
    """The answer parsed but is known to be incomplete: the run is `degraded`, the offers load.

    `reason` says what is missing and how it was detected; `hint` what the user can do about it.
    """

    reason: str
    hint: str


@dataclass(frozen=True, slots=True)
class FxRate:
    """A reference exchange rate: one `currency` is worth `usd_per_unit` US dollars on `rate_date`."""

    currency: str
    rate_date: date
    usd_per_unit: float
    source: str


# expat's codes for a document that stops before its root closes: no element found (also an
# empty document), an unclosed token, a partial character
_XML_ENDS_EARLY = {3, 5, 6}


def json_ends_early(exc: json.JSONDecodeError) -> bool:
    """Whether a JSON error says the text stopped mid-document (a cut body) rather than holding
    something else: the error sits at the end of the text, or inside a string never closed. An
    empty text is not cut, it is empty (the parser says so)."""
    text = exc.doc.rstrip()
    return bool(text) and (exc.pos >= len(text) or exc.msg.startswith("Unterminated string"))


def ends_early(body: bytes, content_type: str = "") -> str | None:
    """ "JSON" or "XML" when `body` is a JSON or XML document (by its content type, or its first
    byte when the type says neither) that stops before it is complete; None when it is complete,
    empty, or another format. The HTTP client retries such a body like a dropped connection."""
    head = body.lstrip()[:1]
    kind = content_type.split(";")[0].strip().lower()
    if not head:
        return None
    if "json" in kind or (not kind.startswith("text/html") and head in (b"{", b"[")):
        try:
            json.loads(body)
        except json.JSONDecodeError as exc:
            return "JSON" if json_ends_early(exc) else None
        except UnicodeDecodeError:
            return None
        return None
    if "xml" in kind or body.lstrip()[:5] == b"<?xml":
        import xml.etree.ElementTree as ET

        try:
            ET.fromstring(body)
        except ET.ParseError as exc:
            return "XML" if exc.code in _XML_ENDS_EARLY else None
        return None
    return None


# Marks of a bot challenge served instead of the page or answer asked for: Cloudflare's "Just a
# moment..." interstitial and its `_cf_chl_opt` options, its block page, DataDome's captcha host,
# and the `cf-mitigated: challenge` header Cloudflare sets on a challenge.
# (Not `/cdn-cgi/challenge-platform/` alone: Cloudflare injects that script into ordinary pages.)
_CHALLENGE_MARKS = (
    b"<title>just a moment...</title>",
    b"_cf_chl_opt",
    b"attention required! | cloudflare",
    b"captcha-delivery.com",
)


def challenge_page(headers: Mapping[str, str], body: bytes) -> bool:
    """Whether an answer is a bot-challenge page rather than the content asked for."""
    if any(k.lower() == "cf-mitigated" and v.lower() == "challenge" for k, v in headers.items()):
        return True
    head = body[:20000].lower()
    return any(mark in head for mark in _CHALLENGE_MARKS)


CHALLENGE_HINT = (
    "a bot challenge page answered instead (Cloudflare-style: it asks for a browser that runs its "
    "script), so nothing was read; a scripted client cannot pass it. Rerun later or from another "
    "network; if it persists, the provider needs another source (an API, an archived page)"
)


def per_hour(amount: float, unit: str) -> float:
    """A price per `unit` (second, minute, hour, day, week, month) as a price per hour.

    The one place prices change time unit; a unit it does not know is a parser bug, not a guess.
    """
    try:
        return amount / HOURS_PER_UNIT[unit]
    except KeyError:
        raise ValueError(f"unknown price unit {unit!r}; expected one of {sorted(HOURS_PER_UNIT)}") from None


def number(value: object, *, finite: bool = True) -> float | None:
    """A JSON value as a float: numbers and numeric strings; None for anything else (and for NaN
    or infinity unless `finite=False`). Booleans are not numbers here, whatever Python says."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        result = float(value)
    except ValueError:
        return None
    return result if math.isfinite(result) or not finite else None


def read_price(value: object, key: str) -> tuple[float, str | None]:
    """(price, problem) for a required price field: a missing, non-numeric, non-finite, zero or
    negative value comes back with the problem to put on the `Offer` (NaN when unreadable), so the
    row is quarantined instead of read as "not offered"."""
    if value is None:
        return math.nan, f"{key} missing"
    price = number(value, finite=False)
    if price is None or not math.isfinite(price):
        return math.nan, f"{key} is not a number: {value!r}"
    if price <= 0:
        return price, f"{key} is not positive: {value!r}"
    return price, None


def child(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The JSON object at `parent[key]`; an empty one when the key is absent or holds another type."""
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def required_list(payload: Any, path: str, *, where: str, answer: str, bare_list: bool = False) -> list[Any]:
    """The non-empty list at dotted `path` of a JSON answer (or the answer itself, when it is a
    list and `bare_list`). A missing key or another shape raises `LayoutChanged` naming the key and
    what it found; an empty list raises too, since an empty catalog is never a real answer.

    `where` is the URL, `answer` what the source is ("the bundles answer", "the order catalog").
    """
    found: Any = payload
    if not (bare_list and isinstance(payload, list)):
        for key in path.split("."):
            found = found.get(key) if isinstance(found, dict) else None
    if not isinstance(found, list):
        got = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(
            f"{where}: `{path}` list missing from {answer} (got {got}); has the source changed its format?"
        )
    if not found:
        raise LayoutChanged(f"{where}: `{path}` is empty in {answer}; refusing to report an empty catalog")
    return found


def exclusions(items: Iterable[object]) -> dict[str, int]:
    """Tally the `Excluded` items of a parse by reason: what a connector left out, and how often."""
    counts: dict[str, int] = {}
    for item in items:
        if isinstance(item, Excluded):
            counts[item.reason] = counts.get(item.reason, 0) + item.count
    return counts


def excluded(counts: Mapping[str, int]) -> Iterator[Excluded]:
    """One `Excluded` per reason of a reason -> count tally, in a stable order."""
    for reason, count in sorted(counts.items()):
        if count:
            yield Excluded(reason, count=count)


def paginate(
    fetch_page: Callable[[str | None, int], RawResponse],
    next_token: Callable[[RawResponse, int], str | None],
    *,
    max_pages: int,
    what: str,
    hint: str = "has its pagination changed?",
) -> Iterator[RawResponse]:
    """Every page of a paged listing, each yielded as soon as it is in.

    `fetch_page(token, number)` fetches page `number` (1-based; `token` None for the first), and
    `next_token(page, number)` reads the token of the next one (a cursor, a page token, a next-page URL;
    None or "" on the last page). Two guards against a listing that never ends: a token seen a
    second time raises `LayoutChanged` before it is followed again, and so does a page beyond
    `max_pages`. `what` names the listing in those messages, `hint` says what to check.
    """
    seen: set[str] = set()
    token: str | None = None
    for number in range(1, max_pages + 1):
        page = fetch_page(token, number)
        yield page
        token = next_token(page, number)
        if not token:
            return
        if token in seen:
            raise LayoutChanged(
                f"{what}: page {number} gives the next-page token {token!r} a second time (already "
                f"followed), so the listing would loop; {hint}"
            )
        seen.add(token)
    raise LayoutChanged(f"{what}: more than {max_pages} pages; is paging looping? {hint}")


class BodyParser(Protocol):
    """Parses one body while it streams in: chunks pushed in order, then `close` for the items.

    `feed` may raise (a `LayoutChanged` on a header it cannot read); the client then drops the
    parser and `parse` reads the archived body instead, meeting the same error there.
    """

    def feed(self, chunk: bytes) -> None: ...

    def close(self) -> Iterable[Offer | Unchanged | Excluded | FxRate | Degraded]: ...


class BodyFilter(Protocol):
    """Keeps, of one body streaming in, only what parsing reads (see "Large bodies" above).

    `feed` returns the kept bytes each chunk completes, `close` the rest; `name` is the archive
    prefilter whose output this is. Only before the first kept byte may `feed` or `close` raise.
    """

    name: str

    def feed(self, chunk: bytes) -> bytes: ...

    def close(self) -> bytes: ...


@runtime_checkable
class Connector(Protocol):
    """What every provider module exposes (as module-level `name`, `requires`, `fetch`, `parse`)."""

    name: str
    requires: tuple[str, ...]

    def fetch(
        self,
        client: Any,
        creds: Mapping[str, str],
        previous: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Iterator[RawResponse]: ...

    def parse(
        self, responses: Sequence[RawResponse]
    ) -> Iterator[Offer | Unchanged | Excluded | FxRate | Degraded]: ...


def missing_credentials(connector: Connector, env: Mapping[str, str]) -> tuple[str, ...]:
    """The names in `connector.requires` that `env` lacks or holds empty."""
    return tuple(name for name in connector.requires if not env.get(name))
