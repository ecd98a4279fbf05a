"""What a run costs: billing granularity, minimum charges, spot interruptions (pure).

Money in USD (`_usd`), time in hours (`_hours`). Cost = time rounded up to the provider's billing
unit × price per instance-hour × instances; on spot the time is first stretched by the work lost to
interruptions (`expected_spot_hours`).
"""

from __future__ import annotations

import math
from typing import Literal

Granularity = Literal["second", "minute", "hour"]

# --- Cost --------------------------------------------------------------------------------------

_UNITS_PER_HOUR: dict[str, int] = {"second": 3600, "minute": 60, "hour": 1}


def billed_hours(hours: float, granularity: Granularity, minimum_hours: float = 0.0) -> float:
    """`hours` rounded up to whole billing units, and at least `minimum_hours`; never below `hours`."""
    if hours < 0 or math.isnan(hours):
        raise ValueError(f"hours must be ≥ 0, got {hours}")
    if math.isinf(hours):
        return hours
    units = _UNITS_PER_HOUR[granularity]
    q = hours * units
    # tolerate float noise (0.1 h · 3600 = 360.00000000000006) without ever billing under `hours`
    n = math.ceil(q - 1e-9 * max(1.0, q))
    billed = n / units
    if billed < hours:
        billed = (n + 1) / units
    return max(billed, minimum_hours)


def run_cost(
    hours: float,
    price_per_hour: float,
    granularity: Granularity = "second",
    nodes: int = 1,
    minimum_hours: float = 0.0,
) -> float:
    """On-demand USD: billed hours × price per instance-hour × instances (nodes)."""
    return billed_hours(hours, granularity, minimum_hours) * price_per_hour * nodes


def expected_spot_hours(
    hours: float,
    interruptions_per_hour: float,
    checkpoint_interval_hours: float,
    restart_overhead_hours: float,
) -> float:
    """Expected wall-clock hours on spot for `hours` of useful work.

    Interruptions arrive as a Poisson process (rate λ per wall-clock hour). Each one loses on
    average half a checkpoint interval of work (uniform arrival within the interval) plus the restart
    overhead R (new instance, reload, resume). Wall time W then solves W = H + λ·W·(c/2 + R), so
    W = H / (1 − λ·(c/2 + R)); when λ·(c/2 + R) ≥ 1 the job never finishes (inf).
    """
    loss_per_interruption = checkpoint_interval_hours / 2 + restart_overhead_hours
    waste = interruptions_per_hour * loss_per_interruption
    if waste >= 1:
        return math.inf
    return hours / (1 - waste)


def expected_spot_cost(
    hours: float,
    price_per_hour: float,
    interruptions_per_hour: float,
    checkpoint_interval_hours: float,
    restart_overhead_hours: float,
    granularity: Granularity = "second",
    nodes: int = 1,
) -> float:
    """Expected spot USD: expected_spot_hours rounded to the billing unit × price × nodes."""
    wall = expected_spot_hours(
        hours, interruptions_per_hour, checkpoint_interval_hours, restart_overhead_hours
    )
    return run_cost(wall, price_per_hour, granularity, nodes)


def cost_per_million_tokens(cost_usd: float, tokens: float) -> float:
    return cost_usd / tokens * 1e6
