"""OCI: GPU shape prices from Oracle's public price list and the Cost Estimator's shape list.

Sources (no auth, no documented rate limit, two or three requests a run):
- price list `GET https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/?currencyCode=USD`:
  `{"items": [{partNumber, displayName, metricName, serviceCategory, currencyCodeLocalizations:
  [{currencyCode, prices: [{model: "PAY_AS_YOU_GO", value}]}]}]}`. GPU parts have the metric
  "GPU Per Hour" (e.g. B98415 "Compute - GPU - H100", $10 per GPU-hour). Oracle's REST (ORDS)
  paging (`hasMore` + a `links` entry with `rel="next"`) is followed when present.
- shapes `GET https://www.oracle.com/a/ocom/docs/cloudestimator2/data/shapes.json`:
  `{"items": [{name, hidden, status, allowPreemptible, bundleMemoryQty, gpuQty, gpuMemoryQty,
  shapeType, subType, products: [{partNumber, qty, type}]}]}`. A GPU shape lists the GPU part it is
  billed by (e.g. BM.GPU.H100.8 -> B98415; `qty` there is the OCPU count).

Pricing rule: OCI bills a GPU shape per GPU-hour and that rate covers the shape's bundled OCPUs
and memory (OCI's compute price list; BM.GPU.H100.8 lists at 8 x $10 = $80/h), so an instance is
`gpuQty x` the GPU part's PAY_AS_YOU_GO price. OCI list prices are the same in every region:
`region="global"`.

Preemptible: OCI's preemptible capacity is a fixed 50% of the on-demand list price, not a market.
Shapes with `allowPreemptible` get a second offer with `pricing_type="spot"`,
`price_source="estimated"` and half the list price, never labelled `market`.

Quirks handled:
- Display names such as "BM.GPU.GB200.4 (NVL72)" lose the parenthesised suffix, so
  `instance_type` is the name the Compute API uses (the display name stays in provider_data).
- `gpuMemoryQty` is the shape's total GPU memory for most shapes (BM.GPU.H100.8: 640, so 80 per
  GPU = total / gpuQty), but the newest shapes state it per GPU (BM.GPU.MI355X.8: 288, which read
  as a total gave 36 GB a GPU). Both peers that read shapes.json say so (checked 2026-12-01):
  gpuhunt (`providers/oci.py` `get_gpu_unit_memory_gb`: MI355X 288 per GPU, GB300.4 278) and
  SkyPilot (`fetch_oci.py`: "the shape total for most shapes but the per-GPU figure for a few
  (BM.GPU.MI355X.8, BM.GPU.GB300.4)"); issue 18 adds B300. The models whose shapes state it per
  GPU are `PER_GPU_MEMORY_MODELS` (matched by the shape's model token, so BM.GPU.MI355X-v1.8 and
  BM.GPU.B300.HS.8 follow their family); every other shape is read as a total. Which reading was
  used is kept in `provider_data["gpu_memory_basis"]` ("per_gpu" / "shape_total") beside the raw
  figure, and normalization still snaps the result against the seeds (a new family stating it
  per GPU would show up as a stated-vs-seed conflict, not pass silently).
- RTX PRO shapes (BM.GPU.RTXPRO.8: 8x RTX PRO 6000 Blackwell Server Edition, OCI's compute shapes
  page) have the model token "RTXPRO"; the seeds map it (gpu_aliases, instance_types).
- `gpu_name_raw` is the model token of the shape name (BM.GPU.H100.8 -> "H100",
  BM.GPU.A100-v2.8 -> "A100"); generation-named shapes (BM.GPU4.8, VM.GPU3.1) do not name the
  model, so it is None there and the instance_types seed resolves the GPU.
- Left out by rule and counted by `parse` (as `Excluded` items): hidden or non-ACTIVE shapes, and
  GPU shapes billed by a part the price list does not carry at all (`no_gpu_price`: not publicly
  priced, e.g. BM.GPU.GB200.4). No GPU part or no GPU shape at all raises `LayoutChanged`.
- Wrong, not left out: a "GPU Per Hour" part whose USD PAYG price is $0, negative, NaN, not a
  number, or missing (a renamed `value`, `model` or `prices` key must not read as "not offered")
  is kept with its `problem`, and every shape it bills yields offers with `problem` set (price NaN
  when unreadable), which the warehouse quarantines while keeping their last good prices.
- Unknown hardware lands: any ACTIVE shape with a positive `gpuQty` becomes offers, whatever its
  model token says (a new "BM.GPU.Zeta Z9.8" lands with `gpu_name_raw` "Zeta Z9", unmapped until
  the seeds know it); there is no allow-list of shapes or models.
- Scopes: the default `"<pricing_type>:global"`, one for list prices and one for the preemptible
  estimates; both come from the same two bodies.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, Unchanged, excluded
from connectors.http import Client, request_key

name = "oci"
requires: tuple[str, ...] = ()

PRODUCTS_URL = "https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/"
SHAPES_URL = "https://www.oracle.com/a/ocom/docs/cloudestimator2/data/shapes.json"
CURRENCY = "USD"
GPU_METRIC = "GPU Per Hour"
PRICE_MODEL = "PAY_AS_YOU_GO"
PREEMPTIBLE_FRACTION = 0.5  # OCI: "Preemptible instances are priced at 50% of regular instances"
MAX_PAGES = 50
# Model tokens whose shapes state `gpuMemoryQty` per GPU, not for the whole shape (see the docstring).
PER_GPU_MEMORY_MODELS = frozenset({"MI355X", "GB300", "B300"})


@dataclass(frozen=True, slots=True)
class GpuPart:
    """One GPU price-list part: USD per GPU-hour, pay as you go."""

    part_number: str
    display_name: str
    price_per_gpu_hour: float  # NaN when it could not be read
    problem: str | None = None  # why the price is wrong; None for a usable price


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    response = client.fetch("GET", PRODUCTS_URL, params={"currencyCode": CURRENCY})
    seen = {request_key("GET", response.url, None)}
    for _ in range(MAX_PAGES):
        yield response
        link = next_page_link(response.json())
        if link is None:
            break
        if request_key("GET", link, None) in seen:
            raise LayoutChanged(f"{response.url}: `next` link {link!r} repeats an earlier page")
        seen.add(request_key("GET", link, None))
        response = client.fetch("GET", link)
    else:
        raise LayoutChanged(f"more than {MAX_PAGES} pages from {PRODUCTS_URL}; is paging looping?")
    yield client.fetch("GET", SHAPES_URL)


def next_page_link(payload: Any) -> str | None:
    """The ORDS `next` link when the payload says `hasMore`; None for a single-page answer."""
    if not isinstance(payload, dict) or not payload.get("hasMore"):
        return None
    for link in payload.get("links") or []:
        if isinstance(link, dict) and link.get("rel") == "next" and link.get("href"):
            return str(link["href"])
    raise LayoutChanged("price list says hasMore but has no `links` entry with rel='next'")


def gpu_parts(payload: Any, url: str = PRODUCTS_URL) -> dict[str, GpuPart]:
    """The price list's GPU parts ("GPU Per Hour"), by part number."""
    items = _items(payload, url)
    parts: dict[str, GpuPart] = {}
    for item in items:
        if not isinstance(item, dict) or item.get("metricName") != GPU_METRIC:
            continue
        if not item.get("partNumber"):
            continue  # shapes name their part by number: a part without one bills nothing
        price, problem = payg_price(item.get("currencyCodeLocalizations"))
        parts[item["partNumber"]] = GpuPart(
            item["partNumber"], " ".join(str(item.get("displayName", "")).split()), price, problem
        )
    if not parts:
        raise LayoutChanged(
            f"{url}: no item with metricName {GPU_METRIC!r} among {len(items)} items; "
            "has the price list changed its metrics?"
        )
    return parts


def shape_name(display_name: str) -> str:
    """The Compute API name of a shape: "BM.GPU.GB200.4 (NVL72)" -> "BM.GPU.GB200.4"."""
    return display_name.split(" (", 1)[0].strip()


def gpu_token(shape: str) -> str | None:
    """The GPU model a shape name states: BM.GPU.H100.8 -> "H100"; BM.GPU4.8 -> None."""
    parts = shape_name(shape).split(".")
    if len(parts) >= 4 and parts[1] == "GPU":
        return re.sub(r"-v\d+$", "", parts[2]) or None
    return None


def gpu_memory_per_gpu(shape: str, stated: object, gpu_qty: float) -> tuple[float | None, str | None]:
    """(GB per GPU, "per_gpu" | "shape_total") from a shape's `gpuMemoryQty`; (None, None) when
    it states none. Shapes of `PER_GPU_MEMORY_MODELS` state it per GPU, the rest per shape."""
    if isinstance(stated, bool) or not isinstance(stated, int | float) or not stated > 0:
        return None, None
    if gpu_token(shape) in PER_GPU_MEMORY_MODELS:
        return float(stated), "per_gpu"
    return stated / gpu_qty, "shape_total"


def shape_offers(shape: Mapping[str, Any], parts: Mapping[str, GpuPart]) -> list[Offer] | str:
    """The offers of one shape, or why it has none ("not_gpu", "hidden", "no_gpu_price")."""
    gpu_qty = shape.get("gpuQty")
    if not isinstance(gpu_qty, int | float) or isinstance(gpu_qty, bool) or gpu_qty <= 0:
        return "not_gpu"
    if shape.get("hidden") or shape.get("status") != "ACTIVE":
        return "hidden"
    products = shape.get("products") or []
    part = next(
        (parts[p["partNumber"]] for p in products if isinstance(p, dict) and p.get("partNumber") in parts),
        None,
    )
    if part is None:
        return "no_gpu_price"
    display = str(shape.get("name", ""))
    instance = shape_name(display)
    total_memory = shape.get("gpuMemoryQty")
    per_gpu_memory, memory_basis = gpu_memory_per_gpu(instance, total_memory, gpu_qty)
    ram = shape.get("bundleMemoryQty")
    ocpus = next((p.get("qty") for p in products if p.get("partNumber") == part.part_number), None)
    # NaN stays NaN through the arithmetic: a flagged part makes flagged offers
    list_price = round(gpu_qty * part.price_per_gpu_hour, 6)
    problem = f"GPU part {part.part_number}: {part.problem}" if part.problem else None
    data = {
        "display_name": display,
        "part_number": part.part_number,
        "part_display_name": part.display_name,
        "price_per_gpu_hour": part.price_per_gpu_hour,
        "gpu_memory_qty": total_memory,
        "gpu_memory_basis": memory_basis,
        "ocpus": ocpus,
        "shape_type": (shape.get("shapeType") or {}).get("value"),
        "allow_preemptible": bool(shape.get("allowPreemptible")),
    }
    common: dict[str, Any] = {
        "provider": name,
        "instance_type": instance,
        "region": "global",
        "currency": CURRENCY,
        "gpu_name_raw": gpu_token(instance),
        "gpu_count": float(gpu_qty),
        "gpu_memory_gb_raw": per_gpu_memory,
        "ram_gb": float(ram) if isinstance(ram, int | float) and ram else None,
    }
    offers = [
        Offer(
            pricing_type="on_demand",
            price_source="list",
            price_per_hour=list_price,
            provider_data=data,
            problem=problem,
            **common,
        )
    ]
    if shape.get("allowPreemptible"):
        offers.append(
            Offer(
                pricing_type="spot",
                price_source="estimated",
                price_per_hour=round(list_price * PREEMPTIBLE_FRACTION, 6),
                provider_data={**data, "estimate_rule": "preemptible = 50% of on-demand list"},
                problem=problem,
                **common,
            )
        )
    return offers


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    offers, counts = _classify(responses)
    yield from offers
    yield from excluded(counts)


def _classify(responses: Sequence[RawResponse]) -> tuple[list[Offer], Counter[str]]:
    product_pages = [r for r in responses if r.url.split("?", 1)[0] == PRODUCTS_URL]
    shape_pages = [r for r in responses if r.url.split("?", 1)[0] == SHAPES_URL]
    if not product_pages or not shape_pages:
        raise LayoutChanged(
            f"OCI needs both the price list ({PRODUCTS_URL}) and the shapes ({SHAPES_URL}); got "
            f"{[r.url for r in responses]}"
        )
    parts: dict[str, GpuPart] = {}
    for page in product_pages:
        # Pages are disjoint; a part listed on several keeps the last price seen.
        parts.update(gpu_parts(page.json(), page.url))
    offers: list[Offer] = []
    counts: Counter[str] = Counter()
    for page in shape_pages:
        for shape in _items(page.json(), page.url):
            result = shape_offers(shape, parts)
            if isinstance(result, str):
                if result != "not_gpu":
                    counts[result] += 1
                continue
            offers.extend(result)
    if not offers:
        raise LayoutChanged(
            f"{SHAPES_URL}: no ACTIVE shape with `gpuQty` billed by a GPU part "
            f"({sorted(parts)}); has shapes.json changed its fields?"
        )
    return offers, counts


def _items(payload: Any, url: str) -> list[Any]:
    if not isinstance(payload, dict) or not isinstance(payload.get("items"), list):
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(f"{url}: `items` list missing (got {keys}); has the format changed?")
    return payload["items"]


def payg_price(localizations: Any) -> tuple[float, str | None]:
    """(USD PAYG price per GPU-hour, what is wrong with it or None) of a GPU part."""
    for localization in localizations or []:
        if not isinstance(localization, dict) or localization.get("currencyCode") != CURRENCY:
            continue
        for price in localization.get("prices") or []:
            if not isinstance(price, dict) or price.get("model") != PRICE_MODEL:
                continue
            value = price.get("value")
            if isinstance(value, bool) or not isinstance(value, int | float):
                return math.nan, f"{PRICE_MODEL} `value` missing or not a number: {value!r}"
            number = float(value)
            if not math.isfinite(number):
                return math.nan, f"{PRICE_MODEL} `value` is not finite: {value!r}"
            if number <= 0:
                return number, f"{PRICE_MODEL} `value` is zero or negative: {value!r}"
            return number, None
    return math.nan, f"no {CURRENCY} {PRICE_MODEL} price in `currencyCodeLocalizations` (renamed key?)"
