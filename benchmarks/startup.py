"""How long `gpucost` takes to start and answer: read commands on the replay warehouse.

    uv run python benchmarks/startup.py [--runs 7] [--before REF] [--home DIR]

Each command runs `--runs` times as its own process (this venv's interpreter, `python -c` running
the typer app as the `gpucost` entry point does, without `uv run`'s own check of the environment);
the table gives the median wall time. Two bytecode modes, each with its own PYTHONPYCACHEPREFIX
(so the checkout's __pycache__ plays no part):

* `compiled`: a prefix filled by one discarded warm-up run, then read by every timed run: a
  second run of the command, what a user sees day to day.
* `source`: PYTHONDONTWRITEBYTECODE=1 and a fresh, empty prefix: every module of the project and
  its dependencies compiled from source on each run, what a fresh clone sees (uv does not compile
  bytecode on install).

`--before REF` checks REF out as a detached `git worktree` in a temp folder and times it side by
side, the same commands with the same interpreter and warehouse, runs interleaved (before, after,
before, …) so that a busy machine slows both alike; the last column is before / after. The
replay warehouse is built once in `--home` (a temp folder by default; an existing one is reused)
by tests/replay_warehouse.py, the same steps `gpucost refresh --replay tests/replay` runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the replay builder lives with the tests
sys.path.insert(0, str(REPO))

from tests.replay_warehouse import build_replay_warehouse  # noqa: E402 - after the path

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("prices",),
    ("sql", "select 1"),
    ("estimate", "--model", "Llama-3.1-8B", "--method", "lora", "--tokens", "50M", "--top", "4"),
    ("memory", "--model", "Llama-3.1-8B", "--method", "qlora", "--seq-len", "4096"),
)
# what the `gpucost` console script does (pyproject [project.scripts]); `-c` puts the working
# directory first on sys.path, so each tree times its own code with the one interpreter
ENTRY = "import sys; sys.argv[0] = 'gpucost'; from flows.cli import app; sys.exit(app())"


def run_once(tree: Path, args: tuple[str, ...], env: dict[str, str]) -> float:
    """Wall seconds of one command, from process start to exit; a failure stops the benchmark."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise SystemExit(f"`gpucost {' '.join(args)}` exited {done.returncode} in {tree}: {tail}")
    return elapsed


def environment(home: Path, prefix: Path, *, compiled: bool, scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCOST_", "PYTHON", "PREFECT_"))}
    env.update(
        GPUCOST_HOME=str(home),
        PREFECT_HOME=str(scratch / "prefect"),
        PYTHONPYCACHEPREFIX=str(prefix),
        COLUMNS="200",
        HF_HUB_OFFLINE="1",
    )
    if not compiled:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def measure(trees: dict[str, Path], home: Path, runs: int, scratch: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for compiled in (True, False):
        mode = "compiled" if compiled else "source"
        for args in COMMANDS:
            envs = {}
            for label, tree in trees.items():
                prefix = scratch / f"pyc-{label}-{mode}"  # empty in source mode: nothing is written
                envs[label] = environment(home, prefix, compiled=compiled, scratch=scratch)
                if compiled:
                    run_once(tree, args, envs[label])  # fills the prefix; not timed
            times: dict[str, list[float]] = {label: [] for label in trees}
            for _ in range(runs):
                for label, tree in trees.items():
                    times[label].append(run_once(tree, args, envs[label]))
            row: dict[str, object] = {"command": "gpucost " + " ".join(args), "mode": mode}
            row.update({label: statistics.median(t) for label, t in times.items()})
            rows.append(row)
            print(
                f"  {mode:8} {row['command']}: " + ", ".join(f"{k} {row[k]:.2f} s" for k in trees),
                file=sys.stderr,
            )
    return rows


def table(rows: list[dict[str, object]], labels: list[str]) -> str:
    head = ["command", "bytecode", *(f"{label} s" for label in labels)]
    if len(labels) == 2:
        head.append("before / after")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"`{row['command']}`", str(row["mode"]), *(f"{row[label]:.2f}" for label in labels)]
        if len(labels) == 2:
            cells.append(f"{row['before'] / row['after']:.1f}×")  # type: ignore[operator]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command and mode (median)")
    parser.add_argument("--before", metavar="REF", help="also time this git commit, side by side")
    parser.add_argument("--home", type=Path, help="folder for the replay warehouse (reused)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="gpucost-startup-") as tmp:
        scratch = Path(tmp)
        home = args.home or scratch / "home"
        home.mkdir(parents=True, exist_ok=True)
        build_replay_warehouse(home)
        trees = {"after": REPO}
        if args.before:
            before = scratch / "before"
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(before), args.before],
                check=True,
            )
            trees = {"before": before, "after": REPO}
        try:
            rows = measure(trees, home, args.runs, scratch)
        finally:
            if args.before:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(trees["before"])],
                    check=False,
                )
        print(
            f"median of {args.runs} runs, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.2f} at the end"
        )
        print(table(rows, list(trees)))


if __name__ == "__main__":
    main()
