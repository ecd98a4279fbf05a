"""Together AI GPU Clusters: on-demand per-GPU-hour rates of 8-GPU nodes from the pricing page.

Source: `GET https://www.together.ai/pricing` (public HTML, no auth, no documented rate limit;
one request a run). Only the section under the heading "GPU Clusters" is read (the page's
`#gpu-clusters` anchor, which Together's own docs link as "GPU Cluster Pricing"): a table of
hardware rows ("NVIDIA HGX H100 SXM", "NVIDIA HGX H200", "NVIDIA HGX B200", the H100
"Inference" node type) with an on-demand and reserved rates. Everything else on the page,
serverless token prices, fine-tuning per-token prices and the hourly Dedicated Endpoints, is
not a GPU a fine-tuner rents and is ignored by scope: it is never read, so never `Excluded`.

Checked 2026-12-02 against Together's own material, since no capture of the page is held
(only getdeploying's derived rows, a cross-check): the GPU-clusters skill of
github.com/togethercomputer/skills (`references/pricing-and-discovery.md`, 2026-08-18) says
the pricing table's rates "are per GPU per hour", that an em dash or "contact us" is "no public
numeric rate", and that clusters come in multiples of 8 GPUs; docs.together.ai/docs/
instant-clusters lists the node types and says on-demand capacity is paid "on an hourly basis".

What becomes an offer, per hardware row:
- On-demand: one offer for one node of `GPUS_PER_NODE` (8) GPUs, `instance_type`
  `"8x <hardware>"`, price = 8 x the per-GPU rate, `price_source="list"`, `region="global"`
  (the page prices no region). A larger cluster is more nodes of the same offer.
- Reserved columns (any label naming days, weeks, months or "reserved") are terms, not
  on-demand prices: every priced cell is `Excluded("reserved_term")`.
- Preemptible (spot): a column labelled "Preemptible" (or "Spot") is read as a published rate
  (`list`). Without one, Together's announcement of 2026-09-10 ("preemptible compute ... at a
  flat 50% of the on-demand rate, with a five-minute drain window",
  https://www.together.ai/blog/introducing-preemptible-compute-the-same-compute-half-the-price)
  gives a spot offer per on-demand one at `PREEMPTIBLE_SHARE` of it, `price_source="estimated"`
  (derived by a rule, never shown as a market price), with the rule in `provider_data`.
- "Contact us"/"Contact sales" is `Excluded("contact_sales")`; an em dash, "N/A" or an empty
  cell `Excluded("no_public_rate")`.

Every price is read through `pages.quote`: the currency from the cell ("$"), the time unit and
the per-GPU basis from the cell or its label where they say so, else from what the section says
once outside the table ("Prices are per GPU per hour", `section_basis`; not binding: a cell or
label that says otherwise wins, and a per-instance price then multiplies by nothing). Together's
docs say the rates are per GPU-hour, but the connector takes that from the page, never from the
docs: a price whose currency, unit or basis the page states nowhere is a wrong row, and every
row so is a `LayoutChanged` (so a page that switched to monthly rates silently cannot be read
as hourly). A renamed "Hardware" or "On-demand" label, or a new
price column under a label this module does not read, is a `LayoutChanged` naming it.
Scopes: `on_demand:gpu-clusters`, `spot:gpu-clusters`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import bs4

from connectors import pages
from connectors.base import Excluded, LayoutChanged, Offer, PricingType, RawResponse, Unchanged, excluded

name = "together"
requires: tuple[str, ...] = ()

PAGE_URL = "https://www.together.ai/pricing"
HEADINGS = ("GPU Clusters", "Instant GPU Clusters", "Instant Clusters")
WHERE = "the GPU Clusters table of together.ai/pricing"
SCOPES: Mapping[PricingType, str] = {"on_demand": "on_demand:gpu-clusters", "spot": "spot:gpu-clusters"}
NAME_LABELS = ("Hardware", "Node type")
ON_DEMAND_LABELS = ("On-demand", "On demand")
SPOT_LABELS = ("Preemptible", "Spot")
# a column of one of these words prices a commitment ("1-6 days", "Reserved 1 month+")
RESERVED_WORDS = ("Reserved", "day", "days", "week", "weeks", "month", "months", "year", "years")
# clusters are sized in multiples of 8 GPUs (docs.together.ai cluster API: num_gpus "must be
# multiple of 8"); one node of HGX is the unit an offer prices
GPUS_PER_NODE = 8
# "a flat 50% of the on-demand rate" (Together blog, 2026-09-10)
PREEMPTIBLE_SHARE = 0.5
PREEMPTIBLE_RULE = (
    "Together preemptible compute: a flat 50% of the on-demand rate, five-minute drain window "
    "(https://www.together.ai/blog/introducing-preemptible-compute-the-same-compute-half-the-price, "
    "2026-09-10)"
)
# "NVIDIA HGX H100 SXM - Inference" -> the GPU is "H100 SXM"; HGX/DGX name the board, not the GPU
_BOARD = re.compile(r"\b(NVIDIA|HGX|DGX)\b", re.IGNORECASE)
_VARIANT = re.compile(r"\s+[-–—]\s+.*$")


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
    yield from cluster_offers(pages.soup(response), counts)
    yield from excluded(counts)


def gpu_name(hardware: str) -> str:
    """The GPU of a hardware row as our aliases know it: "NVIDIA HGX H100 SXM - Inference" ->
    "H100 SXM" (the board words and the node-type suffix are not the GPU)."""
    base = _VARIANT.sub("", pages.clean(hardware))
    return " ".join(_BOARD.sub(" ", base).split())


def cluster_section(doc: bs4.Tag) -> bs4.Tag:
    """The block under the GPU clusters heading (its first wording found)."""
    for heading in HEADINGS[:-1]:
        try:
            return pages.section(doc, heading, where="together.ai/pricing")
        except LayoutChanged:
            continue
    return pages.section(doc, HEADINGS[-1], where="together.ai/pricing")


def section_basis(block: bs4.Tag) -> pages.Stated:
    """What the GPU clusters section says once of its prices, outside the table: a sentence that
    names both a time unit and the per-GPU basis ("Prices are per GPU per hour"). Empty when no
    sentence does (then every cell or label must say it); `LayoutChanged` when two disagree."""
    found: dict[tuple[str, bool], str] = {}
    for node in block.find_all(string=True):
        if node.find_parent(["table", "script", "style"]) is not None:
            continue
        for text in re.split(r"(?<=[.;!?])\s+", pages.clean(str(node))):
            unit, per_gpu = pages.price_unit(text)
            if unit is not None and per_gpu is not None and re.search(r"\b(price|rate)", text, re.I):
                found.setdefault((unit, per_gpu), text)
    if len(found) > 1:
        raise LayoutChanged(
            f"{WHERE}: the section states its prices' basis twice differently ({list(found.values())}); "
            "has the page layout changed?"
        )
    if not found:
        return pages.Stated()
    ((unit, per_gpu), text), *_ = found.items()
    # not binding: a cell or label that states its own basis says which price it is
    return pages.Stated(
        unit=unit, per_gpu=per_gpu, source=f"the GPU Clusters section says {text!r}", binding=False
    )


def cluster_offers(doc: bs4.Tag, counts: dict[str, int]) -> Iterator[Offer]:
    """Every hardware row of the GPU clusters table, each price read with its basis."""
    block = cluster_section(doc)
    stated = section_basis(block)
    table = pages.find_table(block, required=(NAME_LABELS[0], ON_DEMAND_LABELS[0]), where=WHERE)
    table.check_names(*NAME_LABELS)
    table.check_price_columns(*NAME_LABELS, *ON_DEMAND_LABELS, *SPOT_LABELS, *RESERVED_WORDS)
    name_label = table.label_of(*NAME_LABELS)
    spot_index = table.find_column(*SPOT_LABELS)
    reserved = [
        h
        for i, h in enumerate(table.headers)
        if i != spot_index and any(pages.label_in(h, word) for word in RESERVED_WORDS)
    ]
    basis_errors: list[LayoutChanged] = []
    priced = 0
    for row in table.read():
        hardware = pages.clean(row.get(name_label))
        if not hardware:
            raise LayoutChanged(f"a row of {WHERE} has no `{name_label}` cell; has the page layout changed?")
        for label in reserved:
            if pages.parse_money(row.get(label)) is not None:
                counts["reserved_term"] = counts.get("reserved_term", 0) + 1
        on_demand = _read(row, ON_DEMAND_LABELS, stated, hardware, counts, basis_errors)
        if isinstance(on_demand, Offer):  # a wrong row, flagged
            yield on_demand
        elif on_demand is not None:
            priced += 1
            yield _offer(hardware, on_demand, "on_demand", "list")
        if spot_index is None:
            if isinstance(on_demand, Offer):
                # the estimate derives from a wrong price: flagged too, so it keeps its last good one
                problem = f"{on_demand.problem} (the preemptible estimate derives from it)"
                yield replace(
                    on_demand,
                    pricing_type="spot",
                    price_source="estimated",
                    scope=SCOPES["spot"],
                    problem=problem,
                )
            elif on_demand is not None:
                yield _offer(hardware, on_demand, "spot", "estimated", share=PREEMPTIBLE_SHARE)
            continue
        spot = _read(row, (table.headers[spot_index],), stated, hardware, counts, basis_errors, spot=True)
        if isinstance(spot, pages.Quote):
            yield _offer(hardware, spot, "spot", "list")
        elif isinstance(spot, Offer):
            yield spot
    if basis_errors and not priced:
        raise basis_errors[0]


def _read(
    row: pages.Row,
    labels: Sequence[str],
    stated: pages.Stated,
    hardware: str,
    counts: dict[str, int],
    errors: list[LayoutChanged],
    *,
    spot: bool = False,
) -> pages.Quote | Offer | None:
    """A price cell as a quote; None when the cell is left out by rule (counted); a flagged
    offer when the cell is wrong."""
    pricing_type: PricingType = "spot" if spot else "on_demand"
    text = row.get(*labels) or ""
    try:
        price = row.quote(*labels, stated=stated)
    except LayoutChanged as exc:
        errors.append(exc)
        return _wrong(hardware, text, pricing_type, str(exc))
    if price is None:
        if pages.is_contact(text):
            reason = "contact_sales"
        elif pages.is_not_available(text):
            reason = "no_public_rate"
        else:
            return _wrong(hardware, text, pricing_type, f"price {text!r} is not readable")
        reason = f"spot_{reason}" if spot else reason
        counts[reason] = counts.get(reason, 0) + 1
        return None
    amount = price.per_hour()
    if not (math.isfinite(amount) and amount > 0):
        return _wrong(hardware, text, pricing_type, f"price {text!r} is not a positive number")
    return price


def _wrong(hardware: str, text: str, pricing_type: PricingType, problem: str) -> Offer:
    return Offer(
        provider=name,
        instance_type=f"{GPUS_PER_NODE}x {hardware}",
        region="global",
        pricing_type=pricing_type,
        price_source="list",
        price_per_hour=math.nan,
        currency="USD",
        gpu_name_raw=gpu_name(hardware),
        gpu_count=float(GPUS_PER_NODE),
        provider_data={"hardware": hardware, "price_text": text},
        scope=SCOPES[pricing_type],
        problem=problem,
    )


def _offer(
    hardware: str,
    price: pages.Quote,
    pricing_type: PricingType,
    source: str,
    *,
    share: float = 1.0,
) -> Offer:
    node = price.instance_hour(GPUS_PER_NODE) * share
    data: dict[str, Any] = {
        "hardware": hardware,
        "gpus_per_node": GPUS_PER_NODE,
        "price_per_gpu_hour": round(price.per_hour() * share, 6) if price.per_gpu else None,
        **price.flags(),
    }
    if source == "estimated":
        data |= {"spot_rule": PREEMPTIBLE_RULE, "spot_share_of_on_demand": share}
    memory = next((gb for word in hardware.split() if (gb := pages.parse_gb(word)) is not None), None)
    return Offer(
        provider=name,
        instance_type=f"{GPUS_PER_NODE}x {hardware}",
        region="global",
        pricing_type=pricing_type,
        price_source="estimated" if source == "estimated" else "list",
        price_per_hour=round(node, 6),
        currency=price.currency,
        gpu_name_raw=gpu_name(hardware),
        gpu_count=float(GPUS_PER_NODE),
        gpu_memory_gb_raw=memory,
        provider_data=data,
        scope=SCOPES[pricing_type],
    )
