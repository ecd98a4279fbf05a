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
    cells: Mapping[str, str]
    price: pages.Money | None
    price_text: str
    per_gpu: bool


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    page = next((r for r in responses if r.url.startswith(PAGE_URL)), None)
    api = next((r for r in responses if r.url.startswith(API_URL)), None)
    if page is None:
        raise LayoutChanged(f"no response for {PAGE_URL} among {[r.url for r in responses]}")
    if pages.is_not_modified(page):
        # every Lambda offer is on-demand from this one page
        yield Unchanged({"pricing_type": "on_demand"}, reason=f"{PAGE_URL} not modified (HTTP 304)")
        return
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
    """The rows of every GPU-count tab under "Instances pricing"."""
    section = pages.section(doc, SECTION, where="lambda.ai/pricing")
    tables = pages.find_tables(section, required=REQUIRED, where=WHERE)
    for table in tables:
        count = _tab_count(doc, table)
        price_col = table.column(*PRICE_LABELS)
        unit, per_gpu = pages.price_unit(table.headers[price_col])
        if per_gpu is None or unit not in (None, "hour"):
            raise LayoutChanged(
                f"price column `{table.headers[price_col]}` of {table.where} no longer says per GPU "
                "per hour; has the page layout changed?"
            )
        vram_col = table.column("VRAM/GPU")
        for cells, element in zip(table.rows, table.elements, strict=True):
            # the plan is the row header under the empty first header; data-plan only as a fallback
            plan = (cells[0] if cells else "") or str(element.get("data-plan") or "")
            label = pages.parse_gpu_label(plan)
            row_count = count or label.count
            if not row_count:
                raise LayoutChanged(
                    f"no GPU count for `{plan}` in {table.where}: neither a `<n>x` tab nor a count in "
                    "the plan name; has the page layout changed?"
                )
            price_text = cells[price_col] if price_col < len(cells) else ""
            yield PageRow(
                count=row_count,
                plan=plan,
                vram_gb=pages.parse_gb(cells[vram_col]) if vram_col < len(cells) else None,
                cells=dict(zip(table.headers, cells, strict=False)),
                price=pages.parse_money(price_text, currency="USD"),
                price_text=price_text,
                per_gpu=per_gpu,
            )


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
        tab = doc.find(attrs={"role": "tab", "aria-controls": panel["id"]})
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


def _offer(row: PageRow, api: tuple[str, Mapping[str, Any]] | None, problem: str | None = None) -> Offer:
    price = row.price
    amount = price.amount if price is not None else math.nan
    instance_price = amount * row.count if row.per_gpu else amount
    if problem is None and not (math.isfinite(amount) and amount > 0):
        problem = f"price {row.price_text!r} is not a positive number"
    vram = f" {row.vram_gb:g}GB" if row.vram_gb else ""
    data: dict[str, Any] = {
        "plan": row.plan,
        "price_per_gpu_hour": amount if row.per_gpu else None,
        "storage": row.cells.get("STORAGE"),
        "tab": f"{row.count}x",
    }
    if price is not None and price.is_from:
        data["price_is_from"] = True
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
    ram = next((v for k, v in row.cells.items() if pages.label_matches(k, "RAM")), None)
    vcpus = next((v for k, v in row.cells.items() if pages.label_matches(k, "vCPUs")), None)
    return Offer(
        provider=name,
        instance_type=f"{row.count}x {row.plan}{vram}",
        region="global",
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=round(instance_price, 6) if math.isfinite(instance_price) else instance_price,
        currency=(price.currency if price is not None else "") or "USD",
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
