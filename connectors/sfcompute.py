"""SF Compute (The San Francisco Compute Company): the market price of one node-hour, per instance type.

What SF Compute sells is not an instance at a list price. It runs a market (https://sfcompute.com/docs,
"It's a compute market", read 2026-12-02): buyers place orders for a *block* of compute, N nodes
for a duration starting at a time, sellers (data centres, and buyers reselling time they hold)
place asks, and an order fills against the book at the going price. A filled order is a contract
for the whole block: the nodes are the buyer's until the block ends, so the block is not an
interruptible spot instance. (The preview "procurements" that buy and sell on a buyer's behalf
can lose nodes when the market outruns their price limit; that is a buyer's automation, not what
the market sells, and it is not modelled here.)

Source: the quote endpoint the `sf` CLI asks before it buys, `GET https://api.sfcompute.com/v0/quote`
(github.com/sfcompute/cli `src/helpers/quote.ts` and the OpenAPI types in `src/schema.ts`,
`handle_quote` / `quoter_ApiQuoteResponse`, checked 2026-12-02 at 1a23098). It needs a bearer
token, as every call the CLI makes: `SF_API_KEY` (the variable the sf CLI's own agent skill names
for scripts, github.com/sfcompute/skills `sf-cli/SKILL.md`), so without it the provider is skipped.
One request per instance type the endpoint documents (`h100i`, `h100v`, `h200ki`), each asking to
buy the smallest block the market sells, one node for one hour starting now::

    ?side=buy&instance_type=h100i&quantity=1&duration=3600&min_start_date=NOW&max_start_date=NOW

(`duration`: "Exact duration in seconds ... minimum 3600"; the CLI accepts a start "NOW" or on an
hour boundary and an end on an hour boundary.) Shape::

    {"object": "quote", "side": "buy",
     "quote": {"price": 1792, "quantity": 1, "start_at": "2026-12-01T09:00:00Z",
               "end_at": "2026-12-01T10:00:00Z", "instance_type": "h100i", "zone": "..."},
     "no_quote_reason": null}

How it is mapped, the way the CLI reads it (`getPricePerGpuHourFromQuote`):
- `price` is the block's total in US cents ("Total price in cents (USD)"), `quantity` its nodes;
  the block's hours run from `start_at` to `end_at`. A start of "NOW" means, to the market, the
  beginning of the next minute (the CLI's own comment), so the parser takes the response's
  `fetched_at` rounded up to the minute, as the CLI takes its clock.
- one offer per instance type: the node is the instance (one VM per node, sfcompute.com/docs/
  instances), `price_per_hour` = USD per node-hour = price / 100 / quantity / hours, with
  `gpu_count` = 8, the CLI's `GPUS_PER_NODE` (the quote states no GPU count: `provider_data`
  says so). USD: the answer's stated unit.
- `pricing_type="on_demand"`, `price_source="market"`: a live price set by the book, bought now
  for a block that cannot be taken back. `billing_unit="hour"`: blocks are whole hours, one hour
  at least (the seeds' `minimum_charge_seconds`). `region="global"`: the quote searches every
  zone; the zone it found is kept in `provider_data`.
- `instance_type` is the one the quote states (the one asked for when it states none), and
  `gpu_name_raw` its GPU word (`h100` of `h100i`); the seeds map each type (instance_types.csv).

An answer without a quote (`quote: null`, with a `no_quote_reason` such as `no_availability`) is
`Excluded("no_quote")`, the reason in the detail: nothing is for sale in that block now. Its scope
then comes back empty and the guards keep the type's last good price (the run says `degraded`).
A quote whose price or size cannot be read is a wrong row (`problem`, NaN price). An answer that
is not a quote answer, or that holds neither a quote nor a reason, raises `LayoutChanged`.
Scopes: one per instance type asked (`quote:h100i`, ...). No spot: the market sells no
interruptible tier.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, number, read_price
from connectors.http import Client

name = "sfcompute"
CREDENTIAL = "SF_API_KEY"
requires: tuple[str, ...] = (CREDENTIAL,)

QUOTE_URL = "https://api.sfcompute.com/v0/quote"
# the buy-side instance types `handle_quote` documents (sfcompute/cli src/schema.ts)
INSTANCE_TYPES = ("h100i", "h100v", "h200ki")
BLOCK_SECONDS = 3600  # the shortest block a quote may ask for ("minimum 3600")
GPUS_PER_NODE = 8  # sfcompute/cli src/lib/constants.ts; the quote states no GPU count
CENTS_PER_USD = 100
# The CLI gives a quote up to 600 s (the market runs a solver per request); 120 s to read is
# our bound, well inside the provider's deadline.
QUOTE_TIMEOUT = httpx.Timeout(120.0, connect=10.0)
_GPU_WORD = re.compile(r"^(?P<gpu>[a-z]+[0-9]+)[a-z]*$")


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Accept": "application/json", "Authorization": f"Bearer {creds[CREDENTIAL]}"}
    for instance_type in INSTANCE_TYPES:
        yield client.fetch(
            "GET", QUOTE_URL, params=quote_params(instance_type), headers=headers, timeout=QUOTE_TIMEOUT
        )


def quote_params(instance_type: str) -> dict[str, str | int]:
    """The query for one node of `instance_type` for the shortest block, starting now."""
    return {
        "side": "buy",
        "instance_type": instance_type,
        "quantity": 1,
        "duration": BLOCK_SECONDS,
        "min_start_date": "NOW",
        "max_start_date": "NOW",
    }


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    for response in responses:
        asked = _asked_type(response.url)
        payload = response.json()
        if not isinstance(payload, dict) or payload.get("object", "quote") != "quote":
            got = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
            raise LayoutChanged(
                f"{response.url}: not a quote answer (expected `object: quote`, got {got}); "
                "has the quote endpoint changed?"
            )
        quote = payload.get("quote")
        if quote is None:
            reason = payload.get("no_quote_reason")
            if not reason:
                raise LayoutChanged(
                    f"{response.url}: neither `quote` nor `no_quote_reason` in the answer (got "
                    f"{sorted(payload)}); has the quote endpoint changed its format?"
                )
            yield Excluded("no_quote", detail=f"{asked}: {reason}")
            continue
        if not isinstance(quote, dict):
            raise LayoutChanged(f"{response.url}: `quote` is a {type(quote).__name__}, not an object")
        yield quote_offer(quote, asked, response.fetched_at)


def quote_offer(quote: Mapping[str, Any], asked: str, fetched_at: datetime) -> Offer:
    """The offer of one quote: USD per node-hour of the block it prices."""
    cents, problem = read_price(quote.get("price"), "quote.price")
    nodes = number(quote.get("quantity"))
    hours = block_hours(quote.get("start_at"), quote.get("end_at"), fetched_at)
    price = cents / CENTS_PER_USD / nodes / hours if nodes and hours else math.nan
    if problem is None and not (nodes and nodes > 0):
        problem = f"quote.quantity is not a positive node count: {quote.get('quantity')!r}"
    if problem is None and hours is None:
        problem = (
            f"block length unreadable: start_at {quote.get('start_at')!r}, end_at {quote.get('end_at')!r}"
        )
    instance_type = str(quote.get("instance_type") or asked)
    return Offer(
        provider=name,
        instance_type=instance_type,
        region="global",
        pricing_type="on_demand",
        price_source="market",
        price_per_hour=price,
        currency="USD",
        gpu_name_raw=gpu_word(instance_type),
        gpu_count=float(GPUS_PER_NODE),
        billing_unit="hour",
        available=True,
        provider_data={
            "zone": quote.get("zone"),
            "price_cents": quote.get("price"),
            "block_nodes": quote.get("quantity"),
            "block_hours": hours,
            "start_at": quote.get("start_at"),
            "end_at": quote.get("end_at"),
            "price_statistic": "quote (1 node, 1 h, from now)",
            "gpu_count_stated": False,
        },
        scope=f"quote:{asked}",
        problem=problem,
    )


def block_hours(start: object, end: object, fetched_at: datetime) -> float | None:
    """Hours from `start` ("NOW" or ISO 8601) to `end` (ISO 8601); None when unreadable or not positive.

    "NOW" is the start of the minute after `fetched_at`, as the market reads it.

    >>> block_hours("2026-12-01T09:00:00Z", "2026-12-01T11:00:00Z", datetime(2026, 12, 1))
    2.0
    """
    stop = _instant(end)
    if isinstance(start, str) and start.upper() == "NOW":
        begin: datetime | None = _next_minute(fetched_at)
    else:
        begin = _instant(start)
    if begin is None or stop is None:
        return None
    if (begin.tzinfo is None) != (stop.tzinfo is None):
        return None
    hours = (stop - begin).total_seconds() / 3600
    return hours if hours > 0 else None


def gpu_word(instance_type: str) -> str:
    """The GPU of an instance type's name (`h100` of `h100i`, `h200` of `h200ki`), else the name."""
    found = _GPU_WORD.match(instance_type)
    return found["gpu"] if found else instance_type


def _asked_type(url: str) -> str:
    values = parse_qs(urlsplit(url).query).get("instance_type")
    return values[0] if values else "any"


def _instant(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _next_minute(moment: datetime) -> datetime:
    floor = moment.replace(second=0, microsecond=0)
    return floor if floor == moment else floor + timedelta(minutes=1)
