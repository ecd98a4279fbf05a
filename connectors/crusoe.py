"""Crusoe Cloud: on-demand GPU prices (and spot, when published) from the public pricing page.

Source: `GET https://crusoe.ai/cloud/pricing` (static Webflow HTML, no auth, no documented rate
limit; one request per run). Under the heading "GPU instances pricing" a `<div>` grid: a header
row "GPU model / On-demand / Current spot", then one list item per GPU whose first cell holds the
model (`<h4>`, "NVIDIA H100") and its tags (memory "80GB", platform "HGX" / "SXM" / "PCIe" /
"NVL72"), and whose price cells read "$3.90/GPU-hr" or "Contact sales".

Prices are USD per GPU-hour; an instance costs count x the per-GPU price. The page names no
instance shapes, so each row is offered in the GPU counts Crusoe's instance types come in
(`GPU_COUNTS`: `h100-80gb-sxm-ib.8x`, `a100-80gb.1x`...`.8x`, `l40s-48gb.1x`...`.10x`, ...,
docs.crusoecloud.com); a row we know no counts for is offered as 1 GPU and says
`provider_data["gpu_counts_documented"] = False`.

"Contact sales" is not a price: every such cell is `Excluded("contact_sales")`, on-demand or spot.
In the 2026 page EVERY "Current spot" cell reads "Contact sales", so Crusoe yields no spot offers
today; a spot price, once published, becomes a `spot` / `market` offer (scope
`spot:gpu-instances`). A price that does not say per GPU (or per instance) is a wrong row
(`problem`), since guessing would be off by the GPU count. Every price is read through
`pages.quote` (checked 2026-12-01 against the 2026 capture): the cell states currency, unit and
basis ("$3.90/GPU-hr"); a cell that states none of one is a wrong row, all cells so a
`LayoutChanged`; a per-instance price is refused (the page names no instance size).
Scopes: `on_demand:gpu-instances`,
`spot:gpu-instances`; `region="global"` (the page does not price by region). `instance_type` is
`"<n>x <model> <tags>"`, e.g. `"8x NVIDIA H100 80GB HGX"`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import bs4

from connectors import pages
from connectors.base import Excluded, LayoutChanged, Offer, PricingType, RawResponse, Unchanged, excluded

name = "crusoe"
requires: tuple[str, ...] = ()

PAGE_URL = "https://crusoe.ai/cloud/pricing"
HEADING = "GPU instances pricing"
WHERE = "the GPU instances table of crusoe.ai/cloud/pricing"
SCOPES = {"on_demand": "on_demand:gpu-instances", "spot": "spot:gpu-instances"}
# GPU counts of Crusoe's instance types, by (model, platform tag); from the instance-type names
# in docs.crusoecloud.com (h200-141gb-sxm-ib.8x, h100-80gb-sxm-ib.8x, a100-80gb-sxm-ib.8x,
# a100-80gb.{1,2,4,8}x, l40s-48gb.{1,2,4,8,10}x, mi300x-192gb.8x, a40.{1,2,4,8}x).
GPU_COUNTS: Mapping[tuple[str, str], tuple[int, ...]] = {
    ("nvidia h200", "hgx"): (8,),
    ("nvidia h100", "hgx"): (8,),
    ("nvidia b200", "hgx"): (8,),
    ("nvidia a100", "sxm"): (8,),
    ("nvidia a100", "pcie"): (1, 2, 4, 8),
    ("nvidia l40s", ""): (1, 2, 4, 8, 10),
    ("nvidia a40", "pcie"): (1, 2, 4, 8),
    ("amd mi300x", ""): (8,),
    ("amd mi355x", ""): (8,),
}


def fetch(
    client: Any,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    yield from pages.read_pages(responses, tuple(SCOPES.values()), _page_items)


def _page_items(response: RawResponse) -> Iterator[Offer | Excluded]:
    counts: dict[str, int] = {}
    yield from gpu_offers(pages.soup(response), counts)
    yield from excluded(counts)


def model_and_tags(cell: bs4.Tag) -> tuple[str, list[str]]:
    """("NVIDIA H100", ["80GB", "HGX"]) from the first cell: its heading, then every other text."""
    heading = cell.find(["h1", "h2", "h3", "h4", "h5", "h6"]) or cell.find(None, attrs={"role": "heading"})
    texts = [pages.clean(t) for t in cell.stripped_strings]
    texts = [t for t in texts if t]
    if heading is None:
        return (texts[0] if texts else ""), texts[1:]
    model = pages.clean(heading.get_text(" "))
    return model, [t for t in texts if t != model]


def gpu_offers(doc: bs4.Tag, counts: dict[str, int]) -> Iterator[Offer]:
    """Every priced cell of the grid, each column found by its label and each price read with the
    basis its cell states ("$3.90/GPU-hr": USD, per GPU, per hour)."""
    block = pages.section(doc, HEADING, where="crusoe.ai/cloud/pricing")
    table = pages.find_table(block, required=("GPU model", "On-demand", "Spot"), where=WHERE)
    table.check_names("GPU model")
    table.check_price_columns("GPU model", "On-demand", "Current spot", "Spot")
    model_col = table.column("GPU model")
    columns: tuple[tuple[PricingType, str], ...] = (
        ("on_demand", table.label_of("On-demand")),
        ("spot", table.label_of("Current spot", "Spot")),
    )
    basis_errors: list[LayoutChanged] = []
    priced = 0
    for row in table.read():
        cells = [c for c in row.element.children if isinstance(c, bs4.Tag)] if row.element else []
        if model_col >= len(cells):
            raise LayoutChanged(f"a row of {WHERE} has no `GPU model` cell; has the page layout changed?")
        model, tags = model_and_tags(cells[model_col])
        # tags are "141GB" (memory per GPU) and a platform word ("HGX", "SXM", "PCIe", "NVL72")
        memory = next((gb for t in tags if (gb := pages.parse_gb(t)) is not None), None)
        platform = next((t for t in tags if pages.parse_gb(t) is None), "")
        for pricing_type, label in columns:
            text = row.get(label) or ""
            try:
                price = row.quote(label)
            except LayoutChanged as exc:
                # one cell without its basis is that row's problem; every cell so is the page's
                basis_errors.append(exc)
                yield from _offers(model, memory, platform, tags, None, text, pricing_type, problem=str(exc))
                continue
            if price is None and pages.is_contact(text):
                reason = "contact_sales" if pricing_type == "on_demand" else "spot_contact_sales"
                counts[reason] = counts.get(reason, 0) + 1
                continue
            if price is None and pages.is_not_available(text):
                counts["not_available"] = counts.get("not_available", 0) + 1
                continue
            if price is not None:
                price.require_per_gpu(text, f"of `{model}` in {WHERE}")
            priced += 1
            yield from _offers(model, memory, platform, tags, price, text, pricing_type)
    if basis_errors and not priced:
        raise basis_errors[0]


def _offers(
    model: str,
    memory: float | None,
    platform: str,
    tags: list[str],
    price: pages.Quote | None,
    text: str,
    pricing_type: PricingType,
    problem: str | None = None,
) -> Iterator[Offer]:
    amount = price.per_hour() if price is not None else math.nan
    if problem is not None:
        pass
    elif price is None:
        problem = f"price {text!r} is not readable"
    elif not (math.isfinite(amount) and amount > 0):
        problem = f"price {text!r} is not a positive number"
    gpu_counts = GPU_COUNTS.get((model.lower(), platform.lower()))
    data: dict[str, Any] = {"model": model, "tags": tags, "price_text": text, "price_per_gpu_hour": amount}
    if price is not None:
        data |= price.flags()
    if gpu_counts is None:
        data["gpu_counts_documented"] = False
    label = " ".join([model, *tags])
    for count in gpu_counts or (1,):
        total = amount * count
        yield Offer(
            provider=name,
            instance_type=f"{count}x {label}",
            region="global",
            pricing_type=pricing_type,
            price_source="list" if pricing_type == "on_demand" else "market",
            price_per_hour=round(total, 6) if math.isfinite(total) else total,
            currency=price.currency if price is not None else "USD",
            gpu_name_raw=_gpu_name(model, platform),
            gpu_count=float(count),
            gpu_memory_gb_raw=memory,
            provider_data=data,
            scope=SCOPES[pricing_type],
            problem=problem,
        )


def _gpu_name(model: str, platform: str) -> str:
    """The GPU as our aliases know it: "HGX"/"DGX" name the board, not the GPU, and are dropped;
    a form factor ("SXM", "PCIe", "NVL72") tells GPUs apart and is kept."""
    return model if platform.upper() in ("", "HGX", "DGX") else f"{model} {platform}"
