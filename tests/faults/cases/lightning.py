"""Lightning AI: faults in the Lightning Cloud (`cloudProvider=MACHINE`) catalog of the replay cassette.

Machines map by slug pattern (`lit-h100*-[248]`), so `unknown_gpu` renames both the slug and the
`gpuType` of one machine. `renamed_key` renames `cost`: every on-demand offer of that cloud is
flagged (`cost` missing) and quarantined, nothing is closed.
"""

from __future__ import annotations

from typing import Any

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, edit_json, renaming


def _machine(data: Any, slug: str) -> dict[str, Any]:
    return next(m for m in data["accelerator"] if m["slugMultiCloud"] == slug)


def _zero(data: Any) -> None:
    _machine(data, "lit-l40s-1")["cost"] = 0


def _ten_times(data: Any) -> None:
    _machine(data, "lit-h100-80gb-8")["cost"] *= 10


def _unknown(data: Any) -> None:
    machine = _machine(data, "lit-t4-1")
    machine["slugMultiCloud"] = machine["slug"] = machine["instanceId"] = "lit-zeta-z9-1"
    machine["resources"]["gpuType"] = UNKNOWN_GPU


FAULTS = BodyFaults(
    target="cloudProvider=MACHINE",
    bad_row=edit_json(_zero),
    price_jump=edit_json(_ten_times),
    unknown_gpu=edit_json(_unknown),
    renamed_key=renaming("cost"),
)
