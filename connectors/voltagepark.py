"""Voltage Park: on-demand H100 prices from the two keyless endpoints its dashboard reads.

Sources (no auth, no documented rate limit; two requests a run), both under
`https://cloud-api.voltagepark.com/api/v1` (the API documented at `/api/v1/redoc`):

- `GET /bare-metal/locations` -> `{"results": [...], "total_result_count", "has_next",
  "has_previous"}`. One row per location (`id`, a UUID, no name): `specs_per_node` (`gpu_model`
  "h100-sxm5-80gb", `gpu_count` 8, `cpu_model`, `cpu_count`, `ram_gb`, `storage_gb`) and, per
  network fabric, a price and a stock count: `gpu_price_ethernet` / `gpu_count_ethernet`,
  `gpu_price_infiniband` / `gpu_count_infiniband`. Bare metal is sold by the whole node.
- `GET /instant-deploy-presets/` -> a list of VM presets: `id`, `resources` (`gpus`
  {"h100-sxm5-80gb": {"count": n}}, `vcpu_count`, `ram_gb`, `storage_gb`), `compute_rate_hourly`,
  `storage_rate_hourly`, `location_ids_with_availability`. The API marks this endpoint deprecated.

Checked 2026-12-02 against two public peers that read the same endpoints without a key (the
Computable Voltage Park recipe vendored in markrusch/Compute-Indices, verified live 2026-08-22
and 2026-08-25, and the opengrid terminal's provider): both read `gpu_price_<fabric>` as USD per
GPU-hour (the dashboard multiplies it by the GPU count; Voltage Park's own "$1.99/GPU/hour"
matches the ethernet price) and `compute_rate_hourly` as USD per instance-hour ("15.12" is the
8-GPU preset, "1.89" the 1-GPU one). The answers carry no currency field; every price Voltage
Park prints is in dollars, so prices are USD.

What becomes an offer:
- bare metal: one offer per location and fabric, `instance_type` "<n>x <gpu_model> bare-metal
  <fabric>", price = per-GPU price x the node's GPU count, `region` the location id, `available`
  whether that fabric has GPUs in stock. Every `gpu_price_<fabric>` key is read, so a new fabric
  lands as its own offer rather than vanishing. Scope `on_demand:bare-metal`.
- VM presets: one offer per preset, `instance_type` "<n>x <gpu> vm", price = `compute_rate_hourly`
  (the preset's disk bills apart at `storage_rate_hourly`, kept in `provider_data`),
  `region="global"` (presets are not priced by location), `available` whether any location has
  one. Scope `on_demand:vm`.
No spot, preemptible or reserved price is published (long-term capacity is contact-only).

Quirks handled:
- The presets endpoint answering 404 or 410 (removed) yields a `Degraded` beside the bare-metal
  offers: the run is degraded and the VM scope keeps its last good prices.
- A `null` fabric price means that fabric is not sold there: `Excluded("no_<fabric>_price")`; a
  price that is not a positive number, or an ethernet / infiniband price key missing from a row
  that has other prices, is a wrong row (`problem`), never "not offered".
- A page that says more rows exist (`has_next`, or `total_result_count` above the rows held)
  raises `LayoutChanged`: the endpoint has started paging and a partial catalog must not load.
- No `results` list, a row without `specs_per_node.gpu_model`, no fabric price in any row, or a
  presets answer that is not a non-empty list raises `LayoutChanged` naming the key. A preset with
  no GPU (a CPU shape) or with two GPU models is `Excluded`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import (
    Degraded,
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    child,
    excluded,
    number,
    read_price,
    required_list,
)
from connectors.http import Client

name = "voltagepark"
requires: tuple[str, ...] = ()

API_ROOT = "https://cloud-api.voltagepark.com/api/v1"
BARE_METAL_URL = f"{API_ROOT}/bare-metal/locations"
PRESETS_URL = f"{API_ROOT}/instant-deploy-presets/"
PRICE_PREFIX = "gpu_price_"
COUNT_PREFIX = "gpu_count_"
# the fabrics every location has priced so far; a row lacking one of these keys is a wrong row
FABRICS = ("ethernet", "infiniband")
GONE = (404, 410)
SCOPES = {"bare_metal": "on_demand:bare-metal", "vm": "on_demand:vm"}


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield client.fetch("GET", BARE_METAL_URL, headers={"Accept": "application/json"})
    # the presets endpoint is deprecated: its removal (404/410) is an answer, not a failed run
    yield client.fetch("GET", PRESETS_URL, headers={"Accept": "application/json"}, ok_statuses=GONE)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded | Degraded]:
    counts: dict[str, int] = {}
    for response in responses:
        if response.status in GONE:
            yield Degraded(
                f"{response.url} answered HTTP {response.status}: the deprecated instant-deploy presets "
                "endpoint is gone, so VM presets keep their last good prices",
                "read VM prices from /virtual-machines/instant/locations instead (a connector change)",
            )
            continue
        payload = response.json()
        if "bare-metal" in response.url:
            yield from bare_metal_offers(payload, counts, response.url)
        elif "instant-deploy-presets" in response.url:
            yield from preset_offers(payload, counts, response.url)
        else:
            raise LayoutChanged(f"{response.url}: not an endpoint the voltagepark parser reads")
    yield from excluded(counts)


def location_rows(payload: Any, url: str = BARE_METAL_URL) -> list[Any]:
    """The `results` of the bare-metal locations answer, all of them: a page that says more rows
    exist elsewhere would load a partial catalog, so it fails instead."""
    rows = required_list(payload, "results", where=url, answer="the bare-metal locations answer")
    total = payload.get("total_result_count")
    if payload.get("has_next") or (isinstance(total, int) and total > len(rows)):
        raise LayoutChanged(
            f"{url}: the answer holds {len(rows)} of {total} locations (has_next="
            f"{payload.get('has_next')!r}); the endpoint now pages, so read every page before loading"
        )
    return rows


def bare_metal_offers(payload: Any, counts: dict[str, int], url: str = BARE_METAL_URL) -> Iterator[Offer]:
    """One whole-node offer per location and fabric, priced per GPU x the node's GPUs."""
    priced = 0
    for row in location_rows(payload, url):
        specs = child(row, "specs_per_node") if isinstance(row, dict) else {}
        model = specs.get("gpu_model")
        if not isinstance(model, str) or not model.strip():
            raise LayoutChanged(f"{url}: a location without `specs_per_node.gpu_model`: {row!r}")
        node_gpus = number(specs.get("gpu_count"))
        found = {k.removeprefix(PRICE_PREFIX) for k in row if k.startswith(PRICE_PREFIX)}
        if not found:
            continue
        for fabric in sorted(found | set(FABRICS)):
            key = PRICE_PREFIX + fabric
            raw = row.get(key)
            if key in row and raw is None:
                counts[f"no_{fabric}_price"] = counts.get(f"no_{fabric}_price", 0) + 1
                continue
            priced += 1
            yield _node_offer(row, specs, model.strip(), node_gpus, fabric, raw)
    if not priced:
        raise LayoutChanged(
            f"{url}: no location has a `{PRICE_PREFIX}<fabric>` price (looked for "
            f"{PRICE_PREFIX}ethernet, {PRICE_PREFIX}infiniband); has the answer renamed its price keys?"
        )


def _node_offer(
    row: Mapping[str, Any],
    specs: Mapping[str, Any],
    model: str,
    node_gpus: float | None,
    fabric: str,
    raw: object,
) -> Offer:
    per_gpu, problem = read_price(raw, PRICE_PREFIX + fabric)
    if node_gpus is None or node_gpus <= 0:
        problem = problem or f"specs_per_node.gpu_count {specs.get('gpu_count')!r} is not a GPU count"
        node_gpus = math.nan
    in_stock = number(row.get(COUNT_PREFIX + fabric))
    count_label = f"{node_gpus:g}" if math.isfinite(node_gpus) else "?"
    return Offer(
        provider=name,
        instance_type=f"{count_label}x {model} bare-metal {fabric}",
        region=str(row.get("id") or "unknown"),
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=round(per_gpu * node_gpus, 6) if problem is None else per_gpu * node_gpus,
        currency="USD",
        gpu_name_raw=model,
        gpu_count=node_gpus,
        vcpus=number(specs.get("cpu_count")),
        ram_gb=number(specs.get("ram_gb")),
        available=None if in_stock is None else in_stock > 0,
        provider_data={
            "product": "bare_metal",
            "fabric": fabric,
            "location_id": row.get("id"),
            "price_per_gpu_hour": raw,
            "gpus_in_stock": row.get(COUNT_PREFIX + fabric),
            "cpu_model": specs.get("cpu_model"),
            "storage_gb": specs.get("storage_gb"),
        },
        scope=SCOPES["bare_metal"],
        problem=problem,
    )


def preset_offers(payload: Any, counts: dict[str, int], url: str = PRESETS_URL) -> Iterator[Offer]:
    """One offer per VM preset with exactly one GPU model, at its per-instance compute rate."""
    presets = required_list(
        payload, "presets", where=url, answer="the instant-deploy presets", bare_list=True
    )
    for preset in presets:
        resources = child(preset, "resources") if isinstance(preset, dict) else {}
        gpus = child(resources, "gpus")
        if not gpus:
            counts["no_gpu"] = counts.get("no_gpu", 0) + 1
            continue
        if len(gpus) > 1:
            counts["mixed_gpu_models"] = counts.get("mixed_gpu_models", 0) + 1
            continue
        model, spec = next(iter(gpus.items()))
        yield _preset_offer(preset, resources, str(model), spec)


def _preset_offer(preset: Mapping[str, Any], resources: Mapping[str, Any], model: str, spec: Any) -> Offer:
    price, problem = read_price(preset.get("compute_rate_hourly"), "compute_rate_hourly")
    count = number(spec.get("count")) if isinstance(spec, dict) else None
    if count is None or count <= 0:
        problem = problem or f"resources.gpus.{model}.count is not a GPU count: {spec!r}"
        count = math.nan
    places = preset.get("location_ids_with_availability")
    count_label = f"{count:g}" if math.isfinite(count) else "?"
    return Offer(
        provider=name,
        instance_type=f"{count_label}x {model} vm",
        region="global",
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=price,
        currency="USD",
        gpu_name_raw=model,
        gpu_count=count,
        vcpus=number(resources.get("vcpu_count")),
        ram_gb=number(resources.get("ram_gb")),
        available=len(places) > 0 if isinstance(places, list) else None,
        provider_data={
            "product": "vm",
            "preset_id": preset.get("id"),
            "compute_rate_hourly": preset.get("compute_rate_hourly"),
            # the preset's disk is billed on top of the compute rate
            "storage_rate_hourly": preset.get("storage_rate_hourly"),
            "storage_gb": resources.get("storage_gb"),
            "operating_system": preset.get("operating_system"),
            "locations_with_availability": places,
        },
        scope=SCOPES["vm"],
        problem=problem,
    )
