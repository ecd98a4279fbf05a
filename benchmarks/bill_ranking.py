"""How much the whole bill reorders offers against GPU-hours × price, for three common jobs.

    uv run python benchmarks/bill_ranking.py                    # replay warehouse, the facts seed
    uv run python benchmarks/bill_ranking.py --facts tests/fixtures/bill/provider_storage.csv

Builds the warehouse `gpucost refresh --replay tests/replay` builds (in a temporary home, with the
in-process runner), optionally replaces `core.provider_storage` with `--facts` (a CSV in the seed's
schema), then prices three jobs on every current on-demand offer the way `gpucost estimate` does
(`warehouse.finetune_marts.cost_frame`) and compares two rankings of the priced offers: by one
run's GPU time (`cost_usd`, what the ranking was before the bill) and by the whole bill
(`total_usd`). Per job it prints the Spearman rank correlation over all priced offers, how many of
the top 10 by bill were not in the top 10 by GPU time, the biggest mover among the top 10s, how many
priced offers have a provider with unpublished facts, and the most the known non-GPU items add to
any offer's GPU time (as a share of it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from finetune import FinetuneJob, Job
from finetune.job import Experiment
from warehouse.db import connect
from warehouse.finetune_marts import cost_frame, read_offers
from warehouse.seed_models import load_models

REPO = Path(__file__).resolve().parents[1]
TOP = 10


@dataclass(frozen=True)
class Case:
    label: str
    fjob: FinetuneJob
    max_nodes: int


CASES = (
    Case(
        "8B LoRA, 100M tokens, 50 GB data, hourly ckpt, 5 runs, 30 min idle, merged",
        FinetuneJob(
            "8b-lora",
            "meta-llama/Llama-3.1-8B",
            Job(method="lora"),
            100_000_000,
            1.0,
            Experiment(
                dataset_gb=50.0, checkpoint_every_hours=1.0, download="merged", runs=5, idle_hours=0.5
            ),
        ),
        1,
    ),
    Case(
        "8B QLoRA, 10M tokens, defaults (1 run, adapter)",
        FinetuneJob(
            "8b-qlora",
            "meta-llama/Llama-3.1-8B",
            Job(method="qlora", optimizer="paged-adamw8bit"),
            10_000_000,
            1.0,
        ),
        1,
    ),
    Case(
        "70B full, 100M tokens, 3 runs, 1 h idle, merged, up to 4 nodes",
        FinetuneJob(
            "70b-full",
            "meta-llama/Llama-3.1-70B",
            Job(method="full"),
            100_000_000,
            1.0,
            Experiment(runs=3, idle_hours=1.0),
        ),
        4,
    ),
)


def _replay_warehouse(home: Path) -> Path:
    from flows.orchestration import LocalRunner, RefreshPlan, run_refresh

    plan = RefreshPlan(replay=str(REPO / "tests" / "replay"), home=str(home), feeds_dir=str(home / "feeds"))
    run_refresh(plan, LocalRunner())
    return home / "warehouse.duckdb"


def compare(rows: pl.DataFrame) -> dict[str, object]:
    """Rank correlation and top-10 changes between ranking by cost_usd and by total_usd."""
    key = ["provider", "instance_type", "region", "zone"]
    priced = rows.filter(rows["priced"]).with_columns(
        pl.col("cost_usd").rank("ordinal").alias("gpu_rank"),
        pl.col("total_usd").rank("ordinal").alias("bill_rank"),
    )
    rho = priced.select(pl.corr("gpu_rank", "bill_rank", method="spearman")).item()
    top_gpu = priced.filter(pl.col("gpu_rank") <= TOP)
    top_bill = priced.filter(pl.col("bill_rank") <= TOP)
    entered = top_bill.join(top_gpu, on=key, how="anti", nulls_equal=True).height
    union = pl.concat([top_gpu, top_bill]).unique(key, keep="first")
    mover = union.with_columns((pl.col("gpu_rank") - pl.col("bill_rank")).abs().alias("moved")).sort(
        "moved", descending=True
    )
    first = mover.row(0, named=True)
    moved = (
        f"{first['provider']} {first['instance_type']} ({first['region']}): "
        f"{first['gpu_rank']} → {first['bill_rank']}"
        if first["moved"]
        else "none (the top 10s rank alike)"
    )
    return {
        "offers": priced.height,
        "rho": rho,
        "entered": entered,
        "mover": moved,
        "unknown": priced.filter(pl.col("bill_unknown_items").is_not_null()).height,
        # what the bill adds to the GPU time, as a share of it: the most any priced offer pays
        "extra_max": priced.select(
            (
                (pl.col("total_usd") - pl.col("compute_usd") - pl.col("spot_rework_usd"))
                / (pl.col("compute_usd") + pl.col("spot_rework_usd"))
            ).max()
        ).item(),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=Path, help="provider_storage.csv to use instead of the seed")
    args = parser.parse_args(argv)
    models = load_models()
    with tempfile.TemporaryDirectory() as tmp:
        con = connect(_replay_warehouse(Path(tmp)))
        if args.facts is not None:
            con.execute(
                "create or replace table core.provider_storage as select * from "
                "read_csv(?, header = true, auto_detect = true, sample_size = -1)",
                [str(args.facts)],
            )
        has_facts = bool(
            con.execute(
                "select count(*) from information_schema.tables "
                "where table_schema = 'core' and table_name = 'provider_storage'"
            ).fetchall()[0][0]
        )
        source = args.facts or ("warehouse/seeds/provider_storage.csv" if has_facts else "none (all unknown)")
        print(f"facts: {source}")
        offers = read_offers(con)
        offers = offers.filter(~offers["is_spot"])
        print(
            f"{'job':<78} {'priced':>6} {'rho':>6} {'new in top 10':>13} {'unknown':>8} {'max extra':>9}"
            "  biggest mover"
        )
        for case in CASES:
            rows = cost_frame(con, [case.fjob], models, offers, max_nodes=case.max_nodes, max_gpus=None)
            r = compare(rows)
            print(
                f"{case.label:<78} {r['offers']:>6} {r['rho']:>6.4f} {r['entered']:>13} "
                f"{r['unknown']:>8} {r['extra_max']:>9.1%}  {r['mover']}"
            )
        con.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
