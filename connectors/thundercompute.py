"""Thunder Compute: hourly rates of every GPU configuration, from the public pricing endpoint.

Source: `GET https://api.thundercompute.com:8443/v1/pricing`, keyless: the OpenAPI document the
API serves (`/openapi.json`, published as https://www.thundercompute.com/docs/api-reference/utilities/get-current-pricing)
declares `security: []` for it, and Thunder's own CLI (github.com/Thunder-Compute/thunder-cli,
`api.FetchPricing`, checked 2026-12-02 at dc01ad3) reads it to price `tnr create`. One request per
run, no pagination, no documented rate limit. Shape::

    {"pricing": {"h100_x1_prototyping": 1.38, "a100xl_x4_production": 6.4, ...,
                 "additional_vcpus": 0.03, "disk_gb": 0.0001, "ephemeral_disk_gb": 0.0002}}

A key `<gpu>_x<n>_<mode>` is one configuration: `n` GPUs of type `<gpu>` (the CLI's names:
`a6000`, `a100xl` = A100 80 GB, `h100`) in one mode, priced in USD per hour for the whole
instance (the CLI's `CalculateHourlyPrice` takes the value as the instance's GPU cost, then adds
the extras below). The answer states no currency: Thunder bills in USD only (docs/billing: card
or preloaded credit through Stripe; the pricing page and the CLI print "$x/hr"), so USD.
The price includes the mode's base vCPUs and 100 GB of disk; the other keys are the rates of the
extras (`ADD_ONS`, per unit-hour). They are not offers: counted as `Excluded("add_on_rate")`, and
each GPU offer carries them in `provider_data["add_on_rates"]`.

Modes, as Thunder sells them (the CLI's `--mode` help and its disclaimer):
- `production` ("highest stability, long-running"): an ordinary on-demand instance,
  `pricing_type="on_demand"`.
- `prototyping` ("lowest cost, dev/test"): "optimized for development. Long running GPU
  processes may be interrupted. For production inference or batch training, use production
  mode." An interruptible tier at a published fixed price: `pricing_type="spot"`,
  `price_source="list"` (no market sets it), so a fine-tuning estimate counts the interruptions
  instead of ranking it as a cheap on-demand GPU.
- another mode word lands as `on_demand` with `provider_data["mode_known"] = False`, its mode in
  the instance type, never dropped.

`instance_type` is the key as published ("h100_x1_prototyping"); `gpu_name_raw` its GPU word
("h100"), resolved by the seeds (gpu_aliases.csv / instance_types.csv). The endpoint states no
VRAM, vCPUs, RAM, region or interconnect: `region="global"` (it does not price by location).
Billing is per minute while the instance runs (docs/billing: "All compute resources are billed
per minute only while your instances run"): `billing_unit="minute"`.

Wrong rows: a configuration whose value is missing, not a number, zero or negative is yielded
with `problem` (NaN when unreadable). No `pricing` object, or one without any configuration key,
raises `LayoutChanged`. A key that is neither a configuration nor a known add-on is counted as
`Excluded("unknown_key")` with the key in the detail. Scopes: one per mode
(`pricing:production`, `pricing:prototyping`), so a mode that vanishes is held on its own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    PricingType,
    RawResponse,
    Unchanged,
    excluded,
    number,
    read_price,
)
from connectors.http import Client

name = "thundercompute"
requires: tuple[str, ...] = ()

API_URL = "https://api.thundercompute.com:8443/v1/pricing"
CURRENCY = "USD"  # stated by the billing docs, not by the answer (see the module docstring)
CONFIG_KEY = re.compile(r"^(?P<gpu>.+)_x(?P<count>[1-9][0-9]*)_(?P<mode>[A-Za-z]+)$")
# mode -> pricing type: prototyping "may be interrupted" (thunder-cli cmd/create.go disclaimer)
MODE_PRICING: Mapping[str, PricingType] = {"production": "on_demand", "prototyping": "spot"}
# The extras priced beside the configurations, per unit-hour (thunder-cli utils/pricing.go).
ADD_ONS: Mapping[str, str] = {
    "additional_vcpus": "USD per vCPU-hour beyond the configuration's included vCPUs",
    "disk_gb": "USD per GB-hour of primary disk beyond the included 100 GB",
    "ephemeral_disk_gb": "USD per GB-hour of ephemeral disk",
}


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield client.fetch("GET", API_URL, headers={"Accept": "application/json"})


def pricing_map(payload: Any, url: str = API_URL) -> Mapping[str, Any]:
    """The `pricing` object of the answer; raises `LayoutChanged` when it is missing or empty."""
    rates = payload.get("pricing") if isinstance(payload, dict) else None
    if not isinstance(rates, dict):
        got = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(f"{url}: `pricing` object missing (got {got}); has the pricing endpoint changed?")
    if not any(CONFIG_KEY.match(key) for key in rates):
        raise LayoutChanged(
            f"{url}: `pricing` holds no `<gpu>_x<n>_<mode>` key (got {sorted(rates)[:8]}); "
            "has the configuration key format changed?"
        )
    return rates


def config(key: str) -> tuple[str, int, str] | None:
    """(gpu, count, mode) of a configuration key, None for any other key.

    >>> config("a100xl_x4_production"), config("disk_gb")
    (('a100xl', 4, 'production'), None)
    """
    found = CONFIG_KEY.match(key)
    if found is None:
        return None
    return found["gpu"], int(found["count"]), found["mode"].lower()


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    for response in responses:
        rates = pricing_map(response.json(), response.url)
        add_ons = {key: number(rates[key]) for key in ADD_ONS if key in rates}
        left_out: Counter[str] = Counter()
        unknown: list[str] = []
        for key, value in rates.items():
            parts = config(key)
            if parts is not None:
                yield _offer(key, value, *parts, add_ons)
            elif key in ADD_ONS:
                left_out["add_on_rate"] += 1
            else:
                unknown.append(key)
        yield from excluded(left_out)
        if unknown:
            yield Excluded("unknown_key", detail=", ".join(sorted(unknown)), count=len(unknown))


def _offer(key: str, value: Any, gpu: str, count: int, mode: str, add_ons: Mapping[str, Any]) -> Offer:
    price, problem = read_price(value, key)
    data: dict[str, Any] = {"key": key, "mode": mode, "add_on_rates": dict(add_ons)}
    if mode not in MODE_PRICING:
        data["mode_known"] = False
    if mode == "prototyping":
        data["interruptible"] = "long running GPU processes may be interrupted (Thunder's mode disclaimer)"
    return Offer(
        provider=name,
        instance_type=key,
        region="global",
        pricing_type=MODE_PRICING.get(mode, "on_demand"),
        price_source="list",
        price_per_hour=price,
        currency=CURRENCY,
        gpu_name_raw=gpu,
        gpu_count=float(count),
        billing_unit="minute",
        provider_data=data,
        scope=f"pricing:{mode}",
        problem=problem,
    )
