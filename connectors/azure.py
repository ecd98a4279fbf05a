"""Azure: GPU virtual machine prices from the public Azure Retail Prices API.

Source: `GET https://prices.azure.com/api/retail/prices` (no auth, no documented rate limit; the HTTP
layer retries 429/5xx). One OData `$filter` selects every GPU VM meter in every region:

    serviceName eq 'Virtual Machines' and priceType eq 'Consumption'
    and startswith(armSkuName, 'Standard_N')

All Azure GPU sizes are N-series (NC, ND, NG, NV), whose ARM names start with `Standard_N`; the
filter also returns the N-series sizes without a GPU, NP (Xilinx FPGAs) and NM (AMD MA35D media
accelerators), which parse excludes as `not_gpu_series`. Unknown hardware: the prefix is Azure's
naming rule for the GPU family (N = GPU), not an allow-list of sizes, so a new GPU size
("Standard_ND_Zeta_Z9") comes back from the filter and lands under its ARM name (unmapped until
the instance_types seed knows it); only the two named non-GPU series are left out, by rule. A GPU
size outside the N family would not be fetched at all: none exists today, and fetching every VM
meter (a hundred thousand) to guard against it would cost more than it protects.
`meterRegion='primary'` keeps one meter per region (the API otherwise also returns non-primary
duplicates). Pages are `{"BillingCurrency", "CustomerEntityId", "Items": [...], "NextPageLink",
"Count"}`; `fetch` follows `NextPageLink` until it is null.

Quirks handled (each excluded row is yielded by `parse` as `Excluded(reason, count)`, never silently lost):
- Windows meters (`productName` contains "Windows", or "Win" in abbreviated names such as
  "Virtual Machines NCCadsv5 Srs Win") are excluded: we price Linux VMs.
- Low Priority meters are excluded, never mixed with Spot: Low Priority is a retired Batch/VMSS
  discount tier, not the Spot market. Spot meters (`Spot` in `meterName`/`skuName`) become
  `pricing_type="spot"`, `price_source="market"`; everything else is on-demand `list`.
- Dedicated Host meters (priced per host, not per VM) and non-Consumption rows are excluded.
- A unit other than "1 Hour" is excluded (reason `unit`) rather than misread as hourly.
- A wrong price is not a reason to leave a meter out: a $0, negative, NaN or non-numeric
  `retailPrice`, or no `retailPrice` key at all (a renamed field), yields the offer with `problem`
  set (price NaN when it cannot be read), so the warehouse quarantines it and keeps the last good
  price. Rule-based exclusions are checked first: a Windows meter with a bad price is `windows`.
  A missing identity field (`armSkuName`, `armRegionName`, `meterName`, `productName`, `type`,
  `unitOfMeasure`) leaves no offer to flag and raises `LayoutChanged`.
- Two meters for the same offer key (instance, region, pricing type) keep the one with the latest
  `effectiveStartDate`, then the lower price, a well-priced meter always before a flagged one; the
  other is counted as `duplicate_meter`.
- Scope: the default `"<pricing_type>:<region>"`; each region's on-demand and spot meters are
  separate rows of one listing, and a region that vanishes from it is what the guard must catch.
- A `NextPageLink` already followed raises `LayoutChanged` instead of looping forever; a run that
  yields no item at all raises too, so a transient empty answer cannot close every Azure offer.

Azure never names the GPU in its price list: `gpu_name_raw` is None and `gpu_count` is 0.0 with
`provider_data["gpu_count_source"] = "unknown"`, meaning "resolve GPU model and count from the
instance_types seed by `instance_type`" (the ARM SKU name, e.g. `Standard_NC24ads_A100_v4`).
"""

from __future__ import annotations

import math
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
    excluded,
    number,
    paginate,
)
from connectors.http import Client

name = "azure"
requires: tuple[str, ...] = ()

API_URL = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
GPU_FILTER = (
    "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
    "and startswith(armSkuName, 'Standard_N')"
)
GPU_SKU_PREFIX = "Standard_N"
# 100 items a page; all GPU meters in all regions are a few thousand, so this only stops a runaway.
MAX_PAGES = 1000
# Short product names abbreviate it: "Virtual Machines NCCadsv5 Srs Win".
_WINDOWS = re.compile(r"\bWin(dows)?\b")
# Without these an item cannot be classified or keyed: a LayoutChanged. The price key is not among
# them: a missing `retailPrice` is a wrong row, flagged, never a failure of the whole listing.
_REQUIRED_KEYS = (
    "armSkuName",
    "armRegionName",
    "unitOfMeasure",
    "meterName",
    "productName",
    "type",
)
PRICE_KEY = "retailPrice"


# N-series families that carry no GPU: NP = Xilinx Alveo FPGAs, NM = AMD MA35D media accelerators
# (https://learn.microsoft.com/azure/virtual-machines/sizes/overview).
_NON_GPU_SERIES = re.compile(r"^Standard_N[PM]\d", re.IGNORECASE)


def query_params() -> dict[str, str]:
    """The query string of the first page."""
    return {"api-version": API_VERSION, "meterRegion": "'primary'", "$filter": GPU_FILTER}


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    """Every page of GPU VM prices, following `NextPageLink`."""

    def page(link: str | None, number: int) -> RawResponse:
        return (
            client.fetch("GET", API_URL, params=query_params()) if link is None else client.fetch("GET", link)
        )

    yield from paginate(
        page,
        lambda response, _: page_items(response)[1],
        max_pages=MAX_PAGES,
        what=f"{API_URL} (NextPageLink)",
        hint="retry later, and check the $filter is still applied (else page with $skip)",
    )


def page_items(response: RawResponse) -> tuple[list[Mapping[str, Any]], str | None, str]:
    """The items of one page, its `NextPageLink` (None on the last page) and billing currency."""
    payload = response.json()
    if not isinstance(payload, dict) or not isinstance(payload.get("Items"), list):
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(
            f"{response.url}: `Items` list missing from the page (got {keys}); "
            "has the Retail Prices API changed its envelope?"
        )
    link = payload.get("NextPageLink") or None
    return payload["Items"], link, payload.get("BillingCurrency") or "USD"


def classify_item(item: Mapping[str, Any], currency: str = "USD") -> Offer | Excluded:
    """One documented Retail Prices item -> an Offer, or the reason it is not one."""
    missing = [key for key in _REQUIRED_KEYS if key not in item]
    if missing:
        raise LayoutChanged(
            f"price item {item.get('meterId', '?')} lacks {missing}; "
            "has the Retail Prices API renamed its fields?"
        )
    sku = item["armSkuName"] or ""
    meter, product = item["meterName"] or "", item["productName"] or ""
    if item["type"] != "Consumption":
        return Excluded("not_consumption", item["type"])
    if not sku.startswith(GPU_SKU_PREFIX) or _NON_GPU_SERIES.match(sku):
        return Excluded("not_gpu_series", sku)
    if _WINDOWS.search(product):
        return Excluded("windows", sku)
    if "Low Priority" in meter or "Low Priority" in (item.get("skuName") or ""):
        return Excluded("low_priority", sku)
    if "Dedicated Host" in product:
        return Excluded("dedicated_host", sku)
    if item["unitOfMeasure"] != "1 Hour":
        return Excluded("unit", f"{sku}: {item['unitOfMeasure']}")
    price, problem = price_problem(item)
    is_spot = "Spot" in meter or (item.get("skuName") or "").endswith(" Spot")
    return Offer(
        provider=name,
        instance_type=sku,
        region=item["armRegionName"],
        pricing_type="spot" if is_spot else "on_demand",
        price_source="market" if is_spot else "list",
        price_per_hour=price,
        currency=item.get("currencyCode") or currency,
        gpu_name_raw=None,
        gpu_count=0.0,
        problem=problem,
        provider_data={
            "gpu_count_source": "unknown",
            "meter_id": item.get("meterId"),
            "meter_name": meter,
            "product_name": product,
            "sku_name": item.get("skuName"),
            "location": item.get("location"),
            "effective_start_date": item.get("effectiveStartDate"),
        }
        # the quarantine keeps the row: with the unreadable value, not only the NaN it became
        | ({"retail_price_raw": item.get(PRICE_KEY)} if problem else {}),
    )


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    offers, counts = _classify(responses)
    yield from offers
    yield from excluded(counts)


def _classify(responses: Sequence[RawResponse]) -> tuple[list[Offer], Counter[str]]:
    kept: dict[tuple[str, str, str | None, str], Offer] = {}
    counts: Counter[str] = Counter()
    items_seen = 0
    for response in responses:
        items, _, currency = page_items(response)
        items_seen += len(items)
        for item in items:
            result = classify_item(item, currency)
            if isinstance(result, Excluded):
                counts[result.reason] += 1
                continue
            key = result.key[1:]
            if key in kept:
                counts["duplicate_meter"] += 1
                if not _supersedes(result, kept[key]):
                    continue
            kept[key] = result
    if items_seen == 0:
        raise LayoutChanged(
            f"no price items in {len(responses)} page(s) from {API_URL}; does the $filter "
            "still match GPU VMs? (refusing to report an empty catalog)"
        )
    return list(kept.values()), counts


def _supersedes(new: Offer, old: Offer) -> bool:
    """Whether `new` replaces `old` for the same key: a readable price beats a flagged one, then
    the later meter wins, then the cheaper."""
    if (new.problem is None) != (old.problem is None):
        return new.problem is None
    # ISO-8601 timestamps in one format sort correctly as text.
    new_start = str(new.provider_data.get("effective_start_date") or "")
    old_start = str(old.provider_data.get("effective_start_date") or "")
    if new_start != old_start:
        return new_start > old_start
    return new.price_per_hour < old.price_per_hour


def price_problem(item: Mapping[str, Any]) -> tuple[float, str | None]:
    """(price, what is wrong with it or None) of an item's `retailPrice`."""
    if PRICE_KEY not in item:
        return math.nan, f"`{PRICE_KEY}` missing from the price item (renamed?)"
    raw = item[PRICE_KEY]
    price = number(raw)
    if price is None:
        return math.nan, f"`{PRICE_KEY}` is not a finite number: {raw!r}"
    if price <= 0:
        return price, f"`{PRICE_KEY}` is zero or negative: {raw!r}"
    return price, None
