"""Hetzner: dedicated GPU servers (the GEX line), hourly rates capped at a monthly price, plus a
one-time set-up fee per server.

Sources (public, no auth, no documented rate limit; two requests a run), checked 2026-12-02:

* `GET https://www.hetzner.com/dedicated-rootserver/matrix-gpu/`: the GPU server matrix. Hetzner's
  pages print no price in their HTML: each plan carries a `<ho-price-container
  product-key="ROBOT_1768">` web component that the site's script fills from the price feed. We
  read, per element whose `product-key` is a `ROBOT_<n>` key, the plan around it: the nearest
  ancestor naming exactly one plan (`GEX45`, `GEX131`, ...), and in it the GPU label ("NVIDIA RTX
  PRO 4000 Blackwell SFF ...") and its memory ("24 GB GDDR7"). Labels, never positions or class
  names: the page's markup is not archived anywhere we could read, so the fixture is ours.
* `GET https://www.hetzner.com/_resources/app/data/app/live_data_prices.json`: the price feed
  those components read (the peers' readers of it, checked 2026-12-02, take `products[<key>]
  .locations[]` with `datacenter` (FSN1, NBG1, HEL1; ALL for location-less products),
  `countryCode`, `active` and `prices.monthly.EUR` / `.USD`, and match each page's `product-key`).
  The feed's prices are net of VAT, which Hetzner adds by the buyer's country.

Billing, in Hetzner's own words (docs.hetzner.com, "Cancellations on Robot", 2026-02-11):
dedicated servers can be cancelled immediately, "Our billing is exact to the hour. You will never
pay more than the monthly price." So an offer's price is the feed's hourly rate
(`prices.hourly.EUR`, per server, `billing_unit="hour"`), the monthly price is the cap
(`Offer.monthly_price_cap`), and the one-time set-up fee (`prices.setup.EUR`) is
`Offer.setup_fee`. The bill (finetune.cost.capped_cost) charges each 730-hour month a server is
held at most the cap: past monthly / hourly ≈ 624 h a month, the month costs the cap.

Unverified (no archived feed body showed them): the `hourly` and `setup` key names beside the
verified `monthly`. A product without one is a wrong row (`problem`: the key is missing, price
NaN), never "no fee"; every product without an hourly rate is a `LayoutChanged`.

What becomes an offer: one per plan × datacenter of its feed entry; `instance_type` the plan name
("GEX45"), `region` the datacenter ("fsn1"), on demand (Hetzner sells no spot: "There are no spot
instances at Hetzner", providers.md), `price_source="list"`, one scope for the whole matrix
(`on_demand:gpu-matrix`: one page and one feed that succeed or fail together). A location the
feed marks inactive is offered with `available=False`. A product key on the page that the feed
does not price is `Excluded("not_in_price_feed")`.

Not read: the server auction (`live_data_sb_EUR.json`): its GPU boxes are single used servers,
sold once, that would need the marketplace aggregation, and no archived body shows how it names
a GPU (see the report of issue 24).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import bs4

from connectors import pages
from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    child,
    excluded,
    per_hour,
    read_price,
)

name = "hetzner"
requires: tuple[str, ...] = ()

PAGE_URL = "https://www.hetzner.com/dedicated-rootserver/matrix-gpu/"
PRICES_URL = "https://www.hetzner.com/_resources/app/data/app/live_data_prices.json"
SCOPE = "on_demand:gpu-matrix"
CURRENCY = "EUR"
WHERE = "the GPU matrix of hetzner.com/dedicated-rootserver/matrix-gpu"

_PLAN = re.compile(r"\bGEX\d+[A-Z]?\b")
_ROBOT_KEY = re.compile(r"^ROBOT_\d+$")
_GPU = re.compile(r"(?:(\d+)\s*x\s*)?(NVIDIA\b[^,;()|]*?)(?=\s*(?:\d+\s*GB\b|,|;|\(|\||$))", re.IGNORECASE)
_GPU_MEMORY = re.compile(r"(\d+(?:[.,]\d+)?)\s*GB\s+(?:GDDR\d\w*|HBM\w*)", re.IGNORECASE)
_MARKS = re.compile(r"[\u2122\u00ae]")  # ™ ®


def fetch(
    client: Any,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    # no revalidation: the page and the feed are read together, a 304 of one alone means nothing
    yield pages.fetch_page(client, PAGE_URL)
    yield client.fetch("GET", PRICES_URL)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    page = _one(responses, "/matrix-gpu")
    feed = _one(responses, "live_data_prices")
    plans = matrix_plans(pages.soup(page))
    payload = feed.json()
    products = child(payload, "products") if isinstance(payload, dict) else {}
    if not products:
        raise LayoutChanged(f"{PRICES_URL}: no `products` object in the price feed; has its format changed?")
    counts: dict[str, int] = {}
    offers: list[Offer] = []
    for plan in plans:
        product = products.get(plan.product_key)
        if not isinstance(product, dict):
            counts["not_in_price_feed"] = counts.get("not_in_price_feed", 0) + 1
            continue
        offers.extend(plan_offers(plan, product))
    if offers and all(o.problem and "hourly" in o.problem for o in offers):
        raise LayoutChanged(
            f"{PRICES_URL}: no GPU product has `prices.hourly.{CURRENCY}`; has the feed renamed its "
            "hourly rate?"
        )
    yield from offers
    yield from excluded(counts)


def _one(responses: Sequence[RawResponse], marker: str) -> RawResponse:
    found = [r for r in responses if marker in r.url]
    if len(found) != 1:
        raise LayoutChanged(f"expected one answer from a URL with {marker!r}, got {len(found)}")
    return found[0]


@dataclass(frozen=True)
class Plan:
    """One plan row of the matrix: its name, price key and GPU as the page states them."""

    plan: str
    product_key: str
    gpu_label: str | None
    gpu_count: int
    gpu_memory_gb: float | None


def matrix_plans(doc: bs4.Tag) -> list[Plan]:
    """Every plan of the matrix with a `ROBOT_<n>` price key, read by its name and labels."""
    plans: dict[str, Plan] = {}
    keyed = [tag for tag in doc.find_all(None, attrs={"product-key": True}) if isinstance(tag, bs4.Tag)]
    for tag in keyed:
        key = str(tag.get("product-key", "")).strip()
        if not _ROBOT_KEY.match(key):
            continue  # add-ons priced beside a plan (an IPv4 address is CLOUD_/ROBOT_ too, but alone)
        row = _plan_row(tag)
        if row is None:
            continue
        text = _MARKS.sub("", pages.clean(row.get_text(" ")))
        plan = _PLAN.search(text)
        assert plan is not None  # _plan_row found exactly one
        label, count = gpu_label(text)
        memory = _GPU_MEMORY.search(text)
        gb = float(memory.group(1).replace(",", ".")) if memory else None
        plans.setdefault(plan.group(0), Plan(plan.group(0), key, label, count, gb))
    if not plans:
        raise LayoutChanged(
            f'{WHERE}: no plan (`GEX<n>`) holds a `product-key="ROBOT_<n>"` price element; has the '
            "page layout changed?"
        )
    return list(plans.values())


def _plan_row(tag: bs4.Tag) -> bs4.Tag | None:
    """The nearest ancestor of a price element that names exactly one plan (its row or card)."""
    for parent in tag.parents:
        if not isinstance(parent, bs4.Tag) or parent.name in ("html", "body", "[document]"):
            return None
        names = set(_PLAN.findall(pages.clean(parent.get_text(" "))))
        if len(names) == 1:
            return parent
        if len(names) > 1:
            return None  # a container of several plans: the element sits outside any one row
    return None


def gpu_label(text: str) -> tuple[str | None, int]:
    """("NVIDIA RTX PRO 4000 Blackwell SFF", 1) from a row's text; "2 x NVIDIA ..." counts 2.

    The label ends before its memory ("24 GB"), a comma or a bracket; a row with no NVIDIA label is
    (None, 1): each GEX server has one GPU (hetzner.com press releases of GEX44 to GEX131)."""
    found = _GPU.search(text)
    if not found:
        return None, 1
    label = " ".join(found.group(2).split())
    return label, int(found.group(1)) if found.group(1) else 1


def plan_offers(plan: Plan, product: Mapping[str, Any]) -> Iterator[Offer]:
    """One offer per datacenter of the plan's feed entry, at the hourly rate, with its fee and cap."""
    locations = [loc for loc in product.get("locations") or [] if isinstance(loc, dict)]
    if not locations:
        raise LayoutChanged(f"{PRICES_URL}: `products.{plan.product_key}.locations` is missing or empty")
    for location in locations:
        datacenter = str(location.get("datacenter") or "").strip()
        if not datacenter:
            raise LayoutChanged(f"{PRICES_URL}: a location of {plan.product_key} has no `datacenter`")
        prices = child(location, "prices")
        hourly, problem = read_price(child(prices, "hourly").get(CURRENCY), f"prices.hourly.{CURRENCY}")
        monthly, monthly_problem = read_price(
            child(prices, "monthly").get(CURRENCY), f"prices.monthly.{CURRENCY}"
        )
        fee = _fee(child(prices, "setup").get(CURRENCY))
        problem = problem or monthly_problem or fee[1]
        yield Offer(
            provider=name,
            instance_type=plan.plan,
            region=datacenter.lower(),
            pricing_type="on_demand",
            price_source="list",
            price_per_hour=per_hour(hourly, "hour"),
            currency=CURRENCY,
            gpu_name_raw=plan.gpu_label,
            gpu_count=float(plan.gpu_count),
            gpu_memory_gb_raw=plan.gpu_memory_gb,
            billing_unit="hour",
            setup_fee=fee[0],
            # Hetzner never bills more than this in a month (net of VAT)
            monthly_price_cap=monthly if math.isfinite(monthly) else None,
            available=location.get("active") is not False,
            provider_data={
                "product_key": plan.product_key,
                "country": location.get("countryCode"),
                "vat": "excluded",
            },
            scope=SCOPE,
            problem=problem,
        )


def _fee(value: object) -> tuple[float | None, str | None]:
    """(set-up fee, problem): a stated fee of 0 is 0 (Hetzner waives some); a missing one is a
    problem, not "none", since every GEX plan states its fee."""
    if value is None:
        return None, f"prices.setup.{CURRENCY} missing"
    fee, problem = read_price(value, f"prices.setup.{CURRENCY}")
    if problem and fee == 0:
        return 0.0, None
    return (fee, None) if problem is None else (None, problem)
