"""The warehouse `gpucost refresh --replay tests/replay` builds, made without Prefect or a CLI.

The report tests and `benchmarks/report_size.py` need the full replay data (every provider, the
whole fine-tuning job grid); this lands it with the same steps the refresh runs (collect, land,
build marts, finish the run), in about ten seconds, and reuses a warehouse already built.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from connectors.http import make_client
from warehouse import finetune_marts as finetune
from warehouse.db import open_warehouse
from warehouse.marts import build_marts
from warehouse.pipeline import (
    collect,
    credentials_for,
    finish_run,
    land,
    new_run_id,
    select_connectors,
    start_run,
)

REPLAY_DIR = Path(__file__).resolve().parent / "replay"


def build_replay_warehouse(home: Path, cassette: Path = REPLAY_DIR) -> Path:
    """The path of `home/warehouse.duckdb`, filled from the replay cassette unless it exists."""
    path = home / "warehouse.duckdb"
    if path.exists():
        return path
    connectors = select_connectors(None)
    creds = {c.name: credentials_for(c, {}, replay=True) for c in connectors}
    run_id = new_run_id(datetime.now(UTC))
    partial = home / "building.duckdb"
    partial.unlink(missing_ok=True)
    con = open_warehouse(partial)
    client = make_client(
        secrets=[s for _, values in creds.values() for s in values],
        replay=cassette,
        spool_dir=home / "spool" / run_id,
    )
    try:
        start_run(con, run_id, "replay", [c.name for c in connectors], None)
        batches = [collect(c, client, creds[c.name][0]) for c in connectors]
        # reference rates first: prices in other currencies are converted with them
        outcomes = [
            land(con, home / "raw", run_id, batch) for batch in sorted(batches, key=lambda b: not b.fx_rates)
        ]
        build_marts(con, finetune=finetune.build_finetune_marts)
        finish_run(con, run_id, outcomes)
    finally:
        client.close()
        con.close()
    # only a complete warehouse gets the name later calls reuse
    partial.replace(path)
    return path


def replay_only_home(base: Path) -> Path:
    """A GPUCOST_HOME as `gpucost refresh --replay tests/replay` leaves a fresh clone: the replay
    warehouse in `home/replay`, no live one, so read commands answer from the sample data and say
    so. Built once under `base` (tests pass the session's base temp folder) and reused."""
    home = base / "replay-home"
    (home / "replay").mkdir(parents=True, exist_ok=True)
    build_replay_warehouse(home / "replay")
    return home
