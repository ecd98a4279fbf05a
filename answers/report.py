"""The comparison page: one self-contained `index.html` built from the marts.

    report_data(con)       -> dict   what the page embeds, read from the warehouse (DuckDB queries)
    render_html(data)      -> str    the page: jinja2 template, our CSS/JS and the vendored libraries
                                     inlined, the data as one JSON block
    write_report(con, dir) -> Path   both, written aside and renamed into place (dir/index.html)

The page opens from `file://` with no server and no network: every script and style is inlined
(vendored from npm packages under `report/vendor/`, each with its licence, which the page repeats in
a comment), and the browser renders the views from the embedded JSON:

- comparison: every current offer of `marts.gpu_offers`, reduced to the cheapest per GPU-hour of
  each GPU x provider x spot/on-demand x region x filtered-on value (VRAM, interconnects); the
  page groups further, across what passes its filters, so a region filter shows that region's
  price, never another's;
- will my job fit: the job grid of `marts.finetune_requirements` (memory breakdown) and, per job
  and pricing type, the `TOP_OFFERS` offers of `marts.finetune_costs` that fit and are priced with
  the smallest whole bill (`total_usd`), one per instance type (its cheapest region);
- price history: the SCD2 intervals of `core.offer_prices` as step series of the cheapest
  $/GPU-hour per GPU x provider x pricing type;
- freshness: each provider's last run and last good refresh from `ops.provider_runs`, its state
  (fresh, failing or stale: `staging.provider_health`), and whether the warehouse holds replay
  sample data; `why_empty` says why the comparison has no offer (no good refresh yet, stale or
  unavailable offers left out), None when it has some.

The page keeps its filters, sorts and chosen job in its query string (the hash names the view), so
its URL can be shared; values it does not offer are ignored.

Tables are sent as {"columns": [...], "rows": [[...], ...]}; timestamps as Unix seconds (UTC).
Prices are sent exactly as the marts hold them; the fine-tuning model's outputs (hours, GB, costs)
are rounded to `SIGNIFICANT_DIGITS` significant digits, which keeps the page small.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from answers.billing import billing_rule
from answers.status import freshness
from warehouse.db import (
    NO_LIVE_REFRESH,
    SAMPLE_BANNER,
    Settings,
    holds_sample_data,
    reader_path,
    relation_exists,
)
from warehouse.hardware import HardwareCatalog
from warehouse.marts import resolve_hardware

ASSETS_DIR = Path(__file__).resolve().parent / "report"
PAGE_NAME = "index.html"
SITE_DIR_NAME = "site"  # the page's folder, beside the feeds
SCHEMA_VERSION = 1
TOP_OFFERS = 6  # per job and pricing type: enough to compare, small enough to embed 400+ jobs
SIGNIFICANT_DIGITS = 4
HISTORY_MAX_POINTS = 400  # per series; longer histories keep the cheapest price per time bucket
# the job the picker opens on: the question the page is built to answer in one look
DEFAULT_JOB = "llama-3.1-70b__qlora__s4096"


@dataclass(frozen=True)
class Vendored:
    """A third-party file inlined into the page, with the licence that travels with it."""

    name: str
    version: str
    path: str
    licence: str  # path of the licence file, relative to ASSETS_DIR


VENDORED: tuple[Vendored, ...] = (
    Vendored(
        "sortable-tablesort", "4.1.7", "vendor/sortable/sortable-base.min.css", "vendor/sortable/LICENSE"
    ),
    Vendored(
        "sortable-tablesort", "4.1.7", "vendor/sortable/sortable.auto.min.js", "vendor/sortable/LICENSE"
    ),
    Vendored("uplot", "1.6.32", "vendor/uplot/uPlot.min.css", "vendor/uplot/LICENSE"),
    Vendored("uplot", "1.6.32", "vendor/uplot/uPlot.iife.min.js", "vendor/uplot/LICENSE"),
)


# The comparison table's columns: (key, header, tooltip, shown on narrow screens). The page's script
# draws each cell by its key.
COMPARE_COLUMNS: tuple[tuple[str, str, str, bool], ...] = (
    ("gpu", "GPU", "canonical GPU model", True),
    ("gpu_hour", "$/GPU-h", "cheapest price per GPU-hour, USD", True),
    ("provider", "Provider", "", True),
    ("pricing", "Pricing", "on-demand or spot (interruptible)", True),
    ("instance_hour", "Instance $/h", "price of that whole instance per hour, USD", False),
    ("gpus", "GPUs", "GPUs per instance", True),
    ("vram", "VRAM/GPU", "memory per GPU", True),
    ("total_vram", "VRAM total", "memory of the whole instance", False),
    ("memory", "Memory", "memory type", False),
    ("bandwidth", "GB/s", "memory bandwidth per GPU, GB/s", False),
    ("bf16", "BF16 TFLOPS", "dense BF16 TFLOPS; no = not supported", False),
    ("fp8", "FP8 TFLOPS", "dense FP8 TFLOPS; no = not supported", False),
    ("interconnect", "In node", "GPU-to-GPU interconnect inside the instance, GB/s per GPU", False),
    ("fabric", "Between nodes", "inter-node network fabric, Gb/s per node", False),
    ("billing", "Billing", "billing granularity (minimum charge)", False),
    ("storage", "Storage", "what persists", False),
    ("access", "Access", "SSH, Docker image, Jupyter", False),
    ("multinode", "Multi-node", "multi-node networking", False),
    (
        "source",
        "Price source",
        "list = published rate, market = live spot/bid market, estimated = derived",
        False,
    ),
    ("age", "Price age", "time since the price was last seen, at this page's making", True),
    ("where", "Instance · region", "the cheapest offer's instance type and region", False),
    ("offers", "Offers", "current offers in this row (all regions passing the filters)", False),
    ("link", "Page", "the provider's pricing page", True),
)


# -- queries -------------------------------------------------------------------------------------

QUERIES_DIR = ASSETS_DIR / "queries"

# In the fine-tuning data, what describes the offer (sent once, referred to by index) and what
# describes one job on it.
FIT_OFFER_COLUMNS = (
    "provider",
    "instance_type",
    "region",
    "pricing_type",
    "price_source",
    "gpu_name",
    "gpu_count",
    "price_usd_per_hour",
    "usable_vram_gb",
    "interruptions_per_hour",
)
FIT_RUN_COLUMNS = (
    "rank",
    "gpus_used",
    "nodes_used",
    "sharding",
    "total_gb",
    "estimated_hours",
    "billed_hours",
    "on_demand_cost_usd",
    "expected_spot_cost_usd",
    "usd_per_million_tokens",
    "total_usd",
    "bill_unknown_items",
    "fabric_warning",
)
MEMORY_COLUMNS = (
    "weights_gb",
    "gradients_gb",
    "optimizer_gb",
    "activations_gb",
    "logits_gb",
    "overhead_gb",
    "total_gb",
)
# the fine-tuning model's outputs, sent to SIGNIFICANT_DIGITS (prices are sent exactly)
ESTIMATED = frozenset(
    {
        *MEMORY_COLUMNS,
        "usable_vram_gb",
        "interruptions_per_hour",
        "estimated_hours",
        "billed_hours",
        "on_demand_cost_usd",
        "expected_spot_cost_usd",
        "usd_per_million_tokens",
        "total_usd",
    }
)


def query(name: str) -> str:
    """The SQL of `report/queries/<name>.sql`."""
    return (QUERIES_DIR / f"{name}.sql").read_text(encoding="utf-8")


# -- data ----------------------------------------------------------------------------------------


def _table(rel: duckdb.DuckDBPyRelation) -> dict[str, Any]:
    return {"columns": list(rel.columns), "rows": [list(row) for row in rel.fetchall()]}


def significant(value: float | None, digits: int = SIGNIFICANT_DIGITS) -> float | None:
    """`value` rounded to `digits` significant digits (None and non-finite values pass through)."""
    if value is None or not math.isfinite(value) or value == 0:
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def provider_url(source: str | None) -> str | None:
    """The provider's page to link to, from the `source` citation of its providers.csv row: the
    first URL naming prices or pricing, else the first URL."""
    urls = re.findall(r"https?://[^\s;,()]+", source or "")
    url = next((u for u in urls if "pric" in u.lower()), urls[0] if urls else None)
    # a bare origin is written as a browser resolves it (https://docs.latitude.sh -> .../), so the
    # link the page shows is the link it follows
    return url + "/" if url and re.fullmatch(r"https?://[^/]+", url) else url


class ReportUnavailable(Exception):
    """The warehouse has no marts to build the page from yet."""


def offers_data(
    con: duckdb.DuckDBPyConnection, *, include_stale: bool = False, include_unavailable: bool = False
) -> dict[str, Any]:
    """The comparison table's rows (queries/offers.sql; a stale provider's only with
    `include_stale`, offers marked unavailable only with `include_unavailable`) and the GPU specs
    they refer to."""
    offers = _table(
        con.sql(
            query("offers"),
            params={"include_stale": include_stale, "include_unavailable": include_unavailable},
        )
    )
    # the billing rule in words (a month, a cap, a set-up fee, serverless), so the page never
    # shows a month-billed offer as if it were an hourly rate
    columns = offers["columns"]
    offers["rows"] = [[*row, billing_rule(dict(zip(columns, row, strict=True)))] for row in offers["rows"]]
    offers["columns"] = [*columns, "billing_rule"]
    return {"offers": offers, "gpus": _table(con.sql(query("gpus")))}


def providers_data(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    rel = con.sql(query("providers"))
    found = {}
    for row in rel.fetchall():
        record = dict(zip(rel.columns, row, strict=True))
        record["url"] = provider_url(record.pop("source"))
        found[record["provider"]] = record
    return found


def _sent(column: str, value: Any) -> Any:
    return significant(value) if column in ESTIMATED else value


def fit_data(
    con: duckdb.DuckDBPyConnection, top: int = TOP_OFFERS, *, include_unavailable: bool = False
) -> dict[str, Any]:
    """The job grid, memory breakdowns and ranked offers of the fine-tuning marts.

    `jobs` rows are referred to by index (`job`) from `memory` and `runs`; each distinct offer is
    sent once in `offers` and referred to by index (`offer`) from `runs`.
    """
    if not relation_exists(con, "marts.finetune_costs"):
        return {"jobs": None, "memory": None, "offers": None, "runs": None, "top": top}
    jobs = _table(con.sql(query("fit_jobs")))
    job_index = {row[0]: i for i, row in enumerate(jobs["rows"])}
    ranked = con.sql(
        query("fit_offers"), params={"top": top, "include_unavailable": include_unavailable}
    ).pl()
    offers: dict[tuple[Any, ...], int] = {}
    runs = []
    for record in ranked.iter_rows(named=True):
        if record["job_id"] not in job_index:
            continue
        key = tuple(_sent(c, record[c]) for c in FIT_OFFER_COLUMNS)
        offer = offers.setdefault(key, len(offers))
        runs.append([job_index[record["job_id"]], offer, *(_sent(c, record[c]) for c in FIT_RUN_COLUMNS)])
    con.register("fit_offers_frame", ranked)
    try:
        memory = con.sql(query("fit_memory"))
        memory_columns, memory_rows = memory.columns, memory.fetchall()
    finally:
        con.unregister("fit_offers_frame")
    return {
        "jobs": jobs,
        "memory": {
            "columns": ["job", *memory_columns[1:]],
            "rows": [
                [job_index[row[0]], *(_sent(c, v) for c, v in zip(memory_columns[1:], row[1:], strict=True))]
                for row in memory_rows
                if row[0] in job_index
            ],
        },
        "offers": {"columns": list(FIT_OFFER_COLUMNS), "rows": [list(key) for key in offers]},
        "runs": {"columns": ["job", "offer", *FIT_RUN_COLUMNS], "rows": runs},
        "top": top,
        "default_job": DEFAULT_JOB,
    }


def _gpu_names(con: duckdb.DuckDBPyConnection, catalog: HardwareCatalog) -> pl.DataFrame:
    """Canonical GPU name and count for every GPU description in the price history."""
    hardware = resolve_hardware(con, catalog, current_only=False)
    # a count of 0 is how connectors say "not stated"; the seeds then know it (see marts.py)
    stated = pl.when(pl.col("gpu_count_raw") > 0).then(pl.col("gpu_count_raw"))
    return hardware.select(
        "provider",
        "instance_type",
        "gpu_name_raw",
        "gpu_memory_gb_raw",
        "gpu_count_raw",
        "gpu_name",
        pl.coalesce(pl.when(pl.col("gpu_count") > 0).then(pl.col("gpu_count")), stated).alias("gpu_count"),
    )


def downsample(points: Sequence[tuple[int, float | None]], max_points: int) -> list[list[Any]]:
    """At most `max_points` [at, price] steps: each time bucket keeps its cheapest price (a gap,
    None, only when the whole bucket is one), stamped with the bucket's first moment."""
    if len(points) <= max_points:
        return [[at, price] for at, price in points]
    start, end = points[0][0], points[-1][0]
    width = max(1, math.ceil((end - start + 1) / max_points))
    buckets: dict[int, list[Any]] = {}
    for at, price in points:
        bucket = buckets.setdefault((at - start) // width, [at, None])
        if price is not None and (bucket[1] is None or price < bucket[1]):
            bucket[1] = price
    return [buckets[key] for key in sorted(buckets)]


def history_data(
    con: duckdb.DuckDBPyConnection,
    catalog: HardwareCatalog | None = None,
    max_points: int = HISTORY_MAX_POINTS,
) -> dict[str, Any]:
    """Step series of the cheapest $/GPU-hour per GPU x provider x pricing type."""
    names = _gpu_names(con, catalog or HardwareCatalog.load())
    intervals = con.sql(query("history_intervals")).pl()
    joined = intervals.join(
        names,
        left_on=["provider", "instance_type", "gpu_name_raw", "gpu_memory_gb_raw", "gpu_count"],
        right_on=["provider", "instance_type", "gpu_name_raw", "gpu_memory_gb_raw", "gpu_count_raw"],
        how="inner",
        nulls_equal=True,
    ).filter(pl.col("gpu_name").is_not_null() & (pl.col("gpu_count_right") > 0))
    frame = joined.select(
        "gpu_name",
        "provider",
        "pricing_type",
        (pl.col("price_usd_per_hour") / pl.col("gpu_count_right")).alias("price_usd_per_gpu_hour"),
        "valid_from",
        "valid_to",
    )
    con.register("history_intervals_frame", frame)
    try:
        rows = con.sql(query("history")).fetchall()
    finally:
        con.unregister("history_intervals_frame")
    grouped: dict[tuple[str, str, str], list[tuple[int, float | None]]] = {}
    for gpu_name, provider, pricing_type, at, price in rows:
        grouped.setdefault((gpu_name, provider, pricing_type), []).append((at, price))
    series = [
        {
            "gpu_name": gpu_name,
            "provider": provider,
            "pricing_type": pricing_type,
            "points": downsample(points, max_points),
        }
        for (gpu_name, provider, pricing_type), points in grouped.items()
    ]
    return {"series": series, "max_points": max_points}


REPLAY_COMMAND = "gpucost refresh --replay tests/replay"


def _offers(n: int) -> str:
    return f"{n} offer" if n == 1 else f"{n} offers"


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


def why_empty(
    con: duckdb.DuckDBPyConnection, *, include_stale: bool = False, include_unavailable: bool = False
) -> str | None:
    """Why the comparison has no offer to show, in a sentence that says what to do; None when it
    has some (queries/offer_counts.sql counts what the page leaves out)."""
    rel = con.sql(
        query("offer_counts"),
        params={"include_stale": include_stale, "include_unavailable": include_unavailable},
    )
    counts = dict(zip(rel.columns, rel.fetchall()[0], strict=True))
    shown = counts["current_offers"] - counts["unpriced"] - counts["stale"] - counts["unavailable"]
    if shown > 0:
        return None
    if not counts["current_offers"] and not counts["good_runs"]:
        return (
            "no refresh has loaded prices into this warehouse yet: run `gpucost refresh` online, or "
            f"`{REPLAY_COMMAND}` for recorded sample prices, then `gpucost report` again."
        )
    if not counts["current_offers"]:
        return (
            "the warehouse holds no current offer: every offer its refreshes loaded has closed since; "
            "run `gpucost refresh` for today's prices."
        )
    reasons = []
    if counts["stale"]:
        reasons.append(
            f"{_offers(counts['stale'])} of stale providers ({counts['stale_providers']}) "
            f"{_are(counts['stale'])} left out (`gpucost report --include-stale` shows them)"
        )
    if counts["unavailable"]:
        one = counts["unavailable"] == 1
        reasons.append(
            f"{_offers(counts['unavailable'])} {'its provider marks' if one else 'their providers mark'} "
            f"unavailable {_are(counts['unavailable'])} left out "
            f"(`gpucost report --include-unavailable` shows {'it' if one else 'them'})"
        )
    if counts["unpriced"]:
        one = counts["unpriced"] == 1
        reasons.append(
            f"{_offers(counts['unpriced'])} {'has' if one else 'have'} no price per GPU-hour "
            "(GPU count unknown)"
        )
    return "; ".join(reasons) + "."


def report_data(
    con: duckdb.DuckDBPyConnection,
    *,
    now: datetime | None = None,
    include_stale: bool = False,
    include_unavailable: bool = False,
) -> dict[str, Any]:
    """Everything the page embeds, as JSON-ready values (offers marked unavailable now only with
    `include_unavailable`)."""
    if not relation_exists(con, "marts.gpu_offers"):
        raise ReportUnavailable("no marts to build the page from yet; run `gpucost refresh` first")
    sample = holds_sample_data(con)
    offers = con.execute("select count(*) from marts.gpu_offers").fetchall()[0][0]
    return {
        "schema": SCHEMA_VERSION,
        "generated_at": int((now or datetime.now(UTC)).timestamp()),
        "sample_data": sample,
        "sample_banner": SAMPLE_BANNER if sample else None,
        "current_offers": offers,
        # "0 offers from 0 providers" alone reads like a broken page: say why there are none
        "empty_reason": None if offers else _empty_reason(con),
        "providers_with_offers": con.execute(
            "select count(distinct provider) from marts.gpu_offers"
        ).fetchall()[0][0],
        "providers": providers_data(con),
        "include_stale": include_stale,
        "include_unavailable": include_unavailable,
        "why_empty": why_empty(con, include_stale=include_stale, include_unavailable=include_unavailable),
        **offers_data(con, include_stale=include_stale, include_unavailable=include_unavailable),
        "fit": fit_data(con, include_unavailable=include_unavailable),
        "history": history_data(con),
        "freshness": freshness(con),
    }


# -- page ----------------------------------------------------------------------------------------


def _asset(relative: str) -> str:
    text = (ASSETS_DIR / relative).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():
        # inlined text must not close its own element early
        raise ValueError(f"{relative} contains a closing script/style tag and cannot be inlined")
    return text


def _vendored(kind: str) -> list[dict[str, str]]:
    return [
        {
            "name": v.name,
            "version": v.version,
            # the licence goes in an HTML comment, which "--" would end or break
            "licence": (ASSETS_DIR / v.licence).read_text(encoding="utf-8").replace("--", "- -"),
            "text": _asset(v.path),
        }
        for v in VENDORED
        if v.path.endswith(kind)
    ]


def _json_for_script(data: dict[str, Any]) -> str:
    """JSON safe inside <script type="application/json">: '<' only ever occurs inside strings, and
    as \\u003c it can neither close the element nor open an HTML comment."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c")


def render_html(data: dict[str, Any], planner: dict[str, Any] | None = None) -> str:
    """The page for `data` (from `report_data`). With `planner` (`gpucost serve`: the job form's
    fields, the seeded models, the bill's items) it gains a "Plan a job" view that asks the
    server's /api/estimate; the static page (`gpucost report`) has none, as file:// has no API."""
    env = Environment(
        loader=FileSystemLoader(ASSETS_DIR),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = lambda ts: datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return env.get_template("index.html.j2").render(
        data=data,
        data_json=_json_for_script(data),
        compare_columns=COMPARE_COLUMNS,
        vendored_css=_vendored(".css"),
        vendored_js=_vendored(".js"),
        css=_asset("style.css"),
        js=_asset("app.js"),
        planner=planner,
        planner_json=None if planner is None else _json_for_script(planner),
        planner_js=None if planner is None else _asset("planner.js"),
    )


def _empty_reason(con: duckdb.DuckDBPyConnection) -> str:
    """Why the marts hold no current offer: no refresh ever loaded one, or every offer is gone."""
    loaded = con.execute("select exists (select 1 from core.offer_prices)").fetchall()[0][0]
    if not loaded:
        return NO_LIVE_REFRESH
    return "no current offers: every provider's offers are closed or stale (see `gpucost status`)"


def default_site_dir(settings: Settings | None = None) -> Path:
    """Where `gpucost report` writes: site/ beside the feeds of the warehouse the readers use (the
    replay feeds, under $GPUCOST_HOME/replay/, while only a replay warehouse exists)."""
    settings = settings or Settings()
    if reader_path(settings) != settings.warehouse_path:
        return settings.replay_home / "feeds" / SITE_DIR_NAME
    return settings.feeds_dir / SITE_DIR_NAME


def write_report(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    *,
    now: datetime | None = None,
    include_stale: bool = False,
    include_unavailable: bool = False,
) -> Path:
    """Write the page to `out_dir/index.html`: written aside, then renamed into place, so a reader
    never sees half a page. Returns the page's path. A stale provider's offers are left out of the
    comparison unless `include_stale`."""
    html = render_html(
        report_data(con, now=now, include_stale=include_stale, include_unavailable=include_unavailable)
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / PAGE_NAME
    partial = out_dir / f".{PAGE_NAME}.{os.getpid()}.tmp"
    try:
        partial.write_text(html, encoding="utf-8")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target
