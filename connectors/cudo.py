"""Cudo Compute: GPU VM prices assembled from per-component machine-type prices.

Retired: the public on-demand platform shut down on 2026-03-31 (dstack's "Drop cudo backend",
https://github.com/dstackai/dstack/pull/4018, 2026-07-09; gpuhunt dropped its provider on
2026-06-12, https://github.com/dstackai/gpuhunt/pull/237). `warehouse/seeds/provider_lifecycle.csv`
says so, so no refresh or check asks it any more; the module stays registered so that the raw
archive's Cudo responses still parse (tests/test_cudo.py keeps the parser honest).

Source: `GET https://rest.compute.cudo.org/v1/vms/machine-types-2` (keyless REST; no documented
rate limit; one request a run). The answer is `{"machineTypes": [...]}`; a bare list of the same
objects (how the only capture we hold stores them) is read too. One machine type is one host type
in one data centre::

    {"dataCenterId": "no-luster-1", "machineType": "epyc-rome-rtx-a5000", "gpuModel": "RTX A5000",
     "gpuModelId": "nvidia-rtx-a5000", "minVcpuPerMemoryGib": 0.259109, "maxVcpuPerMemoryGib": 1.04,
     "minVcpuPerGpu": 1, "maxVcpuPerGpu": 16, "vcpuPriceHr": {"value": "0.002100"},
     "memoryGibPriceHr": {"value": "0.003400"}, "gpuPriceHr": {"value": "0.520000"},
     "minStorageGibPriceHr": {...}, "ipv4PriceHr": {...}, "maxGpuFree": 4, "maxVcpuFree": 116,
     "maxMemoryGibFree": 219, ...}

How Cudo prices a VM: not per instance type. A VM is any (GPUs, vCPUs, GiB RAM) within the machine
type's limits, billed GPUs x `gpuPriceHr` + vCPUs x `vcpuPriceHr` + GiB x `memoryGibPriceHr` (USD
per hour; disk and IPv4 are billed apart and kept in `provider_data`). Like connectors/gcp.py,
`parse` assembles whole-VM offers from those components, for shapes of its own choosing, because
Cudo documents no fixed shape:

- GPU counts 1, 2, 4 and 8, up to `maxGpuFree` (the most GPUs one host of the type can give now;
  a type with none free publishes its 1-GPU shape with `available=False`);
- per GPU, `maxVcpuPerGpu` vCPUs (the whole CPU share the type allows a GPU: data loading and
  tokenization of a fine-tuning run need it), and RAM of vCPUs / `minVcpuPerMemoryGib` GiB rounded
  down (the most memory those vCPUs may carry), so the shape is the largest per-GPU slice;
- `available` is False when the shape needs more vCPUs or RAM than `maxVcpuFree` /
  `maxMemoryGibFree` report free.

`instance_type` is `"{n}x {machineType}"`, `region` the `dataCenterId`, `price_source="list"`
(every component is a published rate), `provider_data["components"]` keeps the unit prices and
`provider_data["shape_rule"]` names the rule above. Each machine type in each data centre is its
own scope (`"<dataCenterId>:<machineType>"`): its shapes share one set of component prices and
succeed or fail together. Cudo states no GPU memory: `gpu_memory_gb_raw`
stays None and the GPU resolves by `gpuModel`. No spot.

Quirks handled:
- Machine types without a GPU model (`gpuModel` and `gpuModelId` empty) are `Excluded("cpu_only")`.
- Prices are decimal strings; a component price that is missing, unreadable, zero for the GPU, or
  negative yields the offers with `problem` set (price NaN when unreadable).
- A payload that is neither a list nor `{"machineTypes": [...]}`, or holds no machine type,
  raises `LayoutChanged`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, excluded, required_list
from connectors.http import Client

name = "cudo"
requires: tuple[str, ...] = ()

API_URL = "https://rest.compute.cudo.org/v1/vms/machine-types-2"
GPU_COUNTS = (1, 2, 4, 8)
SHAPE_RULE = "maxVcpuPerGpu vCPUs and vCPUs / minVcpuPerMemoryGib GiB per GPU"
COMPONENTS = {"gpu": "gpuPriceHr", "vcpu": "vcpuPriceHr", "memory_gib": "memoryGibPriceHr"}


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield client.fetch("GET", API_URL)


def machine_types(payload: Any, url: str = API_URL) -> list[Mapping[str, Any]]:
    """The machine-type objects of an answer: `{"machineTypes": [...]}` or a bare list."""
    items = required_list(
        payload, "machineTypes", where=url, answer="the machine-types answer", bare_list=True
    )
    return [item for item in items if isinstance(item, dict)]


def component_price(machine: Mapping[str, Any], key: str) -> float | None:
    """A `{"value": "0.520000"}` price as a float; None when missing or unreadable."""
    cell = machine.get(key)
    value = cell.get("value") if isinstance(cell, dict) else None
    try:
        number = (
            float(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else math.nan
        )
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def shapes(machine: Mapping[str, Any]) -> list[tuple[int, int, int]]:
    """(GPUs, vCPUs, GiB RAM) to publish for one machine type, by the rule in the module docstring."""
    free = machine.get("maxGpuFree")
    limit = int(free) if isinstance(free, int | float) and free >= 1 else 1
    counts = [n for n in GPU_COUNTS if n <= limit] or [1]
    per_gpu = machine.get("maxVcpuPerGpu") or machine.get("minVcpuPerGpu") or 1
    ratio = machine.get("minVcpuPerMemoryGib") or 0
    result = []
    for n in counts:
        vcpus = int(n * per_gpu)
        ram = int(vcpus / ratio) if ratio > 0 else 0
        result.append((n, vcpus, ram))
    return result


def machine_offers(machine: Mapping[str, Any]) -> list[Offer] | Excluded:
    """Every published shape of one machine type, priced from its components."""
    model = machine.get("gpuModel")
    kind = str(machine.get("machineType") or "")
    region = machine.get("dataCenterId")
    if not kind or not region:
        raise LayoutChanged(
            f"machine type {dict(machine)!r:.120} lacks `machineType` or `dataCenterId`; has the API changed?"
        )
    if not model and not machine.get("gpuModelId"):
        return Excluded("cpu_only", kind)
    read = {part: component_price(machine, key) for part, key in COMPONENTS.items()}
    missing = [COMPONENTS[part] for part, price in read.items() if price is None]
    prices = {part: price for part, price in read.items() if price is not None}  # all of them unless missing
    problem = None
    if missing:
        problem = f"component price {missing} missing or unreadable"
    elif prices["gpu"] <= 0 or min(prices.values()) < 0:
        problem = f"component prices {prices} are not all positive"
    free = machine.get("maxGpuFree") or 0
    offers = []
    for gpus, vcpus, ram in shapes(machine):
        price = (
            math.nan
            if missing
            else gpus * prices["gpu"] + vcpus * prices["vcpu"] + ram * prices["memory_gib"]
        )
        fits = (
            gpus <= free
            and vcpus <= (machine.get("maxVcpuFree") or 0)
            and ram <= (machine.get("maxMemoryGibFree") or 0)
        )
        offers.append(
            Offer(
                provider=name,
                instance_type=f"{gpus}x {kind}",
                region=str(region),
                pricing_type="on_demand",
                price_source="list",
                price_per_hour=price if math.isnan(price) else round(price, 6),
                currency="USD",
                gpu_name_raw=str(model or machine.get("gpuModelId")),
                gpu_count=float(gpus),
                vcpus=float(vcpus),
                ram_gb=float(ram),
                available=fits,
                provider_data={
                    "machine_type": kind,
                    "gpu_model_id": machine.get("gpuModelId"),
                    "cpu_model": machine.get("cpuModel"),
                    "components": {part: read[part] for part in COMPONENTS} | {"currency": "USD"},
                    "storage_gib_price_hr": component_price(machine, "minStorageGibPriceHr"),
                    "ipv4_price_hr": component_price(machine, "ipv4PriceHr"),
                    "shape_rule": SHAPE_RULE,
                    "max_gpu_free": machine.get("maxGpuFree"),
                    "total_gpu_free": machine.get("totalGpuFree"),
                    "renewable_energy": machine.get("renewableEnergy"),
                },
                scope=f"{region}:{kind}",  # one machine type's shapes share its component prices
                problem=problem,
            )
        )
    return offers


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    counts: Counter[str] = Counter()
    for response in responses:
        for machine in machine_types(response.json(), response.url):
            result = machine_offers(machine)
            if isinstance(result, Excluded):
                counts[result.reason] += 1
            else:
                yield from result
    yield from excluded(counts)
