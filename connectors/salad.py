"""SaladCloud: per-priority GPU rates from the SaladCloud Public API's GPU classes.

Source: `GET https://api.salad.com/api/public/organizations/{organization_name}/gpu-classes`
with the `Salad-Api-Key` header (operation `list_gpu_classes` of the SaladCloud OpenAPI
description, `api-specs/salad-cloud.yaml` of github.com/SaladTechnologies/salad-cloud-docs,
checked 2026-12-02 at commit 504c704). The API has no keyless price list and the pricing page
(https://salad.com/pricing) is not a source we hold a capture of, so both credentials are
required (`SALAD_API_KEY`, `SALAD_ORGANIZATION`): without them the provider is skipped. The
organization is redacted like the key, so cassettes and the raw archive never name it. One
request per run; the answer (`GpuClassesList`) holds at most 100 classes and is not paged; 429
is documented without a stated limit. Shape::

    {"items": [{"id": "<uuid>", "name": "RTX 4090 (24 GB)", "gpu_class_type": "community",
                "gpu_count": 1, "min_vcpu": 1, "max_vcpu": 16, "min_ram": 1024, "max_ram": 30720,
                "is_high_demand": false,
                "prices": [{"priority": "high", "price": "0.30"}, {"priority": "batch", ...}]}]}

What becomes an offer: one per GPU class x priority level (`high`, `medium`, `low`, `batch`,
the "Lowest" level of the docs), USD per hour for one replica: `instance_type`
`"<class name> / <priority>"` (secure classes `"<class name> / secure / <priority>"`),
`region="global"` (Salad places replicas on nodes worldwide; the price names no region).

How the offer is modelled, and why:
- `pricing_type="spot"` for every offer. Salad's nodes are shared consumer PCs that "can
  disconnect at any time", and a higher-priority container group "can preempt lower priority
  ones" (docs.salad.com .../billing-pricing/priority-pricing, updated 2025-11-06); even "High"
  is only safe from other workloads, not from its node leaving. There is no uninterruptible
  rate, so no offer is `on_demand`, and the four levels are not a discount of one: they are
  four interruptible tiers, kept apart in the offer key and in `provider_data["priority"]`.
- `price_source="list"`: each level's price is a fixed rate Salad publishes, not a live market
  or a host's bid (providers.csv says `spot_kind=bid`: the levels preempt by what they pay).
- What the price covers: "For GPU container groups, there are no additional charges for RAM
  and vCPU" (.../billing-pricing/billing, updated 2026-04-09): the GPU rate pays for the
  replica's vCPUs and RAM, up to the class's `max_vcpu` / `max_ram` (MB of 1024 per GB, as the
  API's `memory` field counts), which become `vcpus` / `ram_gb`.
- `billing_unit="second"`: "usage is tracked per second" and no charge accrues while an
  instance allocates or downloads its image (same page).
- A class of more than one GPU (`gpu_count` > 1, "the number of GPUs in the cluster") is left
  out as `Excluded("multi_gpu_class")`: the API does not say whether its price is per GPU or
  per replica, and guessing would be off by the GPU count.

The GPU name and memory come from the class name ("RTX 4090 (24 GB)" -> "RTX 4090", 24 GB);
a name without a "(N GB)" suffix lands with its whole name and no stated memory.

Quirks handled:
- `price` is a decimal string; a missing, non-numeric, zero or negative one is a wrong row
  (`problem`), never read as "not offered". So is a price without a priority (the schema lets
  `priority` be null).
- No `items` list, or an empty one, raises `LayoutChanged`; a class without `name` or `prices`
  too (both are required by the schema).
- One scope for the whole answer (one body: the classes succeed or fail together).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from connectors.base import (
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

name = "salad"
API_KEY = "SALAD_API_KEY"
ORGANIZATION = "SALAD_ORGANIZATION"
requires: tuple[str, ...] = (API_KEY, ORGANIZATION)

API_BASE = "https://api.salad.com/api/public"
SCOPE = "spot:gpu-classes"
# Salad's priority levels, highest first (ContainerGroupPriority); "batch" is the docs' "Lowest".
PRIORITIES = ("high", "medium", "low", "batch")
MB_PER_GB = 1024  # the API's memory fields are MB, 1024 to the GB ("1 GB (1073741824 bytes)")
_NAME = re.compile(r"^(?P<model>.*?)\s*\((?P<gb>\d+(?:\.\d+)?)\s*GB\)\s*$", re.IGNORECASE)


def api_url(organization: str) -> str:
    return f"{API_BASE}/organizations/{quote(organization, safe='')}/gpu-classes"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Salad-Api-Key": creds[API_KEY], "Accept": "application/json"}
    yield client.fetch("GET", api_url(creds[ORGANIZATION]), headers=headers)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    for response in responses:
        counts: dict[str, int] = {}
        classes = required_list(response.json(), "items", where=response.url, answer="the GPU classes")
        for gpu_class in classes:
            yield from class_offers(gpu_class, counts)
        yield from excluded(counts)


def split_name(class_name: str) -> tuple[str, float | None]:
    """("RTX 4090", 24.0) from "RTX 4090 (24 GB)"; the whole name and None without the suffix."""
    match = _NAME.match(class_name.strip())
    if match is None:
        return class_name.strip(), None
    return match.group("model"), float(match.group("gb"))


def class_offers(gpu_class: Any, counts: dict[str, int]) -> Iterator[Offer]:
    """The offers of one GPU class, one per priority level it prices."""
    if not isinstance(gpu_class, dict) or not gpu_class.get("name"):
        raise LayoutChanged(f"GPU class without `name`: {gpu_class!r:.200}; has the API changed?")
    class_name = str(gpu_class["name"])
    prices = gpu_class.get("prices")
    if not isinstance(prices, list) or not prices:
        raise LayoutChanged(f"GPU class {class_name!r} has no `prices` list; has the API changed?")
    gpu_count = number(gpu_class.get("gpu_count"))
    if gpu_count is not None and gpu_count > 1:
        counts["multi_gpu_class"] = counts.get("multi_gpu_class", 0) + 1
        return
    model, memory = split_name(class_name)
    kind = str(gpu_class.get("gpu_class_type") or "community")
    max_vcpu, max_ram = number(gpu_class.get("max_vcpu")), number(gpu_class.get("max_ram"))
    for entry in prices:
        entry = entry if isinstance(entry, dict) else {}
        priority = entry.get("priority")
        price, problem = read_price(entry.get("price"), "price")
        if priority is None:
            problem = problem or f"price {entry.get('price')!r} has no `priority`"
        tier = str(priority or "unknown")
        parts = [class_name, *(["secure"] if kind == "secure" else []), tier]
        yield Offer(
            provider=name,
            instance_type=" / ".join(parts),
            region="global",
            pricing_type="spot",
            price_source="list",
            price_per_hour=price,
            currency="USD",
            gpu_name_raw=model,
            gpu_count=1.0,
            gpu_memory_gb_raw=memory,
            vcpus=max_vcpu if max_vcpu else None,
            ram_gb=round(max_ram / MB_PER_GB, 3) if max_ram else None,
            billing_unit="second",
            provider_data={
                "gpu_class_id": gpu_class.get("id"),
                "gpu_class_name": class_name,
                "gpu_class_type": kind,
                "priority": tier,
                # 0 = highest; an unknown level sorts last
                "priority_rank": PRIORITIES.index(tier) if tier in PRIORITIES else len(PRIORITIES),
                "price_text": entry.get("price"),
                "interruptible": "always (shared nodes disconnect; lower priorities are preempted)",
                "price_includes_vcpu_ram": True,
                "vcpu_range": [gpu_class.get("min_vcpu"), gpu_class.get("max_vcpu")],
                "ram_mb_range": [gpu_class.get("min_ram"), gpu_class.get("max_ram")],
                "is_high_demand": gpu_class.get("is_high_demand"),
            },
            scope=SCOPE,
            problem=problem,
        )
