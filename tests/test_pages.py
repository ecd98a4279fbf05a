"""The pricing-page toolkit: value parsers, tables/grids/sections/cards by label, embedded data."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest

from connectors import pages
from connectors.base import LayoutChanged, RawResponse, Unchanged
from connectors.http import make_client
from connectors.pages import GpuLabel, Money

# --- money ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$2.49/GPU/hr", Money(2.49, "USD", "hour", True, False)),
        ("€1,55 per hour", Money(1.55, "EUR", "hour", None, False)),
        ("from $1.55", Money(1.55, "USD", None, None, True)),
        ("$1,234.50/mo", Money(1234.50, "USD", "month", None, False)),
        ("2.49 USD/h", Money(2.49, "USD", "hour", None, False)),
        ("$4.29/GPU-hr", Money(4.29, "USD", "hour", True, False)),
        ("from $0.74**", Money(0.74, "USD", None, None, True)),
        ("Starting at $2.00/hr", Money(2.0, "USD", "hour", None, True)),
        ("as low as £0.80 per GPU per hour", Money(0.80, "GBP", "hour", True, True)),
        ("€1.234,50 / month", Money(1234.50, "EUR", "month", None, False)),
        ("$19.92 per instance-hour", Money(19.92, "USD", "hour", False, False)),
        ("$0.0125/min", Money(0.0125, "USD", "minute", None, False)),
        ("$2.99\u00a0/\u00a0GPU\u2011hour", Money(2.99, "USD", "hour", True, False)),
        ("$1,234", Money(1234.0, "USD", None, None, False)),
    ],
)
def test_parse_money(text: str, expected: Money) -> None:
    assert pages.parse_money(text) == expected


@pytest.mark.parametrize("text", ["Contact sales", "Contact us", "Talk to sales", "Request a quote"])
def test_contact_is_not_a_price(text: str) -> None:
    assert pages.parse_money(text) is None
    assert pages.is_contact(text)
    assert not pages.is_not_available(text)


@pytest.mark.parametrize("text", ["N/A", "—", "-", "", "Coming soon", "Sold out"])
def test_not_available_is_not_a_price(text: str) -> None:
    assert pages.parse_money(text) is None
    assert pages.is_not_available(text)
    assert not pages.is_contact(text)


def test_wrong_prices_are_kept_for_the_caller_to_flag() -> None:
    # a $0 or negative published price is a wrong row (quarantined), not "no price"
    assert pages.parse_money("$0.00") == Money(0.0, "USD", None, None, False)
    assert pages.parse_money("-$1.00/hr") == Money(-1.0, "USD", "hour", None, False)


def test_a_bare_number_has_no_currency_unless_the_caller_gives_one() -> None:
    assert pages.parse_money("1.55") == Money(1.55, "", None, None, False)
    assert pages.parse_money("1.55", currency="EUR") == Money(1.55, "EUR", None, None, False)
    # a stated currency wins over the default
    assert pages.parse_money("$1.55", currency="EUR").currency == "USD"


def test_the_first_priced_number_is_the_price() -> None:
    # the count before it is not a price: only numbers with a currency are looked at first
    assert pages.parse_money("8 GPUs at $2.49/GPU/hr") == Money(2.49, "USD", "hour", True, False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PRICE/GPU/HR*", ("hour", True)),
        ("On-demand, GPU-hour", ("hour", True)),
        ("Spot price, GPU-hour*", ("hour", True)),
        ("Price per month", ("month", None)),
        ("Price / instance / hour", ("hour", False)),
        ("On-demand", (None, None)),
    ],
)
def test_price_unit_of_headers(text: str, expected: tuple[str | None, bool | None]) -> None:
    assert pages.price_unit(text) == expected


# --- GPU labels and numbers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8x H100 SXM5 80GB", GpuLabel(8, "H100 SXM5 80GB", 80.0)),
        ("HGX B200", GpuLabel(None, "B200", None, "HGX")),
        (
            "RTX PRO 6000 Blackwell Server Edition",
            GpuLabel(None, "RTX PRO 6000 Blackwell Server Edition", None),
        ),
        ("NVIDIA H200 141GB", GpuLabel(None, "H200 141GB", 141.0)),
        ("NVIDIA HGX H100", GpuLabel(None, "H100", None, "HGX")),
        ("H100 x 8", GpuLabel(8, "H100", None)),
        ("4× A100 SXM4 40 GB", GpuLabel(4, "A100 SXM4 40 GB", 40.0)),
        ("1x GH200 96GB HBM3", GpuLabel(1, "GH200 96GB HBM3", 96.0)),
        ("AMD MI300X 192GB", GpuLabel(None, "MI300X 192GB", 192.0)),
        ("NVIDIA\u00a0L40S*", GpuLabel(None, "L40S", None)),
    ],
)
def test_parse_gpu_label(text: str, expected: GpuLabel) -> None:
    assert pages.parse_gpu_label(text) == expected


def test_rtx_6000_is_a_name_not_a_count() -> None:
    assert pages.parse_gpu_label("RTX 6000 Ada").count is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8", 8), ("8x", 8), ("x8", 8), ("8 GPUs", 8), ("1x", 1), ("8-40", None), ("", None), (4, 4)],
)
def test_parse_count(text: str | int, expected: int | None) -> None:
    assert pages.parse_count(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80GB", 80.0),
        ("80 GB", 80.0),
        ("141GB HBM3e", 141.0),
        ("48 GiB", 48.0),  # GiB kept as the stated number
        ("1.5 TB", 1500.0),
        ("1,024 GiB", 1024.0),
        ("2900 GiB", 2900.0),
        ("200", 200.0),  # a bare RAM cell under a "RAM, GB" header
        ("32-160", None),  # a range is not one value
        ("H100", None),  # a number inside a name is not a size
        ("", None),
    ],
)
def test_parse_gb(text: str, expected: float | None) -> None:
    assert pages.parse_gb(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("208 vCPUs", 208.0), ("26 vCPU", 26.0), ("104 cores", 104.0), ("16", 16.0), ("8-40", None)],
)
def test_parse_vcpus(text: str, expected: float | None) -> None:
    assert pages.parse_vcpus(text) == expected


# --- text and labels -----------------------------------------------------------------------------


def test_clean_drops_invisibles_footnotes_and_odd_spaces() -> None:
    assert pages.clean("  PRICE/GPU/HR*\u00a0 ") == "PRICE/GPU/HR"
    assert pages.clean("On\u2011demand\u2020") == "On-demand"
    assert pages.clean("H100\u200b SXM\u2009 ¹") == "H100 SXM"
    assert pages.clean("Spot price [2]") == "Spot price"
    assert pages.clean(None) == ""


@pytest.mark.parametrize("text", ["On-Demand", "on demand", "On\u2011demand*", " ON  DEMAND ", "On-demand¹"])
def test_label_matches_is_tolerant(text: str) -> None:
    assert pages.label_matches(text, "on-demand")


def test_label_matches_is_not_containment() -> None:
    assert not pages.label_matches("On-demand, GPU-hour", "On-demand")
    assert pages.label_in("On-demand, GPU-hour", "On-demand")
    assert not pages.label_in("Demandware", "demand")
    assert not pages.label_matches("", "")


# --- tables --------------------------------------------------------------------------------------

TABLE_PAGE = """
<html><body>
<h2>Other</h2><table><tr><th>Plan</th><th>Price</th></tr><tr><td>Basic</td><td>$5</td></tr></table>
<h2>GPU instances</h2>
<table>
  <thead><tr><th>Price&nbsp;/ GPU / hr*</th><th>GPU</th><th>VRAM</th><th>On&#8209;Demand†</th></tr></thead>
  <tbody>
    <tr><td>$2.49</td><th>8x H100 SXM5 80GB</th><td>80 GB</td><td>yes</td></tr>
    <tr><td>Contact sales</td><th>HGX B200</th><td>180&nbsp;GB</td><td>no</td></tr>
  </tbody>
</table>
</body></html>
"""


def test_find_table_by_labels_in_any_order_with_nbsp_and_footnotes() -> None:
    table = pages.find_table(pages.soup(TABLE_PAGE), required=["GPU", "On-demand"], where="test page")
    assert table.headers == ("Price / GPU / hr", "GPU", "VRAM", "On-Demand")
    assert table.where == "test page table 2"
    assert table.column("gpu") == 1  # exact match wins over "Price / GPU / hr" containing "GPU"
    assert table.column("price/gpu/hr") == 0
    first, second = table.rows
    assert table.get(first, "GPU") == "8x H100 SXM5 80GB"
    assert table.get(second, "VRAM") == "180 GB"
    assert table.get(first, "Spot") is None
    assert table.get(first, "Spot", default="-") == "-"
    assert table.elements[0].name == "tr"
    assert table.records()[0]["On-Demand"] == "yes"


def test_a_table_without_thead_uses_its_first_row() -> None:
    [first, _] = pages.tables(pages.soup(TABLE_PAGE), where="p")
    assert first.headers == ("Plan", "Price")
    assert first.rows == (("Basic", "$5"),)


def test_a_renamed_header_names_the_label_and_where() -> None:
    renamed = TABLE_PAGE.replace("On&#8209;Demand†", "Pay as you go")
    with pytest.raises(LayoutChanged) as err:
        pages.find_table(pages.soup(renamed), required=["GPU", "On-demand"], where="example.com/pricing")
    message = str(err.value)
    assert "GPU, On-demand" in message and "example.com/pricing" in message
    assert "Pay as you go" in message  # the headers it did find, to show what changed
    assert "layout changed" in message


def test_a_missing_column_names_the_label() -> None:
    table = pages.find_table(pages.soup(TABLE_PAGE), required=["GPU"], where="example.com/pricing")
    with pytest.raises(LayoutChanged, match=r"`Spot` column not found in example\.com/pricing table 2"):
        table.column("Spot")


def test_a_removed_table_raises() -> None:
    with pytest.raises(LayoutChanged, match="no table with columns GPU, On-demand found in the page"):
        pages.find_tables(
            pages.soup("<p>We moved our prices.</p>"), required=["GPU", "On-demand"], where="the page"
        )


ARIA_PAGE = """
<div role="table">
  <div role="row"><span role="columnheader">GPU</span><span role="columnheader">Spot</span></div>
  <div role="row"><span role="cell">A100</span><span role="cell">$0.90</span></div>
</div>
"""


def test_aria_tables() -> None:
    table = pages.find_table(pages.soup(ARIA_PAGE), required=["Spot", "GPU"], where="p")
    assert table.rows == (("A100", "$0.90"),)


_GRID_HEAD = (
    '<div class="head"><div class="r"><div class="c"><p>Item</p></div>'
    '<div class="c"><p>Price, GPU-hour</p></div></div></div>'
)


def _grid_row(item: str, price: str) -> str:
    return f'<div class="r"><div class="c"><p>{item}</p></div><div class="c"><p>{price}</p></div></div>'


GRID_PAGE = f"""
<div class="block"><h2>On-demand</h2>
  <div class="t">{_GRID_HEAD}
  <div class="body">{_grid_row("NVIDIA HGX H100", "$2.95")}{_grid_row("NVIDIA HGX H200", "from $3.50")}</div>
  </div>
</div>
<div class="block"><h2>Spot</h2>
  <div class="t">{_GRID_HEAD}<div class="body">{_grid_row("NVIDIA HGX H100", "$1.25")}</div></div>
</div>
"""


def test_div_grids_are_read_by_their_header_labels() -> None:
    found = pages.find_tables(pages.soup(GRID_PAGE), required=["Item", "Price"], where="grid page")
    assert [t.where for t in found] == ["grid page grid 1", "grid page grid 2"]
    on_demand, spot = found
    assert on_demand.headers == ("Item", "Price, GPU-hour")
    assert on_demand.rows == (("NVIDIA HGX H100", "$2.95"), ("NVIDIA HGX H200", "from $3.50"))
    assert spot.rows == (("NVIDIA HGX H100", "$1.25"),)


def test_section_bounds_a_table_to_its_heading() -> None:
    doc = pages.soup(GRID_PAGE)
    spot = pages.find_table(pages.section(doc, "spot", where="p"), required=["Item"], where="p spot")
    assert spot.rows == (("NVIDIA HGX H100", "$1.25"),)


def test_section_of_a_flat_list_of_headings() -> None:
    doc = pages.soup(TABLE_PAGE)
    gpu = pages.section(doc, "GPU Instances", where="p")
    assert [t.headers[1] for t in pages.tables(gpu, where="p")] == ["GPU"]
    other = pages.section(doc, "other", where="p")
    assert [t.headers for t in pages.tables(other, where="p")] == [("Plan", "Price")]


def test_section_by_aria_label() -> None:
    doc = pages.soup('<div role="tabpanel" aria-label="8x instances"><p>$2.00</p></div>')
    assert pages.section(doc, "8x Instances", where="p").get_text() == "$2.00"


def test_a_missing_section_names_the_heading_and_the_headings_found() -> None:
    with pytest.raises(LayoutChanged, match=r"heading `Preemptible` not found in the page.*On-demand"):
        pages.section(pages.soup(GRID_PAGE), "Preemptible", where="the page")


CARD_PAGE = """
<div class="grid">
  <div class="card"><h3>H100</h3><div><span>80 GB</span></div><p class="price">$2.24/hr</p></div>
  <div class="card"><h3>A100</h3><div><span>40 GB</span></div><p class="price">$1.10/hr</p></div>
  <div class="card"><h3>Enterprise</h3><p>Contact sales</p></div>
</div>
"""


def test_cards_are_the_repeated_blocks_holding_a_label() -> None:
    found = pages.cards(pages.soup(CARD_PAGE), label="/hr", where="p")
    assert [c.h3.get_text() for c in found] == ["H100", "A100"]
    with pytest.raises(LayoutChanged, match="no card with the text `per month` found in p"):
        pages.cards(pages.soup(CARD_PAGE), label="per month", where="p")


# --- embedded data -------------------------------------------------------------------------------


def test_embedded_next_data_is_preferred_input() -> None:
    data = {"props": {"pageProps": {"gpus": [{"name": "H100", "price": 2.49}]}}}
    page = f'<html><script id="__NEXT_DATA__" type="application/json">{json.dumps(data)}</script></html>'
    assert pages.embedded_json(pages.soup(page)) == data
    found = pages.find_objects(pages.embedded_json(page), lambda o: "price" in o)
    assert found == [{"name": "H100", "price": 2.49}]


def test_a_json_data_island_and_none() -> None:
    island = '<script type="application/json" id="pricing-data">[1, 2]</script>'
    assert pages.embedded_json(island) == [1, 2]
    assert pages.embedded_json("<p>no data</p>") is None
    # a broken island is not data: the rendered markup is the fallback
    assert pages.embedded_json('<script id="__NEXT_DATA__">{oops</script>') is None


def test_json_ld_offers() -> None:
    product = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": "H100 SXM",
        "offers": {
            "@type": "Offer",
            "price": "2.49",
            "priceCurrency": "USD",
            "priceSpecification": {
                "@type": "UnitPriceSpecification",
                "price": "2.49",
                "unitText": "GPU-hour",
            },
        },
    }
    page = (
        f'<script type="application/ld+json">{json.dumps(product)}</script>'
        '<script type="application/ld+json">{not json</script>'
    )
    assert pages.json_ld(page) == [product]
    assert pages.json_ld_offers(page) == [
        {"name": "H100 SXM", "price": "2.49", "priceCurrency": "USD", "unitText": "GPU-hour", "sku": None}
    ]


# --- fetching ------------------------------------------------------------------------------------


def test_fetch_page_sends_validators_and_returns_304() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.headers.get("if-none-match") == '"v1"':
            return httpx.Response(304, headers={"etag": '"v1"'})
        return httpx.Response(200, headers={"etag": '"v1"', "content-type": "text/html"}, text="<p>hi</p>")

    url = "https://example.com/pricing"
    with make_client(transport=httpx.MockTransport(handler)) as client:
        first = pages.fetch_page(client, url)
        second = pages.fetch_page(client, url, previous={url: {"etag": '"v1"', "last-modified": "x"}})
    assert seen[0].headers["accept"].startswith("text/html")
    assert "if-none-match" not in seen[0].headers
    assert seen[1].headers["if-modified-since"] == "x"
    assert first.status == 200 and not pages.is_not_modified(first)
    assert pages.is_not_modified(second)
    assert list(pages.unchanged(second, ["on_demand", "spot"])) == [
        Unchanged({"scope": "on_demand"}, reason=f"{url} not modified (HTTP 304)"),
        Unchanged({"scope": "spot"}, reason=f"{url} not modified (HTTP 304)"),
    ]


def test_soup_decodes_by_the_declared_charset() -> None:
    body = "<p>€1,55 pro Stunde</p>".encode("iso-8859-15")
    response = RawResponse(
        url="https://example.com",
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        content_type="text/html; charset=ISO-8859-15",
        body=body,
    )
    text = pages.soup(response).get_text()
    assert text == "€1,55 pro Stunde"
    assert pages.parse_money(text) == Money(1.55, "EUR", None, None, False)


def _page(body: bytes) -> RawResponse:
    return RawResponse(
        url="https://example.test/pricing",
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        content_type="text/html; charset=utf-8",
        body=body,
    )


def test_a_page_cut_off_in_transit_is_refused_not_read_as_a_smaller_table():
    whole = (
        b"<html><body><table><tr><th>GPU</th><th>On-demand</th></tr>"
        + b"<tr><td>H100</td><td>$2</td></tr>" * 50
    )
    whole += b"</table></body></html>"
    assert pages.find_table(pages.soup(_page(whole)), required=["GPU"], where="test").rows
    with pytest.raises(LayoutChanged, match="ends before `</html>`"):
        pages.soup(_page(whole[: len(whole) // 3]))
    # an excerpt that never had the document tags is read as it is
    assert pages.soup(_page(b"<table><tr><th>GPU</th></tr></table>")).find("table") is not None
