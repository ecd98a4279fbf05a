"""A page that prices a row both per GPU and per instance must agree with itself (issue 19 item 1).

No page we hold prints both (their real captures: lambda, coreweave, nebius, hyperstack, crusoe,
verda, fluidstack price one basis; paperspace prints cards), so `Row.quote` checks any table that
does by itself (`Table.basis_partner`, `check_instance_price`). Each table page's real capture and
replay body gets a second price column beside its first one, on the other basis, in three forms:
the right values (the page still reads the same, or refuses the column it does not know), values
that do not match (x 1.3: no whole GPU count), and the two labels traded over unmoved values.
Neither of the last two may publish (refused, or every row quarantined with the refusal as its
problem). Captures are read from ../shared/data/raw (skipped when absent).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable

import bs4
import pytest

from connectors import pages
from connectors.base import LayoutChanged
from tests import page_variants as pv
from tests.test_page_variants import PAGES, _basis_words, _headers, _none, _price_columns, body_of, sources

# A row of a page that names no instance size gets a per-instance price of this many GPUs: any
# whole count makes the pair consistent (the check then infers it from the two prices).
ASSUMED_GPUS = 8


def _other_basis(header: str, per_gpu: bool) -> str:
    """The label of `header`'s price on the other basis: per instance for a per-GPU price."""
    if per_gpu:
        if pages.price_unit(header)[1]:
            return _basis_words(header, "instance")
        return f"{header} per instance"
    # a label stating no basis prices what the page's layout says (per instance on these pages)
    if re.search(r"(?i)\bprice\b", header):
        return re.sub(r"(?i)\bprice\b", "Price per GPU", header, count=1)
    return f"{header} per GPU"


def add_other_basis(factor: float = 1.0, traded: bool = False) -> Callable[[bs4.BeautifulSoup, object], None]:
    """Beside each grid's first price column, the same prices on the other basis (x `factor`);
    `traded`: the two labels then trade places over their values."""

    def edit(doc: bs4.BeautifulSoup, page) -> None:  # type: ignore[no-untyped-def]
        for grid in page.grids(doc):
            labels = _headers(grid)
            columns = _price_columns(grid)
            if not columns:
                continue
            col = columns[0]
            per_gpu = bool(pages.price_unit(labels[col])[1]) or page.count is _none
            header = copy.copy(grid.header[col])
            pv.set_text(header, _other_basis(labels[col], per_gpu))
            grid.header[col].insert_after(header)
            if traded:
                first = pv.text(grid.header[col])
                pv.set_text(grid.header[col], pv.text(header))
                pv.set_text(header, first)
            for row in grid.rows:
                if col >= len(row):
                    continue
                count = page.count(grid, row, labels) or ASSUMED_GPUS
                cell = copy.copy(row[col])
                if cell.get("data-label"):  # a responsive cell names its column: this one's
                    cell["data-label"] = pv.text(header) if not traded else pv.text(grid.header[col])
                    if traded:
                        row[col]["data-label"] = pv.text(header)
                to = "instance" if per_gpu else "gpu"
                pv.edit_strings(cell, lambda v, to=to: _basis_words(v, to))
                pv.scale_amounts(cell, (count if per_gpu else 1 / count) * factor)
                row[col].insert_after(cell)

    return edit


TABLE_PAGES = [s for s in sources() if not PAGES[s[0]].cards]


def outcome(slug: str, kind: str, where: str, edit: Callable[[bs4.BeautifulSoup, object], None]) -> str:
    page = PAGES[slug]
    body = body_of(page, kind, where)
    baseline = list(page.module.parse([pv.response(page.module.PAGE_URL, body)]))
    doc = bs4.BeautifulSoup(body, "lxml")
    edit(doc, page)
    parsed = pv.parse(page.module.parse, pv.response(page.module.PAGE_URL, str(doc).encode()))
    return pv.outcome(baseline, parsed)


@pytest.mark.parametrize(("slug", "kind", "where"), TABLE_PAGES, ids=lambda v: str(v).split("/")[0])
def test_prices_on_both_bases_that_disagree_are_refused(slug: str, kind: str, where: str) -> None:
    # refused: the page fails with LayoutChanged; quarantined: each row carries the refusal as
    # its problem (verda, fluidstack, crusoe read a price cell at a time) and keeps its last price
    assert outcome(slug, kind, where, add_other_basis(factor=1.3)) in ("refused", "quarantined")
    assert outcome(slug, kind, where, add_other_basis(traded=True)) in ("refused", "quarantined")


@pytest.mark.parametrize(("slug", "kind", "where"), TABLE_PAGES, ids=lambda v: str(v).split("/")[0])
def test_prices_on_both_bases_that_agree_read_the_same_or_refuse_the_column(
    slug: str, kind: str, where: str
) -> None:
    assert outcome(slug, kind, where, add_other_basis()) in ("same", "refused")


def test_pages_that_read_prices_beside_theirs_accept_the_agreeing_pair() -> None:
    """Where a page tolerates a price column it does not read, the check lets the right one pass:
    the agreeing pair is not refused merely for being there."""
    accepted = set()
    for slug, kind, where in TABLE_PAGES:
        try:
            if outcome(slug, kind, where, add_other_basis()) == "same":
                accepted.add(slug)
        except pytest.skip.Exception:
            continue
    assert {"lambdalabs", "coreweave"} <= accepted, accepted


# --- the check on a table of our own -------------------------------------------------------------

TABLE = """<table><tr><th>Plan</th><th>GPUs</th><th>{a}</th><th>{b}</th><th>Spot price/GPU/hr</th></tr>
<tr><td>8x H100</td><td>8</td><td>{x}</td><td>{y}</td><td>$1.10</td></tr></table>"""


def read(a: str, b: str, x: str, y: str, label: str, gpu_count: float | None = None) -> pages.Quote | None:
    doc = pages.soup(TABLE.format(a=a, b=b, x=x, y=y))
    (table,) = pages.tables(doc, where="a test table")
    (row,) = table.read()
    return row.quote(label, gpu_count=gpu_count)


def test_a_per_gpu_price_must_match_the_instance_price_in_the_same_row() -> None:
    price = read("Price/GPU/hr", "Price/instance/hr", "$2.99", "$23.92", "Price/GPU/hr")
    assert price is not None and price.per_gpu and price.amount == 2.99
    assert read("Price/GPU/hr", "Price/instance/hr", "$2.99", "$23.92", "Price/instance/hr") is not None
    with pytest.raises(LayoutChanged, match=r"x 8 GPUs is 23\.9200/hour, but the instance price '\$20\.00'"):
        read("Price/GPU/hr", "Price/instance/hr", "$2.99", "$20.00", "Price/GPU/hr")


def test_labels_traded_over_the_two_prices_are_refused() -> None:
    with pytest.raises(LayoutChanged, match="a column is not what its label says"):
        read("Price/instance/hr", "Price/GPU/hr", "$2.99", "$23.92", "Price/GPU/hr")


def test_without_a_count_column_the_prices_must_imply_a_whole_gpu_count() -> None:
    html = TABLE.replace("<th>GPUs</th>", "<th>Region</th>").replace("<td>8</td>", "<td>us</td>")
    doc = pages.soup(html.format(a="Price/GPU/hr", b="Price/instance/hr", x="$2.99", y="$23.92"))
    (row,) = pages.tables(doc, where="t")[0].read()
    assert row.quote("Price/GPU/hr") is not None  # 23.92 / 2.99 = 8 GPUs
    doc = pages.soup(html.format(a="Price/GPU/hr", b="Price/instance/hr", x="$2.99", y="$25.00"))
    (row,) = pages.tables(doc, where="t")[0].read()
    with pytest.raises(LayoutChanged, match="x 8 GPUs"):  # 8.36 GPUs: no instance has that
        row.quote("Price/GPU/hr")


def test_the_caller_s_gpu_count_wins() -> None:
    with pytest.raises(LayoutChanged, match="x 4 GPUs"):
        read("Price/GPU/hr", "Price/instance/hr", "$2.99", "$23.92", "Price/GPU/hr", gpu_count=4)


def test_another_price_on_the_other_basis_is_no_partner() -> None:
    """A spot per-GPU column is not the on-demand price per GPU: no check between them."""
    doc = pages.soup(TABLE.format(a="Region", b="On-demand price/instance/hr", x="us", y="$23.92"))
    (table,) = pages.tables(doc, where="t")
    assert table.basis_partner(table.column("On-demand price/instance/hr"), per_gpu=False) is None
    (row,) = table.read()
    assert row.quote("On-demand price/instance/hr") is not None
    assert row.gpu_count() == 8
