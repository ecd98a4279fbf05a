"""Feed sizes and write times, CSV next to Parquet, from a warehouse's current marts.

    uv run python benchmarks/feeds.py [WAREHOUSE]     # default: the one `gpucost sql` reads

Writes into a temporary folder and prints one row per feed: rows, CSV and Parquet bytes, their
ratio, and the seconds each took. `finetune_costs.v2` is published as Parquet only; its CSV is
written here, and only here, to show why. It also times one whole `write_feeds` (every feed and the
manifest) and the sha256 pass the manifest needs.
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from warehouse.db import reader_path
from warehouse.export import FEEDS, _copy_options, parquet_metadata, sha256_of, write_feeds


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else reader_path()
    if not path.exists():
        print(f"no warehouse at {path}; run `uv run gpucost refresh --replay tests/replay` first")
        return 0
    con = duckdb.connect(str(path), read_only=True)
    now = datetime.now(UTC)
    con.execute(f"set variable feeds_generated_at = timestamptz '{now.isoformat()}'")
    print(f"warehouse: {path}")
    header = f"{'feed':<20} {'rows':>9} {'CSV bytes':>12} {'Parquet bytes':>14} {'CSV/Parquet':>12} "
    print(header + f"{'CSV s':>7} {'Parquet s':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for feed in FEEDS:
            query = feed.query()
            rows = con.execute(f"select count(*) from ({query})").fetchall()[0][0]
            metadata = parquet_metadata(feed, run_id="bench", generated_at=now, data_mode="live")
            sizes, seconds = {}, {}
            for fmt in ("csv", "parquet"):
                target = out / feed.filename(fmt)
                started = time.perf_counter()
                con.execute(f"copy ({query}) to '{target}' ({_copy_options(feed, fmt, metadata)})")
                seconds[fmt] = time.perf_counter() - started
                sizes[fmt] = target.stat().st_size
            ratio = sizes["csv"] / sizes["parquet"]
            print(
                f"{feed.name + '.v' + str(feed.version):<20} {rows:>9} {sizes['csv']:>12,} "
                f"{sizes['parquet']:>14,} {ratio:>11.1f}× {seconds['csv']:>7.2f} {seconds['parquet']:>10.2f}"
            )
        whole = out / "publication"
        started = time.perf_counter()
        written = write_feeds(con, whole)
        elapsed = time.perf_counter() - started
        started = time.perf_counter()
        for file, _ in written:
            sha256_of(file)
        hashing = time.perf_counter() - started
        total = sum(file.stat().st_size for file, _ in written)
        print(
            f"write_feeds: {len(written)} files, {total:,} bytes, {elapsed:.2f} s "
            f"(of which sha256 for the manifest ≈ {hashing:.2f} s)"
        )
    con.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
