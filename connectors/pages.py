"""The pricing-page toolkit: fetch a page, find its tables and cards by meaning, read its values.

Page connectors (https://lambda.ai/pricing, https://nebius.com/prices, ...) code against this module
instead of against a site's markup, so that a redesign breaks in one understood way:

- **Fetching** goes through the one HTTP client (`connectors.http`), so record/replay, the size cap
  and retries apply. `fetch_page` sends the validators kept from the last good run; a 304 comes back
  as a `RawResponse` with status 304, and `unchanged(...)` turns it into `Unchanged` items.
- **Finding** is by what a reader sees: a heading's text, a column label, an ARIA attribute. Never
  by position or by build-generated class names. `find_table` matches header labels in any order,
  tolerant of case, `&nbsp;`, hyphen variants and footnote marks; it reads real `<table>`s, ARIA
  tables, and the `<div>` grids page builders emit (a header row found by its labels, then the
  repeated rows after it). Where a page embeds its data as JSON (`__NEXT_DATA__`, JSON-LD), prefer
  `embedded_json` / `json_ld` to the rendered markup: it changes less often.
- **Reading** values is done by small pure parsers (`parse_money`, `parse_gpu_label`, `parse_gb`,
  ...) that keep what the text states and nothing more: a price with no unit has `unit=None`, and
  the caller, who knows the column it came from, decides.

Anything that matches nothing raises `LayoutChanged` naming the label looked for and `where` (a
human description such as "the GPU table of lambda.ai/pricing"), so a layout change reads as one
and never as an empty catalog.

Reading a table completely (issue 19). `Table.read()` gives `Row`s whose cells are keyed by the
normalized label of their column (a blank header takes the `data-label` its cells carry; a header
contradicting its cells' `data-label` is refused), so no connector indexes a column by position.
`Row.quote(label, stated=...)` reads a price with its whole basis: currency, time unit and per
GPU / per instance, each from the cell, its label or what the page states once (`Stated`, citing
where), and raises `LayoutChanged` naming what it found when one is stated nowhere or two sources
disagree. A `Quote` carries "from", range and footnote flags (`Quote.flags()` is what an offer's
`provider_data` records), and `check_instance_price` refuses a per-GPU price whose value times the
GPU count is not the instance price beside it; `Row.quote` applies it by itself whenever the table
prices a row on both bases (`Table.basis_partner`), so no page can forget it.
`Table.check_price_columns` refuses prices under a label the connector does not read;
`Table.check_names` a name column holding numbers or prices.
`read_pages` is the one parse loop of a single-page connector: a 304 to `fetch_page`'s validators
becomes `Unchanged` for the scopes the page covers.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import bs4

from connectors.base import HOURS_PER_UNIT, LayoutChanged, RawResponse, Unchanged

__all__ = [
    "GpuLabel",
    "Money",
    "Quote",
    "Row",
    "Stated",
    "Table",
    "card_around",
    "cards",
    "cell_marks",
    "check_complete",
    "check_instance_price",
    "clean",
    "conditional_headers",
    "embedded_json",
    "fetch_page",
    "find_objects",
    "find_table",
    "find_tables",
    "is_contact",
    "is_not_available",
    "is_not_modified",
    "json_ld",
    "json_ld_offers",
    "label_basis",
    "label_in",
    "label_matches",
    "parse_count",
    "parse_gb",
    "parse_gpu_label",
    "parse_money",
    "parse_vcpus",
    "price_lines",
    "price_unit",
    "quote",
    "read_pages",
    "section",
    "soup",
    "tables",
    "unchanged",
    "visible_strings",
]

HTML_ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"

# --- fetching ----------------------------------------------------------------------------------


def conditional_headers(kept: Mapping[str, str] | None) -> dict[str, str]:
    """If-None-Match / If-Modified-Since from the headers kept with a previous response."""
    headers: dict[str, str] = {}
    if kept and kept.get("etag"):
        headers["If-None-Match"] = kept["etag"]
    if kept and kept.get("last-modified"):
        headers["If-Modified-Since"] = kept["last-modified"]
    return headers


def fetch_page(client: Any, url: str, previous: Mapping[str, Mapping[str, str]] | None = None) -> RawResponse:
    """GET one page as HTML, revalidating against the validators of the last good run.

    A 304 is returned as is (status 304, empty body); see `is_not_modified` and `unchanged`.
    """
    headers = {"Accept": HTML_ACCEPT, **conditional_headers((previous or {}).get(url))}
    return client.fetch("GET", url, headers=headers)


def is_not_modified(response: RawResponse) -> bool:
    return response.status == 304


def unchanged(response: RawResponse, scopes: Sequence[str]) -> Iterator[Unchanged]:
    """One `Unchanged({"scope": s})` per scope a not-modified page covers."""
    for scope in scopes:
        yield Unchanged({"scope": scope}, reason=f"{response.url} not modified (HTTP 304)")


def soup(response: RawResponse | bytes | str) -> bs4.BeautifulSoup:
    """The page parsed with lxml, decoded by the charset the server declared (else sniffed).

    A fetched page that opens `<html>` and never closes it was cut off in transit: lxml would close
    the open tags silently and hand back the tables before the cut, a partial price list that could
    pass for a smaller catalog. It raises `LayoutChanged` instead (excerpts without `<html>` pass).
    """
    if isinstance(response, RawResponse):
        check_complete(response)
        match = re.search(r"charset=[\"']?([\w.:-]+)", response.content_type or "", re.IGNORECASE)
        encoding = match.group(1) if match else None
        return bs4.BeautifulSoup(response.read(), "lxml", from_encoding=encoding)
    return bs4.BeautifulSoup(response, "lxml")


def check_complete(response: RawResponse) -> None:
    """Refuse a page that opens `<html>` but ends before `</html>` (see `soup`)."""
    body = response.read()
    head, tail = body[:4096], body[-4096:]
    if re.search(rb"<html[\s>]", head, re.I) and not re.search(rb"</html\s*>", tail, re.I):
        raise LayoutChanged(
            f"{response.url}: the page ends before `</html>` after {len(body)} bytes; "
            "truncated? refusing a partial price list"
        )


# --- text --------------------------------------------------------------------------------------

# NBSP, narrow/thin/figure spaces, ideographic space: all read as a space
_SPACES = re.compile(r"[\u00a0\u2000-\u200a\u202f\u205f\u3000\s]+")
_ZERO_WIDTH = re.compile(r"[\u200b-\u200d\u2060\ufeff\u00ad]")
# footnote marks: *, daggers, section sign, superscript digits, and a trailing "[1]"
_FOOTNOTES = re.compile(r"[*\u2020\u2021\u00a7\u00b9\u00b2\u00b3\u2070\u2074-\u2079]+|\[\d{1,2}\]\s*$")
_HYPHENS = re.compile(r"[\u2010-\u2015\u2212\ufe63\uff0d]")


def clean(text: str | None) -> str:
    """Page text as a reader sees it: one space between words, no footnote marks or invisibles."""
    if not text:
        return ""
    text = _ZERO_WIDTH.sub("", text)
    text = _HYPHENS.sub("-", text)
    text = _FOOTNOTES.sub("", text)
    return _SPACES.sub(" ", text).strip()


def _norm_label(text: str) -> str:
    # punctuation separates words the way a space does: "On-demand" ~ "on demand" ~ "PRICE/GPU/HR"
    return " ".join(re.sub(r"[^\w$€£%]+", " ", clean(text).lower()).split())


def label_matches(text: str, label: str) -> bool:
    """Whether `text` reads as `label`: case, whitespace, punctuation and footnotes aside."""
    return _norm_label(text) == _norm_label(label) != ""


def label_in(text: str, label: str) -> bool:
    """Whether `label` appears in `text` as whole words ("On-demand" in "On-demand, GPU-hour")."""
    needle = _norm_label(label)
    return bool(needle) and f" {needle} " in f" {_norm_label(text)} "


def _text(node: bs4.PageElement) -> str:
    return clean(node.get_text(" ") if isinstance(node, bs4.Tag) else str(node))


# --- tables ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """One table of a page: cleaned header and cell texts, in the page's column order.

    Cells are laid out as a reader sees them: a cell spanning columns or rows (`colspan`,
    `rowspan`) is repeated in each, and a header of several rows names a column by its labels top
    to bottom ("Price per GPU-hour Spot"). A nested table's text stays out of its outer cell.

    `elements` holds each row's source element (a `<tr>`, or a grid row `<div>`), for the rare
    value that is not in a cell's text (a `data-*` attribute, a tag inside a cell).
    """

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    where: str
    elements: tuple[bs4.Tag, ...] = field(default=(), compare=False, repr=False)
    # the footnote marks `clean` took out of each cell ("0.74**" -> "**"), row by row; () if unknown
    marks: tuple[tuple[str, ...], ...] = field(default=(), compare=False, repr=False)

    def find_column(self, *labels: str) -> int | None:
        """Index of the first header reading exactly as any label, else containing one; or None."""
        for test in (label_matches, label_in):
            for index, header in enumerate(self.headers):
                if any(test(header, label) for label in labels):
                    return index
        return None

    def column(self, *labels: str) -> int:
        """Index of the header matching any of `labels`; `LayoutChanged` when none does."""
        index = self.find_column(*labels)
        if index is None:
            wanted = " / ".join(f"`{label}`" for label in labels)
            raise LayoutChanged(
                f"{wanted} column not found in {self.where} (headers: {list(self.headers)}); "
                "has the page layout changed?"
            )
        return index

    def get(self, row: Sequence[str], *labels: str, default: str | None = None) -> str | None:
        """The cell of `row` under the header matching `labels`, or `default` if no header does."""
        index = self.find_column(*labels)
        if index is None or index >= len(row):
            return default
        return row[index]

    def records(self) -> list[dict[str, str]]:
        """Rows as header -> cell dicts (an empty header is keyed by its position)."""
        keys = [header or f"#{i}" for i, header in enumerate(self.headers)]
        return [dict(zip(keys, row, strict=False)) for row in self.rows]

    @property
    def keys(self) -> tuple[str, ...]:
        """Each column's normalized label ("price gpu hr"); a blank or repeated one by position."""
        seen: Counter[str] = Counter(_norm_label(h) for h in self.headers)
        return tuple(
            key if key and seen[key] == 1 else f"#{i}"
            for i, key in enumerate(_norm_label(h) for h in self.headers)
        )

    def read(self) -> list[Row]:
        """The rows as `Row`s: cells keyed by normalized label, with their footnote marks."""
        keys = self.keys
        found: list[Row] = []
        for i, cells in enumerate(self.rows):
            marks = self.marks[i] if i < len(self.marks) else ()
            found.append(
                Row(
                    cells=dict(zip(keys, cells, strict=False)),
                    marks={k: m for k, m in zip(keys, marks, strict=False) if m},
                    element=self.elements[i] if i < len(self.elements) else None,
                    table=self,
                )
            )
        return found

    def check_price_columns(self, *known: str) -> None:
        """Refuse a column that holds prices under a label none of `known` reads as: a price
        column renamed or added is a price no connector reads, so the table is not what it was."""
        for index, header in enumerate(self.headers):
            if any(label_matches(header, k) or label_in(header, k) for k in known):
                continue
            cells = [row[index] for row in self.rows if index < len(row)]
            if any(_LABEL_CURRENCY.search(c) and re.search(r"\d", c) for c in cells):
                raise LayoutChanged(
                    f"column `{header}` of {self.where} holds prices ({cells[0]!r}, ...) under a label "
                    f"not read as one of {list(known)}; has the page layout changed?"
                )

    def check_names(self, *labels: str) -> None:
        """Refuse a name column (a GPU model, an instance name) whose cells are all bare numbers,
        prices or lead forms ("Contact sales"): its label now sits over another column's values."""
        index = self.column(*labels)
        cells = [row[index] for row in self.rows if index < len(row) and row[index]]
        if cells and all(_is_number_or_price(c) or is_contact(c) or is_not_available(c) for c in cells):
            raise LayoutChanged(
                f"column `{self.headers[index]}` of {self.where} should name what is priced but holds "
                f"{cells[:3]}; has the page layout changed?"
            )

    def basis_partner(self, index: int, per_gpu: bool) -> int | None:
        """The column pricing what column `index` prices, maybe on the other basis: it reads as
        column `index`'s label once the basis words are set aside ("PRICE/INSTANCE/HR" beside
        "PRICE/GPU/HR"; a "Spot ... per GPU" column is another price, not the on-demand one on
        another basis) and its label states the other basis or none (then the page's applies).
        None when no such column holds prices, or two do (ambiguous)."""
        other = [
            i
            for i, h in enumerate(self.headers)
            if i != index
            and label_basis(h)[1] is not per_gpu
            and _residual(h) == _residual(self.headers[index])
            and _holds_prices(self, i)
        ]
        return other[0] if len(other) == 1 else None

    def label_of(self, *labels: str) -> str:
        """The header as printed of the column matching `labels` (`LayoutChanged` when none)."""
        return self.headers[self.column(*labels)]


# Labels of a column holding a row's GPU count (matched whole: "GPU model" is not one).
_COUNT_LABELS = ("GPU Count", "GPUs", "GPU", "# GPUs", "# of GPUs", "Number of GPUs", "No. of GPUs")
# Words that say a price's basis (per GPU, per instance) rather than which price it is.
_BASIS_WORDS = frozenset(
    {"per", "a", "an", "gpu", "gpus", "instance", "instances", "node", "server", "machine", "vm", "total"}
)


def _residual(label: str) -> tuple[str, ...]:
    """A label's words with the basis words set aside: which price it is, not on what basis."""
    return tuple(word for word in _norm_label(label).split() if word not in _BASIS_WORDS)


def _holds_prices(table: Table, index: int) -> bool:
    cells = [row[index] for row in table.rows if index < len(row)]
    return any(_LABEL_CURRENCY.search(c) and re.search(r"\d", c) for c in cells)


def _is_number_or_price(text: str) -> bool:
    priced = bool(_LABEL_CURRENCY.search(text) and re.search(r"\d", text))
    return priced or bool(re.fullmatch(r"[\d\s.,/+x×%-]*", text))


@dataclass(frozen=True)
class Row:
    """One row of a `Table`, its cells keyed by normalized label (see `Table.keys`).

    Look cells up by label, never by position: `row.get("GPU model")`, `row.quote("On-demand",
    stated=...)`. A reordered table reads the same; a renamed label raises `LayoutChanged` (through
    `require`) or reads as absent (`get`).
    """

    cells: Mapping[str, str]
    marks: Mapping[str, str]
    element: bs4.Tag | None
    table: Table = field(compare=False, repr=False)

    def key(self, *labels: str) -> str | None:
        index = self.table.find_column(*labels)
        return None if index is None else self.table.keys[index]

    def get(self, *labels: str, default: str | None = None) -> str | None:
        """The cell under the header matching `labels`, or `default` when no header does."""
        key = self.key(*labels)
        return default if key is None else self.cells.get(key, default)

    def require(self, *labels: str) -> str:
        """The cell under the header matching `labels`; `LayoutChanged` naming them when none does."""
        return self.cells.get(self.table.keys[self.table.column(*labels)], "")

    def quote(
        self, *labels: str, stated: Stated | None = None, gpu_count: float | None = None
    ) -> Quote | None:
        """The price under the column matching `labels`, read with its basis (see `quote`).

        When the table also prices the row on the other basis (a per-GPU column beside a
        per-instance one, `Table.basis_partner`), the two must agree (`check_instance_price`)
        for the GPU count: `gpu_count` where the caller knows it, else the row's GPU-count
        column, else the whole number of GPUs the two prices imply (a per-GPU price over the
        instance's must be one). Every connector reading prices through here gets the check.
        """
        index = self.table.column(*labels)
        price = self._quote_at(index, stated)
        if price is not None:
            self._check_basis(index, price, stated or Stated(), gpu_count)
        return price

    def _quote_at(self, index: int, stated: Stated | None) -> Quote | None:
        key = self.table.keys[index]
        return quote(
            self.cells.get(key, ""),
            self.table.headers[index],
            stated=stated,
            where=f"column `{self.table.headers[index]}` of {self.table.where}",
            marks=self.marks.get(key, ""),
        )

    def gpu_count(self) -> int | None:
        """The row's GPU count from a column labelled as one (`GPU Count`, `GPUs`, ...), or None."""
        for index, header in enumerate(self.table.headers):
            if any(label_matches(header, label) for label in _COUNT_LABELS):
                return parse_count(self.cells.get(self.table.keys[index]))
        return None

    def _check_basis(self, index: int, price: Quote, stated: Stated, gpu_count: float | None) -> None:
        partner = self.table.basis_partner(index, price.per_gpu)
        if partner is None:
            return
        # a partner whose label states its basis is read by it (the page's statement is about the
        # price it reads); one whose label states none takes the page's, like any price there
        says = label_basis(self.table.headers[partner])[1]
        try:
            other = self._quote_at(partner, replace(stated, per_gpu=None) if says is not None else stated)
        except LayoutChanged:
            return  # a cell this row cannot read is no second statement of its price
        if other is None or other.per_gpu == price.per_gpu:
            return
        per_gpu, instance = (price, other) if price.per_gpu else (other, price)
        count = gpu_count or self.gpu_count()
        if not count and per_gpu.currency == instance.currency and per_gpu.per_hour() > 0:
            count = max(1, round(instance.per_hour() / per_gpu.per_hour()))
        headers = self.table.headers
        where = f"columns `{headers[index]}` and `{headers[partner]}` of {self.table.where}"
        check_instance_price(per_gpu, instance, float(count or 1), where=where)


def _cells(row: bs4.Tag) -> list[bs4.Tag]:
    return [c for c in row.find_all(["th", "td"], recursive=False)]


def _cell_text(cell: bs4.Tag) -> str:
    # a layout table's cell holding a price table reads as its own text, so that the layout
    # table never matches the price table's labels
    if cell.find("table") is None:
        return _text(cell)
    own = copy.copy(cell)
    for nested in own.find_all("table"):
        nested.decompose()
    return _text(own)


def _span(cell: bs4.Tag, name: str, limit: int) -> int:
    try:
        return max(1, min(int(str(cell.get(name, "1"))), limit))
    except ValueError:
        return 1


def _by_column(rows: Sequence[bs4.Tag]) -> list[list[tuple[str, str]]]:
    """Each row's (cell text, footnote marks) by column, as a reader sees them: a colspan repeats
    a cell across, a rowspan down (so `Table.get` finds the value under its header)."""
    lines: list[list[tuple[str, str]]] = []
    below: dict[int, tuple[tuple[str, str], int]] = {}  # column -> (a cell spanning down, rows left)

    def fill(line: list[tuple[str, str]]) -> None:
        while len(line) in below:
            value, left = below.pop(len(line))
            if left > 1:
                below[len(line)] = (value, left - 1)
            line.append(value)

    for row in rows:
        line: list[tuple[str, str]] = []
        for cell in _cells(row):
            fill(line)
            value, down = (_cell_text(cell), cell_marks(cell)), _span(cell, "rowspan", len(rows))
            for _ in range(_span(cell, "colspan", 1000)):  # 1000: the HTML limit
                if down > 1:
                    below[len(line)] = (value, down - 1)
                line.append(value)
        fill(line)
        lines.append(line)
    return lines


_MARK_CHARS = re.compile(
    r"[*\u2020\u2021\u00a7\u00b9\u00b2\u00b3\u2070\u2074-\u2079]+|\[\d{1,2}\]\s*$|\^\s*\d{1,2}"
)


def cell_marks(cell: bs4.PageElement) -> str:
    """The footnote marks of a cell ("$0.74**" -> "**", "$2.99<sup>1</sup>" -> "1"), "" if none."""
    if not isinstance(cell, bs4.Tag):
        return "".join(m.group(0).strip() for m in _MARK_CHARS.finditer(str(cell)))
    own = cell
    if cell.find("table") is not None:
        own = copy.copy(cell)
        for nested in own.find_all("table"):
            nested.decompose()
    raw = _ZERO_WIDTH.sub("", own.get_text(" "))
    found = [m.group(0).replace(" ", "") for m in _MARK_CHARS.finditer(raw)]
    found += [
        clean(sup.get_text())
        for sup in own.find_all("sup")
        if re.fullmatch(r"\d{1,2}", clean(sup.get_text()))
    ]
    return "".join(found)


def _in_own_footer(row: bs4.Tag, table: bs4.Tag) -> bool:
    foot = row.find_parent("tfoot")
    return foot is not None and foot.find_parent("table") is table


def _html_table(table: bs4.Tag, where: str) -> Table | None:
    rows = [tr for tr in table.find_all("tr") if tr.find_parent("table") is table]
    # a <tfoot> row ("Prices exclude VAT", a total) describes the table; it is no offer
    rows = [tr for tr in rows if not _in_own_footer(tr, table)]
    if not rows:
        return None
    head = table.find("thead")
    header_rows: list[bs4.Tag] = []
    if head is not None and head.find_parent("table") is table:
        header_rows = [tr for tr in rows if tr.find_parent("thead") is head]
    # no (or an empty) <thead>: the first row is the header
    header_rows = header_rows or rows[:1]
    body = [tr for tr in rows if tr not in header_rows]
    head_marked, body_marked = _by_column(header_rows), _by_column(body)
    head_lines = [[text for text, _ in line] for line in head_marked]
    body_lines = [[text for text, _ in line] for line in body_marked]
    width = max(len(line) for line in head_lines + body_lines)
    # a header of several rows ("Price" over "On-demand" and "Spot") names each column by its
    # labels top to bottom; a row that is one cell across the whole table is a title, not a label
    labels = [line for line in head_lines if len(set(line)) > 1 or len(line) < width] or head_lines[-1:]
    headers = tuple(
        " ".join(dict.fromkeys(line[i] for line in labels if i < len(line) and line[i]))
        for i in range(max(len(line) for line in labels))
    )
    _check_data_labels(headers, body, where)
    headers = tuple(header or _data_label(body_lines, body, i) for i, header in enumerate(headers))
    return Table(
        headers=headers,
        rows=tuple(tuple(line) for line in body_lines),
        where=where,
        elements=tuple(body),
        marks=tuple(tuple(marks for _, marks in line) for line in body_marked),
    )


def _check_data_labels(headers: Sequence[str], body: Sequence[bs4.Tag], where: str) -> None:
    """Refuse a table whose header names a column otherwise than its own cells do: responsive
    tables repeat each header in the cells' `data-label`, and when every cell of a column says
    one label and the header another, one of them has moved (reading either could misprice)."""
    for index, header in enumerate(headers):
        label = _data_label([[""]], body, index)
        if header and label and not label_matches(header, label):
            raise LayoutChanged(
                f"column `{header}` of {where} holds cells labelled `{label}` (data-label); the header "
                "and its cells disagree, has the page layout changed?"
            )


def _data_label(lines: Sequence[Sequence[str]], body: Sequence[bs4.Tag], index: int) -> str:
    """A label for a blank header: the `data-label` every body cell of that column carries
    (Lambda's plan cells: `<th data-label="Plan">`), else "". Responsive tables repeat the
    header there for small screens, so it is the page's own label, not a guess."""
    labels: set[str] = set()
    for row in body:
        cells = _cells(row)
        spans = any(_span(c, "colspan", 1000) > 1 or _span(c, "rowspan", 1000) > 1 for c in cells)
        if index >= len(cells) or spans:
            return ""  # spans shift positions: no safe way to line a cell up with the header
        labels.add(clean(str(cells[index].get("data-label") or "")))
    return labels.pop() if len(labels) == 1 and lines else ""


def _aria_table(table: bs4.Tag, where: str) -> Table | None:
    rows = table.find_all(None, attrs={"role": "row"})
    if not rows:
        return None

    def cells(row: bs4.Tag) -> list[bs4.Tag]:
        return row.find_all(None, attrs={"role": ["columnheader", "rowheader", "cell", "gridcell"]})

    first = rows[0]
    headers = tuple(_text(c) for c in cells(first))
    body = rows[1:]
    return Table(
        headers,
        tuple(tuple(_text(c) for c in cells(r)) for r in body),
        where,
        tuple(body),
        tuple(tuple(cell_marks(c) for c in cells(r)) for r in body),
    )


def tables(root: bs4.Tag, *, where: str) -> list[Table]:
    """Every `<table>` and ARIA `role=table|grid` under `root`, in document order."""
    found: list[Table] = []
    for node in root.find_all(True):
        if node.name == "table":
            table = _html_table(node, where)
        elif node.get("role") in ("table", "grid"):
            table = _aria_table(node, where)
        else:
            continue
        if table is not None:
            found.append(table)
    # renumber so that "table 2" means the second table, not the second element
    return [
        Table(t.headers, t.rows, f"{where} table {i}", t.elements, t.marks)
        for i, t in enumerate(found, start=1)
    ]


def _matches_all(headers: Sequence[str], labels: Sequence[str]) -> bool:
    return all(any(label_matches(h, lab) or label_in(h, lab) for h in headers) for lab in labels)


def _signature(tag: bs4.Tag) -> tuple[str, tuple[str, ...]]:
    return tag.name, tuple(sorted(tag.get("class") or ()))


def _children(tag: bs4.Tag) -> list[bs4.Tag]:
    return [c for c in tag.children if isinstance(c, bs4.Tag)]


def _grid_tables(root: bs4.Tag, required: Sequence[str], where: str) -> list[Table]:
    """`<div>` grids: a header row found by its labels, then the repeated rows that follow it.

    Page builders render tables as nested `<div>`s. The header row is an element whose child
    elements read as every required label; its data rows are the elements after it, in the
    nearest enclosing container that has any, with as many children and one shared shape (tag and
    classes: the same as the header row's when there are such, else the most common one).
    """
    found: list[tuple[tuple[str, ...], list[bs4.Tag]]] = []
    accepted: list[bs4.Tag] = []
    # deepest first (reverse document order visits descendants before their ancestors): a block
    # holding the header row also "has" every label, in one child, and must not win over it
    for header_row in reversed(root.find_all(True)):
        header_cells = _children(header_row)
        if len(header_cells) < 2 or any(_is_inside(a, header_row) for a in accepted):
            continue
        headers = tuple(_text(c) for c in header_cells)
        if not _matches_all(headers, required):
            continue
        rows = _grid_rows(header_row, len(header_cells))
        if rows:
            accepted.append(header_row)
            found.append((headers, rows))
    return [
        Table(
            headers,
            tuple(tuple(_text(c) for c in _children(r)) for r in rows),
            f"{where} grid {number}",
            tuple(rows),
            tuple(tuple(cell_marks(c) for c in _children(r)) for r in rows),
        )
        for number, (headers, rows) in enumerate(reversed(found), start=1)
    ]


def _grid_rows(header_row: bs4.Tag, width: int) -> list[bs4.Tag]:
    after: set[int] = {id(e) for e in header_row.find_all_next(True)}
    inside = {id(e) for e in header_row.find_all(True)}
    container = header_row.parent
    while isinstance(container, bs4.Tag):
        candidates = [
            e
            for e in container.find_all(True)
            if id(e) in after and id(e) not in inside and len(_children(e)) == width
        ]
        if candidates:
            own = [e for e in candidates if _signature(e) == _signature(header_row)]
            if own:
                return own
            shape, _ = Counter(_signature(e) for e in candidates).most_common(1)[0]
            return [e for e in candidates if _signature(e) == shape]
        container = container.parent
    return []


def find_tables(
    root: bs4.Tag, *, required: Sequence[str], where: str, optional: Sequence[str] = ()
) -> list[Table]:
    """Every table whose headers match EVERY required label (any order); `LayoutChanged` if none.

    `optional` labels are not required; they are named in the error to help whoever reads it.
    """
    found = [t for t in tables(root, where=where) if _matches_all(t.headers, required)]
    if not found:
        found = _grid_tables(root, required, where)
    if not found:
        seen = [list(t.headers) for t in tables(root, where=where)]
        wanted = ", ".join(required)
        extra = f" (and optionally {', '.join(optional)})" if optional else ""
        raise LayoutChanged(
            f"no table with columns {wanted}{extra} found in {where}; found tables with headers "
            f"{seen}; has the page layout changed?"
        )
    return found


def find_table(root: bs4.Tag, *, required: Sequence[str], where: str, optional: Sequence[str] = ()) -> Table:
    """The first table whose headers match every required label (see `find_tables`)."""
    return find_tables(root, required=required, where=where, optional=optional)[0]


# --- sections and cards -------------------------------------------------------------------------

_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


def _heading_level(tag: bs4.Tag) -> int | None:
    if tag.name in _HEADINGS:
        return int(tag.name[1])
    if tag.get("role") == "heading":
        try:
            return int(str(tag.get("aria-level", "2")))
        except (TypeError, ValueError):
            return 2
    return None


def _is_heading(tag: bs4.Tag, max_level: int) -> bool:
    level = _heading_level(tag)
    return level is not None and level <= max_level


def _contains_heading(tag: bs4.Tag, max_level: int, other_than: bs4.Tag) -> bool:
    if tag is not other_than and _is_heading(tag, max_level):
        return True
    return any(t is not other_than and _is_heading(t, max_level) for t in tag.find_all(True))


def section(root: bs4.Tag, heading: str, *, where: str) -> bs4.Tag:
    """The content under the heading that reads as `heading`, up to the next heading as high.

    Looks for h1-h6 and `role=heading` elements first, then any element whose `aria-label` reads
    as `heading` (a labelled tab panel, say: that element is the section). The section is the
    largest block around the heading that holds no other heading of its level; when heading and
    content are siblings in one flat list, a new `<section>` holding copies of them.
    """
    for tag in root.find_all(True):
        level = _heading_level(tag)
        if level is None or not label_matches(_text(tag), heading):
            continue
        block = tag
        while block is not root and isinstance(block.parent, bs4.Tag):
            if _contains_heading(block.parent, level, other_than=tag):
                break
            block = block.parent
        following: list[bs4.Tag] = []
        for sibling in block.next_siblings:
            if isinstance(sibling, bs4.Tag) and _contains_heading(sibling, level, other_than=tag):
                break
            if isinstance(sibling, bs4.Tag):
                following.append(sibling)
        if block is not tag and not following:
            return block
        wrapper = bs4.BeautifulSoup("<section></section>", "lxml").section
        assert wrapper is not None
        for part in (block, *following):
            wrapper.append(copy.copy(part))
        return wrapper
    for tag in root.find_all(None, attrs={"aria-label": True}):
        if label_matches(str(tag.get("aria-label")), heading):
            return tag
    headings = [_text(t) for t in root.find_all(True) if _heading_level(t) is not None]
    raise LayoutChanged(
        f"heading `{heading}` not found in {where} (headings: {headings[:20]}); has the page layout changed?"
    )


def cards(root: bs4.Tag, *, label: str, where: str) -> list[bs4.Tag]:
    """The repeated blocks that each hold one occurrence of `label` (a price card, a GPU tile).

    Each text that contains `label` is taken up to its largest enclosing element that holds no
    other occurrence; those elements, in document order, are the cards.
    """
    hits = [
        s.parent
        for s in root.find_all(string=True)
        if isinstance(s.parent, bs4.Tag)
        and s.parent.name not in ("script", "style", "template")
        and label_in(str(s), label)
    ]
    found: list[bs4.Tag] = []
    for hit in hits:
        card = hit
        while isinstance(card.parent, bs4.Tag) and card.parent is not root:
            occurrences = sum(1 for other in hits if other is card.parent or _is_inside(other, card.parent))
            if occurrences > 1:
                break
            card = card.parent
        if not any(card is f for f in found):
            found.append(card)
    # a second price inside a card ("$2/hr ... $16/hr for 8") stops at a block inside that card
    found = [card for card in found if not any(_is_inside(card, other) for other in found)]
    if not found:
        raise LayoutChanged(f"no card with the text `{label}` found in {where}; has the page layout changed?")
    return found


_NOT_TEXT = frozenset({"script", "style", "template", "head", "title", "noscript"})


def price_lines(
    root: bs4.Tag, accept: Callable[[bs4.Tag, str], bool], *, max_chars: int = 60
) -> list[bs4.Tag]:
    """The innermost short elements whose whole text `accept(tag, text)` takes for a price line
    (a price split over spans, "$ / 2.19 / /h", is read as one line by their common parent).

    For pages that print one price per card with no column label to look for: each line's card
    is then `card_around(line, lines, root)`. A line longer than `max_chars` is a paragraph that
    mentions a price, not a price line.
    """
    found: list[bs4.Tag] = []
    for string in root.find_all(string=True):
        tag = string.parent
        if not isinstance(tag, bs4.Tag) or tag.name in _NOT_TEXT or not str(string).strip():
            continue
        while isinstance(tag, bs4.Tag) and tag is not root:
            text = clean(tag.get_text(" "))
            if len(text) > max_chars:
                break
            if accept(tag, text):
                if not any(tag is f for f in found):
                    found.append(tag)
                break
            tag = tag.parent
    # a line that holds another (a price line inside a price block) gives way to the inner one
    return [tag for tag in found if not any(other is not tag and _is_inside(other, tag) for other in found)]


def card_around(line: bs4.Tag, lines: Sequence[bs4.Tag], root: bs4.Tag) -> bs4.Tag:
    """The largest block around one of `lines` (see `price_lines`) that holds no other of them."""
    card = line
    while isinstance(card.parent, bs4.Tag) and card.parent is not root:
        if any(other is not line and _is_inside(other, card.parent) for other in lines):
            break
        card = card.parent
    return card


def visible_strings(tag: bs4.Tag) -> list[str]:
    """The texts a reader sees under `tag` (no script or style), in document order."""
    return [
        str(s) for s in tag.find_all(string=True) if s.parent is not None and s.parent.name not in _NOT_TEXT
    ]


def _is_inside(tag: bs4.Tag, container: bs4.Tag) -> bool:
    return any(parent is container for parent in tag.parents)


# --- embedded data -------------------------------------------------------------------------------


def _as_soup(doc: bs4.Tag | RawResponse | bytes | str) -> bs4.Tag:
    return doc if isinstance(doc, bs4.Tag) else soup(doc)


def embedded_json(doc: bs4.Tag | RawResponse | bytes | str) -> Any | None:
    """The data a page embeds for its own scripts: Next.js `__NEXT_DATA__`, else the first
    `<script type="application/json" id=...>` data island; None when there is none (or it does not
    parse: the rendered markup is then the fallback)."""
    page = _as_soup(doc)
    scripts = [page.find("script", id="__NEXT_DATA__")]
    scripts += page.find_all("script", attrs={"type": "application/json", "id": True})
    for script in scripts:
        if script is None:
            continue
        try:
            return json.loads(script.string or script.get_text())
        except (json.JSONDecodeError, TypeError):
            continue
    return None


def json_ld(doc: bs4.Tag | RawResponse | bytes | str) -> list[Any]:
    """Every `application/ld+json` block, parsed; a block that does not parse is skipped."""
    blocks: list[Any] = []
    for script in _as_soup(doc).find_all("script", attrs={"type": re.compile(r"ld\+json", re.I)}):
        try:
            blocks.append(json.loads(script.string or script.get_text()))
        except (json.JSONDecodeError, TypeError):
            continue
    return blocks


def _walk(data: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(data, Mapping):
        yield data
        for value in data.values():
            yield from _walk(value)
    elif isinstance(data, list):
        for value in data:
            yield from _walk(value)


def find_objects(data: Any, predicate: Callable[[Mapping[str, Any]], bool]) -> list[Mapping[str, Any]]:
    """Every JSON object (at any depth) for which `predicate` holds, in document order."""
    return [obj for obj in _walk(data) if predicate(obj)]


def json_ld_offers(doc: bs4.Tag | RawResponse | bytes | str) -> list[dict[str, Any]]:
    """schema.org `Offer`s of every JSON-LD block, each with the `name` of the product it prices.

    Returns dicts with `name`, `price`, `priceCurrency` and, when stated, `unitText` (from a
    `priceSpecification`), so a connector can prefer them to the rendered cards.
    """
    offers: list[dict[str, Any]] = []
    for block in json_ld(doc):
        # the offers of an `AggregateOffer` price the product around it: they inherit its name
        names: dict[int, Any] = {}
        for product in find_objects(block, lambda o: "offers" in o):
            name = product.get("name") or names.get(id(product))
            items = product["offers"]
            for offer in items if isinstance(items, list) else [items]:
                if not isinstance(offer, Mapping):
                    continue
                names[id(offer)] = offer.get("name") or name
                spec = offer.get("priceSpecification")
                spec = spec[0] if isinstance(spec, list) and spec else spec
                spec = spec if isinstance(spec, Mapping) else {}
                offers.append(
                    {
                        "name": offer.get("name") or name,
                        "price": offer.get("price", spec.get("price", offer.get("lowPrice"))),
                        "priceCurrency": offer.get("priceCurrency", spec.get("priceCurrency")),
                        "unitText": spec.get("unitText") or spec.get("unitCode"),
                        "sku": offer.get("sku") or product.get("sku"),
                    }
                )
    return offers


# --- values --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Money:
    """A price as a page states it. `unit` and `per_gpu` are None when the text does not say."""

    amount: float
    currency: str  # ISO code; "" when the text states none and the caller gave no default
    unit: str | None  # "second" | "minute" | "hour" | "day" | "week" | "month" | "year"
    per_gpu: bool | None
    is_from: bool


_SYMBOLS = {
    "$": "USD",
    "US$": "USD",
    "€": "EUR",
    "£": "GBP",
    "¥": "JPY",
    "₹": "INR",
    "C$": "CAD",
    "A$": "AUD",
}
_CODES = ("USD", "EUR", "GBP", "CAD", "AUD", "JPY", "INR", "CHF", "SEK", "NOK", "DKK", "PLN", "SGD")
_CONTACT = re.compile(
    r"\b(contact\s+(us|sales|our\s+sales)|talk\s+to\s+(us|sales|an?\s+expert)|request\s+(a\s+)?quote|"
    r"get\s+(a\s+)?quote|custom\s+pricing|call\s+us|let'?s\s+talk|inquire|enquire)\b",
    re.I,
)
_UNAVAILABLE = re.compile(
    r"^(n/?a|none|tbd|tba|-+|—|–|coming\s+soon|sold\s+out|unavailable|not\s+available|waitlist)$", re.I
)
_FROM = re.compile(r"\b(from|starting\s+(at|from)|starts\s+at|as\s+low\s+as|min(imum)?\.?)\b|^≥|^>=", re.I)
# "- $3.00" / "to €2,00" right after a price: the upper end of a range; not "- 8x H100" (a count)
_RANGE_TAIL = re.compile(
    r"\s*(?:-|to\b)\s*(?:US\$|C\$|A\$|[$€£¥₹])?\s*\d+(?:[.,]\d+)*(?!\s*[x×]|[\d.,])", re.I
)
# "1,234.50" / "1.234,50" (grouped thousands) or "1,55" / "0.99" / "12"
_NUMBER = r"[1-9]\d{0,2}(?:[,.]\d{3})+(?!\d)(?:[.,]\d+)?|\d+(?:[.,]\d+)?"
_MONEY = re.compile(
    rf"(?<![\w.,])(?P<neg>-)?\s*(?P<pre>US\$|C\$|A\$|[$€£¥₹]|\b(?:{'|'.join(_CODES)})(?![a-z]))?\s*(?P<num>{_NUMBER})"
    rf"\s*(?P<post>[$€£]|(?<![a-z])(?:{'|'.join(_CODES)})\b)?",
    re.I,
)
# what may stand between a price and its time unit: "/", "per ", "a ", "GPU-", "/GPU/", "instance-"
_UNIT_LEAD = r"(?:/|\bper\s+|\ban?\s+|\b(?:gpu|instance|node)[\s-])\s*(?:gpu[\s/-]*)?"
_UNITS = (
    ("second", rf"{_UNIT_LEAD}(?:s|sec|secs|second|seconds)\b"),
    ("minute", rf"{_UNIT_LEAD}(?:min|mins|minute|minutes)\b"),
    ("hour", rf"{_UNIT_LEAD}(?:h|hr|hrs|hour|hours)\b|\bhourly\b"),
    ("day", rf"{_UNIT_LEAD}(?:d|day|days)\b|\bdaily\b"),
    ("week", rf"{_UNIT_LEAD}(?:wk|week|weeks)\b|\bweekly\b"),
    ("month", rf"{_UNIT_LEAD}(?:mo|mos|mon|month|months)\b|\bmonthly\b"),
    ("year", rf"{_UNIT_LEAD}(?:yr|year|years)\b|\byearly\b|\bannual(?:ly)?\b"),
)
_PER_GPU = re.compile(r"(?:/|\bper\s+|\ban?\s+)\s*gpu\b|\bgpu[\s-]*(?:h|hr|hour|hours|mo|month)\b", re.I)
_PER_INSTANCE = re.compile(
    r"(?:/|\bper\s+|\ban?\s+)\s*(?:instance|node|server|machine|vm|cluster|system)\b"
    r"|\b(?:instance|node|server)[\s-]*(?:h|hr|hour|hours|mo|month)\b",
    re.I,
)


def is_contact(text: str) -> bool:
    """ "Contact sales", "Contact us", "Talk to sales", "Request quote": not a price, a lead form."""
    return bool(_CONTACT.search(clean(text)))


def is_not_available(text: str) -> bool:
    """ "N/A", "—", "-", "Coming soon", "Sold out", or empty: no price offered in this cell."""
    return bool(_UNAVAILABLE.match(clean(text))) or clean(text) == ""


def _to_float(number: str) -> float | None:
    digits = re.sub(r"[\s\u00a0\u202f]", "", number)
    if "," in digits and "." in digits:
        # the separator that comes last is the decimal one: "1,234.50" / "1.234,50"
        if digits.rfind(",") > digits.rfind("."):
            digits = digits.replace(".", "").replace(",", ".")
        else:
            digits = digits.replace(",", "")
    elif "," in digits:
        # a comma before exactly three digits groups thousands ("$1,234"); otherwise it is decimal
        # ("0,125" is a per-minute rate: no one groups thousands after a lone zero)
        groups = digits.split(",")
        if len(groups) > 2 or (all(len(g) == 3 for g in groups[1:]) and groups[0].strip("0")):
            digits = digits.replace(",", "")
        else:
            digits = digits.replace(",", ".")
    elif digits.count(".") > 1:
        digits = digits.replace(".", "")
    try:
        return float(digits)
    except ValueError:
        return None


def _currency(symbol: str | None) -> str | None:
    if not symbol:
        return None
    symbol = symbol.strip()
    return _SYMBOLS.get(symbol) or _SYMBOLS.get(symbol.upper()) or symbol.upper()


def parse_money(text: str | None, *, currency: str | None = None) -> Money | None:
    """A price with its currency, time unit, per-GPU flag and "from" flag, as the text states them.

    None when the text is not a price ("Contact sales", "N/A", "—", "", words without a number);
    tell those apart with `is_contact` / `is_not_available`. A contact line that also states a
    priced number ("from $1.99/hr, contact sales for volume") is that price. A range ("$2-$3/hr")
    is its low end with `is_from=True`. `currency` is the default for a bare number ("2.49" under
    a "Price ($)" header); without it such a price has `currency=""`.
    """
    text = clean(text)
    if not text or is_not_available(text):
        return None
    match = next((m for m in _MONEY.finditer(text) if m.group("pre") or m.group("post")), None)
    if is_contact(text) and match is None:
        return None  # a lead form; "from $1.99/hr, contact sales for volume" still states a price
    match = match or _MONEY.search(text)
    if match is None:
        return None
    amount = _to_float(match.group("num"))
    if amount is None:
        return None
    if match.group("neg"):
        amount = -amount  # kept: a negative published price is a wrong row, for the caller to flag
    code = _currency(match.group("pre")) or _currency(match.group("post")) or (currency or "")
    unit, per_gpu = price_unit(text[match.end() :])
    # a range ("$2.00 - $3.00/hr") is its low end, which only some buyers pay: a "from" price
    is_from = bool(_FROM.search(text[: match.start()]) or _RANGE_TAIL.match(text, match.end()))
    return Money(amount, code, unit, per_gpu, is_from)


def price_unit(text: str | None) -> tuple[str | None, bool | None]:
    """The time unit and per-GPU flag a price text or a column header states.

    "/GPU/hr" -> ("hour", True); "On-demand, GPU-hour" -> ("hour", True); "per month" ->
    ("month", None); "per instance-hour"... -> ("hour", False); (None, None) when it says nothing.
    """
    text = clean(text)
    # the unit stated first is the price's: "/hr (billed per second)", "/mo ($2.00/hr)"
    stated = [(m.start(), name) for name, pattern in _UNITS if (m := re.search(pattern, text, re.I))]
    unit = min(stated)[1] if stated else None
    per_gpu: bool | None = None
    if _PER_GPU.search(text):
        per_gpu = True
    elif _PER_INSTANCE.search(text):
        per_gpu = False
    return unit, per_gpu


@dataclass(frozen=True)
class GpuLabel:
    """A GPU label split into count, name and memory. `platform` keeps an "HGX"/"DGX" prefix."""

    count: int | None
    name: str
    vram_gb: float | None
    platform: str | None = None


_COUNT_PREFIX = re.compile(r"^\(?(\d{1,3})\s*[x×]\)?\s+|^\(?(\d{1,3})\s*[x×]\)?(?=[A-Za-z])", re.I)
_COUNT_SUFFIX = re.compile(r"\s*(?:[x×]\s*(\d{1,3})|\((\d{1,3})\s*[x×]?\))$", re.I)
_VENDOR = re.compile(r"^(nvidia|amd|intel)\b\s*", re.I)
_PLATFORM = re.compile(r"\b(HGX|DGX)\b\s*", re.I)
_MEMORY = re.compile(
    r"(\d+(?:[.,]\d+)?)\s*(TB|TiB|GB|GiB|G|MB|MiB)\b(?:\s*(?:HBM\w*|GDDR\w*|VRAM|memory))?", re.I
)


def parse_gpu_label(text: str) -> GpuLabel:
    """ "8x H100 SXM5 80GB" -> (8, "H100 SXM5 80GB", 80); "HGX B200" -> (None, "B200", None, "HGX").

    The vendor word ("NVIDIA") and "HGX"/"DGX" are dropped from `name`; form factor words (SXM,
    PCIe, NVL) and the memory stay in it, because they tell GPUs apart.
    """
    label = clean(text)
    count: int | None = None
    if match := _COUNT_PREFIX.match(label):
        count = int(match.group(1) or match.group(2))
        label = label[match.end() :]
    elif match := _COUNT_SUFFIX.search(label):
        count = int(match.group(1) or match.group(2))
        label = label[: match.start()]
    platform_match = _PLATFORM.search(label)
    platform = platform_match.group(1).upper() if platform_match else None
    name = _PLATFORM.sub("", _VENDOR.sub("", label.strip())).strip(" ,-")
    vram = None
    if memory := _MEMORY.search(name):
        vram = parse_gb(memory.group(0))
    return GpuLabel(count, " ".join(name.split()), vram, platform)


def _single_number(text: str | None) -> float | None:
    text = clean(str(text) if text is not None else "")
    if re.search(r"\d\s*(?:-|–|to)\s*\d", text):
        return None  # a range ("8-40") is not one value
    match = re.search(r"\d+(?:[,.]\d+)*", text)
    return _to_float(match.group(0)) if match else None


def parse_count(text: str | int | None) -> int | None:
    """ "8", "8x", "x8", "8 GPUs" -> 8; None when absent or a range."""
    if isinstance(text, int):
        return text
    value = _single_number(text)
    return int(value) if value is not None and value == int(value) else None


_GB = re.compile(rf"({_NUMBER})\s*(TB|TiB|GB|GiB|G|MB|MiB)\b", re.I)
_GB_FACTORS = {"tb": 1000.0, "tib": 1024.0, "gb": 1.0, "gib": 1.0, "g": 1.0, "mb": 1e-3, "mib": 1 / 1024}


def parse_gb(text: str | float | None) -> float | None:
    """ "80GB", "80 GB", "48 GiB" -> 80, 80, 48 (GiB kept as the stated number); "1.5 TB" -> 1500;
    "1,024 GiB" -> 1024; a bare number is taken as GB; None when absent or a range."""
    if isinstance(text, int | float):
        return float(text)
    text = clean(text)
    if re.search(r"\d\s*(?:-|–|to)\s*\d", text):
        return None
    if memory := _GB.search(text):
        value = _to_float(memory.group(1))
        return None if value is None else value * _GB_FACTORS[memory.group(2).lower()]
    # no unit: only a bare number is taken (as GB), not a number inside a name ("H100")
    return _to_float(text) if re.fullmatch(_NUMBER, text) else None


def parse_vcpus(text: str | float | None) -> float | None:
    """ "208 vCPUs", "26 vCPU", "104 cores", "208" -> the number; None when absent or a range."""
    if isinstance(text, int | float):
        return float(text)
    return _single_number(text)


# --- prices with their basis ---------------------------------------------------------------------

_LABEL_CURRENCY = re.compile(rf"(US\$|C\$|A\$|[$€£¥₹])|\b({'|'.join(_CODES)})\b", re.I)


@dataclass(frozen=True)
class Stated:
    """What a page says once for all its prices, outside a price cell and its column label.

    `source` quotes or names where the page says it ("the card's other columns say 'per GPU'",
    "footnote 2: per-GPU pricing is for inference customers only"): a connector states a basis
    only where the page does, and says where. Anything left None must be read from the cell or
    its label, or `quote` refuses.
    """

    currency: str | None = None
    unit: str | None = None
    per_gpu: bool | None = None
    source: str = ""
    # False: what the page's layout implies (one row per instance) rather than says in words;
    # it fills in what the cell and label leave unsaid, and gives way where they say otherwise
    binding: bool = True


@dataclass(frozen=True)
class Quote:
    """A price cell read completely: the amount as printed and the basis it is printed in.

    `amount` is in `currency` per `unit`, for one GPU when `per_gpu`, else for the whole instance.
    `basis` says where each part was read ("cell", "label" or "page: <source>").
    """

    text: str
    amount: float
    currency: str
    unit: str
    per_gpu: bool
    is_from: bool
    is_range: bool
    footnote: str
    basis: Mapping[str, str]

    def per_hour(self) -> float:
        """The amount per hour (per GPU when `per_gpu`)."""
        return self.amount / HOURS_PER_UNIT[self.unit]

    def require_per_gpu(self, text: str, where: str) -> Quote:
        """This quote, which must be per GPU: on a page whose row is one GPU model sold in several
        counts, no row names an instance size a per-instance price could belong to."""
        if not self.per_gpu:
            raise LayoutChanged(
                f"price {text!r} {where} is per instance, but the page names no instance size for a "
                "row; has the page layout changed?"
            )
        return self

    def instance_hour(self, gpu_count: float) -> float:
        """The price of an instance of `gpu_count` GPUs per hour, in `currency`."""
        return self.per_hour() * (gpu_count if self.per_gpu else 1.0)

    def flags(self) -> dict[str, Any]:
        """What an offer's `provider_data` carries about how the price was printed."""
        data: dict[str, Any] = {
            "price_text": self.text,
            "price_basis": f"{self.currency} per {'GPU' if self.per_gpu else 'instance'}-{self.unit}",
        }
        if self.is_from or self.is_range:
            data["price_is_from"] = True  # a lower bound ("from $X", the low end of a range)
        if self.is_range:
            data["price_is_range"] = True
        if self.footnote:
            data["price_footnote"] = self.footnote
        return data


_LABEL_FROM = re.compile(r"\b(from|starting|starts|as\s+low\s+as|min(imum)?)\b", re.I)


def label_basis(label: str) -> tuple[str | None, bool | None, str | None]:
    """(time unit, per GPU, currency) a column label states: "Price/GPU/hr ($)" -> ("hour", True, "USD")."""
    unit, per_gpu = price_unit(label)
    currencies = {_currency(m.group(0)) for m in _LABEL_CURRENCY.finditer(clean(label))}
    currency = currencies.pop() if len(currencies) == 1 else None
    if len(currencies) > 1:
        currency = "?"
    return unit, per_gpu, currency


def _settle(
    name: str, found: Sequence[tuple[str, Any]], text: str, where: str, binding: bool = True
) -> tuple[Any, str]:
    """The one value every source that states `name` agrees on, and where it was read. The last
    source is the page's; when not `binding` it only fills in what the others leave unsaid."""
    stated = [(source, value) for source, value in found if value is not None]
    if not binding and len(stated) > 1 and stated[-1][0] == found[-1][0]:
        stated = stated[:-1]
    if not stated:
        raise LayoutChanged(
            f"price {text!r} in {where}: no {name} stated in the cell, its label or the page; "
            "refusing to guess (has the page layout changed?)"
        )
    values = {value for _, value in stated}
    if len(values) > 1 or "?" in values:
        said = ", ".join(f"{source} says {value}" for source, value in stated)
        raise LayoutChanged(
            f"price {text!r} in {where}: the {name} contradicts itself ({said}); has the page layout changed?"
        )
    return stated[0][1], stated[0][0]


def quote(
    text: str | None, label: str = "", *, stated: Stated | None = None, where: str, marks: str = ""
) -> Quote | None:
    """A price cell read with its currency, time unit and per-GPU basis, from the cell, its column
    label and what the page states once (`stated`), which must agree.

    None when the cell is not a price (contact form, "N/A", words without a number): tell those
    apart with `is_contact` / `is_not_available`. `LayoutChanged`, naming what was found, when a
    price's currency, unit or basis is stated nowhere, or stated twice differently (a "$" cell
    under a "(EUR)" label, "/GPU-hr" under "per instance", "/mo" under "per hour"). A "from"
    price, a range (its low end) and footnote marks (`marks`, as `Table.marks` keeps them) are
    flagged on the `Quote`.
    """
    stated = stated or Stated()
    money = parse_money(text)
    if money is None:
        return None
    text = clean(text)
    unit_l, per_gpu_l, currency_l = label_basis(label)
    page = f"page: {stated.source or 'stated by the connector'}"
    currency, currency_from = _settle(
        "currency",
        [("cell", money.currency or None), ("label", currency_l), (page, stated.currency)],
        text,
        where,
        stated.binding,
    )
    unit, unit_from = _settle(
        "time unit",
        [("cell", money.unit), ("label", unit_l), (page, stated.unit)],
        text,
        where,
        stated.binding,
    )
    per_gpu, per_from = _settle(
        "price basis (per GPU or per instance)",
        [("cell", money.per_gpu), ("label", per_gpu_l), (page, stated.per_gpu)],
        text,
        where,
        stated.binding,
    )
    if unit not in HOURS_PER_UNIT:
        raise LayoutChanged(f"price {text!r} in {where} is per {unit}, a unit no offer can use")
    # parse_money marks a range's low end as "from"; a "from" word says it of a single price
    said_from = bool(_FROM.search(text)) or bool(_LABEL_FROM.search(clean(label)))
    is_range = money.is_from and not _FROM.search(text)
    return Quote(
        text=text,
        amount=money.amount,
        currency=currency,
        unit=unit,
        per_gpu=bool(per_gpu),
        is_from=said_from,
        is_range=is_range,
        footnote="".join(dict.fromkeys(marks)) if marks else "",
        basis={"currency": currency_from, "unit": unit_from, "per": per_from},
    )


def check_instance_price(per_gpu: Quote, instance: Quote, gpu_count: float, *, where: str) -> None:
    """Refuse a per-GPU price whose value times the GPU count is not the instance price beside it.

    Pages print prices to the cent, so a per-GPU price may be off by half a cent per GPU and the
    instance price by half a cent: anything further apart means one of the two columns is not
    what its label says.
    """
    if per_gpu.currency != instance.currency:
        raise LayoutChanged(
            f"{where}: per-GPU price {per_gpu.text!r} is in {per_gpu.currency}, the instance price "
            f"{instance.text!r} in {instance.currency}; has the page layout changed?"
        )
    expected, found = per_gpu.instance_hour(gpu_count), instance.instance_hour(gpu_count)
    tolerance = (0.005 * gpu_count + 0.005) / HOURS_PER_UNIT[per_gpu.unit]
    if abs(expected - found) > tolerance:
        raise LayoutChanged(
            f"{where}: per-GPU price {per_gpu.text!r} x {gpu_count:g} GPUs is {expected:.4f}/hour, but "
            f"the instance price {instance.text!r} is {found:.4f}/hour; a column is not what its label "
            "says (has the page layout changed?)"
        )


# --- one page, fetched and revalidated ----------------------------------------------------------


def read_pages(
    responses: Sequence[RawResponse],
    scopes: Sequence[str | Mapping[str, str]],
    read: Callable[[RawResponse], Iterator[Any]],
) -> Iterator[Any]:
    """The parse loop every single-page connector shares: a not-modified answer (HTTP 304 to the
    validators `fetch_page` sent) becomes one `Unchanged` per scope it covers (a scope is an
    offer scope name, "on_demand:global", or a mapping of Offer fields); any other is `read`."""
    for response in responses:
        if is_not_modified(response):
            for scope in scopes:
                match = scope if isinstance(scope, Mapping) else {"scope": scope}
                yield Unchanged(match, reason=f"{response.url} not modified (HTTP 304)")
            continue
        yield from read(response)
