"""Every page connector over variants of its real capture and of its replay body (issue 19 item 1).

A variant is the page as it would read after one kind of redesign (tests/page_variants.py): its
columns reordered, its labels rewritten, swapped or replaced, its prices re-based (per GPU <->
per instance, per hour -> per month or minute) or shown in euros, or printed as "from", ranges or
footnoted. Each must parse to the same prices (converted or flagged where the page says so) or
raise `LayoutChanged`; none may publish a price the page does not state.

Real captures are read from ../shared/data/raw (skipped when absent) and changed here with bs4;
the replay bodies are our own fixtures in tests/fixtures. Which captures are verbatim and which
had their markup regenerated is in ../shared/data/raw/PROVENANCE.md (see the module `SOURCES`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType

import bs4
import pytest

from connectors import (
    coreweave,
    crusoe,
    fluidstack,
    hyperstack,
    lambdalabs,
    nebius,
    pages,
    paperspace,
    together,
    verda,
)
from tests import page_variants as pv
from tests.conftest import REPO, SHARED_RAW

REPLAY = REPO / "tests" / "replay"


def _lambda_count(grid: pv.Grid, row: Sequence[bs4.Tag], labels: Sequence[str]) -> int | None:
    panel = grid.context.find_parent(attrs={"role": "tabpanel"})
    tab = panel.find_parent().find_previous(id=panel.get("aria-labelledby")) if panel is not None else None
    tab = tab or (grid.context.find_previous(id=panel.get("aria-labelledby")) if panel is not None else None)
    return pages.parse_count(pv.text(tab)) if tab is not None else None


def _count_in(label: str) -> Callable[[pv.Grid, Sequence[bs4.Tag], Sequence[str]], int | None]:
    def count(grid: pv.Grid, row: Sequence[bs4.Tag], labels: Sequence[str]) -> int | None:
        index = next((i for i, lab in enumerate(labels) if pages.label_matches(lab, label)), None)
        return None if index is None else pages.parse_count(re.sub(r"\^\d+", "", pv.text(row[index])))

    return count


def _none(grid: pv.Grid, row: Sequence[bs4.Tag], labels: Sequence[str]) -> int | None:
    return None  # the page states no instance size: one row is offered in several GPU counts


@dataclass(frozen=True)
class Page:
    """One page connector: where its bodies are, how to find its tables, a row's GPU count."""

    module: ModuleType
    captures: tuple[str, ...]  # under ../shared/data/raw
    cassette: str  # under tests/replay
    grids: Callable[[bs4.BeautifulSoup], list[pv.Grid]]
    count: Callable[[pv.Grid, Sequence[bs4.Tag], Sequence[str]], int | None]
    prepare: Callable[[bytes], bytes] = lambda body: body
    cards: bool = False
    notes: dict[str, str] = field(default_factory=dict)


def _verda_restore(body: bytes) -> bytes:
    # the Wayback excerpt was cut inside the header row: restore the `<table><thead><tr>` it cut
    if b"<table" in body:
        return body
    end = body.index(b"-->") + 3
    return body[:end] + b"<table><thead><tr>" + body[end:]


PAGES: dict[str, Page] = {
    "lambdalabs": Page(
        lambdalabs,
        ("lambda/pricing-page-excerpt-wayback-20260109.html",),  # verbatim Wayback excerpt
        "lambda.ai/pricing.json",
        pv.html_grids,
        _lambda_count,
    ),
    "coreweave": Page(
        coreweave,
        ("coreweave/pricing-page-gpu-europe-table-excerpt-2026.html",),  # template regenerated
        "www.coreweave.com/pricing.json",
        pv.coreweave_grids,
        _count_in("GPU Count"),
    ),
    "nebius": Page(
        nebius,
        ("nebius/prices-page-gpu-and-preemptible-tables-excerpt-2026-09.html",),  # markup regenerated
        "nebius.com/prices.json",
        lambda doc: pv.div_grids(doc, ("Item",)),
        _none,
    ),
    "hyperstack": Page(
        hyperstack,
        ("hyperstack/gpu-pricing-page-excerpt-2026.html",),  # verbatim excerpt
        "www.hyperstack.cloud/gpu-pricing.json",
        lambda doc: pv.div_grids(doc, ("GPU Model",)),
        _none,
    ),
    "crusoe": Page(
        crusoe,
        ("crusoe/pricing-page-gpu-instances-excerpt-2026.html",),  # verbatim excerpt
        "crusoe.ai/cloud-pricing.json",
        lambda doc: pv.div_grids(doc, ("GPU model", "On-demand")),
        _none,
    ),
    "verda": Page(
        verda,
        ("datacrunch/products-page-excerpt-wayback-20250808.html",),  # verbatim Wayback excerpt
        "verda.com/products.json",
        pv.html_grids,
        _count_in("GPU"),
        prepare=_verda_restore,
    ),
    "fluidstack": Page(
        fluidstack,
        ("fluidstack/pricing-page-excerpt-wayback-20250109.html",),  # verbatim Wayback excerpt
        "www.fluidstack.io/pricing.json",
        pv.html_grids,
        _none,
    ),
    "together": Page(
        together,
        (),  # no capture of together.ai/pricing is held: the replay body (ours) only
        "www.together.ai/pricing.json",
        pv.html_grids,
        _none,
    ),
    "paperspace": Page(
        paperspace,
        ("paperspace/pricing-page-excerpt-wayback-20240123.html",),  # verbatim (one NBSP lost)
        "www.paperspace.com/pricing.json",
        lambda doc: [],
        _none,
        cards=True,
    ),
}


def sources() -> Iterator[tuple[str, str, str]]:
    for slug, page in PAGES.items():
        for capture in page.captures:
            yield slug, "capture", capture
        yield slug, "replay", page.cassette


def body_of(page: Page, kind: str, where: str) -> bytes:
    if kind == "capture":
        path = SHARED_RAW / where
        if not path.is_file():
            pytest.skip(f"real capture {where} not found under {SHARED_RAW} (../shared is absent)")
        return page.prepare(path.read_bytes())
    cassette = json.loads((REPLAY / where).read_text())
    return ((REPLAY / where).parent / cassette["response"]["body_file"]).read_bytes()


# --- the variants ------------------------------------------------------------------------------

_UNIT_WORDS = {"hour": "month", "hr": "mo", "h": "mo"}
_MINUTE_WORDS = {"hour": "minute", "hr": "min", "h": "min"}


def _case(word: str, like: str) -> str:
    return word.upper() if like.isupper() and len(like) > 1 else word.title() if like[:1].isupper() else word


def _re_unit(words: dict[str, str]) -> Callable[[str], str]:
    pattern = re.compile(r"(?i)(?<![a-z0-9])(hour|hr|h)(?![a-z0-9])")

    def edit(value: str) -> str:
        return pattern.sub(lambda m: _case(words[m.group(1).lower()], m.group(1)), value)

    return edit


def _price_columns(grid: pv.Grid) -> list[int]:
    return [
        i
        for i in range(len(grid.header))
        if any(i < len(row) and pv.is_price_cell(row[i]) for row in grid.rows)
    ]


def _priced_or_contact(grid: pv.Grid) -> set[int]:
    """Price columns, and those whose every cell is a lead form ("Contact sales" spot prices)."""
    contact = {
        i
        for i in range(len(grid.header))
        if grid.rows and all(i < len(r) and pages.is_contact(pv.text(r[i])) for r in grid.rows)
    }
    return set(_price_columns(grid)) | contact


def _basis_words(value: str, to: str) -> str:
    """ "GPU" -> "instance" (or back) where it names the price basis of a price label or cell."""
    if to == "instance":
        return re.sub(r"(?i)\bgpu\b", lambda m: _case("instance", m.group(0)), value)
    return re.sub(r"(?i)\b(instance|node)\b", lambda m: "GPU", value)


def _all_text(doc: bs4.BeautifulSoup, edit: Callable[[str], str]) -> None:
    body = doc.body or doc
    pv.edit_strings(body, edit)


def _headers(grid: pv.Grid) -> list[str]:
    return [pv.text(c) for c in grid.header]


Variant = tuple[str, str, Callable[[bs4.BeautifulSoup, Page], object], dict[str, object]]


def _reorder(doc: bs4.BeautifulSoup, page: Page) -> None:
    if page.cards:
        cards = pages.cards(doc, label=paperspace.CARD_LABEL, where="variant")
        parents = {id(c.parent): c.parent for c in cards}
        for parent in parents.values():
            own = [c for c in cards if c.parent is parent]
            pv._permute(own, list(reversed(range(len(own)))))
        for ul in doc.find_all("ul"):
            items = ul.find_all("li", recursive=False)
            pv._permute(items, list(reversed(range(len(items)))))
        return
    pv.reorder(page.grids(doc))


def _capitals(doc: bs4.BeautifulSoup, page: Page) -> None:
    for grid in page.grids(doc):
        for cell in grid.header:
            if pv.text(cell):
                pv.set_text(cell, pv.text(cell).upper().replace(" ", "\u00a0") + "\u00b9")
    if page.cards:
        _all_text(doc, lambda v: v.replace("Multi-GPU types", "MULTI\u2011GPU\u00a0TYPES"))


def _rename(index: int) -> Callable[[bs4.BeautifulSoup, Page], None]:
    def edit(doc: bs4.BeautifulSoup, page: Page) -> None:
        for grid in page.grids(doc):
            if index < len(grid.header) and pv.text(grid.header[index]):
                pv.set_text(grid.header[index], "Details")

    return edit


def _swap(i: int, j: int) -> Callable[[bs4.BeautifulSoup, Page], None]:
    def edit(doc: bs4.BeautifulSoup, page: Page) -> None:
        for grid in page.grids(doc):
            if j < len(grid.header):
                a, b = pv.text(grid.header[i]), pv.text(grid.header[j])
                pv.set_text(grid.header[i], b)
                pv.set_text(grid.header[j], a)

    return edit


def _rebase(to: str) -> Callable[[bs4.BeautifulSoup, Page], None]:
    """Per GPU -> per instance (values x count) or back (values / count), labels and cells."""

    def edit(doc: bs4.BeautifulSoup, page: Page) -> None:
        for grid in page.grids(doc):
            labels = _headers(grid)
            for col in _price_columns(grid):
                header = grid.header[col]
                says_gpu = bool(pages.price_unit(labels[col])[1])
                if to == "instance":
                    pv.edit_strings(header, lambda v: _basis_words(v, "instance"))
                elif not re.search(r"(?i)\bgpu\b", labels[col]):
                    pv.edit_strings(header, lambda v: re.sub(r"(?i)\bprice\b", "Price per GPU", v, count=1))
                for row in grid.rows:
                    count = page.count(grid, row, labels)
                    cell = row[col]
                    cell_gpu = bool(pages.price_unit(pv.text(cell))[1])
                    if to == "instance":
                        pv.edit_strings(cell, lambda v: _basis_words(v, "instance"))
                        if count and (says_gpu or cell_gpu):
                            pv.scale_amounts(cell, count)
                    elif count and not (says_gpu or cell_gpu):
                        pv.scale_amounts(cell, 1 / count)
        if page.cards and to == "instance":
            _all_text(doc, lambda v: re.sub(r"(?i)/\s*hour", "/ instance-hour", v))

    return edit


def _per(words: dict[str, str], factor: float) -> Callable[[bs4.BeautifulSoup, Page], None]:
    def edit(doc: bs4.BeautifulSoup, page: Page) -> None:
        body = doc.body or doc
        pv.scale_amounts(body, factor)
        _all_text(doc, _re_unit(words))

    return edit


def _euro(doc: bs4.BeautifulSoup, page: Page) -> None:
    _all_text(doc, lambda v: v.replace("$", "€").replace("USD", "EUR"))


def _in_price_cells(edit: Callable[[bs4.Tag], None]) -> Callable[[bs4.BeautifulSoup, Page], None]:
    def apply(doc: bs4.BeautifulSoup, page: Page) -> None:
        if page.cards:
            for card in pages.cards(doc, label=paperspace.CARD_LABEL, where="variant"):
                for node in card.find_all(string=re.compile(r"^\s*/\s*hour")):
                    edit(node.parent.parent)
            return
        for grid in page.grids(doc):
            for col in _price_columns(grid):
                for row in grid.rows:
                    if col < len(row) and pv.is_price_cell(row[col]):
                        edit(row[col])

    return apply


def _prefix_from(cell: bs4.Tag) -> None:
    node = cell.find(string=re.compile(r"[$€]"))
    if node is not None and "from" not in str(node).lower():
        node.replace_with(re.sub(r"([$€])", r"from \1", str(node), count=1))


def _range(cell: bs4.Tag) -> None:
    def edit(value: str) -> str:
        return re.sub(
            r"([$€])\s*(\d[\d,]*\.?\d*)", lambda m: f"{m.group(0)} - {m.group(1)}999.00", value, count=1
        )

    node = cell.find(string=re.compile(r"[$€]\s*\d"))
    if node is not None:
        node.replace_with(edit(str(node)))


def _footnote(cell: bs4.Tag) -> None:
    node = cell.find(string=re.compile(r"\d"))
    if node is not None and "*" not in str(node):
        node.replace_with(re.sub(r"(\d(?:[\d,]*\.\d+)?)", "\\1\u2020", str(node), count=1))


def variants(page: Page, doc: bs4.BeautifulSoup) -> list[Variant]:
    found: list[Variant] = [
        ("reordered", "columns reversed", _reorder, {}),
        ("relabelled", "capitals, NBSP, footnote mark", _capitals, {}),
        # where the page states no instance size, a per-instance price cannot be placed: refuse
        ("re-based", "per GPU -> per instance", _rebase("instance"), {"refuse": page.count is _none}),
        ("re-based", "per instance -> per GPU", _rebase("gpu"), {}),
        ("re-based", "per hour -> per month", _per(_UNIT_WORDS, pv.HOURS_PER_MONTH), {}),
        ("re-based", "per hour -> per minute", _per(_MINUTE_WORDS, 1 / 60), {}),
        ("re-currencied", "$ -> €", _euro, {"currency": "EUR"}),
        ("from/range", "from $X", _in_price_cells(_prefix_from), {"flag": "price_is_from"}),
        ("from/range", "$X - $Y", _in_price_cells(_range), {"flag": "price_is_from"}),
        ("from/range", "$X\u2020 (footnoted)", _in_price_cells(_footnote), {"flag": "price_footnote"}),
    ]
    grids = page.grids(doc)
    widths = [len(g.header) for g in grids]
    priced = {i for g in grids for i in _priced_or_contact(g)}
    for i in range(max(widths, default=0)):
        found.append(("relabelled", f"label {i} renamed", _rename(i), {}))
        for j in range(i + 1, max(widths, default=0)):
            expect = {"relabelled": True, "both_prices": i in priced and j in priced}
            found.append(("relabelled", f"labels {i} and {j} swapped", _swap(i, j), expect))
    return found


@functools.cache  # the per-page test and the class table share one run (2 shared cores)
def run_variants(slug: str, kind: str, where: str) -> list[tuple[str, str, str]]:
    """(variant class, variant, outcome) for every variant of one body."""
    page = PAGES[slug]
    body = body_of(page, kind, where)
    url = page.module.PAGE_URL
    baseline = list(page.module.parse([pv.response(url, body)]))
    assert pv.published(baseline), f"{slug} {kind}: the unmodified body publishes nothing"
    original = bs4.BeautifulSoup(body, "lxml")
    results = []
    for cls, label, edit, expect in variants(page, original):
        doc = bs4.BeautifulSoup(body, "lxml")
        edit(doc, page)
        changed = str(doc).encode()
        if changed == str(original).encode():
            results.append((cls, label, "n/a (nothing to change)"))
            continue
        parsed = pv.parse(page.module.parse, pv.response(url, changed))
        results.append((cls, label, pv.outcome(baseline, parsed, **expect)))  # type: ignore[arg-type]
    return results


@pytest.mark.parametrize(("slug", "kind", "where"), list(sources()), ids=lambda v: str(v).split("/")[0])
def test_no_variant_publishes_a_wrong_price(slug: str, kind: str, where: str) -> None:
    results = run_variants(slug, kind, where)
    wrong = [(cls, label, result) for cls, label, result in results if result.startswith("WRONG")]
    assert not wrong, "\n".join(f"{slug} {kind} [{cls}] {label}: {result}" for cls, label, result in wrong)
    # the variants that change nothing about what a price means must read the same
    harmless = {label: result for cls, label, result in results if cls in ("reordered",)}
    assert harmless.get("columns reversed") in ("same", "n/a (nothing to change)"), harmless


def test_every_variant_class_reaches_every_page() -> None:
    """Each page meets every variant class at least once (a class that changes nothing on a page
    tests nothing); `pytest -s` prints the page x class table of outcomes for the issue note."""
    rows: dict[tuple[str, str], dict[str, set[str]]] = {}
    for slug, kind, where in sources():
        try:
            results = run_variants(slug, kind, where)
        except pytest.skip.Exception:
            continue
        for cls, _, result in results:
            rows.setdefault((slug, kind), {}).setdefault(cls, set()).add(result.split(":")[0])
    for (slug, kind), classes in sorted(rows.items()):
        print(slug, kind, {cls: sorted(outcomes) for cls, outcomes in classes.items()})
        applied = {cls for cls, outcomes in classes.items() if outcomes - {"n/a (nothing to change)"}}
        assert applied == {"reordered", "relabelled", "re-based", "re-currencied", "from/range"}, (slug, kind)
    assert {slug for slug, _ in rows} == set(PAGES)
