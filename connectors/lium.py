"""Lium: the public nodes feed of the Lium GPU marketplace, aggregated per market segment.

Source: `GET https://lium.io/api/public/v1/nodes`, keyless, documented at
https://docs.lium.io/developers/public-nodes-feed with a compatibility promise (fields are only
added under `/public/v1`; breaking changes ship as `/public/v2`). One request per run, no
pagination (`count` says how many nodes the answer holds); no documented rate limit.

The answer is `{"generated_at", "count", "nodes": [...]}`; each node is one host machine: `id`,
`gpu_model` (e.g. "RTX 5090", "A100-SXM4-80GB"), `gpu_count`, `available_gpu_count`,
`min_rentable_gpu_count`, `price_per_gpu_hour` (USD), `price_per_node_hour`, `gpu_memory_gb`,
`cpu_count`, `ram_gb`, `disk_gb`, `tier` ("secure" or "spot"), `country_code`, `region`, `city`.

What is published (see `connectors.market`): a node can be rented in part, any GPU count from
`min_rentable_gpu_count` to `available_gpu_count`; each node becomes one host offer per
rentable count of 1, 2, 4 or 8 GPUs (and the whole node when it is all free), priced
`count x price_per_gpu_hour`, with the node's CPUs and RAM in proportion. Host offers are
aggregated into one offer per (pricing type, GPU, count, memory, country, tier), price = p10.
- `tier: secure` -> `pricing_type="on_demand"`; `tier: spot` -> `spot` (interruptible nodes);
  both `price_source="market"`: hosts set the prices. Another tier lands as on-demand with its
  tier in the key, never dropped.
- Region is the ISO `country_code` ("unknown" when absent); the subdivision is in the raw archive.

Quirks handled:
- A node with no free GPU, or fewer free GPUs than its smallest order, offers nothing now:
  counted as `Excluded("no_rentable_gpus")`.
- A missing or unreadable `price_per_gpu_hour` (or 0, negative, NaN) is a wrong row: flagged,
  never read as "not offered" (see `connectors.market`).
- A node without `gpu_model` / `gpu_count` is quarantined alone as an unreadable host row
  (`market.read_host_rows`); only when every node is unreadable does the parse fail.
- No `nodes` list, or an empty one, raises `LayoutChanged`.
- One scope per pricing type for the whole market, and a laxer `shrink_limit`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors import market
from connectors.base import Excluded, Offer, RawResponse, Unchanged, excluded, required_list
from connectors.http import Client
from connectors.market import HostOffer

name = "lium"
requires: tuple[str, ...] = ()
shrink_limit = market.SHRINK_LIMIT

API_URL = "https://lium.io/api/public/v1/nodes"
GPU_COUNTS = (1, 2, 4, 8)
SPOT_TIERS = frozenset({"spot"})


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield client.fetch("GET", API_URL, headers={"Accept": "application/json"})


def nodes(payload: Any, url: str = API_URL) -> list[Mapping[str, Any]]:
    """The `nodes` list of the feed; raises `LayoutChanged` on another shape or an empty list."""
    return required_list(payload, "nodes", where=url, answer="the public nodes feed")


def rentable_counts(gpu_count: int, available: int, minimum: int) -> tuple[int, ...]:
    """GPU counts a buyer can order now: 1, 2, 4, 8 (and the whole node) within [minimum, available].

    >>> rentable_counts(8, 5, 1), rentable_counts(8, 8, 8), rentable_counts(6, 6, 1), rentable_counts(8, 3, 4)
    ((1, 2, 4), (8,), (1, 2, 4, 6), ())
    """
    available = min(available, gpu_count)
    low = max(1, minimum)
    counts = {n for n in GPU_COUNTS if low <= n <= available}
    if available == gpu_count >= low:
        counts.add(gpu_count)
    return tuple(sorted(counts))


def to_hosts(node: Mapping[str, Any]) -> tuple[list[HostOffer], str | None]:
    """The host offers of one node, or none and the reason it offers nothing now."""
    gpu, total = node.get("gpu_model"), _number(node.get("gpu_count"))
    if not gpu or total is None:
        raise market.HostRowError("node without `gpu_model` / `gpu_count`")
    available = _number(node.get("available_gpu_count"))
    minimum = _number(node.get("min_rentable_gpu_count")) or 1
    counts = rentable_counts(int(total), int(total if available is None else available), int(minimum))
    if not counts:
        return [], "no_rentable_gpus"
    tier = str(node.get("tier") or "unknown")
    per_gpu, problem = _price(node)
    cpus, ram = _number(node.get("cpu_count")), _number(node.get("ram_gb"))
    hosts = [
        HostOffer(
            gpu_name_raw=str(gpu),
            gpu_count=float(n),
            region=str(node.get("country_code") or "unknown"),
            tier=tier,
            pricing_type="spot" if tier in SPOT_TIERS else "on_demand",
            price_per_hour=round(per_gpu * n, 6) if math.isfinite(per_gpu) else math.nan,
            gpu_memory_gb_raw=_number(node.get("gpu_memory_gb")),
            host_id=str(node.get("id", "?")),
            vcpus=None if cpus is None else math.floor(cpus * n / total),
            ram_gb=None if ram is None else round(ram * n / total, 1),
            problem=problem,
        )
        for n in counts
    ]
    return hosts, None


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    hosts: list[HostOffer] = []
    left_out: Counter[str] = Counter()
    for response in responses:
        read, unreadable = market.read_host_rows(
            name, nodes(response.json(), response.url), to_hosts, where=response.url
        )
        for found, reason in read:
            hosts.extend(found)
            if reason:
                left_out[reason] += 1
        yield from unreadable
    yield from market.aggregate(name, hosts)
    yield from excluded(left_out)


def _price(node: Mapping[str, Any]) -> tuple[float, str | None]:
    return market.host_price(node, "price_per_gpu_hour")  # 0, negative, NaN: aggregate flags them


_number = market.host_number
