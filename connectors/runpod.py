"""RunPod: per-GPU on-demand and spot (interruptible) prices from the GraphQL API.

Source: `POST https://api.runpod.io/graphql` with one `gpuTypes` query (`QUERY`). RunPod's docs
describe the GraphQL API with an API key, but the `gpuTypes` catalog answers without one (gpuhunt
queries it anonymously), so `requires` is empty; when `RUNPOD_API_KEY` is in `creds` it is sent as
`Authorization: Bearer ...` (a header, so it never reaches a URL, a cassette or the raw archive).
No documented rate limit; one request per run. Checked 2026-12-01: gpuhunt
(`providers/runpod.py`, 2026-08) asks the same `gpuTypes` fields, `secureCloud` and
`communityCloud` among them, from the same URL; both 2025-06 captures carry them on every entry.

What becomes an offer, per GPU type and cloud (`secure` = RunPod's data centres, `community` = hosts
of third parties):
- on-demand `securePrice` / `communityPrice` -> `pricing_type="on_demand"`, `price_source="list"`;
- spot `secureSpotPrice` / `communitySpotPrice` (interruptible pods) -> `spot`, `market`;
- for 1, 2, 4 and 8 GPUs, up to the type's maximum (`maxGpuCountSecureCloud` /
  `maxGpuCountCommunityCloud`, else `maxGpuCount`; only 1 when no maximum is given). RunPod prices
  per GPU, so an n-GPU pod costs n x the per-GPU price.

Quirks handled:
- A cloud flag (`secureCloud`, `communityCloud`) that is false means "not offered there", even when
  the price field holds a number (the API returns placeholder prices, e.g. communityPrice 0.5 for
  B200 with communityCloud false): counted as `Excluded("not_in_cloud")`.
- In a cloud whose flag is true, a spot price of null means "no interruptible pods of this type
  there" (RunPod answers null for it; captures have 7 such types): `Excluded("no_spot_price")`.
  Every other unusable price is *wrong*, not "not offered", and is yielded as offers with `problem`
  set and price NaN, one per pod size, so the warehouse quarantines them and keeps their last
  good prices: a price key absent from the entry (a renamed field must not empty the catalog), a
  null on-demand price in a cloud flagged as offered, and 0, negative, NaN or non-numeric values.
- Prices are global (one price per GPU type and cloud), so `region="global"`.
- Scopes: `"<cloud>:<pricing_type>"` ("secure:on_demand", "community:spot", ...). Secure pods are
  RunPod's own data centres and community pods third-party hosts, priced by different fields, so
  each cloud's on-demand and spot columns fail (vanish, go null) on their own; the warehouse
  guards each of the four against its own last good load.
- An entry without `id` cannot be keyed: it is yielded as a flagged offer named by its position,
  never silently dropped (a whole answer without ids is a `LayoutChanged`).
- The cloud flags are what says whether a price is real, so an entry without the `secureCloud` /
  `communityCloud` keys (the query asks for both; GraphQL returns every field asked for, null
  when unset) is a changed schema, not "offered nowhere": `LayoutChanged` names the missing keys
  (before 2026-12 such an answer parsed to 0 offers without an error). A flag that is present but
  null or false still means "not offered there".
- A GraphQL `errors` answer (HTTP 200) raises `ConnectorError` with RunPod's messages; a payload
  without `data.gpuTypes`, or with an empty list, raises `LayoutChanged` so that a transient empty
  answer cannot close every RunPod offer.

`instance_type` is `"{n}x {gpu id} ({cloud})"` (e.g. `"8x NVIDIA H100 80GB HBM3 (secure)"`),
unique per offer key; `gpu_name_raw` is the gpuTypes `id`, `gpu_memory_gb_raw` its `memoryInGb`.
Every GPU type in the answer becomes offers, whatever its name: an unknown one lands unmapped.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import (
    ConnectorError,
    Excluded,
    LayoutChanged,
    Offer,
    PriceSource,
    PricingType,
    RawResponse,
    Unchanged,
    excluded,
)
from connectors.http import Client

name = "runpod"
requires: tuple[str, ...] = ()
OPTIONAL_CREDENTIAL = "RUNPOD_API_KEY"
optional: tuple[str, ...] = (OPTIONAL_CREDENTIAL,)  # sent when present, never required

API_URL = "https://api.runpod.io/graphql"
QUERY = (
    "query GpuTypes { gpuTypes { id displayName manufacturer memoryInGb maxGpuCount "
    "maxGpuCountSecureCloud maxGpuCountCommunityCloud secureCloud communityCloud "
    "securePrice communityPrice secureSpotPrice communitySpotPrice } }"
)
# Serialized once, byte for byte, so the request matches a recorded cassette whatever httpx does.
REQUEST_BODY = json.dumps({"query": QUERY}, separators=(",", ":")).encode()
GPU_COUNTS = (1, 2, 4, 8)
# (cloud, availability flag, on-demand price, spot price, per-cloud max GPU count)
CLOUDS = (
    ("secure", "secureCloud", "securePrice", "secureSpotPrice", "maxGpuCountSecureCloud"),
    ("community", "communityCloud", "communityPrice", "communitySpotPrice", "maxGpuCountCommunityCloud"),
)


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Content-Type": "application/json"}
    if key := creds.get(OPTIONAL_CREDENTIAL):
        headers["Authorization"] = f"Bearer {key}"
    yield client.fetch("POST", API_URL, content=REQUEST_BODY, headers=headers)


def gpu_types(payload: Any, url: str = API_URL) -> list[Mapping[str, Any]]:
    """The `data.gpuTypes` list of a GraphQL answer; raises on errors or an unexpected shape."""
    if isinstance(payload, dict) and payload.get("errors"):
        messages = "; ".join(
            str(error.get("message", error)) if isinstance(error, dict) else str(error)
            for error in payload["errors"]
        )
        raise ConnectorError(
            f"{url}: RunPod GraphQL answered errors: {messages}. If it asks for authentication, "
            f"set {OPTIONAL_CREDENTIAL}; if a field is unknown, update QUERY in connectors/runpod.py"
        )
    data = payload.get("data") if isinstance(payload, dict) else None
    types = data.get("gpuTypes") if isinstance(data, dict) else None
    if not isinstance(types, list):
        raise LayoutChanged(
            f"{url}: `data.gpuTypes` list missing from the GraphQL answer; has the schema changed?"
        )
    if not types:
        raise LayoutChanged(f"{url}: `data.gpuTypes` is empty; refusing to report an empty catalog")
    return types


def gpu_counts(max_count: object) -> tuple[int, ...]:
    """The pod sizes to price: 1, 2, 4, 8 up to `max_count`; just 1 when no maximum is known."""
    if max_count is None or isinstance(max_count, bool) or not isinstance(max_count, int | float):
        return (1,)
    return tuple(n for n in GPU_COUNTS if n <= max_count)


def price_problem(gpu: Mapping[str, Any], key: str) -> tuple[float, str | None]:
    """(per-GPU price, what is wrong with it or None) of a price field of an offered cloud."""
    if key not in gpu:
        return math.nan, f"price field `{key}` missing from the gpuTypes entry (renamed?)"
    value = gpu[key]
    if value is None:
        return math.nan, f"`{key}` is null although the cloud is flagged as offered"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan, f"`{key}` is not a number: {value!r}"
    number = float(value)
    if not math.isfinite(number):
        return math.nan, f"`{key}` is not a finite number: {value!r}"
    if number <= 0:
        return number, f"`{key}` is zero or negative: {value!r}"
    return number, None


def gpu_type_offers(gpu: Mapping[str, Any], position: int | None = None) -> Iterator[Offer | Excluded]:
    """All offers of one gpuTypes entry: per cloud, pricing type and GPU count; exclusions by rule."""
    gpu_id = gpu.get("id")
    entry_problem = None
    if not gpu_id:
        # Cannot be keyed by its id: flagged under its position, so it is quarantined, not lost.
        gpu_id = f"gpuTypes[{position if position is not None else '?'}]"
        entry_problem = "gpuTypes entry without `id`"
    memory = _positive(gpu.get("memoryInGb"))
    for cloud, flag, on_demand_key, spot_key, max_key in CLOUDS:
        if not gpu.get(flag):
            yield Excluded("not_in_cloud", f"{gpu_id} ({cloud})")
            continue  # not offered in this cloud, whatever the price fields say
        max_count = gpu.get(max_key)
        if max_count is None:
            max_count = gpu.get("maxGpuCount")
        counts = gpu_counts(max_count)
        tiers: tuple[tuple[str, PricingType, PriceSource], ...] = (
            (on_demand_key, "on_demand", "list"),
            (spot_key, "spot", "market"),
        )
        for price_key, pricing_type, source in tiers:
            if pricing_type == "spot" and price_key in gpu and gpu[price_key] is None:
                yield Excluded("no_spot_price", f"{gpu_id} ({cloud})")
                continue  # RunPod's way of saying: no interruptible pods of this type here
            per_gpu, problem = price_problem(gpu, price_key)
            problem = entry_problem or problem
            for count in counts:
                yield Offer(
                    provider=name,
                    instance_type=f"{count}x {gpu_id} ({cloud})",
                    region="global",
                    pricing_type=pricing_type,
                    price_source=source,
                    price_per_hour=round(count * per_gpu, 6) if not math.isnan(per_gpu) else math.nan,
                    currency="USD",
                    gpu_name_raw=gpu_id,
                    gpu_count=float(count),
                    gpu_memory_gb_raw=memory,
                    provider_data={
                        "cloud": cloud,
                        "gpu_type_id": gpu_id,
                        "display_name": gpu.get("displayName"),
                        "price_per_gpu_hour": per_gpu if problem is None else gpu.get(price_key),
                        "max_gpu_count": max_count,
                    },
                    scope=f"{cloud}:{pricing_type}",
                    problem=problem,
                )


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    counts: Counter[str] = Counter()
    for response in responses:
        types = gpu_types(response.json(), response.url)
        if not any(isinstance(gpu, Mapping) and gpu.get("id") for gpu in types):
            raise LayoutChanged(f"{response.url}: no gpuTypes entry has an `id`; has the schema changed?")
        for position, gpu in enumerate(types):
            if not isinstance(gpu, Mapping):
                raise LayoutChanged(f"{response.url}: gpuTypes[{position}] is not an object: {gpu!r:.80}")
            require_cloud_flags(gpu, position, response.url)
            for item in gpu_type_offers(gpu, position):
                if isinstance(item, Excluded):
                    counts[item.reason] += 1
                else:
                    yield item
    yield from excluded(counts)


def require_cloud_flags(gpu: Mapping[str, Any], position: int, url: str = API_URL) -> None:
    """Raise `LayoutChanged` naming the cloud flags (`secureCloud`, `communityCloud`) an entry lacks."""
    missing = [flag for _, flag, *_ in CLOUDS if flag not in gpu]
    if missing:
        names = ", ".join(f"`{m}`" for m in missing)
        raise LayoutChanged(
            f"{url}: gpuTypes[{position}] ({gpu.get('id', 'no id')}) has no {names}: without the cloud "
            "flags no price can be told offered or not; has the schema renamed them? "
            "(update QUERY and CLOUDS in connectors/runpod.py)"
        )


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number > 0 else None
