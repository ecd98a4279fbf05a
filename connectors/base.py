"""The connector contract: what every provider module implements and returns.

A connector turns one provider's public API or pricing page into `Offer` records, in two steps that
never mix:

    fetch(client, creds, previous) -> Iterator[RawResponse]   I/O only: exactly what came over the wire
    parse(responses)  -> Iterator[Offer | Unchanged | Excluded]   pure: no I/O, no clock, no globals

Keeping them apart means every parse can be replayed from the raw archive, and every parser is
tested on recorded responses without a network.

Errors (all subclass `ConnectorError`)::

    ConnectorError            anything a connector raises on purpose
    ├── MissingCredentials    a required env var is absent -> the provider is *skipped*, not failed
    ├── LayoutChanged         a payload or page no longer has the shape the parser expects
    └── FetchError            the provider could not be fetched (after the HTTP layer's retries)
        ├── Unreachable       no connection at all: DNS, refused, connect timeout
        ├── ResponseTooLarge  a body exceeded the size cap
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

An unknown GPU name is *not* an error: the offer lands with its raw name and shows up in the
unmapped-GPU report.

Units live in field names (`price_per_hour` is in `currency` per hour; `gpu_memory_gb_raw` is GB per
GPU as the provider states it, converted from MiB where the source gives MiB).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal, Protocol, runtime_checkable

PricingType = Literal["on_demand", "spot"]
PriceSource = Literal["list", "market", "estimated"]
BillingUnit = Literal["second", "minute", "hour"]

PRICING_TYPES: tuple[PricingType, ...] = ("on_demand", "spot")
PRICE_SOURCES: tuple[PriceSource, ...] = ("list", "market", "estimated")


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


class ResponseTooLarge(FetchError):
    """A response body exceeded the client's size cap."""


class ReplayMiss(FetchError):
    """Replay mode met a request for which the cassette holds no recorded answer."""


@dataclass(frozen=True, slots=True)
class RawResponse:
    """One HTTP exchange, exactly as it came over the wire.

    `url` never carries credentials (the HTTP layer redacts secret values to `***`), and neither do
    `request_body` or `headers`. Small bodies are held in `body`; a large body (an AWS offer file
    is gigabytes) is spooled to disk and referenced by `body_path`, with `body` left empty, so that
    parsers can stream it with `open()` in constant memory.
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
            raise LayoutChanged(
                f"{self.url}: expected JSON, got {self.content_type or 'unknown content'} "
                f"({exc.msg} at byte {exc.pos}); has the endpoint changed its format?"
            ) from exc

    @property
    def size_bytes(self) -> int:
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
    available: bool | None = None
    provider_data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pricing_type not in PRICING_TYPES:
            raise ValueError(f"pricing_type must be one of {PRICING_TYPES}, got {self.pricing_type!r}")
        if self.price_source not in PRICE_SOURCES:
            raise ValueError(f"price_source must be one of {PRICE_SOURCES}, got {self.price_source!r}")

    @property
    def key(self) -> tuple[str, str, str, str | None, str]:
        return (self.provider, self.instance_type, self.region, self.zone, self.pricing_type)


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

    def parse(self, responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]: ...


def missing_credentials(connector: Connector, env: Mapping[str, str]) -> tuple[str, ...]:
    """The names in `connector.requires` that `env` lacks or holds empty."""
    return tuple(name for name in connector.requires if not env.get(name))
