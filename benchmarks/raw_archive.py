"""Benchmark: the raw archive over a simulated year of hourly runs at 3,000 offers.

    uv run python benchmarks/raw_archive.py [--days 7] [--offers 3000] [--retention-days 30]
        [--sim-retention-days 2] [--aws-gb 0.3] [--workdir /tmp/rawbench]

What it does, in one run (everything under --workdir, never the repository):

1. Simulates `--days` of hourly refreshes of 25 providers holding `--offers` current offers in all,
   through the real code: `land_raw` into a real warehouse and archive, one `ops.provider_runs`
   row per provider and hour. Bodies are JSON offer lists of ~800 bytes per offer (2.4 MB a run,
   the per-run size measured on 3,000 offers in issue 14). 7 providers are markets whose prices
   move every hour (30 % of their offers); the other 18 publish list prices that change about
   once in 4 days, but their bodies still differ every hour (availability counts, timestamps), so
   content addressing alone saves almost nothing. A run "changed prices" when the simulation
   changed a price: its provider run records that many rows inserted and closed, exactly what
   `gc` reads.
2. Runs `collect_garbage` at the end of the window with `--sim-retention-days` (shorter than the
   window, so the policy has something to remove) and measures the archive before and after.
3. Extrapolates to 365 days with `--retention-days` (the default setting): bodies of runs that
   changed prices are kept for ever (their measured bytes per hour x 8,760), the rest for the
   retention window; plus AWS offer files: `--aws-regions` regions x `--aws-versions` new versions
   a year x `--aws-region-mb` each ("hundreds of MB per region", issue 14), stored as what the
   prefilter keeps, at the ratio measured on a generated offer file (step 4).
4. Generates an AWS CSV offer file of about `--aws-gb` (benchmarks/aws_offer_file.py's generator,
   reused from --workdir when present), lands it as a retained AWS run and checks that parsing
   what the archive gives back yields exactly what parsing the whole file yielded; then lands the
   replay cassette (tests/replay, every provider) as a retained run and checks the same per
   provider, after gc.

Prints a table with the old layout (uncompressed, content-addressed, everything kept) and the new
one side by side.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from connectors import CONNECTORS, aws  # noqa: E402
from connectors.base import RawResponse  # noqa: E402
from connectors.http import make_client  # noqa: E402
from warehouse.archive import archive_bytes, archived_responses, collect_garbage, land_raw  # noqa: E402
from warehouse.db import connect, migrate  # noqa: E402
from warehouse.pipeline import credentials_for  # noqa: E402

MB = 1024 * 1024  # MB and GB here are MiB and GiB
GB = 1024 * MB
START = datetime(2026, 1, 1, tzinfo=UTC)
MARKETS = 7  # providers whose prices move every hour
PROVIDERS = 25
GPUS = ["H100-SXM", "H200", "A100-80GB", "L40S", "RTX4090", "A10G", "L4", "B200", "RTX3090", "MI300X"]
COUNTRIES = ["US", "CA", "DE", "NL", "FR", "GB", "SE", "JP", "SG", "AU", "BR", "IN"]


# --- the simulated providers ------------------------------------------------------------------------


class SimProvider:
    """One provider's catalog, evolving hour by hour."""

    def __init__(self, name: str, offers: int, market: bool, rng: random.Random) -> None:
        self.name, self.market, self.rng = name, market, rng
        self.offers = [
            {
                "id": rng.randrange(10**7, 10**8),
                "machine_id": rng.randrange(10**4, 10**6),
                "gpu_name": rng.choice(GPUS),
                "num_gpus": rng.choice([1, 1, 2, 4, 8]),
                "gpu_ram_mb": rng.choice([24576, 49152, 81920, 143360]),
                "cpu_name": rng.choice(["AMD EPYC 7763 64-Core Processor", "Intel Xeon Platinum 8480+"]),
                "cpu_cores": rng.choice([16, 32, 64, 128]),
                "cpu_ram_mb": rng.choice([128000, 256000, 515000, 1031000]),
                "disk_space_gb": round(rng.uniform(100, 4000), 1),
                "disk_bw_mbps": round(rng.uniform(500, 9000), 1),
                "inet_up_mbps": round(rng.uniform(100, 10000), 1),
                "inet_down_mbps": round(rng.uniform(100, 10000), 1),
                "country": rng.choice(COUNTRIES),
                "datacenter": f"dc-{rng.randrange(1, 80)}",
                "reliability": round(rng.uniform(0.9, 1.0), 4),
                "cuda_max_good": rng.choice([12.2, 12.4, 12.6, 12.8]),
                "driver_version": rng.choice(["550.127.05", "560.35.03", "570.86.15"]),
                "verification": rng.choice(["verified", "unverified"]),
                "dph_total": round(rng.uniform(0.1, 40.0), 4),
                "min_bid": round(rng.uniform(0.05, 20.0), 4),
                "storage_cost_per_gb_month": 0.1,
                "rentable": True,
                "available": rng.randrange(0, 9),
                "description": "on-demand and interruptible GPU instance; billed per second; "
                "NVMe local disk; public IPv4; SSH, Jupyter and Docker images",
                "image": rng.choice(
                    ["pytorch/pytorch:2.5.1-cuda12.4-cudnn9-devel", "nvidia/cuda:12.6.3-base"]
                ),
                "host_tags": [
                    "secure",
                    "datacenter",
                    rng.choice(["tier-3", "tier-4"]),
                    f"rack-{rng.randrange(99)}",
                ],
                "bw_nvlink_gbps": rng.choice([0, 600, 900]),
                "pcie_bw_gbps": round(rng.uniform(10, 64), 2),
                "total_flops": round(rng.uniform(30, 2000), 2),
            }
            for _ in range(offers)
        ]

    def hour(self, at: datetime) -> tuple[bytes, int]:
        """The body served this hour and how many offers changed price since the last hour."""
        changed = 0
        if self.market:
            for offer in self.offers:
                if self.rng.random() < 0.3:
                    offer["dph_total"] = round(offer["dph_total"] * self.rng.uniform(0.95, 1.05), 4)
                    offer["min_bid"] = round(offer["min_bid"] * self.rng.uniform(0.9, 1.1), 4)
                    changed += 1
        elif self.rng.random() < 1 / 96:  # a list-price update about every 4 days
            for offer in self.rng.sample(self.offers, max(1, len(self.offers) // 10)):
                offer["dph_total"] = round(offer["dph_total"] * self.rng.uniform(0.8, 1.2), 4)
                changed += 1
        for offer in self.offers:  # volatile fields: a body differs every hour, prices or not
            offer["available"] = self.rng.randrange(0, 9)
        body = {"generated_at": at.isoformat(), "request_id": self.rng.getrandbits(64), "offers": self.offers}
        return json.dumps(body).encode(), changed


def simulate(con, root: Path, days: int, offers: int, rng: random.Random) -> dict:
    weights = [2.0] * MARKETS + [1.0] * (PROVIDERS - MARKETS)
    unit = offers / sum(weights)
    providers = [SimProvider(f"sim{i:02d}", round(w * unit), i < MARKETS, rng) for i, w in enumerate(weights)]
    seen: dict[str, int] = {}  # sha -> bytes: the old layout stores each distinct body once
    raw_bytes = 0
    land_seconds = 0.0
    changed_runs = 0
    hours = days * 24
    for h in range(hours):
        at = START + timedelta(hours=h)
        run_id = f"sim-{h:05d}"
        con.execute(
            "insert into ops.runs (run_id, started_at, finished_at, status, mode, providers) "
            "values (?, ?, ?, 'ok', 'live', ?)",
            [run_id, at, at, [p.name for p in providers]],
        )
        for provider in providers:
            body, changed = provider.hour(at)
            raw_bytes += len(body)
            seen.setdefault(hashlib.sha256(body).hexdigest(), len(body))
            response = RawResponse(
                url=f"https://{provider.name}.test/api/offers",
                method="GET",
                status=200,
                fetched_at=at,
                body=body,
            )
            started = time.perf_counter()
            land_raw(con, root, run_id, provider.name, [response])
            land_seconds += time.perf_counter() - started
            changed_runs += bool(changed)
            con.execute(
                "insert into ops.provider_runs (run_id, provider, status, started_at, finished_at, "
                "responses, bytes, rows_inserted, rows_closed) values (?, ?, 'ok', ?, ?, 1, ?, ?, ?)",
                [run_id, provider.name, at, at, len(body), changed, changed],
            )
    return {
        "hours": hours,
        "raw_bytes": raw_bytes,
        "old_bytes": sum(seen.values()),
        "old_files": len(seen),
        "land_seconds": land_seconds,
        "changed_runs": changed_runs,
        "provider_runs": hours * len(providers),
        "end": START + timedelta(hours=hours),
    }


# --- AWS offer file and replay checks ---------------------------------------------------------------


def aws_offer_file(con, root: Path, workdir: Path, size_gb: float, at: datetime) -> dict:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from aws_offer_file import generate  # the connector benchmark's generator

    _, csv_path = generate(workdir / "aws", int(size_gb * 1e9))
    url = f"{aws.PRICING_HOST}/offers/v1.0/aws/AmazonEC2/20261129000000/us-east-1/index.csv"
    whole = RawResponse(url=url, method="GET", status=200, fetched_at=at, body_path=csv_path)
    started = time.perf_counter()
    expected = repr(list(aws.parse([whole])))
    parse_seconds = time.perf_counter() - started
    spool = workdir / "spool-offer.csv"  # land_raw removes a spooled body: land a link to it
    spool.unlink(missing_ok=True)
    try:
        os.link(csv_path, spool)
    except OSError:
        shutil.copyfile(csv_path, spool)
    spooled = RawResponse(url=url, method="GET", status=200, fetched_at=at, body_path=spool)
    started = time.perf_counter()
    land_raw(con, root, "aws-offer-file", "aws", [spooled])
    land_seconds = time.perf_counter() - started
    _record_changed_run(con, "aws-offer-file", "aws", at)
    (stored_bytes,) = con.execute(
        "select stored_bytes from raw.responses where run_id = 'aws-offer-file'"
    ).fetchall()[0]
    return {
        "full_bytes": csv_path.stat().st_size,
        "stored_bytes": stored_bytes,
        "land_seconds": land_seconds,
        "parse_seconds": parse_seconds,
        "expected": expected,
        "offers": expected.count("Offer("),
    }


def _record_changed_run(con, run_id: str, provider: str, at: datetime) -> None:
    con.execute(
        "insert into ops.runs (run_id, started_at, status, mode, providers) values (?, ?, 'ok', 'live', [?]) "
        "on conflict do nothing",
        [run_id, at, provider],
    )
    con.execute(
        "insert into ops.provider_runs (run_id, provider, status, started_at, rows_inserted) "
        "values (?, ?, 'ok', ?, 1)",
        [run_id, provider, at],
    )


def land_cassette(con, root: Path, at: datetime) -> dict[str, str]:
    """Every provider's cassette run landed as a retained run; provider -> repr of its parse."""
    expected = {}
    for name, connector in CONNECTORS.items():
        creds, secrets = credentials_for(connector, {}, replay=True)
        with make_client(replay=REPO / "tests" / "replay", secrets=secrets) as client:
            responses = list(connector.fetch(client, creds, None))
        expected[name] = repr(list(connector.parse(responses)))
        land_raw(con, root, "cassette", name, responses)
        _record_changed_run(con, "cassette", name, at)
    return expected


# --- main -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=7, help="days of hourly runs simulated")
    parser.add_argument("--offers", type=int, default=3000, help="current offers over all providers")
    parser.add_argument(
        "--retention-days", type=int, default=30, help="GPUCOST_RAW_RETENTION_DAYS for the year"
    )
    parser.add_argument(
        "--sim-retention-days", type=int, default=2, help="retention used by gc in the simulation"
    )
    parser.add_argument(
        "--aws-gb", type=float, default=0.3, help="size of the generated AWS offer file (JSON)"
    )
    parser.add_argument("--aws-regions", type=int, default=33, help="commercial regions with an offer file")
    parser.add_argument(
        "--aws-versions", type=int, default=52, help="new offer-file versions per region a year"
    )
    parser.add_argument(
        "--aws-region-mb", type=float, default=300, help="average CSV offer file per region, MB"
    )
    parser.add_argument(
        "--workdir", type=Path, default=Path(f"/tmp/rawbench-{os.environ.get('USER', 'bench')}")
    )
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()

    root = args.workdir / "raw"
    shutil.rmtree(root, ignore_errors=True)
    (args.workdir / "warehouse.duckdb").unlink(missing_ok=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    con = connect(args.workdir / "warehouse.duckdb")
    migrate(con)

    t0 = time.perf_counter()
    sim = simulate(con, root, args.days, args.offers, random.Random(args.seed))
    sim_seconds = time.perf_counter() - t0
    new_files, new_bytes = archive_bytes(root)
    report = collect_garbage(con, root, retention_days=args.sim_retention_days, now=sim["end"])
    after_files, after_bytes = archive_bytes(root)
    # Retained runs to replay, landed at the start of the window: they changed prices, so the
    # second gc must keep them whatever their age.
    offer_file = aws_offer_file(con, root, args.workdir, args.aws_gb, START)
    cassette = land_cassette(con, root, START)
    second = collect_garbage(con, root, retention_days=args.sim_retention_days, now=sim["end"])

    # Replay of retained runs, after gc: the AWS offer file and every provider of the cassette.
    (replayed,) = archived_responses(con, root, "aws-offer-file", "aws", spool_dir=args.workdir / "spool")
    aws_same = repr(list(aws.parse([replayed]))) == offer_file["expected"]
    same = {name: repr(list(CONNECTORS[name].parse(archived_responses(con, root, "cassette", name))))
            == text for name, text in cassette.items()}  # fmt: skip
    con.close()

    hours = sim["hours"]
    per_run_old = sim["old_bytes"] / hours
    per_run_new = new_bytes / hours
    # After gc: what the simulated bodies keep (the AWS file and the cassette are not part of it).
    changed_bytes_per_hour = report.kept_changed_bytes / hours
    rest_bytes_per_hour = (new_bytes - report.kept_changed_bytes) / hours
    keep_hours = min(args.retention_days, 365) * 24
    aws_versions = args.aws_regions * args.aws_versions
    aws_full_year = aws_versions * args.aws_region_mb * MB
    aws_ratio = offer_file["stored_bytes"] / offer_file["full_bytes"]
    aws_new_year = aws_full_year * aws_ratio
    year_old = per_run_old * 8760 + aws_full_year
    year_new = changed_bytes_per_hour * 8760 + rest_bytes_per_hour * keep_hours + aws_new_year
    files_per_hour_changed = report.kept_changed_files / hours
    year_files_new = (
        files_per_hour_changed * 8760 + (new_files - report.kept_changed_files) / hours * keep_hours
    )
    year_files_old = sim["old_files"] / hours * 8760 + aws_versions

    print(
        f"\nsimulated {args.days} days x 24 hourly runs x {PROVIDERS} providers, {args.offers:,} offers "
        f"({sim['changed_runs']:,} of {sim['provider_runs']:,} provider runs changed prices); "
        f"{sim_seconds:.0f} s, landing {sim['land_seconds']:.1f} s\n"
    )
    print("| measure | old layout (uncompressed, all kept) | new (zstd, prefilter, gc) | new / old |")
    print("|---|---|---|---|")

    def row(label: str, old: float, new: float, unit: str, digits: int = 1) -> None:
        print(f"| {label} | {old:,.{digits}f} {unit} | {new:,.{digits}f} {unit} | {new / old:.3f} |")

    row("archive per hourly run", per_run_old / MB, per_run_new / MB, "MB", 3)
    row(f"archive after {args.days} days", sim["old_bytes"] / MB, new_bytes / MB, "MB")
    gc_new = new_bytes - report.removed_bytes
    row(
        f"... after gc at {args.sim_retention_days} days' retention", sim["old_bytes"] / MB, gc_new / MB, "MB"
    )
    row(
        f"AWS offer file (generated, {offer_file['offers']} GPU offers)",
        offer_file["full_bytes"] / MB,
        offer_file["stored_bytes"] / MB,
        "MB",
        2,
    )
    row(
        f"AWS offer files a year ({args.aws_regions} regions x {args.aws_versions} versions x "
        f"{args.aws_region_mb:.0f} MB)",
        aws_full_year / GB,
        aws_new_year / GB,
        "GB",
        2,
    )
    row(
        f"**raw archive after a year** ({args.retention_days} days' retention)",
        year_old / GB,
        year_new / GB,
        "GB",
        2,
    )
    bodies_new = changed_bytes_per_hour * 8760 + rest_bytes_per_hour * keep_hours
    row("... of which hourly bodies", per_run_old * 8760 / GB, bodies_new / GB, "GB", 2)
    # The bound that needs no assumption about how often prices move: every run kept.
    worst = per_run_new * 8760 + aws_new_year
    row("worst case: every run changed prices (gc frees nothing)", year_old / GB, worst / GB, "GB", 2)
    row("files after a year", year_files_old, year_files_new, "files", 0)
    print(
        f"\nyear, new = kept-for-changes {changed_bytes_per_hour / MB:.3f} MB/h x 8760 h + the rest "
        f"{rest_bytes_per_hour / MB:.3f} MB/h x {keep_hours} h + AWS offer files {aws_new_year / GB:.2f} GB"
    )
    print(
        f"gc at {args.sim_retention_days} days: kept {report.kept_changed_files:,} files for "
        f"{report.changed_runs:,} provider runs that changed prices, {report.kept_recent_files:,} recent; "
        f"removed {report.removed_files:,} files ({report.removed_bytes / MB:.1f} MB); archive "
        f"{new_bytes / MB:.1f} -> {after_bytes / MB:.1f} MB, {after_files:,} files"
    )
    print(
        f"AWS offer file: kept {aws_ratio:.5f} of its bytes (stored, compressed); landing (hash, "
        f"prefilter, compress in one pass) {offer_file['land_seconds']:.1f} s for "
        f"{offer_file['full_bytes'] / MB:.0f} MB; parsing the whole file {offer_file['parse_seconds']:.1f} s"
    )
    print(f"second gc, after landing the runs to replay: removed {second.removed_files} files")
    print(f"replay of the retained AWS offer-file run after gc parses identically: {aws_same}")
    print(
        f"replay of the retained cassette run after gc parses identically: "
        f"{sum(same.values())} of {len(same)} providers"
        + ("" if all(same.values()) else f" (differ: {', '.join(n for n, ok in same.items() if not ok)})")
    )
    if not aws_same or not all(same.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
