"""`gpucost prices` and `gpucost history`: current and past prices, filtered, with their freshness.

    gpucost prices [--gpu H100] [--provider aws,runpod] [--region 'us-*'] [--min-vram 80]
                   [--spot | --on-demand] [--max-price 3] [--json | --csv]
    gpucost history --gpu H100 [--provider runpod] [--since 30d] [--json | --csv]

The queries are answers/prices.py; this module parses options and draws. Every answer says when
its prices were fetched: a table ends with the line; JSON and CSV rows carry `last_seen_at` (or
their interval); the sample-data banner of `open_reader()` goes to stderr in every format.

The filter options are shared with `gpucost estimate` (flows/cli_finetune.py), which calls its GPU
filter `--offer-gpu` because its `--gpu` already means "estimate on this stated hardware".
Registered on the app in flows/cli.py: `app.command()(cli_prices.prices)`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from flows.output import console, err
from warehouse.errors import WarehouseError
from warehouse.freshness import format_age

# The queries (answers.prices: DuckDB; polars for history) are imported by the functions that run them, so
# that `gpucost --help` and the commands that never read prices do not load them (issue 22).
if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from answers.prices import OfferFilters
    from answers.rows import Rows

# --- options shared with `gpucost estimate` ------------------------------------------------------

FILTERS = "Which offers"
GpuFilterHelp = "GPUs or families, comma-separated: H100 is H100-SXM, -PCIe and -NVL."
ProviderOpt = Annotated[
    str | None,
    typer.Option(
        "--provider",
        metavar="SLUGS",
        rich_help_panel=FILTERS,
        help="Providers, comma-separated (aws,runpod).",
    ),
]
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region",
        metavar="NAMES",
        rich_help_panel=FILTERS,
        help="Regions, comma-separated; globs work ('us-*').",
    ),
]
MinVramOpt = Annotated[
    float | None,
    typer.Option("--min-vram", metavar="GB", rich_help_panel=FILTERS, min=0.0, help="Least VRAM per GPU."),
]
MaxPriceOpt = Annotated[
    float | None,
    typer.Option(
        "--max-price", metavar="USD", rich_help_panel=FILTERS, min=0.0, help="Most USD per GPU-hour."
    ),
]
# two flags, not one `--spot/--on-demand` pair, whose last word would silently win over the first
SpotOpt = Annotated[
    bool, typer.Option("--spot", rich_help_panel=FILTERS, help="Only spot offers (default: both kinds).")
]
OnDemandOpt = Annotated[
    bool,
    typer.Option("--on-demand", rich_help_panel=FILTERS, help="Only on-demand offers (default: both kinds)."),
]
IncludeStaleOpt = Annotated[
    bool,
    typer.Option(
        "--include-stale",
        rich_help_panel=FILTERS,
        help="Also show offers of providers failing for longer than GPUCOST_STALE_AFTER_HOURS "
        "(default 48; `gpucost status` says which and why).",
    ),
]
IncludeUnavailableOpt = Annotated[
    bool,
    typer.Option(
        "--include-unavailable",
        rich_help_panel=FILTERS,
        help="Also rank offers the provider marks unavailable now (marked ✗).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON rows instead of a table.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print CSV rows instead of a table.")]

SPARK = "▁▂▃▄▅▆▇█"
GAP = "·"
STATISTIC_LABEL = {"weighted_average": "w.avg"}


def _fail(message: str, code: int = 1) -> typer.Exit:
    # flows.job_options' error: `gpucost serve` answers it as HTTP 422 with the same line
    from flows.job_options import _fail as option_error

    return option_error(message, code)


def spot_choice(spot: bool, on_demand: bool) -> bool | None:
    """--spot / --on-demand as OfferFilters.spot; both at once is a usage error."""
    if spot and on_demand:
        raise _fail("--spot and --on-demand are exclusive: give one, or neither for both kinds", code=2)
    return True if spot else False if on_demand else None


def make_filters(
    gpu: str | None = None,
    provider: str | None = None,
    region: str | None = None,
    min_vram: float | None = None,
    spot: bool | None = None,
    max_price: float | None = None,
    include_stale: bool = False,
    include_unavailable: bool = False,
    *,
    gpu_option: str = "--gpu",
) -> OfferFilters:
    """The options as `OfferFilters` (comma-separated lists split); `gpu_option` is the flag the
    command calls its GPU filter, for messages (`estimate`'s is --offer-gpu)."""
    from answers.prices import OfferFilters, split_list

    return OfferFilters(
        gpu_option=gpu_option,
        gpus=split_list(gpu),
        providers=tuple(p.lower() for p in split_list(provider)),
        regions=split_list(region),
        min_vram_gb=min_vram,
        spot=spot,
        max_usd_per_gpu_hour=max_price,
        include_stale=include_stale,
        include_unavailable=include_unavailable,
    )


def open_answers() -> tuple[duckdb.DuckDBPyConnection, str | None]:
    """The read-only warehouse and its banner (`open_reader`); the sample-data banner (or a pulled
    publication's age) is printed to stderr, the no-prices one is left to the empty answer, which
    says it once as its reason."""
    from warehouse.db import NO_LIVE_REFRESH, open_reader

    try:
        con, banner = open_reader()
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    if banner and banner != NO_LIVE_REFRESH:
        err.print(f"[yellow]{banner}[/]")
    return con, banner


# --- formatting ---------------------------------------------------------------------------------


def fetched_line(frame: Rows | pl.DataFrame, banner: str | None, now: datetime) -> str:
    """ "live prices fetched 2026-12-01 09:25 UTC (3m ago)", or a range when rows differ."""
    from answers import prices as answers
    from warehouse.db import SAMPLE_BANNER

    oldest, newest = answers.fetched_between(frame)
    kind = "sample prices (replay cassette, not live)" if banner == SAMPLE_BANNER else "live prices"
    if oldest is None or newest is None:
        return f"{kind}: none shown"
    if f"{oldest:%Y-%m-%d %H:%M}" == f"{newest:%Y-%m-%d %H:%M}":
        when = f"{newest:%Y-%m-%d %H:%M} UTC"
    else:
        when = f"between {oldest:%Y-%m-%d %H:%M} and {newest:%Y-%m-%d %H:%M} UTC"
    age = format_age((now - newest).total_seconds() / 3600)
    return f"{kind} fetched {when} ({age} ago)" if age != "now" else f"{kind} fetched {when} (just now)"


# the marker after a price that pays for the GPU alone (CPU, RAM and disk are billed on top)
GPU_ONLY_MARK = "†"
UNAVAILABLE_MARK = "✗"


def covers_mark(price_covers: str | None) -> str:
    """ "†" for a GPU-only price (price_covers 'gpu'), else nothing: the other bases include a host."""
    return GPU_ONLY_MARK if price_covers == "gpu" else ""


def price_text(value: float | None, is_from: bool) -> str:
    """A price to the cent (3 significant digits under 10 cents); a "from $X" page price is "≥X"."""
    if value is None:
        return ""
    text = f"{value:,.2f}" if value >= 0.1 else f"{value:.3g}"
    return f"≥{text}" if is_from else text


def source_text(price_source: str, statistic: str | None) -> str:
    """ "list", "market p10", "estimated": how real the price is, and which market statistic."""
    if not statistic:
        return price_source
    return f"{price_source} {STATISTIC_LABEL.get(statistic, statistic)}"


def gpus_text(count: float, interconnect: str | None) -> str:
    """ "8×NVSwitch", "1×", "0.5×" (a fractional GPU)."""
    n = f"{count:g}×"
    return f"{n}{interconnect}" if interconnect and interconnect != "none" and count > 1 else n


def sparkline(values: Sequence[float | None]) -> str:
    """One character per value, scaled between the series' own lowest and highest; a gap where the
    series had no offer (·); a flat series draws at mid height."""
    present = [v for v in values if v is not None]
    if not present:
        return GAP * len(values)
    low, high = min(present), max(present)
    if high - low < 1e-12:
        return "".join(GAP if v is None else SPARK[3] for v in values)
    top = len(SPARK) - 1
    return "".join(GAP if v is None else SPARK[round((v - low) / (high - low) * top)] for v in values)


def _json_value(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _print_rows(frame: Rows | pl.DataFrame, as_json: bool) -> None:
    from answers.rows import Rows

    if as_json:
        console.out(json.dumps(frame.to_dicts(), indent=2, default=_json_value), highlight=False)
    else:  # polars writes the CSV (its quoting and timestamp format, unchanged)
        sys.stdout.write((frame.to_polars() if isinstance(frame, Rows) else frame).write_csv())


# --- gpucost prices -------------------------------------------------------------------------------

PRICE_COLUMNS = (
    "gpu_name",
    "vram_gb",
    "provider",
    "pricing_type",
    "is_spot",
    "price_usd_per_gpu_hour",
    "price_usd_per_hour",
    "price_is_from",
    "gpu_count",
    "intra_node_interconnect",
    "price_source",
    "price_statistic",
    "price_covers",
    "available",
    "vram_gb_stated",
    "vram_source",
    "spec_conflict",
    "instance_type",
    "region",
    "zone",
    "offers",
    "min_gpu_count",
    "max_gpu_count",
    "price_since",
    "last_seen_at",
    "price_age_hours",
    "is_stale",
)


def rows_json(frame: Any) -> list[dict[str, Any]]:
    """`frame`'s rows (`to_dicts()`) as --json prints them, times in ISO 8601 (`_json_value`,
    the default `_print_rows` dumps with): what `gpucost serve` answers."""
    rows: list[dict[str, Any]] = json.loads(json.dumps(frame.to_dicts(), default=_json_value))
    return rows


def prices_filters(
    gpu: str | None = None,
    provider: str | None = None,
    region: str | None = None,
    min_vram: float | None = None,
    spot: bool = False,
    on_demand: bool = False,
    max_price: float | None = None,
    include_stale: bool = False,
    include_unavailable: bool = False,
) -> OfferFilters:
    """`prices`' filter options as OfferFilters; OptionError for --spot with --on-demand."""
    return make_filters(
        gpu,
        provider,
        region,
        min_vram,
        spot_choice(spot, on_demand),
        max_price,
        include_stale,
        include_unavailable,
    )


def price_rows(con: duckdb.DuckDBPyConnection, filters: OfferFilters, now: datetime) -> Rows:
    """`prices`' rows (answers.prices.prices), in its --json columns."""
    from answers import prices as answers

    return answers.prices(con, filters, now).select(PRICE_COLUMNS)


def prices(
    gpu: Annotated[
        str | None, typer.Option("--gpu", metavar="NAMES", rich_help_panel=FILTERS, help=GpuFilterHelp)
    ] = None,
    provider: ProviderOpt = None,
    region: RegionOpt = None,
    min_vram: MinVramOpt = None,
    spot: SpotOpt = False,
    on_demand: OnDemandOpt = False,
    max_price: MaxPriceOpt = None,
    include_stale: IncludeStaleOpt = False,
    include_unavailable: IncludeUnavailableOpt = False,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
) -> None:
    """The cheapest current offer per GPU, provider and pricing type, in $/GPU-hour.

    Each row: the offer with the lowest $/GPU-hour, its instance price, GPUs, source and age.

    "≥" marks a page's "from" price (a lower bound); "market p10" is a marketplace's statistic;
    "†" a price for the GPU alone (CPU, RAM, disk extra); "✗" an offer marked unavailable.
    """
    from answers.prices import why_no_prices

    if as_json and as_csv:
        raise _fail("--json and --csv are exclusive", code=2)
    filters = prices_filters(
        gpu, provider, region, min_vram, spot, on_demand, max_price, include_stale, include_unavailable
    )
    now = datetime.now(UTC)
    con, banner = open_answers()
    try:
        rows = price_rows(con, filters, now)
        if rows.is_empty():
            raise _fail(why_no_prices(con, banner, filters, now))
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()
    if as_json or as_csv:
        _print_rows(rows, as_json)
        return
    console.print(_prices_table(rows))
    console.print(fetched_line(rows, banner, now), highlight=False)


def _prices_table(rows: Rows) -> Table:
    # one space between columns and the VRAM under the GPU's name: nine columns fit 80 characters
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=0,
        show_edge=False,
        title="cheapest offer per GPU and provider, USD",
        caption='≥: a "from" (lower-bound) page price; p10, w.avg: the marketplace statistic; '
        "+N: N more offers of that GPU, provider and kind; stale: its provider has been failing "
        "(gpucost status); "
        f"{GPU_ONLY_MARK}: the price is for the GPU alone (CPU, RAM, disk billed on top); "
        f"{UNAVAILABLE_MARK}: the provider marks it unavailable now",
    )
    # Prices, the GPU and the age are never cut; on a narrow terminal the words (provider, GPUs,
    # source, region) wrap instead: rich shrinks wrappable columns first and only cuts every
    # column with "…" when the unwrappable ones alone are too wide (a price read "1.…" at 80
    # columns once a marketplace's source said "market quote (1 node, 1 h, from now)")
    table.add_column("GPU", no_wrap=True)
    table.add_column("provider", overflow="fold")
    table.add_column("spot", no_wrap=True)
    table.add_column("$/GPU-h", justify="right", no_wrap=True)
    table.add_column("$/h", justify="right", no_wrap=True)
    table.add_column("GPUs", overflow="fold")
    table.add_column("source", overflow="fold")
    table.add_column("age", justify="right", no_wrap=True)
    table.add_column("region", overflow="fold")
    records = rows.to_dicts()
    for index, r in enumerate(records):
        first = index == 0 or records[index - 1]["gpu_name"] != r["gpu_name"]
        last = index == len(records) - 1 or records[index + 1]["gpu_name"] != r["gpu_name"]
        more = f" +{r['offers'] - 1}" if r["offers"] > 1 else ""
        vram = f"\n{r['vram_gb']:g} GB" if r["vram_gb"] is not None else ""
        table.add_row(
            f"{r['gpu_name']}{vram}" if first else "",
            r["provider"] + (f" {UNAVAILABLE_MARK}" if r["available"] is False else ""),
            "spot" if r["is_spot"] else "",
            price_text(r["price_usd_per_gpu_hour"], r["price_is_from"]) + covers_mark(r["price_covers"]),
            price_text(r["price_usd_per_hour"], r["price_is_from"]) + covers_mark(r["price_covers"]),
            gpus_text(r["gpu_count"], r["intra_node_interconnect"]),
            source_text(r["price_source"], r["price_statistic"]),
            format_age(r["price_age_hours"]) + (" stale" if r["is_stale"] else ""),
            f"{r['region']}{more}",
            end_section=last,
        )
    return table


# --- gpucost history ------------------------------------------------------------------------------

CHART_POINTS = 24
HISTORY_COLUMNS = (
    "gpu_name",
    "provider",
    "pricing_type",
    "instance_type",
    "region",
    "zone",
    "price_source",
    "gpu_count",
    "price_usd_per_hour",
    "price_usd_per_gpu_hour",
    "valid_from",
    "valid_to",
    "last_seen_at",
)


def history(
    gpu: Annotated[str, typer.Option("--gpu", metavar="NAMES", rich_help_panel=FILTERS, help=GpuFilterHelp)],
    provider: ProviderOpt = None,
    region: RegionOpt = None,
    spot: SpotOpt = False,
    on_demand: OnDemandOpt = False,
    since: Annotated[
        str, typer.Option("--since", metavar="SPAN", help="Window: 30d, 12h, 2w, or a date (2026-11-01).")
    ] = "30d",
    as_json: Annotated[bool, typer.Option("--json", help="Print the price intervals as JSON.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print the price intervals as CSV.")] = False,
) -> None:
    """Price history (core.offer_prices): a table and a chart per series.

    A series is one GPU, provider and pricing type: its cheapest offer, in $/GPU-hour.

    --json and --csv print the price intervals (valid_to empty: still current).
    """
    from answers import prices as answers
    from warehouse.db import NO_LIVE_REFRESH

    if as_json and as_csv:
        raise _fail("--json and --csv are exclusive", code=2)
    now = datetime.now(UTC)
    filters, start = history_ask(gpu, provider, region, spot, on_demand, since, now)
    con, banner = open_answers()
    try:
        intervals = answers.price_intervals(con, filters, start, now)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()
    if intervals.is_empty():
        raise _fail(
            NO_LIVE_REFRESH
            if banner == NO_LIVE_REFRESH
            else f"no prices match {filters.describe()} since {start:%Y-%m-%d %H:%M} UTC; "
            "try a longer --since"
        )
    if as_json or as_csv:
        _print_rows(history_rows(intervals), as_json)
        return
    summary = answers.history_summary(intervals, start, now)
    times = answers.chart_times(start, now, CHART_POINTS)
    points = answers.chart_points(intervals, times)
    console.print(_history_table(summary, points, times))
    console.print(fetched_line(intervals, banner, now), highlight=False)


def history_ask(
    gpu: str,
    provider: str | None,
    region: str | None,
    spot: bool,
    on_demand: bool,
    since: str,
    now: datetime,
) -> tuple[OfferFilters, datetime]:
    """`history`'s options as filters and the window's start; OptionError (exit 2) for a bad
    --since or --spot with --on-demand, before any warehouse is opened."""
    from answers import prices as answers

    filters = make_filters(gpu, provider, region, spot=spot_choice(spot, on_demand))
    try:  # a bad --since is the flag's fault (exit 2)
        start = answers.parse_since(since, now)
    except WarehouseError as exc:
        raise _fail(str(exc), code=2) from None
    return filters, start


def history_rows(intervals: pl.DataFrame) -> pl.DataFrame:
    """`history --json`'s rows: the price intervals in its columns, by GPU, provider and start."""
    return intervals.select(HISTORY_COLUMNS).sort(["gpu_name", "provider", "valid_from"])


def _history_table(summary: pl.DataFrame, points: pl.DataFrame, times: Sequence[datetime]) -> Table:
    import polars as pl

    from answers import prices as answers

    grid = points.group_by(list(answers.SERIES_KEY)).agg(pl.col("t"), pl.col("usd_per_gpu_hour"))
    charts: dict[tuple[Any, ...], str] = {}
    for row in grid.iter_rows(named=True):
        by_time = dict(zip(row["t"], row["usd_per_gpu_hour"], strict=True))
        key = tuple(row[k] for k in answers.SERIES_KEY)
        charts[key] = sparkline([by_time.get(t) for t in times])
    table = Table(
        box=box.SIMPLE_HEAD,
        padding=0,
        show_edge=False,
        title=f"$/GPU-hour, {times[0]:%Y-%m-%d %H:%M} to {times[-1]:%Y-%m-%d %H:%M} UTC",
        caption="the cheapest offer of each series over time; a chart spans its own low to high "
        "(· no offer then)",
    )
    table.add_column("GPU", no_wrap=True)
    table.add_column("provider", overflow="fold")
    table.add_column("spot")
    for column in ("first", "now", "low", "high"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("chg", justify="right")
    table.add_column("chart", no_wrap=True)
    ordered = summary.sort(["gpu_name", "now_usd_per_gpu_hour", "provider"], nulls_last=True)
    for r in ordered.iter_rows(named=True):
        key = tuple(r[k] for k in answers.SERIES_KEY)
        table.add_row(
            r["gpu_name"],
            r["provider"],
            "spot" if r["pricing_type"] == "spot" else "",
            price_text(r["first_usd_per_gpu_hour"], False),
            price_text(r["now_usd_per_gpu_hour"], False) or "gone",
            price_text(r["min_usd_per_gpu_hour"], False),
            price_text(r["max_usd_per_gpu_hour"], False),
            str(r["changes"]),
            charts.get(key, ""),
        )
    return table
