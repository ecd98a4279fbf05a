"""Hot Aisle: AMD MI300X virtual machines and bare-metal servers from the team's availability API.

Source: `GET https://admin.hotaisle.app/api/teams/{team}/virtual_machines/available/` and
`GET .../teams/{team}/bare_metal/available/` with `Authorization: Token <key>` (API docs at
https://admin.hotaisle.app/api/docs; the request follows the peers that run it live, checked
2026-12-02: gpuhunt `providers/hotaisle.py` at cdd58ac, which reads both lists, and dstack's
Hot Aisle backend, which launches what they list). The answers are per team, so both
`HOTAISLE_API_KEY` and `HOTAISLE_TEAM_HANDLE` are required: without them the provider is skipped.
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
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    child,
    excluded,
    number,
    read_price,
)
from connectors.http import Client

name = "hotaisle"
API_KEY = "HOTAISLE_API_KEY"
TEAM = "HOTAISLE_TEAM_HANDLE"
requires: tuple[str, ...] = (API_KEY, TEAM)

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


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    left_out: dict[str, int] = {}
    for response in responses:
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
