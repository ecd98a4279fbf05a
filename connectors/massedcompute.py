"""Massed Compute: on-demand GPU VM prices from the Massed Compute VM API's GPU inventory.

Source: `GET https://vm.massedcompute.com/api/v1/gpu-inventory` with `Authorization: Bearer
<MASSEDCOMPUTE_API_KEY>` (Massed Compute VM API 1.0.0, OpenAPI at
https://vm-docs.massedcompute.com/api/v1, checked 2026-12-02: "Authentication of every endpoint
provided requires a API token"; a key is made under API Settings). The key is required: a run
without it is skipped cleanly. No documented rate limit; one request per run. The pricing page
(massedcompute.com/pricing) is not read: no capture of its markup exists to write a parser
against, and the API states the same products with their specs in fields.

The answer, per the OpenAPI `GPUInventoryV1` schema:

    {"gpu_inventory": {"<product>": {
        "instance_type": {"name", "description", "price_cents_per_hour",
                          "specs": {"vcpu_count", "memory_gib", "storage_gb"}},
        "regions_with_capacity_available": [{"name", "description"}],
        "capacity_available": <int>}, ...}}

Products are named `gpu_<n>x_<model>` (the API's own deploy example is `gpu_1x_l40`; live names
seen in Massed Compute's public benchmark write-ups, 2026-07 to 2026-09: `gpu_1x_l40s`,
`gpu_1x_a6000`, `gpu_2x_a6000`, `gpu_1x_a100`, `gpu_1x_A100_SXM4`, `gpu_1x_DGX_A100`,
`gpu_1x_h100`, `gpu_1x_pro_6000_blackwell`). The GPU count and model come from that name; the
model token (`l40s`, `pro_6000_blackwell`, ...) is `gpu_name_raw`, mapped by the aliases. The GPU's
memory is not a field: when the description states it ("1x A100 80GB"), that figure is
`gpu_memory_gb_raw` (it tells an 80 GB A100 from a 40 GB one); otherwise it is None.

What becomes an offer: one per product, `pricing_type="on_demand"`, `price_source="list"`, USD
per instance-hour = `price_cents_per_hour` / 100, covering the whole VM (GPUs, vCPUs, RAM and its
disk, `storage_gb`). Prices are not per region, so `region="global"`; the regions with capacity
are kept in `provider_data`, and `available` is `capacity_available > 0`. Billing is per minute
(vm-docs.massedcompute.com/docs/billing/overview: the hourly cost / 60, debited every minute),
so `billing_unit="minute"`. Massed Compute sells no spot or interruptible VMs.

Quirks handled:
- A product name that does not read `gpu_<n>x_<model>` (a CPU product, say) is
  `Excluded("not_a_gpu_product")`, never guessed.
- A missing or wrong `price_cents_per_hour` (absent, non-numeric, 0, negative) is a wrong row:
  yielded with `problem`, never read as "not offered".
- No `gpu_inventory` object, or an empty one, raises `LayoutChanged`; so does a product without
  an `instance_type` object.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, child, excluded, number, read_price
from connectors.http import Client

name = "massedcompute"
CREDENTIAL = "MASSEDCOMPUTE_API_KEY"
requires: tuple[str, ...] = (CREDENTIAL,)

API_URL = "https://vm.massedcompute.com/api/v1/gpu-inventory"
SCOPE = "on_demand:gpu-inventory"
_PRODUCT = re.compile(r"^gpu_(\d+)x_(.+)$", re.IGNORECASE)
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*GB\b", re.IGNORECASE)


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Authorization": f"Bearer {creds[CREDENTIAL]}", "Accept": "application/json"}
    yield client.fetch("GET", API_URL, headers=headers)


def product_gpus(product: str) -> tuple[int, str] | None:
    """(GPU count, model token) of a product name: `gpu_8x_h100` -> (8, "h100"); None when the
    name is not a GPU product's."""
    match = _PRODUCT.match(product.strip())
    if match is None or int(match.group(1)) <= 0:
        return None
    return int(match.group(1)), match.group(2)


def inventory(payload: Any, url: str = API_URL) -> Mapping[str, Any]:
    """The `gpu_inventory` object (product name -> entry); raises when missing or empty."""
    found = payload.get("gpu_inventory") if isinstance(payload, dict) else None
    if not isinstance(found, dict):
        got = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(
            f"{url}: `gpu_inventory` object missing from the GPU inventory answer (got {got}); "
            "has the API changed its format?"
        )
    if not found:
        raise LayoutChanged(f"{url}: `gpu_inventory` is empty; refusing to report an empty catalog")
    return found


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    counts: dict[str, int] = {}
    for response in responses:
        for product, entry in inventory(response.json(), response.url).items():
            offer = product_offer(str(product), entry, response.url)
            if offer is None:
                counts["not_a_gpu_product"] = counts.get("not_a_gpu_product", 0) + 1
                continue
            yield offer
    yield from excluded(counts)


def product_offer(product: str, entry: Any, url: str = API_URL) -> Offer | None:
    """The offer of one inventory entry; None for a product that is not a GPU VM."""
    instance = child(entry, "instance_type") if isinstance(entry, dict) else {}
    if not instance:
        raise LayoutChanged(f"{url}: product `{product}` has no `instance_type` object: {entry!r}")
    name_of = str(instance.get("name") or product)
    gpus = product_gpus(name_of)
    if gpus is None:
        return None
    count, model = gpus
    cents, problem = read_price(instance.get("price_cents_per_hour"), "price_cents_per_hour")
    specs = child(instance, "specs")
    capacity = number(entry.get("capacity_available"))
    regions = entry.get("regions_with_capacity_available")
    region_names = (
        [r.get("name") for r in regions if isinstance(r, dict)] if isinstance(regions, list) else None
    )
    return Offer(
        provider=name,
        instance_type=name_of,
        region="global",
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=cents / 100 if math.isfinite(cents) else cents,
        currency="USD",
        gpu_name_raw=model,
        gpu_count=float(count),
        gpu_memory_gb_raw=_stated_gb(instance.get("description")),
        vcpus=number(specs.get("vcpu_count")),
        ram_gb=_gib_to_gb(number(specs.get("memory_gib"))),
        billing_unit="minute",
        available=None if capacity is None else capacity > 0,
        provider_data={
            "description": instance.get("description"),
            "price_cents_per_hour": instance.get("price_cents_per_hour"),
            "storage_gb": specs.get("storage_gb"),
            "memory_gib": specs.get("memory_gib"),
            "capacity_available": entry.get("capacity_available"),
            "regions_with_capacity": region_names,
        },
        scope=SCOPE,
        problem=problem,
    )


def _stated_gb(description: object) -> float | None:
    """The per-GPU memory a product description states ("1x L40S 48GB" -> 48.0), else None."""
    match = _MEMORY.search(description) if isinstance(description, str) else None
    return float(match.group(1)) if match else None


def _gib_to_gb(gib: float | None) -> float | None:
    # the API states memory in GiB; offers carry GB (10^9 bytes)
    return None if gib is None else round(gib * 1.073741824, 1)
