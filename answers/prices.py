"""Prices: the answers behind `gpucost prices` and `gpucost history`, and the filters and frontier
`answers.estimate` ranks offers with.

Pure functions over a DuckDB connection (a read-only, sandboxed one is enough) and frozen filter
values; they never print. `prices` returns `answers.rows.Rows`, computed in DuckDB, so the most
common read command never imports polars (its import is most of `gpucost prices`' start-up);
history, the frontier and `current_offers` for `answers.estimate` return polars frames.

**Filters.** `filter_terms` states every filter rule once, as (column, test, value) terms; they
are rendered as SQL for current offers (`sql_where`: fixed text, every value a `?` parameter, so
no user input is ever formatted into SQL) and as polars expressions for history intervals, whose
GPUs are resolved in Python (`apply_filters`). A test holds the two renderings to the same rows.

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
from typing import TYPE_CHECKING, Any

from answers import AnswerError
from answers.rows import Rows
from warehouse.db import PACKAGE_DIR, query_frame, relation_exists
from warehouse.hardware import HardwareCatalog

if TYPE_CHECKING:
    import duckdb
    import polars as pl

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


# One filter, two renderings: SQL where current offers are read (the marts already hold every
# column a filter reads, so `gpucost prices` needs no dataframe library), polars where history
# intervals are, after their GPUs are resolved in Python. `filter_terms` decides every rule once;
# the renderers only spell a (column, test, value) term in their language.
FilterTerm = tuple[str, str, Any]


def filter_terms(
    filters: OfferFilters, distinct: Callable[[str], Iterable[str | None]], *, has_stale: bool
) -> list[FilterTerm]:
    """The terms that keep exactly the rows passing `filters`.

    `distinct(column)` gives a column's distinct values: the name rules run in Python over them (a
    few hundred), so exactly one implementation of each rule exists. An offer whose `available` is
    false (the provider says no capacity now) passes only with `include_unavailable`; null (the
    source does not say) passes. `has_stale`: whether the rows have `is_stale` (price history has
    no such column: a past interval is not stale, only old). A null in a filtered column (an
    unmapped GPU's VRAM) fails the filter rather than passing it.
    """
    terms: list[FilterTerm] = []
    if filters.gpus:
        terms.append(("gpu_name", "in", sorted(_matching(distinct("gpu_name"), filters.gpus, gpu_matches))))
    if filters.providers:
        terms.append(("provider", "lower_in", sorted({p.lower() for p in filters.providers})))
    if filters.regions:
        terms.append(("region", "in", sorted(_matching(distinct("region"), filters.regions, region_matches))))
    if filters.min_vram_gb is not None:
        terms.append(("vram_gb", ">=", filters.min_vram_gb))
    if filters.spot is not None:
        terms.append(("is_spot", "==", filters.spot))
    if filters.max_usd_per_gpu_hour is not None:
        terms.append(("price_usd_per_gpu_hour", "<=", filters.max_usd_per_gpu_hour))
    # stale offers (their provider has failed for too long) leave every answer unless asked for
    if not filters.include_stale and has_stale:
        terms.append(("is_stale", "is_false", None))
    if not filters.include_unavailable:
        terms.append(("available", "not_false", None))
    return terms


_SQL_TESTS = {
    "in": "list_contains(?::varchar[], {c})",
    "lower_in": "list_contains(?::varchar[], lower({c}))",
    ">=": "{c} >= ?",
    "<=": "{c} <= ?",
    "==": "{c} = ?",
    "is_false": "not {c}",
    "not_false": "coalesce({c}, true)",
}


def sql_where(terms: Sequence[FilterTerm]) -> tuple[str, list[Any]]:
    """`terms` as a SQL condition with `?` parameters (column names are the code's own, never
    input); a null makes a term null, and a null condition drops the row, as `filter_terms` says."""
    parts, params = ["true"], []
    for column, test, value in terms:
        parts.append(_SQL_TESTS[test].format(c=column))
        if "?" in _SQL_TESTS[test]:
            params.append(value)
    return " and ".join(parts), params


def apply_filters(frame: pl.DataFrame, filters: OfferFilters) -> pl.DataFrame:
    """The rows of polars `frame` that pass `filters` (`filter_terms` for the rules)."""
    import polars as pl

    terms = filter_terms(
        filters, lambda c: frame[c].unique().to_list(), has_stale="is_stale" in frame.columns
    )
    keep = pl.lit(True)
    for term in terms:
        keep &= _polars_test(term)
    return frame.filter(keep.fill_null(False))


def _polars_test(term: FilterTerm) -> pl.Expr:
    import polars as pl

    column, test, value = term
    col = pl.col(column)
    if test == "in":
        return col.is_in(value)
    if test == "lower_in":
        return col.str.to_lowercase().is_in(value)
    if test == ">=":
        return col >= value
    if test == "<=":
        return col <= value
    if test == "==":
        return col == value
    if test == "is_false":
        return ~col
    if test == "not_false":
        return col.fill_null(True)
    raise ValueError(f"unknown filter test {test!r}")


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
        if relation_exists(con, "marts.gpu_offers"):
            known |= {p for (p,) in con.execute("select distinct provider from marts.gpu_offers").fetchall()}
        unknown = sorted(p for p in filters.providers if p.lower() not in {k.lower() for k in known})
        if unknown:
            raise AnswerError(
                f"--provider {', '.join(unknown)}: no such provider; known: {', '.join(sorted(known))}"
            )


# --- current offers ----------------------------------------------------------------------------


def _current_offers_sql(
    con: duckdb.DuckDBPyConnection, filters: OfferFilters, now: datetime
) -> tuple[str, list[Any]]:
    """The query of every current offer passing `filters`, with `price_age_hours`."""
    if not relation_exists(con, "marts.gpu_offers"):
        raise AnswerError("no marts.gpu_offers yet; run `gpucost refresh` first")
    offers = (QUERIES_DIR / "current_offers.sql").read_text()

    def distinct(column: str) -> list[str | None]:
        return [v for (v,) in con.execute(f"select distinct {column} from ({offers})").fetchall()]

    where, params = sql_where(filter_terms(filters, distinct, has_stale=True))
    return f"select *, {_PRICE_AGE_SQL} as price_age_hours from ({offers}) where {where}", [now, *params]


# A price's age in hours, now − last_seen_at in whole seconds (as the age has always been
# counted: polars' total_seconds truncated), written once for SQL and once for polars
# (`with_price_age`); tests/test_answers_prices.py holds the two equal. Seconds become hours by
# multiplying by 1/3600, not dividing by 3600: polars divides a column of more than a few rows
# by a constant as a multiplication by its reciprocal, which differs from DuckDB's division in
# the last bit for about one age in 200 (the book's ranking then differed from the command's).
_PRICE_AGE_SQL = "trunc((epoch_us(?::timestamptz) - epoch_us(last_seen_at)) / 1e6) * (1::double / 3600)"


def with_price_age(offers: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """`offers` (current_offers without its age) with `price_age_hours` at `now`, as
    `current_offers` computes it in SQL: the same float operations in the same order."""
    import polars as pl

    seconds = (
        pl.lit(now, dtype=pl.Datetime("us", "UTC")) - pl.col("last_seen_at")
    ).dt.total_microseconds() / 1e6
    whole = pl.when(seconds >= 0).then(seconds.floor()).otherwise(seconds.ceil())  # trunc
    return offers.with_columns((whole * (1 / 3600)).alias("price_age_hours"))


def current_offers(con: duckdb.DuckDBPyConnection, filters: OfferFilters, now: datetime) -> pl.DataFrame:
    """Every current offer passing `filters`, with `price_age_hours` (now − last_seen_at)."""
    sql, params = _current_offers_sql(con, filters, now)
    return query_frame(con, sql, params)


# Of equal $/GPU-hour the cheaper instance wins (fewer GPUs to rent), then the offer key; the
# order polars sorted in before (nulls last within a group, first in the result's own order).
_CHEAPEST_SQL = """
select * exclude (_rank) from (
    select
        *,
        row_number() over best as _rank,
        count(*) over everyone as offers,
        min(gpu_count) over everyone as min_gpu_count,
        max(gpu_count) over everyone as max_gpu_count
    from ({current})
    window
        best as (
            partition by gpu_name, provider, is_spot
            order by price_usd_per_gpu_hour nulls last, price_usd_per_hour nulls last, provider nulls last,
                instance_type nulls last, region nulls last, zone nulls last, pricing_type nulls last
        ),
        everyone as (partition by gpu_name, provider, is_spot)
)
where _rank = 1
order by gpu_name nulls first, price_usd_per_gpu_hour nulls first, provider nulls first, is_spot nulls first
"""


def cheapest_per_provider(con: duckdb.DuckDBPyConnection, filters: OfferFilters, now: datetime) -> Rows:
    """One row per GPU × provider × spot/on-demand of the current offers passing `filters`: its
    cheapest offer by $/GPU-hour, with `price_age_hours`.

    Of equal $/GPU-hour the cheaper instance wins (fewer GPUs to rent), then the offer key.
    `offers` counts the offers the row stands for; `min_gpu_count`/`max_gpu_count` the sizes.
    Sorted by GPU, then $/GPU-hour.
    """
    sql, params = _current_offers_sql(con, filters, now)
    return Rows.fetch(con.execute(_CHEAPEST_SQL.format(current=sql), params))


def prices(con: duckdb.DuckDBPyConnection, filters: OfferFilters, now: datetime) -> Rows:
    """`gpucost prices`: the cheapest offer per GPU × provider × pricing type."""
    check_filters(con, filters)
    return cheapest_per_provider(con, filters, now)


def why_no_prices(
    con: duckdb.DuckDBPyConnection, banner: str | None, filters: OfferFilters, now: datetime
) -> str:
    """Why `prices` has nothing to show: no refresh loaded any, the filters removed every row, or
    every provider's offers are closed or stale. "Loosen a filter" only when one removed rows.
    `banner` is what `warehouse.db.open_reader` said of the warehouse it opened."""
    from warehouse.db import NO_LIVE_REFRESH

    if banner == NO_LIVE_REFRESH:
        return NO_LIVE_REFRESH
    everything = OfferFilters(include_stale=True, include_unavailable=True)
    if filters.describe() and not prices(con, everything, now).is_empty():
        asked = filters.describe()
        return f"no current offers match {asked}; loosen a filter or see `gpucost prices` without it"
    return (
        "no current offers in the warehouse: every provider's offers are closed or stale "
        "(`gpucost status` says why)"
    )


def fetched_between(frame: Rows | pl.DataFrame) -> tuple[datetime | None, datetime | None]:
    """(oldest, newest) `last_seen_at` of the rows: when the prices shown were fetched."""
    if frame.is_empty() or "last_seen_at" not in frame.columns:
        return None, None
    seen = [
        t for t in (frame.column("last_seen_at") if isinstance(frame, Rows) else frame["last_seen_at"]) if t
    ]
    return (min(seen), max(seen)) if seen else (None, None)


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
    import polars as pl

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


def price_intervals(
    con: duckdb.DuckDBPyConnection,
    filters: OfferFilters,
    since: datetime,
    now: datetime,
    catalog: HardwareCatalog | None = None,
) -> pl.DataFrame:
    """Price intervals of core.offer_prices open at some time in [since, now] that pass `filters`,
    each with its resolved GPU, VRAM, GPU count and `price_usd_per_gpu_hour`."""
    import polars as pl

    from warehouse.marts import resolve_descriptions  # polars: history needs it, `prices` does not

    if not relation_exists(con, "core.offer_prices"):
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
    ).cast(
        dict(frame.select(hardware_key).schema)
        | {c: pl.Float64 for c in ("vram_gb", "gpu_count")}
        | {"gpu_name": pl.String}
    )
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
    import polars as pl

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
    import polars as pl

    frame = pl.DataFrame({"t": list(times)}).with_columns(pl.col("t").cast(pl.Datetime("us", "UTC")))
    return series_at(intervals, _series(intervals).join(frame, how="cross"))


def history_summary(intervals: pl.DataFrame, since: datetime, now: datetime) -> pl.DataFrame:
    """Per series: its cheapest $/GPU-hour at the start of the window (or when it appeared), now
    (null when it has no current offer), lowest and highest, and how often it changed.

    The series is a step function, so evaluating it at every interval edge inside the window is
    exact: nothing between two edges differs from the edge before it.
    """
    import polars as pl

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
