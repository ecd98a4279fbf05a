"""`gpucost serve` under load: p50/p95 latency of /api/estimate over 10k current offers, on loopback.

The script builds a synthetic warehouse of `--offers` current offers (benchmarks/scale.py's
offers: every concrete instance type of the seeds and every GPU as a 1/2/4/8-GPU marketplace
offer, over synthetic regions, ~40 % also spot) and its marts, as a refresh would; starts
`gpucost serve` on a free 127.0.0.1 port in its own process with GPUCOST_HOME there; and sends
`/api/estimate` requests, each a job of JOBS in turn (none repeats the one before, so nothing is
answered from a warm cache), from `--clients` threads, until `--requests` answers or `--seconds`
have passed, whichever is first. Every answer must be a 200 with ranked offers. Printed: one row
per client count with requests, p50, p95, max and mean latency (ms, wall-clock at the client),
and the machine's load average before and after, since the machine is shared.

Usage: `uv run python benchmarks/serve_latency.py [--offers 10000] [--requests 200] [--seconds 120]
[--clients 1,2] [--workdir DIR] [--before REF]` (the warehouse goes under --workdir, default a
temporary folder, removed at the end; an existing one there is reused). `--before REF` checks REF
out as a detached `git worktree` and serves it too, on the same warehouse with the same
interpreter: each job is asked of both servers in turn, one row per server and client count.

Result on the shared 2-core VM, 2026-12-02 (10,000 offers; other helpers' jobs running):
see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

# the jobs asked in turn: seeded models of three sizes, each method, spot and filters
JOBS: tuple[dict[str, str], ...] = (
    {"model": "Llama-3.1-8B", "method": "lora", "tokens": "100M"},
    {"model": "Qwen2.5-7B", "method": "qlora", "tokens": "50M", "spot": "true"},
    {"model": "Llama-3.1-70B", "method": "qlora", "tokens": "20M"},
    {"model": "Llama-3.2-1B", "method": "full", "tokens": "200M", "seq_len": "4096"},
    {
        "model": "Llama-3.1-8B",
        "method": "full",
        "tokens": "50M",
        "offer_gpu": "H100,H200,B200",
        "spot": "true",
    },
)


def build(home: Path, offers: int) -> Path:
    """`home/warehouse.duckdb` with `offers` synthetic current offers and its marts (reused if there)."""
    path = home / "warehouse.duckdb"
    if path.exists():
        return path
    from scale import build_warehouse

    from warehouse.db import connect
    from warehouse.finetune_marts import build_finetune_marts
    from warehouse.marts import build_marts

    home.mkdir(parents=True, exist_ok=True)
    partial = home / "building.duckdb"
    partial.unlink(missing_ok=True)
    build_warehouse(partial, offers)
    con = connect(partial)
    build_marts(con, finetune=build_finetune_marts)
    current = con.execute("select count(*) from marts.gpu_offers").fetchall()[0][0]
    con.close()
    partial.replace(path)
    print(f"built {path}: {current:,} current offers in marts.gpu_offers", file=sys.stderr)
    return path


def free_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


def start(home: Path, port: int, tree: Path = REPO) -> subprocess.Popen[str]:
    """`gpucost serve` of the code in `tree` (this venv's interpreter), answering on `port`."""
    env = {**os.environ, "GPUCOST_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "flows.cli", "serve", "--port", str(port), "--budget-seconds", "60"]
    # its log goes to a file: a pipe nobody reads fills up with tracebacks and stalls the server
    log = (home.parent / f"serve-{port}.log").open("w")
    process = subprocess.Popen(command, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if (
                httpx.get(f"http://127.0.0.1:{port}/api/status", timeout=5, trust_env=False).status_code
                == 200
            ):
                return process
        except httpx.TransportError:
            if process.poll() is not None:
                raise SystemExit(f"gpucost serve exited: {log.name} says why") from None
            time.sleep(0.2)
    process.terminate()
    raise SystemExit("gpucost serve did not answer within 120 s")


def load(
    ports: dict[str, int], clients: int, requests: int, seconds: float
) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    """Latencies (s) per server of up to `requests` /api/estimate answers each, from `clients`
    threads in `seconds`, and the answers that failed (not a 200 with ranked offers): each job
    goes to every server in turn (the same jobs, in the same order), so a busy machine slows
    them alike."""
    latencies: dict[str, list[float]] = {label: [] for label in ports}
    failures: dict[str, list[str]] = {label: [] for label in ports}
    lock = threading.Lock()
    sent = 0
    stop_at = time.monotonic() + seconds

    def client() -> None:
        nonlocal sent
        https = {
            label: httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120, trust_env=False)
            for label, port in ports.items()
        }
        try:
            while True:
                with lock:
                    if sent >= requests or time.monotonic() > stop_at:
                        return
                    job = JOBS[sent % len(JOBS)]
                    sent += 1
                for label, http in https.items():
                    started = time.perf_counter()
                    answer = http.get("/api/estimate", params=job)
                    took = time.perf_counter() - started
                    with lock:  # a failed answer is counted and shown, never timed
                        if answer.status_code != 200 or not answer.json().get("offers"):
                            failures[label].append(f"{job}: HTTP {answer.status_code} {answer.text[:200]}")
                        else:
                            latencies[label].append(took)
        finally:
            for http in https.values():
                http.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, failures


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200, help="most answers per client count")
    parser.add_argument("--seconds", type=float, default=120.0, help="most seconds per client count")
    parser.add_argument("--clients", default="1,2", help="client threads, comma-separated counts")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--before", metavar="REF", help="also serve this git commit, side by side")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gpucost-serve-bench-"))
    home = workdir / f"home-{args.offers}"
    trees = {"after": REPO}
    rows: list[dict[str, Any]] = []
    processes: list[subprocess.Popen[str]] = []
    try:
        build(home, args.offers)
        if args.before:
            trees = {"before": workdir / "before-tree", "after": REPO}
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(REPO),
                    "worktree",
                    "add",
                    "--detach",
                    "--quiet",
                    str(trees["before"]),
                    args.before,
                ],
                check=True,
            )
        ports = {label: free_port() for label in trees}
        processes = [start(home, ports[label], tree) for label, tree in trees.items()]
        _, failed = load(ports, 1, len(JOBS), args.seconds)  # warm-up: imports, first plans; not counted
        for label, why in failed.items():
            if why:
                raise SystemExit(f"{label} fails one client's first answers: {why[0]}")
        for clients in (int(c) for c in args.clients.split(",")):
            before = os.getloadavg()[0]
            started = time.monotonic()
            latencies, failed = load(ports, clients, args.requests, args.seconds)
            for label, taken in latencies.items():
                for why in failed[label][:3]:
                    print(f"{label}, {clients} client(s): {why}", file=sys.stderr)
                rows.append(
                    {
                        "server": label,
                        "clients": clients,
                        "requests": len(taken),
                        "failed": len(failed[label]),
                        "seconds": time.monotonic() - started,
                        "p50": percentile(taken, 0.5) if taken else math.nan,
                        "p95": percentile(taken, 0.95) if taken else math.nan,
                        "max": max(taken, default=math.nan),
                        "mean": statistics.fmean(taken) if taken else math.nan,
                        "load": (before, os.getloadavg()[0]),
                    }
                )
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
        if args.before:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(trees["before"])], check=False
            )
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n/api/estimate over {args.offers:,} current offers, {os.cpu_count()} CPUs, loopback\n")
    print(
        "| server | clients | answers | failed | seconds | p50 ms | p95 ms | max ms | mean ms "
        "| load avg before → after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['server']} | {r['clients']} | {r['requests']} | {r['failed']} | {r['seconds']:.1f} | "
            f"{r['p50'] * 1000:.0f} | "
            f"{r['p95'] * 1000:.0f} | {r['max'] * 1000:.0f} | {r['mean'] * 1000:.0f} | "
            f"{r['load'][0]:.1f} → {r['load'][1]:.1f} |"
        )


if __name__ == "__main__":
    main()
