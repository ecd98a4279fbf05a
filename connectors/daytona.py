"""Daytona: per-GPU on-demand and spot rates from Daytona's public billing price list.

Source: `GET https://billing.app.daytona.io/gpu-pricing` (keyless JSON; no documented rate limit;
one request a run). Checked 2026-12-01: gpuhunt (`providers/daytona.py`, commit b57dbe8) reads the
same URL without a key and the same `gpus` / `resources.onDemand` / `resources.spot` keys. Shape::

    {"gpus": [{"type": "H100", "onDemandPricePerHour": 3.95, "spotPricePerHour": 2.27}, ...],
     "resources": {"onDemand": {"vcpuPerHour": 0.0504, "memoryGiBPerHour": 0.0162,
                                "diskGiBPerHour": 0.000108},
                   "spot": {...same keys...}}}

What becomes an offer: per GPU type, one 1-GPU offer per pricing type, USD per GPU-hour
(`instance_type` `"1x <type>"`, `region="global"`: the list names no region, GPU count or
shape). `onDemandPricePerHour` -> `on_demand`; `spotPricePerHour` -> `spot`. Both are rates
Daytona publishes, not a live market, so both are `price_source="list"` (the spot one is labelled
`provider_data["spot_kind"] = "published_rate"`).

Not in the price: vCPUs, memory and disk are billed per unit on top (`resources`); the rates of
the offer's tier are kept in `provider_data["resources"]`, since the list does not say how many
vCPUs or GiB a GPU sandbox comes with.

Quirks handled:
- A price that is `null` means "not offered at this tier": `Excluded("no_spot_rate")` (or
  `no_on_demand_rate`). A missing price key, or a price that is not a positive finite number,
  yields the offer with `problem` set (price NaN when unreadable): a renamed key must not read
  as "not offered".
- No `gpus` list, or an empty one, raises `LayoutChanged`; an entry without `type` too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import Excluded, LayoutChanged, Offer, PricingType, RawResponse, required_list
from connectors.http import Client

name = "daytona"
requires: tuple[str, ...] = ()

API_URL = "https://billing.app.daytona.io/gpu-pricing"
# (pricing type, price key, resources tier)
TIERS: tuple[tuple[PricingType, str, str], ...] = (
    ("on_demand", "onDemandPricePerHour", "onDemand"),
    ("spot", "spotPricePerHour", "spot"),
)


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield client.fetch("GET", API_URL)


def gpu_entries(payload: Any, url: str = API_URL) -> list[Mapping[str, Any]]:
    """The `gpus` list of the price list; raises when it is missing or empty."""
    return required_list(payload, "gpus", where=url, answer="the GPU price list")


def gpu_offers(gpu: Mapping[str, Any], resources: Mapping[str, Any]) -> Iterator[Offer | Excluded]:
    """The on-demand and spot offer of one GPU type (one GPU, USD per hour)."""
    kind = gpu.get("type")
    if not kind:
        raise LayoutChanged(f"GPU price entry without `type`: {dict(gpu)!r}")
    for pricing_type, key, tier in TIERS:
        raw = gpu.get(key)
        if key in gpu and raw is None:
            yield Excluded(f"no_{pricing_type}_rate", str(kind))  # null: not offered for this GPU
            continue
        price, problem = _price(raw, key, key in gpu)
        yield Offer(
            provider=name,
            instance_type=f"1x {kind}",
            region="global",
            pricing_type=pricing_type,
            price_source="list",
            price_per_hour=price,
            currency="USD",
            gpu_name_raw=str(kind),
            gpu_count=1.0,
            provider_data={
                "gpu_type": kind,
                "price_per_gpu_hour": raw,
                "resources": dict(resources.get(tier) or {}),
                "resources_billed_separately": True,
            }
            | ({"spot_kind": "published_rate"} if pricing_type == "spot" else {}),
            scope=pricing_type,
            problem=problem,
        )


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    for response in responses:
        payload = response.json()
        resources = payload.get("resources") if isinstance(payload, dict) else None
        for gpu in gpu_entries(payload, response.url):
            yield from gpu_offers(gpu, resources if isinstance(resources, dict) else {})


def _price(raw: object, key: str, present: bool) -> tuple[float, str | None]:
    if not present:
        return math.nan, f"`{key}` missing"
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return math.nan, f"`{key}` {raw!r} is not a number"
    number = float(raw)
    if not (math.isfinite(number) and number > 0):
        return number, f"`{key}` {raw!r} is not a positive number"
    return number, None
