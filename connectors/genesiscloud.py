"""Genesis Cloud: on-demand GPU prices from the public pricing page, one card per GPU platform.

Source: `GET https://www.genesiscloud.com/pricing` (static Webflow HTML, no auth, one request a
run, no documented rate limit). Genesis Cloud's API (https://developers.genesiscloud.com, the
`compute/v1` OpenAPI its Go and JS SDKs are generated from, read 2026-12-02) has no price or
instance-type listing (instances, availability, quotas, volumes ... all with a token), so the
page is the only keyless price source; peers that read Genesis prices scrape it too.

No capture of the page exists in ../shared; the structure here is the one peers' scrapers
describe (2025-2026): one card per GPU platform with a heading ("NVIDIA HGX H100"), a price line
("Starting at* $ 1.60/h", "$3.15/h"), a list naming the node ("8x NVIDIA H100 GPU 80 GB") and
"Data center location(s): ...". The parser is written against that, found by what a reader sees,
never by Webflow class names:

- A *price holder* is the innermost element whose text is one short price with a time unit
  (`pages.parse_money`); its *card* is the largest block around it holding no other price. The
  card's heading names the GPU; a card whose heading names no NVIDIA/AMD GPU (storage, CPU
  instances) is `Excluded("not_a_gpu_instance")`.
- Every price is read by `pages.quote` with its whole basis: currency and time unit from the
  price text; per GPU or per instance from the price text, else from the card ("per GPU",
  "per node"), else from the page's footnote the price's asterisk points to (a line starting "*"
  that says "per GPU"). Stated nowhere: that card is a wrong row (`problem`), and when every card
  is so, `LayoutChanged` (guessing would be off by the node's GPU count).
- "Starting at" / "from" before the price: `provider_data["price_is_from"]`.
- The node's GPU count and memory are read from the card ("8x NVIDIA H100 GPU 80 GB"). A per-GPU
  price with no count stated is offered as 1 GPU and says `gpu_count_stated: False`; a
  per-instance price with no count is a wrong row.
- A card priced for a commitment (reserved, contract, long-term, without "on-demand"):
  `Excluded("commitment_price")`. A GPU card whose price line asks for a quote ("RFQ", "Contact
  sales"; links and buttons are actions, not price lines): `Excluded("contact_sales")`.
- Two cards naming the same node (a banner repeating a card): the first stands,
  `Excluded("repeated_card")`. No GPU card with a readable price at all: `LayoutChanged`.
- Prices are kept in the currency the page prints (the console bills in USD).

No spot (Genesis Cloud sells none). `region="global"`: the page prices by platform, not site;
the card's locations go to `provider_data["locations"]`. Scope `on_demand:gpu-instances`.
`instance_type` is `"<n>x <heading>"`, e.g. `"8x NVIDIA HGX H100"`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import bs4

from connectors import pages
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, Unchanged, excluded

name = "genesiscloud"
requires: tuple[str, ...] = ()

PAGE_URL = "https://www.genesiscloud.com/pricing"
WHERE = "the GPU cards of genesiscloud.com/pricing"
SCOPE = "on_demand:gpu-instances"
REGION = "global"

_GPU_HEADING = re.compile(r"\b(NVIDIA|AMD)\b", re.I)
_MARKS = re.compile(r"[™®*]")
_TIER_WORDS = re.compile(r"\bon[\s-]*demand\b", re.I)
_COMMITMENT = re.compile(r"\b(reserved|reservation|commit(?:ment|ted)?|contract|long[\s-]term)\b", re.I)
_QUOTE_ONLY = re.compile(r"\bRFQ\b", re.I)
_FROM_BEFORE = re.compile(r"(starting\s+(at|from)|\bfrom|as\s+low\s+as)\W*$", re.I)
_PER_GPU = re.compile(r"\bper\s+GPU\b|/\s*GPU\b", re.I)
_PER_NODE = re.compile(r"\bper\s+(node|server|instance|machine)\b", re.I)
# "8x NVIDIA H100 GPU 80 GB", "8 x NVIDIA HGX B200 (180 GB)"
_NODE = re.compile(r"\b(\d{1,2})\s*[x×]\s*(?:NVIDIA|AMD)\b(?:(?!\d+\s*[x×]).){0,40}?\b(\d{2,3})\s*GB\b", re.I)
_COUNT = re.compile(r"\b(\d{1,2})\s*[x×]\s*(?:NVIDIA|AMD)\b", re.I)
_VCPUS = re.compile(r"\b(\d{1,4})\s*vCPUs?\b", re.I)
_RAM = re.compile(r"\b(\d[\d,.]*\s*(?:GB|GiB|TB))\s*(?:of\s+)?(?:system\s+)?RAM\b", re.I)
_LOCATIONS = re.compile(r"data\s*cent(?:er|re)\s*locations?\s*:?\s*(.*)", re.I)
MAX_PRICE_CHARS = 60  # a price holder is one short line, not a paragraph that mentions a price


def fetch(
    client: Any,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    yield from pages.read_pages(responses, (SCOPE,), _page_items)


def _page_items(response: RawResponse) -> Iterator[Offer | Excluded]:
    counts: dict[str, int] = {}
    yield from gpu_offers(pages.soup(response), counts)
    yield from excluded(counts)


def price_holders(root: bs4.Tag) -> list[bs4.Tag]:
    """The price lines of the page: one short price with a time unit, or a request for a quote
    ("RFQ", "Contact sales") standing where a price would (links and buttons are actions)."""
    return pages.price_lines(
        root, lambda tag, text: _is_price(text) or (_is_quote_request(text) and not _is_control(tag))
    )


def _is_price(text: str) -> bool:
    money = pages.parse_money(text)
    return money is not None and money.unit is not None


def _is_control(tag: bs4.Tag) -> bool:
    """A link or button ("Request a quote" on every card) is an action, not where a price stands."""
    return tag.name in ("a", "button") or tag.find_parent(["a", "button"]) is not None


def _is_quote_request(text: str) -> bool:
    return bool(_QUOTE_ONLY.fullmatch(text)) or (pages.is_contact(text) and pages.parse_money(text) is None)


def heading_of(card: bs4.Tag) -> str:
    """The GPU the card is about, marks dropped: its heading element when that names an NVIDIA or
    AMD GPU, else its first short line that does and is not a node line ("8x NVIDIA ..."), as
    Webflow cards style a `<div>` as their title. "" when the card names no GPU."""
    candidates = [t.get_text(" ") for t in card.find_all(["h1", "h2", "h3", "h4", "h5", "h6"])]
    candidates += [t.get_text(" ") for t in card.find_all(None, attrs={"role": "heading"})]
    candidates += pages.visible_strings(card)
    for raw in candidates:
        text = " ".join(_MARKS.sub(" ", pages.clean(raw)).split())
        if _GPU_HEADING.search(text) and len(text) <= MAX_PRICE_CHARS and not _COUNT.search(text):
            return text
    return ""


def card_text(card: bs4.Tag) -> str:
    """A card's text without footnotes (lines starting "*"): a footnote speaks for the page, and a
    card that grew around it (a page of one card) must not read it as its own."""
    strings = pages.visible_strings(card)
    return pages.clean(" ".join(s for s in strings if not s.strip().startswith("*")))


def node_of(text: str) -> tuple[int | None, float | None]:
    """(GPU count, GB per GPU) a card states: "8x NVIDIA H100 GPU 80 GB" -> (8, 80.0)."""
    if match := _NODE.search(text):
        return int(match.group(1)), float(match.group(2))
    if match := _COUNT.search(text):
        return int(match.group(1)), None
    return None, None


def locations_of(card: bs4.Tag) -> list[str]:
    """The sites a card lists after "Data center location(s):"."""
    lines = [pages.clean(s) for s in card.get_text("\n").split("\n")]
    lines = [line for line in lines if line]
    for i, line in enumerate(lines):
        if match := _LOCATIONS.match(line):
            value = match.group(1).strip() or (lines[i + 1] if i + 1 < len(lines) else "")
            return [part.strip() for part in re.split(r",|/|\band\b", value) if part.strip()]
    return []


def footnote_basis(root: bs4.Tag) -> pages.Stated | None:
    """The basis the page's asterisk footnote states ("*Prices per GPU ..."), if it states one."""
    for string in root.find_all(string=True):
        raw = str(string).strip()
        if not raw.startswith("*") or string.parent is None or string.parent.name in ("script", "style"):
            continue
        text = pages.clean(raw)
        if _PER_GPU.search(text):
            return pages.Stated(per_gpu=True, source=f"the footnote {text[:80]!r}")
        if _PER_NODE.search(text):
            return pages.Stated(per_gpu=False, source=f"the footnote {text[:80]!r}")
    return None


def gpu_offers(root: bs4.Tag, counts: dict[str, int]) -> Iterator[Offer]:
    """One offer per priced GPU card, the price read with the basis the page states."""
    holders = price_holders(root)
    footnote = footnote_basis(root)
    seen: set[str] = set()
    basis_errors: list[LayoutChanged] = []
    gpu_cards = priced = 0
    for holder in holders:
        card = pages.card_around(holder, holders, root)
        heading = heading_of(card)
        if not heading:
            counts["not_a_gpu_instance"] = counts.get("not_a_gpu_instance", 0) + 1
            continue
        gpu_cards += 1
        text = card_text(card)
        price_text = pages.clean(holder.get_text(" "))
        if _is_quote_request(price_text):
            counts["contact_sales"] = counts.get("contact_sales", 0) + 1
            continue
        if _COMMITMENT.search(text) and not _TIER_WORDS.search(text):
            counts["commitment_price"] = counts.get("commitment_price", 0) + 1
            continue
        try:
            where = f"`{heading}` in {WHERE}"
            price = pages.quote(price_text, stated=_basis(_card_basis(text), footnote, where), where=where)
        except LayoutChanged as exc:
            basis_errors.append(exc)
            offer = _offer(heading, card, text, None, price_text, problem=str(exc))
        else:
            priced += 1
            offer = _offer(heading, card, text, price, price_text)
        if offer.instance_type in seen:
            # a banner repeating a card's price names the same node: the card listed first stands
            counts["repeated_card"] = counts.get("repeated_card", 0) + 1
            continue
        seen.add(offer.instance_type)
        yield offer
    if basis_errors and not priced:
        raise basis_errors[0]
    if not seen:
        # a page of quote requests only, or prices without a time unit, is not a catalog
        raise LayoutChanged(
            f"no GPU card with a price per unit of time found in {WHERE} ({gpu_cards} GPU cards, "
            f"{len(holders)} price lines); has the page layout changed?"
        )


def _basis(on_card: pages.Stated | None, footnote: pages.Stated | None, where: str) -> pages.Stated | None:
    """What the card says, else the footnote; a card and a footnote that disagree are refused."""
    if on_card and footnote and on_card.per_gpu != footnote.per_gpu:
        raise LayoutChanged(
            f"{where}: {on_card.source} but {footnote.source}; which basis the price is in is unclear "
            "(has the page layout changed?)"
        )
    return on_card or footnote


def _card_basis(text: str) -> pages.Stated | None:
    if _PER_GPU.search(text):
        return pages.Stated(per_gpu=True, source="the card says 'per GPU'")
    if _PER_NODE.search(text):
        return pages.Stated(per_gpu=False, source="the card says 'per node'")
    return None


def _offer(
    heading: str,
    card: bs4.Tag,
    text: str,
    price: pages.Quote | None,
    price_text: str,
    problem: str | None = None,
) -> Offer:
    model = " ".join(_TIER_WORDS.sub(" ", heading).split()).strip(" -")
    count, memory = node_of(text)
    data: dict[str, Any] = {"heading": heading, "price_text": price_text, "locations": locations_of(card)}
    amount = math.nan
    if price is not None:
        data |= price.flags()
        before = text[: text.find(price_text)] if price_text in text else ""
        if _FROM_BEFORE.search(before):
            data["price_is_from"] = True
        if count is None and not price.per_gpu:
            problem = f"price {price_text!r} is per node but the card states no GPU count"
        amount = price.instance_hour(count or 1)
        if not (math.isfinite(amount) and amount > 0):
            problem = problem or f"price {price_text!r} is not a positive number"
        if price.per_gpu:
            data["price_per_gpu_hour"] = price.per_hour()
    if count is None:
        data["gpu_count_stated"] = False
    vcpus = _VCPUS.search(text)
    ram = _RAM.search(text)
    label = pages.parse_gpu_label(model)
    gpu = f"{label.platform} {label.name}" if label.platform else label.name
    return Offer(
        provider=name,
        instance_type=f"{count or 1}x {model}",
        region=REGION,
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=round(amount, 6) if math.isfinite(amount) else amount,
        currency=price.currency if price is not None else "USD",
        gpu_name_raw=gpu,
        gpu_count=float(count or 1),
        gpu_memory_gb_raw=memory,
        vcpus=float(vcpus.group(1)) if vcpus else None,
        ram_gb=pages.parse_gb(ram.group(1)) if ram else None,
        provider_data=data,
        scope=SCOPE,
        problem=problem,
    )
