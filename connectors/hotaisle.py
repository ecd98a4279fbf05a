"""Hot Aisle: AMD MI300X VMs and bare metal, from the team's availability API or the pricing page.

Two sources (like `verda`): with both `HOTAISLE_API_KEY` and `HOTAISLE_TEAM_HANDLE` set, the
team's availability API (what is free now, with specs); without them, the public pricing page
(list rates per plan). Scopes are the same for both (`on_demand:virtual_machines`,
`on_demand:bare_metal`); instance types differ (the API names the CPU), so moving between the
two sources closes one set of offers and opens the other.

API source: `GET https://admin.hotaisle.app/api/teams/{team}/virtual_machines/available/` and
`GET .../teams/{team}/bare_metal/available/` with `Authorization: Token <key>` (API docs at
https://admin.hotaisle.app/api/docs; the request follows the peers that run it live, checked
2026-12-02: gpuhunt `providers/hotaisle.py` at cdd58ac, which reads both lists, and dstack's
Hot Aisle backend, which launches what they list). The answers are per team, so both
`HOTAISLE_API_KEY` and `HOTAISLE_TEAM_HANDLE` are needed (with one alone, the page is read).
The team handle is sent in the path and redacted like the key. Two requests a run; no documented
rate limit. Shape of one item (both lists; bare metal adds `Quantity` and
`MinimumReservationMinutes`, and states `cpus` as a list)::

    {"OnDemandPrice": 199, "MinimumReservationMinutes": 480, "Quantity": 1,
     "Specs": {"cpu_cores": 13, "ram_capacity": <bytes>, "disk_capacity": <bytes>,
               "cpus": {"count": 1, "model": "Xeon Platinum 8470"},
               "gpus": [{"count": 1, "model": "MI300X"}]}}

Units: `OnDemandPrice` is US cents per instance-hour (gpuhunt divides by 100 and reads dollars an
hour; the shape sample's 199 for 1x MI300X and 2712 for 8x are $1.99 and 8 x $3.39, the per-GPU
rates Hot Aisle's pricing page states). `ram_capacity` / `disk_capacity` are bytes, read here as
GiB. Neither list states a region (Hot Aisle runs one site; gpuhunt hard-codes it): offers are
`region="global"`. Neither states GPU memory or a billing unit: VRAM comes from the seeds (MI300X
192 GB), the billing rule from `providers.csv`. `MinimumReservationMinutes` (bare metal) is the
shortest reservation: it is kept in `provider_data["minimum_reservation_minutes"]` with the
listed `Quantity`. Everything listed can be rented now: `available=True`.

Quirks handled:
- An empty list answers `null`, not `[]` (gpuhunt's comment and test): nothing is free of that
  kind now, said as `Excluded("none_available:<kind>")`; the scope then has no offers, and the
  warehouse holds its last prices as degraded rather than closing them.
- Several items of one shape (same kind, GPU count and model, cores, CPU model): one offer, the
  lowest price, with `provider_data["listings"]` counting them.
- `OnDemandPrice` missing, not a number, zero or negative: a wrong row (`problem`), quarantined.
- An item without a GPU in `Specs.gpus`: `Excluded("no_gpu")`; with two GPU models: `problem`.
- An answer that is neither a list nor `null`: `LayoutChanged`.

Scopes: `on_demand:virtual_machines`, `on_demand:bare_metal` (one body each). No spot: Hot Aisle
sells none. `instance_type` is `"<vm|bm> <n>x <gpu> <cores>c <cpu model>"`, e.g.
`"vm 1x MI300X 13c Xeon Platinum 8470"`: the CPU tells VM shapes of one GPU count apart.

Page source: `GET https://hotaisle.xyz/pricing` (server-rendered HTML, keyless, one request). No
capture of it exists in ../shared; the structure is the one a peer's scraper pins (checked live
by that peer 2026-08-22; gpucost could not fetch it): a hero repeating the rates ("Virtual
machines", "8x bare metal"), then three plan cards, each a kicker (`VM` or `Bare metal`), a plan
heading (Small / Medium / Large), a GPU count ("1x", "2x & 4x") followed by the model ("MI300x"),
and a price line "$2.99/GPU/hr"; the Bare metal card says "one-month minimum"; existing customers
are "grandfathered at $1.99/GPU/hr" in prose. Read by what a reader sees (`pages.price_lines`,
`pages.card_around`):
- each price line's card must have a kicker reading `VM` or `Bare metal` and a count + model;
  the hero's lookalikes have neither and are `Excluded("not_a_plan_card")`;
- each price is read with `pages.quote`: "$2.99/GPU/hr" states USD, per GPU, per hour; a line
  without its basis is that card's `problem` (every card so: `LayoutChanged`); one offer per GPU
  count of the card (`vm 2x MI300X`, `vm 4x MI300X`), priced count x the per-GPU rate;
- a card with a one-month minimum is not an hourly offer: `Excluded("monthly_minimum")` per count;
  the grandfathered rate is not for sale: `Excluded("existing_customers_only")`;
- `billing_unit="minute"` only when the page says "by the minute" / "per minute".
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import bs4

from connectors import pages
from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    Unchanged,
    child,
    excluded,
    number,
    read_price,
)
from connectors.http import Client

log = logging.getLogger(__name__)

name = "hotaisle"
API_KEY = "HOTAISLE_API_KEY"
TEAM = "HOTAISLE_TEAM_HANDLE"
requires: tuple[str, ...] = ()
optional: tuple[str, ...] = (API_KEY, TEAM)

PAGE_URL = "https://hotaisle.xyz/pricing"
API_URL = "https://admin.hotaisle.app/api"
# endpoint path segment -> the short kind used in instance types
KINDS: Mapping[str, str] = {"virtual_machines": "vm", "bare_metal": "bm"}
REGION = "global"
GIB = 1024**3


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    if not (creds.get(API_KEY) and creds.get(TEAM)):
        if creds.get(API_KEY) or creds.get(TEAM):
            log.warning("hotaisle: the API needs both %s and %s; reading the pricing page", API_KEY, TEAM)
        yield pages.fetch_page(client, PAGE_URL, previous)
        return
    headers = {"Accept": "application/json", "Authorization": f"Token {creds[API_KEY]}"}
    team = quote(creds[TEAM], safe="")
    for endpoint in KINDS:
        yield client.fetch("GET", f"{API_URL}/teams/{team}/{endpoint}/available/", headers=headers)


def endpoint_of(url: str) -> str:
    """`virtual_machines` or `bare_metal` from an answer's URL; `LayoutChanged` for another."""
    for endpoint in KINDS:
        if f"/{endpoint}/available" in url:
            return endpoint
    raise LayoutChanged(f"{url}: not a Hot Aisle availability URL (expected one of {sorted(KINDS)})")


def items(payload: Any, url: str) -> list[Any]:
    """The listed items; `null` (nothing free) is an empty list; any other shape is a layout change."""
    if payload is None:
        return []
    if not isinstance(payload, list):
        got = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(
            f"{url}: expected a list of available items or null, got {got}; has the API changed?"
        )
    return payload


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded | Unchanged]:
    page = [r for r in responses if not r.url.startswith(API_URL)]
    yield from pages.read_pages(page, tuple(f"on_demand:{e}" for e in KINDS), page_offers)
    left_out: dict[str, int] = {}
    for response in responses:
        if not response.url.startswith(API_URL):
            continue
        endpoint = endpoint_of(response.url)
        listed = items(response.json(), response.url)
        if not listed:
            left_out[f"none_available:{endpoint}"] = left_out.get(f"none_available:{endpoint}", 0) + 1
        shapes: dict[str, Offer] = {}
        for item in listed:
            offer = to_offer(item, endpoint)
            if offer is None:
                left_out["no_gpu"] = left_out.get("no_gpu", 0) + 1
                continue
            shapes[offer.instance_type] = _merge(shapes.get(offer.instance_type), offer)
        yield from shapes.values()
    yield from excluded(left_out)


def _merge(kept: Offer | None, new: Offer) -> Offer:
    """One offer per shape: the readable lowest price wins; `listings` counts the items."""
    if kept is None:
        return new
    listings = kept.provider_data["listings"] + 1
    better = kept.problem is not None and new.problem is None
    if new.problem is None and kept.problem is None and new.price_per_hour < kept.price_per_hour:
        better = True
    winner = new if better else kept
    return replace(winner, provider_data={**winner.provider_data, "listings": listings})


def to_offer(item: Any, endpoint: str) -> Offer | None:
    """One listed item as an offer; None when it names no GPU (nothing for this catalog)."""
    if not isinstance(item, dict):
        raise LayoutChanged(
            f"an item of the Hot Aisle {endpoint} list is {type(item).__name__}, not an object"
        )
    specs = child(item, "Specs")
    gpus = [g for g in specs.get("gpus") or [] if isinstance(g, dict) and g.get("model")]
    if not gpus:
        return None
    models = sorted({str(g["model"]) for g in gpus})
    gpu_count = sum(number(g.get("count")) or 0 for g in gpus)
    cents, problem = read_price(item.get("OnDemandPrice"), "OnDemandPrice")
    if len(models) > 1:
        problem = f"several GPU models in one item: {models}"
    if gpu_count <= 0:
        problem = problem or f"GPU count not stated for {models[0]}"
    cores = number(specs.get("cpu_cores"))
    cpu = cpu_model(specs.get("cpus"))
    ram = number(specs.get("ram_capacity"))
    disk = number(specs.get("disk_capacity"))
    kind = KINDS[endpoint]
    label = " ".join(
        part
        for part in (kind, f"{gpu_count:g}x", models[0], f"{cores:g}c" if cores is not None else "", cpu)
        if part
    )
    data: dict[str, Any] = {
        "kind": endpoint,
        "price_cents_per_hour": item.get("OnDemandPrice"),
        "listings": 1,
    }
    if cpu:
        data["cpu_model"] = cpu
    if disk is not None:
        data["disk_gb"] = round(disk / GIB, 1)
    for key, field in (
        ("MinimumReservationMinutes", "minimum_reservation_minutes"),
        ("Quantity", "quantity"),
    ):
        if (value := number(item.get(key))) is not None:
            data[field] = value
    return Offer(
        provider=name,
        instance_type=label,
        region=REGION,
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=cents / 100 if math.isfinite(cents) else cents,
        currency="USD",
        gpu_name_raw=models[0],
        gpu_count=float(gpu_count),
        vcpus=cores,
        ram_gb=None if ram is None else round(ram / GIB, 1),
        available=True,
        provider_data=data,
        scope=f"on_demand:{endpoint}",
        problem=problem,
    )


def cpu_model(cpus: Any) -> str:
    """The CPU model: `cpus` is one object (VM answers) or a list of them (bare metal)."""
    entries = cpus if isinstance(cpus, list) else [cpus]
    models = [str(c["model"]) for c in entries if isinstance(c, dict) and c.get("model")]
    return " + ".join(dict.fromkeys(models))


# --- the pricing page (keyless fallback) ----------------------------------------------------------

# A plan card's kicker names what it sells; the hero's lookalikes ("Virtual machines",
# "8x bare metal") do not read as either, so they are never taken for a plan.
KICKERS: Mapping[str, str] = {"VM": "virtual_machines", "Bare metal": "bare_metal"}
PAGE_WHERE = "the plan cards of hotaisle.xyz/pricing"
_COUNTS = re.compile(r"^\d{1,2}\s*x(?:\s*(?:&|,|and|or)\s*\d{1,2}\s*x)*$", re.I)
_MONTH_MINIMUM = re.compile(
    r"\b(?:one|1)[\s-]*month\s+minimum\b|\bminimum\s+(?:of\s+)?(?:one|1)\s+month\b", re.I
)
_EXISTING_ONLY = re.compile(r"\bgrandfathered\b|\bexisting\s+customers\b", re.I)
_BY_THE_MINUTE = re.compile(r"\bby\s+the\s+minute\b|\bper[\s-]minute\b", re.I)


def plan_shape(card: bs4.Tag) -> tuple[list[int], str] | None:
    """([GPU counts], GPU model) a plan card shows ("2x & 4x" then "MI300x"), or None."""
    strings = [t for t in (pages.clean(x) for x in pages.visible_strings(card)) if t]
    for i, text in enumerate(strings[:-1]):
        if _COUNTS.match(text):
            counts = [int(n) for n in re.findall(r"(\d+)\s*x", text, re.I)]
            return counts, strings[i + 1].upper() if re.fullmatch(r"MI\d{3}x", strings[i + 1]) else strings[
                i + 1
            ]
    return None


def plan_kind(card: bs4.Tag) -> str | None:
    """`virtual_machines` or `bare_metal` from the card's kicker line; None when it has none."""
    for text in pages.visible_strings(card):
        for label, endpoint in KICKERS.items():
            if pages.label_matches(text, label):
                return endpoint
    return None


def page_offers(response: RawResponse) -> Iterator[Offer | Excluded]:
    """One offer per GPU count of each plan card, at the per-GPU rate its price line states."""
    root = pages.soup(response)
    lines = pages.price_lines(root, lambda tag, text: _is_rate(text))
    by_minute = bool(_BY_THE_MINUTE.search(pages.clean(root.get_text(" "))))
    counts: dict[str, int] = {}
    seen: set[str] = set()
    basis_errors: list[LayoutChanged] = []
    priced = 0
    for line in lines:
        card = pages.card_around(line, lines, root)
        text = pages.clean(" ".join(pages.visible_strings(card)))
        kind, shape = plan_kind(card), plan_shape(card)
        if _EXISTING_ONLY.search(text):
            counts["existing_customers_only"] = counts.get("existing_customers_only", 0) + 1
            continue
        if kind is None or shape is None:
            counts["not_a_plan_card"] = counts.get("not_a_plan_card", 0) + 1
            continue
        gpu_counts, model = shape
        if _MONTH_MINIMUM.search(text):
            # a month's commitment is not a rate a run can be billed at by the hour
            counts["monthly_minimum"] = counts.get("monthly_minimum", 0) + len(gpu_counts)
            continue
        price_text = pages.clean(line.get_text(" "))
        heading = card.find(["h1", "h2", "h3", "h4"])
        data: dict[str, Any] = {"kind": kind, "price_text": price_text, "source": "pricing page"}
        if heading is not None:
            data["plan"] = pages.clean(heading.get_text(" "))
        problem: str | None = None
        try:
            price = pages.quote(price_text, where=f"the {data.get('plan', kind)} card of {PAGE_WHERE}")
        except LayoutChanged as exc:
            basis_errors.append(exc)
            price, problem = None, str(exc)
        if price is not None:
            priced += 1
            data |= price.flags() | {"price_per_gpu_hour": price.per_hour()}
        for n in gpu_counts:
            amount = price.instance_hour(n) if price is not None else math.nan
            label = f"{KINDS[kind]} {n}x {model}"
            if label in seen:
                counts["repeated_card"] = counts.get("repeated_card", 0) + 1
                continue
            seen.add(label)
            yield Offer(
                provider=name,
                instance_type=label,
                region=REGION,
                pricing_type="on_demand",
                price_source="list",
                price_per_hour=round(amount, 6) if math.isfinite(amount) else amount,
                currency=price.currency if price is not None else "USD",
                gpu_name_raw=model,
                gpu_count=float(n),
                billing_unit="minute" if by_minute else None,
                provider_data=data,
                scope=f"on_demand:{kind}",
                problem=problem or (None if amount > 0 else f"price {price_text!r} is not a positive number"),
            )
    if basis_errors and not priced:
        raise basis_errors[0]
    if not seen:
        raise LayoutChanged(
            f"no plan card (a `VM` or `Bare metal` kicker, a GPU count and model, a price) found in "
            f"{PAGE_WHERE} ({len(lines)} price lines); has the page layout changed?"
        )
    yield from excluded(counts)


def _is_rate(text: str) -> bool:
    money = pages.parse_money(text)
    return money is not None and money.unit is not None
