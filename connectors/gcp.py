"""Google Cloud (Compute Engine) GPU machines, assembled from Cloud Billing Catalog SKUs.

Source: the Cloud Billing Catalog API, public SKUs of the Compute Engine service
    GET https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus
        ?key=API_KEY&currencyCode=USD&pageSize=5000[&pageToken=...]
    docs: https://cloud.google.com/billing/v1/how-tos/catalog-api
Auth: an API key (`GOOGLE_API_KEY`) in the `key` query parameter, the documented way for this API.
    The client redacts it to `***` in every stored URL, so raw payloads and cassettes never hold it.
    A 400/401/403 (invalid key, API not enabled for the key's project, key restricted to other APIs)
    becomes a `FetchError` that says to check GOOGLE_API_KEY.
Rate limits: per-project API quota; a full listing of the service is a few pages of at most 5,000
    SKUs (the documented maximum page size), so one run makes a handful of requests.
Pagination: follow `nextPageToken` until it is absent or empty. A token seen twice raises
    `LayoutChanged` (the listing would loop). A page that fails after the HTTP layer's retries raises
    `FetchError` naming the page number and token reached; page tokens do not outlive the listing,
    so a rerun starts again at page 1. The API has no ETag or version, so `previous` is not used
    and parse never yields `Unchanged`: every successful run re-reads the whole catalog.

How GCP prices a GPU machine: not as one SKU. A machine type is billed as
    vCPUs × <family> core price + GB × <family> RAM price + GPUs × <GPU> price
with separate SKUs per family, GPU model, usage type and location ("A2 Instance Core running in
Americas", "Nvidia Tesla A100 GPU running in Americas"; A3 High also bills its H100s as separate
"Nvidia H100 80GB GPU" SKUs next to "A3 Instance Core/Ram"). `parse` reads those SKUs into
`Component`s and assembles an `Offer` per (machine type, region, usage type) from the shape table
`connectors/data/gcp_machine_shapes.csv` (vCPUs, RAM, accelerator and count per machine type, each
row with its documentation URL) whenever all three components are priced in that region; the parts
go into `provider_data["components"]`. A machine whose components are not all priced in a region
gets no offer there; `report()` counts those, and `parse` yields them as `Excluded`.

Wrong prices are never "not offered": a SKU whose price is $0, negative, NaN, not a number, or
missing (`pricingInfo`, `tieredRates`, `unitPrice`, `usageUnit` absent: a renamed key), or metered
in a unit other than the expected one, is still read as a component, carrying a `problem`; every
machine built from it yields its offer with `problem` set and price NaN (its parts' prices kept in
`provider_data`), which the warehouse quarantines while keeping the last good price. Of two SKUs
for the same part a readable one always wins over a flagged one. One bad SKU never fails the
provider. GCP lists V100 at $0 in regions that do not sell it (6 SKUs in the 2025-06 capture):
those now surface as quarantined n1+V100 offers there, never as published $0 prices.

Unknown GPUs land. A GPU SKU whose label is not in `GPU_LABELS` (a new "Nvidia Zeta Z9 GPU running
in Belgium") has no machine shape to be assembled into, so it yields a GPU-only offer per region
and usage: `instance_type` "<label> (GPU only)", `gpu_name_raw` the label as stated, `gpu_count`
1, the GPU SKU's hourly price, and `provider_data["price_covers"]` saying that vCPUs and RAM are
not included. It shows in marts.unmapped_gpus; adding the label to `GPU_LABELS` and its machines to
the shape table replaces it with whole-machine offers. Core/RAM SKUs of a family not in
`FAMILY_LABELS` are skipped by rule ("machine family without GPUs", E2, N2, ...): they price no GPU,
and a new GPU family shows up through its GPU SKU.

Scopes: the default `"<pricing_type>:<region>"`. GCP prices are regional (`serviceRegions`; zones
are not priced separately and `zone` is never set), and every region comes from the same listing,
so a region that vanishes or thins out is what the per-scope guard must catch.

Quirks handled:
- Descriptions are the source of truth for what a SKU prices. `category` is used when present
  (usageType OnDemand / Preemptible / Commit*, resourceFamily), but some captures (and some
  mirrors) keep only skuId, description and pricingInfo, so everything else is read from the text.
- Spot is named three ways: usageType "Preemptible", "Spot Preemptible <family> Instance Core",
  "<GPU> GPU attached to Spot Preemptible VMs". Spot prices change up to once a month, so they are
  `price_source="market"`; on-demand prices are `"list"`.
- Skipped, with the reason counted by `report()`: committed use ("Commitment v1:", "for 1 Year",
  usageType Commit*), reservations ("Reserved ..."), DWS flex-start / calendar mode, sole tenancy,
  custom machine cores, licence fees, families that carry no GPU (E2, N2, ...).
- Regions come from `serviceRegions`. Without it, the description's location is mapped by
  `LOCATION_REGIONS`; multi-region names ("Americas", "EMEA", "APAC", "Japan") cannot be resolved
  from text and stay unassigned (counted, and yielded as `Excluded("sku: location without a region")`).
- Prices are `units + nanos / 1e9` of the tier starting at usage 0 in `pricingInfo[0]` (the list
  holds only the current price unless a time range is requested; compute SKUs have one tier, and
  for tiered SKUs the first tier is the rate the first hour is billed at). proto3 JSON omits zero fields, so
  a missing `units` or `nanos` is 0. RAM is priced per GiB-hour ("GiBy.h"); the machine-type docs
  give memory in GB meaning 2^30 bytes, so RAM GB × the GiB price is the RAM charge.
- Two SKUs pricing the same thing in the same region (a regional SKU next to a multi-region one,
  or the "H100 80GB Plus" and "H100 80GB Mega" names of the A3 Mega GPU): the SKU covering fewer
  regions wins, then the lower skuId, so the result does not depend on page order.
- Local SSD bundled with a2-ultragpu / a3 machines is not included in the assembled price.
- a4-highgpu-8g (B200) is in the shape table, but no B200 GPU SKU description has been seen in a
  capture yet, so `GPU_LABELS` has no entry for it: until the label is added, A4 gets no
  whole-machine offer and its GPU SKU lands as a GPU-only offer (unmapped), counted in
  `report().unknown_gpus`.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from connectors.base import (
    Excluded,
    FetchError,
    LayoutChanged,
    MissingCredentials,
    Offer,
    RawResponse,
    Unchanged,
    excluded,
    paginate,
)
from connectors.http import Client

name = "gcp"
requires: tuple[str, ...] = ("GOOGLE_API_KEY",)

SERVICE_ID = "6F81-5844-456A"  # Compute Engine
SKUS_URL = f"https://cloudbilling.googleapis.com/v1/services/{SERVICE_ID}/skus"
PAGE_SIZE = 5000  # the documented maximum
# Compute Engine lists some tens of thousands of SKUs (a handful of pages); 200 pages is 1M SKUs,
# far past any real listing and short of a run that pages forever
MAX_PAGES = 200
SHAPES_PATH = Path(__file__).parent / "data" / "gcp_machine_shapes.csv"

Kind = Literal["gpu", "core", "ram"]
Usage = Literal["on_demand", "spot"]

# GPU label as the SKU description states it -> Compute Engine accelerator type name.
# Sources: the accelerator types in https://cloud.google.com/compute/docs/gpus and the SKU
# descriptions in the 2025-06 catalog capture. "Plus" and "Mega" both name the A3 Mega GPU.
GPU_LABELS: Mapping[str, str] = {
    "Nvidia Tesla A100": "nvidia-tesla-a100",
    "Nvidia Tesla A100 80GB": "nvidia-a100-80gb",
    "Nvidia H100 80GB": "nvidia-h100-80gb",
    "Nvidia H100 80GB Mega": "nvidia-h100-mega-80gb",
    "Nvidia H100 Mega 80GB": "nvidia-h100-mega-80gb",
    "Nvidia H100 80GB Plus": "nvidia-h100-mega-80gb",
    "H200 141GB": "nvidia-h200-141gb",
    "Nvidia L4": "nvidia-l4",
    "Nvidia Tesla T4": "nvidia-tesla-t4",
    "Nvidia Tesla V100": "nvidia-tesla-v100",
    "Nvidia Tesla P100": "nvidia-tesla-p100",
    "Nvidia Tesla P4": "nvidia-tesla-p4",
    "Nvidia Tesla K80": "nvidia-tesla-k80",
}

# "<label> Instance Core|Ram" -> the `family` column of the shape table. Only families that carry
# GPUs. "A3Plus" is the billing name of A3 Mega (a3-megagpu), "A3Ultra" of a3-ultragpu.
FAMILY_LABELS: Mapping[str, str] = {
    "N1 Predefined": "n1",
    "A2": "a2",
    "A3": "a3",
    "A3Plus": "a3-mega",
    "A3Ultra": "a3-ultra",
    "A4": "a4",
    "G2": "g2",
}

# Location name in a SKU description -> region, for SKUs without `serviceRegions`.
# Source: https://cloud.google.com/compute/docs/regions-zones (region locations); SKUs use both
# "Virginia" and "Northern Virginia" for us-east4, "Israel" and "Tel Aviv" for me-west1.
LOCATION_REGIONS: Mapping[str, str] = {
    "Taiwan": "asia-east1",
    "Hong Kong": "asia-east2",
    "Tokyo": "asia-northeast1",
    "Osaka": "asia-northeast2",
    "Seoul": "asia-northeast3",
    "Mumbai": "asia-south1",
    "Delhi": "asia-south2",
    "Singapore": "asia-southeast1",
    "Jakarta": "asia-southeast2",
    "Sydney": "australia-southeast1",
    "Melbourne": "australia-southeast2",
    "Warsaw": "europe-central2",
    "Finland": "europe-north1",
    "Stockholm": "europe-north2",
    "Madrid": "europe-southwest1",
    "Belgium": "europe-west1",
    "London": "europe-west2",
    "Frankfurt": "europe-west3",
    "Netherlands": "europe-west4",
    "Zurich": "europe-west6",
    "Milan": "europe-west8",
    "Paris": "europe-west9",
    "Berlin": "europe-west10",
    "Turin": "europe-west12",
    "Doha": "me-central1",
    "Dammam": "me-central2",
    "Israel": "me-west1",
    "Tel Aviv": "me-west1",
    "TelAviv": "me-west1",
    "Johannesburg": "africa-south1",
    "Montreal": "northamerica-northeast1",
    "Toronto": "northamerica-northeast2",
    "Mexico": "northamerica-south1",
    "Sao Paulo": "southamerica-east1",
    "Santiago": "southamerica-west1",
    "Iowa": "us-central1",
    "South Carolina": "us-east1",
    "Virginia": "us-east4",
    "Northern Virginia": "us-east4",
    "Columbus": "us-east5",
    "Dallas": "us-south1",
    "Oregon": "us-west1",
    "Los Angeles": "us-west2",
    "Salt Lake City": "us-west3",
    "Las Vegas": "us-west4",
}

# Offerings that are neither on-demand nor spot, recognised by their description text.
_EXCLUDED_MARKERS: tuple[tuple[str, str], ...] = (
    ("Commitment", "committed use"),
    ("Reserved ", "reservation"),
    ("DWS ", "DWS flex-start"),
    ("Calendar Mode", "DWS calendar mode"),
    ("Sole Tenancy", "sole tenancy"),
    ("Custom ", "custom machine type"),
    ("Licensing Fee", "licence fee"),
)
_COMMITMENT_RE = re.compile(r" for \d+ Years?$")
_GPU_RE = re.compile(
    r"^(?P<spot>(?:Spot )?Preemptible )?(?P<label>.+?) GPU"
    r"(?P<attached> attached to Spot Preemptible VMs)? running in (?P<location>.+)$"
)
_HOST_RE = re.compile(
    r"^(?P<spot>(?:Spot )?Preemptible )?(?P<family>.+?) Instance (?P<resource>Core|Ram)"
    r" running in (?P<location>.+)$"
)
_EXPECTED_UNIT: Mapping[Kind, str] = {"gpu": "h", "core": "h", "ram": "GiBy.h"}


@dataclass(frozen=True, slots=True)
class Component:
    """One priced part of a machine: a GPU, a vCPU or a GiB of RAM, per hour, in some regions."""

    sku_id: str
    kind: Kind
    subject: str  # accelerator type for a GPU ("nvidia-l4"), shape-table family otherwise ("g2")
    usage: Usage
    regions: tuple[str, ...]
    location: str  # as the description states it ("Americas", "Belgium")
    price: float  # per hour; per GiB-hour for RAM; NaN when it could not be read
    currency: str
    description: str
    problem: str | None = None  # why the price is wrong; machines built from it are flagged
    known: bool = True  # False: a GPU label not in GPU_LABELS (`subject` is the label as stated)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A SKU that prices nothing an offer is built from, and why."""

    sku_id: str
    description: str
    reason: str


@dataclass(frozen=True, slots=True)
class MachineShape:
    """A machine type (or N1 + attached GPUs combination) from the sourced shape table."""

    machine_type: str
    family: str
    vcpus: float
    ram_gb: float
    accelerator: str
    gpu_count: int
    gpu_memory_gb: float
    source: str


@dataclass(frozen=True, slots=True)
class Report:
    """What a parse made of a catalog: for the run summary, without logging from a pure function."""

    skus: int
    components: Mapping[tuple[Kind, Usage], int]
    skipped: Mapping[str, int]  # reason -> SKUs
    unassigned_locations: Mapping[str, int]  # location with no region -> components
    offers: Mapping[Usage, int]
    incomplete: Mapping[tuple[str, Usage, str], int] = field(default_factory=dict)
    # (machine type, usage, "missing core|ram|gpu") -> regions where the other parts were priced
    unknown_gpus: Mapping[str, int] = field(default_factory=dict)  # label -> GPU-only offers
    flagged: Mapping[Usage, int] = field(default_factory=dict)  # offers with a `problem`


# --- shapes ---------------------------------------------------------------------------------------


@functools.cache
def load_shapes(path: Path = SHAPES_PATH) -> tuple[MachineShape, ...]:
    """The machine shape table; every row names the documentation page it was taken from."""
    with path.open(newline="") as fh:
        return tuple(
            MachineShape(
                machine_type=row["machine_type"],
                family=row["family"],
                vcpus=float(row["vcpus"]),
                ram_gb=float(row["ram_gb"]),
                accelerator=row["accelerator"],
                gpu_count=int(row["gpu_count"]),
                gpu_memory_gb=float(row["gpu_memory_gb"]),
                source=row["source"],
            )
            for row in csv.DictReader(fh)
        )


# --- one SKU --------------------------------------------------------------------------------------


def _sku_label(sku: Mapping[str, Any]) -> str:
    return str(sku.get("skuId") or sku.get("name") or "?")


def money(unit_price: Mapping[str, Any]) -> float:
    """A google.type.Money as a float: units + nanos/1e9 (proto3 JSON omits zero fields)."""
    return int(unit_price.get("units", 0) or 0) + int(unit_price.get("nanos", 0) or 0) / 1e9


def hourly_rate(sku: Mapping[str, Any]) -> tuple[float, str, str]:
    """(price, currency, usage unit) of the tier starting at usage 0 of the current pricing."""
    sku_id = _sku_label(sku)
    try:
        expression = sku["pricingInfo"][0]["pricingExpression"]
        tiers = expression["tieredRates"]
        unit = str(expression["usageUnit"])
    except (KeyError, IndexError, TypeError) as exc:
        raise LayoutChanged(
            f"GCP SKU {sku_id}: pricingInfo[0].pricingExpression.{{tieredRates,usageUnit}} missing "
            f"({exc!r}); has the Cloud Billing Catalog changed its SKU shape?"
        ) from None
    first = [t for t in tiers if float(t.get("startUsageAmount", 0) or 0) == 0]
    if not first or "unitPrice" not in first[0]:
        raise LayoutChanged(
            f"GCP SKU {sku_id}: no tieredRates entry with startUsageAmount 0 and a unitPrice; "
            "has the tier layout changed?"
        )
    unit_price = first[0]["unitPrice"]
    return money(unit_price), str(unit_price.get("currencyCode", "")), unit


def usage_of(sku: Mapping[str, Any]) -> Usage | None:
    """on_demand / spot from category.usageType, else from the description; None for commitments."""
    description = str(sku.get("description", ""))
    category = sku.get("category")
    if isinstance(category, Mapping) and category.get("usageType"):
        usages: dict[str, Usage] = {"OnDemand": "on_demand", "Preemptible": "spot"}
        return usages.get(str(category["usageType"]))
    if description.startswith("Commitment") or _COMMITMENT_RE.search(description):
        return None
    return "spot" if "Preemptible" in description else "on_demand"


def regions_of(sku: Mapping[str, Any], location: str) -> tuple[str, ...]:
    """serviceRegions when the SKU has them, else the region the description's location names."""
    service_regions = sku.get("serviceRegions")
    if service_regions:
        return tuple(sorted(str(r) for r in service_regions))
    region = LOCATION_REGIONS.get(location)
    return (region,) if region else ()


def read_sku(sku: Mapping[str, Any]) -> Component | Skipped:
    """What one SKU prices: a GPU, core or RAM component of a GPU machine, or why it is skipped."""
    if not isinstance(sku, Mapping) or "description" not in sku:
        raise LayoutChanged(
            f"GCP SKU {sku!r:.120}: no `description`; the parser reads every SKU by its description"
        )
    sku_id, description = _sku_label(sku), str(sku["description"])
    category = sku.get("category")
    if isinstance(category, Mapping) and category.get("resourceFamily") not in (None, "Compute"):
        return Skipped(sku_id, description, f"resource family {category.get('resourceFamily')}")
    for marker, reason in _EXCLUDED_MARKERS:
        if marker in description:
            return Skipped(sku_id, description, reason)
    usage = usage_of(sku)
    if usage is None:
        return Skipped(sku_id, description, "committed use")

    kind: Kind
    if gpu := _GPU_RE.match(description):
        kind, location = "gpu", gpu["location"]
        known = gpu["label"] in GPU_LABELS
        # an unknown label is kept as stated: it lands as a GPU-only offer, never vanishes
        subject = GPU_LABELS.get(gpu["label"], gpu["label"])
    elif host := _HOST_RE.match(description):
        kind, location = ("core" if host["resource"] == "Core" else "ram"), host["location"]
        family = FAMILY_LABELS.get(host["family"])
        if family is None:
            return Skipped(sku_id, description, "machine family without GPUs")
        subject, known = family, True
    else:
        return Skipped(sku_id, description, "not a GPU, core or RAM SKU")

    price, currency, problem = price_problem(sku, kind)
    return Component(
        sku_id=sku_id,
        kind=kind,
        subject=subject,
        usage=usage,
        regions=regions_of(sku, location),
        location=location,
        price=price,
        currency=currency,
        description=description,
        problem=problem,
        known=known,
    )


def price_problem(sku: Mapping[str, Any], kind: Kind) -> tuple[float, str, str | None]:
    """(price, currency, what is wrong with it or None) of a SKU that prices a component.

    A SKU whose price cannot be read or is not a positive finite number in the expected unit is a
    wrong row: flagged, so it is quarantined instead of failing the provider or vanishing.
    """
    try:
        price, currency, unit = hourly_rate(sku)
    except LayoutChanged as exc:
        return math.nan, "", str(exc)
    except (ValueError, TypeError, OverflowError) as exc:  # units "abc", nanos NaN
        return math.nan, "", f"GCP SKU {_sku_label(sku)}: unreadable unitPrice ({exc})"
    if unit != _EXPECTED_UNIT[kind]:
        return (
            math.nan,
            currency,
            (f"usageUnit {unit!r}, expected {_EXPECTED_UNIT[kind]!r}; has GCP changed how it meters this?"),
        )
    if not math.isfinite(price):
        return math.nan, currency, f"price is not finite: {price!r}"
    if price <= 0:
        return price, currency, f"zero or negative price: {price!r}"
    return price, currency, None


# --- the catalog ----------------------------------------------------------------------------------


def skus_of(response: RawResponse, page: int) -> list[Mapping[str, Any]]:
    """The `skus` of one ListSkus page (an empty page may omit the key, as proto3 JSON does)."""
    payload = response.json()
    if not isinstance(payload, Mapping):
        raise LayoutChanged(
            f"GCP page {page} ({response.url}): expected a JSON object with `skus`, got "
            f"{type(payload).__name__}; has the Cloud Billing Catalog API changed its envelope?"
        )
    skus = payload.get("skus")
    if skus is None:
        if set(payload) <= {"nextPageToken"}:
            return []
        raise LayoutChanged(
            f"GCP page {page} ({response.url}): `skus` missing, keys are {sorted(payload)[:8]}; "
            "has the Cloud Billing Catalog API changed its envelope?"
        )
    if not isinstance(skus, list):
        raise LayoutChanged(f"GCP page {page}: `skus` is {type(skus).__name__}, expected a list")
    return skus


def read_catalog(skus: Iterable[Mapping[str, Any]]) -> tuple[list[Component], list[Skipped]]:
    components: list[Component] = []
    skipped: list[Skipped] = []
    for sku in skus:
        item = read_sku(sku)
        if isinstance(item, Component):
            components.append(item)
        else:
            skipped.append(item)
    return components, skipped


ComponentKey = tuple[Kind, str, Usage, str]  # kind, subject, usage, region


def index_components(components: Iterable[Component]) -> dict[ComponentKey, Component]:
    """One component per (kind, subject, usage, region): a readable price, then fewest regions,
    then the lowest skuId wins."""
    index: dict[ComponentKey, Component] = {}
    for component in components:
        for region in component.regions:
            key = (component.kind, component.subject, component.usage, region)
            held = index.get(key)
            # a readable price first, then the SKU covering fewer regions, then the lower id
            rank = (component.problem is not None, len(component.regions), component.sku_id)
            if held is None or rank < (held.problem is not None, len(held.regions), held.sku_id):
                index[key] = component
    return index


def assemble(
    components: Iterable[Component], shapes: Sequence[MachineShape]
) -> tuple[list[Offer], Counter[tuple[str, Usage, str]]]:
    """Whole-machine offers, and per (machine, usage, missing part) the regions left without one."""
    index = index_components(components)
    regions_by_part: dict[tuple[Kind, str, Usage], set[str]] = {}
    for kind, subject, usage, region in index:
        regions_by_part.setdefault((kind, subject, usage), set()).add(region)

    offers: list[Offer] = []
    incomplete: Counter[tuple[str, Usage, str]] = Counter()
    usages: tuple[Usage, ...] = ("on_demand", "spot")
    for shape in shapes:
        for usage in usages:
            parts: tuple[tuple[Kind, str], ...] = (
                ("core", shape.family),
                ("ram", shape.family),
                ("gpu", shape.accelerator),
            )
            candidate_regions = set().union(
                *(regions_by_part.get((kind, subject, usage), set()) for kind, subject in parts)
            )
            for region in sorted(candidate_regions):
                core, ram, gpu = (index.get((kind, subject, usage, region)) for kind, subject in parts)
                if core is None or ram is None or gpu is None:
                    for (kind, _), component in zip(parts, (core, ram, gpu), strict=True):
                        if component is None:
                            incomplete[(shape.machine_type, usage, f"missing {kind}")] += 1
                    continue
                # a flagged part may have no readable currency: only readable ones must agree
                if len({c.currency for c in (core, ram, gpu) if c.problem is None}) > 1:
                    incomplete[(shape.machine_type, usage, "mixed currencies")] += 1
                    continue
                offers.append(machine_offer(shape, region, usage, core, ram, gpu))
    offers.extend(gpu_only_offer(c, region) for (*_, region), c in sorted(index.items()) if not c.known)
    return offers, incomplete


def gpu_only_offer(gpu: Component, region: str) -> Offer:
    """An unknown GPU's own hourly price, so it lands (unmapped) instead of vanishing."""
    return Offer(
        provider=name,
        instance_type=f"{gpu.subject} (GPU only)",
        region=region,
        pricing_type=gpu.usage,
        price_source="market" if gpu.usage == "spot" else "list",
        price_per_hour=gpu.price,
        currency=gpu.currency or "USD",
        gpu_name_raw=gpu.subject,
        gpu_count=1.0,
        provider_data={
            "price_covers": (
                "one GPU only: GCP bills vCPUs and RAM separately, and no machine shape is known "
                "for this GPU label (add it to GPU_LABELS and the shape table)"
            ),
            "sku_ids": [gpu.sku_id],
            "description": gpu.description,
        },
        problem=gpu.problem,
    )


def machine_offer(
    shape: MachineShape, region: str, usage: Usage, core: Component, ram: Component, gpu: Component
) -> Offer:
    """vCPUs × core price + GB × RAM price + GPUs × GPU price, with the parts kept alongside."""
    price = shape.vcpus * core.price + shape.ram_gb * ram.price + shape.gpu_count * gpu.price
    wrong = [f"{c.kind} SKU {c.sku_id} ({c.description}): {c.problem}" for c in (core, ram, gpu) if c.problem]
    currency = next((c.currency for c in (gpu, core, ram) if c.currency), "USD")
    return Offer(
        provider=name,
        instance_type=shape.machine_type,
        region=region,
        pricing_type=usage,
        price_source="market" if usage == "spot" else "list",
        # nanos precision drops float noise from the sum; a sum with a wrong part means nothing
        price_per_hour=math.nan if wrong else round(price, 9),
        currency=currency,
        gpu_name_raw=shape.accelerator,
        gpu_count=float(shape.gpu_count),
        gpu_memory_gb_raw=shape.gpu_memory_gb,
        vcpus=shape.vcpus,
        ram_gb=shape.ram_gb,
        provider_data={
            "components": {
                "vcpu_usd_per_hour": core.price,
                "ram_usd_per_gb_hour": ram.price,
                "gpu_usd_per_hour": gpu.price,
                "vcpus": shape.vcpus,
                "ram_gb": shape.ram_gb,
                "gpus": shape.gpu_count,
                "currency": currency,
            },
            "sku_ids": [core.sku_id, ram.sku_id, gpu.sku_id],
            "family": shape.family,
            "shape_source": shape.source,
        },
        problem="; ".join(wrong) or None,
    )


def _catalog(responses: Sequence[RawResponse]) -> tuple[int, list[Component], list[Skipped]]:
    skus = [sku for page, response in enumerate(responses, start=1) for sku in skus_of(response, page)]
    if not skus:
        # An empty listing must not read as "every GCP offer vanished" (the warehouse would close them).
        raise LayoutChanged(
            f"GCP: {len(responses)} page(s) held no SKUs at all; the Compute Engine catalog is never "
            "empty, so the API answered something else (check the raw responses)"
        )
    components, skipped = read_catalog(skus)
    if not components:
        raise LayoutChanged(
            f"GCP: none of {len(skus)} SKU descriptions matched a GPU, core or RAM pattern of a GPU "
            "family (e.g. 'Nvidia L4 GPU running in Belgium', 'G2 Instance Core running in Americas'); "
            "have the descriptions changed?"
        )
    return len(skus), components, skipped


# --- the connector ---------------------------------------------------------------------------------


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    """Whole-machine offers for every shape, region and usage type with all parts priced; then
    what was left out: skipped SKUs by reason, machines with a part unpriced in a region."""
    _, components, skipped = _catalog(responses)
    offers, incomplete = assemble(components, load_shapes())
    yield from offers
    yield from excluded(Counter(f"sku: {s.reason}" for s in skipped))
    # a component whose location names no region prices nothing we can place: said, not lost
    yield from excluded(Counter("sku: location without a region" for c in components if not c.regions))
    missing: Counter[str] = Counter()
    for (_machine, _usage, what), regions in incomplete.items():
        missing[f"machine: {what}"] += regions
    yield from excluded(missing)


def report(responses: Sequence[RawResponse]) -> Report:
    """Counts behind `parse`: components read, SKUs skipped by reason, machines left incomplete."""
    total, components, skipped = _catalog(responses)
    offers, incomplete = assemble(components, load_shapes())
    return Report(
        skus=total,
        components=dict(Counter((c.kind, c.usage) for c in components)),
        skipped=dict(Counter(s.reason for s in skipped)),
        unassigned_locations=dict(Counter(c.location for c in components if not c.regions)),
        offers=dict(Counter(o.pricing_type for o in offers)),
        incomplete=dict(incomplete),
        unknown_gpus=dict(Counter(c.subject for c in components if not c.known for _ in c.regions)),
        flagged=dict(Counter(o.pricing_type for o in offers if o.problem)),
    )


def next_page_token(response: RawResponse, page: int) -> str:
    payload = response.json()
    if not isinstance(payload, Mapping):
        raise LayoutChanged(f"GCP page {page}: expected a JSON object, got {type(payload).__name__}")
    return str(payload.get("nextPageToken") or "")


def _auth_error(response: RawResponse) -> FetchError:
    try:
        error = response.json().get("error", {})
        detail = f"{error.get('status', '')} {error.get('message', '')}".strip()
    except (LayoutChanged, AttributeError):
        detail = response.read()[:200].decode("utf-8", "replace")
    return FetchError(
        f"GCP Cloud Billing answered HTTP {response.status} ({detail or 'no detail'}) for {response.url}: "
        "check GOOGLE_API_KEY - is it a valid API key, is the Cloud Billing API enabled in its "
        "project, and is the key not restricted to other APIs?"
    )


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    """Every page of the Compute Engine SKU listing. `previous` is unused: the API has no versions."""
    key = creds.get("GOOGLE_API_KEY")
    if not key:
        raise MissingCredentials(name, requires)

    def fetch_page(token: str | None, page: int) -> RawResponse:
        params = {"key": key, "currencyCode": "USD", "pageSize": str(PAGE_SIZE)}
        if token:
            params["pageToken"] = token
        try:
            response = client.fetch("GET", SKUS_URL, params=params, ok_statuses=(400, 401, 403))
        except FetchError as exc:  # keep the class (Unreachable, ReplayMiss, ...): it picks the hint
            raise type(exc)(
                f"GCP SKU listing failed on page {page}"
                + (f" (pageToken {token!r})" if token else "")
                + f" after {page - 1} complete page(s): {exc}. Page tokens do not outlive a listing, "
                "so rerun the refresh to start again from page 1."
            ) from exc
        if response.status in (400, 401, 403):
            raise _auth_error(response)
        return response

    yield from paginate(
        fetch_page,
        next_page_token,
        max_pages=MAX_PAGES,
        what=f"GCP SKU listing {SKUS_URL} (nextPageToken)",
    )
