"""Variants of a pricing page, made with bs4 from a real capture or a replay body at test time.

Each variant changes one thing a page redesign changes, the way the page itself would print it:

    reordered     every table's columns in reverse order (header and rows alike)
    relabelled    labels written differently (capitals, NBSP, a footnote mark), or one label
                  replaced by an unknown word, or two labels trading places over unmoved values
    re-based      per GPU <-> per instance (values multiplied or divided by the row's GPU count),
                  per hour -> per month (x 730) or per minute (/ 60), labels and cells alike
    re-currencied every "$" printed as "€" (and "USD" as "EUR")
    from / range  "from $X", "$X - $Y" and "$X*" in every price cell

Nothing here is a capture: captures are read from ../shared/data/raw when the test runs, and the
replay bodies are our own fixtures. `outcome` compares a variant's parse with the original's and
names the result: `same`, `converted` (same amounts in the new currency), `flagged`, `refused`
(LayoutChanged) or `WRONG: ...` (a price published that the page does not state).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import bs4

from connectors import pages
from connectors.base import LayoutChanged, Offer, RawResponse

HOURS_PER_MONTH = 730.0  # connectors.base.HOURS_PER_UNIT["month"]


@dataclass
class Grid:
    """One table of a page as DOM cells: the header cells, then each data row's cells."""

    header: list[bs4.Tag]
    rows: list[list[bs4.Tag]]
    context: bs4.Tag  # the element around it (a tab panel, a card), for a row's GPU count


def text(tag: bs4.Tag) -> str:
    return pages.clean(tag.get_text(" "))


def html_grids(doc: bs4.BeautifulSoup) -> list[Grid]:
    """Every `<table>`: the first row is the header (as on every page here)."""
    found = []
    for table in doc.find_all("table"):
        trs = [tr for tr in table.find_all("tr") if tr.find_parent("table") is table]
        if len(trs) < 2:
            continue
        cells = [[c for c in tr.find_all(["th", "td"], recursive=False)] for tr in trs]
        found.append(Grid(cells[0], cells[1:], table))
    return found


def div_grids(doc: bs4.BeautifulSoup, required: Sequence[str]) -> list[Grid]:
    """`<div>` grids found by the toolkit; the header row is the element whose children read as
    the grid's headers."""
    found = []
    for table in pages.find_tables(doc, required=required, where="variant"):
        rows = [[c for c in r.children if isinstance(c, bs4.Tag)] for r in table.elements]
        header_row = next(
            e
            for e in reversed(table.elements[0].find_all_previous(True))
            if [text(c) for c in e.children if isinstance(c, bs4.Tag)] == list(table.headers)
        )
        header = [c for c in header_row.children if isinstance(c, bs4.Tag)]
        found.append(Grid(header, rows, table.elements[0].parent or doc))
    return found


def coreweave_grids(doc: bs4.BeautifulSoup) -> list[Grid]:
    """CoreWeave's `.table-v2` blocks: the desktop cells (`.table-v2-cell`) of each `.table-grid`."""
    found = []
    for block in doc.select(".table-v2"):
        grids = [
            [c for c in g.children if isinstance(c, bs4.Tag) and "table-v2-cell" in (c.get("class") or ())]
            for g in block.select(".table-grid")
        ]
        if len(grids) > 1:
            found.append(Grid(grids[0], grids[1:], block))
    return found


# --- editing the DOM -----------------------------------------------------------------------------


def _permute(cells: Sequence[bs4.Tag], order: Sequence[int]) -> None:
    """Put `cells[order[i]]` where `cells[i]` was (the cells share a parent; others stay put)."""
    marks = []
    for cell in cells:
        mark = bs4.NavigableString("")
        cell.insert_before(mark)
        marks.append(mark)
    moved = [cells[i].extract() for i in range(len(cells))]
    for mark, index in zip(marks, order, strict=True):
        mark.replace_with(moved[index])


def reorder(grids: Sequence[Grid]) -> None:
    for grid in grids:
        order = list(reversed(range(len(grid.header))))
        for cells in (grid.header, *grid.rows):
            if len(cells) == len(order):
                _permute(cells, order)


def set_text(cell: bs4.Tag, value: str) -> None:
    """Replace a header cell's words, keeping its innermost element (and its classes)."""
    inner = cell
    while len([c for c in inner.children if isinstance(c, bs4.Tag)]) == 1 and not inner.find(
        string=True, recursive=False
    ):
        inner = next(c for c in inner.children if isinstance(c, bs4.Tag))
    inner.clear()
    inner.append(value)


def edit_strings(cell: bs4.Tag, edit: Callable[[str], str]) -> None:
    for node in list(cell.find_all(string=True)):
        if isinstance(node, bs4.Comment) or node.parent.name in ("script", "style"):
            continue
        new = edit(str(node))
        if new != str(node):
            node.replace_with(new)


_AMOUNT = re.compile(r"(?<=[$€])(\s*)(\d[\d,]*(?:\.\d+)?)")


def scale_amounts(cell: bs4.Tag, factor: float) -> None:
    """Multiply every amount printed after a currency sign in the cell; a sign in its own element
    ("$" then "0.76") has its amount in the next text node."""
    pending = False
    for node in list(cell.find_all(string=True)):
        value = str(node)
        if pending and (m := re.match(r"\s*(\d[\d,]*(?:\.\d+)?)", value)):
            value = (
                value[: m.start(1)] + _money(float(m.group(1).replace(",", "")) * factor) + value[m.end(1) :]
            )
            pending = False
        value = _AMOUNT.sub(lambda m: m.group(1) + _money(float(m.group(2).replace(",", "")) * factor), value)
        pending = pending or bool(re.search(r"[$€]\s*$", value))
        if value != str(node):
            node.replace_with(value)


def _money(amount: float) -> str:
    # cents where they are exact, else as many decimals as a per-minute price needs
    if round(amount, 2) == round(amount, 8):
        return f"{amount:,.2f}"
    return f"{amount:,.6f}".rstrip("0")


def is_price_cell(cell: bs4.Tag) -> bool:
    return bool(re.search(r"[$€]\s*\d|[$€]\s*$", cell.get_text(" "))) or bool(
        re.search(r"[$€]", cell.get_text(" ")) and re.search(r"\d", cell.get_text(" "))
    )


# --- outcomes ------------------------------------------------------------------------------------


def response(url: str, body: bytes, fetched_at: datetime | None = None) -> RawResponse:
    return RawResponse(
        url=url,
        method="GET",
        status=200,
        fetched_at=fetched_at or datetime(2026, 12, 1, 6, tzinfo=UTC),
        content_type="text/html; charset=utf-8",
        body=body,
    )


def published(items: Sequence[object]) -> dict[tuple[str, ...], tuple[float, str, float, dict]]:
    """Offers that would publish (no `problem`): key -> (price, currency, GPUs, provider_data)."""
    found = {}
    for item in items:
        if isinstance(item, Offer) and item.problem is None:
            found[tuple(str(k) for k in item.key)] = (
                item.price_per_hour,
                item.currency,
                item.gpu_count,
                dict(item.provider_data),
            )
    return found


def parse(
    parse_fn: Callable[[Sequence[RawResponse]], Iterator[object]], r: RawResponse
) -> list[object] | str:
    try:
        return list(parse_fn([r]))
    except LayoutChanged as exc:
        return f"refused: {exc}"


def _close(a: float, b: float) -> bool:
    # variants print amounts to the cent: half a cent of an 8-GPU per-month price per hour
    return math.isclose(a, b, rel_tol=1e-3, abs_tol=0.006)


def outcome(
    baseline: Sequence[object],
    variant: list[object] | str,
    *,
    currency: str | None = None,
    flag: str | None = None,
    refuse: bool = False,
    relabelled: bool = False,
    both_prices: bool = False,
) -> str:
    """`same` / `converted` / `flagged` / `refused` / `WRONG: why` (see the module docstring).

    `refuse`: the variant states prices no offer can carry (per instance, for rows that name no
    instance size), so anything but `refused` publishes a wrong price. `relabelled`: two labels
    traded places over unmoved values, so the page now states other specs (an offer may be named
    differently) but no other price: the prices, GPU counts and currencies must be the same."""
    if isinstance(variant, str):
        return "refused"
    if both_prices:
        # two price labels trading places over unmoved values reads exactly like a page that
        # changed both prices; only a second labelling of the values (CoreWeave's mobile
        # layout, Lambda's data-label) can tell, and those pages refuse above
        return "indistinguishable (two price labels traded places)"
    if refuse and published(variant):
        return "WRONG: per-instance prices of rows with no stated GPU count were published"
    before, after = published(baseline), published(variant)
    if not after and before:
        if any(isinstance(item, Offer) for item in variant):
            return "quarantined"  # every row flagged: the warehouse keeps the last good prices
        return "WRONG: no offer published and no LayoutChanged (the provider would vanish silently)"
    if relabelled and set(after) != set(before):

        def prices(found: dict) -> list[tuple[str, float, str, float]]:
            return sorted((k[-1], round(v[0], 4), v[1], v[2]) for k, v in found.items())

        if prices(after) == prices(before):
            return "renamed (other specs stated, same prices)"
        return f"WRONG: prices differ after labels traded places: {prices(after)[:3]} vs {prices(before)[:3]}"
    extra = sorted(set(after) - set(before))
    if extra:
        return f"WRONG: offers the page does not state: {extra[:3]}"
    lost = sorted(set(before) - set(after))
    flagged = {tuple(str(k) for k in i.key) for i in variant if isinstance(i, Offer) and i.problem}
    if lost and set(lost) <= flagged:
        return "quarantined"  # those rows are flagged wrong: the warehouse keeps their last good price
    if lost:
        return f"WRONG: offers lost without LayoutChanged: {lost[:3]}"
    for key, (price, cur, count, _) in before.items():
        new_price, new_cur, new_count, data = after[key]
        want = currency or cur
        if new_cur != want:
            return f"WRONG: {key} in {new_cur}, the page shows {want}"
        if not _close(new_price, price) or new_count != count:
            return f"WRONG: {key} at {new_price} for {new_count} GPUs, the page says {price} for {count}"
        if flag and not data.get(flag) and not data.get("price_from_footnote"):
            return f"WRONG: {key} not flagged `{flag}`"
    if flag:
        return "flagged"
    return "converted" if currency else "same"


def variant_copy(doc: bs4.BeautifulSoup) -> bs4.BeautifulSoup:
    return copy.copy(doc)
