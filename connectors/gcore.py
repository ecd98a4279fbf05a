"""Gcore (Luxembourg; EU and global GPU cloud): hourly prices of bare-metal and virtual GPU flavors.

Source: the Gcore Cloud API (https://gcore.com/docs/api-reference/cloud, OpenAPI as generated into
the official SDK, github.com/G-Core/gcore-python `resources/cloud/gpu_baremetal/clusters/flavors.py`,
`gpu_virtual/clusters/flavors.py`, `types/cloud/region.py`, checked 2026-12-02), every call with
`Authorization: APIKey <key>` (the SDK's `auth_headers`):

    GET https://api.gcore.com/cloud/v1/regions                                  regions (id, name)
    GET https://api.gcore.com/cloud/v3/gpu/baremetal/{project}/{region}/flavors?include_prices=true
    GET https://api.gcore.com/cloud/v3/gpu/virtual/{project}/{region}/flavors?include_prices=true

Gcore publishes no price list without an account (its docs put every endpoint under the `APIKey`
scheme, and the flavor lists are per project), so `GCORE_API_KEY` and `GCORE_CLOUD_PROJECT_ID`
(the SDK's own variable names) are required: without them the provider is skipped. The project
is redacted like the key, so cassettes and the raw archive never name it. Requests: one for the
regions, then two per region whose `has_ai_gpu` is true and `state` is ACTIVE (a region the
project cannot use answers 403/404: counted, not failed). No documented rate limit. A region list
whose `count` exceeds the regions it returned is `Degraded` (the connector reads one page).

Shape of a flavor list (`GPUBaremetalFlavorList` / `GPUVirtualFlavorList`)::

    {"count": 2, "results": [{"name": "bm3-ai-1xlarge-h100-80-8", "disabled": false,
        "capacity": 3, "reserved_capacity": 0, "architecture": "x86_64",
        "hardware_description": {"cpu": "...", "gpu": "...", "ram": "...", ...},
        "hardware_properties": {"gpu_count": 8, "gpu_manufacturer": "NVIDIA",
                                "gpu_model": "H100", "nic_ib": "...", "nic_eth": "..."},
        "price": {"currency_code": "EUR", "price_per_hour": 23.2, "price_per_month": 16936.0,
                  "price_status": "show"}}]}

A virtual flavor's `hardware_description` holds numbers (`vcpus`, `ram` MiB, `local_storage`
GiB); a bare-metal one's only text, kept in `provider_data`.

One offer per (flavor, region): the flavor is one server or VM, and its `price` is the flavor's
price (the Cloud API prices a GPU cluster as servers x flavor; a peer reading the older
`bmflavors` list divides it by the node's 8 GPUs for a per-GPU figure), per hour, in the stated
`currency_code` (read as stated; converted by the warehouse). `price_per_month` is kept in
`provider_data`, never turned into an hourly rate; `billing_unit` is left unset (the API states
no billing granularity). `available` is `capacity > 0` ("number of available instances of given
flavor for the client").

Wrong rows: a flavor with no `price` object, a `price_per_hour` missing, not a number, zero or
negative, `price_status: "error"`, or no `currency_code` is yielded with `problem` (NaN when
unreadable). Left out, counted: `price_status: "hide"` (`Excluded("price_hidden")`), disabled
flavors (`Excluded("disabled")`) and regions the project cannot list (`Excluded("region_refused")`).
No `results` list in the regions answer, a flavor list that is not one, or a flavor without a
readable `hardware_properties.gpu_count` raises `LayoutChanged` naming the key. No spot: the API
states none for GPU flavors. Scopes: one per kind and region (`baremetal:Luxembourg-2`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from connectors.base import (
    Degraded,
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    child,
    excluded,
    number,
    read_price,
    required_list,
)
from connectors.http import Client

name = "gcore"
CREDENTIAL = "GCORE_API_KEY"
PROJECT = "GCORE_CLOUD_PROJECT_ID"
requires: tuple[str, ...] = (CREDENTIAL, PROJECT)

API = "https://api.gcore.com/cloud"
REGIONS_URL = f"{API}/v1/regions"
KINDS = ("baremetal", "virtual")
PARAMS = {"include_prices": "true"}
REFUSED = (403, 404)  # the project has no access to the region (peers skip these too)
_FLAVORS_PATH = re.compile(r"/cloud/v3/gpu/(?P<kind>baremetal|virtual)/[^/]+/(?P<region>[^/]+)/flavors$")
_GB = re.compile(r"(?P<gb>[0-9]+(?:\.[0-9]+)?)\s*GB\b", re.IGNORECASE)
MIB_PER_GIB = 1024


def flavors_url(kind: str, project: str, region: str) -> str:
    return f"{API}/v3/gpu/{kind}/{project}/{region}/flavors"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Accept": "application/json", "Authorization": f"APIKey {creds[CREDENTIAL]}"}
    regions = client.fetch("GET", REGIONS_URL, headers=headers)
    yield regions
    for region in gpu_regions(regions):
        for kind in KINDS:
            url = flavors_url(kind, creds[PROJECT], str(region["id"]))
            yield client.fetch("GET", url, headers=headers, params=PARAMS, ok_statuses=REFUSED)


def gpu_regions(response: RawResponse) -> list[Mapping[str, Any]]:
    """The regions of the regions answer that sell GPU flavors now."""
    listed = required_list(response.json(), "results", where=response.url, answer="the regions list")
    return [
        r
        for r in listed
        if isinstance(r, dict)
        and r.get("id") is not None
        and r.get("has_ai_gpu") is True
        and str(r.get("state", "ACTIVE")).upper() == "ACTIVE"
    ]


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded | Degraded]:
    regions = next((r for r in responses if r.url.split("?")[0] == REGIONS_URL), None)
    if regions is None:
        raise LayoutChanged(f"no answer from {REGIONS_URL}; the flavor lists cannot be named by region")
    payload = regions.json()
    names = {str(r["id"]): str(r.get("display_name") or r["id"]) for r in gpu_regions(regions)}
    if not names:
        raise LayoutChanged(
            f"{REGIONS_URL}: no ACTIVE region with `has_ai_gpu` true; has the regions list renamed the flag?"
        )
    stated = number(payload.get("count")) if isinstance(payload, dict) else None
    listed = len(payload.get("results") or []) if isinstance(payload, dict) else 0
    if stated is not None and stated > listed:
        yield Degraded(
            reason=f"{REGIONS_URL}: {listed} of {int(stated)} regions returned (`count`); the list is paged",
            hint="teach the connector the regions list's limit/offset paging",
        )
    left_out: Counter[str] = Counter()
    lists = offered = 0
    for response in responses:
        where = _FLAVORS_PATH.search(urlsplit(response.url).path)
        if where is None:
            continue
        lists += 1
        if response.status in REFUSED:
            left_out["region_refused"] += 1
            continue
        region = names.get(where["region"], where["region"])
        for flavor in flavor_list(response):
            offer, reason = flavor_offer(flavor if isinstance(flavor, dict) else {}, where["kind"], region)
            if offer is not None:
                offered += 1
                yield offer
            if reason:
                left_out[reason] += 1
    if not lists:
        raise LayoutChanged(
            f"{len(names)} GPU regions listed but no flavor list answered; has the API moved?"
        )
    if lists and not offered and not left_out:
        raise LayoutChanged(f"all {lists} flavor lists are empty; refusing to report an empty catalog")
    yield from excluded(left_out)


def flavor_list(response: RawResponse) -> list[Any]:
    """The flavors of one flavor answer. An empty `results` list is a region that sells none of
    that kind (a region may sell bare metal, virtual GPUs or both), not a changed format."""
    payload = response.json()
    if isinstance(payload, dict) and isinstance(payload.get("results"), list):
        return list(payload["results"])
    got = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
    raise LayoutChanged(f"{response.url}: `results` list missing from the flavor list (got {got})")


def stated_memory_gb(text: object) -> float | None:
    """The per-GPU memory a GPU description states ("8x NVIDIA H100 80GB" -> 80.0), else None.

    >>> stated_memory_gb("8x NVIDIA H200 141GB"), stated_memory_gb(None)
    (141.0, None)
    """
    found = _GB.search(text) if isinstance(text, str) else None
    return float(found["gb"]) if found else None


def flavor_offer(flavor: Mapping[str, Any], kind: str, region: str) -> tuple[Offer | None, str | None]:
    """The offer of one flavor in one region, or None and why it is left out."""
    flavor_name = str(flavor.get("name") or "?")
    if flavor.get("disabled") is True:
        return None, "disabled"
    properties = child(flavor, "hardware_properties")
    count = number(properties.get("gpu_count"))
    if not count or count <= 0:
        raise LayoutChanged(
            f"{kind} flavor {flavor_name!r} in {region}: `hardware_properties.gpu_count` is "
            f"{properties.get('gpu_count')!r}; has the flavor list changed how it states GPUs?"
        )
    price_block = child(flavor, "price") or None
    price = math.nan
    problem: str | None = "price missing (no `price` object; was include_prices dropped?)"
    currency = ""
    if price_block:
        status = price_block.get("price_status")
        if status == "hide":
            return None, "price_hidden"
        price, problem = read_price(price_block.get("price_per_hour"), "price.price_per_hour")
        currency = str(price_block.get("currency_code") or "")
        if status == "error":
            price, problem = math.nan, "price_status is 'error'"
        elif not currency and problem is None:
            problem = "price.currency_code missing"
    description = child(flavor, "hardware_description")
    virtual = kind == "virtual"
    ram_mib = number(description.get("ram")) if virtual else None
    capacity = number(flavor.get("capacity"))
    data: dict[str, Any] = {
        "kind": kind,
        "hardware_description": dict(description),
        "gpu_manufacturer": properties.get("gpu_manufacturer"),
        "nic_ib": properties.get("nic_ib"),
        "nic_eth": properties.get("nic_eth"),
        "capacity": capacity,
        "reserved_capacity": number(flavor.get("reserved_capacity")),
        "price_per_month": number(price_block.get("price_per_month"))
        if isinstance(price_block, dict)
        else None,
    }
    return (
        Offer(
            provider=name,
            instance_type=flavor_name,
            region=region,
            pricing_type="on_demand",
            price_source="list",
            price_per_hour=price,
            currency=currency,
            gpu_name_raw=str(properties.get("gpu_model") or description.get("gpu") or "") or None,
            gpu_count=count,
            gpu_memory_gb_raw=stated_memory_gb(description.get("gpu")),
            vcpus=number(description.get("vcpus")) if virtual else None,
            ram_gb=ram_mib / MIB_PER_GIB if ram_mib is not None else None,
            available=None if capacity is None else capacity > 0,
            provider_data=data,
            scope=f"{kind}:{region}",
            problem=problem,
        ),
        None,
    )
