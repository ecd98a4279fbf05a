"""The page toolkit's complete reading of a price (issue 19): basis and currency from the cell, the
label or the page, cells keyed by label, footnote marks, and the one single-page parse loop.

Every HTML snippet here is written by us, small, in the structure pricing pages use.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from connectors import pages
from connectors.base import LayoutChanged, RawResponse, Unchanged

WHERE = "a test table"


def _table(html: str) -> pages.Table:
    return pages.tables(pages.soup(html), where=WHERE)[0]


# --- quote: currency, unit and basis, each from somewhere ---------------------------------------


def test_the_label_gives_unit_and_basis_and_the_cell_the_currency() -> None:
    quote = pages.quote("$2.99", "PRICE/GPU/HR*", where=WHERE)
    assert quote is not None
    assert (quote.amount, quote.currency, quote.unit, quote.per_gpu) == (2.99, "USD", "hour", True)
    assert quote.basis == {"currency": "cell", "unit": "label", "per": "label"}
    assert quote.instance_hour(8) == pytest.approx(23.92) and quote.per_hour() == 2.99


def test_a_label_currency_fills_in_a_bare_cell() -> None:
    quote = pages.quote("2.49", "Price per GPU-hour (EUR)", where=WHERE)
    assert quote is not None and quote.currency == "EUR"


@pytest.mark.parametrize(
    ("cell", "label", "missing"),
    [
        ("$2.99", "Price", "time unit"),
        ("2.99/GPU/hr", "Price", "currency"),
        ("$2.99/hr", "Price", "price basis"),
    ],
)
def test_what_is_stated_nowhere_is_refused_naming_it(cell: str, label: str, missing: str) -> None:
    with pytest.raises(LayoutChanged, match=f"no {missing}.*stated in the cell, its label or the page"):
        pages.quote(cell, label, where=WHERE)


@pytest.mark.parametrize(
    ("cell", "label", "what"),
    [
        ("$2.99/GPU/hr", "Price (EUR)", "currency"),
        ("$2.99/GPU/mo", "Price per hour", "time unit"),
        ("$2.99/GPU/hr", "Price per instance-hour", "price basis"),
    ],
)
def test_a_cell_and_label_that_disagree_are_refused(cell: str, label: str, what: str) -> None:
    with pytest.raises(LayoutChanged, match=f"the {what}.*contradicts itself"):
        pages.quote(cell, label, where=WHERE)


def test_a_binding_page_statement_must_agree_and_a_layout_default_gives_way() -> None:
    says = pages.Stated(per_gpu=False, source="the page says 'per instance'")
    with pytest.raises(LayoutChanged, match="the page says 'per instance' says False"):
        pages.quote("$2.99/GPU/hr", "Price", stated=says, where=WHERE)
    implied = pages.Stated(per_gpu=False, source="one row per instance", binding=False)
    quote = pages.quote("$2.99/GPU/hr", "Price", stated=implied, where=WHERE)
    assert quote is not None and quote.per_gpu and quote.basis["per"] == "cell"
    # where nothing else says, the layout's basis is used, and cited
    quote = pages.quote("$2.99/hr", "Price", stated=implied, where=WHERE)
    assert quote is not None and not quote.per_gpu and quote.basis["per"] == "page: one row per instance"


def test_a_year_price_is_a_unit_no_offer_can_use() -> None:
    with pytest.raises(LayoutChanged, match="per year"):
        pages.quote("$2,000/GPU/yr", "Price", where=WHERE)


def test_from_range_and_footnotes_are_flagged() -> None:
    from_ = pages.quote("from $1.55/GPU/hr", "Price", where=WHERE)
    spread = pages.quote("$2.00 - $3.00/GPU/hr", "Price", where=WHERE)
    noted = pages.quote("$0.74/GPU/hr", "Price", where=WHERE, marks="**")
    starting = pages.quote("$2.79/GPU/hr", "Starting from", where=WHERE)
    assert from_ is not None and from_.flags()["price_is_from"] and not from_.is_range
    assert spread is not None and spread.amount == 2.0 and spread.flags()["price_is_range"]
    assert spread.flags()["price_is_from"]  # a range's low end is a lower bound
    assert noted is not None and noted.flags()["price_footnote"] == "*"
    assert starting is not None and starting.is_from  # "Starting from" as a column label
    plain = pages.quote("$2.99/GPU/hr", "Price", where=WHERE)
    assert plain is not None and "price_is_from" not in plain.flags()
    assert plain.flags()["price_basis"] == "USD per GPU-hour"


def test_not_a_price_is_none() -> None:
    assert pages.quote("Contact sales", "Price/GPU/hr", where=WHERE) is None
    assert pages.quote("N/A", "Price/GPU/hr", where=WHERE) is None


def test_a_per_instance_price_is_refused_where_no_row_names_an_instance() -> None:
    # pages that sell one GPU model in several counts per row (nebius, hyperstack, crusoe,
    # fluidstack) can only use per-GPU prices; the refusal names the cell and where it stood
    per_gpu = pages.quote("$2.99", "Price/GPU/hr", where=WHERE)
    per_instance = pages.quote("$23.92", "Price per instance per hour", where=WHERE)
    assert per_gpu is not None and per_instance is not None
    assert per_gpu.require_per_gpu("$2.99", "under `Price`") is per_gpu
    with pytest.raises(LayoutChanged, match=r"under `Price` is per instance, but the page names no"):
        per_instance.require_per_gpu("$23.92", "under `Price`")


def test_label_basis() -> None:
    assert pages.label_basis("Price/GPU/hr ($)") == ("hour", True, "USD")
    assert pages.label_basis("On-Demand Price (Per Hour)") == ("hour", None, None)
    assert pages.label_basis("Price ($ / €)")[2] == "?"  # two currencies: a contradiction


def test_a_per_gpu_price_must_match_the_instance_price_beside_it() -> None:
    per_gpu = pages.quote("$2.99/GPU/hr", "Price", where=WHERE)
    instance = pages.quote("$23.92/instance/hr", "Price", where=WHERE)
    wrong = pages.quote("$2.99/instance/hr", "Price", where=WHERE)
    euro = pages.quote("€23.92/instance/hr", "Price", where=WHERE)
    assert per_gpu and instance and wrong and euro
    pages.check_instance_price(per_gpu, instance, 8, where=WHERE)  # 8 x 2.99 = 23.92
    with pytest.raises(LayoutChanged, match=r"x 8 GPUs is 23\.9200/hour, but the instance price"):
        pages.check_instance_price(per_gpu, wrong, 8, where=WHERE)
    with pytest.raises(LayoutChanged, match="is in USD, the instance price"):
        pages.check_instance_price(per_gpu, euro, 8, where=WHERE)


# --- tables keyed by label ---------------------------------------------------------------------

RESPONSIVE = """<table><thead><tr><th></th><th>VRAM/GPU</th><th>PRICE/GPU/HR*</th></tr></thead><tbody>
<tr><th data-label="Plan">NVIDIA H100</th><td data-label="VRAM/GPU">80 GB</td>
<td data-label="PRICE/GPU/HR*">$2.99**</td></tr>
<tr><th data-label="Plan">NVIDIA A100</th><td data-label="VRAM/GPU">40 GB</td>
<td data-label="PRICE/GPU/HR*">$1.29<sup>1</sup></td></tr></tbody></table>"""


def test_rows_are_keyed_by_label_and_a_blank_header_takes_its_cells_data_label() -> None:
    table = _table(RESPONSIVE)
    assert table.headers[0] == "Plan" and table.keys == ("plan", "vram gpu", "price gpu hr")
    first, second = table.read()
    assert first.get("Plan") == "NVIDIA H100" and first.require("VRAM/GPU") == "80 GB"
    assert first.marks == {"price gpu hr": "**"} and second.marks == {"price gpu hr": "1"}
    quote = first.quote("PRICE/GPU/HR")
    assert quote is not None and quote.footnote == "*" and quote.per_gpu
    assert first.get("Storage") is None and first.get("Storage", default="-") == "-"
    with pytest.raises(LayoutChanged, match="`Storage` column not found"):
        first.require("Storage")


def test_a_header_that_disagrees_with_its_cells_data_label_is_refused() -> None:
    swapped = RESPONSIVE.replace(
        "<th>VRAM/GPU</th><th>PRICE/GPU/HR*</th>", "<th>PRICE/GPU/HR*</th><th>VRAM/GPU</th>"
    )
    with pytest.raises(LayoutChanged, match="holds cells labelled `VRAM/GPU`"):
        _table(swapped)


def test_repeated_labels_are_keyed_by_position() -> None:
    table = _table("<table><tr><th>Price</th><th>Price</th></tr><tr><td>$1</td><td>$2</td></tr></table>")
    assert table.keys == ("#0", "#1")


def test_prices_under_an_unknown_label_and_names_that_are_numbers_are_refused() -> None:
    table = _table(
        "<table><tr><th>GPU</th><th>Price/GPU/hr</th><th>Rate</th></tr>"
        "<tr><td>H100</td><td>$2.99</td><td>$3.10</td></tr></table>"
    )
    table.check_price_columns("GPU", "Price", "Rate")
    with pytest.raises(LayoutChanged, match=r"column `Rate` .* holds prices"):
        table.check_price_columns("GPU", "Price")
    table.check_names("GPU")
    numbers = _table("<table><tr><th>GPU</th><th>Price</th></tr><tr><td>80</td><td>$1</td></tr></table>")
    with pytest.raises(LayoutChanged, match="should name what is priced but holds"):
        numbers.check_names("GPU")
    contact = _table("<table><tr><th>GPU</th></tr><tr><td>Contact sales</td></tr></table>")
    with pytest.raises(LayoutChanged, match="should name what is priced"):
        contact.check_names("GPU")


def test_grid_and_aria_tables_keep_marks_too() -> None:
    grid = pages.find_table(
        pages.soup(
            "<div><div class='r'><div>Item</div><div>Price</div></div>"
            "<div class='r'><div>H100</div><div>$0.74†</div></div>"
            "<div class='r'><div>H200</div><div>$0.99</div></div></div>"
        ),
        required=("Item", "Price"),
        where=WHERE,
    )
    assert [row.marks for row in grid.read()] == [{"price": "†"}, {}]
    aria = pages.tables(
        pages.soup(
            "<div role='table'><div role='row'><span role='columnheader'>Price</span></div>"
            "<div role='row'><span role='cell'>$1*</span></div></div>"
        ),
        where=WHERE,
    )[0]
    assert aria.read()[0].marks == {"price": "*"}


def test_cell_marks_of_a_string_and_of_a_cell_with_a_nested_table() -> None:
    assert pages.cell_marks("4^1") == "^1"
    nested = pages.soup("<td>$2*<table><tr><td>x†</td></tr></table></td>").td
    assert nested is not None and pages.cell_marks(nested) == "*"


# --- one page, revalidated -----------------------------------------------------------------------


def _response(status: int) -> RawResponse:
    return RawResponse("https://example.com/pricing", "GET", status, datetime(2026, 12, 1, tzinfo=UTC))


def test_read_pages_turns_a_304_into_unchanged_scopes_and_reads_the_rest() -> None:
    items = list(
        pages.read_pages(
            [_response(304), _response(200)],
            ("on_demand:global", {"pricing_type": "spot"}),
            lambda r: iter([f"read {r.status}"]),
        )
    )
    reason = "https://example.com/pricing not modified (HTTP 304)"
    assert items == [
        Unchanged({"scope": "on_demand:global"}, reason=reason),
        Unchanged({"pricing_type": "spot"}, reason=reason),
        "read 200",
    ]
