"""An hourly rate capped at a monthly price (Hetzner's dedicated servers: "Our billing is exact to
the hour. You will never pay more than the monthly price"; Linode: "charged the hourly rate for a
service up to its monthly cap"): the bill, the mart SQL held to it, and `estimate`.

Figures are Hetzner's GEX45 as its connector's fixture states them: €0.3402/h, capped at
€212.30/month (so the cap binds past 212.30 / 0.3402 ≈ 624 h in a month), €209.00 set-up. The
end-to-end provider (`capped`) is this file's own, added to a throwaway warehouse's seeds.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import warehouse.finetune_marts as ft
from finetune import FinetuneJob, Job, billed_hours
from finetune.cost import (
    HOURS_PER_MONTH,
    JobData,
    applicable_cap,
    capped_cost,
    held_for_experiment,
    itemized_bill,
    run_cost,
)
from finetune.job import Experiment
from flows.cli import app
from tests.factories import make_offer
from tests.test_bill import FULL, MODELS, _facts, _offers
from tests.test_finetune_marts import L4_ONE
from tests.test_finetune_scale import assert_same_rows, reference_rows
from warehouse.db import connect, open_warehouse
from warehouse.finetune_marts import build_finetune_marts
from warehouse.load import load_offers, validate
from warehouse.marts import build_marts

PRICE = 0.3402
CAP = 212.3
# one run, nothing moved or kept: compute is the whole question
ONE_RUN = JobData(dataset_gb=0.0, model_download_gb=0.0, checkpoint_gb=0.0, result_gb=0.0)


def _capped(hours: float, data: JobData = ONE_RUN, wall: float | None = None, **rules: Any) -> Any:
    rules.setdefault("monthly_cap_usd", CAP)
    return itemized_bill(
        hours=hours,
        wall_hours=hours if wall is None else wall,
        price_per_hour=PRICE,
        granularity=rules.pop("granularity", "hour"),
        minimum_hours=0.0,
        nodes=rules.pop("nodes", 1),
        interval_hours=1.0,
        data=data,
        facts=FULL,
        **rules,
    )


# --- the bill --------------------------------------------------------------------------------------


def test_a_run_of_2000_gpu_hours_pays_the_cap_for_each_whole_month() -> None:
    bill = _capped(2000.0)
    # 2000 h = two whole 730-h months at the cap (730 × 0.3402 = 248.35 > 212.30) and 540 h of a
    # third month at the hourly rate (183.71, under the cap)
    assert bill.items["compute"] == pytest.approx(2 * CAP + 540 * PRICE)
    assert bill.items["compute"] < 2000 * PRICE - 2 * (730 * PRICE - CAP) + 1e-9
    # two servers, each capped on its own
    assert _capped(2000.0, nodes=2).items["compute"] == pytest.approx(2 * (2 * CAP + 540 * PRICE))


def test_a_run_of_100_hours_pays_the_hourly_rate() -> None:
    bill = _capped(100.0)
    assert bill.items["compute"] == 100 * PRICE
    assert bill.items["compute"] == _capped(100.0, monthly_cap_usd=None).items["compute"]


def test_the_cap_binds_from_the_hour_the_month_reaches_it() -> None:
    boundary = CAP / PRICE
    assert 624 < boundary < 625
    assert _capped(624.0).items["compute"] == pytest.approx(624 * PRICE)  # 212.28, under
    assert _capped(625.0).items["compute"] == CAP  # 212.63 by the hour: the cap
    assert _capped(624.5).items["compute"] == CAP  # billed as 625 whole hours
    assert _capped(730.0).items["compute"] == CAP  # exactly one month
    assert _capped(731.0).items["compute"] == pytest.approx(CAP + PRICE)  # a new month's first hour
    assert _capped(1460.0).items["compute"] == pytest.approx(2 * CAP)


def test_capped_cost_rounds_the_part_month_and_charges_the_minimum_once() -> None:
    # per second with a 60 s minimum: a 10 s job pays a minute
    assert capped_cost(10 / 3600, 3.6, 1000.0, "second", 60 / 3600) == pytest.approx(0.06)
    # after a whole (capped) month the minimum is spent: 10 s more bill 10 s
    assert capped_cost(730 + 10 / 3600, 3.6, 1000.0, "second", 60 / 3600) == pytest.approx(1000.0 + 0.01)
    # hourly: 0.1 h of a new month is a whole hour
    assert capped_cost(730.1, PRICE, CAP, "hour") == pytest.approx(CAP + PRICE)
    assert capped_cost(0.0, PRICE, CAP, "hour") == 0.0


def test_a_capped_server_is_held_across_runs_and_gaps_and_idles_for_nothing() -> None:
    # 5 runs of 200 h, 4 gaps of 24 h: 1096 h held, a capped month and 366 h
    data = JobData(0.0, 0.0, 0.0, 0.0, runs=5, idle_hours=24.0)
    bill = _capped(200.0, data)
    assert bill.items["compute"] == pytest.approx(CAP + 366 * PRICE)
    assert bill.items["idle"] == 0.0 and "stopped_instance_bills" not in bill.missing_facts
    # without the cap the same server bills every hour: 1000 h of runs, 96 h of gaps (it bills stopped)
    hourly = _capped(200.0, data, monthly_cap_usd=None)
    assert hourly.items["compute"] == pytest.approx(1000 * PRICE)
    assert hourly.items["idle"] == pytest.approx(96 * PRICE)
    assert bill.total_usd < hourly.total_usd
    assert held_for_experiment("hour", CAP) and not held_for_experiment("hour")


def test_the_set_up_fee_is_charged_once_beside_the_capped_months() -> None:
    bill = _capped(2000.0, setup_fee_usd=209.0, nodes=2)
    assert bill.items["fees"] == 2 * 209.0
    assert bill.items["compute"] == pytest.approx(2 * (2 * CAP + 540 * PRICE))


def test_spot_rework_is_the_capped_cost_of_the_wall_time_beyond_the_work() -> None:
    bill = _capped(1500.0, wall=2000.0)
    assert bill.items["compute"] == pytest.approx(2 * CAP + 40 * PRICE)
    assert bill.items["spot_rework"] == pytest.approx((2 * CAP + 540 * PRICE) - (2 * CAP + 40 * PRICE))


def test_no_cap_applies_to_a_serverless_or_month_billed_offer() -> None:
    for rules in ({"serverless": True}, {"granularity": "month"}):
        capped = _capped(2000.0, **rules)
        plain = _capped(2000.0, monthly_cap_usd=None, **rules)
        assert capped.items == plain.items


@settings(max_examples=200, deadline=None)
@given(
    hours=st.floats(min_value=0.0, max_value=20_000.0, allow_nan=False),
    more=st.floats(min_value=0.0, max_value=2_000.0, allow_nan=False),
    cap=st.floats(min_value=1.0, max_value=500.0, allow_nan=False),
)
def test_a_capped_bill_never_exceeds_the_hourly_one_or_the_cap_per_month(
    hours: float, more: float, cap: float
) -> None:
    got = capped_cost(hours, PRICE, cap, "hour")
    assert got <= billed_hours(hours, "hour") * PRICE * (1 + 1e-12)
    assert got <= math.ceil(hours / HOURS_PER_MONTH + 1e-12) * cap * (1 + 1e-12) + 1e-12
    # holding longer never costs less
    assert capped_cost(hours + more, PRICE, cap, "hour") >= got - 1e-9


# --- one run's cost (cost_usd) is capped as the bill's compute is ---------------------------------


def test_one_run_of_2000_hours_costs_the_cap_for_each_whole_month_not_the_hourly_rate() -> None:
    # the single-run cost (the mart's cost_usd) used to be billed hours × price whatever the cap:
    # 2000 × 0.3402 = 680.40, where the bill's compute is two capped months and 540 h
    capped = run_cost(2000.0, PRICE, "hour", monthly_cap=CAP)
    assert capped == pytest.approx(2 * CAP + 540 * PRICE)
    assert capped < run_cost(2000.0, PRICE, "hour") == 2000 * PRICE
    assert capped == _capped(2000.0).items["compute"]  # the same number as the bill, bit for bit
    # per instance: two servers each capped
    two = run_cost(2000.0, PRICE, "hour", nodes=2, monthly_cap=CAP)
    assert two == _capped(2000.0, nodes=2).items["compute"]


def test_one_short_run_under_the_cap_costs_the_hourly_rate() -> None:
    assert run_cost(100.0, PRICE, "hour", monthly_cap=CAP) == run_cost(100.0, PRICE, "hour") == 100 * PRICE
    # a run that reaches the cap inside its only month costs the cap, not 700 h × price
    assert run_cost(700.0, PRICE, "hour", monthly_cap=CAP) == CAP


def test_the_cap_applies_only_to_an_hourly_rate_held_as_an_instance() -> None:
    assert applicable_cap(CAP, "hour") == CAP
    assert applicable_cap(CAP, "second") == CAP
    assert applicable_cap(CAP, "month") is None  # the month is already the price
    assert applicable_cap(CAP, "second", serverless=True) is None  # nothing held to reach a cap
    assert applicable_cap(None, "hour") is None


@settings(max_examples=200, deadline=None)
@given(
    hours=st.floats(min_value=0.0, max_value=5_000.0, allow_nan=False),
    extra=st.floats(min_value=0.0, max_value=2_000.0, allow_nan=False),
    cap=st.floats(min_value=1.0, max_value=500.0, allow_nan=False),
)
def test_one_run_costs_what_a_one_run_bill_bills_for_its_gpu_time(
    hours: float, extra: float, cap: float
) -> None:
    # a single run's cost is the bill's compute plus its spot rework: the same wall hours at the
    # same capped months, so the two figures `estimate` shows can never disagree
    wall = hours + extra
    bill = _capped(hours, wall=wall, monthly_cap_usd=cap)
    one = run_cost(wall, PRICE, "hour", monthly_cap=cap)
    assert one == pytest.approx(bill.items["compute"] + bill.items["spot_rework"], rel=1e-12, abs=1e-9)
    assert one <= math.ceil(wall / HOURS_PER_MONTH + 1e-12) * cap * (1 + 1e-12) + 1e-12


# --- the mart: its SQL equals the bill -------------------------------------------------------------


def test_cost_frame_equals_the_capped_bill() -> None:
    hourly = {**L4_ONE, "billing_granularity": "per_hour", "minimum_charge_seconds": None, **_facts(FULL)}
    rows = (
        # binds within the first hours of a month (0.708 $/h, $2 a month)
        {**hourly, "provider": "tight", "monthly_price_cap_usd": 2.0, "setup_fee_usd": 209.0},
        # never binds
        {**hourly, "provider": "loose", "monthly_price_cap_usd": 1e6},
        {**hourly, "provider": "uncapped"},
        # a cap stated where it cannot apply: a serverless function, a month-billed rental
        {**hourly, "provider": "fn", "serverless": True, "monthly_price_cap_usd": 2.0},
        {**hourly, "provider": "month", "billing_granularity": "per_month", "monthly_price_cap_usd": 2.0},
        # spot on a capped rate: the rework is capped too
        {
            **hourly,
            "provider": "spot",
            "pricing_type": "spot",
            "is_spot": True,
            "price_source": "market",
            "monthly_price_cap_usd": 2.0,
        },
    )
    jobs = [
        FinetuneJob("one", "Qwen/Qwen2.5-0.5B", Job(method="lora"), 200_000_000, 1.0),
        FinetuneJob(
            "shape",
            "Qwen/Qwen2.5-0.5B",
            Job(method="lora"),
            20_000_000,
            2.0,
            Experiment(dataset_gb=50.0, checkpoint_every_steps=50, download="merged", runs=5, idle_hours=0.5),
        ),
    ]
    con = connect(":memory:")
    got = ft.cost_frame(con, jobs, MODELS, _offers(*rows)).to_dicts()
    expected = reference_rows(jobs, MODELS, _offers(*rows))
    assert_same_rows(got, expected)
    by = {(r["job_id"], r["provider"]): r for r in expected if r["priced"]}
    # the rows reach the rule: the tight cap bills less than the same rate uncapped, the loose
    # one the same (below), and neither idles where the uncapped server does
    for job_id in ("one", "shape"):
        tight, plain = by[(job_id, "tight")], by[(job_id, "uncapped")]
        assert tight["compute_usd"] < plain["compute_usd"]
        assert tight["compute_usd"] == 2.0 * tight["nodes_used"]  # a month at most, held once
        assert tight["fees_usd"] == 209.0 * tight["nodes_used"]
    assert by[("shape", "uncapped")]["idle_usd"] > 0
    assert by[("shape", "tight")]["idle_usd"] == by[("shape", "loose")]["idle_usd"] == 0
    assert by[("one", "loose")]["compute_usd"] == by[("one", "uncapped")]["compute_usd"]
    assert by[("one", "spot")]["spot_rework_usd"] == 0  # the wall time bills no more once capped
    # one run's cost is capped as its bill is: both runs fit in a month, so a run on the tight
    # offer costs the lesser of its hours at the rate and the month's cap, on the loose one the
    # hourly rate, as uncapped ("one" is past the cap, a run of "shape" under it)
    for job_id in ("one", "shape"):
        tight, plain = by[(job_id, "tight")], by[(job_id, "uncapped")]
        assert tight["cost_usd"] == tight["on_demand_cost_usd"]
        assert tight["cost_usd"] == min(plain["cost_usd"], 2.0 * tight["nodes_used"])
        assert tight["usd_per_million_tokens"] == tight["cost_usd"] / tight["train_tokens"] * 1e6
        assert by[(job_id, "loose")]["cost_usd"] == plain["cost_usd"]
        # a cap stated where it cannot apply changes nothing
        assert by[(job_id, "fn")]["cost_usd"] is not None
    assert by[("one", "tight")]["cost_usd"] == by[("one", "tight")]["compute_usd"] == 2.0
    assert by[("one", "tight")]["cost_usd"] < by[("one", "uncapped")]["cost_usd"]
    spot = by[("one", "spot")]
    assert spot["expected_spot_cost_usd"] == spot["cost_usd"] == 2.0 * spot["nodes_used"]
    assert spot["on_demand_cost_usd"] is None


# --- the warehouse and `estimate` ------------------------------------------------------------------

runner = CliRunner()
T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
EUR_USD = 1.1
L40S = {"gpu_name_raw": "L40S", "gpu_count": 1.0, "gpu_memory_gb_raw": 48.0}
# Qwen2.5-7B LoRA on one L40S, sized by `_long_run` to two whole months and a part under the cap
JOB = ["estimate", "--model", "Qwen2.5-7B", "--method", "lora", "--download", "none"]


def _long_run() -> list[str]:
    """The estimate command for a run of two 730-hour months plus half the hours the cap buys (about
    1,770 h), whatever the time model's speed: scaled from the hours of a 1B-token run."""
    probe = runner.invoke(app, [*JOB, "--tokens", "1B", "--json"])
    assert probe.exit_code == 0, probe.output
    hours_per_billion = json.loads(probe.output)[0]["estimated_hours"]
    target = 2 * 730 + CAP / PRICE / 2
    return [*JOB, "--tokens", f"{round(target / hours_per_billion * 1000)}M"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    con.execute(
        "insert into core.providers (provider, display_name, billing_granularity, spot_kind, serverless) "
        "values ('capped', 'Capped dedicated servers', 'per_hour', 'none', false)"
    )
    con.execute(
        "insert into core.provider_storage (provider, storage_persists_on_stop, volume_price_per_gb_month, "
        "stopped_instance_bills, boot_minutes, internet_gbits_per_s, currency) values "
        "('capped', true, 0, true, 10, 1, 'EUR')"
    )
    con.execute(f"insert into core.fx_rates values ('EUR', '2026-11-28', {EUR_USD}, 'ecb', 'r0', now())")
    offer = make_offer(
        "gex-l40s",
        PRICE,
        "capped",
        region="fsn1",
        currency="EUR",
        setup_fee=209.0,
        monthly_price_cap=CAP,
        **L40S,
    )
    load_offers(con, "r1", "capped", [offer], now=T0)
    build_marts(con, finetune=build_finetune_marts)
    con.close()
    return tmp_path


def test_the_cap_reaches_the_offers_mart_in_its_currency_and_in_usd(home: Path) -> None:
    con = connect(home / "warehouse.duckdb", read_only=True)
    cap, cap_usd = con.execute(
        "select monthly_price_cap, monthly_price_cap_usd from marts.gpu_offers where provider = 'capped'"
    ).fetchall()[0]
    con.close()
    assert (cap, cap_usd) == (CAP, pytest.approx(CAP * EUR_USD))


def test_estimate_bills_a_run_past_two_months_at_the_cap(home: Path) -> None:
    long = _long_run()
    result = runner.invoke(app, [*long, "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    hours, price, cap = row["estimated_hours"], PRICE * EUR_USD, CAP * EUR_USD
    assert 2 * 730 < hours < 2 * 730 + CAP / PRICE  # two whole months and a part under the cap
    rest = billed_hours(hours - 2 * 730, "hour")
    assert row["compute_usd"] == pytest.approx(2 * cap + rest * price)
    assert row["compute_usd"] < billed_hours(hours, "hour") * price  # what the hourly rate alone bills
    assert row["fees_usd"] == pytest.approx(209.0 * EUR_USD)
    # the run's own cost is the capped compute too, not 1,700-odd hours at the hourly rate
    assert row["cost_usd"] == pytest.approx(row["compute_usd"])
    assert row["billing_rule"] == "€0.34/h, at most €212.30/month + €209.00 set-up, billed per hour"
    bill = runner.invoke(app, [*long, "--bill"])
    assert bill.exit_code == 0, bill.output
    assert f"{row['compute_usd']:.2f}" in bill.output
    assert "at most €212.30/month" in " ".join(bill.output.split())


def test_a_cap_that_is_not_a_positive_number_is_quarantined() -> None:
    good, bad = validate(
        [
            make_offer("a", 1.0, "capped", monthly_price_cap=0.0),
            make_offer("b", 1.0, "capped", monthly_price_cap=float("nan")),
            make_offer("c", 1.0, "capped", monthly_price_cap=100.0),
            make_offer("d", 1.0, "capped"),
        ]
    )
    assert [r["instance_type"] for r in good] == ["c", "d"]
    assert all(reason.startswith("monthly_price_cap is not a positive number") for reason, _ in bad)


def test_a_cap_stated_later_keeps_the_price_interval_and_is_updated_in_place(tmp_path: Path) -> None:
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    load_offers(con, "r1", "linode", [make_offer("g1-gpu-rtx6000-1", 1.5, "linode")], now=T0)
    capped = make_offer("g1-gpu-rtx6000-1", 1.5, "linode", monthly_price_cap=1000.0)
    load_offers(con, "r2", "linode", [capped], now=T0.replace(hour=13))
    rows = con.execute(
        "select valid_to, monthly_price_cap from core.offer_prices where provider = 'linode'"
    ).fetchall()
    con.close()
    assert rows == [(None, 1000.0)]
