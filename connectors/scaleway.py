"""Scaleway: GPU Instance prices in EUR from the public Product Catalog API.

Source: `GET https://api.scaleway.com/product-catalog/v2alpha1/public-catalog/products` with
`product_types=instance`, paged with `page` (from 1) and `page_size` (documented at
https://www.scaleway.com/en/developers/api/product-catalog/public-catalog/; "This API does not
require authentication"). No documented rate limit; a run reads a handful of pages. `fetch` stops
once it holds `total_count` products (or a page comes back empty). One answer::

    {"products": [{"sku": "/compute/h100_sxm_2_80g/run_fr-par-2", "product": "H100-SXM-2-80G",
      "locality": {"zone": "fr-par-2"},
      "price": {"retail_price": {"currency_code": "EUR", "units": 0, "nanos": 110330000}},
      "unit_of_measure": {"unit": "minute", "size": 1},
      "properties": {"hardware": {"cpu": {"virtual": {"count": 32}}, "ram": {"size": <bytes>},
                                  "gpu": {"count": 2, "type": "H100-SXM"}},
                     "instance": {"range": "GPU", "offer_id": "H100-SXM-2-80G"}},
      "status": "general_availability"}, ...], "total_count": 1}

The price is `units + nanos / 1e9` of `currency_code` per `size` x `unit` (GPU Instances are
priced per minute: 0.11033 EUR/min = 6.6198 EUR/h), converted once with `base.per_hour`; the
currency stays EUR (the warehouse converts). The price is for the whole Instance.

`parse` also reads the Instance API's server-type list,
`GET https://api.scaleway.com/instance/v1/zones/{zone}/products/servers` (`{"servers": {NAME:
{ncpus, ram, gpu, gpu_info{gpu_name, gpu_memory}, hourly_price, monthly_price, ...}}}`, EUR per
hour; the zone is read from the URL), and its `/products/servers/availability` companion
(`{"servers": {NAME: {"availability": "available"|"scarce"|"shortage"}}}`), because the only real
recordings we hold are of that API (scaleway/terraform-provider-scaleway cassettes). `fetch` does
not call it: Scaleway documents the Instance API with an `X-Auth-Token`, the catalog without. When
both describe one Instance type in one zone, the catalog offer wins.

Quirks handled:
- CPU-only Instance types (no GPU, or a GPU count of 0) are `Excluded("cpu_only")`; products
  that are `end_of_sale`, `end_of_life` or `retired` are `Excluded("not_for_sale")`.
- A missing `price.retail_price` (or `hourly_price`), a zero, negative or unreadable amount, or an
  unknown unit of measure yields the offer with `problem` set (price NaN when unreadable), so the
  warehouse quarantines it instead of reading "not offered".
- The catalog does not state GPU memory; Scaleway's type names end in the per-GPU memory
  (`H100-SXM-2-80G`, `B300-SXM-8-288G`), so `gpu_memory_gb_raw` is read from that suffix. The
  Instance API states it in bytes (`gpu_memory` 85899345920 = 80 GiB). RAM bytes become GiB.
- No spot market: every offer is `on_demand`, `price_source="list"`.
- `region` is the zone without its number (`fr-par-2` -> `fr-par`); `zone` is the zone. Each zone
  of each source is its own scope (`catalog:fr-par-2`, `instance:pl-waw-2`), so a zone that
  vanishes from the listing is held, not closed.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, excluded, paginate, per_hour
from connectors.http import Client

name = "scaleway"
requires: tuple[str, ...] = ()

CATALOG_URL = "https://api.scaleway.com/product-catalog/v2alpha1/public-catalog/products"
PAGE_SIZE = 100
MAX_PAGES = 100
CURRENCY = "EUR"  # the Instance API's prices carry no currency code; Scaleway lists in euros
GIB = 1024**3
NOT_FOR_SALE = frozenset({"end_of_sale", "end_of_life", "retired"})
# "H100-SXM-2-80G" -> 80: Scaleway's GPU type names end in the memory of one GPU.
_MEMORY_SUFFIX = re.compile(r"-(\d+)G$")
_ZONE_IN_URL = re.compile(r"/zones/([a-z]{2}-[a-z]{3}-\d+)/")


def query_params(page: int) -> dict[str, str | int]:
    """One catalog page's query, in sorted order so a cassette URL reads the same either way."""
    return {"page": page, "page_size": PAGE_SIZE, "product_types": "instance"}


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    """Every page of the catalog's Instance products, until `total_count` are in hand."""
    held = 0

    def next_page(response: RawResponse, number: int) -> str | None:
        nonlocal held
        products, total = catalog_page(response)
        held += len(products)
        return None if not products or held >= total else str(number + 1)  # the token: a page number

    yield from paginate(
        lambda _, number: client.fetch("GET", CATALOG_URL, params=query_params(number)),
        next_page,
        max_pages=MAX_PAGES,
        what=f"{CATALOG_URL} (page/total_count)",
        hint="is product_types still applied?",
    )


def catalog_page(response: RawResponse) -> tuple[list[Mapping[str, Any]], int]:
    """The `products` of one catalog page and the listing's `total_count`."""
    payload = response.json()
    if not isinstance(payload, dict) or not isinstance(payload.get("products"), list):
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(
            f"{response.url}: `products` list missing from the Product Catalog answer (got {keys}); "
            "has the API changed its envelope?"
        )
    total = payload.get("total_count")
    return payload["products"], int(total) if isinstance(total, int | float) else 0


def memory_from_name(instance_type: str) -> float | None:
    """Per-GPU memory in GB from a Scaleway type name: "L40S-8-48G" -> 48.0; None without a suffix."""
    match = _MEMORY_SUFFIX.search(instance_type)
    return float(match.group(1)) if match else None


def region_of(zone: str) -> str:
    """The region of a zone: "fr-par-2" -> "fr-par"."""
    return re.sub(r"-\d+$", "", zone)


def catalog_price(product: Mapping[str, Any]) -> tuple[float, str | None, str, str | None]:
    """(EUR per hour, unit, currency, problem) of one catalog product; NaN when unreadable."""
    retail = (product.get("price") or {}).get("retail_price")
    if not isinstance(retail, dict):
        return math.nan, None, CURRENCY, "`price.retail_price` missing"
    currency = str(retail.get("currency_code") or CURRENCY)
    measure = product.get("unit_of_measure") or {}
    unit, size = measure.get("unit"), measure.get("size") or 1
    units, nanos = retail.get("units", 0), retail.get("nanos", 0)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (units, nanos, size)):
        return math.nan, unit, currency, f"unreadable price {retail!r} per {measure!r}"
    try:
        price = per_hour((units + nanos / 1e9) / size, str(unit))
    except ValueError:
        return math.nan, unit, currency, f"unknown unit of measure {unit!r}"
    if not (math.isfinite(price) and price > 0):
        return price, unit, currency, f"price {price!r} per hour is not a positive number"
    return round(price, 6), unit, currency, None


def catalog_offer(product: Mapping[str, Any]) -> Offer | Excluded:
    """One Product Catalog Instance product -> an Offer, or why it is not one."""
    hardware = (product.get("properties") or {}).get("hardware") or {}
    instance = (product.get("properties") or {}).get("instance") or {}
    instance_type = str(instance.get("offer_id") or product.get("product") or "")
    zone = (product.get("locality") or {}).get("zone")
    if not instance_type or not zone:
        raise LayoutChanged(
            f"catalog product {product.get('sku', '?')!r} lacks `properties.instance.offer_id` or "
            "`locality.zone`; has the Product Catalog renamed its fields?"
        )
    gpu = hardware.get("gpu") or {}
    count = gpu.get("count") or 0
    if not count:
        return Excluded("cpu_only", instance_type)
    if product.get("status") in NOT_FOR_SALE:
        return Excluded("not_for_sale", f"{instance_type} {zone}: {product['status']}")
    price, unit, currency, problem = catalog_price(product)
    ram = (hardware.get("ram") or {}).get("size")
    network = hardware.get("network") or {}
    return Offer(
        provider=name,
        instance_type=instance_type,
        region=region_of(zone),
        zone=zone,
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=price,
        currency=currency,
        gpu_name_raw=gpu.get("type"),
        gpu_count=float(count),
        gpu_memory_gb_raw=memory_from_name(instance_type),
        vcpus=_number(((hardware.get("cpu") or {}).get("virtual") or {}).get("count")),
        ram_gb=round(ram / GIB, 3) if isinstance(ram, int | float) else None,
        billing_unit="minute" if unit == "minute" else None,
        provider_data={
            "source": "product-catalog",
            "sku": product.get("sku"),
            "status": product.get("status"),
            "range": instance.get("range"),
            "price_unit": unit,
            "cpu": (hardware.get("cpu") or {}).get("type"),
            "internal_bandwidth_bps": network.get("internal_bandwidth"),
            "public_bandwidth_bps": network.get("public_bandwidth"),
        },
        scope=f"catalog:{zone}",
        problem=problem,
    )


def server_type_offer(instance_type: str, server: Mapping[str, Any], zone: str) -> Offer | Excluded:
    """One Instance API server type (EUR per hour) -> an Offer, or why it is not one."""
    count = server.get("gpu") or 0
    if not count:
        return Excluded("cpu_only", instance_type)
    info = server.get("gpu_info") or {}
    memory = info.get("gpu_memory")
    price = _number(server.get("hourly_price"))
    if "hourly_price" not in server:
        problem: str | None = "`hourly_price` missing"
    elif price is None or not price > 0:
        problem = f"hourly_price {server.get('hourly_price')!r} is not a positive number"
    else:
        problem = None
    ram = server.get("ram")
    return Offer(
        provider=name,
        instance_type=instance_type,
        region=region_of(zone),
        zone=zone,
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=price if price is not None else math.nan,
        currency=CURRENCY,
        gpu_name_raw=info.get("gpu_name"),
        gpu_count=float(count),
        gpu_memory_gb_raw=round(memory / GIB, 3) if isinstance(memory, int | float) and memory else None,
        vcpus=_number(server.get("ncpus")),
        ram_gb=round(ram / GIB, 3) if isinstance(ram, int | float) else None,
        provider_data={
            "source": "instance-api",
            "monthly_price": server.get("monthly_price"),
            "gpu_manufacturer": info.get("gpu_manufacturer"),
            "mig_profile": server.get("mig_profile"),
            "end_of_service": server.get("end_of_service"),
            "scratch_storage_max_size_bytes": server.get("scratch_storage_max_size"),
            "arch": server.get("arch"),
        },
        scope=f"instance:{zone}",
        problem=problem,
    )


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    offers: dict[tuple[str, str | None], Offer] = {}
    availability: dict[tuple[str, str], str] = {}
    counts: Counter[str] = Counter()
    products_seen = 0
    # The catalog first, so that its offer wins over an Instance API answer for the same type.
    for response in sorted(responses, key=lambda r: "/instance/" in r.url):
        payload = response.json()
        if isinstance(payload, dict) and isinstance(payload.get("products"), list):
            products_seen += len(payload["products"])
            results = [catalog_offer(p) for p in payload["products"]]
        elif isinstance(payload, dict) and isinstance(payload.get("servers"), dict):
            zone = _zone(response.url)
            servers = payload["servers"]
            products_seen += len(servers)
            if response.url.rstrip("/").split("?")[0].endswith("/availability"):
                availability |= {(n, zone): str((s or {}).get("availability")) for n, s in servers.items()}
                continue
            results = [server_type_offer(n, s or {}, zone) for n, s in servers.items()]
        else:
            keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
            raise LayoutChanged(
                f"{response.url}: neither a `products` list (Product Catalog) nor a `servers` map "
                f"(Instance API) in the answer (got {keys}); has the API changed?"
            )
        for result in results:
            if isinstance(result, Excluded):
                counts[result.reason] += 1
            else:
                offers.setdefault((result.instance_type, result.zone), result)
    if products_seen == 0:
        raise LayoutChanged(
            f"no products in {len(responses)} answer(s) from {CATALOG_URL}; refusing to report an "
            "empty catalog (is product_types=instance still accepted?)"
        )
    for (instance_type, offer_zone), offer in offers.items():
        state = availability.get((instance_type, offer_zone or ""))
        if state is not None:
            offer = _with_availability(offer, state)
        yield offer
    yield from excluded(counts)


def _with_availability(offer: Offer, state: str) -> Offer:
    # "scarce" still starts; "shortage" means none can be created right now.
    available = {"available": True, "scarce": True, "shortage": False}.get(state)
    return replace(offer, available=available, provider_data={**offer.provider_data, "availability": state})


def _zone(url: str) -> str:
    match = _ZONE_IN_URL.search(urlsplit(url).path + "/")
    if not match:
        raise LayoutChanged(f"{url}: no `/zones/<zone>/` in an Instance API URL; cannot tell the zone")
    return match.group(1)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
