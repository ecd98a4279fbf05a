"""The fine-tuning cost mart at scale: synthetic current offers × the seeded job grid.

For each size (default 1k / 10k / 50k current offers) the script builds a synthetic warehouse, then
runs the marts step of a refresh (`build_marts` with the fine-tuning marts) once per contender on
its own copy of that warehouse, each in its own child process so that its peak RSS (`ru_maxrss`) is
its own:

    before   warehouse/finetune.py (the old name) as of BEFORE_REV, run against finetune/:
             marts.finetune_costs materialized as a table, pricing inputs built row by row
    after    the working tree's warehouse/finetune_marts.py

Columns: `mart s, first` is the whole marts step of a refresh (staging, marts.gpu_offers, the
fine-tuning marts, column comments) in one transaction on a warehouse without fine-tuning marts;
`mart s, next` the same step again after every price moved (the next hourly refresh: "after"
keeps its plans, "before" rebuilds everything); peak RSS covers both; `rows` is
marts.finetune_costs' row count (the same for both: a view answers the same rows); `MB on disk`
the warehouse file after the step;
`estimate s` what `gpucost estimate` spends once it has a warehouse connection (read the offers,
price one new job on every one of them, spot included); `one job s` a page's query: the 20 cheapest
priced offers of one seeded job from marts.finetune_costs. Ratios are before ÷ after in the same
run; the machine is shared, so read ratios, not seconds.

Synthetic offers: every concrete instance type of warehouse/seeds/instance_types.csv and, as a
marketplace, every GPU of gpus.csv at 1, 2, 4 and 8 GPUs, repeated over synthetic regions until the
size is reached; ~40 % of them also spot (AWS spot offers carry a Spot Advisor band), prices drawn
from a per-GPU-hour rate. The distinct hardware among them (what the time model runs on) is in
the `hardware` column: it is bounded by the catalog, so it stops growing long before the offers do.

Result on the shared 2-core VM, 2026-12-01 (`--sizes 10000,50000`, load average ~2.5; one run):

| offers | hardware | contender | rows | first s | next s | peak RSS MB | disk MB | estimate s | one job s |
|---|---|---|---|---|---|---|---|---|---|
| 10,000 | 372 | before | 4,260,000 | 7.57 | 7.59 | 2,190 | 461 | 0.081 | 0.005 |
| 10,000 | 372 | after | 4,260,000 | 2.69 | 0.43 | 420 | 11 | 0.054 | 0.007 |
| 50,000 | 372 | before | 21,300,000 | 19.61 | 19.49 | 3,641 | 2,222 | 0.344 | 0.013 |
| 50,000 | 372 | after | 21,300,000 | 3.12 | 0.74 | 465 | 19 | 0.127 | 0.010 |

The first build of "after" is nearly all `finetune.plan_job` over 426 jobs × 372 hardware (it
grows with distinct hardware, not with offers); the next refresh plans nothing and writes offers
and requirements only. Under heavy load from other jobs the same machine gave 2-5× these seconds
with the same ratios.

2026-12-07, the placement timing every sharding that fits and keeping the fastest
(`finetune.placement`), `--sizes 10000 --before none` on the commit before and on this one, back to
back: first build 8.39 → 14.73 s (1.76×: up to three `estimate_time` per plan where one was),
next refresh 0.75 → 0.71 s (plans are kept), estimate 0.109 → 0.123 s, one job 0.019 → 0.017 s,
peak RSS 466 → 474 MB.

2026-12-08, the time model's compute terms kept per (job, GPU) and `memory_per_gpu` per (model,
job, GPUs) (`functools.lru_cache`: a job's terms on one GPU model do not depend on how many GPUs
there are or how they are linked), `--sizes 10000 --before none` on the commit before and on this
one, back to back (409 distinct hardware): first build 17.53 → 9.42 s (1.86×), next refresh
1.16 → 1.03 s, estimate 0.210 → 0.132 s, peak RSS 479 → 491 MB; `plans_frame` over the replay
warehouse's 205 machines × 426 jobs 13.54 → 5.86 s, its 87,330 plans bit for bit the same.

Usage: `uv run python benchmarks/scale.py [--sizes 1000,10000,50000] [--before REV|none]
[--workdir DIR]`. Warehouses go under --workdir (default: a temporary folder, removed at the end).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The last commit whose marts.finetune_costs is a table built from per-row Python inputs.
BEFORE_REV = "df12496"
SIZES = (1_000, 10_000, 50_000)
MARKETPLACE_COUNTS = (1, 2, 4, 8)
SPOT_SHARE = 0.4
# Spot Advisor's published interruption bands (fraction interrupted per month).
ADVISOR_BANDS = ((0.0, 0.05), (0.05, 0.1), (0.1, 0.15), (0.15, 0.2), (0.2, 1.0))
ESTIMATE_MODEL = "meta-llama/Llama-3.1-8B"
PAGE_JOB = "llama-3.1-8b__lora__s2048"


# --- synthetic warehouse ----------------------------------------------------------------------


def _templates() -> list[dict[str, Any]]:
    """(provider, instance_type, raw GPU name, count, VRAM) for every concrete offer shape that
    the hardware seeds resolve to a GPU with VRAM (the others never reach the cost mart)."""
    from warehouse.hardware import HardwareCatalog

    catalog = HardwareCatalog.load()
    seeds = REPO / "warehouse" / "seeds"
    with (seeds / "gpus.csv").open(newline="") as f:
        gpus = {row["gpu_name"]: row for row in csv.DictReader(f)}
    out = []
    with (seeds / "instance_types.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            if any(c in row["instance_type"] for c in "*?[") or not row["gpu_count"]:
                continue
            out.append(
                {
                    "provider": row["provider"],
                    "instance_type": row["instance_type"],
                    "gpu_name_raw": row["gpu_name"],
                    "gpu_count": float(row["gpu_count"]),
                    "gpu_memory_gb_raw": None,
                }
            )
    for name, gpu in gpus.items():
        for count in MARKETPLACE_COUNTS:
            out.append(
                {
                    "provider": "vast",
                    "instance_type": f"{count}x {name}",
                    "gpu_name_raw": name,
                    "gpu_count": float(count),
                    "gpu_memory_gb_raw": float(gpu["vram_gb"]) if gpu["vram_gb"] else None,
                }
            )
    keep = []
    for t in out:
        match = catalog.resolve(
            t["provider"], t["instance_type"], t["gpu_name_raw"], t["gpu_memory_gb_raw"], t["gpu_count"]
        )
        if match and match.vram_gb and (match.gpu_count or t["gpu_count"]):
            keep.append(t)
    return keep


def synthetic_offers(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` current offers as core.offer_prices rows (deterministic for a seed)."""
    rng = random.Random(seed)
    templates = _templates()
    now = datetime(2026, 12, 1, tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    copy = 0
    while len(rows) < n:
        for t in templates:
            if len(rows) >= n:
                break
            per_gpu = rng.uniform(0.2, 6.0)
            kinds = ["on_demand"] + (["spot"] if rng.random() < SPOT_SHARE else [])
            for pricing_type in kinds:
                if len(rows) >= n:
                    break
                spot = pricing_type == "spot"
                price = round(per_gpu * max(t["gpu_count"], 0.125) * (0.4 if spot else 1.0), 4)
                data: dict[str, Any] = {}
                if spot and t["provider"] == "aws":
                    low, high = rng.choice(ADVISOR_BANDS)
                    data = {"interruption_rate_min": low, "interruption_rate_max": high}
                key = f"{t['provider']}|{t['instance_type']}|{copy}|{pricing_type}"
                rows.append(
                    {
                        **t,
                        "region": f"synth-{copy}",
                        "zone": None,
                        "pricing_type": pricing_type,
                        "price_source": "market" if spot else "list",
                        "price_per_hour": price,
                        "currency": "USD",
                        "price_usd_per_hour": price,
                        "vcpus": None,
                        "ram_gb": None,
                        "billing_unit": None,
                        "available": True,
                        "provider_data": json.dumps(data),
                        "attributes_hash": hashlib.sha256(key.encode()).hexdigest(),
                        "valid_from": now,
                        "valid_to": None,
                        "first_seen_at": now,
                        "last_seen_at": now,
                        "opened_by_run_id": "synthetic",
                        "closed_by_run_id": None,
                        "scope": None,
                    }
                )
        copy += 1
    return rows


def build_warehouse(path: Path, n: int) -> None:
    import polars as pl

    from warehouse.db import connect, load_seeds, migrate

    con = connect(path)
    migrate(con)
    load_seeds(con)
    frame = pl.DataFrame(synthetic_offers(n), infer_schema_length=None)
    con.register("synthetic_offers", frame)
    con.execute("insert into core.offer_prices by name select * from synthetic_offers")
    con.close()


# --- contenders -------------------------------------------------------------------------------


def _module(variant: str, rev: str) -> ModuleType:
    if variant == "after":
        from warehouse import finetune_marts as finetune

        return finetune
    source = subprocess.run(
        ["git", "show", f"{rev}:warehouse/finetune.py"], cwd=REPO, capture_output=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="ft-before-")) / "finetune_before.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("finetune_before", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(path: Path, variant: str, rev: str) -> dict[str, Any]:
    """The marts step, `estimate` and a one-job query on the warehouse at `path` (child process)."""
    from finetune import FinetuneJob, Job
    from warehouse.db import connect
    from warehouse.marts import build_marts
    from warehouse.seed_models import load_finetune_jobs, load_models

    module = _module(variant, rev)
    models, jobs = load_models(), load_finetune_jobs()
    con = connect(path)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    spent: dict[str, float] = {}

    def finetune(c: Any) -> dict[str, int]:
        started = time.perf_counter()
        counts = module.build_finetune_marts(c, jobs, models)
        spent["ft"] = time.perf_counter() - started
        return counts

    started = time.perf_counter()
    counts = build_marts(con, finetune=finetune)
    mart_s = time.perf_counter() - started
    # the next hourly refresh: the same offers at new prices
    con.execute(
        "update core.offer_prices set price_per_hour = price_per_hour * 1.01, "
        "price_usd_per_hour = price_usd_per_hour * 1.01"
    )
    started = time.perf_counter()
    build_marts(con, finetune=finetune)
    next_s = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    hardware = con.execute(
        "select count(*) from (select distinct gpu_name, gpu_count, vram_gb, intra_node_interconnect, "
        "intra_node_gbps, inter_node_gbps from marts.gpu_offers where gpu_count > 0 and vram_gb > 0)"
    ).fetchall()[0][0]
    con.close()
    size_mb = path.stat().st_size / 1e6

    con = connect(path, read_only=True)
    spec = models[ESTIMATE_MODEL]
    fjob = FinetuneJob("adhoc", spec.model_id, Job(method="lora", seq_len=4096), 50_000_000, 1)
    started = time.perf_counter()
    offers = module.read_offers(con)
    rows = module.cost_frame(con, [fjob], {spec.model_id: spec}, offers, max_nodes=8, max_gpus=None)
    estimate_s = time.perf_counter() - started
    started = time.perf_counter()
    page = con.execute(
        "select provider, instance_type, region, cost_usd from marts.finetune_costs "
        "where job_id = ? and fits and priced order by cost_usd limit 20",
        [PAGE_JOB],
    ).fetchall()
    page_s = time.perf_counter() - started
    con.close()
    return {
        "offers": counts["marts.gpu_offers"],
        "hardware": hardware,
        "rows": counts["marts.finetune_costs"],
        "mart_s": mart_s,
        "next_s": next_s,
        "ft_s": spent["ft"],
        "rss_before_mb": rss_before,
        "peak_rss_mb": peak,
        "size_mb": size_mb,
        "estimate_s": estimate_s,
        "estimate_rows": rows.height,
        "page_s": page_s,
        "page_rows": len(page),
    }


def _child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args], cwd=REPO, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--before", default=BEFORE_REV, help="git revision of 'before', or none")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        action, path, *rest = args.child
        if action == "build":
            build_warehouse(Path(path), int(rest[0]))
            print(json.dumps({}))
        else:
            print(json.dumps(measure(Path(path), rest[0], rest[1])))
        return
    variants = ["after"] if args.before == "none" else ["before", "after"]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gpucost-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: list[tuple[int, str, dict[str, Any]]] = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            base = workdir / f"offers-{size}.duckdb"
            if not base.exists():
                _child("build", str(base), str(size))
            for variant in variants:
                copy = workdir / f"offers-{size}-{variant}.duckdb"
                shutil.copyfile(base, copy)
                results.append((size, variant, _child("measure", str(copy), variant, args.before)))
                copy.unlink()
                print(f"  {size:,} {variant}: {results[-1][2]}", file=sys.stderr)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    _print_table(results, variants)


def _print_table(results: list[tuple[int, str, dict[str, Any]]], variants: list[str]) -> None:
    header = (
        "| offers | hardware | contender | rows | mart s, first | mart s, next | peak RSS MB | MB on disk "
        "| estimate s | one job s | first ÷ after | next ÷ after | RSS ÷ after | estimate ÷ after |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    after = {size: r for size, v, r in results if v == "after"}
    for size, variant, r in results:
        a = after.get(size)
        ratios = tuple(
            r[k] / a[k] if a else float("nan") for k in ("mart_s", "next_s", "peak_rss_mb", "estimate_s")
        )
        print(
            f"| {r['offers']:,} | {r['hardware']} | {variant} | {r['rows']:,} | {r['mart_s']:.2f} "
            f"| {r['next_s']:.2f} | {r['peak_rss_mb']:,.0f} | {r['size_mb']:,.0f} | {r['estimate_s']:.3f} "
            f"| {r['page_s']:.3f} | " + " | ".join(f"{x:.1f}" for x in ratios) + " |"
        )


if __name__ == "__main__":
    main()
