"""The fault suite as a table: for every registered connector and every injected fault, the
provider run's status and what happened to its last good prices.

Uses the harness of tests/faults/test_faults.py (same transport, same cases), so the table is what
the tests assert, printed. Usage: `uv run python benchmarks/fault_matrix.py [slug ...]`.
Cells: `status/kept` when every last good price stayed current and unchanged, `status/LOST` if not;
`+q` when rows were quarantined (bad rows, held price jumps). For `unknown_gpu`, `+N -M`: offers
that appeared (the renamed GPU, landing unmapped) and closed (its old name, where it was in the key).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite's harness lives in tests/

from connectors import CONNECTORS
from connectors.http import ReplayTransport
from tests.faults.test_faults import (
    BODY_FAULTS,
    DRIP_DEADLINE_SECONDS,
    FX_SOURCE,
    REPLAY,
    TRANSPORT_FAULTS,
    Harness,
    _faulty,
    fault_case,
)


def cell(slug: str, fault: str, tmp: Path) -> str:
    harness = Harness(CONNECTORS[slug], tmp / f"{slug}-{fault}")
    try:
        if FX_SOURCE in CONNECTORS and slug != FX_SOURCE:
            rates = Harness(CONNECTORS[FX_SOURCE], harness.dir, con=harness.con)
            rates.run(ReplayTransport(REPLAY, frozenset()))
        harness.run(ReplayTransport(REPLAY, frozenset(harness.secrets)))
        before = harness.state()
        deadline = DRIP_DEADLINE_SECONDS if fault == "slow_drip" else 30.0
        run = harness.run(_faulty(harness, fault_case(slug), fault), deadline=deadline)
        after = harness.state()
        quarantined = "+q" if harness.quarantined(run.run_id) else ""
        if fault == "unknown_gpu":  # a renamed GPU is a new offer; the old name may close with it
            new, gone = len(set(after) - set(before)), len(set(before) - set(after))
            return f"{run.status}/+{new} -{gone}{quarantined}"
        kept = all(after.get(k) == v for k, v in before.items())
        return f"{run.status}/{'kept' if kept else 'LOST'}{quarantined}"
    finally:
        harness.close()


def main() -> None:
    slugs = sys.argv[1:] or sorted(CONNECTORS)
    faults = (*TRANSPORT_FAULTS, *BODY_FAULTS)
    print("| provider | " + " | ".join(faults) + " |")
    print("|---" * (len(faults) + 1) + "|")
    with tempfile.TemporaryDirectory(prefix="gpucost-faults-") as tmp:
        for slug in slugs:
            print(f"| {slug} | " + " | ".join(cell(slug, f, Path(tmp)) for f in faults) + " |", flush=True)


if __name__ == "__main__":
    main()
