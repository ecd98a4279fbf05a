"""Billing rules beyond the hourly figure, end to end: a month-billed rental with a set-up fee and
a serverless provider, from seeds and offers to the marts, `estimate` and its words.

The two providers here are this file's own (rows added to the seeded core.providers and
core.provider_storage of a throwaway warehouse): no provider of the repository bills by the month
or is serverless today (Modal, serverless, lands from another branch).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from answers.billing import billing_rule, money
from finetune import billed_hours
from flows.cli import app
from tests.factories import make_offer
from warehouse.db import connect, open_warehouse
from warehouse.finetune_marts import build_finetune_marts
from warehouse.load import load_offers
from warehouse.marts import build_marts

runner = CliRunner()
T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
EUR_USD = 1.1
# one L40S each: 48 GB, dense bf16 in gpus.csv, so the job is priced
L40S = {"gpu_name_raw": "L40S", "gpu_count": 1.0, "gpu_memory_gb_raw": 48.0}
# a 5-run experiment with an hour between runs, small enough to take hours, not days
ESTIMATE = [
    "estimate",
    "--model",
    "Qwen2.5-7B",
    "--method",
    "lora",
    "--tokens",
    "20M",
    "--runs",
    "5",
    "--idle",
    "1h",
    "--download",
    "none",
]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    con.execute(
        "insert into core.providers (provider, display_name, billing_granularity, spot_kind, serverless) "
        "values ('monthly', 'Monthly rental', 'per_month', 'none', false), "
        "('metered', 'Metered cloud', 'per_second', 'none', false), "
        "('fn', 'Serverless GPUs', 'per_second', 'none', true)"
    )
    # every provider's facts say a stopped instance bills: only the rules keep idle at 0
    con.execute(
        "insert into core.provider_storage (provider, storage_persists_on_stop, volume_price_per_gb_month, "
        "stopped_instance_bills, boot_minutes, internet_gbits_per_s, currency) values "
        "('monthly', true, 0, true, 10, 1, 'EUR'), ('metered', true, 0, true, 2, 10, 'USD'), "
        "('fn', true, 0, true, 1, 10, 'USD')"
    )
    con.execute(f"insert into core.fx_rates values ('EUR', '2026-11-28', {EUR_USD}, 'ecb', 'r0', now())")
    # a month-billed rental: EUR 730/month (1.00/h as stored), EUR 100 set-up per server
    monthly = make_offer("rent-l40s", 1.0, "monthly", region="fsn1", currency="EUR", setup_fee=100.0, **L40S)
    load_offers(con, "r1", "monthly", [monthly], now=T0)
    load_offers(con, "r1", "metered", [make_offer("l40s-1", 1.1, "metered", **L40S)], now=T0)
    load_offers(con, "r1", "fn", [make_offer("L40S", 1.1, "fn", region="global", **L40S)], now=T0)
    build_marts(con, finetune=build_finetune_marts)
    con.close()
    return tmp_path


def _rows(*extra: str) -> dict[str, dict[str, object]]:
    result = runner.invoke(app, [*ESTIMATE, *extra, "--json"])
    assert result.exit_code == 0, result.output
    return {r["provider"]: r for r in json.loads(result.output)}


def test_the_fee_reaches_the_offers_mart_in_its_currency_and_in_usd(home: Path) -> None:
    con = connect(home / "warehouse.duckdb", read_only=True)
    fee, fee_usd, serverless = con.execute(
        "select setup_fee, setup_fee_usd, serverless from marts.gpu_offers where provider = 'monthly'"
    ).fetchall()[0]
    assert (fee, fee_usd, serverless) == (100.0, pytest.approx(100.0 * EUR_USD), False)
    assert con.execute("select serverless from marts.gpu_offers where provider = 'fn'").fetchall() == [
        (True,)
    ]
    # offers that state no fee carry none
    assert con.execute(
        "select count(*) from marts.gpu_offers where provider <> 'monthly' and setup_fee is not null"
    ).fetchall() == [(0,)]
    con.close()


def test_estimate_bills_a_month_and_its_fee_and_no_idle_serverless(home: Path) -> None:
    rows = _rows()
    monthly, metered, fn = rows["monthly"], rows["metered"], rows["fn"]
    hours = monthly["estimated_hours"]
    assert 5 * hours + 4 * 1.0 < 730  # the whole experiment fits in one month
    # the month-billed rental: one whole month held over the runs and the gaps, and its fee once
    assert monthly["compute_usd"] == pytest.approx(730 * 1.0 * EUR_USD)
    assert monthly["fees_usd"] == pytest.approx(100.0 * EUR_USD) and monthly["idle_usd"] == 0
    # metered by the second at a similar hourly price: every run, and the gaps a stopped VM bills
    assert metered["compute_usd"] == pytest.approx(5 * billed_hours(hours, "second") * 1.1)
    assert metered["idle_usd"] == pytest.approx(4 * 1.0 * 1.1) and metered["fees_usd"] == 0
    # serverless: the same GPU time, nothing between runs
    assert fn["compute_usd"] == pytest.approx(metered["compute_usd"]) and fn["idle_usd"] == 0
    # ranked by the whole bill, the month does not hide behind its hourly equivalent
    assert monthly["price_usd_per_hour"] == pytest.approx(1.1)
    order = [r["provider"] for r in json.loads(runner.invoke(app, [*ESTIMATE, "--json"]).output)]
    assert order == ["fn", "metered", "monthly"]


def test_estimate_says_each_rule_in_words(home: Path) -> None:
    rows = _rows()
    assert rows["monthly"]["billing_rule"] == "€730.00/month + €100.00 set-up, billed per month"
    assert rows["fn"]["billing_rule"] == "bills only while running, billed per second"
    assert rows["metered"]["billing_rule"] == ""
    table = runner.invoke(app, ESTIMATE)
    assert table.exit_code == 0, table.output
    text = " ".join(table.output.split())
    assert "€730.00/month + €100.00 set-up, billed per month" in text
    assert "bills only while running" in text
    bill = runner.invoke(app, [*ESTIMATE, "--bill"])
    assert bill.exit_code == 0 and "fees" in bill.output


def test_a_serverless_provider_is_said_in_gpucost_providers() -> None:
    from flows.cli_providers import billing_text

    assert billing_text("per_second", None, True) == "1 s, bills only while running"
    assert billing_text("per_month", None) == "1 month"
    assert billing_text("per_second", 60.0) == "1 s, min 60 s"


# --- the words, directly --------------------------------------------------------------------------


def test_billing_rule_words() -> None:
    hetzner = {
        "billing_granularity": "per_hour",
        "currency": "EUR",
        "published_price_per_hour": 0.3402,
        "setup_fee": 209.0,
        "monthly_price_cap": 212.3,
    }
    assert billing_rule(hetzner) == "€0.34/h, at most €212.30/month + €209.00 set-up, billed per hour"
    assert billing_rule({**hetzner, "monthly_price_cap": None}) == "€0.34/h + €209.00 set-up, billed per hour"
    assert billing_rule({**hetzner, "setup_fee": None, "monthly_price_cap": None}) == ""
    month = {"billing_granularity": "per_month", "currency": "USD", "published_price_per_hour": 2.0}
    assert billing_rule(month) == "$1,460.00/month, billed per month"
    assert billing_rule({"serverless": True}) == "bills only while running"
    assert money(1200.0, "INR") == "1,200.00 INR" and money(3.0, None) == "3.00"
