"""Fluidstack: on-demand GPU prices from the public pricing page.

Source: `GET https://www.fluidstack.io/pricing` (keyless, static Webflow HTML, one request a run,
revalidated with the last run's ETag / Last-Modified). The "On demand GPU pricing" table has the
columns Model, VRAM (GB), Max vCPUs per GPU, Max RAM (GB) per GPU, On-Demand Price (/hr) and
1 Year price (/hr); one row per GPU model ("Nvidia H100 PCIe"). Fluidstack's API
(`platform.fluidstack.io/list_available_configurations`, needs an `api-key`) is not used: it
prices the same way (`price_per_gpu_hr` with the allowed `gpu_counts`,
https://docs.fluidstack.io/instances/configurations).

What becomes an offer: each row's On-Demand price, as a one-GPU instance (`gpu_count=1`):
the row describes one GPU (its other columns say "per GPU"), so the price is per GPU-hour, and
the page states no other GPU counts. `instance_type` is the model as the page writes it;
`vcpus` / `ram_gb` are the row's per-GPU maxima. USD, `on_demand`, `list`, `region="global"`
(the page names no region).

Left out by rule (`Excluded`): the 1 Year column (a reserved commitment, not on-demand:
`reserved_1_year`, one per priced cell), and On-Demand cells reading "n/a" (`no_on_demand_price`,
e.g. the H200 sold only reserved in January 2025). A cell that is not a price, or a price that is
zero or negative, is an offer with `problem`. No spot market exists on the page.

A missing table or On-Demand column raises `LayoutChanged` naming the labels. Scope:
`pricing:on_demand` (the one table).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from connectors import pages
from connectors.base import (
    HOURS_PER_UNIT,
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    Unchanged,
    excluded,
    per_hour,
)
from connectors.http import Client

name = "fluidstack"
requires: tuple[str, ...] = ()

PAGE_URL = "https://www.fluidstack.io/pricing"
WHERE = "the on-demand GPU table of fluidstack.io/pricing"
SCOPE = "pricing:on_demand"
REGION = "global"
ON_DEMAND = "On-Demand Price"
RESERVED = "1 Year price"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    for response in responses:
        if pages.is_not_modified(response):
            yield from pages.unchanged(response, (SCOPE,))
            continue
        yield from page_offers(response)


def page_offers(response: RawResponse) -> Iterator[Offer | Excluded]:
    table = pages.find_table(
        pages.soup(response), required=("Model", ON_DEMAND), optional=(RESERVED,), where=WHERE
    )
    price_column = table.column(ON_DEMAND)
    # cells are bare ("$2.89"): the time unit is stated once, in the header ("(/hr)")
    unit, _ = pages.price_unit(table.headers[price_column])
    left_out: Counter[str] = Counter()
    yielded = 0
    for row in table.rows:
        model = table.get(row, "Model") or ""
        if not model:
            continue
        if pages.parse_money(table.get(row, RESERVED) or "") is not None:
            left_out["reserved_1_year"] += 1
        cell = row[price_column] if price_column < len(row) else ""
        if pages.is_not_available(cell):
            left_out["no_on_demand_price"] += 1
            continue
        if pages.is_contact(cell):
            left_out["contact_sales"] += 1
            continue
        price, currency, problem = gpu_hour_price(cell, unit)
        label = pages.parse_gpu_label(model)
        yielded += 1
        yield Offer(
            provider=name,
            instance_type=model,
            region=REGION,
            pricing_type="on_demand",
            price_source="list",
            price_per_hour=price,
            currency=currency,
            gpu_name_raw=label.name or model,
            gpu_count=1.0,
            gpu_memory_gb_raw=pages.parse_gb(table.get(row, "VRAM")) or label.vram_gb,
            vcpus=pages.parse_vcpus(table.get(row, "Max vCPUs per GPU", "vCPUs")),
            ram_gb=pages.parse_gb(table.get(row, "Max RAM (GB) per GPU", "RAM")),
            provider_data={
                "price_text": cell,
                "price_is_per_gpu": True,
                "reserved_1_year_text": table.get(row, RESERVED),
                "vcpus_are_max_per_gpu": True,
                "table": table.where,
            },
            scope=SCOPE,
            problem=problem,
        )
    if not yielded and not left_out:
        raise LayoutChanged(f"no GPU rows in {WHERE}; has the page layout changed?")
    yield from excluded(left_out)


def gpu_hour_price(cell: str, unit: str | None) -> tuple[float, str, str | None]:
    """(price per GPU-hour, currency, problem) of one On-Demand cell ("$2.89"); `unit` from the header.

    A price whose unit neither the cell nor the header states is a wrong row, never a guess.
    """
    money = pages.parse_money(cell)
    if money is None:
        return math.nan, "USD", f"On-Demand cell {cell!r} is not a price"
    unit = money.unit or unit
    if unit not in HOURS_PER_UNIT:
        return math.nan, money.currency or "USD", f"On-Demand cell {cell!r} has no usable time unit ({unit})"
    amount = round(per_hour(money.amount, unit), 6)
    if not money.currency:
        return amount, "USD", f"On-Demand cell {cell!r} states no currency"
    if not math.isfinite(amount) or amount <= 0:
        return amount, money.currency, f"price {amount} is not a positive price"
    return amount, money.currency, None
