"""Marketplace aggregation: many host offers in, one `Offer` per market segment out. Pure.

A marketplace (Vast.ai, Lium, TensorDock) answers with one offer per host machine: dozens of
hosts for the same GPU, each with its own price, reliability and storage/bandwidth charges, and
the set changes from minute to minute. Publishing every host as an offer would make the price
history a list of hosts coming and going; publishing only the cheapest would track one host,
often gone in minutes. So connectors turn each host into a `HostOffer` and call `aggregate`,
which publishes one `Offer` per *segment*:

    (pricing type, GPU name, GPU count, GPU memory class, region or country, tier, currency)

`tier` is the market's own trust class (Vast: `datacenter-verified`, `community-unverified`...;
Lium: `secure` / `spot`). The memory class is the per-GPU memory rounded to whole GB, so an
A100 40 GB and an A100 80 GB are different segments. The segment key never depends on which
hosts are in it: a host that disappears changes the segment's statistics, not its offer key.
The raw host offers are kept in the raw archive (the HTTP body), never dropped.

The price a buyer faces, `price_per_hour`, is the **p10** of the segment's host prices (whole
instance, per hour), and `provider_data["price_statistic"] = "p10"` says so. Why p10:

- the minimum is a single host, the one most often rented away within minutes and the one most
  likely to be mispriced or unreliable; tracking it turns every host's coming and going into a
  price change;
- the median describes the typical host, but buyers sort by price, so it overstates what a
  price-shopping buyer pays;
- p10 is the price at which about a tenth of the market is on offer: low enough to be what a
  careful buyer pays, robust to one odd host (it moves only when several hosts move).

Quantiles are **nearest-rank** (the smallest host price with at least q of the hosts at or below
it), so every statistic is the price of a real host offer a buyer can rent, and they are
order-independent and monotone (min <= p10 <= median <= max). With fewer than ten hosts p10 is
the minimum; `host_offers` says how many hosts a statistic stands on.

`provider_data` carries the distribution and what a fine-tuning run pays besides the GPU, as
medians over the segment's hosts (None when no host states it): `price_min`, `price_p10`,
`price_median`, `price_max`, `host_offers` (the exact count), `reliability_median` /
`reliability_min` (the market's host reliability score, 0..1), `disk_per_gb_month_median`,
`egress_per_tb_median`, `ingress_per_tb_median` (in the offer's currency). `vcpus`, `ram_gb` of
the offer are the medians of its hosts.

Wrong host rows (price NaN, 0, negative, infinite, or unreadable, or a `problem` the connector
set) never enter the statistics. A segment with at least one good host is published from its good
hosts, and each wrong host is yielded as its own flagged `Offer` (instance type suffixed
` host <id>`), so the warehouse quarantines it. A segment whose hosts are *all* wrong is yielded
under the segment's own key with `problem` set and a NaN price: its last good price is kept, never
closed (this is what a renamed price key looks like).

Host rows fail alone. Connectors read their answer's host rows with `read_host_rows`: a row that
lacks a field its offers cannot be formed without (GPU name, GPU count) raises `HostRowError` in
the connector's reader and becomes one flagged `Offer` ("unreadable host row <id>", quarantined
with the reason), while every other row loads; it is a wrong row, not a rule-based omission, so it
is never `Excluded` (connectors.base, "Wrong rows"). Only when *every* row is unreadable is it the
answer's format that changed, and `LayoutChanged` says so. `host_number` and `host_price` are the
one reading of a host's numbers and price keys the connectors share.

A segment standing on fewer hosts than `Settings.market_min_hosts` is one host's word: the
warehouse's anomaly guard holds any move of it beyond `CONFIRM_FACTOR` until the next run
confirms it (warehouse/load.py), whatever the jump factor allows a well-populated segment.

Scopes and the shrink guard. Segment counts swing with the market: a country's only RTX 4090
host goes, and its segment vanishes with it. So market connectors put every segment of one
pricing type in ONE scope (`market_scope`, e.g. `"market:on_demand"`), which fails only as a
whole, and set `shrink_limit = SHRINK_LIMIT` (0.8: up to 80 % of the segments may vanish in one
run, against 50 % for catalogs). A drop to zero segments is still an empty scope and still fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from connectors.base import LayoutChanged, Offer, PriceSource, PricingType

T = TypeVar("T")

# Share of a market scope's segments that may vanish in one run before the scope is held
# (catalogs use connectors.base.SHRINK_LIMIT, 0.5). Markets lose and regain thin segments
# every few minutes; only a collapse (or an empty answer, caught anyway) should hold the scope.
SHRINK_LIMIT = 0.8
PRICE_STATISTIC = "p10"
QUANTILES = {"min": 0.0, "p10": 0.1, "median": 0.5, "max": 1.0}


@dataclass(frozen=True, slots=True)
class HostOffer:
    """One host's offer as the marketplace lists it. Prices are for the whole host offer.

    `price_per_hour` may be NaN when the source's value could not be read; `problem` then says
    why (a connector may also set `problem` for a row it knows is wrong).
    """

    gpu_name_raw: str
    gpu_count: float
    region: str
    tier: str
    pricing_type: PricingType
    price_per_hour: float
    currency: str = "USD"
    gpu_memory_gb_raw: float | None = None  # per GPU
    host_id: str | None = None
    vcpus: float | None = None
    ram_gb: float | None = None
    reliability: float | None = None  # the market's host score, 0..1
    disk_per_gb_month: float | None = None  # in `currency`
    egress_per_tb: float | None = None  # in `currency`, data leaving the host
    ingress_per_tb: float | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Distribution:
    """Nearest-rank statistics of a non-empty set of prices."""

    min: float
    p10: float
    median: float
    max: float
    count: int


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile: the smallest value with at least a share `q` of `values` at or below.

    Always one of `values` (a price some host asks); independent of their order. NaN is refused
    (`ValueError`): it has no rank.

    >>> quantile([5, 1, 3], 0.5), quantile([5, 1, 3], 0.1), quantile([5, 1, 3], 1.0)
    (3, 1, 5)
    """
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    # NaN compares false both ways: sorted() would leave it in place and the answer depend on order
    if any(v != v for v in values):
        raise ValueError("quantile of NaN values; leave unreadable prices out first (see `is_valid_price`)")
    ordered = sorted(values)
    # 1-based rank; the epsilon keeps 0.1 * 30 = 3.0000000000000004 at rank 3.
    rank = max(1, math.ceil(q * len(ordered) - 1e-9))
    return ordered[rank - 1]


def distribution(prices: Iterable[float]) -> Distribution:
    values = list(prices)
    stats = {name: quantile(values, q) for name, q in QUANTILES.items()}
    return Distribution(count=len(values), **stats)


def market_scope(pricing_type: str) -> str:
    """The one scope of a marketplace per pricing type (see the module docstring)."""
    return f"market:{pricing_type}"


def is_valid_price(price: float) -> bool:
    return isinstance(price, int | float) and math.isfinite(price) and price > 0


def memory_class(gpu_memory_gb: float | None) -> int | None:
    """Per-GPU memory rounded to whole GB: hosts of one card report a few MiB more or less."""
    if gpu_memory_gb is None or not math.isfinite(gpu_memory_gb) or gpu_memory_gb <= 0:
        return None
    return round(gpu_memory_gb)


SegmentKey = tuple[str, str, float, int | None, str, str, str]


def segment_key(host: HostOffer) -> SegmentKey:
    return (
        host.pricing_type,
        host.gpu_name_raw,
        host.gpu_count,
        memory_class(host.gpu_memory_gb_raw),
        host.region,
        host.tier,
        host.currency,
    )


def instance_type(host: HostOffer) -> str:
    """The segment's instance type, e.g. `"2x RTX 4090 24GB (community-verified)"`."""
    memory = memory_class(host.gpu_memory_gb_raw)
    size = f" {memory}GB" if memory is not None else ""
    return f"{host.gpu_count:g}x {host.gpu_name_raw}{size} ({host.tier})"


def aggregate(
    provider: str,
    hosts: Iterable[HostOffer],
    *,
    price_source: PriceSource = "market",
) -> Iterator[Offer]:
    """One `Offer` per segment of `hosts` (plus one flagged `Offer` per wrong host), sorted by key."""
    segments: dict[SegmentKey, list[HostOffer]] = {}
    for host in hosts:
        segments.setdefault(segment_key(host), []).append(host)
    for key in sorted(segments, key=_sortable):
        members = segments[key]
        good: list[HostOffer] = []
        bad: list[HostOffer] = []
        for host in members:
            (good if host.problem is None and is_valid_price(host.price_per_hour) else bad).append(host)
        if good:
            yield _segment_offer(provider, good, price_source, invalid=len(bad))
            # one flagged offer per host id: hosts without one share the connector's placeholder
            # ("?"), and two offers under one key would be a duplicate the warehouse refuses
            by_id: dict[str | None, list[HostOffer]] = {}
            for host in bad:
                by_id.setdefault(host.host_id, []).append(host)
            for host_id, same in by_id.items():
                instance = instance_type(same[0]) + f" host {host_id}"
                yield _flagged(provider, same[0], price_source, instance, hosts=same)
        else:
            yield _flagged(provider, members[0], price_source, instance_type(members[0]), hosts=members)


def _segment_offer(provider: str, good: list[HostOffer], source: PriceSource, invalid: int) -> Offer:
    first = good[0]
    dist = distribution(h.price_per_hour for h in good)
    reliability = _present(h.reliability for h in good)
    return Offer(
        provider=provider,
        instance_type=instance_type(first),
        region=first.region,
        pricing_type=first.pricing_type,
        price_source=source,
        price_per_hour=getattr(dist, PRICE_STATISTIC),
        currency=first.currency,
        gpu_name_raw=first.gpu_name_raw,
        gpu_count=first.gpu_count,
        gpu_memory_gb_raw=_as_float(memory_class(first.gpu_memory_gb_raw)),
        vcpus=_median(h.vcpus for h in good),
        ram_gb=_median(h.ram_gb for h in good),
        scope=market_scope(first.pricing_type),
        provider_data={
            "price_statistic": PRICE_STATISTIC,
            "price_min": dist.min,
            "price_p10": dist.p10,
            "price_median": dist.median,
            "price_max": dist.max,
            "host_offers": dist.count,
            "host_offers_invalid": invalid,
            "tier": first.tier,
            "reliability_median": quantile(reliability, 0.5) if reliability else None,
            "reliability_min": min(reliability) if reliability else None,
            "disk_per_gb_month_median": _median(h.disk_per_gb_month for h in good),
            "egress_per_tb_median": _median(h.egress_per_tb for h in good),
            "ingress_per_tb_median": _median(h.ingress_per_tb for h in good),
        },
    )


def _flagged(
    provider: str,
    host: HostOffer,
    source: PriceSource,
    instance: str,
    hosts: Sequence[HostOffer] = (),
) -> Offer:
    members = list(hosts) or [host]
    reasons = sorted({_problem(h) for h in members})
    return Offer(
        provider=provider,
        instance_type=instance,
        region=host.region,
        pricing_type=host.pricing_type,
        price_source=source,
        price_per_hour=math.nan if len(members) > 1 else _as_nan(host.price_per_hour),
        currency=host.currency,
        gpu_name_raw=host.gpu_name_raw,
        gpu_count=host.gpu_count,
        gpu_memory_gb_raw=_as_float(memory_class(host.gpu_memory_gb_raw)),
        scope=market_scope(host.pricing_type),
        problem="; ".join(reasons) + f" ({len(members)} host offer{'s' if len(members) > 1 else ''})",
        provider_data={
            "tier": host.tier,
            "host_offers": len(members),
            "host_ids": [h.host_id for h in members],
            "host_prices": [h.price_per_hour if _is_finite(h.price_per_hour) else None for h in members],
        },
    )


def _problem(host: HostOffer) -> str:
    if host.problem:
        return host.problem
    price = host.price_per_hour
    if not isinstance(price, int | float):
        return "price is not a number"
    if not math.isfinite(price):
        return "price is not a finite number"
    return "price is zero" if price == 0 else "price is negative"


def _sortable(key: SegmentKey) -> tuple[str, ...]:
    return tuple(
        "" if part is None else f"{part:012.3f}" if isinstance(part, float) else str(part) for part in key
    )


def _present(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def _median(values: Iterable[float | None]) -> float | None:
    present = _present(values)
    return quantile(present, 0.5) if present else None


def _as_float(value: int | None) -> float | None:
    return None if value is None else float(value)


def _is_finite(price: object) -> bool:
    return isinstance(price, int | float) and math.isfinite(price)


def _as_nan(price: float) -> float:
    return price if isinstance(price, int | float) else math.nan


# --- host rows ------------------------------------------------------------------------------------------


class HostRowError(ValueError):
    """One host row lacks what its offers cannot be formed without; that row is wrong, not the answer."""


def host_number(value: object) -> float | None:
    """A host row's JSON number as a float; None for anything else (strings and booleans too)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def host_price(row: Mapping[str, Any], key: str) -> tuple[float, str | None]:
    """(price, problem) of a host row's price key: NaN and the problem when it is missing or not a
    number; 0, negative and NaN values come back as read (`aggregate` flags them)."""
    if row.get(key) is None:
        return math.nan, f"`{key}` missing"
    value = host_number(row[key])
    if value is None:
        return math.nan, f"`{key}` is not a number: {row[key]!r}"
    return value, None


def read_host_rows(
    provider: str,
    rows: Sequence[Any],
    read: Callable[[Mapping[str, Any]], T],
    *,
    where: str,
    pricing_type: PricingType = "on_demand",
    id_key: str = "id",
) -> tuple[list[T], list[Offer]]:
    """(what `read` made of each readable row, one flagged `Offer` per unreadable row).

    A row is unreadable when it is not a JSON object or `read` raises `HostRowError`. If every
    row is, the answer's format changed: `LayoutChanged` names the first reason and `where`.
    """
    done: list[T] = []
    flagged: list[Offer] = []
    for index, row in enumerate(rows):
        try:
            if not isinstance(row, Mapping):
                raise HostRowError(f"host row is not an object: {row!r:.100}")
            done.append(read(row))
        except HostRowError as exc:
            flagged.append(_unreadable(provider, row, index, str(exc), pricing_type, id_key))
    if flagged and not done:
        raise LayoutChanged(
            f"{where}: every one of {len(flagged)} host rows is unreadable ({flagged[0].problem}); "
            "has the source changed its format?"
        )
    return done, flagged


def _unreadable(
    provider: str, row: object, index: int, reason: str, pricing_type: PricingType, id_key: str
) -> Offer:
    host_id = row.get(id_key) if isinstance(row, Mapping) else None
    label = f"{host_id}" if host_id is not None else f"#{index}"
    return Offer(
        provider=provider,
        instance_type=f"unreadable host row {label}",
        region="unknown",
        pricing_type=pricing_type,
        price_source="market",
        price_per_hour=math.nan,
        currency="USD",
        gpu_name_raw=None,
        gpu_count=0.0,
        scope=market_scope(pricing_type),
        problem=f"host row unreadable: {reason}",
        provider_data={"host_id": host_id, "row": f"{row!r:.300}"},
    )
