"""Nebius AI Cloud: on-demand and preemptible GPU prices from the public price page.

Source: `GET https://nebius.com/prices` (server-rendered HTML, no auth, no documented rate limit;
one request per run). Two `<div>` grids (a page-builder "highlight table", no `<table>` markup),
each under its own heading:

- "NVIDIA GPU Instances": Item / vCPUs / RAM, GB / "On-demand, GPU-hour" / "GPU-hour (Effective
  October 1, 2026)" -> `on_demand`, `list`;
- "Preemptible NVIDIA GPU Instances": Item / vCPUs / RAM, GB / "Spot price, GPU-hour*" -> `spot`,
  `list` (a published rate, not a live market; every cell reads "from $x").

Prices are USD per GPU-hour and vCPUs / RAM are per GPU (Nebius' presets scale them with the GPU
count: H100 16 vCPU / 200 GB per GPU -> `gpu-h100-sxm_8gpu-128vcpu-1600gb`). Each row becomes one
offer per GPU count Nebius sells that platform in (`GPU_COUNTS`, from docs.nebius.com/compute/
virtual-machines/types); a row we have no counts for is offered as 1 GPU and says so in
`provider_data["gpu_counts_documented"] = False` (a new GPU lands, never vanishes).

The effective-date rule. The page may show a second price column, "GPU-hour (Effective <date>)".
That price is the current one from its date on: a column whose date is on or before the day the
page was fetched (`RawResponse.fetched_at`, so parsing stays pure) replaces "On-demand"; before
that date the "On-demand" column is current. The other column's price is kept in
`provider_data` (`price_scheduled` / `price_before`, with `price_effective_from`).

Spot merged into the main table (issue 18: Nebius did so in 2026-07). A "Spot"/"Preemptible"
column of the main grid, or a row whose Item says "(preemptible)", is read as `spot` (same scope,
`provider_data["layout"]` says so), and a page without the separate preemptible table is normal
(`Excluded("no_spot_prices_on_page")` when no spot price is found at all). The merged layout is
known only from the issue's report, not from a capture: which of the two forms the live page uses
only a live run can settle; both are tested on our fixture. Every price is read through
`pages.quote`; a per-instance price is refused, since a row is sold in several GPU counts.

Other quirks: "Contact us" rows (GB200 / GB300 NVL72) are `Excluded("contact_sales")`; "from $x"
prices (L40S presets with 8-40 vCPUs; every spot price) keep `provider_data["price_is_from"]`;
vCPU / RAM ranges ("8-40") are kept as text in `provider_data`. Scopes: one per grid
(`on_demand:gpu-instances`, `spot:preemptible`). Prices do not vary by region on the page, so
`region="global"`. `instance_type` is `"<n>x <Item>"` ("8x NVIDIA HGX H100"); the seeds map it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime
from typing import Any

import bs4

from connectors import pages
from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    PriceSource,
    PricingType,
    RawResponse,
    Unchanged,
    excluded,
)

name = "nebius"
requires: tuple[str, ...] = ()

PAGE_URL = "https://nebius.com/prices"
ON_DEMAND_HEADING = "NVIDIA GPU Instances"
SPOT_HEADING = "Preemptible NVIDIA GPU Instances"
SCOPES = ("on_demand:gpu-instances", "spot:preemptible")
# labels of a spot column in the main table, or words of a spot row's Item (the merged layout)
SPOT_LABELS = ("Spot", "Preemptible")
_SPOT_ITEM = re.compile(r"\b(preemptible|spot)\b", re.I)
# GPU counts per platform, by the page's Item label (cleaned, lowercase, without "NVIDIA ").
# Source: docs.nebius.com/compute/virtual-machines/types (presets), cross-checked with SkyPilot's
# nebius catalog (gpu-h100-sxm 1/8, gpu-b200-sxm 8, gpu-l40s-a 1, gpu-l40s-d 1/2/4).
GPU_COUNTS: Mapping[str, tuple[int, ...]] = {
    "hgx b300": (8,),
    "hgx b200": (8,),
    "hgx h200": (1, 8),
    "hgx h100": (1, 8),
    "rtx pro 6000": (1,),
    "l40s with intel cpu": (1,),
    "l40s with amd cpu": (1, 2, 4),
}
_EFFECTIVE = re.compile(r"effective\s+(?:from\s+)?([A-Za-z]+\s+\d{1,2},?\s+\d{4})", re.I)


def fetch(
    client: Any,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    yield from pages.read_pages(responses, SCOPES, _page_items)


def _page_items(response: RawResponse) -> Iterator[Offer | Excluded]:
    doc = pages.soup(response)
    counts: dict[str, int] = {}
    merged_spot = False
    for item in _grid(doc, ON_DEMAND_HEADING, "on_demand", response.fetched_at, counts):
        merged_spot = merged_spot or (isinstance(item, Offer) and item.pricing_type == "spot")
        yield item
    try:
        block = pages.section(doc, SPOT_HEADING, where="nebius.com/prices")
    except LayoutChanged:
        block = None  # since 2026-07 spot may sit in the main table: no separate table is normal
    if block is not None:
        yield from _grid(doc, SPOT_HEADING, "spot", response.fetched_at, counts, block=block)
    elif not merged_spot:
        counts["no_spot_prices_on_page"] = 1
    yield from excluded(counts)


def effective_date(header: str) -> date | None:
    """The date of a "GPU-hour (Effective October 1, 2026)" header, or None."""
    match = _EFFECTIVE.search(pages.clean(header))
    if not match:
        return None
    text = match.group(1).replace(",", "")
    for fmt in ("%B %d %Y", "%b %d %Y"):
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    return None


def current_price_column(table: pages.Table, fetched_on: date) -> tuple[int, int | None, date | None]:
    """(column read as the current price, the other price column or None, its effective date).

    An "Effective <date>" column on or before `fetched_on` is current; otherwise "On-demand" is.
    """
    on_demand = table.column("On-demand")
    scheduled = next(
        (i for i, h in enumerate(table.headers) if i != on_demand and effective_date(h) is not None), None
    )
    if scheduled is None:
        return on_demand, None, None
    when = effective_date(table.headers[scheduled])
    assert when is not None
    return (scheduled, on_demand, when) if when <= fetched_on else (on_demand, scheduled, when)


def _grid(
    doc: bs4.Tag,
    heading: str,
    pricing_type: PricingType,
    fetched_at: datetime,
    counts: dict[str, int],
    block: bs4.Tag | None = None,
) -> Iterator[Offer]:
    """The offers of one grid, every cell found by its label and every price read with its basis
    ("On-demand, GPU-hour": per GPU, per hour; the cell's "$" the currency). In the main grid a
    spot column ("Spot price, GPU-hour") or a spot row ("... (preemptible)") is read as spot:
    the layout of 2026-07, when Nebius merged the preemptible table into it."""
    where = f"the `{heading}` table of nebius.com/prices"
    block = block if block is not None else pages.section(doc, heading, where="nebius.com/prices")
    price_label = "On-demand" if pricing_type == "on_demand" else "Spot"
    table = pages.find_table(block, required=("Item", price_label), where=where)
    table.check_names("Item")
    spot_col = table.find_column(*SPOT_LABELS)
    if pricing_type == "on_demand":
        price_col, other_col, when = current_price_column(table, fetched_at.date())
    else:
        price_col, other_col, when = table.column("Spot"), None, None
    known = [table.headers[i] for i in (price_col, other_col, spot_col) if i is not None]
    table.check_price_columns("Item", "vCPUs", "RAM", *known)
    columns: list[tuple[PricingType, int, str]] = [(pricing_type, price_col, "")]
    if pricing_type == "on_demand" and spot_col is not None and spot_col not in (price_col, other_col):
        columns.append(("spot", spot_col, "merged"))
    for row in table.read():
        item = row.require("Item")
        spot_row = pricing_type == "on_demand" and bool(_SPOT_ITEM.search(item))
        for kind, col, layout in columns:
            kind = "spot" if spot_row else kind
            label = table.headers[col]
            text = row.get(label) or ""
            money = row.quote(label)
            if money is None and pages.is_contact(text):
                counts["contact_sales"] = counts.get("contact_sales", 0) + 1
                continue
            if money is None and pages.is_not_available(text):
                counts["not_available"] = counts.get("not_available", 0) + 1
                continue
            if money is not None:
                money.require_per_gpu(text, f"under `{label}` of {where}")
            extra: dict[str, Any] = {"item": item}
            if layout or spot_row:
                extra["layout"] = "spot in the main table (2026-07)"
            if kind == "on_demand" and other_col is not None and when is not None:
                other = row.quote(table.headers[other_col])
                # before the date the other column is the coming price; from it, the superseded one
                key = "price_scheduled" if price_col == table.column("On-demand") else "price_before"
                extra |= {
                    key: other.per_hour() if other else row.get(table.headers[other_col]),
                    "price_effective_from": when.isoformat(),
                    "price_column": label,
                }
            scope = SCOPES[0] if kind == "on_demand" else SCOPES[1]
            name = _SPOT_ITEM.sub("", item).strip(" ()-,") if spot_row else item
            yield from _offers(name, money, text, row, kind, scope, extra)


def _offers(
    item: str,
    money: pages.Quote | None,
    text: str,
    row: pages.Row,
    pricing_type: PricingType,
    scope: str,
    extra: dict[str, Any],
) -> Iterator[Offer]:
    label = pages.clean(re.sub(r"^\s*nvidia\s+", "", item, flags=re.I)).lower()
    gpu_counts = GPU_COUNTS.get(label)
    vcpus_text = row.get("vCPUs") or ""
    ram_text = row.get("RAM") or ""
    per_gpu_vcpus, per_gpu_ram = pages.parse_vcpus(vcpus_text), pages.parse_gb(ram_text)
    amount = money.per_hour() if money is not None else math.nan
    problem = None
    if money is None:
        problem = f"price {text!r} is not readable"
    elif not (math.isfinite(amount) and amount > 0):
        problem = f"price {text!r} is not a positive number"
    data = dict(extra) | {
        "price_per_gpu_hour": amount,
        "vcpus_per_gpu": vcpus_text,
        "ram_gb_per_gpu": ram_text,
    }
    if money is not None:
        data |= money.flags()
    if gpu_counts is None:
        data["gpu_counts_documented"] = False
    source: PriceSource = "list"  # both tables are published rates, spot included
    for count in gpu_counts or (1,):
        yield Offer(
            provider=name,
            instance_type=f"{count}x {item}",
            region="global",
            pricing_type=pricing_type,
            price_source=source,
            price_per_hour=round(amount * count, 6) if math.isfinite(amount) else amount,
            currency=(money.currency if money is not None else "") or "USD",
            gpu_name_raw=_gpu_name(item),
            gpu_count=float(count),
            vcpus=per_gpu_vcpus * count if per_gpu_vcpus is not None else None,
            ram_gb=per_gpu_ram * count if per_gpu_ram is not None else None,
            provider_data=data,
            scope=scope,
            problem=problem,
        )


def _gpu_name(item: str) -> str:
    """The GPU in an Item label: "NVIDIA L40S with Intel CPU" -> "NVIDIA L40S"."""
    return re.sub(r"\s+with\s+\w+\s+CPU\b.*$", "", pages.clean(item), flags=re.I)
