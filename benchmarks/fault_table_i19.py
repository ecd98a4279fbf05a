"""Issue 19's fault classes x provider families, with the outcome each one measures now.

Every cell runs the real code path (the warehouse guards on an in-memory warehouse, the HTTP
client on a mock transport, a marketplace connector's parse on its own fixture) and prints what
happened: `held` (the last good price stays current, the row is quarantined with the reason
shown), `refused` (the fetch fails with the message shown), `held 1 run, confirmed` when the
guard held it once and the same move came back (its confirmation rule), `published WRONG` when a
wrong price became current, `published, flagged ...` when a price that markets do ask is published
with the flag a reader sees, `dropped from the mart, recorded` when the mart leaves an offer out
and marts.dropped_offers says why, `-` where the fault does not apply to the family. Usage:
`uv run python benchmarks/fault_table_i19.py`.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from answers.status import dropped_offers
from connectors import vast
from connectors.base import FetchError, FxRate, Offer, RawResponse
from connectors.http import make_client
from warehouse.db import Settings, connect, load_seeds, migrate
from warehouse.hardware import HardwareCatalog
from warehouse.load import load_fx_rates, load_offers, stale_fx_rates
from warehouse.marts import build_marts
from warehouse.pipeline import ProviderBatch, land

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
HOUR = timedelta(hours=1)
REPO = Path(__file__).resolve().parents[1]
EUR = 1.08
# family -> (provider, gpu count, currency, price source) of a representative offer
FAMILIES = {
    "API": ("aws", 8.0, "USD", "list"),
    "page": ("nebius", 2.0, "EUR", "list"),
    "marketplace": ("vast", 2.0, "USD", "market"),
}


def warehouse():
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    history = [FxRate("EUR", date(2026, 11, 30) - timedelta(days=i), EUR, "ECB") for i in range(20)]
    load_fx_rates(con, "fx0", history, now=T0)
    return con


def offer(family: str, price: float, currency: str | None = None, hosts: int = 12) -> Offer:
    provider, gpus, own, source = FAMILIES[family]
    return Offer(
        provider=provider,
        instance_type=f"{gpus:g}x H100",
        region="r1",
        pricing_type="on_demand",
        price_source=source,  # type: ignore[arg-type]
        price_per_hour=price,
        currency=currency or own,
        gpu_name_raw="H100",
        gpu_count=gpus,
        gpu_memory_gb_raw=80.0,
        provider_data={"host_offers": hosts} if source == "market" else {},
    )


def guarded(family: str, move: Callable[[float], float], currency: str | None = None, hosts: int = 12) -> str:
    """Load a good price, then the faulty one twice (a repeated run); what is current after."""
    con = warehouse()
    provider = FAMILIES[family][0]
    good = 2.0 * FAMILIES[family][1]
    load_offers(con, "r0", provider, [offer(family, good, hosts=hosts)], now=T0)
    reasons: list[str] = []
    held_runs = 0
    for i in (1, 2):
        result = load_offers(
            con, f"r{i}", provider, [offer(family, move(good), currency, hosts)], now=T0 + i * HOUR
        )
        con.execute(
            "insert into ops.provider_runs (run_id, provider, status, started_at) values (?, ?, ?, ?)",
            [f"r{i}", provider, result.status, T0 + i * HOUR],
        )
        reasons += list(result.quarantine_reasons)
        held_runs += bool(result.quarantine_reasons)
    (current,) = con.execute(
        "select price_per_hour from core.offer_prices where valid_to is null"
    ).fetchall()[0]
    con.close()
    if current != good and held_runs:  # the guard's confirmation: the same move two runs in a row
        return f"held 1 run, confirmed by the 2nd ({', '.join(sorted(set(reasons)))})"
    if current != good:
        return f"published WRONG ({good:g} -> {current:g})"
    return f"held x2 runs ({', '.join(sorted(set(reasons)))})"


def thin_repeated(runs: int = 5) -> str:
    """A 2-host segment follows one host 2.9x down, `runs` identical runs; then a 3rd host."""
    con = warehouse()
    load_offers(con, "m0", "vast", [offer("marketplace", 4.0, hosts=2)], now=T0)
    reasons: set[str] = set()
    for i in range(1, runs + 1):
        result = load_offers(
            con, f"m{i}", "vast", [offer("marketplace", 4.0 / 2.9, hosts=2)], now=T0 + i * HOUR
        )
        con.execute(
            "insert into ops.provider_runs (run_id, provider, status, started_at) values (?, ?, ?, ?)",
            [f"m{i}", "vast", result.status, T0 + i * HOUR],
        )
        reasons |= set(result.quarantine_reasons)
    build_marts(con, catalog=HardwareCatalog.load(), settings=Settings())
    (price, held) = con.execute("select price_per_hour, price_held_reason from marts.gpu_offers").fetchall()[
        0
    ]
    if price != 4.0:
        return f"published WRONG (4 -> {price:g})"
    later = T0 + (runs + 1) * HOUR
    load_offers(con, "m9", "vast", [offer("marketplace", 4.0 / 2.9, hosts=3)], now=later)
    (landed,) = con.execute("select price_per_hour from core.offer_prices where valid_to is null").fetchall()[
        0
    ]
    con.close()
    lands = "lands at 3 hosts" if math.isclose(landed, 4.0 / 2.9) else "still held at 3 hosts"
    return f"held x{runs} runs ({', '.join(sorted(reasons))}; mart shows {held}); {lands}"


def spot_above(family: str, spot_factor: float) -> str:
    """A spot price `spot_factor` x the on-demand price of the same instance (swapped columns)."""
    provider, gpus, _, _ = FAMILIES[family]
    con = warehouse()
    on_demand = offer(family, 2.0 * gpus)
    # spot at 60 % of on-demand, then 1.25x it: a 2.08x move, under the jump factor and no unit
    spot = replace(offer(family, 1.2 * gpus), pricing_type="spot")
    load_offers(con, "s0", provider, [on_demand, spot], now=T0)
    swapped = replace(spot, price_per_hour=2.0 * gpus * spot_factor)
    result = load_offers(con, "s1", provider, [on_demand, swapped], now=T0 + HOUR)
    (price, data) = con.execute(
        "select price_per_hour, provider_data from core.offer_prices "
        "where valid_to is null and pricing_type = 'spot'"
    ).fetchall()[0]
    con.close()
    if result.quarantine_reasons:
        return f"held ({', '.join(sorted(result.quarantine_reasons))})"
    flagged = json.loads(data).get("spot_above_on_demand")
    return f"published, flagged spot_above_on_demand={flagged}" if flagged else f"published WRONG ({price:g})"


def absurd_converted() -> str:
    """A row already in core converted with a 1000x EUR rate (written before the load guards
    existed, as the issue found them): what the mart does with it. The row is set up by SQL
    because no load today writes one."""
    con = warehouse()
    load_offers(con, "p0", "nebius", [offer("page", 4.0)], now=T0)
    con.execute("update core.offer_prices set price_usd_per_hour = price_per_hour * 1080.0")
    load_fx_rates(con, "fxa", [FxRate("EUR", date(2026, 12, 1), EUR * 1000, "ECB")], now=T0)
    con.execute("update core.offer_prices set fx_rate_date = date '2026-12-01'")
    build_marts(con, catalog=HardwareCatalog.load(), settings=Settings())
    shown = con.execute("select count(*) from marts.gpu_offers").fetchall()[0][0]
    dropped = dropped_offers(con)
    con.close()
    if shown:
        return "published WRONG (absurd converted price in the mart)"
    return f"dropped from the mart, recorded: {dropped}"


def fx_repeated(factor: float) -> str:
    """A wrong EUR rate, twice; then what the mart converts a EUR offer with."""
    con = warehouse()
    load_offers(con, "p0", "nebius", [offer("page", 4.0)], now=T0)
    reasons = []
    for i in (1, 2):
        batch = ProviderBatch("ecb", "fetched", T0)
        batch.fx_rates = [FxRate("EUR", date(2026, 12, 1), EUR * factor, "ECB")]
        outcome = land(con, Path("/nonexistent-raw"), f"fx{i}", batch)
        reasons.append(outcome.status)
    load_offers(con, "p1", "nebius", [offer("page", 4.0)], now=T0 + 3 * HOUR)
    build_marts(con, catalog=HardwareCatalog.load(), settings=Settings())
    rows = con.execute("select fx_usd_per_unit, price_usd_per_gpu_hour from marts.gpu_offers").fetchall()
    quarantined = {
        r for (r,) in con.execute("select reason from ops.quarantine where provider = 'ecb'").fetchall()
    }
    con.close()
    rate, per_gpu = rows[0]
    wrong = not math.isclose(rate, EUR, rel_tol=1e-6)
    outcome = "published WRONG" if wrong else "held x2 runs"
    return f"{outcome} ({', '.join(sorted(quarantined))}; mart ${per_gpu:.2f}/GPU-h)"


def fx_stale() -> str:
    con = warehouse()
    old = datetime.now(UTC).date() - timedelta(days=30)
    con.execute("delete from core.fx_rates")
    load_fx_rates(con, "fx", [FxRate("EUR", old, EUR, "ECB")], now=T0)
    load_offers(con, "p0", "nebius", [offer("page", 4.0)], now=T0)
    build_marts(con, catalog=HardwareCatalog.load(), settings=Settings())
    (stale,) = con.execute("select fx_rate_stale from marts.gpu_offers").fetchall()[0]
    warned = bool(stale_fx_rates(con, Settings().fx_stale_after_days))
    con.close()
    return f"shown (fx_rate_stale={stale}, status warns={warned})"


def fetched(status: int, body: bytes, content_type: str) -> str:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": content_type})

    client = make_client(transport=httpx.MockTransport(handler), retries=2, sleep=lambda _: None)
    try:
        response = client.fetch("GET", "https://provider.example.test/prices")
        response.json() if "json" in content_type else None
    except FetchError as exc:
        text = str(exc)
        for phrase in ("truncated: retried 2 times", "with a challenge"):
            if phrase in text:
                return f"refused: '{phrase}'"
        return f"refused: {text[:60]}"
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:60]}"
    return "accepted"


JSON_BODY = json.dumps({"offers": [{"gpu": "H100", "price": 2.49}] * 5}).encode()
XML_BODY = (
    b"<?xml version='1.0'?><Envelope><Cube><Cube time='2026-12-01'>"
    b"<Cube currency='USD' rate='1.08'/></Cube></Cube></Envelope>"
)
CHALLENGE = (
    b"<html><head><title>Just a moment...</title></head>"
    b"<body><script>window._cf_chl_opt={}</script></body></html>"
)


def host_row_missing() -> str:
    payload = json.loads((REPO / "tests/fixtures/vast/bundles__2026-12-01.json").read_text())
    vast.host_offers(payload)[0].pop("gpu_name")
    items = list(vast.parse([RawResponse(vast.API_URL, "POST", 200, T0, body=json.dumps(payload).encode())]))
    con = warehouse()
    result = load_offers(con, "m1", "vast", [i for i in items if isinstance(i, Offer)], now=T0)
    con.close()
    return f"{result.status}: 1 row quarantined alone, {result.offers_loaded} segments load"


def main() -> None:
    na = "-"
    rows: list[tuple[str, dict[str, str]]] = [
        (
            "per-GPU price read as the instance's (/N GPUs)",
            {f: guarded(f, lambda p, f=f: p / FAMILIES[f][1]) for f in FAMILIES} | {"FX": na},
        ),
        (
            "2x on a 2-GPU box (labels swapped)",
            {
                "API": na,
                "page": guarded("page", lambda p: 2 * p),
                "marketplace": guarded("marketplace", lambda p: 2 * p),
                "FX": na,
            },
        ),
        ("cents read as dollars (x100)", {f: guarded(f, lambda p: 100 * p) for f in FAMILIES} | {"FX": na}),
        ("monthly read as hourly (x730)", {f: guarded(f, lambda p: 730 * p) for f in FAMILIES} | {"FX": na}),
        (
            "EUR price stored as USD",
            {"API": na, "page": guarded("page", lambda p: p, currency="USD"), "marketplace": na, "FX": na},
        ),
        (
            "thin segment (2 hosts) follows one host 2.9x",
            {
                "API": na,
                "page": na,
                "marketplace": guarded("marketplace", lambda p: p / 2.9, hosts=2),
                "FX": na,
            },
        ),
        (
            "thin segment (2 hosts) repeated 5 runs",
            {"API": na, "page": na, "marketplace": thin_repeated(), "FX": na},
        ),
        (
            "spot 1.25x on-demand (columns swapped)",
            {f: spot_above(f, 1.25) for f in FAMILIES} | {"FX": na},
        ),
        (
            "absurd converted price already in core (x1000 rate)",
            {"API": na, "page": absurd_converted(), "marketplace": na, "FX": na},
        ),
        ("wrong rate x1000, repeated", {"API": na, "page": na, "marketplace": na, "FX": fx_repeated(1000.0)}),
        ("wrong rate x1.5, repeated", {"API": na, "page": na, "marketplace": na, "FX": fx_repeated(1.5)}),
        ("30-day-old rate", {"API": na, "page": na, "marketplace": na, "FX": fx_stale()}),
        (
            "cut JSON/XML body",
            {
                "API": fetched(200, JSON_BODY[:40], "application/json"),
                "page": na,
                "marketplace": fetched(200, JSON_BODY[:40], "application/json"),
                "FX": fetched(200, XML_BODY[:60], "text/xml"),
            },
        ),
        (
            "challenge page (403)",
            {f: fetched(403, CHALLENGE, "text/html") for f in ("API", "page", "marketplace", "FX")},
        ),
        (
            "one host row missing a field",
            {"API": na, "page": na, "marketplace": host_row_missing(), "FX": na},
        ),
    ]
    columns = ("API", "page", "marketplace", "FX")
    print("| fault | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for fault, cells in rows:
        print(f"| {fault} | " + " | ".join(cells[c] for c in columns) + " |")


if __name__ == "__main__":
    main()
