"""Vultr: Cloud GPU and Bare Metal GPU plan prices from the public Vultr API v2.

Sources (keyless public endpoints; Vultr's API answers HTTP 429 above 30 requests a second per IP,
and we send two to four a run):
- `GET https://api.vultr.com/v2/plans?type=all&per_page=500` -> `{"plans": [...], "meta": {"total",
  "links": {"next", "prev"}}}`. Cloud GPU plans carry `gpu_type` ("NVIDIA_A100") and `gpu_vram_gb`
  (the plan's VRAM, all GPUs together). `type=all` rather than `type=vcg`: Vultr files its
  whole-card `vcg-*` plans (8x B200, 8x H100, MI300X) under another type, `vdm`, so `type=vcg`
  alone misses them. Plans without `gpu_type` are CPU plans, counted as `Excluded("cpu_only")`.
- `GET https://api.vultr.com/v2/plans-metal?per_page=500` -> `{"plans_metal": [...], "meta": ...}`.
  Bare Metal plans state no GPU field: a GPU plan's id ends in `-gpu` and names count and model
  (`vbm-112c-2048gb-8-h100-gpu` = 8x "h100"; `vbm-72c-480gb-gh200-gpu` = 1x "gh200"). Others are
  `Excluded("cpu_only")`.
Paging is cursor based (https://www.vultr.com/api/#section/Introduction/Meta-and-Pagination):
while `meta.links.next` is non-empty, the same request is sent again with `cursor=<next>`.

Prices (USD, documented in the API reference, https://www.vultr.com/api/#tag/plans):
- `hourly_cost` -> `on_demand`, `list`. `location_cost` (a map location -> `{hourly_cost,
  hourly_cost_preemptible, ...}`) overrides it per location where present. A plan invoiced
  monthly only (`invoice_type: "monthly"`, no `hourly_cost`) is converted from `monthly_cost` with
  `per_hour`; any other plan without `hourly_cost` is a wrong row (`problem`), not "not offered".
- `hourly_cost_preemptible` -> `pricing_type="spot"` with `price_source="list"`: Vultr publishes
  a fixed preemptible rate per plan, not a market price (`provider_data["spot_kind"]` says so).
  Plans without it have no spot offer.
- `monthly_cost` is kept in `provider_data`: Vultr caps an hourly bill at the monthly price.

Regions: one offer per plan and location (`locations`: Vultr region ids such as "ewr"). The
offer key holds the region, prices may differ per location (`location_cost`), and a plan leaving
a location must close that offer alone. A plan with no location at all cannot be deployed and is
`Excluded("no_location")`.

GPUs: `gpu_name_raw` is the model token ("A100", "H100", "MI300X"). Cloud GPU plans can be slices
of one card (`vcg-a100-1c-6g-4vram` = 4 GB of an 80 GB A100): `CARD_VRAM_GB` (the card sizes of
Vultr's GPU types) turns `gpu_vram_gb` into a GPU count, fractional for a slice
(`gpu_memory_gb_raw` is then the slice), whole for multi-card plans. A type missing there still
lands, with `gpu_count=0.0` ("not stated") and the plan's VRAM in `provider_data`.

Scopes: each endpoint's answer and pricing type fails together: `plans:on_demand`,
`plans:spot`, `plans-metal:on_demand`, `plans-metal:spot`.
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
    child,
    excluded,
    number,
    paginate,
    per_hour,
    read_price,
)
from connectors.http import Client

name = "vultr"
requires: tuple[str, ...] = ()

API_URL = "https://api.vultr.com/v2"
PLANS_URL = f"{API_URL}/plans"
METAL_URL = f"{API_URL}/plans-metal"
PER_PAGE = 500  # the documented maximum
MAX_PAGES = 50
CURRENCY = "USD"
# GB per physical card of each Vultr `gpu_type` model token, from Vultr's Cloud GPU pages
# (https://www.vultr.com/products/cloud-gpu/, https://docs.vultr.com/products/compute/instances/
# cloud-gpu/explore-gpu-variants): only used to split a plan's total VRAM into cards.
CARD_VRAM_GB: Mapping[str, float] = {
    "A16": 16,
    "A40": 48,
    "A100": 80,
    "L40S": 48,
    "H100": 80,
    "H200": 141,
    "GH200": 96,
    "B200": 192,
    "MI300X": 192,
    "MI325X": 256,
    "MI355X": 288,
}
# A plan within 7 % of a whole number of cards is that many cards (VRAM is stated rounded).
_WHOLE_CARD_TOLERANCE = 0.07
_METAL_GPU = re.compile(r"-(?:(?P<count>\d+)-)?(?P<model>[^-]+)-gpu$", re.IGNORECASE)
SPOT_KIND = "preemptible: a fixed published rate per plan, not a market price"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield from _pages(client, PLANS_URL, {"type": "all", "per_page": str(PER_PAGE)})
    yield from _pages(client, METAL_URL, {"per_page": str(PER_PAGE)})


def _pages(client: Client, url: str, params: Mapping[str, str]) -> Iterator[RawResponse]:
    """Every page of one list endpoint, following the `meta.links.next` cursor."""

    def page(cursor: str | None, number: int) -> RawResponse:
        return client.fetch("GET", url, params={**params, **({"cursor": cursor} if cursor else {})})

    yield from paginate(
        page,
        lambda response, _: next_cursor(response.json()),
        max_pages=MAX_PAGES,
        what=f"{url} (`meta.links.next`)",
    )


def next_cursor(payload: Any) -> str | None:
    """The `meta.links.next` cursor of a page; None (or "") on the last page."""
    meta = payload.get("meta") if isinstance(payload, dict) else None
    links = meta.get("links") if isinstance(meta, dict) else None
    value = links.get("next") if isinstance(links, dict) else None
    return str(value) if value else None


def gpu_share(gpu_model: str, total_vram_gb: float | None) -> tuple[float, float | None]:
    """(GPU count, GB per GPU) of a Cloud GPU plan from its total VRAM and the card size.

    4 GB of an 80 GB A100 is (0.05, 4.0); 1536 GB of B200s is (8.0, 192.0); an unknown model or
    VRAM gives (0.0, total) — "count not stated", resolved downstream if at all.
    """
    card = CARD_VRAM_GB.get(gpu_model.upper())
    if card is None or not total_vram_gb or total_vram_gb <= 0:
        return 0.0, total_vram_gb
    cards = total_vram_gb / card
    whole = round(cards)
    if whole >= 1 and abs(cards - whole) <= whole * _WHOLE_CARD_TOLERANCE:
        return float(whole), total_vram_gb / whole
    if cards < 1:
        return round(cards, 4), total_vram_gb
    return round(cards, 4), card  # a stated VRAM between whole cards: keep the ratio


def gpu_model(gpu_type: str) -> str:
    """The model token of a Vultr `gpu_type`: "NVIDIA_A100" -> "A100", "AMD_MI300X" -> "MI300X"."""
    return gpu_type.split("_", 1)[1] if "_" in gpu_type else gpu_type


def metal_gpu(plan_id: str) -> tuple[int, str] | None:
    """(count, model token) a Bare Metal plan id states: `vbm-...-8-h100-gpu` -> (8, "h100")."""
    match = _METAL_GPU.search(plan_id)
    if match is None:
        return None
    return int(match["count"] or 1), match["model"]


def plan_offers(plan: Mapping[str, Any], source: str) -> list[Offer] | Excluded:
    """The offers of one plan (`source` "plans" or "plans-metal"), or why it has none."""
    plan_id = str(plan.get("id") or "")
    if not plan_id:
        raise LayoutChanged(f"{source}: plan without `id` ({sorted(plan)}); has the API changed?")
    if source == "plans":
        gpu_type = plan.get("gpu_type")
        if not gpu_type:
            return Excluded("cpu_only", plan_id)
        model = gpu_model(str(gpu_type))
        vram = number(plan.get("gpu_vram_gb"))
        count, per_gpu = gpu_share(model, vram)
        gpu: dict[str, Any] = {"gpu_name_raw": model, "gpu_count": count, "gpu_memory_gb_raw": per_gpu}
        data: dict[str, Any] = {"gpu_type": gpu_type, "gpu_vram_gb": vram}
        vcpus = number(plan.get("vcpu_count"))
    else:
        stated = metal_gpu(plan_id)
        if stated is None:
            return Excluded("cpu_only", plan_id)
        gpu = {"gpu_name_raw": stated[1], "gpu_count": float(stated[0]), "gpu_memory_gb_raw": None}
        data = {"cpu_model": plan.get("cpu_model"), "cpu_cores": plan.get("cpu_cores")}
        vcpus = number(plan.get("cpu_threads")) or number(plan.get("cpu_count"))
    locations = [str(loc) for loc in plan.get("locations") or [] if loc]
    if not locations:
        return Excluded("no_location", plan_id)
    ram_mb = number(plan.get("ram"))
    data |= {
        "plan_type": plan.get("type"),
        "endpoint": source,
        "disk_gb": plan.get("disk"),
        "disk_count": plan.get("disk_count"),
        "bandwidth_gb_per_month": plan.get("bandwidth"),
        "monthly_cost": plan.get("monthly_cost"),
        "invoice_type": plan.get("invoice_type"),
    }
    location_cost = child(plan, "location_cost")
    offers = []
    for location in locations:
        local = child(location_cost, location)
        prices = {**plan, **local}  # a location's own prices win over the plan's
        on_demand, problem = _on_demand_price(prices)
        common: dict[str, Any] = {
            "provider": name,
            "instance_type": plan_id,
            "region": location,
            "currency": CURRENCY,
            "vcpus": vcpus,
            "ram_gb": ram_mb / 1024 if ram_mb else None,
            **gpu,
        }
        offers.append(
            Offer(
                pricing_type="on_demand",
                price_source="list",
                price_per_hour=on_demand,
                provider_data={**data, "location_cost": bool(local)},
                scope=f"{source}:on_demand",
                problem=problem,
                **common,
            )
        )
        if "hourly_cost_preemptible" in prices and prices["hourly_cost_preemptible"] is not None:
            spot, spot_problem = _price(prices["hourly_cost_preemptible"], "hourly_cost_preemptible")
            offers.append(
                Offer(
                    pricing_type="spot",
                    price_source="list",
                    price_per_hour=spot,
                    provider_data={
                        **data,
                        "location_cost": bool(local),
                        "spot_kind": SPOT_KIND,
                        "monthly_cost_preemptible": prices.get("monthly_cost_preemptible"),
                    },
                    scope=f"{source}:spot",
                    problem=spot_problem,
                    **common,
                )
            )
    return offers


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    offers: list[Offer] = []
    counts: Counter[str] = Counter()
    for response in responses:
        source, plans = _plans(response)
        for plan in plans:
            result = plan_offers(plan, source)
            if isinstance(result, Excluded):
                counts[result.reason] += 1
            else:
                offers.extend(result)
    if not offers and not counts["no_location"]:
        raise LayoutChanged(
            f"no GPU plan (`gpu_type` in {PLANS_URL}, an id ending in -gpu in {METAL_URL}) among "
            f"{sum(counts.values())} plans; has the plan list changed its fields?"
        )
    yield from offers
    yield from excluded(counts)


def _plans(response: RawResponse) -> tuple[str, list[Mapping[str, Any]]]:
    path = response.url.split("?", 1)[0]
    source, key = ("plans-metal", "plans_metal") if path.endswith("/plans-metal") else ("plans", "plans")
    payload = response.json()
    if not isinstance(payload, dict) or not isinstance(payload.get(key), list):
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(f"{response.url}: `{key}` list missing (got {keys}); has the API changed?")
    return source, [plan for plan in payload[key] if isinstance(plan, dict)]


def _on_demand_price(prices: Mapping[str, Any]) -> tuple[float, str | None]:
    if "hourly_cost" in prices and prices["hourly_cost"] is not None:
        return _price(prices["hourly_cost"], "hourly_cost")
    if prices.get("invoice_type") == "monthly" and "monthly_cost" in prices:
        monthly, problem = _price(prices["monthly_cost"], "monthly_cost")
        return (per_hour(monthly, "month") if problem is None else monthly), problem
    return math.nan, "hourly_cost missing from a plan invoiced hourly"


def _price(value: object, key: str) -> tuple[float, str | None]:
    return read_price(value, key)
