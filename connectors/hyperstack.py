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

Prices are per GPU-hour: the basis is read from the page (`card_basis`: the On-Demand card's
"Max pCPUs per GPU" / "Max RAM (GB) per GPU" columns make a row one GPU, its "Pricing Per Hour" the
unit, which the Spot card's bare "Spot VM" label does not repeat), the currency from each cell's
sign; `pages.quote` refuses a price whose basis the page no longer states. Hyperstack's own flavors
are priced at n x the page rate (`n3-A100x8` is 8 x $1.35 = $10.80 in the API-built SkyPilot
catalog). Spot rows are published as the page lists them, one GPU at the per-GPU rate
(`gpu_counts_basis = "listed: ..."`): the page names no spot flavor, and expanding them into the
on-demand flavor sizes stated counts the page does not (issue 18; checked against the 2026 capture
and hyperstack.cloud/gpu-pricing as described by peers, 2026-12-01). An on-demand VM is
a *flavor* of 1, 2, 4, 8 (A4000: also 10) GPUs, so each on-demand row becomes one offer per GPU count in
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
    scopes = (f"on_demand:{REGION}", f"spot:{REGION}")
    yield from pages.read_pages(responses, scopes, lambda r: parse_page(pages.soup(r)))


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


def card_basis(on_demand: pages.Table) -> pages.Stated:
    """What the On-Demand card says of every price on the page: per GPU (its other columns are
    "Max pCPUs per GPU", "Max RAM (GB) per GPU": a row is one GPU) and the unit of its price
    label ("Pricing Per Hour"), which the Spot card's "Spot VM" label does not repeat."""
    per_gpu = next((h for h in on_demand.headers if pages.label_in(h, "per GPU")), None)
    unit, _ = pages.price_unit(on_demand.label_of(ON_DEMAND_PRICE))
    return pages.Stated(
        per_gpu=True if per_gpu else None,
        unit=unit,
        source=f"the On-Demand card's columns `{per_gpu}` and `{on_demand.label_of(ON_DEMAND_PRICE)}`",
    )


def table_offers(
    table: pages.Table,
    price_label: str,
    pricing_type: PricingType,
    unit: BillingUnit | None,
    stated: pages.Stated,
) -> Iterator[Offer | Excluded]:
    """Every row of one card. On-demand rows are offered in the flavor sizes Hyperstack documents
    (`gpu_counts`); spot rows only as what the page lists, one GPU at the per-GPU rate: the
    page names no spot flavor, and the on-demand flavor list is not the spot one (issue 18)."""
    table.check_names(MODEL)
    table.check_price_columns(MODEL, price_label)
    # the spot card's price label states no unit: the On-Demand card's is the page's
    basis = stated if pricing_type == "spot" else pages.Stated(per_gpu=stated.per_gpu, source=stated.source)
    contact = 0
    for row in table.read():
        label, text = row.require(MODEL), row.require(price_label)
        if pages.is_contact(text) or (pages.is_not_available(text) and text):
            contact += 1
            continue
        price = row.quote(price_label, stated=basis)
        if price is not None:
            price.require_per_gpu(text, f"under `{table.label_of(price_label)}` of {table.where}")
        per_gpu = price.per_hour() if price is not None else math.nan
        problem = None
        if price is None:
            problem = f"price cell {text!r} under `{table.label_of(price_label)}` is not a price"
        elif not (math.isfinite(per_gpu) and per_gpu > 0):
            problem = f"non-positive price {text!r}"
        counts: tuple[int, ...]
        if pricing_type == "spot":
            counts, basis_note = (1,), "listed: the page gives a per-GPU spot rate and names no spot flavor"
        else:
            counts, basis_note = gpu_counts(label)
        data: dict[str, Any] = {
            "gpu_model": label,
            "price_per_gpu_hour": per_gpu,
            "gpu_counts": list(counts),
            "gpu_counts_basis": basis_note,
            **(price.flags() if price is not None else {"price_text": text}),
        }
        if price is not None:
            data["price_unit"] = price.unit
        if (pcpus := pages.parse_vcpus(row.get(MAX_PCPUS) or "")) is not None:
            data["max_pcpus_per_gpu"] = pcpus
        if (ram := pages.parse_gb(row.get(MAX_RAM) or "")) is not None:
            data["max_ram_gb_per_gpu"] = ram
        vram = pages.parse_gb(row.get(VRAM) or "")
        for count in counts:
            yield Offer(
                provider=name,
                instance_type=f"{count}x {label}",
                region=REGION,
                pricing_type=pricing_type,
                price_source="list",
                price_per_hour=round(per_gpu * count, 6) if math.isfinite(per_gpu) else math.nan,
                currency=price.currency if price is not None else "USD",
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
    stated = card_basis(on_demand)
    yield from table_offers(on_demand, ON_DEMAND_PRICE, "on_demand", unit, stated)
    yield from table_offers(spot, SPOT_PRICE, "spot", unit, stated)
    try:
        reserved = card_table(root, RESERVATION_CARD, RESERVED_PRICE)
    except LayoutChanged:
        return  # the reservation card only ever yields exclusions: its absence loses no price
    if reserved.rows:
        yield Excluded("reserved pricing (a term commitment, not on-demand)", count=len(reserved.rows))
