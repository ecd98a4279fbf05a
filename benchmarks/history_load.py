"""Does a provider's load stay flat as the price history grows?

Loads the same synthetic catalog (N offers, a tenth of the prices moving each run, small moves the
anomaly guard lets through) run after run into one warehouse, and times `load_offers` at a few
history depths, side by side in one process. Usage:
`uv run python benchmarks/history_load.py [--offers 3000] [--runs 400]`.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from connectors.base import Offer
from warehouse.db import open_warehouse
from warehouse.load import load_offers


def catalog(n: int, prices: list[float]) -> list[Offer]:
    return [
        Offer(
            provider="bench",
            instance_type=f"gpu{i}.xlarge",
            region=f"region-{i % 20}",
            pricing_type="spot" if i % 2 else "on_demand",
            price_source="market" if i % 2 else "list",
            price_per_hour=prices[i],
            currency="USD",
            gpu_name_raw="H100",
            gpu_count=1.0,
        )
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=400)
    args = parser.parse_args()
    rng = random.Random(7)
    prices = [rng.uniform(0.5, 40.0) for _ in range(args.offers)]
    checkpoints = {1, 10, 100, args.runs // 2, args.runs}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        con = open_warehouse(Path(tmp) / "w.duckdb")
        start = datetime(2026, 1, 1, tzinfo=UTC)
        for run in range(1, args.runs + 1):
            for i in rng.sample(range(args.offers), args.offers // 10):
                prices[i] *= rng.uniform(0.9, 1.1)
            batch = catalog(args.offers, prices)
            began = time.perf_counter()
            load_offers(con, f"r{run}", "bench", batch, now=start + timedelta(hours=run))
            seconds = time.perf_counter() - began
            if run in checkpoints:
                history = con.execute("select count(*) from core.offer_prices").fetchall()[0][0]
                rows.append((run, history, seconds))
        con.close()
    first = rows[0][2]
    print("| run | history rows | load s | vs run 1 |")
    print("|---|---|---|---|")
    for run, history, seconds in rows:
        print(f"| {run} | {history:,} | {seconds:.3f} | {seconds / first:.2f}x |")


if __name__ == "__main__":
    main()
