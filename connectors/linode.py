"""Linode (Akamai Cloud): GPU plan prices from the public Linode API type list.

Source: `GET https://api.linode.com/v4/linode/types?page=N&page_size=500` (keyless; documented at
https://techdocs.akamai.com/linode-api/reference/get-linode-types). Linode's API allows 200
list requests a minute; a run sends one (all types fit one page of 500). Paging is by number:
`{"data": [...], "page", "pages", "results"}`; `fetch` asks for pages 2..`pages` when there are
more.

What becomes an offer: types whose `class` is "gpu" (or that state `gpus` > 0); the rest are CPU
plans, counted as `Excluded("cpu_only")`. Each GPU type gets one `on_demand` / `list` offer priced
`price.hourly` (USD per hour). `price.monthly` is the offer's `monthly_price_cap` (and kept in
`provider_data`): "You are charged the hourly rate for a service up to its monthly cap (rates get
rounded up to the nearest hour)" (linode.com/pricing/distributed-compute-regions/, read
2026-12-02), and "You'll never be billed more than the monthly cap for any service, excluding
network transfer overages" (Linode's guide "How Linode Billing Works",
linode.com/docs/platform/billing-and-support/how-linode-billing-works). A monthly price that is
missing or not positive is no cap. The type list names no regions: that offer's region is "global", the
price of every region without its own. `region_prices` (`[{"id", "hourly", "monthly"}]`) lists the
regions priced differently (e.g. "id-cgk" Jakarta, "br-gru" São Paulo); each becomes its own
offer with that region. A $0 default price beside region prices (a 2026 survey of the live list
saw GPU types priced that way) is "priced per region only": no "global" offer, only the regional
ones. Linode has no spot instances.

GPUs: the API states the count (`gpus`) but no model; the model is read from the label
("Dedicated 32GB + RTX6000 GPU x1" -> "RTX6000", "RTX4000 Ada x1 Small" -> "RTX4000 Ada"), and
the instance_types seed maps the type ids with their interconnect. VRAM is not stated.

A GPU type without a readable `price.hourly` is a wrong row (`problem`), never "not offered".
Scope: the whole list is one answer (`types:on_demand`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    Unchanged,
    child,
    excluded,
    number,
    read_price,
)
from connectors.http import Client

name = "linode"
requires: tuple[str, ...] = ()

TYPES_URL = "https://api.linode.com/v4/linode/types"
PAGE_SIZE = 500  # the documented maximum
MAX_PAGES = 20
CURRENCY = "USD"
DEFAULT_REGION = "global"
SCOPE = "types:on_demand"
GPU_CLASS = "gpu"
_COUNT_SUFFIX = re.compile(r"\s+x\d+\b.*$", re.IGNORECASE)
_GPU_WORD = re.compile(r"\s+GPU$", re.IGNORECASE)


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    first = client.fetch("GET", TYPES_URL, params=_params(1))
    yield first
    pages = page_count(first.json(), first.url)
    if pages > MAX_PAGES:
        raise LayoutChanged(f"{first.url}: {pages} pages of types; is page_size still honoured?")
    for page in range(2, pages + 1):
        yield client.fetch("GET", TYPES_URL, params=_params(page))


def _params(page: int) -> dict[str, str]:
    return {"page": str(page), "page_size": str(PAGE_SIZE)}


def page_count(payload: Any, url: str = TYPES_URL) -> int:
    """The `pages` a type list says it has (1 when absent)."""
    pages = payload.get("pages", 1) if isinstance(payload, dict) else None
    if isinstance(pages, bool) or not isinstance(pages, int) or pages < 1:
        raise LayoutChanged(f"{url}: `pages` is {pages!r}, expected a positive integer")
    return pages


def gpu_label(label: str) -> str | None:
    """The GPU model a type label names: "Dedicated 32GB + RTX6000 GPU x1" -> "RTX6000"."""
    text = label.split("+", 1)[1] if "+" in label else label
    model = _GPU_WORD.sub("", _COUNT_SUFFIX.sub("", text.strip())).strip()
    return model or None


def type_offers(linode_type: Mapping[str, Any]) -> list[Offer] | Excluded:
    """The offers of one type: the default price and each region price; or why it has none."""
    type_id = linode_type.get("id")
    if not type_id:
        raise LayoutChanged(f"type without `id` ({sorted(linode_type)}); has the API changed?")
    gpus = number(linode_type.get("gpus"))
    if linode_type.get("class") != GPU_CLASS and not gpus:
        return Excluded("cpu_only", str(type_id))
    price = child(linode_type, "price")
    memory_mb = number(linode_type.get("memory"))
    label = str(linode_type.get("label") or "")
    data = {
        "label": label,
        "class": linode_type.get("class"),
        "price_monthly": price.get("monthly"),
        "disk_mb": linode_type.get("disk"),
        "transfer_gb": linode_type.get("transfer"),
        "network_out_mbps": linode_type.get("network_out"),
        "successor": linode_type.get("successor"),
    }
    common: dict[str, Any] = {
        "provider": name,
        "instance_type": str(type_id),
        "pricing_type": "on_demand",
        "price_source": "list",
        "currency": CURRENCY,
        "gpu_name_raw": gpu_label(label),
        "gpu_count": gpus or 0.0,
        "vcpus": number(linode_type.get("vcpus")),
        "ram_gb": memory_mb / 1024 if memory_mb else None,
        "scope": SCOPE,
    }
    regional_prices = linode_type.get("region_prices") or []
    hourly, problem = _hourly(price)
    offers = []
    if hourly == 0 and regional_prices:
        # A $0 default beside region prices means "priced per region only" (seen on GPU types in
        # 2026), not a free plan: the regions carry the offers.
        excluded_default = True
    else:
        excluded_default = False
        offers.append(
            Offer(
                region=DEFAULT_REGION,
                price_per_hour=hourly,
                monthly_price_cap=monthly_cap(price),
                problem=problem,
                provider_data=data,
                **common,
            )
        )
    for regional in regional_prices:
        if not isinstance(regional, dict) or not regional.get("id"):
            raise LayoutChanged(f"{type_id}: `region_prices` entry without `id`: {regional!r}")
        hourly, problem = _hourly(regional)
        offers.append(
            Offer(
                region=str(regional["id"]),
                price_per_hour=hourly,
                monthly_price_cap=monthly_cap(regional),
                problem=problem,
                provider_data={**data, "price_monthly": regional.get("monthly"), "region_price": True},
                **common,
            )
        )
    if excluded_default and not offers:
        return Excluded("zero_default_price", str(type_id))
    return offers


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    offers: list[Offer] = []
    counts: Counter[str] = Counter()
    for response in responses:
        payload = response.json()
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
            raise LayoutChanged(f"{response.url}: `data` list missing (got {keys}); has the API changed?")
        for linode_type in payload["data"]:
            result = type_offers(linode_type) if isinstance(linode_type, dict) else Excluded("not_an_object")
            if isinstance(result, Excluded):
                counts[result.reason] += 1
            else:
                offers.extend(result)
    if not offers:
        raise LayoutChanged(
            f"no type with class {GPU_CLASS!r} or `gpus` > 0 among {sum(counts.values())} types from "
            f"{TYPES_URL}; has the type list changed its fields?"
        )
    yield from offers
    yield from excluded(counts)


def monthly_cap(price: Mapping[str, Any]) -> float | None:
    """The monthly price that caps the hourly rate; None where it is missing or not positive (a
    $0 default of a type priced per region only caps nothing)."""
    monthly = number(price.get("monthly"))
    return monthly if monthly is not None and monthly > 0 else None


def _hourly(price: Mapping[str, Any]) -> tuple[float, str | None]:
    return read_price(price.get("hourly"), "price.hourly")
