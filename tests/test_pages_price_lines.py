"""pages.price_lines / card_around / visible_strings: cards found by their one price line."""

from __future__ import annotations

import bs4

from connectors import pages


def is_rate(tag: bs4.Tag, text: str) -> bool:
    money = pages.parse_money(text)
    return money is not None and money.unit is not None


def texts(tags: list[bs4.Tag]) -> list[str]:
    return [pages.clean(t.get_text(" ")) for t in tags]


GRID = (
    "<html><head><title>$9.99/h</title><script>var p = '$1/h';</script></head><body>"
    "<div class='grid'>"
    "<div class='card'><h3>A</h3><div><span>$</span><span>2.19</span><span>/h</span></div>"
    "<p>8x GPUs</p></div>"
    "<div class='card'><h3>B</h3><p>$ 3.00/h</p>"
    "<p>a paragraph that mentions $1.00/h in passing and goes on for a good while</p></div>"
    "</div></body></html>"
)


def test_a_price_split_over_spans_is_one_line_and_script_or_title_are_not_read() -> None:
    doc = pages.soup(GRID)
    # the spans' common parent reads as one price; the title, the script and the paragraph do not
    assert texts(pages.price_lines(doc, is_rate)) == ["$ 2.19 /h", "$ 3.00/h"]


def test_a_long_paragraph_is_not_a_price_line() -> None:
    doc = pages.soup("<div><p>We charge $1.00/h for this, and it is a very long sentence about it.</p></div>")
    assert pages.price_lines(doc, is_rate) == []
    assert texts(pages.price_lines(doc, is_rate, max_chars=200)) == [
        "We charge $1.00/h for this, and it is a very long sentence about it."
    ]


def test_the_innermost_line_wins() -> None:
    doc = pages.soup("<div><p><strong>$2.00/h</strong></p></div>")
    (line,) = pages.price_lines(doc, is_rate)
    assert line.name == "strong"


def test_each_card_is_the_largest_block_with_one_line() -> None:
    doc = pages.soup(
        "<main><div class='grid'>"
        "<div class='card'><h3>A</h3><div><p>$2.19/h</p></div></div>"
        "<div class='card'><h3>B</h3><p>$3.00/h</p></div>"
        "</div></main>"
    )
    lines = pages.price_lines(doc, is_rate)
    cards = [pages.card_around(line, lines, doc) for line in lines]
    assert [c.get("class") for c in cards] == [["card"], ["card"]]
    assert [pages.clean(c.h3.get_text()) for c in cards if c.h3 is not None] == ["A", "B"]


def test_visible_strings_leave_out_scripts_and_styles() -> None:
    doc = pages.soup("<div><style>p{}</style><p>one</p><script>two()</script><span>three</span></div>")
    div = doc.find("div")
    assert div is not None
    assert pages.visible_strings(div) == ["one", "three"]
