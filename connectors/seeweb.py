"""Seeweb (Italy): hourly EUR prices of the Cloud Server GPU plans, per region.

Source: the ECS API v2 (https://docs.seeweb.it/en/hosting/cloudserver/rest-api/API-Endpoints/Plan,
read 2026-12-02), with the account's API token in `X-APITOKEN` (the "API-Token" of
https://docs.seeweb.it/en/hosting/cloudserver/rest-api/API-Endpoints/Account; Seeweb's own SDK,
`ecsapi`, sends the same header):

    GET https://api.seeweb.it/ecs/v2/plans             every plan with its prices
    GET https://api.seeweb.it/ecs/v2/plans/availables  the plans activatable now, per region

Both need the token, so `SEEWEB_API_TOKEN` (gpuhunt's name for it) is required: without it the
provider is skipped. Two requests per run, no paging, no documented rate limit. Shape of
`/plans` (the docs' example; ecsapi's `Plan` model; gpuhunt's seeweb provider tests)::

    {"status": "ok",
     "plans": [{"id": 7, "name": "ECS1GPU7", "cpu": "8", "ram": "32768", "disk": "500",
                "gpu": "1", "gpu_label": "L40s 48GB", "hourly_price": 0.85,
                "montly_price": 620.5, "windows": false, "host_type": "ECS",
                "available": true,
                "available_regions": [{"id": 1, "location": "it-fr2",
                                       "description": "Frosinone"}]}]}

`/plans/availables` repeats each activatable plan with `region_availables: [{"region":
"it-fr2", "hosts": [...]}]`. The docs warn that `available_regions` of `/plans` lists the regions
a plan is *compatible* with, not where it can be created; the second list says that.

One offer per (plan, compatible region): the plan is the instance, `hourly_price` its price for
the whole server (every resource of the plan: in SkyPilot's derived catalog the 2x and 4x A100
plans cost two and four times the 1x one, vCPUs and RAM doubling too) per hour. The answer
states no currency: Seeweb, an Italian provider, prices its cloud servers in euros on seeweb.it
(SkyPilot's catalog copies the numbers with no currency at all), so `currency="EUR"` and the
warehouse converts with the ECB rate. Seeweb bills cloud servers by the hour (the answer
names the price "price for hour"; the docs state no minimum), `billing_unit="hour"`. The
monthly price (`montly_price`, spelled so by the API) is kept in `provider_data`, never turned
into an hourly rate. The account endpoint states per-account discounts
(`ecsgpu_special_discount`); the plans list is read as published, never discounted by us.

Fields: `cpu` vCPUs, `ram` MiB (the docs' 1 GB plan says "1024"; converted to GiB), `disk` GB,
`gpu` the GPU count (a string), `gpu_label` the GPU as Seeweb names it ("H200 141GB", "A30"),
its "<n>GB" suffix read as the GPU's memory. `available` is true when `/plans/availables` lists
the plan in that region, false when it lists the plan elsewhere or not at all, and None when that
answer was not read; an availability answer that cannot be read is `Degraded` (prices still load).

Left out, counted: plans without a GPU (`Excluded("cpu_only")`), Windows plans (the licence is in
the price: `Excluded("windows")`), plans the API marks `available: false` (no longer sold:
`Excluded("plan_inactive")`) and GPU plans with no compatible region (`Excluded("no_regions")`).
A plan whose `hourly_price` is missing, not a number, zero or negative is yielded with
`problem`. No `plans` list, an empty one, a `status` other than "ok", or a GPU plan whose `gpu`
count is not a number raises `LayoutChanged` naming the field. No spot: Seeweb sells no
interruptible servers (SkyPilot's catalog: "Seeweb doesn't support spot"). Scope: `plans`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import (
    Degraded,
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    excluded,
    number,
    read_price,
    required_list,
)
from connectors.http import Client

name = "seeweb"
CREDENTIAL = "SEEWEB_API_TOKEN"
requires: tuple[str, ...] = (CREDENTIAL,)

API = "https://api.seeweb.it/ecs/v2"
PLANS_URL = f"{API}/plans"
AVAILABLE_URL = f"{API}/plans/availables"
CURRENCY = "EUR"  # not stated by the answer (see the module docstring)
SCOPE = "plans"
MIB_PER_GIB = 1024
_LABEL_MEMORY = re.compile(r"(?P<gb>[0-9]+(?:\.[0-9]+)?)\s*GB\b", re.IGNORECASE)


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Accept": "application/json", "X-APITOKEN": creds[CREDENTIAL]}
    for url in (PLANS_URL, AVAILABLE_URL):
        yield client.fetch("GET", url, headers=headers)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded | Degraded]:
    by_url = {r.url.split("?")[0]: r for r in responses}
    plans_answer = by_url.get(PLANS_URL)
    if plans_answer is None:
        raise LayoutChanged(f"no answer from {PLANS_URL} among {sorted(by_url)}; nothing to price")
    plans = required_list(_ok(plans_answer), "plans", where=plans_answer.url, answer="the plans list")
    where: dict[str, set[str]] | None = None
    availability = by_url.get(AVAILABLE_URL)
    if availability is not None:
        where, trouble = activatable(availability)
        if trouble:
            yield Degraded(reason=trouble, hint="prices load without availability; rerun later")
    left_out: Counter[str] = Counter()
    for plan in plans:
        offers, reason = plan_offers(plan if isinstance(plan, dict) else {}, where)
        yield from offers
        if reason:
            left_out[reason] += 1
    yield from excluded(left_out)


def _ok(response: RawResponse) -> Any:
    payload = response.json()
    status = payload.get("status") if isinstance(payload, dict) else None
    if status is not None and str(status).lower() != "ok":
        raise LayoutChanged(f"{response.url}: `status` is {status!r}, not 'ok'; the answer is an error")
    return payload


def activatable(response: RawResponse) -> tuple[dict[str, set[str]] | None, str | None]:
    """Plan name -> regions it can be created in now, from `/plans/availables`; or (None, why)."""
    try:
        plans = required_list(_ok(response), "plans", where=response.url, answer="the availability list")
    except LayoutChanged as exc:
        return None, str(exc)
    where: dict[str, set[str]] = {}
    for plan in plans:
        if not isinstance(plan, dict) or not plan.get("name"):
            continue
        regions = plan.get("region_availables")
        if not isinstance(regions, list):
            return None, f"{response.url}: `region_availables` missing from plan {plan['name']!r}"
        named = (r for r in regions if isinstance(r, dict) and r.get("region"))
        where[str(plan["name"])] = {str(r["region"]) for r in named}
    return where, None


def label_memory_gb(label: str) -> float | None:
    """The GPU memory a Seeweb label states ("H200 141GB" -> 141.0); None when it states none.

    >>> label_memory_gb("RTX A6000 48GB"), label_memory_gb("A30")
    (48.0, None)
    """
    found = _LABEL_MEMORY.search(label)
    return float(found["gb"]) if found else None


def plan_offers(
    plan: Mapping[str, Any], where: Mapping[str, set[str]] | None
) -> tuple[list[Offer], str | None]:
    """One offer per compatible region of a GPU plan, or none and the reason it is left out."""
    label = str(plan.get("gpu_label") or "").strip()
    raw_count = plan.get("gpu")
    count = number(raw_count)
    plan_name = str(plan.get("name") or plan.get("id") or "?")
    if not label and not count:
        return [], "cpu_only"
    if count is None or count <= 0:
        raise LayoutChanged(
            f"{PLANS_URL}: plan {plan_name!r} names GPU {label!r} but its `gpu` count is {raw_count!r}; "
            "has the plans list changed how it states GPUs?"
        )
    if plan.get("windows") is True:
        return [], "windows"
    if plan.get("available") is False:
        return [], "plan_inactive"
    regions = [r for r in plan.get("available_regions") or [] if isinstance(r, dict) and r.get("location")]
    if not regions:
        return [], "no_regions"
    price, problem = read_price(plan.get("hourly_price"), "hourly_price")
    ram_mib = number(plan.get("ram"))
    data = {
        "plan_id": plan.get("id"),
        "host_type": plan.get("host_type"),
        "disk_gb": number(plan.get("disk")),
        "monthly_price": number(plan.get("montly_price")),
    }
    offers = [
        Offer(
            provider=name,
            instance_type=plan_name,
            region=str(region["location"]),
            pricing_type="on_demand",
            price_source="list",
            price_per_hour=price,
            currency=CURRENCY,
            gpu_name_raw=label or None,
            gpu_count=count,
            gpu_memory_gb_raw=label_memory_gb(label),
            vcpus=number(plan.get("cpu")),
            ram_gb=ram_mib / MIB_PER_GIB if ram_mib is not None else None,
            billing_unit="hour",
            available=None if where is None else str(region["location"]) in where.get(plan_name, set()),
            provider_data={**data, "region_description": region.get("description")},
            scope=SCOPE,
            problem=problem,
        )
        for region in regions
    ]
    return offers, None
