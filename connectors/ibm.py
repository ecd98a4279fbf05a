"""IBM Cloud: hourly and spot prices of the VPC GPU virtual server profiles, per region.

Source: IBM's Global Catalog API (https://globalcatalog.cloud.ibm.com/api/v1), keyless for its
public entries: IBM's "Getting dynamic pricing" guide (cloud.ibm.com/docs/account?topic=account-
getting-pricing-api, last updated 2025-11-15) calls it with no credentials, and so do the public
readers we followed (checked 2026-12-02): cloud-barista/cb-spider's IBM PriceInfo handler (plans of
`is.instance`, matched to profiles by name), and a one-profile collector of IBM's 8x H100 price
that reads `/{plan}/pricing/deployment` without a key. Two kinds of request per run:

    GET /api/v1/is.instance/plan?_offset=0&_limit=100     the plans of the VPC instance service,
        {"offset": 0, "count": 212, "next": "<url>|absent", "resources": [{"id": "<uuid>",
         "name": "gx3-16x80x1l4", "kind": "plan", ...}]}   paged by `next` (a full URL), or by
                                                          `_offset` while `count` says more remain
    GET /api/v1/{plan id}/pricing/deployment              one per GPU plan: every region at once
        {"resources": [{"deployment_id": "...", "deployment_location": "us-south",
                        "deployment_region": "us-south", "metrics": [
             {"metric_id": "part-is.instance-hours-gx3-16x80x1l4",
              "charge_unit_name": "INSTANCE_HOURS_MULTI_TENANT", "charge_unit_quantity": 1,
              "amounts": [{"country": "USA", "currency": "USD",
                           "prices": [{"quantity_tier": 1, "price": 1.8}]}, ...]},
             {"metric_id": "part-is.spot-gx3-16x80x1l4", ...}, ...]}]}

The plan-level `/pricing` is not read: its base instance-hour is 0 (the price is regional), which
is why `/pricing/deployment` is. A plan is a GPU profile when its name follows IBM's profile
naming (cloud.ibm.com/docs/vpc?topic=vpc-accelerated-profile-family, read 2026-12-02 at
ibm-cloud-docs/vpc 3fdff6f): `<family>-<vCPUs>x<GiB RAM>x<GPUs><accelerator>`, e.g.
`gx3d-160x1792x8h100` = 160 vCPUs, 1792 GiB, 8 H100. Plans without the accelerator part
(`bx3d-128x640`, the `gen2-instance` component plan) are counted as `Excluded("no_gpu")`
and never priced; a new accelerator family lands by its word, unmapped, never filtered.

Per region, two metrics are read, by metric id (the profile is named in it, so the offer's
`instance_type` is the profile the price says it is for):
- `part-is.instance-hours-<profile>`: the on-demand rate, `pricing_type="on_demand"`.
- `part-is.spot-<profile>`: the spot rate. IBM VPC sells spot instances (GA 2026-02-12, VPC
  release notes; `vsi_spot.md`: "Spot instances support only GPU profiles and Flex profiles",
  "can be preempted at any time", 30 s grace) at a catalog rate per region: a fixed published
  price, not a market, so `pricing_type="spot"`, `price_source="list"`.
Every other metric (OS and software licences per vCPU, dedicated-host and other variants whose
remainder is not a profile name) is left out, counted as `Excluded("other_metric")`.

Basis and currency, as the catalog states them: the metric is "instance-hours" (IBM's
`charge_unit` "Instance-Hour"), so the price is for the whole instance; `charge_unit_quantity`
says how many instance-hours it buys (the price is divided by it; a missing or non-positive one is
a wrong row, never guessed as 1). `amounts` gives one price list per paying country: the row with
`country == "USA"` and `currency == "USD"` is read (IBM's own USD list price, not a conversion);
a region without it is a wrong row naming the countries it has. Of several quantity tiers the
first (lowest `quantity_tier`) is read, the rate a first experiment pays; all tiers are kept in
`provider_data["tiers"]`. A price that is 0, missing or not a number is yielded with `problem`.

GPU count, vCPUs and RAM come from the profile name; the catalog answer states no VRAM,
interconnect or zone (the seeds carry the interconnect per profile family). Billing is per
second with no minimum ("Usage times are calculated per second ... No minimum usage requirement
exists for an instance", suspend-billing.md): `billing_unit="second"`. `region` is
`deployment_region` (else `deployment_location`); a deployment with neither raises
`LayoutChanged`. A deployment flagged `deployment_location_no_price_available` is counted as
`Excluded("no_price_in_region")`. Two deployments of one plan in one region: the first is read,
the repeat counted as `Excluded("repeated_deployment")`, or flagged with `problem` when its price
differs. No `resources` list, or a plan answer with no instance-hours metric in any region,
raises `LayoutChanged` naming the key. Scopes: one per plan (`plan:<profile>`), its one body.

Not read: gx2 (V100) profiles, which IBM prices as a sum of vCPU-, RAM- and V100-hour rates
on the `gen2-instance` plan rather than per profile; the bare-metal service
(`is.bare-metal-server`); reservations (`is.reservation`, commitments).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    PricingType,
    RawResponse,
    excluded,
    number,
    paginate,
    read_price,
    required_list,
)
from connectors.http import Client

name = "ibm"
requires: tuple[str, ...] = ()

API = "https://globalcatalog.cloud.ibm.com/api/v1"
PLANS_URL = f"{API}/is.instance/plan"
PAGE_SIZE = 100
MAX_PAGES = 20  # 2,000 plans; the service lists a few hundred
PRICE_COUNTRY = "USA"
PRICE_CURRENCY = "USD"
# metric id prefix -> pricing type; the profile name follows the prefix
METRICS: Mapping[str, PricingType] = {
    "part-is.instance-hours-": "on_demand",
    "part-is.spot-": "spot",
}
_PROFILE = re.compile(
    r"^(?P<family>[a-z][a-z0-9]*)-(?P<vcpus>[0-9]+)x(?P<ram>[0-9]+)x-?(?P<count>[1-9][0-9]*)"
    r"(?P<gpu>[a-z][a-z0-9 ]*)(?P<suffix>-[a-z0-9-]+)?$",
    re.IGNORECASE,
)
_PRICING_PATH = re.compile(r"/api/v1/(?P<plan>[^/]+)/pricing/deployment$")


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Accept": "application/json"}

    def page(token: str | None, _: int) -> RawResponse:
        if token is None:
            params = {"_offset": "0", "_limit": str(PAGE_SIZE)}
            return client.fetch("GET", PLANS_URL, params=params, headers=headers)
        return client.fetch("GET", token, headers=headers)  # `next` is a full URL

    plans: list[tuple[str, str]] = []
    for listing in paginate(page, lambda r, _: _next(r.json()), max_pages=MAX_PAGES, what=PLANS_URL):
        yield listing
        plans.extend(plan_ids(listing.json(), listing.url))
    for plan_id, plan_name in plans:
        if profile(plan_name) is not None:
            yield client.fetch("GET", f"{API}/{plan_id}/pricing/deployment", headers=headers)


def _next(payload: Any) -> str | None:
    """The next listing page: the answer's `next` URL, or, when it states none while its `count`
    says plans remain past `offset` + this page, the URL of the page after (never a silent cut)."""
    if not isinstance(payload, dict):
        return None
    found = payload.get("next")
    if isinstance(found, str) and found:
        return found
    count, offset = number(payload.get("count")), number(payload.get("offset")) or 0.0
    resources = payload.get("resources")
    read = len(resources) if isinstance(resources, list) else 0
    if count is None or not read or offset + read >= count:
        return None
    return f"{PLANS_URL}?_offset={int(offset) + read}&_limit={PAGE_SIZE}"


def plan_ids(payload: Any, url: str = PLANS_URL) -> list[tuple[str, str]]:
    """(id, name) of every plan of a listing page; raises `LayoutChanged` on another shape."""
    resources = required_list(payload, "resources", where=url, answer="the is.instance plan listing")
    found = [(str(r.get("id")), str(r.get("name"))) for r in resources if isinstance(r, dict)]
    if not any(plan_id != "None" and plan_name != "None" for plan_id, plan_name in found):
        raise LayoutChanged(
            f"{url}: no plan in `resources` has both `id` and `name`; has the listing changed?"
        )
    return found


def profile(text: str) -> tuple[int, float, int, str] | None:
    """(vCPUs, GiB RAM, GPU count, accelerator word) of a GPU profile name; None for any other.

    A dash-suffix after the accelerator word (a variant of the profile) is not part of the word:
    the offer keeps the whole name as its instance type.

    >>> profile("gx3d-160x1792x8h100"), profile("gx3-48x240x-2l40s"), profile("bx3d-128x640")
    ((160, 1792.0, 8, 'h100'), (48, 240.0, 2, 'l40s'), None)
    """
    found = _PROFILE.match(text)
    if found is None:
        return None
    return int(found["vcpus"]), float(found["ram"]), int(found["count"]), found["gpu"].lower()


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    left_out: Counter[str] = Counter()
    names: dict[str, str] = {}
    for response in responses:
        path = urlsplit(response.url).path
        if path.endswith("/is.instance/plan"):
            for plan_id, plan_name in plan_ids(response.json(), response.url):
                names[plan_id] = plan_name
                if profile(plan_name) is None:
                    left_out["no_gpu"] += 1
            continue
        found = _PRICING_PATH.search(path)
        if found is None:
            raise LayoutChanged(f"{response.url}: not an answer the ibm connector asks for")
        yield from plan_offers(
            response.json(), found["plan"], names.get(found["plan"]), response.url, left_out
        )
    if names and not any(profile(plan_name) for plan_name in names.values()):
        raise LayoutChanged(
            f"{PLANS_URL}: none of {len(names)} plans is named like a GPU profile "
            "(<family>-<vCPUs>x<RAM>x<GPUs><accelerator>); has the profile naming changed?"
        )
    yield from excluded(left_out)


def plan_offers(
    payload: Any, plan_id: str, plan_name: str | None, url: str, left_out: Counter[str]
) -> Iterator[Offer]:
    """The offers of one plan's `/pricing/deployment` answer, one per region and metric read."""
    deployments = required_list(payload, "resources", where=url, answer="the plan's deployment pricing")
    seen: dict[tuple[str, str, str], Offer] = {}
    for deployment in deployments:
        if not isinstance(deployment, dict):
            continue
        region = deployment.get("deployment_region") or deployment.get("deployment_location")
        if not region:
            raise LayoutChanged(
                f"{url}: a deployment has neither `deployment_region` nor `deployment_location` "
                f"(keys {sorted(deployment)}); has the pricing answer changed?"
            )
        if deployment.get("deployment_location_no_price_available") is True:
            left_out["no_price_in_region"] += 1
            continue
        for metric in deployment.get("metrics") or []:
            offer = (
                _offer(metric, str(region), plan_id, plan_name, deployment)
                if isinstance(metric, dict)
                else None
            )
            if offer is None:
                left_out["other_metric"] += 1
                continue
            key = (offer.instance_type, offer.region, offer.pricing_type)
            first = seen.get(key)
            if first is None:
                seen[key] = offer
            elif _same_price(first.price_per_hour, offer.price_per_hour):
                left_out["repeated_deployment"] += 1
            else:
                seen[key] = _disagreeing(first, offer)
    if not any(o.pricing_type == "on_demand" for o in seen.values()):
        raise LayoutChanged(
            f"{url}: no `part-is.instance-hours-<profile>` metric in any deployment of plan "
            f"{plan_name or plan_id}; has the metric been renamed?"
        )
    yield from seen.values()


def metric_profile(metric_id: str) -> tuple[str, PricingType] | None:
    """(profile, pricing type) a metric id prices; None for a metric the connector does not read.

    >>> metric_profile("part-is.spot-gx3-16x80x1l4"), metric_profile("part-is.os-rhel-vcpu-hours")
    (('gx3-16x80x1l4', 'spot'), None)
    """
    for prefix, pricing_type in METRICS.items():
        if metric_id.startswith(prefix) and profile(metric_id[len(prefix) :]) is not None:
            return metric_id[len(prefix) :], pricing_type
    return None


def usd_tiers(metric: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], str | None]:
    """The USA/USD price tiers of a metric, lowest tier first, or none and why."""
    amounts = [a for a in metric.get("amounts") or [] if isinstance(a, dict)]
    for amount in amounts:
        if amount.get("country") == PRICE_COUNTRY and amount.get("currency") == PRICE_CURRENCY:
            tiers = [p for p in amount.get("prices") or [] if isinstance(p, dict)]
            if not tiers:
                return [], f"{PRICE_COUNTRY}/{PRICE_CURRENCY} amount has no `prices`"
            return sorted(tiers, key=lambda p: number(p.get("quantity_tier")) or 0.0), None
    countries = sorted({f"{a.get('country')}/{a.get('currency')}" for a in amounts})
    return [], f"no {PRICE_COUNTRY}/{PRICE_CURRENCY} amount (has {', '.join(countries[:6]) or 'none'})"


def _offer(
    metric: Mapping[str, Any],
    region: str,
    plan_id: str,
    plan_name: str | None,
    deployment: Mapping[str, Any],
) -> Offer | None:
    read = metric_profile(str(metric.get("metric_id") or ""))
    if read is None:
        return None
    instance_type, pricing_type = read
    shape = profile(instance_type)
    assert shape is not None  # metric_profile only returns profile names
    vcpus, ram, count, gpu = shape
    tiers, problem = usd_tiers(metric)
    price, price_problem = read_price(tiers[0].get("price") if tiers else None, "price")
    quantity = number(metric.get("charge_unit_quantity"))
    if quantity is None or quantity <= 0:
        quantity_problem: str | None = f"charge_unit_quantity is {metric.get('charge_unit_quantity')!r}"
    else:
        quantity_problem = None
        price = price / quantity
    data: dict[str, Any] = {
        "plan_id": plan_id,
        "plan_name": plan_name,
        "deployment_id": deployment.get("deployment_id"),
        "metric_id": metric.get("metric_id"),
        "charge_unit_name": metric.get("charge_unit_name"),
        "charge_unit": metric.get("charge_unit"),
        "charge_unit_quantity": metric.get("charge_unit_quantity"),
        "tier_model": metric.get("tier_model"),
        "price_country": PRICE_COUNTRY,
    }
    if len(tiers) > 1:
        data["tiers"] = [{"quantity_tier": t.get("quantity_tier"), "price": t.get("price")} for t in tiers]
    if plan_name is not None and plan_name != instance_type:
        data["plan_name_differs"] = True
    if pricing_type == "spot":
        data["interruptible"] = "IBM may preempt a spot instance at any time, after a 30 s grace period"
    return Offer(
        provider=name,
        instance_type=instance_type,
        region=region,
        pricing_type=pricing_type,
        price_source="list",
        price_per_hour=price if not problem else math.nan,
        currency=PRICE_CURRENCY,
        gpu_name_raw=gpu,
        gpu_count=float(count),
        vcpus=float(vcpus),
        ram_gb=ram,
        billing_unit="second",
        provider_data=data,
        scope=f"plan:{plan_name or instance_type}",
        problem=problem or price_problem or quantity_problem,
    )


def _same_price(first: float, second: float) -> bool:
    return first == second or (math.isnan(first) and math.isnan(second))


def _disagreeing(first: Offer, other: Offer) -> Offer:
    """The first offer, flagged: two deployments of one plan price one region differently."""
    return replace(
        first,
        provider_data={**first.provider_data, "other_price": other.price_per_hour},
        problem=f"two deployments price {first.region} differently: {first.price_per_hour} and "
        f"{other.price_per_hour}",
    )
