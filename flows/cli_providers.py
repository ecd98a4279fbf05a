"""`gpucost providers`: what a provider bills beyond the GPU-hour, with the source of each fact.

    gpucost providers [--json]

The answer is answers/providers.py, read from the seeds this release ships (no warehouse needed).
The table shows billing granularity and minimum charge, whether instance storage survives a stop,
the persistent volume's kind and price, egress and ingress prices, whether a stopped instance
still bills, and boot time; each provider's source URLs and the date they were read follow it.
`--json` prints every column, the notes included. A fact the provider does not publish reads
"unpublished", never a guess. Registered in flows/cli.py: `app.command()(cli_providers.providers)`.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from flows.output import console

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON rows (every column, notes too).")]

# Shown where a fact is unpublished: short, so the table stays readable; --json spells it out.
DASH = "–"


def _fact(value: Any) -> str:
    # answers.providers here and below, not above: it loads DuckDB, which `--help` never needs
    from answers.providers import UNPUBLISHED

    if value == UNPUBLISHED or value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _money(value: Any, currency: Any) -> str:
    from answers.providers import UNPUBLISHED

    text = _fact(value)
    return text if text == DASH or currency in (None, UNPUBLISHED) else f"{text} {currency}"


def billing_text(granularity: Any, minimum_seconds: Any, serverless: Any = False) -> str:
    """ "1 s, min 60 s", "1 h, min 3600 s", "1 month", "1 s, bills only while running"; the
    provider's word where it is not a unit."""
    from answers.billing import SERVERLESS_TEXT, UNIT_TEXT

    unit = UNIT_TEXT.get(granularity, _fact(granularity))
    if isinstance(minimum_seconds, float):
        unit = f"{unit}, min {minimum_seconds:g} s"
    return f"{unit}, {SERVERLESS_TEXT}" if serverless is True else unit


def _json_value(value: object) -> object:
    return value.isoformat() if isinstance(value, date) else str(value)


def providers(as_json: JsonOpt = False) -> None:
    """Storage, egress and billing facts per provider, each with its source URL and checked date
    (warehouse/seeds/provider_storage.csv); "unpublished" where the provider states none."""
    from answers.providers import UNPUBLISHED, seeded_provider_facts

    columns, rows = seeded_provider_facts()
    records = [dict(zip(columns, row, strict=True)) for row in rows]
    if as_json:
        console.out(json.dumps(records, indent=2, default=_json_value), highlight=False)
        return
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title="provider facts beyond the GPU-hour (– = unpublished; prices per GB = 10^9 bytes)",
    )
    headers = (
        "provider", "billing", "disk kept on stop", "volume", "volume /GB-month", "egress /GB",
        "free egress GB/month", "ingress /GB", "stopped bills", "boot min", "checked",
    )  # fmt: skip
    for header in headers:
        # every fact wraps on a narrow terminal rather than being cut short with "…"
        left = header in {"provider", "billing", "volume"}
        table.add_column(header, justify="left" if left else "right", overflow="fold")
    for r in records:
        currency = r["currency"]
        table.add_row(
            r["provider"],
            billing_text(r["billing_granularity"], r["minimum_charge_seconds"], r["serverless"]),
            _fact(r["storage_persists_on_stop"]),
            _fact(r["volume_kind"]),
            _money(r["volume_price_per_gb_month"], currency),
            _money(r["egress_price_per_gb"], currency),
            _fact(r["egress_free_gb_per_month"]),
            _money(r["ingress_price_per_gb"], currency),
            _fact(r["stopped_instance_bills"]),
            _fact(r["boot_minutes"]),
            _fact(r["checked"]),
        )
    console.print(table)
    console.print("sources:", highlight=False)
    for r in records:
        console.print(f"  {r['provider']}: {r['source'] or UNPUBLISHED}", highlight=False, soft_wrap=True)
