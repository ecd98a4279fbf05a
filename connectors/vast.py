"""Vast.ai: the GPU marketplace's host offers, aggregated per market segment.

Source: `POST https://console.vast.ai/api/v0/bundles/` (the offer search behind the console
and the `vastai search offers` CLI; documented at https://docs.vast.ai/api-reference/search/search-offers).
The search answers without an API key (gpuhunt, `providers/vastai.py` 2026-08, queries it
anonymously with a `limit` of 3000), so `requires` is empty; `VAST_API_KEY`, when set, is sent as
`Authorization: Bearer ...`, as Vast's API page (vast.ai/developers/api, read 2026-12-01: "All
requests require an API key") and its search-offers reference show. A third-party note reports
that anonymous answers are capped (at 64 offers, since 2026-06; not confirmed by Vast), and
vast-ai/vast-cli#268 (2025-09) reports the SDK search returning far fewer offers than the console.
Capped answers: an answer holding as many offers as the `limit` the search asked for is cut off
(more offers matched than were returned). Its offers load, and `parse` yields a `Degraded` item,
so the provider run is `degraded` with a hint to set `VAST_API_KEY` (or raise `LIMIT`). A cap
below the limit asked for (an anonymous cap the answer does not state) cannot be told from a small
market by the answer alone: only a live run with and without a key can settle it.
The body is a filter document; `SEARCH` asks for every rentable, unrented offer, verified or not,
sorted by Vast's score, up to `LIMIT` offers. No documented rate limit; one request per run (Vast
asks heavy clients to cache: the answer is a few MB).

Each element of `offers` is one host machine's offer (`id`, `machine_id`, `host_id`). Fields read:
`gpu_name`, `num_gpus`, `gpu_ram` (MiB per GPU), `dph_total` (on-demand $/h for the whole offer,
GPU + its share of CPU/RAM + the default storage allocation), `min_bid` (the lowest accepted bid
for an interruptible instance, $/h), `geolocation` ("City, CC" or "CC"), `hosting_type` (1 =
datacenter partner) or `datacenter`, `verification` ("verified"/"unverified"/"deverified") or
`verified`, `reliability2` (or `reliability`, 0..1), `storage_cost` ($/GB-month of disk),
`inet_up_cost` / `inet_down_cost` ($/GB leaving / entering the host), `cpu_cores_effective`,
`cpu_cores`, `cpu_ram` (MB of the whole machine), `bw_nvlink` (GB/s, 0 = no NVLink).

What is published (see `connectors.market`): one offer per (pricing type, GPU, GPU count, memory
class, country, tier) with `price_per_hour` = the segment's p10 (`provider_data` has min, p10,
median, max, host count, median reliability, disk $/GB-month, egress/ingress $/TB):
- on-demand = `dph_total` -> `pricing_type="on_demand"`, `price_source="market"` (host-set prices);
- interruptible = `min_bid` -> `spot`, `market` (the bid floor; a running bid can be outbid).
Every host offer stays in the raw archive: the response body is archived as it came.

Quirks handled:
- `tier` = `"<datacenter|community>-<verified|unverified>"` ("deverified" counts as unverified);
  a host that states neither field is tier `unknown`; a missing `geolocation` is region `unknown`.
- A host whose `dph_total` / `min_bid` is absent, null, NaN, 0 or negative is a wrong row: it is
  flagged (see `connectors.market`), never read as "not offered" and never averaged in.
- `cpu_ram` is the whole machine's; the offer's share is `cpu_ram * cpu_cores_effective / cpu_cores`.
- A host offer without `gpu_name` / `num_gpus` is quarantined alone as an unreadable host row
  (`market.read_host_rows`); only when every row is unreadable does the parse fail.
- No `offers` list raises `LayoutChanged`; an empty list does too, so that a transient empty answer
  cannot read as "the market is gone" (the guards would hold it anyway).
- One scope per pricing type for the whole market and a laxer `shrink_limit`: segment counts swing
  from minute to minute (see `connectors.market`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors import market
from connectors.base import (
    Degraded,
    Offer,
    PricingType,
    RawResponse,
    Unchanged,
    required_list,
)
from connectors.http import Client
from connectors.market import HostOffer

name = "vast"
requires: tuple[str, ...] = ()
OPTIONAL_CREDENTIAL = "VAST_API_KEY"
optional: tuple[str, ...] = (OPTIONAL_CREDENTIAL,)  # sent as a Bearer header when set
shrink_limit = market.SHRINK_LIMIT

API_URL = "https://console.vast.ai/api/v0/bundles/"
LIMIT = 5000
SEARCH: dict[str, Any] = {
    "rentable": {"eq": True},
    "rented": {"eq": False},
    "type": "on-demand",
    "order": [["score", "desc"]],
    "limit": LIMIT,
}
# Serialized once so the request matches the replay cassette byte for byte.
REQUEST_BODY = json.dumps(SEARCH, separators=(",", ":")).encode()
MIB_PER_GB = 1024  # gpu_ram is MiB; gpu_memory_gb_raw is GB as elsewhere (AWS's MiB / 1024)
GB_PER_TB = 1000
# (pricing type, price key) per host offer
PRICES: tuple[tuple[PricingType, str], ...] = (("on_demand", "dph_total"), ("spot", "min_bid"))


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if key := creds.get(OPTIONAL_CREDENTIAL):
        headers["Authorization"] = f"Bearer {key}"
    yield client.fetch("POST", API_URL, content=REQUEST_BODY, headers=headers)


def host_offers(payload: Any, url: str = API_URL) -> list[Mapping[str, Any]]:
    """The `offers` list of a bundles answer; raises `LayoutChanged` on another shape or none."""
    return required_list(payload, "offers", where=url, answer="the bundles answer", bare_list=True)


def country(geolocation: object) -> str:
    """The country code of a Vast `geolocation` ("Quebec, CA" -> "CA"); "unknown" when absent.

    >>> country("Quebec, CA"), country("SE"), country(None)
    ('CA', 'SE', 'unknown')
    """
    if not isinstance(geolocation, str) or not geolocation.strip():
        return "unknown"
    return geolocation.rsplit(",", 1)[-1].strip() or "unknown"


def tier(offer: Mapping[str, Any]) -> str:
    """`datacenter-verified`, `community-unverified`, ...; `unknown` when the host states neither."""
    hosting = offer.get("hosting_type", offer.get("datacenter"))
    verification = offer.get("verification")
    verified = offer.get("verified") if verification is None else verification == "verified"
    if hosting is None and verified is None:
        return "unknown"
    where = "datacenter" if hosting not in (None, 0, False) else "community"
    return f"{where}-{'verified' if verified else 'unverified'}"


def to_hosts(offer: Mapping[str, Any]) -> Iterator[HostOffer]:
    """The on-demand and interruptible `HostOffer` of one Vast offer."""
    gpu = offer.get("gpu_name")
    count = _number(offer.get("num_gpus"))
    if not gpu or count is None:
        raise market.HostRowError("bundles offer without `gpu_name` / `num_gpus`")
    memory = _number(offer.get("gpu_ram"))
    cores, effective = _number(offer.get("cpu_cores")), _number(offer.get("cpu_cores_effective"))
    machine_ram = _number(offer.get("cpu_ram"))
    ram_gb = None
    if machine_ram is not None:
        share = effective / cores if cores and effective else 1.0
        ram_gb = round(machine_ram * share / 1000, 1)
    reliability = _number(offer.get("reliability2", offer.get("reliability")))
    up, down = _number(offer.get("inet_up_cost")), _number(offer.get("inet_down_cost"))
    for pricing_type, key in PRICES:
        price, problem = _price(offer, key)
        yield HostOffer(
            gpu_name_raw=str(gpu),
            gpu_count=count,
            region=country(offer.get("geolocation")),
            tier=tier(offer),
            pricing_type=pricing_type,
            price_per_hour=price,
            gpu_memory_gb_raw=round(memory / MIB_PER_GB, 2) if memory else None,
            host_id=str(offer.get("id", offer.get("machine_id", "?"))),
            vcpus=effective,
            ram_gb=ram_gb,
            reliability=reliability,
            disk_per_gb_month=_number(offer.get("storage_cost")),
            egress_per_tb=None if up is None else round(up * GB_PER_TB, 6),
            ingress_per_tb=None if down is None else round(down * GB_PER_TB, 6),
            problem=problem,
        )


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Degraded]:
    hosts: list[HostOffer] = []
    capped: list[Degraded] = []
    for response in responses:
        rows = host_offers(response.json(), response.url)
        limit = requested_limit(response.request_body)
        if len(rows) >= limit:
            capped.append(capped_answer(len(rows), limit))
        read, unreadable = market.read_host_rows(
            name, rows, lambda row: list(to_hosts(row)), where=response.url
        )
        hosts.extend(host for found in read for host in found)
        yield from unreadable
    yield from market.aggregate(name, hosts)
    yield from capped


def requested_limit(request_body: bytes | None) -> int:
    """The `limit` the search asked for (from the request as sent), else `LIMIT`."""
    try:
        asked = json.loads(request_body or b"{}").get("limit")
    except (json.JSONDecodeError, AttributeError):
        asked = None
    return asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else LIMIT


def capped_answer(count: int, limit: int) -> Degraded:
    """What to say about an answer that holds as many offers as it was allowed to."""
    return Degraded(
        reason=(
            f"the bundles answer holds {count} offers, the search's limit of {limit}: more offers "
            "matched than came back, so the market read is incomplete"
        ),
        hint=(
            f"set {OPTIONAL_CREDENTIAL} (anonymous searches may be capped), or raise LIMIT in "
            "connectors/vast.py if a key is already set"
        ),
    )


_price = market.host_price  # 0, negative, NaN come back as read: market.aggregate flags them
_number = market.host_number
