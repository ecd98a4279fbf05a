"""JarvisLabs.ai: per-GPU on-demand and spot rates from the backend's `server_meta` catalog.

Source: `GET https://backendn.jarvislabs.net/misc/server_meta` with `Authorization: Bearer <key>`,
the catalog JarvisLabs' own SDK (`jarvislabs`, https://docs.jarvislabs.ai/sdk; `jl gpus`) reads
for "GPU types, pricing, and current availability for new creates". Checked 2026-12-01 against
the peers that run live: the SDK (v0.2.17, 2026-07-29: `constants.REGION_URLS`, default region
india-noida-01 = backendn; `transport.py` sends the Bearer key), gpuhunt
(`providers/jarvislabs.py`, 2026-06-11 PR #235 "update API endpoint": backendn, `JL_API_KEY`
required) and JarvisLabs' own SkyPilot fork (`fetch_jarvislabs.py`: backendn, Bearer key). Every
one of them sends a key, so `JARVISLABS_API_KEY` is required: without it the provider is skipped
(`skipped: missing JARVISLABS_API_KEY`), never sent keyless. Each regional backend answers with
the whole fleet, so one request a run covers every region. No documented rate limit. Shape::

    {"server_meta": [{"gpu_type": "L4", "region": "india-noida-01", "price_per_hour": 0.44,
                      "spot_price": 0.29, "vram": "24", "cpus_per_gpu": 28, "ram_per_gpu": 124,
                      "num_gpus": "8", "workload_type": "container", "num_free_devices": 3,
                      "effective_num_free_devices": 3, "spot_num_free_devices": 2}, ...],
     "cpu_meta": {"combinations": [{"vcpus": 4, "ram_gb": 16, "price": 0.0992, ...}]},
     "currency": "USD"}

Prices (`price_per_hour`, `spot_price`) and `cpus_per_gpu` / `ram_per_gpu` are per GPU; an
instance of n GPUs costs n times the rate. Currency: the answer is priced in the *account's*
billing currency (the SDK: "INR or USD based on user's payment location"; the SkyPilot fork: the
top-level `currency` names it and every price in the answer is in it). It is read from
`currency` and kept as published (the warehouse converts INR with the reference rates); it is
never assumed: an answer that states no `currency` yields its offers with `problem` set and
currency "XXX" (ISO 4217's "no currency"), so they are quarantined rather than published as USD
(`provider_data["currency_stated"]` says which).

Regions: india-01 (IN1, backendprod) no longer takes new instances (SDK commit 3b6ea72,
2026-04-13, "Deprecate IN1 region for new resource creation"; https://docs.jarvislabs.ai/in1-migration;
the SDK filters it out of `jl gpus`), yet the catalog still lists its pools: its offers land with
`available=False` and `provider_data["region_status"]` saying why (`CLOSED_REGIONS`), so they
keep their history but never rank as rentable. europe-01 (EU1) is being phased out and takes one
GPU per instance (SDK commit 2ed4018, 2026-05-29: `EUROPE_GPU_COUNTS` {1}, was 1 or 8).

One row is one pool: a GPU type in a region for one `workload_type`. Which rows are rentable:
- `"container"`: a container instance (Jupyter, IDE, SSH); on-demand, and spot when
  `spot_price` is set (the SDK launches spot with `is_reserved=False`).
- `"vm"`: a VM (SSH only, 100 GB minimum disk). JarvisLabs VMs have no spot: the SDK's CLI hides
  the spot price of VM rows, yet the catalog carries one; it is kept in
  `provider_data["spot_price_listed"]` and counted as `Excluded("vm_spot_not_offered")`.
- `null`: an older pool the SDK routes both container and VM launches to (it accepts `null` for
  either template and shows its spot price); one family labelled `any`, spot when set.
- any other value: an on-demand offer labelled with it, no spot (we know nothing of its terms).
A `spot_price` of null means "no spot now": `Excluded("no_spot_price")`.

GPU counts: `num_gpus` (a string, absent = 1) is the most GPUs one instance of the pool may have,
not a fixed bundle; every count up to it can be launched. Offers are published for 1, 2, 4, 8
(powers of two) up to that ceiling, plus the ceiling itself; in europe-01 only 1 (the SDK's
constraint since 2026-05-29). `instance_type` is `"<n>x <gpu_type> <workload>"`, e.g.
`"8x L4 container"`: the gpu_type as the API spells it (the name `jl create --gpu` takes), so
"RTX-PRO6000" and "RTX PRO 6000" (one GPU, two spellings in one answer) are two families that
both resolve in the seeds. `available` says whether the pool has that many free devices
(`effective_num_free_devices`, or `spot_num_free_devices` for spot) in a region open to new
instances.

Two rows for one (gpu_type, region, workload) are merged into one pool: the highest ceiling, then
the lowest price, wins; free devices are summed and `provider_data["pools"]` counts them.
CPU-only plans (`cpu_meta.combinations`) are `Excluded("cpu_only")`.

Wrong rows: a missing `price_per_hour` or `spot_price` key, or a price that is not a positive
number, yields the offer with `problem` (NaN when unreadable). A row without `gpu_type` or
`region`, or an answer without a non-empty `server_meta` list, raises `LayoutChanged`.
Scopes: one body, split by pricing type (`server_meta:on_demand`, `server_meta:spot`), so spot
rates that vanish are held apart from the on-demand list.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connectors.base import Excluded, LayoutChanged, Offer, PricingType, RawResponse, excluded
from connectors.base import number as as_number
from connectors.http import Client

name = "jarvislabs"
CREDENTIAL = "JARVISLABS_API_KEY"
requires: tuple[str, ...] = (CREDENTIAL,)  # every peer sends one (see the docstring)

API_URL = "https://backendn.jarvislabs.net/misc/server_meta"
# ISO 4217 "no currency": an answer that does not say its currency converts to nothing
UNSTATED_CURRENCY = "XXX"
SPOT_WORKLOADS = ("container", "any")  # VMs have no spot at JarvisLabs
POWER_COUNTS = (1, 2, 4, 8)
# The SDK (constants.EUROPE_GPU_COUNTS, 2026-05-29): europe-01 instances take 1 GPU only.
REGION_COUNTS: Mapping[str, tuple[int, ...]] = {"europe-01": (1,)}
# Regions the catalog still lists but that take no new instances: their offers are unavailable.
CLOSED_REGIONS: Mapping[str, str] = {
    "india-01": "IN1 takes no new instances since 2026-04 (https://docs.jarvislabs.ai/in1-migration)",
}


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Accept": "application/json", "Authorization": f"Bearer {creds[CREDENTIAL]}"}
    yield client.fetch("GET", API_URL, headers=headers)


@dataclass(frozen=True)
class Pool:
    """One (gpu_type, region, workload) pool after merging duplicate rows."""

    gpu_type: str
    region: str
    workload: str
    row: Mapping[str, Any]
    ceiling: int
    free: int
    spot_free: int
    pools: int


def workload_label(workload_type: object) -> str:
    """The instance-family word for a row's `workload_type`: null -> "any"."""
    return "any" if workload_type is None else str(workload_type)


def gpu_counts(ceiling: int, region: str) -> tuple[int, ...]:
    """The GPU counts published for a pool: powers of two up to `ceiling`, and `ceiling`."""
    counts = {n for n in POWER_COUNTS if n <= ceiling} | {ceiling}
    allowed = REGION_COUNTS.get(region)
    if allowed is not None:
        counts = {n for n in counts if n in allowed} or {min(allowed)}
    return tuple(sorted(counts))


def server_rows(payload: Any, url: str = API_URL) -> list[Mapping[str, Any]]:
    """The `server_meta` list of the answer; raises when it is missing or empty."""
    rows = payload.get("server_meta") if isinstance(payload, dict) else None
    if not isinstance(rows, list):
        keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise LayoutChanged(f"{url}: `server_meta` list missing (got {keys}); has the catalog changed?")
    if not rows:
        raise LayoutChanged(f"{url}: `server_meta` is empty; refusing to report an empty catalog")
    return rows


def pools(rows: Sequence[Any]) -> list[Pool]:
    """Rows grouped by (gpu_type, region, workload), duplicates merged (see the docstring)."""
    grouped: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if not isinstance(row, dict):
            raise LayoutChanged(f"`server_meta` entry is not an object: {row!r}")
        gpu_type, region = row.get("gpu_type"), row.get("region")
        if not gpu_type or not region:
            raise LayoutChanged(f"`server_meta` entry without `gpu_type` or `region`: {row!r}")
        key = (str(gpu_type), str(region), workload_label(row.get("workload_type")))
        grouped.setdefault(key, []).append(row)
    result = []
    for (gpu_type, region, workload), members in grouped.items():
        ceilings = [_ceiling(m) for m in members]
        best = min(
            range(len(members)),
            key=lambda i: (-ceilings[i], _sort_price(members[i].get("price_per_hour"))),
        )
        result.append(
            Pool(
                gpu_type=gpu_type,
                region=region,
                workload=workload,
                row=members[best],
                ceiling=ceilings[best],
                free=sum(_free(m, "effective_num_free_devices", "num_free_devices") for m in members),
                spot_free=sum(_free(m, "spot_num_free_devices") for m in members),
                pools=len(members),
            )
        )
    return result


def pool_offers(pool: Pool, currency: str | None) -> Iterator[Offer | Excluded]:
    """The on-demand (and, where it exists, spot) offers of one pool, one per GPU count; `currency`
    None (the answer did not state it) flags every offer."""
    row = pool.row
    closed = CLOSED_REGIONS.get(pool.region)
    spot_kind = pool.workload in SPOT_WORKLOADS
    tiers: list[tuple[PricingType, str]] = [("on_demand", "price_per_hour")]
    if spot_kind and "spot_price" in row and row["spot_price"] is None:
        yield Excluded("no_spot_price", f"{pool.gpu_type} {pool.region} {pool.workload}")
    elif spot_kind:
        tiers.append(("spot", "spot_price"))
    elif row.get("spot_price") is not None:
        yield Excluded("vm_spot_not_offered", f"{pool.gpu_type} {pool.region} {pool.workload}")
    vram = as_number(row.get("vram"))
    cpus, ram = as_number(row.get("cpus_per_gpu")), as_number(row.get("ram_per_gpu"))
    data = {
        "gpu_type": pool.gpu_type,
        "workload_type": row.get("workload_type"),
        "max_gpus_per_instance": pool.ceiling,
        "num_gpus_raw": row.get("num_gpus"),
        "price_per_gpu_hour": row.get("price_per_hour"),
        "spot_price_per_gpu_hour": row.get("spot_price"),
        "num_free_devices": pool.free,
        "spot_num_free_devices": pool.spot_free,
        "pools": pool.pools,
        "currency_stated": currency is not None,
    }
    if closed is not None:
        data["region_status"] = closed
    if not spot_kind and row.get("spot_price") is not None:
        data["spot_price_listed"] = row.get("spot_price")  # listed, not rentable (see docstring)
    for count in gpu_counts(pool.ceiling, pool.region):
        for pricing_type, key in tiers:
            per_gpu, problem = _price(row, key)
            if currency is None:
                problem = problem or (
                    "server_meta states no `currency`: its prices are in the account's currency "
                    "(INR or USD), so they cannot be read as any one"
                )
            free = pool.spot_free if pricing_type == "spot" else pool.free
            yield Offer(
                provider=name,
                instance_type=f"{count}x {pool.gpu_type} {pool.workload}",
                region=pool.region,
                pricing_type=pricing_type,
                price_source="list",
                price_per_hour=round(per_gpu * count, 6),  # no float noise (1.89 * 8) in history
                currency=currency or UNSTATED_CURRENCY,
                gpu_name_raw=pool.gpu_type,
                gpu_count=float(count),
                gpu_memory_gb_raw=vram,
                vcpus=cpus * count if cpus else None,
                ram_gb=ram * count if ram else None,
                available=free >= count and closed is None,
                provider_data=data | ({"spot_kind": "published_rate"} if pricing_type == "spot" else {}),
                scope=f"server_meta:{pricing_type}",
                problem=problem,
            )


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    counts: dict[str, int] = {}
    for response in responses:
        payload = response.json()
        rows = server_rows(payload, response.url)
        currency = _currency(payload.get("currency"), response.url)
        for pool in pools(rows):
            for item in pool_offers(pool, currency):
                if isinstance(item, Excluded):
                    counts[item.reason] = counts.get(item.reason, 0) + item.count
                else:
                    yield item
        cpu_meta = payload.get("cpu_meta")
        combos = cpu_meta.get("combinations") if isinstance(cpu_meta, dict) else None
        if isinstance(combos, list) and combos:
            counts["cpu_only"] = counts.get("cpu_only", 0) + len(combos)
    yield from excluded(counts)


def _currency(value: object, url: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value.strip()) != 3:
        raise LayoutChanged(f"{url}: `currency` is {value!r}, expected a three-letter code")
    return value.strip().upper()


def _ceiling(row: Mapping[str, Any]) -> int:
    number = as_number(row.get("num_gpus"))
    if number is None or number < 1 or number != int(number):
        # Absent means 1 (SDK); unreadable too: never guess a larger shape than one GPU.
        return 1
    return int(number)


def _free(row: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        number = as_number(row.get(key))
        if number is not None:
            return max(int(number), 0)
    return 0


def _sort_price(value: object) -> float:
    number = as_number(value)
    return number if number is not None and number > 0 else math.inf


def _price(row: Mapping[str, Any], key: str) -> tuple[float, str | None]:
    if key not in row:
        return math.nan, f"`{key}` missing"
    raw = row[key]
    number = as_number(raw)
    if number is None:
        return math.nan, f"`{key}` {raw!r} is not a number"
    if number <= 0:
        return number, f"`{key}` {raw!r} is not a positive number"
    return number, None
