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

Price basis (issue 19): every cell is read by its label through `pages.quote`: the currency from
the cell ("$2.89"), the unit from the header ("(/hr)"), per GPU from the row's "Max vCPUs per GPU"
column; a price whose basis is stated nowhere is a wrong row, a per-instance one is refused.

What is current (checked 2026-12-01 with the search tools): the only layout known is the 2025-01
Wayback capture; no later capture or peer parse of fluidstack.io/pricing was found, and SkyPilot's
v9 catalog holds a single Fluidstack row (8x H100 NVLink, FINLAND), built from the keyed API, not
the page. Whether the page still publishes an on-demand table only a live run can settle; if it
does not, the run fails with `LayoutChanged` naming `Model` / `On-Demand Price`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors import pages
from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    Unchanged,
    excluded,
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
    yield from pages.read_pages(responses, (SCOPE,), page_offers)


def page_offers(response: RawResponse) -> Iterator[Offer | Excluded]:
    table = pages.find_table(
        pages.soup(response), required=("Model", ON_DEMAND), optional=(RESERVED,), where=WHERE
    )
    table.check_names("Model")
    table.check_price_columns(ON_DEMAND, RESERVED)
    # cells are bare ("$2.89"): the time unit is stated once, in the header ("(/hr)"); the basis
    # by the row's other columns ("Max vCPUs per GPU"): a row is one GPU
    per_gpu_label = next((h for h in table.headers if pages.label_in(h, "per GPU")), None)
    stated = pages.Stated(per_gpu=True if per_gpu_label else None, source=f"the column `{per_gpu_label}`")
    left_out: Counter[str] = Counter()
    yielded = 0
    for keyed in table.read():
        model = keyed.get("Model") or ""
        if not model:
            continue
        if pages.parse_money(keyed.get(RESERVED) or "") is not None:
            left_out["reserved_1_year"] += 1
        cell = keyed.require(ON_DEMAND)
        if pages.is_not_available(cell):
            left_out["no_on_demand_price"] += 1
            continue
        if pages.is_contact(cell):
            left_out["contact_sales"] += 1
            continue
        price, currency, problem, flags = gpu_hour_price(keyed, stated)
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
            gpu_memory_gb_raw=pages.parse_gb(keyed.get("VRAM")) or label.vram_gb,
            vcpus=pages.parse_vcpus(keyed.get("Max vCPUs per GPU", "vCPUs")),
            ram_gb=pages.parse_gb(keyed.get("Max RAM (GB) per GPU", "RAM")),
            provider_data={
                "price_text": cell,
                **flags,
                "price_is_per_gpu": True,
                "reserved_1_year_text": keyed.get(RESERVED),
                "vcpus_are_max_per_gpu": True,
                "table": table.where,
            },
            scope=SCOPE,
            problem=problem,
        )
    if not yielded and not left_out:
        raise LayoutChanged(f"no GPU rows in {WHERE}; has the page layout changed?")
    yield from excluded(left_out)


def gpu_hour_price(row: pages.Row, stated: pages.Stated) -> tuple[float, str, str | None, dict[str, Any]]:
    """(price per GPU-hour, currency, problem, provider_data flags) of one On-Demand cell ("$2.89");
    the unit comes from the header ("(/hr)"), the per-GPU basis from `stated`.

    A price whose currency, unit or basis is stated nowhere is a wrong row (the `LayoutChanged`
    message is its problem), never a guess; a per-instance price is refused, since the page names
    no instance size.
    """
    cell = row.require(ON_DEMAND)
    try:
        quote = row.quote(ON_DEMAND, stated=stated)
    except LayoutChanged as exc:
        return math.nan, "USD", str(exc), {}
    if quote is None:
        return math.nan, "USD", f"On-Demand cell {cell!r} is not a price", {}
    quote.require_per_gpu(cell, f"under `On-Demand` in {WHERE}")
    amount = round(quote.per_hour(), 6)
    if not math.isfinite(amount) or amount <= 0:
        return amount, quote.currency, f"price {amount} is not a positive price", quote.flags()
    return amount, quote.currency, None, quote.flags()
