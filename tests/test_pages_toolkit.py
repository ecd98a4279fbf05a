"""The page toolkit beyond tests/test_pages.py: what a connector author depends on at the edges.

Every HTML snippet here is written by us, small, in the structure real pricing pages use (a
layout table around a price table, a two-row header with a "Price" group over On-demand / Spot,
a "Contact sales" cell spanning both price columns, a GPU name spanning its size rows, a
page-builder `<div>` grid, schema.org JSON-LD); none is copied from a capture.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors import pages
from connectors.base import LayoutChanged, RawResponse
from connectors.pages import GpuLabel, Money

# --- prices as pages write them ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$1,234.50/hr", Money(1234.50, "USD", "hour", None, False)),
        ("$1,234,567.89/mo", Money(1234567.89, "USD", "month", None, False)),
        ("$1.234.567,89", Money(1234567.89, "USD", None, None, False)),
        ("€1.234.567/yr", Money(1234567.0, "EUR", "year", None, False)),  # dots only: grouped
        ("US$1.20/hr", Money(1.20, "USD", "hour", None, False)),
        ("C$3.10/hr", Money(3.10, "CAD", "hour", None, False)),
        ("A$ 4/hr", Money(4.0, "AUD", "hour", None, False)),
        ("¥300/h", Money(300.0, "JPY", "hour", None, False)),
        ("₹200/hr", Money(200.0, "INR", "hour", None, False)),
        ("CHF 2.50/h", Money(2.50, "CHF", "hour", None, False)),
        ("USD 2.49", Money(2.49, "USD", None, None, False)),
        ("eur 2.00", Money(2.0, "EUR", None, None, False)),  # codes in any case
        ("2,50\u00a0€/h", Money(2.50, "EUR", "hour", None, False)),  # NBSP before a trailing symbol
        ("€\u00a02.50", Money(2.50, "EUR", None, None, False)),
        ("$2.49\u202f/\u202fGPU\u202f/\u202fhr", Money(2.49, "USD", "hour", True, False)),  # narrow NBSP
        ("$0.125/hr", Money(0.125, "USD", "hour", None, False)),  # three decimals after a dot
        ("$10 /GPU/mo", Money(10.0, "USD", "month", True, False)),
        ("$2.49/hr/GPU", Money(2.49, "USD", "hour", True, False)),
        ("$2.49 an hour", Money(2.49, "USD", "hour", None, False)),
        ("$3.20 hourly", Money(3.20, "USD", "hour", None, False)),
        ("$99/month per node", Money(99.0, "USD", "month", False, False)),
        ("2 USD per GPU-hour", Money(2.0, "USD", "hour", True, False)),
        ("≥ $1.00/hr", Money(1.0, "USD", "hour", None, True)),
        ("Min. $1", Money(1.0, "USD", None, None, True)),
    ],
)
def test_prices_in_the_formats_pages_use(text: str, expected: Money) -> None:
    assert pages.parse_money(text) == expected


def test_a_leading_zero_before_a_comma_is_a_decimal_price_not_thousands() -> None:
    # "0,125 €/min" is a German per-minute price; no page groups thousands as "0,125"
    assert pages.parse_money("0,125 €/min") == Money(0.125, "EUR", "minute", None, False)
    assert pages.parse_money("€0,0125") == Money(0.0125, "EUR", None, None, False)
    assert pages.parse_gb("0,512 TB") == 512.0
    # a comma before three digits after a non-zero group still groups thousands
    assert pages.parse_money("$1,234") == Money(1234.0, "USD", None, None, False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("USD2.49", Money(2.49, "USD", None, None, False)),
        ("CHF2.50/h", Money(2.50, "CHF", "hour", None, False)),
        ("2.49USD/hr", Money(2.49, "USD", "hour", None, False)),
        ("2,50EUR", Money(2.50, "EUR", None, None, False)),
    ],
)
def test_a_currency_code_written_against_the_number_is_read(text: str, expected: Money) -> None:
    assert pages.parse_money(text) == expected


def test_a_code_inside_a_longer_word_is_not_a_currency() -> None:
    # "USDT" (a token) and "GBPS" are not USD / GBP: the number stays a bare one
    assert pages.parse_money("2.49 USDT").currency == ""
    assert pages.parse_money("10 GBPS").currency == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$2.00 - $3.00/hr", Money(2.0, "USD", "hour", None, True)),
        ("$2\u2013$3/hr", Money(2.0, "USD", "hour", None, True)),  # en dash, as pages typeset it
        ("€1,50 to €2,00 per hour", Money(1.5, "EUR", "hour", None, True)),
        ("$2-3/hr", Money(2.0, "USD", "hour", None, True)),
    ],
)
def test_a_range_is_its_low_end_marked_as_a_from_price(text: str, expected: Money) -> None:
    # the low end is what some buyer pays, not what every buyer pays: the same as "from $2"
    assert pages.parse_money(text) == expected


def test_a_count_after_a_dash_is_not_a_range() -> None:
    assert pages.parse_money("$2.00 - 8x H100").is_from is False
    assert pages.parse_money("-$1.00/hr").is_from is False  # a negative price, kept for flagging


def test_a_price_next_to_a_contact_line_is_still_a_price() -> None:
    assert pages.parse_money("from $1.99/hr, contact sales for volume") == Money(
        1.99, "USD", "hour", None, True
    )
    assert pages.parse_money("Contact sales (from $2.00/hr)") == Money(2.0, "USD", "hour", None, True)
    # a contact line whose only number has no currency is a lead form, not a price
    assert pages.parse_money("Contact sales for 1,000+ GPUs") is None
    assert pages.parse_money("Call us: 1 800 555 0199") is None


@pytest.mark.parametrize(
    "text",
    ["Talk to an expert", "Let's talk", "Custom pricing", "Get a quote", "Inquire", "Contact our sales team"],
)
def test_lead_form_phrases(text: str) -> None:
    assert pages.is_contact(text) and pages.parse_money(text) is None


@pytest.mark.parametrize(
    "text", ["n/a", "TBD", "TBA", "Waitlist", "Coming\u00a0soon", "---", "Unavailable", "None"]
)
def test_more_not_available_cells(text: str) -> None:
    assert pages.is_not_available(text) and pages.parse_money(text) is None


def test_a_zero_price_is_not_not_available() -> None:
    # "$0" is a (wrong) price for the warehouse to quarantine, not an empty cell
    assert not pages.is_not_available("$0") and not pages.is_not_available("0")


def test_text_without_a_number_is_no_price() -> None:
    assert pages.parse_money("Free tier") is None
    assert pages.parse_money(None) is None


# A property: an amount written any way the toolkit supports reads back as that amount, with the
# currency, unit, per-GPU flag and "from" flag the text states.
_AMOUNTS = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("99999.99"), places=2)
_SPACES = st.sampled_from([" ", "\u00a0", "\u202f"])
_CURRENCIES = st.sampled_from(
    [  # (before, after, code): symbol or code, in front of or after the number
        ("$", "", "USD"),
        ("US$", "", "USD"),
        ("£", "", "GBP"),
        ("USD{s}", "", "USD"),
        ("CHF{s}", "", "CHF"),
        ("", "{s}€", "EUR"),
        ("", "€", "EUR"),
        ("€", "", "EUR"),
        ("", "{s}EUR", "EUR"),
    ]
)
_UNITS = st.sampled_from(
    [
        ("", None, None),
        ("/hr", "hour", None),
        ("{s}per hour", "hour", None),
        ("/GPU/hr", "hour", True),
        ("{s}per GPU-hour", "hour", True),
        ("{s}/{s}month", "month", None),
        ("/mo per node", "month", False),
        ("/min", "minute", None),
    ]
)


def _written(amount: Decimal, style: str) -> str:
    us = f"{amount:,.2f}"
    if style == "us":
        return us
    if style == "plain":
        return f"{amount:.2f}"
    return us.replace(",", "_").replace(".", ",").replace("_", ".")  # "1.234,50"


@given(
    _AMOUNTS,
    st.sampled_from(["us", "plain", "european"]),
    _CURRENCIES,
    _UNITS,
    st.booleans(),
    _SPACES,
)
def test_any_supported_way_of_writing_a_price_parses_back(
    amount: Decimal,
    style: str,
    currency: tuple[str, str, str],
    unit: tuple[str, str | None, bool | None],
    is_from: bool,
    space: str,
) -> None:
    before, after, code = (part.format(s=space) if isinstance(part, str) else part for part in currency)
    suffix, unit_name, per_gpu = unit
    text = f"{'from ' if is_from else ''}{before}{_written(amount, style)}{after}{suffix.format(s=space)}"
    assert pages.parse_money(text) == Money(float(amount), code, unit_name, per_gpu, is_from), text


@given(
    st.decimals(min_value=Decimal("0.001"), max_value=Decimal("0.999"), places=3),
    st.sampled_from([".", ","]),
)
def test_sub_unit_prices_with_three_decimals_parse_back(amount: Decimal, mark: str) -> None:
    # per-minute and per-second rates: "$0.125/min", "0,125 €/min"
    text = f"{amount:.3f}".replace(".", mark) + " €/min"
    assert pages.parse_money(text) == Money(float(amount), "EUR", "minute", None, False), text


@given(st.text())
def test_parse_money_never_raises_and_never_invents_a_currency(text: str) -> None:
    money = pages.parse_money(text)
    assert money is None or money.currency in {"", *pages._SYMBOLS.values(), *pages._CODES}


# --- units --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Price per hour (billed per second)", ("hour", None)),
        ("hourly, billed per minute", ("hour", None)),
        ("Price per month ($2.00/hr)", ("month", None)),
        ("/mo", ("month", None)),
        ("per node-hour", ("hour", False)),
        ("Price/server/hour", ("hour", False)),
        ("per VM per hour", ("hour", False)),
        ("GPU-mo", ("month", True)),
        ("$ / GPU / Month", ("month", True)),
        ("per week", ("week", None)),
        ("Annual", ("year", None)),
        ("per GPU", (None, True)),
        ("Mon-Fri support", (None, None)),  # a weekday is not a month
    ],
)
def test_the_first_unit_a_text_states_is_its_unit(
    text: str, expected: tuple[str | None, bool | None]
) -> None:
    assert pages.price_unit(text) == expected


def test_a_monthly_price_with_its_hourly_equivalent_is_monthly() -> None:
    # cards often print "$1,460/mo ($2.00/hr)": the amount read is the monthly one
    assert pages.parse_money("$1,460/mo ($2.00/hr)") == Money(1460.0, "USD", "month", None, False)
    assert pages.parse_money("$2.49/hr, billed per second").unit == "hour"


# --- GPU labels and sizes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(8x) H100", GpuLabel(8, "H100", None)),
        ("H100 (8x)", GpuLabel(8, "H100", None)),
        ("H100 (8)", GpuLabel(8, "H100", None)),
        ("2xA100", GpuLabel(2, "A100", None)),
        ("L40S 48 GB ×2", GpuLabel(2, "L40S 48 GB", 48.0)),
        ("NVIDIA A100-SXM4-80GB", GpuLabel(None, "A100-SXM4-80GB", 80.0)),
        ("DGX H100", GpuLabel(None, "H100", None, "DGX")),
        ("Intel Gaudi 2 96GB", GpuLabel(None, "Gaudi 2 96GB", 96.0)),
        ("GB200 NVL72", GpuLabel(None, "GB200 NVL72", None)),
        ("H100\u00a0SXM\u00a080GB", GpuLabel(None, "H100 SXM 80GB", 80.0)),
    ],
)
def test_more_gpu_labels(text: str, expected: GpuLabel) -> None:
    assert pages.parse_gpu_label(text) == expected


_GPUS = st.sampled_from(
    [("H100 SXM5 80GB", 80.0), ("A100 PCIe 40GB", 40.0), ("RTX 6000 Ada", None), ("MI300X 192GB", 192.0)]
)


@given(
    st.integers(min_value=1, max_value=999),
    _GPUS,
    st.sampled_from(["{n}x {g}", "{n} x {g}", "{n}× {g}", "{g} x {n}", "{g} ({n}x)", "NVIDIA {g} x{n}"]),
)
def test_a_count_written_any_supported_way_is_read_and_kept_out_of_the_name(
    count: int, gpu: tuple[str, float | None], layout: str
) -> None:
    name, vram = gpu
    assert pages.parse_gpu_label(layout.format(n=count, g=name)) == GpuLabel(count, name, vram)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512 MB", 0.512),
        ("1 TiB", 1024.0),
        ("16G", 16.0),
        ("1.234,5 GB", 1234.5),
        ("2x 80GB", 80.0),
        ("SSD", None),
    ],
)
def test_more_sizes(text: str, expected: float | None) -> None:
    assert pages.parse_gb(text) == expected


@given(st.integers(min_value=1, max_value=999_999), st.sampled_from([("GB", 1), ("TB", 1000), ("TiB", 1024)]))
def test_a_grouped_size_reads_back(number: int, unit: tuple[str, int]) -> None:
    name, factor = unit
    assert pages.parse_gb(f"{number:,} {name}") == number * factor


def test_numbers_from_json_pass_through_as_floats() -> None:
    assert (pages.parse_gb(24.5), pages.parse_vcpus(16), pages.parse_count(8)) == (24.5, 16.0, 8)


@pytest.mark.parametrize(
    ("text", "expected"), [("1,024", 1024), ("2.5", None), ("1.0", 1), ("8–16", None), (None, None)]
)
def test_a_count_is_a_whole_number_or_none(text: str | None, expected: int | None) -> None:
    assert pages.parse_count(text) == expected


# --- text and labels ------------------------------------------------------------------------------


def test_clean_reads_every_dash_as_a_hyphen_and_drops_soft_hyphens() -> None:
    assert pages.clean("On\u2212demand") == "On-demand"  # minus sign
    assert pages.clean("On\u2013demand") == "On-demand"  # en dash
    assert pages.clean("Avail\u00adability\u2060") == "Availability"
    assert pages.clean("\ufeffGPU\u3000Model") == "GPU Model"


def test_labels_keep_currency_signs_apart_from_words() -> None:
    assert not pages.label_matches("Price ($)", "Price")
    assert pages.label_in("Price ($)", "price")
    assert pages.label_in("$/GPU/hr", "gpu")


# --- tables ---------------------------------------------------------------------------------------

# A pricing table inside an old-style layout table (one outer row, the price table in a cell).
LAYOUT_PAGE = """
<table class="layout"><tr>
  <td><img alt="logo"> Cloud GPUs</td>
  <td><table>
    <tr><th>GPU</th><th>Price</th></tr>
    <tr><td>H100</td><td>$2.49/hr</td></tr>
  </table></td>
</tr></table>
"""


def test_a_layout_table_does_not_take_the_nested_tables_text() -> None:
    outer, inner = pages.tables(pages.soup(LAYOUT_PAGE), where="p")
    assert outer.headers == ("Cloud GPUs", "")  # the cell's own text, not the nested table's
    table = pages.find_table(pages.soup(LAYOUT_PAGE), required=["GPU", "Price"], where="p")
    assert table == inner
    assert table.rows == (("H100", "$2.49/hr"),)


# A two-row header: "GPU" spans both rows, "Price" spans the On-demand and Spot columns below it.
GROUPED_HEAD = """
<table>
  <thead>
    <tr><th rowspan="2">GPU</th><th colspan="2">Price per GPU-hour</th><th rowspan="2">VRAM</th></tr>
    <tr><th>On-demand</th><th>Spot</th></tr>
  </thead>
  <tbody>
    <tr><td>H100</td><td>$2.49</td><td>$1.25</td><td>80 GB</td></tr>
    <tr><td>B200</td><td colspan="2">Contact sales</td><td>180 GB</td></tr>
  </tbody>
</table>
"""


def test_a_two_row_header_lines_up_with_its_cells() -> None:
    table = pages.find_table(pages.soup(GROUPED_HEAD), required=["GPU", "Spot"], where="p")
    assert table.headers == (
        "GPU",
        "Price per GPU-hour On-demand",
        "Price per GPU-hour Spot",
        "VRAM",
    )
    h100, b200 = table.rows
    assert (table.get(h100, "On-demand"), table.get(h100, "Spot"), table.get(h100, "VRAM")) == (
        "$2.49",
        "$1.25",
        "80 GB",
    )
    # the group label is part of each column's header: its unit applies to both price columns
    assert pages.price_unit(table.headers[table.column("Spot")]) == ("hour", True)
    # a cell spanning two columns is what a reader sees under both
    assert (table.get(b200, "On-demand"), table.get(b200, "Spot"), table.get(b200, "VRAM")) == (
        "Contact sales",
        "Contact sales",
        "180 GB",
    )


def test_a_title_row_spanning_the_whole_table_is_not_part_of_the_headers() -> None:
    page = """<table><thead>
      <tr><th colspan="2">GPU instances*</th></tr>
      <tr><th>GPU</th><th>On-demand</th></tr>
    </thead><tbody><tr><td>H100</td><td>$2.49</td></tr></tbody></table>"""
    assert pages.tables(pages.soup(page), where="p")[0].headers == ("GPU", "On-demand")


def test_a_name_spanning_rows_belongs_to_every_row() -> None:
    # one GPU, several sizes: the name cell spans the rows of its sizes
    page = """<table>
      <tr><th>GPU</th><th>GPUs</th><th>Price</th></tr>
      <tr><td rowspan="3">H100 SXM</td><td>1</td><td>$2.49/hr</td></tr>
      <tr><td>2</td><td>$4.98/hr</td></tr>
      <tr><td>8</td><td>$19.92/hr</td></tr>
      <tr><td>A100</td><td>1</td><td>$1.29/hr</td></tr>
    </table>"""
    table = pages.tables(pages.soup(page), where="p")[0]
    assert table.rows == (
        ("H100 SXM", "1", "$2.49/hr"),
        ("H100 SXM", "2", "$4.98/hr"),
        ("H100 SXM", "8", "$19.92/hr"),
        ("A100", "1", "$1.29/hr"),
    )
    assert [e.name for e in table.elements] == ["tr"] * 4


def test_a_span_that_is_not_a_number_counts_as_one() -> None:
    page = '<table><tr><th colspan="two">GPU</th><th>Price</th></tr><tr><td>H100</td><td>$2</td></tr></table>'
    assert pages.tables(pages.soup(page), where="p")[0].headers == ("GPU", "Price")


def test_an_empty_thead_falls_back_to_the_first_row() -> None:
    # some page builders emit `<thead></thead>` and put the header row in the body
    page = (
        "<table><thead></thead><tbody><tr><th>GPU</th><th>Price</th></tr>"
        "<tr><td>H100</td><td>$2</td></tr></tbody></table>"
    )
    (table,) = pages.tables(pages.soup(page), where="p")
    assert (table.headers, table.rows, table.where) == (("GPU", "Price"), (("H100", "$2"),), "p table 1")


def test_footer_rows_are_not_offers() -> None:
    # our own page, in the shape of a pricing table with a <tfoot> note
    page = (
        "<html><body><table><thead><tr><th>GPU</th><th>Price</th></tr></thead>"
        "<tbody><tr><td>H100</td><td>$2.49/hr</td></tr><tr><td>A100</td><td>$1.29/hr</td></tr></tbody>"
        "<tfoot><tr><td colspan='2'>Prices exclude VAT</td></tr></tfoot></table></body></html>"
    )
    table = pages.find_table(pages.soup(page), required=["GPU", "Price"], where="p")
    assert table.rows == (("H100", "$2.49/hr"), ("A100", "$1.29/hr"))
    assert len(table.elements) == 2


def test_a_table_without_rows_is_no_table() -> None:
    assert pages.tables(pages.soup("<table></table><div role='table'></div>"), where="p") == []


def test_find_tables_returns_every_match_numbered_among_all_tables() -> None:
    page = """
    <table><tr><th>Plan</th></tr><tr><td>Basic</td></tr></table>
    <table><tr><th>GPU</th><th>On-demand</th></tr><tr><td>H100</td><td>$2</td></tr></table>
    <table><tr><th>GPU</th><th>On-demand</th></tr><tr><td>A100</td><td>$1</td></tr></table>
    """
    found = pages.find_tables(pages.soup(page), required=["on demand"], where="p")
    assert [(t.where, t.rows[0][0]) for t in found] == [("p table 2", "H100"), ("p table 3", "A100")]


def test_a_real_table_wins_over_a_div_grid_with_the_same_labels() -> None:
    page = """
    <div class="grid"><div class="r"><div>GPU</div><div>Price</div></div>
      <div class="r"><div>L4</div><div>$0.50</div></div></div>
    <table><tr><th>GPU</th><th>Price</th></tr><tr><td>H100</td><td>$2</td></tr></table>
    """
    (table,) = pages.find_tables(pages.soup(page), required=["GPU", "Price"], where="p")
    assert table.rows == (("H100", "$2"),)


def test_aria_grids_with_row_groups() -> None:
    page = """<div role="grid">
      <div role="rowgroup"><div role="row">
        <div role="columnheader">GPU</div><div role="columnheader">Price</div>
      </div></div>
      <div role="rowgroup"><div role="row">
        <div role="rowheader">H100</div><div role="gridcell">$2</div>
      </div></div>
    </div>"""
    table = pages.find_table(pages.soup(page), required=["price"], where="p")
    assert table.rows == (("H100", "$2"),)


def test_table_lookups_by_label() -> None:
    table = pages.Table(headers=("GPU model", "", "GPU"), rows=(("H100 SXM", "x"),), where="w")
    # an exact header wins even when an earlier one contains the label
    assert table.column("gpu") == 2
    assert table.find_column("model") == 0
    assert table.find_column("Spot") is None
    # a row shorter than the headers: the missing cell is the default
    assert table.get(table.rows[0], "GPU", default="?") == "?"
    assert table.records() == [{"GPU model": "H100 SXM", "#1": "x"}]
    with pytest.raises(LayoutChanged, match=r"`Spot` / `Preemptible` column not found in w \(headers: "):
        table.column("Spot", "Preemptible")


# --- div grids ------------------------------------------------------------------------------------


def test_a_grid_reads_the_rows_shaped_like_most_rows_not_group_labels_or_a_footer() -> None:
    # the header row is styled apart; a group label row has one cell; the footer has the width of a
    # row but another shape: only the repeated rows are data
    page = """
    <div class="tbl">
      <div class="hdr"><span>GPU</span><span>Spot</span></div>
      <div class="group"><span>Hopper</span></div>
      <div class="row"><span>H100</span><span>$1.10</span></div>
      <div class="row"><span>H200</span><span>$1.60</span></div>
      <div class="foot"><span>*</span><span>billed per second</span></div>
    </div>"""
    (grid,) = pages.find_tables(pages.soup(page), required=["GPU", "Spot"], where="p")
    assert grid.headers == ("GPU", "Spot")
    assert grid.rows == (("H100", "$1.10"), ("H200", "$1.60"))
    assert grid.where == "p grid 1"


def test_a_grid_header_without_rows_is_a_layout_change() -> None:
    page = '<div><div class="h"><p>GPU</p><p>Spot</p></div></div>'
    with pytest.raises(
        LayoutChanged, match=r"no table with columns GPU, Spot \(and optionally VRAM\) found in p"
    ):
        pages.find_tables(pages.soup(page), required=["GPU", "Spot"], where="p", optional=["VRAM"])


# --- sections and cards ---------------------------------------------------------------------------


def test_a_section_is_the_whole_card_around_its_heading() -> None:
    # a badge before the heading belongs to the card; the next card's heading ends it
    page = """<div class="cards">
      <div class="card"><span class="badge">New</span><h3>H100</h3><p>$2.49/hr</p></div>
      <div class="card"><h3>A100</h3><p>$1.29/hr</p></div>
    </div>"""
    card = pages.section(pages.soup(page), "h100", where="p")
    assert pages.clean(card.get_text(" ")) == "New H100 $2.49/hr"


def test_lower_headings_stay_inside_a_section() -> None:
    page = "<h2>GPU cloud</h2><h3>H100</h3><p>a</p><h3>A100</h3><p>b</p><h2>Storage</h2><p>disk</p>"
    block = pages.section(pages.soup(page), "GPU Cloud", where="p")
    assert pages.clean(block.get_text(" ")) == "GPU cloud H100 a A100 b"


def test_an_aria_heading_without_a_readable_level_is_level_two() -> None:
    page = (
        '<div role="heading" aria-level="3">Reserved</div><p>r</p>'
        '<div role="heading" aria-level="high">Spot</div><p>s</p>'
    )
    reserved = pages.section(pages.soup(page), "Reserved", where="p")
    assert pages.clean(reserved.get_text(" ")) == "Reserved r"  # ends at the level-2 heading


def test_a_section_heading_is_matched_tolerantly() -> None:
    page = "<h2>On\u2011Demand\u00a0GPUs*</h2><p>x</p>"
    assert pages.clean(pages.section(pages.soup(page), "on-demand gpus", where="p").get_text(" ")) == (
        "On-Demand GPUs x"
    )


def test_a_card_with_two_prices_is_one_card() -> None:
    # "$2/hr" and "$16/hr for 8" in one tile: one card, never a card inside a card
    page = "<ul><li><b>H100</b> $2/hr <i>$16/hr for 8</i></li><li><b>A100</b> $1/hr</li></ul>"
    found = pages.cards(pages.soup(page), label="/hr", where="p")
    assert [pages.clean(c.get_text(" ")) for c in found] == ["H100 $2/hr $16/hr for 8", "A100 $1/hr"]
    page = "<ul><li><i>$16/hr for 8</i> $2/hr</li><li>$1/hr</li></ul>"
    assert [c.name for c in pages.cards(pages.soup(page), label="/hr", where="p")] == ["li", "li"]


def test_script_text_is_not_a_card() -> None:
    page = (
        '<div><script>var price = "$9/hr"</script><div class="c">$3/hr</div><div class="c">$4/hr</div></div>'
    )
    assert [c.get_text() for c in pages.cards(pages.soup(page), label="/hr", where="p")] == ["$3/hr", "$4/hr"]


# --- embedded data --------------------------------------------------------------------------------


def test_next_data_is_preferred_to_an_earlier_data_island() -> None:
    page = (
        '<script type="application/json" id="config">{"theme": "dark"}</script>'
        '<script id="__NEXT_DATA__" type="application/json">{"props": {}}</script>'
    )
    assert pages.embedded_json(page) == {"props": {}}


def test_a_broken_island_gives_way_to_the_next_and_an_unnamed_one_is_no_island() -> None:
    page = (
        '<script type="application/json" id="a">{broken</script>'
        '<script type="application/json" id="b">{"gpus": []}</script>'
    )
    assert pages.embedded_json(page) == {"gpus": []}
    assert pages.embedded_json('<script type="application/json">{"x": 1}</script>') is None
    assert pages.embedded_json('<script id="__NEXT_DATA__" type="application/json"></script>') is None


def _ld(*blocks: object) -> str:
    return "".join(f'<script type="application/ld+json">{json.dumps(b)}</script>' for b in blocks)


def test_json_ld_offers_in_a_graph_and_in_lists() -> None:
    graph = {
        "@context": "https://schema.org",
        "@graph": [
            {
                "@type": "Product",
                "name": "H100",
                "sku": "h100-sxm",
                "offers": [{"price": 2.49, "priceCurrency": "USD"}],
            },
            {"@type": "Product", "name": "L40S", "offers": {"price": "0.99"}},
        ],
    }
    assert pages.json_ld_offers(_ld(graph)) == [
        {"name": "H100", "price": 2.49, "priceCurrency": "USD", "unitText": None, "sku": "h100-sxm"},
        {"name": "L40S", "price": "0.99", "priceCurrency": None, "unitText": None, "sku": None},
    ]


def test_json_ld_price_specification_lists_and_unit_codes() -> None:
    product = {
        "@type": "Product",
        "name": "A100",
        "offers": {"priceSpecification": [{"price": "1.10", "priceCurrency": "EUR", "unitCode": "HUR"}]},
    }
    # UN/CEFACT "HUR" is an hour; it is passed on as the page states it
    assert pages.json_ld_offers(_ld(product)) == [
        {"name": "A100", "price": "1.10", "priceCurrency": "EUR", "unitText": "HUR", "sku": None}
    ]


def test_offers_of_an_aggregate_offer_carry_the_products_name() -> None:
    product = {
        "@type": "Product",
        "name": "H100",
        "offers": {
            "@type": "AggregateOffer",
            "lowPrice": "2.00",
            "priceCurrency": "USD",
            "offers": [
                {"@type": "Offer", "price": "2.00"},
                {"@type": "Offer", "price": "3.00", "name": "H100 8x"},
            ],
        },
    }
    found = pages.json_ld_offers(_ld(product))
    assert [(o["name"], o["price"]) for o in found] == [
        ("H100", "2.00"),
        ("H100", "2.00"),
        ("H100 8x", "3.00"),
    ]


def test_offers_that_are_not_objects_are_skipped() -> None:
    assert pages.json_ld_offers(_ld({"@type": "Product", "name": "X", "offers": ["2.49", None]})) == []


# --- fetching and decoding ------------------------------------------------------------------------


def test_conditional_headers_send_only_what_was_kept() -> None:
    assert pages.conditional_headers(None) == {}
    assert pages.conditional_headers({"etag": ""}) == {}
    assert pages.conditional_headers({"last-modified": "Tue, 01 Dec 2026 00:00:00 GMT"}) == {
        "If-Modified-Since": "Tue, 01 Dec 2026 00:00:00 GMT"
    }


def _response(body: bytes, content_type: str = "text/html; charset=utf-8") -> RawResponse:
    return RawResponse(
        url="https://example.test/pricing",
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        content_type=content_type,
        body=body,
    )


def test_a_quoted_charset_is_honoured() -> None:
    # RFC 9110 allows `charset="ISO-8859-15"`; in Latin-9 0xA4 is the euro sign
    body = "<p>€2,50 pro Stunde</p>".encode("iso-8859-15")
    page = pages.soup(_response(body, 'text/html; charset="ISO-8859-15"'))
    assert page.get_text() == "€2,50 pro Stunde"


def test_soup_reads_bytes_and_text_excerpts() -> None:
    assert pages.soup(b"<p>$2</p>").p.get_text() == "$2"
    assert pages.soup("<p>€2</p>").p.get_text() == "€2"


def test_a_whole_page_in_capitals_or_with_trailing_blank_lines_is_complete() -> None:
    pages.check_complete(_response(b"<HTML lang=en><BODY>x</BODY></HTML>\n\n\n"))
    pages.check_complete(_response(b"<!DOCTYPE html>\n<html>" + b" " * 10_000 + b"</html  >"))


def test_a_truncated_page_names_its_url_and_size() -> None:
    with pytest.raises(
        LayoutChanged, match=r"^https://example\.test/pricing: .* after 23 bytes; truncated\?"
    ):
        pages.check_complete(_response(b"<html><body><table><tr>"))
