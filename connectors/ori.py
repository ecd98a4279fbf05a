"""Ori (Ori Global Cloud): per-GPU rates of its Serverless Kubernetes, from the public billing docs.

What is read, and what is not. Ori sells GPU virtual machines, bare metal and a Serverless
Kubernetes service. The only price list Ori publishes that a script can read is the "Resource
Pricing" table of the Serverless Kubernetes billing docs, `GET https://docs.ori.co/kubernetes/billing`
(public Docusaurus HTML, no auth, one request a run, revalidated with the last run's ETag /
Last-Modified; read 2026-12-02 through the search tools, earlier at docs.ori.co/docs/kubernetes/billing).
The VM prices are not read: www.ori.co/pricing no longer carries a pricing table (a peer's Ori
scraper was switched off with "ori.co/pricing now redirects ... without a pricing table", checked
2026-12-02), and no public instance-type or price endpoint of Ori's API was found in its docs,
its Terraform provider (github.com/ori-edge/terraform-provider-ogc) or peers' code. So these
offers are what the docs page prices: GPUs for pods, not VMs.

The page: two tables with the columns Resource, SKU, Price ($/minute), Price ($/hour), each
introduced by a line of text ("1. GPU Resources:", "2. Other Resources:"). A GPU row reads
"NVIDIA H100 SXM 80GB | ogx-k8s-h100sxm-80 | 0.0855 | 5.13". The other table prices memory per
MB, CPU per 1/100 vCPU and a load balancer.

What becomes an offer: each row of the table introduced as GPU resources, as one GPU
(`gpu_count=1`) at its "Price ($/hour)" rate. The basis is read, never assumed: currency and time
unit from the column label ("$/hour"), per GPU from the page's own sentence "Each GPU used in your
pods is billed at a fixed rate" (found in the page text, quoted in `provider_data`; a page without
it leaves every row's basis unstated, so every row is a wrong row). The "$/minute" column is the
billing unit (`billing_unit="minute"`); the two must agree (per minute x 60 = per hour, to 0.1 %),
else the row is a wrong row. `instance_type` is the SKU, `gpu_name_raw` the Resource text without
its vendor word, `gpu_memory_gb_raw` the memory it states. USD, `on_demand`, `list`,
`region="global"` (the page names no location).

Serverless: "Pods are only billed when they are actively running"; nothing is billed for a
stopped, suspended or idle pod (the page), so the seeds mark Ori `serverless`. What a GPU's rate
covers: "The billing for GPU usage encompasses the cost of the GPU along with the vCPU and memory
resources allocated to it" (the earlier copy of the page; the current one bills CPU apart for pods
"without a GPU"). The other table's rates are no offers (`Excluded("not_a_gpu")`, one per row) and
travel with every offer in `provider_data["other_rates"]` (USD per hour, as printed). No spot: the
page prices none.

Layout: no table with those columns, or none introduced as GPU resources, raises `LayoutChanged`
naming what it looked for; a price cell that is not a positive price is an offer with `problem`.
Scope: `on_demand:serverless-kubernetes` (the one GPU table).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import bs4

from connectors import pages
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, Unchanged, excluded
from connectors.http import Client

name = "ori"
requires: tuple[str, ...] = ()

PAGE_URL = "https://docs.ori.co/kubernetes/billing"
WHERE = "the Resource Pricing tables of docs.ori.co/kubernetes/billing"
SCOPE = "on_demand:serverless-kubernetes"
RESOURCE, SKU = "Resource", "SKU"
PER_HOUR, PER_MINUTE = "Price ($/hour)", "Price ($/minute)"
GPU_CAPTION = "GPU Resources"
PER_GPU_SENTENCE = "Each GPU used in your pods is billed at a fixed rate"
AGREEMENT = 0.001  # per-minute x 60 vs per-hour: the page prints both to 5-6 decimals


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    yield from pages.read_pages(responses, (SCOPE,), page_offers)


def page_offers(response: RawResponse) -> Iterator[Offer | Excluded]:
    root = pages.soup(response)
    found = pages.find_tables(root, required=(RESOURCE, SKU, PER_HOUR), optional=(PER_MINUTE,), where=WHERE)
    gpu_tables = [t for t in found if pages.label_in(caption(t), GPU_CAPTION)]
    if not gpu_tables:
        raise LayoutChanged(
            f"none of the {len(found)} price tables of {WHERE} is introduced as `{GPU_CAPTION}` "
            f"(captions: {[caption(t) for t in found]}); has the page layout changed?"
        )
    others = [t for t in found if t not in gpu_tables]
    rates = other_rates(others)
    sentence = per_gpu_statement(root)
    stated = pages.Stated(per_gpu=True if sentence else None, source=f"the page: {sentence!r}")
    left_out: Counter[str] = Counter({"not_a_gpu": sum(len(t.rows) for t in others)})
    yielded = 0
    for table in gpu_tables:
        table.check_names(RESOURCE)
        table.check_price_columns(PER_HOUR, PER_MINUTE)
        for row in table.read():
            resource = row.get(RESOURCE) or ""
            if not resource:
                continue
            yielded += 1
            yield gpu_offer(row, resource, stated, sentence, rates)
    if not yielded:
        raise LayoutChanged(f"the `{GPU_CAPTION}` table of {WHERE} has no rows; has the page layout changed?")
    yield from excluded(left_out)


def gpu_offer(
    row: pages.Row, resource: str, stated: pages.Stated, sentence: str | None, rates: Mapping[str, Any]
) -> Offer:
    price, problem, flags = hour_price(row, stated)
    label = pages.parse_gpu_label(resource)
    sku = row.get(SKU) or resource
    return Offer(
        provider=name,
        instance_type=sku,
        region="global",
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=price,
        currency="USD",
        gpu_name_raw=label.name or resource,
        gpu_count=1.0,
        gpu_memory_gb_raw=label.vram_gb,
        billing_unit="minute",
        provider_data={
            **flags,
            "resource": resource,
            "price_per_minute_text": row.get(PER_MINUTE),
            "per_gpu_stated_by": sentence,
            "other_rates": dict(rates),
            "product": "Serverless Kubernetes (GPU per pod, billed only while pods run)",
        },
        scope=SCOPE,
        problem=problem,
    )


def hour_price(row: pages.Row, stated: pages.Stated) -> tuple[float, str | None, dict[str, Any]]:
    """(USD per GPU-hour, problem, provider_data flags) of a GPU row, its per-minute rate checked
    against it. A price whose basis is stated nowhere is a wrong row, never a guess."""
    cell = row.require(PER_HOUR)
    try:
        hourly = row.quote(PER_HOUR, stated=stated)
        minutely = row.quote(PER_MINUTE, stated=stated) if row.key(PER_MINUTE) else None
    except LayoutChanged as exc:
        return math.nan, str(exc), {}
    if hourly is None:
        return math.nan, f"{PER_HOUR} cell {cell!r} is not a price", {}
    hourly.require_per_gpu(cell, f"under `{PER_HOUR}` in {WHERE}")
    amount = round(hourly.per_hour(), 6)
    if not math.isfinite(amount) or amount <= 0:
        return amount, f"price {amount} is not a positive price", hourly.flags()
    if minutely is not None and not math.isclose(minutely.per_hour(), amount, rel_tol=AGREEMENT):
        problem = (
            f"{PER_MINUTE} {minutely.text!r} is {minutely.per_hour():.6f} per hour, not the "
            f"{PER_HOUR} {cell!r}: one of the two columns is not what its label says"
        )
        return amount, problem, hourly.flags()
    return amount, None, hourly.flags()


def caption(table: pages.Table) -> str:
    """The text of the block a reader sees just before a table ("1. GPU Resources:"), or "".

    The block before the table, or before the first ancestor that has one (a table wrapped in a
    scroll `<div>`): a heading, a paragraph or a one-item list, whatever the markdown made of it.
    """
    element = table.elements[0] if table.elements else None
    node = element.find_parent("table") if element is not None else None
    while isinstance(node, bs4.Tag) and node.name not in ("body", "html"):
        for sibling in node.find_previous_siblings():
            text = pages.clean(sibling.get_text(" ")) if isinstance(sibling, bs4.Tag) else ""
            if text:
                return text
        node = node.parent
    return ""


def per_gpu_statement(root: bs4.Tag) -> str | None:
    """The page's sentence saying a GPU is billed per GPU, as printed; None when it is gone."""
    for text in root.find_all(string=True):
        cleaned = pages.clean(str(text))
        if pages.label_in(cleaned, PER_GPU_SENTENCE):
            return cleaned.strip(" :")
    return None


def other_rates(tables: Sequence[pages.Table]) -> dict[str, str | None]:
    """The non-GPU rates (memory, CPU, load balancer) by resource, their per-hour cell as printed."""
    return {
        row.get(RESOURCE) or f"row {i}": row.get(PER_HOUR)
        for table in tables
        for i, row in enumerate(table.read())
    }
