"""Lambda (lambda.ai, formerly Lambda Labs): on-demand GPU instance prices from the pricing page.

Sources:
- `GET https://lambda.ai/pricing` (server-rendered HTML, no auth). Under the heading "Instances
  pricing" one tab panel per GPU count ("8x", "4x", "2x", "1x"), each a `<table>` with the columns
  (plan), `VRAM/GPU`, `vCPUs`, `RAM`, `STORAGE`, `PRICE/GPU/HR*`. Prices are per GPU-hour in USD,
  "plus applicable sales tax"; an instance costs count x the per-GPU price.
- Optional, when `LAMBDA_API_KEY` is set: `GET https://cloud.lambda.ai/api/v1/instance-types`
  (Bearer key; documented limit about one request per second, we send one). It adds regional
  availability: each page row matched to an API type (same GPU count, model, VRAM, PCIe or not)
  gets `available` (any region with capacity) and `provider_data["regions_with_capacity"]`. API
  types with no page row are counted as `Excluded("api_only")`: the page is the price list.

Lambda sells no spot or interruptible instances, so every offer is `on_demand`, `list`. Prices do
not vary by region (`region="global"`). Scopes: one per tab table (`on_demand:8x`, ...), so a
vanished tab is held on its own. `instance_type` is `"<n>x <plan> <VRAM>GB"`, e.g.
`"8x NVIDIA H100 SXM 80GB"` (the page has no instance ids; the API's `gpu_8x_h100_sxm5` is kept in
`provider_data["api_instance_type"]` when the key is set); warehouse/seeds/instance_types.csv maps
these names to GPU and interconnect by pattern.

Columns are found by label (issue 19, 2026-12-01): the plan column's blank header takes its cells'
`data-label="Plan"`, so a reordered table names every offer as before; the price is read through
`pages.quote` (per GPU and per hour from "PRICE/GPU/HR*", the currency from the cell's "$"), and a
header whose cells' `data-label` disagree is refused. With the API key, an API instance price equal
to the page's per-GPU figure (not to it times the count) refuses the page: the column is per instance.

Quirks: the plan cell is a row `<th>` under an empty header; "A100 SXM" appears twice (80 and
40 GB), told apart by the VRAM column; the tab buttons carry the count, linked to their panel by
`aria-controls` / `aria-labelledby`. A price column that no longer says "per GPU" (or "per
instance") raises `LayoutChanged`: guessing would be off by the GPU count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import bs4

from connectors import pages
from connectors.base import (
    ConnectorError,
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    Unchanged,
    excluded,
)

name = "lambdalabs"
requires: tuple[str, ...] = ()
API_KEY = "LAMBDA_API_KEY"
optional: tuple[str, ...] = (API_KEY,)

PAGE_URL = "https://lambda.ai/pricing"
API_URL = "https://cloud.lambda.ai/api/v1/instance-types"
WHERE = "the instances table of lambda.ai/pricing"
SECTION = "Instances pricing"
PRICE_LABELS = ("Price/GPU/hr", "Price")
REQUIRED = ("VRAM/GPU", "Price")
_NOISE = frozenset({"nvidia", "tesla", "quadro", "geforce"})


def fetch(
    client: Any,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)
    if key := creds.get(API_KEY):
        yield client.fetch(
            "GET", API_URL, headers={"Authorization": f"Bearer {key}", "Accept": "application/json"}
        )


@dataclass(frozen=True)
class PageRow:
    """One row of one tab table, before it is matched to the API."""

    count: int
    plan: str
    vram_gb: float | None
    cells: Mapping[str, str]  # normalized label -> cell text (pages.Row.cells)
    price: pages.Quote | None
    price_text: str


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    page = next((r for r in responses if r.url.startswith(PAGE_URL)), None)
    api = next((r for r in responses if r.url.startswith(API_URL)), None)
    if page is None:
        raise LayoutChanged(f"no response for {PAGE_URL} among {[r.url for r in responses]}")
    # every Lambda offer is on-demand from this one page: a 304 keeps them all current
    yield from pages.read_pages([page], ({"pricing_type": "on_demand"},), lambda r: _page_items(r, api))


def _page_items(page: RawResponse, api: RawResponse | None) -> Iterator[Offer | Excluded]:
    types = api_types(api.json(), api.url) if api is not None else None
    counts: dict[str, int] = {}
    matched: set[str] = set()
    for row in page_rows(pages.soup(page)):
        if row.price is None:
            if pages.is_contact(row.price_text):
                counts["contact_sales"] = counts.get("contact_sales", 0) + 1
            elif pages.is_not_available(row.price_text):
                counts["not_available"] = counts.get("not_available", 0) + 1
            else:  # words where a price belongs: a wrong row, never "not offered"
                yield _offer(row, None, problem=f"price {row.price_text!r} is not readable")
            continue
        api_match = _match(row, types) if types is not None else None
        if api_match is not None:
            matched.add(api_match[0])
        yield _offer(row, api_match)
    if types is not None:
        counts["api_only"] = len(set(types) - matched)
    yield from excluded(counts)


def page_rows(doc: bs4.Tag) -> Iterator[PageRow]:
    """The rows of every GPU-count tab under "Instances pricing", every cell found by its label.

    The plan sits under a blank header; its cells carry `data-label="Plan"` (the responsive
    table's own label), which `pages` reads as the column's label, so a reordered table still
    finds it. Without that label the row's own header cell (`<th>` in a body row) is the plan.
    """
    section = pages.section(doc, SECTION, where="lambda.ai/pricing")
    tables = pages.find_tables(section, required=REQUIRED, where=WHERE)
    for table in tables:
        count = _tab_count(doc, table)
        vram_label = table.label_of("VRAM/GPU")
        for row in table.read():
            plan = row.get("Plan") or _row_header(row.element)
            label = pages.parse_gpu_label(plan)
            row_count = count or label.count
            if not row_count:
                raise LayoutChanged(
                    f"no GPU count for `{plan}` in {table.where}: neither a `<n>x` tab nor a count in "
                    "the plan name; has the page layout changed?"
                )
            # "PRICE/GPU/HR*": the label states per GPU and per hour, the cell "$4.99" the currency
            # the tab's count: a per-instance column beside it must be this many GPUs' price
            price = row.quote(*PRICE_LABELS, gpu_count=row_count)
            yield PageRow(
                count=row_count,
                plan=plan,
                vram_gb=pages.parse_gb(row.get(vram_label)),
                cells=row.cells,
                price=price,
                price_text=row.get(*PRICE_LABELS) or "",
            )


def _row_header(element: bs4.Tag | None) -> str:
    """The text of a body row's own header cell (`<th>`), or of its `data-plan` attribute."""
    if element is None:
        return ""
    header = element.find("th", recursive=False)
    if header is not None:
        return pages.clean(header.get_text(" "))
    return str(element.get("data-plan") or "")


def _tab_count(doc: bs4.Tag, table: pages.Table) -> int | None:
    """The GPU count of the tab panel holding this table ("8x"), or None outside a tab panel."""
    if not table.elements:
        return None
    panel = table.elements[0].find_parent(attrs={"role": "tabpanel"})
    if panel is None:
        return None
    tab = None
    if panel.get("aria-labelledby"):
        tab = doc.find(id=panel["aria-labelledby"])
    if tab is None and panel.get("id"):
        tab = doc.find(None, attrs={"role": "tab", "aria-controls": panel["id"]})
    label = pages.clean(tab.get_text(" ")) if tab is not None else str(panel.get("aria-label") or "")
    return pages.parse_count(label) if re.fullmatch(r"\d+\s*x", label, re.I) else None


def api_types(payload: Any, url: str = API_URL) -> dict[str, Mapping[str, Any]]:
    """The `data` map of instance-types (name -> {instance_type, regions_with_capacity_available})."""
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        raise ConnectorError(
            f"{url}: Lambda API error {error.get('code')}: {error.get('message')} "
            f"(check {API_KEY}, or unset it to read the pricing page alone)"
        )
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, dict):
        raise LayoutChanged(f"{url}: `data` map missing from the instance-types answer; has the API changed?")
    return data


def _model_key(name: str) -> tuple[str, str | None]:
    """("h100", "sxm") for "NVIDIA H100 SXM" and "H100 (80 GB SXM5)": model and form factor
    ("pcie", "sxm", or None when the name does not say)."""
    name = pages.clean(name)
    form = "pcie" if "pcie" in name.lower() else "sxm" if "sxm" in name.lower() else None
    name = re.sub(r"\(.*?\)|\b\d+\s*GB\b|\b(SXM\d?|PCIe)\b", " ", name, flags=re.I)
    tokens = [t for t in re.split(r"[^0-9a-z]+", name.lower()) if t and t not in _NOISE]
    return "".join(tokens), form


def _api_vram(description: str) -> float | None:
    match = re.search(r"(\d+(?:\.\d+)?)\s*GB", description or "", re.I)
    return float(match.group(1)) if match else None


def _match(row: PageRow, types: Mapping[str, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]] | None:
    """The API type with the row's GPU count, model, VRAM and form factor. A form factor one side
    does not state (the page's "A10", the API's "GH200 (96 GB)") matches either."""
    model, form = _model_key(row.plan)
    found: list[tuple[str, Mapping[str, Any]]] = []
    for type_name, entry in sorted(types.items()):
        spec = entry.get("instance_type") if isinstance(entry, Mapping) else None
        if not isinstance(spec, Mapping):
            continue
        gpu = str(spec.get("gpu_description") or "")
        gpus = (spec.get("specs") or {}).get("gpus")
        api_model, api_form = _model_key(gpu)
        same = (gpus, api_model, round(_api_vram(gpu) or 0)) == (row.count, model, round(row.vram_gb or 0))
        if same and (form is None or api_form is None or form == api_form):
            found.append((type_name, entry))
    return found[0] if len(found) == 1 else None  # ambiguous: no availability rather than a guess


def _check_api_basis(row: PageRow, api_price: float | None) -> None:
    """Refuse a page price whose basis the API contradicts: the API's instance price equal to the
    page's figure itself (not to it times the GPU count) means the column is per instance."""
    price = row.price
    if price is None or api_price is None or row.count <= 1 or not price.per_gpu:
        return
    as_printed = price.per_hour()
    if abs(api_price - as_printed) <= 0.01 and abs(api_price - as_printed * row.count) > 0.01:
        raise LayoutChanged(
            f"`{row.plan}` ({row.count}x) in {WHERE}: the page's per-GPU price {price.text!r} equals the "
            f"API's instance price ${api_price:.2f}/hour; the column is not per GPU as its label says"
        )


def _offer(row: PageRow, api: tuple[str, Mapping[str, Any]] | None, problem: str | None = None) -> Offer:
    price = row.price
    instance_price = price.instance_hour(row.count) if price is not None else math.nan
    if problem is None and not (math.isfinite(instance_price) and instance_price > 0):
        problem = f"price {row.price_text!r} is not a positive number"
    vram = f" {row.vram_gb:g}GB" if row.vram_gb else ""
    data: dict[str, Any] = {
        "plan": row.plan,
        "price_per_gpu_hour": price.per_hour() if price is not None and price.per_gpu else None,
        "storage": row.cells.get("storage"),
        "tab": f"{row.count}x",
    }
    if price is not None:
        data |= price.flags()
    available = None
    if api is not None:
        type_name, entry = api
        regions = [r.get("name") for r in entry.get("regions_with_capacity_available") or [] if r]
        spec = entry.get("instance_type") or {}
        cents = spec.get("price_cents_per_hour")
        data |= {
            "api_instance_type": type_name,
            "regions_with_capacity": regions,
            "api_price_per_hour": cents / 100 if isinstance(cents, int | float) else None,
        }
        available = bool(regions)
        _check_api_basis(row, data["api_price_per_hour"])
    ram = row.cells.get("ram")
    vcpus = row.cells.get("vcpus")
    return Offer(
        provider=name,
        instance_type=f"{row.count}x {row.plan}{vram}",
        region="global",
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=round(instance_price, 6) if math.isfinite(instance_price) else instance_price,
        currency=price.currency if price is not None else "USD",
        gpu_name_raw=row.plan,
        gpu_count=float(row.count),
        gpu_memory_gb_raw=row.vram_gb,
        vcpus=pages.parse_vcpus(vcpus),
        ram_gb=pages.parse_gb(ram),
        available=available,
        provider_data=data,
        scope=f"on_demand:{row.count}x",
        problem=problem,
    )
