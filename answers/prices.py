"""Prices: the answers behind `gpucost prices` and `gpucost history`, and the filters and frontier
`answers.estimate` ranks offers with.

Pure functions over a DuckDB connection (a read-only, sandboxed one is enough) and frozen filter
values; they return polars frames and never print. The SQL is fixed text (no user input is ever
formatted into it, nor passed to it): filters apply to the frames, in `apply_filters`, so one
implementation serves current offers and history alike.

**GPU names match by family.** A wanted name W matches a canonical name N (gpus.csv) when N == W
or N starts with W followed by "-" (case-insensitive; spaces and underscores in W read as "-"):

    H100       → H100-SXM, H100-PCIe, H100-NVL   (not GH200, not H200-SXM)
    A100-80GB  → A100-80GB-SXM, A100-80GB-PCIe
    A100       → every A100 (40 and 80 GB, SXM and PCIe)
    RTX4070    → RTX4070, RTX4070-Ti, RTX4070-Ti-SUPER (NVIDIA's "RTX 4070 family")
    H100-SXM   → H100-SXM only: a canonical name is always exact

Canonical names put the chip first and the variant after a dash, so the dash is where a family
ends; a plain prefix would let A10 match A100.

**The frontier.** `frontier` marks, within each provider × GPU × pricing type, the offers that are
faster or cheaper than every other: an offer neither faster nor cheaper than another (hours ≥ and
cost ≥) is folded. Of exact ties the first by offer key stays, so the result does not depend on
row order. Spot and on-demand are separate groups: an expected spot cost is a bet on
interruptions, not the same product at a lower price.

**History** reads `core.offer_prices` (SCD2: `valid_from`, `valid_to` null = current). Closed
intervals may belong to offers no longer current, whose GPU the marts no longer resolve, so the GPU
of each interval is resolved here with the same `HardwareCatalog` the marts use. A series is one
GPU × provider × pricing type; its value at an instant is the cheapest $/GPU-hour among the
intervals open then.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import duckdb
import polars as pl

from answers import AnswerError
from warehouse.db import PACKAGE_DIR
from warehouse.hardware import HardwareCatalog
from warehouse.marts import resolve_descriptions

QUERIES_DIR = PACKAGE_DIR / "sql" / "queries"
OFFER_KEY = ("provider", "instance_type", "region", "zone", "pricing_type")
FRONTIER_GROUP = ("provider", "gpu_name", "is_spot")
SERIES_KEY = ("gpu_name", "provider", "pricing_type")
# the precision `gpucost estimate` shows hours and dollars at, which the frontier compares at
TIME_STEP_HOURS = 0.01
COST_STEP_USD = 0.01


@dataclass(frozen=True)
class OfferFilters:
    """What `--gpu`, `--provider`, `--region`, `--min-vram`, `--spot/--on-demand` and
    `--max-price` ask for. Empty tuples and None mean "no filter"; several values are alternatives."""

    gpus: tuple[str, ...] = ()  # canonical names or families (module docstring)
    providers: tuple[str, ...] = ()  # provider slugs, case-insensitive
    regions: tuple[str, ...] = ()  # exact names or globs (us-*), case-insensitive
    min_vram_gb: float | None = None  # per GPU
    spot: bool | None = None  # True: spot only; False: on-demand only; None: both
    max_usd_per_gpu_hour: float | None = None
    # offers of a provider failing for longer than GPUCOST_STALE_AFTER_HOURS (warehouse/lifecycle.py)
    include_stale: bool = False
    # offers the provider marks unavailable (available = false) rank only when asked for
    include_unavailable: bool = False
    # what the command calls its GPU filter, for messages: `estimate`'s is --offer-gpu (its --gpu
    # states hardware); not a filter, so two filters asking the same compare equal
    gpu_option: str = field(default="--gpu", compare=False)

    def describe(self) -> str:
        """The filters as command-line options, for messages ("--gpu H100 --spot")."""
        parts = [f"{self.gpu_option} {','.join(self.gpus)}"] if self.gpus else []
        parts += [f"--provider {','.join(self.providers)}"] if self.providers else []
        parts += [f"--region {','.join(self.regions)}"] if self.regions else []
        parts += [f"--min-vram {self.min_vram_gb:g}"] if self.min_vram_gb is not None else []
        parts += ["--spot" if self.spot else "--on-demand"] if self.spot is not None else []
        if self.max_usd_per_gpu_hour is not None:
            parts.append(f"--max-price {self.max_usd_per_gpu_hour:g}")
        parts += ["--include-stale"] if self.include_stale else []
        parts += ["--include-unavailable"] if self.include_unavailable else []
        return " ".join(parts)


def split_list(text: str | None) -> tuple[str, ...]:
    """ "aws, runpod" → ("aws", "runpod"); None or "" → ()."""
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def normalize_gpu(text: str) -> str:
    """How a wanted GPU name is compared: lower case, spaces and underscores as "-"."""
    return re.sub(r"[\s_]+", "-", text.strip()).lower()


def gpu_matches(gpu_name: str | None, wanted: str) -> bool:
    """Whether canonical `gpu_name` is `wanted` or of its family (module docstring)."""
    if not gpu_name:
        return False
    name, want = gpu_name.lower(), normalize_gpu(wanted)
    return bool(want) and (name == want or name.startswith(want + "-"))


def region_matches(region: str | None, pattern: str) -> bool:
    """Case-insensitive exact name or shell glob (`us-*`, `europe-west?`)."""
    return region is not None and fnmatch.fnmatchcase(region.lower(), pattern.strip().lower())


def _matching(
    values: Iterable[str | None], wanted: Sequence[str], match: Callable[[str, str], bool]
) -> list[str]:
    return [v for v in set(values) if v is not None and any(match(v, w) for w in wanted)]


def apply_filters(frame: pl.DataFrame, filters: OfferFilters) -> pl.DataFrame:
    """The rows of `frame` that pass `filters`.

    Needs the columns a filter reads: gpu_name, provider, region, vram_gb, is_spot, available,
    price_usd_per_gpu_hour (and is_stale for current offers). An offer whose `available` is false
    (the provider says no capacity now) passes only with `include_unavailable`; null (the source
    does not say) passes. The name rules run in Python over the distinct values (a few hundred),
    so exactly one implementation of each rule exists.
    """
    keep = pl.lit(True)
    if filters.gpus:
        keep &= pl.col("gpu_name").is_in(_matching(frame["gpu_name"], filters.gpus, gpu_matches))
    if filters.providers:
        wanted = {p.lower() for p in filters.providers}
        keep &= pl.col("provider").str.to_lowercase().is_in(sorted(wanted))
    if filters.regions:
        keep &= pl.col("region").is_in(_matching(frame["region"], filters.regions, region_matches))
    if filters.min_vram_gb is not None:
        keep &= pl.col("vram_gb") >= filters.min_vram_gb
    if filters.spot is not None:
        keep &= pl.col("is_spot") == filters.spot
    if filters.max_usd_per_gpu_hour is not None:
        keep &= pl.col("price_usd_per_gpu_hour") <= filters.max_usd_per_gpu_hour
    # stale offers (their provider has failed for too long) leave every answer unless asked for;
    # price history has no such column: a past interval is not stale, only old
    if not filters.include_stale and "is_stale" in frame.columns:
        keep &= ~pl.col("is_stale")
    if not filters.include_unavailable:
        keep &= pl.col("available").fill_null(True)
    # a null in a filtered column (an unmapped GPU's VRAM) fails the filter rather than passing it
    return frame.filter(keep.fill_null(False))


def check_filters(con: duckdb.DuckDBPyConnection, filters: OfferFilters) -> None:
    """Fail with advice when a --gpu or --provider names nothing the seeds know."""
    gpus = [g for (g,) in con.execute("select gpu_name from core.gpus").fetchall()]
    for wanted in filters.gpus:
        if not any(gpu_matches(g, wanted) for g in gpus):
            # suggest families too: every dash-prefix of a name (A100, A100-80GB, A100-80GB-SXM)
            names = {
                "-".join(g.split("-")[:n]).upper(): "-".join(g.split("-")[:n])
                for g in gpus
                for n in (1, 2, 3)
            }
            close = difflib.get_close_matches(normalize_gpu(wanted).upper(), list(names), n=4, cutoff=0.5)
            hint = f"; did you mean {', '.join(names[c] for c in close)}?" if close else ""
            raise AnswerError(
                f"{filters.gpu_option} {wanted!r} matches no GPU in warehouse/seeds/gpus.csv{hint} "
                "(a family like H100 or a name like H100-SXM; see `gpucost gpus`)"
            )
    if filters.providers:
        known = {p for (p,) in con.execute("select provider from core.providers").fetchall()}
        if _has_relation(con, "marts", "gpu_offers"):
            known |= {p for (p,) in con.execute("select distinct provider from marts.gpu_offers").fetchall()}
        unknown = sorted(p for p in filters.providers if p.lower() not in {k.lower() for k in known})
        if unknown:
            raise AnswerError(
                f"--provider {', '.join(unknown)}: no such provider; known: {', '.join(sorted(known))}"
            )


# --- current offers ----------------------------------------------------------------------------


def _has_relation(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> bool:
    found = con.execute(
        "select count(*) from information_schema.tables where table_schema = ? and table_name = ?",
        [schema, name],
    ).fetchall()
    return bool(found[0][0])


def current_offers(con: duckdb.DuckDBPyConnection, filters: OfferFilters, now: datetime) -> pl.DataFrame:
    """Every current offer passing `filters`, with `price_age_hours` (now − last_seen_at)."""
    if not _has_relation(con, "marts", "gpu_offers"):
        raise AnswerError("no marts.gpu_offers yet; run `gpucost refresh` first")
    frame = con.sql((QUERIES_DIR / "current_offers.sql").read_text()).pl()
    return apply_filters(frame, filters).with_columns(_age_hours(now))


def _age_hours(now: datetime) -> pl.Expr:
    return ((pl.lit(now) - pl.col("last_seen_at")).dt.total_seconds() / 3600).alias("price_age_hours")


def cheapest_per_provider(offers: pl.DataFrame) -> pl.DataFrame:
    """One row per GPU × provider × spot/on-demand: its cheapest offer by $/GPU-hour.

    Of equal $/GPU-hour the cheaper instance wins (fewer GPUs to rent), then the offer key.
    `offers` counts the offers the row stands for; `min_gpu_count`/`max_gpu_count` the sizes.
    Sorted by GPU, then $/GPU-hour.
    """
    group = ["gpu_name", "provider", "is_spot"]
    ranked = offers.sort(["price_usd_per_gpu_hour", "price_usd_per_hour", *OFFER_KEY], nulls_last=True)
    best = ranked.group_by(group, maintain_order=True).agg(
        pl.all().exclude(group).first(),
        pl.len().alias("offers"),
        pl.col("gpu_count").min().alias("min_gpu_count"),
        pl.col("gpu_count").max().alias("max_gpu_count"),
    )
    return best.select([*offers.columns, "offers", "min_gpu_count", "max_gpu_count"]).sort(
        ["gpu_name", "price_usd_per_gpu_hour", "provider", "is_spot"]
    )


def prices(con: duckdb.DuckDBPyConnection, filters: OfferFilters, now: datetime) -> pl.DataFrame:
    """`gpucost prices`: the cheapest offer per GPU × provider × pricing type."""
    check_filters(con, filters)
    return cheapest_per_provider(current_offers(con, filters, now))


def fetched_between(frame: pl.DataFrame) -> tuple[datetime | None, datetime | None]:
    """(oldest, newest) `last_seen_at` of the rows: when the prices shown were fetched."""
    if frame.is_empty() or "last_seen_at" not in frame.columns:
        return None, None
    # polars types Series.min() as any Python literal; a timestamp column's is a datetime
    return frame["last_seen_at"].min(), frame["last_seen_at"].max()  # type: ignore[return-value]


# --- the time/cost frontier --------------------------------------------------------------------


def frontier(
    rows: pl.DataFrame,
    *,
    time: str = "estimated_hours",
    cost: str = "cost_usd",
    group: Sequence[str] = FRONTIER_GROUP,
    tiebreak: Sequence[str] = OFFER_KEY,
    time_step: float | None = TIME_STEP_HOURS,
    cost_step: float | None = COST_STEP_USD,
) -> pl.DataFrame:
    """`rows` with `on_frontier`: false for an offer neither faster nor cheaper than another of its
    group (module docstring). Rows come back sorted by group, time, cost and offer key.

    Hours and cost compare at `time_step` and `cost_step` (None: exactly), the precision the tables
    show: per-second billing makes 1× for 2 h and 2× for 1 h differ by a fraction of a cent, and
    an offer a user cannot see is cheaper is not cheaper.

    Sorted by time, an offer is on the frontier exactly when it is cheaper than every offer before
    it in its group (those are all at least as fast); the exact tie that sorts first stays.
    """
    if rows.select(pl.col(time).is_null().any() | pl.col(cost).is_null().any()).item():
        raise ValueError(f"frontier needs {time} and {cost} on every row (pass priced rows only)")

    def stepped(column: str, step: float | None) -> pl.Expr:
        return pl.col(column) if step is None else (pl.col(column) / step).round(0)

    ranked = rows.with_columns(
        stepped(time, time_step).alias("_time"), stepped(cost, cost_step).alias("_cost")
    ).sort([*group, "_time", "_cost", *tiebreak], nulls_last=True)
    cheapest_before = pl.col("_cost").cum_min().shift(1).over(list(group))
    return ranked.with_columns(
        (cheapest_before.is_null() | (pl.col("_cost") < cheapest_before)).alias("on_frontier")
    ).drop("_time", "_cost")


# --- history -----------------------------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(h|d|w)\s*$", re.IGNORECASE)
_UNIT_HOURS = {"h": 1.0, "d": 24.0, "w": 168.0}


def parse_since(text: str, now: datetime) -> datetime:
    """ "30d" / "12h" / "2w" before `now`, or an ISO date or time ("2026-11-01", UTC unless stated)."""
    match = _DURATION.match(text)
    if match:
        return now - timedelta(hours=float(match.group(1)) * _UNIT_HOURS[match.group(2).lower()])
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise AnswerError(
            f"--since {text!r}: write a span like 30d, 12h or 2w, or a date like 2026-11-01"
        ) from None
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    if at >= now:
        raise AnswerError(f"--since {text!r} is not in the past")
    return at


_INTERVALS_SQL = """
select
    provider,
    instance_type,
    region,
    zone,
    pricing_type,
    pricing_type = 'spot' as is_spot,
    price_source,
    price_usd_per_hour,
    available,
    gpu_name_raw,
    gpu_memory_gb_raw,
    gpu_count as gpu_count_raw,
    valid_from,
    valid_to,
    last_seen_at
from core.offer_prices
where valid_from <= ? and (valid_to is null or valid_to > ?)
"""

_INTERVALS_SCHEMA = {
    "gpu_name": pl.String,
    "vram_gb": pl.Float64,
    "gpu_count": pl.Float64,
}


def price_intervals(
    con: duckdb.DuckDBPyConnection,
    filters: OfferFilters,
    since: datetime,
    now: datetime,
    catalog: HardwareCatalog | None = None,
) -> pl.DataFrame:
    """Price intervals of core.offer_prices open at some time in [since, now] that pass `filters`,
    each with its resolved GPU, VRAM, GPU count and `price_usd_per_gpu_hour`."""
    if not _has_relation(con, "core", "offer_prices"):
        raise AnswerError("no price history yet; run `gpucost refresh` first")
    check_filters(con, filters)
    frame = con.sql(_INTERVALS_SQL, params=[now, since]).pl()
    catalog = catalog or HardwareCatalog.load()
    hardware_key = ["provider", "instance_type", "gpu_name_raw", "gpu_memory_gb_raw", "gpu_count_raw"]
    described = resolve_descriptions(catalog, frame.select(hardware_key).unique().rows())
    # a count of 0 is how connectors say "not stated"; the seeds then know it (see marts.py)
    stated = pl.when(pl.col("gpu_count_raw") > 0).then(pl.col("gpu_count_raw"))
    hardware = described.select(
        *hardware_key,
        "gpu_name",
        "vram_gb",
        pl.coalesce(pl.when(pl.col("gpu_count") > 0).then(pl.col("gpu_count")), stated).alias("gpu_count"),
    ).cast(dict(frame.select(hardware_key).schema) | _INTERVALS_SCHEMA)
    joined = frame.join(hardware, on=hardware_key, how="left", nulls_equal=True)
    joined = joined.filter(pl.col("gpu_name").is_not_null() & (pl.col("gpu_count") > 0)).with_columns(
        (pl.col("price_usd_per_hour") / pl.col("gpu_count")).alias("price_usd_per_gpu_hour")
    )
    return apply_filters(joined, filters)


def series_at(intervals: pl.DataFrame, at: pl.DataFrame) -> pl.DataFrame:
    """The cheapest $/GPU-hour of each series at each instant of `at` (columns SERIES_KEY + `t`).

    An interval covers t when valid_from ≤ t < valid_to (valid_to null = still open). Instants no
    interval covers get no row: the series had no offer then.
    """
    key = list(SERIES_KEY)
    pairs = at.join(intervals.select([*key, "valid_from", "valid_to", "price_usd_per_gpu_hour"]), on=key)
    still_open = pl.col("valid_to").is_null() | (pl.col("t") < pl.col("valid_to"))
    covered = pairs.filter((pl.col("valid_from") <= pl.col("t")) & still_open)
    return (
        covered.group_by([*key, "t"])
        .agg(pl.col("price_usd_per_gpu_hour").min().alias("usd_per_gpu_hour"))
        .sort([*key, "t"])
    )


def _series(intervals: pl.DataFrame) -> pl.DataFrame:
    return intervals.select(SERIES_KEY).unique()


def chart_times(since: datetime, now: datetime, points: int = 32) -> list[datetime]:
    """`points` evenly spaced instants from `since` to `now`, both included."""
    step = (now - since) / max(points - 1, 1)
    return [since + step * i for i in range(points - 1)] + [now]


def chart_points(intervals: pl.DataFrame, times: Sequence[datetime]) -> pl.DataFrame:
    """`series_at` every series at each of `times` (`chart_times`)."""
    frame = pl.DataFrame({"t": list(times)}).with_columns(pl.col("t").cast(pl.Datetime("us", "UTC")))
    return series_at(intervals, _series(intervals).join(frame, how="cross"))


def history_summary(intervals: pl.DataFrame, since: datetime, now: datetime) -> pl.DataFrame:
    """Per series: its cheapest $/GPU-hour at the start of the window (or when it appeared), now
    (null when it has no current offer), lowest and highest, and how often it changed.

    The series is a step function, so evaluating it at every interval edge inside the window is
    exact: nothing between two edges differs from the edge before it.
    """
    key = list(SERIES_KEY)
    if intervals.is_empty():
        return pl.DataFrame(
            schema={
                **{k: pl.String for k in key},
                "first_at": pl.Datetime("us", "UTC"),
                "first_usd_per_gpu_hour": pl.Float64,
                "now_usd_per_gpu_hour": pl.Float64,
                "min_usd_per_gpu_hour": pl.Float64,
                "max_usd_per_gpu_hour": pl.Float64,
                "changes": pl.UInt32,
                "offers": pl.UInt32,
            }
        )
    utc = pl.Datetime("us", "UTC")
    edges = pl.concat(
        [
            intervals.select([*key, pl.col("valid_from").clip(since, now).cast(utc).alias("t")]),
            intervals.filter(pl.col("valid_to").is_not_null() & (pl.col("valid_to") <= now)).select(
                [*key, pl.col("valid_to").cast(utc).alias("t")]
            ),
            _series(intervals).with_columns(pl.lit(now).cast(utc).alias("t")),
        ]
    ).unique()
    values = series_at(intervals, edges)
    offers = intervals.group_by(key).agg(
        pl.struct(list(OFFER_KEY)).n_unique().cast(pl.UInt32).alias("offers")
    )
    summary = values.group_by(key).agg(
        pl.col("t").first().alias("first_at"),
        pl.col("usd_per_gpu_hour").first().alias("first_usd_per_gpu_hour"),
        pl.col("usd_per_gpu_hour").filter(pl.col("t") == now).first().alias("now_usd_per_gpu_hour"),
        pl.col("usd_per_gpu_hour").min().alias("min_usd_per_gpu_hour"),
        pl.col("usd_per_gpu_hour").max().alias("max_usd_per_gpu_hour"),
        (pl.col("usd_per_gpu_hour").diff().fill_null(0) != 0).sum().cast(pl.UInt32).alias("changes"),
    )
    return summary.join(offers, on=key).sort(key)
