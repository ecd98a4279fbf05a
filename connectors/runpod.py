"""RunPod: per-GPU on-demand and spot (interruptible) prices from the GraphQL API.

Source: `POST https://api.runpod.io/graphql` with one `gpuTypes` query (`QUERY`). RunPod's docs
describe the GraphQL API with an API key, but the `gpuTypes` catalog answers without one (gpuhunt
queries it anonymously), so `requires` is empty; when `RUNPOD_API_KEY` is in `creds` it is sent as
`Authorization: Bearer ...` (a header, so it never reaches a URL, a cassette or the raw archive).
No documented rate limit; one request per run.

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
  B200 with communityCloud false). Null or 0 prices also mean "not offered": skipped, not errors.
- Prices are global (one price per GPU type and cloud), so `region="global"`.
- A GraphQL `errors` answer (HTTP 200) raises `ConnectorError` with RunPod's messages; a payload
  without `data.gpuTypes`, or with an empty list, raises `LayoutChanged` so that a transient empty
  answer cannot close every RunPod offer.

`instance_type` is `"{n}x {gpu id} ({cloud})"` (e.g. `"8x NVIDIA H100 80GB HBM3 (secure)"`),
unique per offer key; `gpu_name_raw` is the gpuTypes `id`, `gpu_memory_gb_raw` its `memoryInGb`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import ConnectorError, LayoutChanged, Offer, RawResponse, Unchanged
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


def gpu_type_offers(gpu: Mapping[str, Any]) -> Iterator[Offer]:
    """All offers of one gpuTypes entry: per cloud, pricing type and GPU count."""
    gpu_id = gpu.get("id")
    if not gpu_id:
        raise LayoutChanged(f"gpuTypes entry without `id`: {dict(gpu)!r}")
    memory = _positive(gpu.get("memoryInGb"))
    for cloud, flag, on_demand_key, spot_key, max_key in CLOUDS:
        if not gpu.get(flag):
            continue  # not offered in this cloud, whatever the price fields say
        max_count = gpu.get(max_key)
        if max_count is None:
            max_count = gpu.get("maxGpuCount")
        counts = gpu_counts(max_count)
        for price_key, pricing_type, source in (
            (on_demand_key, "on_demand", "list"),
            (spot_key, "spot", "market"),
        ):
            per_gpu = _positive(gpu.get(price_key))
            if per_gpu is None:
                continue  # null/0: this pricing is not offered in this cloud
            for count in counts:
                yield Offer(
                    provider=name,
                    instance_type=f"{count}x {gpu_id} ({cloud})",
                    region="global",
                    pricing_type=pricing_type,  # type: ignore[arg-type]
                    price_source=source,  # type: ignore[arg-type]
                    price_per_hour=round(count * per_gpu, 6),
                    currency="USD",
                    gpu_name_raw=gpu_id,
                    gpu_count=float(count),
                    gpu_memory_gb_raw=memory,
                    provider_data={
                        "cloud": cloud,
                        "gpu_type_id": gpu_id,
                        "display_name": gpu.get("displayName"),
                        "price_per_gpu_hour": per_gpu,
                        "max_gpu_count": max_count,
                    },
                )


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged]:
    for response in responses:
        for gpu in gpu_types(response.json(), response.url):
            yield from gpu_type_offers(gpu)


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number > 0 else None
