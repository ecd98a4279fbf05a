"""CoreWeave: per-instance on-demand and spot prices from the public pricing page.

Source: `GET https://www.coreweave.com/pricing` (server-rendered Webflow HTML, no key, no documented
rate limit; one request per run, revalidated with the last run's ETag / Last-Modified through
`connectors.pages.fetch_page`). Spot capacity is described at
https://docs.coreweave.com/platform/capacity-plans/spot-node-pools (preemptible Spot Node Pools,
not offered on Superchip instances, which is why GB200/GH200 read "N/A").

Page shape, and how it is read (by labels and `data-*` attributes, never by position or by the
site's class names):
- one GPU table per region, announced by a heading "REGION: EUROPE", "REGION: NORTH AMERICA", ...
  -> `region="europe"`, `"north-america"`;
- each table's header row is found by its labels (`GPU Model`, `GPU Count`, `On-Demand Price (Per
  Hour)`, optional `Spot Price (Per Hour)`, `VRAM (GB)`, `vCPUs`, `System RAM (GB)`, `Local Storage
  (TB)`); every instance is a grid row holding a heading with a `data-product` slug
  (`hgx-h100`, `nvidia-gb200-nvl72`, ...), which becomes `instance_type`. A row repeats its values
  in a mobile layout; the desktop cells are the row's children that share a class with the header
  cells (compared, not named), so a renamed theme class cannot shift the columns.
- prices are per instance-hour (the header says "Per Hour"; a header or cell saying "per GPU"
  would be multiplied by the GPU count); `gpu_memory_gb_raw` is the VRAM column (per GPU: 80 for
  HGX H100, 186 for a GB200 instance of 4 GPUs);
- "Contact sales" and "N/A" cells are `Excluded`, one reason each, per pricing type; a cell that
  is neither and holds no readable positive price is a wrong row (an `Offer` with `problem`);
- columns beyond the known ones (the North-America table has an inference-only per-GPU column,
  footnote 2: "exclusively applicable to the CoreWeave inference platform customers") are kept in
  `provider_data["extra_columns"]`, not priced;
- footnote marks written as `^1` ("4^1" GPUs) are stripped and kept in `provider_data`.

Read completely (issue 19, 2026-12-01): each price goes through `pages.quote` (currency from the
cell, unit from the header, per instance from the layout unless a header or cell says per GPU),
so a "€" page is stored as EUR, not USD with `currency` in `provider_data`. Each row also prints
its values in a mobile layout with their labels ("On-Demand Price: $42.00 / Hour", "4 GPU Count"):
`check_mobile` compares them with the desktop cell under the same header; a column that disagrees
in every row means labels moved over values (`LayoutChanged`), one row that disagrees is a wrong
row (`problem`).

Scopes: one per region table and pricing type (`"on_demand:europe"`, `"spot:europe"`), because a
table is what a page edit adds, drops or breaks at once.

The 2023 page (https://www.coreweave.com/gpu-cloud-pricing, a Wayback capture in the tests) is
not an instance price list: it priced a GPU *component* per GPU-hour ("GPU Component Cost Per
Hour"), with vCPU and RAM billed as separate components the buyer sized. No instance price can be
computed from it, so `parse` raises `LayoutChanged` saying so; `legacy_component_rows` reads it
for cross-checks.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import bs4

from connectors import pages
from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    PricingType,
    RawResponse,
    Unchanged,
    excluded,
)
from connectors.http import Client

name = "coreweave"
requires: tuple[str, ...] = ()

PAGE_URL = "https://www.coreweave.com/pricing"
WHERE = "coreweave.com/pricing"

# column label -> the meaning we read it as (matched with pages.label_matches / label_in)
MODEL, COUNT, VRAM, VCPUS, RAM, STORAGE, ON_DEMAND, SPOT = (
    "GPU Model",
    "GPU Count",
    "VRAM",
    "vCPUs",
    "System RAM",
    "Local Storage",
    "On-Demand Price",
    "Spot Price",
)
REQUIRED = (MODEL, COUNT, ON_DEMAND)
KNOWN = (MODEL, COUNT, VRAM, VCPUS, RAM, STORAGE, ON_DEMAND, SPOT)
_REGION = re.compile(r"^\s*region\s*:\s*(?P<name>.+?)\s*$", re.I)
MAX_LABEL = 60
_CARET_NOTE = re.compile(r"\s*\^\s*(\d{1,2})")


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    # the whole provider is this one page: a 304 keeps every open CoreWeave offer current
    yield from pages.read_pages(responses, ({},), lambda r: parse_page(pages.soup(r)))


@dataclass(frozen=True)
class RegionTable:
    """One region's GPU table: its header labels and each instance row's cells and product slug."""

    region: str
    region_label: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]  # (data-product slug, cleaned cell texts)
    marks: tuple[tuple[str, ...], ...] = ()  # footnote marks of each cell (pages.Table.marks)
    elements: tuple[bs4.Tag, ...] = ()  # each instance row

    @property
    def where(self) -> str:
        return f"the {self.region_label} GPU table of {WHERE}"

    @overload
    def column(self, label: str, *, required: Literal[True]) -> int: ...
    @overload
    def column(self, label: str, *, required: bool = False) -> int | None: ...
    def column(self, label: str, *, required: bool = False) -> int | None:
        table = pages.Table(self.headers, (), self.where)
        return table.column(label) if required else table.find_column(label)

    @property
    def table(self) -> pages.Table:
        """The table as the page toolkit reads it: cells keyed by label, with footnote marks."""
        return pages.Table(
            self.headers, tuple(cells for _, cells in self.rows), self.where, self.elements, self.marks
        )


def region_slug(label: str) -> str:
    """ "EUROPE" -> "europe"; "North America" -> "north-america"."""
    return "-".join(re.findall(r"[a-z0-9]+", label.lower()))


def footnote_marks(text: str) -> tuple[str, tuple[str, ...]]:
    """ "4^1" -> ("4", ("1",)): the value without its caret footnote marks, and the marks."""
    marks = tuple(_CARET_NOTE.findall(text))
    return pages.clean(_CARET_NOTE.sub("", text)), marks


def _children(tag: bs4.Tag) -> list[bs4.Tag]:
    return [c for c in tag.children if isinstance(c, bs4.Tag)]


def _is_header_row(tag: bs4.Tag) -> bool:
    # header cells are short labels: a block whose one child holds a whole table is not a header
    texts = [t for t in (pages.clean(c.get_text(" ")) for c in _children(tag)) if len(t) <= MAX_LABEL]
    return len(texts) >= len(REQUIRED) and all(
        any(pages.label_matches(t, label) or pages.label_in(t, label) for t in texts) for label in REQUIRED
    )


def _is_inside(tag: bs4.Tag, container: bs4.Tag) -> bool:
    return tag is not container and any(parent is container for parent in tag.parents)


def _row_of(product: bs4.Tag, width: int) -> bs4.Tag | None:
    # the instance row is the nearest ancestor with at least as many children as the header
    return next((p for p in product.parents if isinstance(p, bs4.Tag) and len(_children(p)) >= width), None)


def _cells(row: bs4.Tag, cell_classes: Counter[str]) -> list[bs4.Tag]:
    # desktop cells share a class with the header cells; the mobile duplicates do not
    return [c for c in _children(row) if any(cls in cell_classes for cls in c.get("class") or ())]


def region_tables(root: bs4.Tag) -> list[RegionTable]:
    """Every region's GPU table, in page order; `LayoutChanged` when the page has none."""
    found: list[RegionTable] = []
    region_label: str | None = None
    header: bs4.Tag | None = None
    headers: tuple[str, ...] = ()
    cell_classes: Counter[str] = Counter()
    rows: list[tuple[str, tuple[str, ...]]] = []
    marks: list[tuple[str, ...]] = []
    elements: list[bs4.Tag] = []
    seen: set[int] = set()

    def close() -> None:
        if header is not None and region_label is not None:
            found.append(
                RegionTable(
                    region_slug(region_label),
                    region_label,
                    headers,
                    tuple(rows),
                    tuple(marks),
                    tuple(elements),
                )
            )

    everything = root.find_all(True)
    candidates = [t for t in everything if _is_header_row(t)]
    # the header row itself, not the blocks around it (their one child also "has" every label)
    header_rows = {id(t) for t in candidates if not any(_is_inside(o, t) for o in candidates)}
    for tag in everything:
        if tag.name in ("h1", "h2", "h3", "h4", "h5", "h6") and (
            match := _REGION.match(pages.clean(tag.get_text(" ")))
        ):
            close()
            region_label, header, rows, marks, elements = match.group("name").title(), None, [], [], []
        elif header is None and region_label is not None and id(tag) in header_rows:
            header = tag
            headers = tuple(footnote_marks(c.get_text(" "))[0] for c in _children(tag))
            cell_classes = Counter(cls for c in _children(tag) for cls in c.get("class") or ())
        elif header is not None and tag.get("data-product"):
            row = _row_of(tag, len(headers))
            if row is None or id(row) in seen:
                continue
            seen.add(id(row))
            cells = _cells(row, cell_classes)
            if len(cells) != len(headers):
                raise LayoutChanged(
                    f"instance `{tag['data-product']}` in the {region_label} GPU table of {WHERE} has "
                    f"{len(cells)} cells for {len(headers)} headers {list(headers)}; "
                    "has the page layout changed?"
                )
            rows.append((str(tag["data-product"]), tuple(pages.clean(c.get_text(" ")) for c in cells)))
            marks.append(tuple(pages.cell_marks(c) for c in cells))
            elements.append(row)
    close()
    if not found:
        if root.find(string=re.compile(r"GPU Component", re.I)):
            raise LayoutChanged(
                f"{WHERE} shows the 2023 a-la-carte layout ('GPU Component Cost Per Hour'): a per-GPU "
                "component price without its vCPU and RAM components, from which no instance price can be "
                "computed; see coreweave.legacy_component_rows"
            )
        if region_label is None:
            raise LayoutChanged(f"no `REGION: ...` heading found in {WHERE}; has the page layout changed?")
        raise LayoutChanged(
            f"no GPU table with columns {', '.join(REQUIRED)} found under the REGION headings of {WHERE}; "
            "has the page layout changed?"
        )
    for table in found:
        if not table.rows:
            raise LayoutChanged(f"no instance rows (`data-product` headings) in {table.where}")
    return found


# The page prices each row as a whole instance: a row is an instance with its `GPU Count`, and
# footnote 2 under the North-America table says per-GPU pricing is for inference customers only
# (https://www.coreweave.com/pricing, read 2026-12-01 through the 2026 capture).
PER_INSTANCE = pages.Stated(
    per_gpu=False,
    source="one row per instance with its GPU Count; per-GPU pricing is inference-only (footnote 2)",
    binding=False,  # a header or cell saying "per GPU" is read as such (multiplied by the count)
)


def _price(row: pages.Row, label: str, count: float) -> tuple[float | None, str, str | None, dict[str, Any]]:
    """(price per instance-hour, currency, problem, provider_data extras) for one price cell.

    The cell gives the currency ("$42.00"), the header the unit ("(Per Hour)"), the page the basis
    (`PER_INSTANCE`); a cell or header saying otherwise raises `LayoutChanged`.
    """
    price = row.quote(label, stated=PER_INSTANCE, gpu_count=count or None)
    text = row.get(label) or ""
    if price is None:
        return None, "USD", f"price cell {text!r} under `{row.table.label_of(label)}` is not a price", {}
    amount = price.instance_hour(count)
    extras: dict[str, Any] = {
        **price.flags(),
        "price_unit": price.unit,
        "price_per_gpu_stated": price.per_gpu,
    }
    problem = None if amount > 0 and math.isfinite(amount) else f"non-positive price {text!r}"
    return amount, price.currency, problem, extras


_MOBILE_PAIR = re.compile(r"^(?P<label>[A-Za-z][\w ()-]*?)\s*:\s*(?P<value>[^:]*?)\s*/\s*hour$", re.I)


def mobile_values(row: bs4.Tag, labels: Sequence[str]) -> dict[str, str]:
    """The row's values as its mobile layout labels them: "On-Demand Price: $42.00 / Hour", and
    value/label pairs ("4^1" over "GPU Count"). Keyed by the header label each names."""
    found: dict[str, str] = {}

    def named(text: str) -> str | None:
        exact = [lab for lab in labels if lab and pages.label_matches(lab, text)]
        # "On-Demand Price" names the header "On-Demand Price (Per Hour)", when only that one
        within = [lab for lab in labels if lab and pages.label_in(lab, text)]
        if len(exact) != 1 and len(within) != 1:
            return None
        return (exact or within)[0]

    for tag in row.find_all(True):
        kids = _children(tag)
        texts = [footnote_marks(k.get_text(" "))[0] for k in kids]
        if len(kids) == 2 and not kids[0].find(True) and (label := named(texts[1])) is not None:
            found.setdefault(label, texts[0])
        own = pages.clean(tag.get_text(" "))
        if (match := _MOBILE_PAIR.match(own)) and (label := named(match.group("label"))) is not None:
            found.setdefault(label, pages.clean(match.group("value")))
    return found


def check_mobile(table: RegionTable) -> dict[str, str]:
    """Compare each header label with the labels the same row's mobile layout prints next to its
    values. A column that disagrees in every row that shows it means a header moved over values
    that did not (or the reverse): `LayoutChanged`. A column that disagrees in some rows only is
    those rows' problem (product -> problem), quarantined while the rest loads."""
    problems: dict[str, str] = {}
    checked: Counter[str] = Counter()
    wrong: dict[str, list[str]] = {}
    for (product, cells), element in zip(table.rows, table.elements, strict=False):
        for label, value in mobile_values(element, table.headers).items():
            index = table.headers.index(label)
            desktop = footnote_marks(cells[index])[0] if index < len(cells) else ""
            if not _comparable(value) and not _comparable(desktop):
                continue
            checked[label] += 1
            if _comparable(desktop) != _comparable(value):
                wrong.setdefault(label, []).append(product)
                problems.setdefault(
                    product, f"`{label}` reads {desktop!r} but the row's mobile layout says {value!r}"
                )
        mobile = mobile_values(element, (*KNOWN, ON_DEMAND + " Price", SPOT + " Price"))
        for label in (ON_DEMAND, SPOT):
            if label in mobile and table.column(label) is None:
                raise LayoutChanged(
                    f"instance `{product}` in {table.where} prints a `{label}` but no column is labelled so "
                    f"(headers: {list(table.headers)}); has the page layout changed?"
                )
    for label, products in wrong.items():
        if len(products) == checked[label] and checked[label] > 1:
            raise LayoutChanged(
                f"column `{label}` of {table.where} disagrees with the row's mobile layout in every row "
                f"({', '.join(products[:3])}...): {problems[products[0]]}; has the page layout changed?"
            )
    return problems


def _comparable(text: str) -> str:
    # the mobile price reads "$42.00" where the desktop cell may add a "Contact sales" link
    text = pages.clean(text).lower()
    return "" if pages.is_not_available(text) or pages.is_contact(text) else re.sub(r"\s+", "", text)


def table_items(table: RegionTable) -> Iterator[Offer | Excluded]:
    """The offers (and exclusions) of one region table."""
    model_i = table.column(MODEL, required=True)
    count_i = table.column(COUNT, required=True)
    on_demand_i = table.column(ON_DEMAND, required=True)
    spot_i = table.column(SPOT)
    known = {i for i in (table.column(label) for label in KNOWN) if i is not None}
    left_out: Counter[str] = Counter()
    mismatched = check_mobile(table)
    keyed = table.table.read()
    for (product, cells), row in zip(table.rows, keyed, strict=True):
        count_text, count_marks = footnote_marks(cells[count_i])
        count = pages.parse_count(count_text)

        def value(label: str, parse: Any, cells: tuple[str, ...] = cells) -> Any:
            index = table.column(label)
            return parse(footnote_marks(cells[index])[0]) if index is not None else None

        data: dict[str, Any] = {
            "product": product,
            "gpu_model": cells[model_i],
            "region_label": table.region_label,
            "local_storage_tb": value(STORAGE, pages.parse_gb),
        }
        if count_marks:
            data["gpu_count_footnotes"] = list(count_marks)
        extra = {table.headers[i]: cells[i] for i in range(len(cells)) if i not in known and cells[i]}
        if extra:
            data["extra_columns"] = extra
        tiers: tuple[tuple[int | None, PricingType], ...] = ((on_demand_i, "on_demand"), (spot_i, "spot"))
        for index, pricing_type in tiers:
            if index is None:
                continue
            text = cells[index]
            if pages.is_contact(text):
                left_out[f"{pricing_type}: contact sales"] += 1
                continue
            if pages.is_not_available(text) and text:
                left_out[f"{pricing_type}: not offered ({text})"] += 1
                continue
            price, currency, problem, extras = _price(row, table.headers[index], float(count or 0))
            if count is None or count <= 0:
                problem = problem or f"GPU count {cells[count_i]!r} is not a number"
            problem = problem or mismatched.get(product)
            yield Offer(
                provider=name,
                instance_type=product,
                region=table.region,
                pricing_type=pricing_type,
                price_source="list",  # spot too: a published per-instance rate, not a live market
                price_per_hour=round(price, 6) if price is not None else math.nan,
                currency=currency,
                gpu_name_raw=cells[model_i],
                gpu_count=float(count) if count else math.nan,
                gpu_memory_gb_raw=value(VRAM, pages.parse_gb),
                vcpus=value(VCPUS, pages.parse_vcpus),
                ram_gb=value(RAM, pages.parse_gb),
                provider_data={**data, **extras},
                scope=f"{pricing_type}:{table.region}",
                problem=problem,
            )
    yield from excluded(left_out)


def parse_page(root: bs4.Tag) -> Iterator[Offer | Excluded]:
    for table in region_tables(root):
        yield from table_items(table)


@dataclass(frozen=True)
class ComponentRow:
    """One row of the 2023 page: a GPU component price per GPU-hour (no CPU or RAM in it)."""

    product: str
    gpu_model: str
    vram_gb: float | None
    gpu_component_usd_per_gpu_hour: float | None
    other_cells: tuple[str, ...]  # the 2023 excerpt cuts their header labels off; kept unread


def legacy_component_rows(root: bs4.Tag) -> list[ComponentRow]:
    """The 2023 a-la-carte rows: `data-product` link, VRAM, and the "GPU Component" price.

    The header row is cut off in the only capture we hold, so apart from the product link and the
    one labelled price column ("GPU Component / Cost Per Hour", the last cell), cells are read by
    position: the first numeric cell is VRAM in GB (80 for H100, 16 for RTX A4000).
    """
    if not root.find(string=re.compile(r"GPU Component", re.I)):
        raise LayoutChanged(f"no `GPU Component` price column in the 2023 layout of {WHERE}")
    found: list[ComponentRow] = []
    for link in root.find_all(None, attrs={"data-product": True}):
        row = next((p for p in link.parents if isinstance(p, bs4.Tag) and len(_children(p)) >= 3), None)
        if row is None or len(row.find_all(None, attrs={"data-product": True})) > 1:
            continue  # the excerpt's last row is cut off: its nearest block is the whole table
        cells = [pages.clean(c.get_text(" ")) for c in _children(row)][1:]
        if not cells:
            continue
        money = pages.parse_money(cells[-1], currency="USD")
        found.append(
            ComponentRow(
                product=str(link["data-product"]),
                gpu_model=pages.clean(link.get_text(" ")),
                vram_gb=pages.parse_gb(cells[0]),
                gpu_component_usd_per_gpu_hour=money.amount if money else None,
                other_cells=tuple(cells[1:-1]),
            )
        )
    return found
