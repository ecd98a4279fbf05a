"""Hyperstack: per-GPU on-demand and spot VM prices from the public pricing page.

Source: `GET https://www.hyperstack.cloud/gpu-pricing` (static HubSpot HTML, no key, no documented
rate limit; one request per run, revalidated through `connectors.pages.fetch_page`). Its
`#cloud-pricing` section holds three cards, found by their headings:

- "On-Demand GPU Pricing": `GPU Model`, `VRAM (GB)`, `Max pCPUs per GPU`, `Max RAM (GB) per GPU`,
  `Pricing Per Hour` -> `on_demand`, `price_source="list"`;
- "Reservation Pricing": `GPU Model`, `Starting from`: reserved capacity is not on-demand, so every
  row is `Excluded("reserved pricing ...")`;
- "Spot VM Pricing": `GPU Model`, `Spot VM` -> `spot`, `price_source="list"` (a published rate,
  https://www.hyperstack.cloud/spot-vms; not a market).

Prices are per GPU-hour (the card's other columns are "per GPU"; Hyperstack's own flavors are priced
at n x the page rate: `n3-A100x8` is 8 x $1.35 = $10.80 in the API-built SkyPilot catalog). A VM is
a *flavor* of 1, 2, 4, 8 (A4000: also 10) GPUs, so each row becomes one offer per GPU count in
`FLAVOR_GPU_COUNTS`, priced count x per-GPU rate: counts documented at
https://infrahub-doc.nexgencloud.com/docs/hardware/flavors/ and in the flavors of SkyPilot's v8
Hyperstack catalog (`provider_data["gpu_counts_basis"] = "documented"`). A GPU with no documented
flavor list gets 8 for an SXM / HGX-only part (H200 SXM, A100 SXM, B200, B300: 8-GPU baseboards; the
one SXM flavor Hyperstack documents is `n3-H100-SXM5x8`) and 1, 2, 4, 8 for a PCIe card, marked
`gpu_counts_basis = "assumed"`. `vcpus` / `ram_gb` are left empty: the page gives maxima per GPU
(kept in `provider_data`), and real flavors are not linear in them (x1 = 28 CPUs, x2 = 60).

Other quirks: price cells start with `&nbsp;` or a space (cleaned); the intro says "billed per
minute" -> `billing_unit="minute"` when it still says so; the page names no region, so
`region="global"`. The spot card calls the PCIe H100 "H100 PCIe" while the on-demand card calls it
"H100": names are kept as printed, and the seeds resolve both.

The infrahub API (`https://infrahub-api.nexgencloud.com/v1/core/flavors`, `/v1/pricebook`, header
`api_key`) gives per-region flavors and stock; it is not used yet (see the issue note).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import bs4

from connectors import pages
from connectors.base import (
    BillingUnit,
    Excluded,
    LayoutChanged,
    Offer,
    PricingType,
    RawResponse,
    Unchanged,
    per_hour,
)
from connectors.http import Client

name = "hyperstack"
requires: tuple[str, ...] = ()

PAGE_URL = "https://www.hyperstack.cloud/gpu-pricing"
WHERE = "hyperstack.cloud/gpu-pricing"
REGION = "global"

ON_DEMAND_CARD, RESERVATION_CARD, SPOT_CARD = (
    "On-Demand GPU Pricing",
    "Reservation Pricing",
    "Spot VM Pricing",
)
MODEL, VRAM, MAX_PCPUS, MAX_RAM = "GPU Model", "VRAM", "Max pCPUs per GPU", "Max RAM"
ON_DEMAND_PRICE, RESERVED_PRICE, SPOT_PRICE = "Pricing Per Hour", "Starting from", "Spot VM"

# GPU label as printed (normalized by `_key`) -> the flavor sizes Hyperstack documents
FLAVOR_GPU_COUNTS: Mapping[str, tuple[int, ...]] = {
    "h100": (1, 2, 4, 8),  # n3-H100x1..x8 (flavors doc, CANADA-1)
    "h100 pcie": (1, 2, 4, 8),
    "h100 nvlink": (8,),  # n3-H100x8-NVLink
    "h100 sxm": (8,),  # n3-H100-SXM5x8 (CANADA-1, US-1)
    "a100": (1, 2, 4, 8),  # n3-A100x1..x8
    "a100 nvlink": (8,),  # n3-A100x8-NVLink
    "l40": (1, 2, 4, 8),  # n3-L40x1..x8
    "a6000": (1, 2, 4, 8),  # n3-RTX-A6000x1..x8
    "a4000": (1, 2, 4, 8, 10),  # n3-RTX-A4000x1..x10 (NORWAY-1)
}
PCIE_COUNTS = (1, 2, 4, 8)
BOARD_COUNTS = (8,)
_BOARD_PARTS = re.compile(r"\b(sxm\w*|hgx|b200|b300|gb200|gb300)\b", re.I)


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    for response in responses:
        if pages.is_not_modified(response):
            yield from pages.unchanged(response, (f"on_demand:{REGION}", f"spot:{REGION}"))
            continue
        yield from parse_page(pages.soup(response))


def _key(label: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", re.sub(r"^\s*nvidia\s+", "", label, flags=re.I).lower()))


def gpu_counts(label: str) -> tuple[tuple[int, ...], str]:
    """The GPU counts Hyperstack sells a GPU in, and whether they are documented or assumed."""
    documented = FLAVOR_GPU_COUNTS.get(_key(label))
    if documented:
        return documented, "documented"
    return (BOARD_COUNTS if _BOARD_PARTS.search(label) else PCIE_COUNTS), "assumed"


def card_table(root: bs4.Tag, heading: str, price_label: str) -> pages.Table:
    """The table of the card whose heading reads `heading` ("Spot VM Pricing")."""
    card = pages.section(root, heading, where=WHERE)
    return pages.find_table(card, required=(MODEL, price_label), where=f"the `{heading}` card of {WHERE}")


def billing_unit(root: bs4.Tag) -> BillingUnit | None:
    text = pages.clean(root.get_text(" "))
    return "minute" if re.search(r"\bbilled\s+(per|by\s+the)\s+minute\b", text, re.I) else None


def _per_gpu_price(text: str, header: str) -> tuple[float, str | None, dict[str, Any]]:
    money = pages.parse_money(text, currency="USD")
    if money is None:
        return math.nan, f"price cell {text!r} under `{header}` is not a price", {}
    # "Pricing Per Hour" / "Spot VM": the unit is the card's ("per hour"); per GPU, as every card says
    unit = money.unit or pages.price_unit(header)[0] or "hour"
    amount = per_hour(money.amount, unit)
    extras: dict[str, Any] = {"price_text": text, "price_unit": unit}
    if money.is_from:
        extras["price_is_from"] = True
    problem = None if math.isfinite(amount) and amount > 0 else f"non-positive price {text!r}"
    return amount, problem, extras


def table_offers(
    table: pages.Table, price_label: str, pricing_type: PricingType, unit: BillingUnit | None
) -> Iterator[Offer | Excluded]:
    model_i, price_i = table.column(MODEL), table.column(price_label)
    contact = 0
    for row in table.rows:
        label, text = row[model_i], row[price_i]
        if pages.is_contact(text) or (pages.is_not_available(text) and text):
            contact += 1
            continue
        per_gpu, problem, extras = _per_gpu_price(text, table.headers[price_i])
        counts, basis = gpu_counts(label)
        data: dict[str, Any] = {
            "gpu_model": label,
            "price_per_gpu_hour": per_gpu,
            "gpu_counts": list(counts),
            "gpu_counts_basis": basis,
            **extras,
        }
        if (pcpus := pages.parse_vcpus(table.get(row, MAX_PCPUS) or "")) is not None:
            data["max_pcpus_per_gpu"] = pcpus
        if (ram := pages.parse_gb(table.get(row, MAX_RAM) or "")) is not None:
            data["max_ram_gb_per_gpu"] = ram
        vram = pages.parse_gb(table.get(row, VRAM) or "")
        for count in counts:
            yield Offer(
                provider=name,
                instance_type=f"{count}x {label}",
                region=REGION,
                pricing_type=pricing_type,
                price_source="list",
                price_per_hour=round(per_gpu * count, 6) if math.isfinite(per_gpu) else math.nan,
                currency="USD",
                gpu_name_raw=label,
                gpu_count=float(count),
                gpu_memory_gb_raw=vram,
                billing_unit=unit,
                provider_data=data,
                scope=f"{pricing_type}:{REGION}",
                problem=problem,
            )
    if contact:
        yield Excluded(f"{pricing_type}: contact sales / not available", count=contact)


def parse_page(root: bs4.Tag) -> Iterator[Offer | Excluded]:
    if not root.find(string=re.compile(r"pricing", re.I)):
        raise LayoutChanged(f"no pricing text at all in {WHERE}; is this the pricing page?")
    unit = billing_unit(root)
    on_demand = card_table(root, ON_DEMAND_CARD, ON_DEMAND_PRICE)
    spot = card_table(root, SPOT_CARD, SPOT_PRICE)
    yield from table_offers(on_demand, ON_DEMAND_PRICE, "on_demand", unit)
    yield from table_offers(spot, SPOT_PRICE, "spot", unit)
    try:
        reserved = card_table(root, RESERVATION_CARD, RESERVED_PRICE)
    except LayoutChanged:
        return  # the reservation card only ever yields exclusions: its absence loses no price
    if reserved.rows:
        yield Excluded("reserved pricing (a term commitment, not on-demand)", count=len(reserved.rows))
