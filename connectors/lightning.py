"""Lightning AI: per-second GPU machines (Studios and Jobs) from Lightning's public accelerator catalog.

Source: `GET https://lightning.ai/v1/core/accelerators?cloudProvider=<CLOUD>` (keyless JSON, no
documented rate limit; one request per cloud a run). Checked 2026-12-02 against Lightning's own
cost-estimation skill (github.com/lightning-ai/skills, `lightning-cost-estimation/SKILL.md`):
"every machine price on lightning.ai/pricing comes from one public endpoint", which "needs no
auth"; the lightning.ai/pricing page itself is a client-rendered app over the same catalog. The
`cloudProvider` values are the clouds a Lightning teamspace launches on (`MACHINE` is Lightning's
own bare-metal cloud, then AWS, GCP, Lambda, Nebius, Voltage Park, Vultr), each priced by
Lightning. Shape::

    {"accelerator": [{"slugMultiCloud": "lit-h100-80gb-8", "slug": "gpu-h100-8x",
                      "family": "H100", "acceleratorType": "GPU", "enabled": true,
                      "cost": 36, "spotPrice": 20.5, "outOfCapacity": false,
                      "availableZones": ["us-east-1"],
                      "resources": {"gpu": 8, "gpuType": "nvidia-h100-80gb", "cpu": 208,
                                    "memoryMb": "1843200", "storageGb": 2000}}, ...]}

What becomes an offer: each enabled GPU machine of each cloud, priced per instance (`cost` is USD
per hour for the whole machine, not per GPU, per the skill: "36 on an 8xH100 SKU is $4.50/GPU-hr"),
one `on_demand` offer from `cost` and one `spot` offer from `spotPrice` (Lightning's
"interruptible" machines). 1 Lightning credit = 1 USD (lightning.ai/docs billing FAQ), so the
catalog's numbers are USD. Both are rates Lightning publishes in its catalog, not bids, so both are
`price_source="list"`; the interruptible rate is no fixed fraction of `cost` (the skill: spot "is
not always cheaper"). Machines bill per second while allocated (`billing_unit="second"`).
`instance_type` is the cross-cloud slug (`slugMultiCloud`, else `slug` / `instanceId`); `region` is
the cloud (`lightning-cloud`, `aws`, ...), the zones it lists are kept in `provider_data`.
Scopes: `<pricing_type>:<region>` (one body per cloud; each fails on its own).

Quirks handled:
- `spotPrice` 0 means the machine has no interruptible rate ("0 means the provider has no spot,
  not free"): `Excluded("no_spot_rate")`. The catalog is protobuf JSON, which leaves a zero field
  out, so an absent `spotPrice` reads the same. `cost` is required: absent, not a number or not
  positive, the on-demand offer is yielded with `problem` set (a renamed key must not read as
  "not offered"). `nonOndemand` / `nonSpot` true exclude that side by rule.
- CPU and TPU machines (`acceleratorType` not "GPU", or no GPUs) are `Excluded("not_a_gpu")`;
  `enabled: false` is `Excluded("disabled")`; GCP's Dynamic Workload Scheduler SKUs (`dwsOnly`)
  are queued batch allocations, not on-demand: `Excluded("dws_only")`.
- `outOfCapacity` true -> `available=False` (the offer still lands; availability decides ranking).
- VRAM per GPU is read from `gpuType` ("nvidia-h100-80gb" -> 80); "nvidia-b200" states none.
- No `accelerator` list, or an empty one, raises `LayoutChanged`; a GPU entry naming no machine
  (no slug, no instance id) too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from connectors.base import Excluded, LayoutChanged, Offer, PricingType, RawResponse, excluded, required_list
from connectors.http import Client

name = "lightning"
requires: tuple[str, ...] = ()

API_URL = "https://lightning.ai/v1/core/accelerators"
# cloudProvider value -> the region our offers carry (the cloud the machine runs in)
CLOUDS: Mapping[str, str] = {
    "MACHINE": "lightning-cloud",
    "AWS": "aws",
    "GCP": "gcp",
    "LAMBDA_LABS": "lambda",
    "NEBIUS": "nebius",
    "VOLTAGE_PARK": "voltagepark",
    "VULTR": "vultr",
}
# (pricing type, price key, the flag that says the side is not sold)
SIDES: tuple[tuple[PricingType, str, str], ...] = (
    ("on_demand", "cost", "nonOndemand"),
    ("spot", "spotPrice", "nonSpot"),
)
_VRAM = re.compile(r"-(\d+)gb\b", re.I)


def url_for(cloud: str) -> str:
    return f"{API_URL}?cloudProvider={cloud}"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    for cloud in CLOUDS:
        yield client.fetch("GET", url_for(cloud))


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    for response in responses:
        region = region_of(response.url)
        counts: dict[str, int] = {}
        catalog = required_list(response.json(), "accelerator", where=response.url, answer="the catalog")
        for machine in catalog:
            yield from machine_offers(machine, region, counts)
        yield from excluded(counts)


def region_of(url: str) -> str:
    """The region (cloud) a catalog URL asks for; an unknown cloud keeps its own name, lowercased."""
    cloud = (parse_qs(urlsplit(url).query).get("cloudProvider") or [""])[0]
    if not cloud:
        raise LayoutChanged(f"{url}: no `cloudProvider` in the catalog URL; which cloud does it price?")
    return CLOUDS.get(cloud, cloud.lower().replace("_", "-"))


def machine_offers(machine: Mapping[str, Any], region: str, counts: dict[str, int]) -> Iterator[Offer]:
    """The on-demand and interruptible offer of one catalog machine (USD per instance-hour)."""
    stated = machine.get("resources")
    resources: Mapping[str, Any] = stated if isinstance(stated, Mapping) else {}
    gpus = _number(resources.get("gpu"))
    if str(machine.get("acceleratorType", "GPU")).upper() != "GPU" or not gpus:
        _count(counts, "not_a_gpu")
        return
    if machine.get("enabled") is False:
        _count(counts, "disabled")
        return
    if machine.get("dwsOnly"):
        _count(counts, "dws_only")
        return
    slug = machine.get("slugMultiCloud") or machine.get("slug") or machine.get("instanceId")
    if not slug:
        raise LayoutChanged(f"a GPU machine of the {region} catalog has no slug: {dict(machine)!r}")
    gpu_type = str(resources.get("gpuType") or machine.get("family") or "")
    data: dict[str, Any] = {
        "slug": machine.get("slug"),
        "instance_id": machine.get("instanceId"),
        "family": machine.get("family"),
        "gpu_type": resources.get("gpuType"),
        "available_zones": list(machine.get("availableZones") or []),
        "cost_per_instance_hour": machine.get("cost"),
        "spot_price_per_instance_hour": machine.get("spotPrice"),
        "credit_usd": 1.0,  # 1 Lightning credit = 1 USD (billing FAQ)
    }
    if machine.get("isTierRestricted"):
        data["tier_restricted"] = True  # needs a paid plan
    for pricing_type, key, not_sold in SIDES:
        if machine.get(not_sold):
            _count(counts, f"no_{pricing_type}")
            continue
        raw = machine.get(key)
        if pricing_type == "spot" and (raw is None or raw == 0):
            _count(counts, "no_spot_rate")  # 0 (or left out, protobuf's zero) = no interruptible rate
            continue
        price, problem = _price(raw, key, key in machine)
        wait = machine.get("availableInSecondsSpot" if pricing_type == "spot" else "availableInSeconds")
        yield Offer(
            provider=name,
            instance_type=str(slug),
            region=region,
            pricing_type=pricing_type,
            price_source="list",
            price_per_hour=price,
            currency="USD",
            gpu_name_raw=gpu_type or None,
            gpu_count=float(gpus),
            gpu_memory_gb_raw=vram_gb(gpu_type),
            vcpus=_number(resources.get("cpu")),
            ram_gb=_ram_gb(resources.get("memoryMb")),
            billing_unit="second",
            available=not machine.get("outOfCapacity") if "outOfCapacity" in machine else None,
            provider_data=data | ({"available_in_seconds": wait} if wait is not None else {}),
            scope=f"{pricing_type}:{region}",
            problem=problem,
        )


def vram_gb(gpu_type: str) -> float | None:
    """GB per GPU the catalog's `gpuType` states ("nvidia-h200-141gb" -> 141.0), else None."""
    match = _VRAM.search(gpu_type)
    return float(match.group(1)) if match else None


def _count(counts: dict[str, int], reason: str) -> None:
    counts[reason] = counts.get(reason, 0) + 1


def _number(raw: object) -> float | None:
    """A count the catalog may send as a number or, protobuf's int64, a string."""
    if isinstance(raw, bool) or raw is None:
        return None
    try:
        number = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _ram_gb(raw: object) -> float | None:
    mb = _number(raw)
    return round(mb / 1024, 3) if mb else None


def _price(raw: object, key: str, present: bool) -> tuple[float, str | None]:
    if not present:
        return math.nan, f"`{key}` missing"
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return math.nan, f"`{key}` {raw!r} is not a number"
    number = float(raw)
    if not (math.isfinite(number) and number > 0):
        return number, f"`{key}` {raw!r} is not a positive number"
    return number, None
