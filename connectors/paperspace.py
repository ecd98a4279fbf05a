"""Paperspace (DigitalOcean): dedicated GPU machine prices from the public pricing page.

Source: `GET https://www.paperspace.com/pricing` (keyless Webflow HTML, one request a run,
revalidated with the last run's ETag / Last-Modified). Under "On-Demand Compute" / "Dedicated
GPUs" each GPU type is a card: a heading with the type ("H100", "A100-80G", "A4000", ... "M4000"),
a price block "$ 0.76 / hour", a spec list ("45GB RAM", "8 vCPU", "16 GB GPU") and "Multi-GPU
types: 2x 4x". Cards are found by that "Multi-GPU types" label, not by position or class.

Prices are per machine-hour of the one-GPU type, USD. Multi-GPU machines: the page says "Multiply
the specs and price of each type above by the number of GPUs", so an `n`x machine costs `n` times
the card price; without that sentence only the one-GPU machines are offered and the others are
`Excluded("multi_gpu_price_not_stated")`. `instance_type` follows Paperspace's machine names:
the card type for one GPU, `<type>x<n>` otherwise ("A4000x2").

Quirks handled:
- Webflow keeps superseded blocks in the markup with the `hide` utility class (display: none):
  an old H100 price of $3.09 and a legacy Windows card row. Hidden blocks are skipped; a reader
  never sees them.
- A price with footnote marks ("2.24*", "1.15**") is explained by the paragraph that starts with
  the same marks. "pricing is for a 3-year commitment" makes it a commitment price, not on-demand:
  `Excluded("commitment_price")`. When that footnote also says "On-demand pricing for <type> is
  $X/hour", $X is the on-demand offer (`provider_data["price_from_footnote"] = True`, and
  `"promo"` when the note calls it a promo price). A marked price whose footnote cannot be found
  is a wrong row (`problem`), never read as on-demand.
- No spot: the page sells none. Billing granularity is not stated on the page.

A page without any "Multi-GPU types" card, or whose cards have no "/ hour" price block at all,
raises `LayoutChanged`; one card without a readable price is a wrong row (`problem`).
Scope: `pricing:dedicated_gpus`.

What is current (checked 2026-12-01 with the search tools): the only layout known is the 2024-01
Wayback capture. DigitalOcean's "Upcoming Changes for Paperspace Customers"
(docs.digitalocean.com/products/paperspace/details/changes) still sends customers to the
Paperspace pricing page for prices, so the page is still the documented price source; no later
capture or peer parse of it was found. Whether the cards (and the "Multiply the specs and price"
sentence) survive, only a live run can settle: a page without `Multi-GPU types` cards raises
`LayoutChanged` naming that label, never an empty catalog. Prices are read with the currency the
card shows (a "€" card is EUR), "from" prices are flagged (`price_is_from`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import bs4

from connectors import pages
from connectors.base import (
    HOURS_PER_UNIT,
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    Unchanged,
    excluded,
    per_hour,
)
from connectors.http import Client

name = "paperspace"
requires: tuple[str, ...] = ()

PAGE_URL = "https://www.paperspace.com/pricing"
WHERE = "the Dedicated GPUs cards of paperspace.com/pricing"
SCOPE = "pricing:dedicated_gpus"
REGION = "global"
CARD_LABEL = "Multi-GPU types"
MULTIPLY_RULE = re.compile(r"multiply the specs and price of each type above by the number of gpus", re.I)
_MARKS = re.compile(r"([*\u2020\u2021]+)")
_HOUR_TEXT = re.compile(r"^\s*/\s*(hour|hr|h)\s*$", re.I)
_COMMITMENT = re.compile(r"\b(\d+)[\s-]*(year|month)\s+commitment\b", re.I)


@dataclass(frozen=True)
class Card:
    """One visible GPU card as the page states it."""

    gpu_type: str
    price_text: str  # raw, footnote marks kept
    specs: tuple[str, ...]
    multi_gpu: tuple[int, ...]  # the extra counts ("2x 4x" -> (2, 4)); () for "none"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    yield from pages.read_pages(responses, (SCOPE,), page_offers)


def page_offers(response: RawResponse) -> Iterator[Offer | Excluded]:
    root = pages.soup(response)
    found = [card for block in pages.cards(root, label=CARD_LABEL, where=WHERE) if (card := read_card(block))]
    if not found:
        raise LayoutChanged(f"no visible card with `{CARD_LABEL}` in {WHERE}; has the page layout changed?")
    if not any(card.price_text for card in found):
        raise LayoutChanged(
            f"no card in {WHERE} has a price block ending in `/ hour`; has the page layout changed?"
        )
    notes = footnotes(root)
    multiply = bool(MULTIPLY_RULE.search(pages.clean(root.get_text(" "))))
    left_out: Counter[str] = Counter()
    for card in found:
        counts = (1, *card.multi_gpu) if multiply else (1,)
        if not multiply and card.multi_gpu:
            left_out["multi_gpu_price_not_stated"] += len(card.multi_gpu)
        price, problem, extra = card_price(card, notes)
        if price is None:  # a commitment price with no on-demand alternative on the page
            left_out["commitment_price"] += len(counts)
            continue
        if extra.get("price_from_footnote"):
            left_out["commitment_price"] += len(counts)  # the card's own figure is left out
        specs = read_specs(card.specs)
        money = pages.parse_money(card.price_text)
        currency = (money.currency if money is not None else "") or "USD"
        if money is not None and money.is_from and not extra.get("price_from_footnote"):
            extra = {**extra, "price_is_from": True}
        for count in counts:
            yield Offer(
                provider=name,
                instance_type=card.gpu_type if count == 1 else f"{card.gpu_type}x{count}",
                region=REGION,
                pricing_type="on_demand",
                price_source="list",
                price_per_hour=round(price * count, 6) if math.isfinite(price) else price,
                currency=currency,
                gpu_name_raw=card.gpu_type,
                gpu_count=float(count),
                gpu_memory_gb_raw=specs.vram_gb,
                vcpus=specs.vcpus * count if specs.vcpus else None,
                ram_gb=specs.ram_gb * count if specs.ram_gb else None,
                provider_data={
                    "price_text": card.price_text,
                    "price_per_gpu_type_hour": price,
                    "gpu_description": specs.description,
                    "multi_gpu_types": list(card.multi_gpu),
                    **extra,
                },
                scope=SCOPE,
                problem=problem,
            )
    yield from excluded(left_out)


def _hidden(tag: bs4.Tag, card: bs4.Tag) -> bool:
    """Whether `tag` (or an ancestor inside the card) carries Webflow's `hide` class."""
    node: bs4.Tag | None = tag
    while isinstance(node, bs4.Tag):
        if "hide" in (node.get("class") or ()):
            return True
        if node is card:
            return False
        node = node.parent
    return False


def read_card(block: bs4.Tag) -> Card | None:
    """The visible type, price, specs and multi-GPU counts of one card; None for a hidden card."""
    if _hidden(block, block):
        return None
    headings = [h for h in block.find_all(["h1", "h2", "h3", "h4", "h5", "h6"]) if not _hidden(h, block)]
    if not headings:
        raise LayoutChanged(
            f"a `{CARD_LABEL}` card without a heading in {WHERE}; has the page layout changed?"
        )
    gpu_type = pages.clean(headings[0].get_text(" "))
    prices = []
    for unit in block.find_all(string=_HOUR_TEXT):
        wrap = unit.parent.parent if isinstance(unit.parent, bs4.Tag) else None
        if isinstance(wrap, bs4.Tag) and not _hidden(wrap, block):
            prices.append(" ".join(wrap.get_text(" ").split()))
    specs = tuple(pages.clean(li.get_text(" ")) for li in block.find_all("li") if not _hidden(li, block))
    info = ""
    for node in block.find_all(string=True):
        if pages.label_in(str(node), CARD_LABEL) and isinstance(node.parent, bs4.Tag):
            following = node.parent.find_next_sibling()
            info = pages.clean(following.get_text(" ")) if isinstance(following, bs4.Tag) else ""
            break
    multi = tuple(int(n) for n in re.findall(r"(\d+)\s*[x×]", info, re.I))
    return Card(gpu_type, prices[0] if prices else "", specs, multi)


def footnotes(root: bs4.Tag) -> dict[str, str]:
    """Paragraphs that start with footnote marks, by mark ("*" -> "*$2.24/hour pricing is ...")."""
    notes: dict[str, str] = {}
    for paragraph in root.find_all("p"):
        text = " ".join(paragraph.get_text(" ").split())
        if match := re.match(r"^([*\u2020\u2021]+)", text):
            notes.setdefault(match.group(1), text)
    return notes


def card_price(card: Card, notes: Mapping[str, str]) -> tuple[float | None, str | None, dict[str, object]]:
    """(on-demand USD per hour of the one-GPU type, problem, provider extras).

    None as the price means the card shows a commitment price and the page gives no on-demand one.
    """
    money = pages.parse_money(card.price_text)
    if money is None:
        return math.nan, f"card {card.gpu_type!r} has no readable price ({card.price_text!r})", {}
    mark = _MARKS.search(card.price_text.split("/")[0])
    if mark:
        note = notes.get(mark.group(1))
        if note is None:
            return (
                math.nan,
                f"price {card.price_text!r} carries {mark.group(1)!r} but no footnote says why",
                {},
            )
        if _COMMITMENT.search(note):
            on_demand = re.search(
                rf"on-demand pricing for {re.escape(card.gpu_type)} is ([$€£]\s*[\d.,]+\s*/\s*hour)",
                note,
                re.I,
            )
            if on_demand is None:
                return None, None, {}
            money = pages.parse_money(on_demand.group(1))
            if money is None:
                return math.nan, f"footnote {note!r} has no readable on-demand price", {}
            extras: dict[str, object] = {
                "price_from_footnote": True,
                "footnote": note,
                "commitment_price_text": card.price_text,
                "promo": "promo" in note.lower(),
            }
            return (*_hourly(money, card), extras)
    return (*_hourly(money, card), {})


def _hourly(money: pages.Money, card: Card) -> tuple[float, str | None]:
    unit = money.unit or "hour"  # the price block's "/ hour" element was how the card was found
    if unit not in HOURS_PER_UNIT:
        return math.nan, f"card {card.gpu_type!r} price has unit {unit!r}"
    if money.per_gpu is False and card.multi_gpu:
        # a card is a one-GPU machine type; a per-instance price beside multi-GPU types is unplaceable
        raise LayoutChanged(f"card {card.gpu_type!r} of {WHERE} prices per instance ({card.price_text!r})")
    amount = per_hour(money.amount, unit)
    if not money.currency:
        return math.nan, f"card {card.gpu_type!r} price {card.price_text!r} states no currency"
    if not math.isfinite(amount) or amount <= 0:
        return amount, f"price {amount} is not a positive price"
    return round(amount, 6), None


@dataclass(frozen=True)
class Specs:
    vram_gb: float | None
    vcpus: float | None
    ram_gb: float | None
    description: str | None


def read_specs(items: Sequence[str]) -> Specs:
    """ "16 GB GPU", "30 GB RAM", "8 vCPU", "NVIDIA A100 GPU" -> VRAM, RAM, vCPUs, description."""
    vram = vcpus = ram = None
    description = None
    for item in items:
        lowered = item.lower()
        if lowered.endswith("ram"):
            ram = pages.parse_gb(item)
        elif "vcpu" in lowered:
            vcpus = pages.parse_vcpus(item)
        elif re.fullmatch(r"\d+(?:\.\d+)?\s*GB\s+GPU", item, re.I):
            vram = pages.parse_gb(item)
        elif "gpu" in lowered:
            description = item
    return Specs(vram, vcpus, ram, description)
