"""TensorDock: marketplace host nodes with component prices, aggregated per market segment.

Source: `GET https://dashboard.tensordock.com/api/v2/hostnodes` with `Authorization: Bearer
<TENSORDOCK_API_KEY>` (TensorDock API v2, "Fetch Hostnodes and Locations",
https://dashboard.tensordock.com/api/docs). Without the key the endpoint answers 403, so the key
is required: a run without it is skipped cleanly. No documented rate limit; one request per run.

The answer is `{"data": {"hostnodes": [...]}}`; each host node:

    {"id", "uptime_percentage",
     "location": {"city", "stateprovince", "country", "tier", "network_speed_gbps", ...},
     "available_resources": {"gpus": [{"v0Name": "geforcertx4090-pcie-24gb",
                                       "availableCount", "price_per_hr"}],
                             "vcpu_count", "ram_gb", "storage_gb", "has_public_ip_available"},
     "pricing": {"per_vcpu_hr", "per_gb_ram_hr", "per_gb_storage_hr"}}

TensorDock prices a VM by its parts: GPUs (`price_per_hr` per GPU) plus vCPUs, GB of RAM and GB
of storage at the node's unit prices, all USD per hour. There is no fixed instance shape, so this
connector prices one documented bundle per GPU count (`BUNDLE`): n GPUs with `VCPUS_PER_GPU`
vCPUs and `RAM_GB_PER_GPU` GB of RAM each, and `STORAGE_GB` of disk, capped at what the node has
free. `price_per_hour` of a host offer is that bundle; `provider_data` of the published segment
keeps the medians of the unit prices' results (disk as $/GB-month).

What is published (see `connectors.market`): each host node gives one host offer per GPU model and
count of 1, 2, 4 or 8 up to `availableCount`; host offers are aggregated into one offer per
(GPU, count, memory, country, tier) with `price_per_hour` = p10, `pricing_type="on_demand"`,
`price_source="market"` (host-set prices; TensorDock has no spot market for VMs). `tier` is the
location's tier (`tier-0` ... `tier-4`, TensorDock's hardware/network class), `reliability` the
node's `uptime_percentage` / 100.

Quirks handled:
- A GPU with `availableCount` 0 offers nothing now: `Excluded("no_free_gpus")`.
- A missing or wrong `price_per_hr` (or missing unit prices) is a wrong row: flagged, never read
  as "not offered". Unit prices of 0 are taken as free (hosts may include RAM).
- The GPU's memory comes from its `v0Name` ("...-24gb"); `gpu_name_raw` is the `v0Name`
  (tensordock-scoped aliases map it).
- A hostnode without `available_resources.gpus`, or a GPU without `v0Name`, is quarantined alone
  as an unreadable host row (`market.read_host_rows`); only when every row is unreadable does the
  parse fail.
- No `data.hostnodes` list raises `LayoutChanged`; so does an empty one.
- One scope for the whole market and a laxer `shrink_limit`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from connectors import market
from connectors.base import (
    HOURS_PER_UNIT,
    Excluded,
    Offer,
    RawResponse,
    Unchanged,
    child,
    excluded,
    required_list,
)
from connectors.http import Client
from connectors.market import HostOffer

name = "tensordock"
CREDENTIAL = "TENSORDOCK_API_KEY"
requires: tuple[str, ...] = (CREDENTIAL,)
shrink_limit = market.SHRINK_LIMIT

API_URL = "https://dashboard.tensordock.com/api/v2/hostnodes"
GPU_COUNTS = (1, 2, 4, 8)
# The bundle priced per GPU count: enough CPU and RAM to feed a fine-tuning run, and one disk.
VCPUS_PER_GPU = 8
RAM_GB_PER_GPU = 32
STORAGE_GB = 200
BUNDLE = {"vcpus_per_gpu": VCPUS_PER_GPU, "ram_gb_per_gpu": RAM_GB_PER_GPU, "storage_gb": STORAGE_GB}
_MEMORY = re.compile(r"(\d+)gb\b", re.IGNORECASE)
_UNIT_PRICES = ("per_vcpu_hr", "per_gb_ram_hr", "per_gb_storage_hr")


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Authorization": f"Bearer {creds[CREDENTIAL]}", "Accept": "application/json"}
    yield client.fetch("GET", API_URL, headers=headers)


def hostnodes(payload: Any, url: str = API_URL) -> list[Mapping[str, Any]]:
    return required_list(payload, "data.hostnodes", where=url, answer="the hostnodes answer")


def memory_gb(v0_name: str) -> float | None:
    """GB per GPU from a `v0Name` ("geforcertx4090-pcie-24gb" -> 24.0)."""
    match = _MEMORY.search(v0_name)
    return float(match.group(1)) if match else None


def to_hosts(node: Mapping[str, Any]) -> tuple[list[HostOffer], Counter[str]]:
    """The host offers of one node (per GPU model and count), and what it left out."""
    resources = node.get("available_resources")
    if not isinstance(resources, dict) or not isinstance(resources.get("gpus"), list):
        raise market.HostRowError("hostnode without `available_resources.gpus`")
    location = child(node, "location")
    pricing = child(node, "pricing")
    units = {key: _number(pricing.get(key)) for key in _UNIT_PRICES}
    missing_units = [key for key, value in units.items() if value is None]
    uptime = _number(node.get("uptime_percentage"))
    free_vcpus, free_ram = _number(resources.get("vcpu_count")), _number(resources.get("ram_gb"))
    free_storage = _number(resources.get("storage_gb"))
    storage = min(STORAGE_GB, free_storage) if free_storage is not None else STORAGE_GB
    left_out: Counter[str] = Counter()
    hosts: list[HostOffer] = []
    for gpu in resources["gpus"]:
        v0 = gpu.get("v0Name") if isinstance(gpu, dict) else None
        if not v0:
            raise market.HostRowError(f"hostnode gpu without `v0Name`: {gpu!r:.200}")
        count = _number(gpu.get("availableCount"))
        counts = [n for n in GPU_COUNTS if count is not None and n <= count]
        if not counts:
            left_out["no_free_gpus"] += 1
            continue
        per_gpu, problem = _gpu_price(gpu)
        if problem is None and missing_units:
            problem = f"`pricing.{missing_units[0]}` missing"
        for n in counts:
            vcpus = min(VCPUS_PER_GPU * n, free_vcpus) if free_vcpus is not None else VCPUS_PER_GPU * n
            ram = min(RAM_GB_PER_GPU * n, free_ram) if free_ram is not None else RAM_GB_PER_GPU * n
            if problem is None:
                price = round(
                    n * per_gpu
                    + vcpus * (units["per_vcpu_hr"] or 0.0)
                    + ram * (units["per_gb_ram_hr"] or 0.0)
                    + storage * (units["per_gb_storage_hr"] or 0.0),
                    6,
                )
            else:  # keep the wrong value as read, for the quarantine
                price = n * per_gpu if math.isfinite(per_gpu) else math.nan
            hosts.append(
                HostOffer(
                    gpu_name_raw=str(v0),
                    gpu_count=float(n),
                    region=str(location.get("country") or "unknown"),
                    tier=f"tier-{location['tier']}" if location.get("tier") is not None else "unknown",
                    pricing_type="on_demand",
                    price_per_hour=price,
                    gpu_memory_gb_raw=memory_gb(str(v0)),
                    host_id=str(node.get("id", "?")),
                    vcpus=vcpus,
                    ram_gb=ram,
                    reliability=None if uptime is None else round(uptime / 100, 4),
                    disk_per_gb_month=None
                    if units["per_gb_storage_hr"] is None
                    else round(units["per_gb_storage_hr"] * HOURS_PER_UNIT["month"], 6),
                    problem=problem,
                )
            )
    return hosts, left_out


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    hosts: list[HostOffer] = []
    left_out: Counter[str] = Counter()
    for response in responses:
        rows = hostnodes(response.json(), response.url)
        read, unreadable = market.read_host_rows(name, rows, to_hosts, where=response.url)
        for found, skipped in read:
            hosts.extend(found)
            left_out.update(skipped)
        yield from unreadable
    for offer in market.aggregate(name, hosts):
        yield _with_bundle(offer)
    yield from excluded(left_out)


def _with_bundle(offer: Offer) -> Offer:
    return replace(offer, provider_data={**offer.provider_data, "bundle": BUNDLE})


def _gpu_price(gpu: Mapping[str, Any]) -> tuple[float, str | None]:
    if gpu.get("price_per_hr") is None:
        return math.nan, "`price_per_hr` missing"
    value = _number(gpu["price_per_hr"])
    if value is None:
        return math.nan, f"`price_per_hr` is not a number: {gpu['price_per_hr']!r}"
    if not market.is_valid_price(value):
        return value, f"`price_per_hr` is {value}"
    return value, None


_number = market.host_number
