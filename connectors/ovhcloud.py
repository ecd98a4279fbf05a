"""OVHcloud: Public Cloud GPU instance prices in EUR from the public order catalog.

Source: `GET https://eu.api.ovh.com/v1/order/catalog/public/cloud?ovhSubsidiary=FR` (no auth, no
documented rate limit; one request a run; the French subsidiary lists in EUR, excluding VAT). No
real capture of this answer exists in ../shared/data/raw: the structure below comes from OVHcloud's
API console and from public projects that read it, and should be re-checked on the first live
run (`uv run pytest -m network tests/test_ovhcloud.py`). Shape::

    {"catalogId": ..., "locale": {"currencyCode": "EUR", "subsidiary": "FR", "taxRate": 20},
     "plans": [{"planCode": "project.2018",
                "addonFamilies": [{"name": "instance", "addons": ["h100-380.consumption", ...]}]}],
     "addons": [{"planCode": "h100-380.consumption", "invoiceName": "...",
                 "product": "publiccloud-instance", "pricingType": "consumption",
                 "pricings": [{"type": "consumption", "interval": 1, "intervalUnit": "hour",
                               "price": 280000000, ...}],
                 "blobs": {"commercial": {"brick": "gpu", ...},
                           "technical": {"cpu": {"cores": 30}, "memory": {"size": 380},
                                         "gpu": {"model": "H100", "number": 1,
                                                 "memory": {"size": 80}}, ...}}}, ...]}

Prices are integers in units of 1e-8 of the currency (`price` 100000000 = 1 EUR) per
`interval` x `intervalUnit`; `base.per_hour` converts them once. The price is for the whole
instance (the flavor), which is the same in every region, so `region="global"`.

What becomes an offer: every addon of an `instance` addon family with a GPU
(`blobs.technical.gpu.number` > 0) and an hourly pricing, as `on_demand` / `list` in the
catalog's currency; `instance_type` is the flavor name (`h100-380`). No spot.

Request: the catalog is slow to answer (it is assembled per request and runs to megabytes), so
its fetch waits `CATALOG_TIMEOUT` (180 s to read) instead of the client's 30 s: python-ovh, the
client SpareCores' crawler reads this very endpoint with (`sc_crawler/vendors/_ovh.py`
`_get_catalog`, checked 2026-12-01), waits 180 s for connect and read by default (`ovh/client.py`
`TIMEOUT = 180`). The overall request deadline still bounds it, retries included.

Quirks handled:
- Windows flavors (`blobs.technical.os.family` "windows": the flavor's price includes the Windows
  licence) are `Excluded("windows_license")`; SpareCores keeps only `os.family == "linux"` for the
  same reason. A flavor that states no OS family is kept (no allow-list).
- Monthly-billed flavors (`<flavor>.monthly.postpaid`, pricing in months: a month's commitment)
  are `Excluded("monthly_billing")`; CPU-only flavors are `Excluded("cpu_only")`.
- An instance addon with no `pricings`, no `price` in its hourly pricing, or a zero, negative or
  non-finite price is yielded with `problem` set (price NaN when unreadable).
- No plan with an `instance` addon family, or no `addons` list, raises `LayoutChanged`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, excluded, per_hour
from connectors.http import Client

name = "ovhcloud"
requires: tuple[str, ...] = ()

CATALOG_URL = "https://eu.api.ovh.com/v1/order/catalog/public/cloud"
SUBSIDIARY = "FR"  # lists in EUR
PRICE_SCALE = 100_000_000  # catalog prices are integers of 1e-8 currency units
INSTANCE_FAMILY = "instance"
# The catalog is slow to answer (see the docstring); python-ovh's default read timeout.
CATALOG_TIMEOUT = httpx.Timeout(180.0, connect=10.0)
WINDOWS_FAMILY = "windows"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield client.fetch("GET", CATALOG_URL, params={"ovhSubsidiary": SUBSIDIARY}, timeout=CATALOG_TIMEOUT)


def instance_addons(payload: Any, url: str = CATALOG_URL) -> list[Mapping[str, Any]]:
    """The addons that the catalog's plans list in an `instance` addon family, in catalog order."""
    if not isinstance(payload, dict) or not isinstance(payload.get("addons"), list):
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(f"{url}: `addons` list missing from the order catalog (got {keys})")
    codes = {
        code
        for plan in payload.get("plans") or []
        for family in (plan.get("addonFamilies") or [])
        if family.get("name") == INSTANCE_FAMILY
        for code in family.get("addons") or []
    }
    if not codes:
        raise LayoutChanged(
            f"{url}: no plan lists an addon family named {INSTANCE_FAMILY!r}; "
            "has the order catalog renamed `plans[].addonFamilies`?"
        )
    return [a for a in payload["addons"] if isinstance(a, dict) and a.get("planCode") in codes]


def flavor_name(plan_code: str) -> str:
    """ "h100-380.consumption" -> "h100-380"; "a10-45.monthly.postpaid" -> "a10-45"."""
    return plan_code.split(".", 1)[0]


def hourly_price(addon: Mapping[str, Any]) -> tuple[float, str | None] | None:
    """(price per hour, problem) from the addon's hourly pricing; None if it is billed monthly."""
    pricings = addon.get("pricings")
    if not isinstance(pricings, list) or not pricings:
        return math.nan, "`pricings` missing or empty"
    hourly = [p for p in pricings if isinstance(p, dict) and p.get("intervalUnit") == "hour"]
    if not hourly:
        if any(isinstance(p, dict) and p.get("intervalUnit") == "month" for p in pricings):
            return None
        units = sorted({str(p.get("intervalUnit")) for p in pricings if isinstance(p, dict)})
        return math.nan, f"no hourly pricing (interval units {units})"
    pricing = hourly[0]
    if "price" not in pricing:
        return math.nan, "`price` missing from the hourly pricing"
    raw, interval = pricing["price"], pricing.get("interval") or 1
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not isinstance(interval, int | float):
        return math.nan, f"unreadable price {raw!r} per {interval!r} hour"
    price = per_hour(raw / PRICE_SCALE / interval, "hour")
    if not (math.isfinite(price) and price > 0):
        return price, f"price {price!r} per hour is not a positive number"
    return round(price, 6), None


def addon_offer(addon: Mapping[str, Any], currency: str, subsidiary: str) -> Offer | Excluded:
    """One instance addon -> an Offer, or why it is not one."""
    code = str(addon.get("planCode"))
    technical = (addon.get("blobs") or {}).get("technical") or {}
    gpu = technical.get("gpu") or {}
    count = gpu.get("number") or 0
    if not count:
        return Excluded("cpu_only", code)
    os_family = (technical.get("os") or {}).get("family")
    if isinstance(os_family, str) and os_family.strip().lower() == WINDOWS_FAMILY:
        return Excluded("windows_license", code)
    priced = hourly_price(addon)
    if priced is None:
        return Excluded("monthly_billing", code)
    price, problem = priced
    return Offer(
        provider=name,
        instance_type=flavor_name(code),
        region="global",
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=price,
        currency=currency,
        gpu_name_raw=gpu.get("model"),
        gpu_count=float(count),
        gpu_memory_gb_raw=_number((gpu.get("memory") or {}).get("size")),
        vcpus=_number((technical.get("cpu") or {}).get("cores")),
        ram_gb=_number((technical.get("memory") or {}).get("size")),
        billing_unit="hour",
        provider_data={
            "plan_code": code,
            "invoice_name": addon.get("invoiceName"),
            "subsidiary": subsidiary,
            "excludes_vat": True,
            "brick": ((addon.get("blobs") or {}).get("commercial") or {}).get("brick"),
        },
        scope=f"catalog:{subsidiary}",
        problem=problem,
    )


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    counts: Counter[str] = Counter()
    for response in responses:
        payload = response.json()
        addons = instance_addons(payload, response.url)
        locale = payload.get("locale") or {}
        currency = str(locale.get("currencyCode") or "EUR")
        subsidiary = str(locale.get("subsidiary") or SUBSIDIARY)
        for addon in addons:
            result = addon_offer(addon, currency, subsidiary)
            if isinstance(result, Excluded):
                counts[result.reason] += 1
            else:
                yield result
    yield from excluded(counts)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
