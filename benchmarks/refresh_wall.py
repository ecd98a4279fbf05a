"""Whole-process wall time of a one-off `gpucost refresh --replay tests/replay`, per runner.

Rows, each cold (fresh GPUCOST_HOME: new warehouse, first run) and warm (the same home again):

    local              no Prefect API: the pipeline runs in-process, Prefect is never imported
    prefect server     against a running `gpucost server start` (the server's own start-up not counted)
    temporary server   the flow called without any API, so Prefect starts its temporary server
                       (what every `gpucost refresh` did before the local runner)

`wall s` is measured here around the subprocess; `pipeline s` is what the command reports for its
own steps (the refresh's `pipeline_seconds`). Ratios matter, not absolute seconds: these machines
are shared. Usage: `uv run python benchmarks/refresh_wall.py [--repeat 2]`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIPELINE = re.compile(r"pipeline ([\d.]+)s")
TEMPORARY = (
    "from flows.refresh import refresh; s = refresh(replay='tests/replay'); "
    "print(f'pipeline {s.pipeline_seconds:.2f}s')"
)


def _env(home: Path, api: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"GPUCOST_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    if api:
        env["PREFECT_API_URL"] = api
    return env


def _run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    match = PIPELINE.search(done.stdout)
    if done.returncode != 0 or not match:
        output = done.stdout[-2000:] + done.stderr[-2000:]
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{output}")
    return wall, float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="warm runs per runner (the best is kept)")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "flows.cli", "refresh", "--replay", "tests/replay"]
    rows: list[tuple[str, str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="gpucost-bench-") as tmp:
        for runner in ("local", "prefect server", "temporary server"):
            home = Path(tmp) / runner.replace(" ", "-")
            api = None
            if runner == "prefect server":
                from flows import server

                _, api = server.start(home)
            command = [sys.executable, "-c", TEMPORARY] if runner == "temporary server" else cli
            try:
                rows.append((runner, "cold", *_run(command, _env(home, api))))
                warm = [_run(command, _env(home, api)) for _ in range(max(1, args.repeat))]
                rows.append((runner, "warm", *min(warm)))
            finally:
                if api:
                    server.stop(home)
    print("| runner | run | wall s | pipeline s | wall / pipeline |")
    print("|---|---|---|---|---|")
    for runner, kind, wall, pipeline in rows:
        print(f"| {runner} | {kind} | {wall:.1f} | {pipeline:.1f} | {wall / pipeline:.2f}x |")


if __name__ == "__main__":
    main()
