"""Latitude.sh: hourly prices of bare-metal GPU servers and GPU virtual machines, per region.

Source: the Latitude.sh API (https://docs.latitude.sh, OpenAPI as generated into the official
SDKs, github.com/latitudesh/latitudesh-python-sdk, checked 2026-12-02 at 4ef400c):
`GET https://api.latitude.sh/plans` (bare-metal plans, `PlanData`) and
`GET https://api.latitude.sh/plans/virtual_machines` (`VirtualMachinePlans`), both with
`Authorization: Bearer <token>`. The SDK sends its bearer token on every call and every peer
that reads plans live sends one, so `LATITUDESH_BEARER` (the SDK's own variable name) is
required: without it the provider is skipped, never called keyless. Neither list takes paging
parameters in the SDK; an answer whose `meta` says it has more pages is reported `Degraded`.
Two requests per run; no documented rate limit. Shape (both lists)::

    {"data": [{"id": "...", "type": "plans",
               "attributes": {"slug": "g3-h100-small", "name": "g3.h100.small",
                              "specs": {"cpu": {...}, "memory": {"total": 256},
                                        "gpu": {"count": 1, "type": "NVIDIA H100 80GB",
                                                "vram_per_gpu": 80, "interconnect": "PCIe"}},
                              "regions": [{"name": "United States", "stock_level": "low",
                                           "locations": {"available": ["DAL"], "in_stock": ["DAL"]},
                                           "pricing": {"USD": {"hour": 1.68, "month": 1230.0},
                                                       "BRL": {...}}}]}}]}

A VM plan's `specs.gpu` is a string (the GPU's name) with `vram_per_gpu` beside it, and no count.

One offer per (plan, region): the server or VM is the instance, its price per instance. The
price read is `pricing.USD.hour` (USD per hour); a region priced only in BRL is read in BRL (the
warehouse converts it); the monthly and yearly prices are kept in `provider_data` (`month`,
`year`, per currency), never turned into an hourly rate. Latitude bills hourly or monthly at the
buyer's choice (`billing: hourly | monthly` when a server is created, terraform-provider-latitudesh):
`billing_unit="hour"`. A region whose currency block has no `hour` is a wrong row (`problem`,
NaN price, its monthly price kept): a renamed key must not read as "monthly only".

`instance_type` is the bare-metal plan's `slug` ("g3-h100-small"; the name the API takes to
deploy) or the VM plan's `name` ("vm.h100.small"; VM plans have no slug). `region` is the
region's `name`; its sites (`locations.available`, `in_stock`) and `stock_level` are kept in
`provider_data`; `available` is false when the region's `stock_level` is `unavailable` or no
site has stock. GPU: `specs.gpu.type` / the VM's `specs.gpu`, `count` (a VM states none: 1, and
`provider_data["gpu_count_stated"] = False`), `vram_per_gpu` (GB per GPU) and `interconnect`
(kept in `provider_data`; the seeds carry the interconnect per plan family).

Left out, counted: plans without a GPU (`Excluded("cpu_only")`), GPU plans listed in no region
(`Excluded("no_regions")`). No `data` list, or an empty one, raises `LayoutChanged`.
Scopes: one per list (`plans:bare_metal`, `plans:virtual_machines`). No spot: Latitude.sh sells
no interruptible capacity.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import (
    Degraded,
    Excluded,
    Offer,
    RawResponse,
    child,
    excluded,
    number,
    read_price,
    required_list,
)
from connectors.http import Client

name = "latitude"
CREDENTIAL = "LATITUDESH_BEARER"
requires: tuple[str, ...] = (CREDENTIAL,)

API = "https://api.latitude.sh"
BARE_METAL_URL = f"{API}/plans"
VM_URL = f"{API}/plans/virtual_machines"
SCOPES: Mapping[str, str] = {BARE_METAL_URL: "plans:bare_metal", VM_URL: "plans:virtual_machines"}
# the currency read first; a region priced in no USD is read in the next one it states
CURRENCIES = ("USD", "BRL")
_COUNT_PREFIX = re.compile(r"^\s*(?P<count>[1-9][0-9]*)\s*x\s+(?P<name>.+)$", re.IGNORECASE)


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Accept": "application/json", "Authorization": f"Bearer {creds[CREDENTIAL]}"}
    for url in (BARE_METAL_URL, VM_URL):
        yield client.fetch("GET", url, headers=headers)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded | Degraded]:
    left_out: Counter[str] = Counter()
    for response in responses:
        payload = response.json()
        scope = SCOPES.get(response.url.split("?")[0], "plans")
        plans = required_list(payload, "data", where=response.url, answer="the plans list")
        for plan in plans:
            offers, reason = plan_offers(plan if isinstance(plan, dict) else {}, scope)
            yield from offers
            if reason:
                left_out[reason] += 1
        more = _more_pages(payload)
        if more:
            yield Degraded(
                reason=f"{response.url}: page 1 of {more} read (`meta.last_page`); the list is paged now",
                hint="the connector reads one page; teach it the paging parameters of the plans list",
            )
    yield from excluded(left_out)


def gpu_of(specs: Mapping[str, Any]) -> tuple[str | None, float | None, float | None, dict[str, Any]]:
    """(GPU name, count, GB per GPU, extras) of a plan's specs; (None, ...) for a plan without GPU.

    Bare metal states `gpu` as an object with a count; a VM as a string, one GPU unless the
    string itself says "<n> x <name>".

    >>> gpu_of({"gpu": {"type": "H100", "count": 4, "vram_per_gpu": 80, "interconnect": "NVLink"}})
    ('H100', 4.0, 80.0, {'interconnect': 'NVLink'})
    >>> gpu_of({"gpu": "NVIDIA L40S", "vram_per_gpu": 48})
    ('NVIDIA L40S', 1.0, 48.0, {'gpu_count_stated': False})
    """
    gpu = specs.get("gpu")
    if isinstance(gpu, dict):
        count = number(gpu.get("count"))
        kind = gpu.get("type")
        if not kind or not count:
            return None, None, None, {}
        extras = {"interconnect": gpu["interconnect"]} if gpu.get("interconnect") else {}
        return str(kind), count, number(gpu.get("vram_per_gpu")), extras
    if isinstance(gpu, str) and gpu.strip():
        stated = _COUNT_PREFIX.match(gpu)
        if stated:
            return stated["name"].strip(), float(stated["count"]), number(specs.get("vram_per_gpu")), {}
        return gpu.strip(), 1.0, number(specs.get("vram_per_gpu")), {"gpu_count_stated": False}
    return None, None, None, {}


def plan_offers(plan: Mapping[str, Any], scope: str) -> tuple[list[Offer], str | None]:
    """One offer per region of a plan, or none and the reason it is left out."""
    attributes = child(plan, "attributes")
    specs = child(attributes, "specs")
    gpu, count, vram, extras = gpu_of(specs)
    if gpu is None or count is None:
        return [], "cpu_only"
    regions = [r for r in attributes.get("regions") or [] if isinstance(r, dict)]
    if not regions:
        return [], "no_regions"
    label = str(attributes.get("slug") or attributes.get("name") or plan.get("id") or "?")
    base = {"plan_id": plan.get("id"), "plan_name": attributes.get("name"), **extras}
    if child(specs, "cpu"):
        # bare metal states sockets and physical cores, not vCPUs: kept as stated
        base["cpu"] = dict(child(specs, "cpu"))
    memory = specs.get("memory")
    ram = number(memory.get("total")) if isinstance(memory, dict) else number(memory)
    vcpus = number(child(specs, "vcpu").get("count")) or number(specs.get("vcpus"))
    return [_offer(label, region, gpu, count, vram, vcpus, ram, base, scope) for region in regions], None


def _offer(
    label: str,
    region: Mapping[str, Any],
    gpu: str,
    count: float,
    vram: float | None,
    vcpus: float | None,
    ram: float | None,
    base: Mapping[str, Any],
    scope: str,
) -> Offer:
    pricing = child(region, "pricing")
    currency = next((c for c in CURRENCIES if isinstance(pricing.get(c), dict)), "USD")
    block = child(pricing, currency)
    price, problem = read_price(block.get("hour"), f"pricing.{currency}.hour")
    locations = child(region, "locations")
    in_stock = [str(s) for s in locations.get("in_stock") or []]
    stock = region.get("stock_level")
    data: dict[str, Any] = {
        **base,
        "stock_level": stock,
        "sites": [str(s) for s in locations.get("available") or []],
        "sites_in_stock": in_stock,
        "prices": {c: dict(v) for c, v in pricing.items() if isinstance(v, dict)},
    }
    return Offer(
        provider=name,
        instance_type=label,
        region=str(region.get("name") or "unknown"),
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=price,
        currency=currency,
        gpu_name_raw=gpu,
        gpu_count=count,
        gpu_memory_gb_raw=vram,
        vcpus=vcpus,
        ram_gb=ram,
        billing_unit="hour",
        available=bool(in_stock) and stock != "unavailable",
        provider_data=data,
        scope=scope,
        problem=problem,
    )


def _more_pages(payload: Any) -> int | None:
    """The stated last page when the answer says pages follow this one, else None."""
    meta = payload.get("meta") if isinstance(payload, dict) else None
    if not isinstance(meta, dict):
        return None
    last, current = number(meta.get("last_page")), number(meta.get("current_page")) or 1
    return int(last) if last and last > current else None
