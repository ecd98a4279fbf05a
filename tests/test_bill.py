"""The whole bill (finetune.cost.itemized_bill): its items, the sizes a job carries, the experiment
options, the provider facts the warehouse joins to offers, and rankings built from providers'
published numbers.

The provider rows of tests/fixtures/bill/provider_storage.csv are this file's own (the benchmark
benchmarks/bill_ranking.py reads them too until the facts seed lands), in the seed's schema, from
the providers' published pages (checked 2026-12-02); what a page does not state is left empty:

* aws: EBS gp3 $0.08 per GB-month in us-east-1 (https://aws.amazon.com/ebs/pricing/); data transfer
  out to the internet $0.09 per GB after 100 GB free per month, data transfer in $0.00 per GB
  (https://aws.amazon.com/ec2/pricing/on-demand/); a stopped instance is not billed for instance
  usage, its EBS volumes are (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Stop_Start.html).
* runpod: network volumes $0.07 per GB-month below 1 TB
  (https://docs.runpod.io/get-started/billing-information); "no additional fees for data ingress or
  egress" (https://docs.runpod.io/pods/pricing); a stopped pod bills its volume, not its GPU.
* azure: a VM stopped from inside the OS ("Stopped", not deallocated) is still billed for compute
  (https://learn.microsoft.com/en-us/azure/virtual-machines/states-billing); its egress, volume and
  rates are left empty here, to exercise the unpublished path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import warehouse.finetune_marts as ft
from finetune import FinetuneJob, Job, billed_hours, expected_spot_hours
from finetune.cost import (
    BILL_ITEMS,
    FACTS,
    JobData,
    ProviderFacts,
    checkpoint_gb,
    checkpoint_interval_hours,
    itemized_bill,
    job_data,
    model_download_gb,
    result_gb,
    tokens_per_gpu_step,
)
from finetune.job import DATASET_BYTES_PER_TOKEN, Experiment
from finetune.memory import adapter_params
from flows.cli import app
from flows.job_options import JobOptions, parse_checkpoint_every, parse_duration_hours
from tests.factories import make_offer
from tests.test_finetune_marts import H100_NODE, L4_ONE, OFFER_SCHEMA
from tests.test_finetune_scale import assert_same_rows, reference_rows
from warehouse.db import connect, load_seeds, migrate, open_warehouse
from warehouse.finetune_marts import build_finetune_marts
from warehouse.load import load_offers
from warehouse.marts import build_marts
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
LLAMA_70B = MODELS["meta-llama/Llama-3.1-70B"]

# the rows above, this file's own fixture (not the facts seed)
FACTS_CSV = (Path(__file__).parent / "fixtures" / "bill" / "provider_storage.csv").read_text(encoding="utf-8")
AWS = ProviderFacts(
    storage_persists_on_stop=True,
    volume_usd_per_gb_month=0.08,
    egress_usd_per_gb=0.09,
    egress_free_gb_per_month=100.0,
    ingress_usd_per_gb=0.0,
    stopped_instance_bills=False,
)
RUNPOD = ProviderFacts(
    storage_persists_on_stop=True,
    volume_usd_per_gb_month=0.07,
    egress_usd_per_gb=0.0,
    ingress_usd_per_gb=0.0,
    stopped_instance_bills=False,
)
AZURE = ProviderFacts(stopped_instance_bills=True)
# a fully stated provider, to reach every item: boots in 5 min, 10 Gb/s internet, 2 GB/s disk
FULL = ProviderFacts(
    storage_persists_on_stop=False,
    egress_usd_per_gb=0.05,
    egress_free_gb_per_month=1.0,
    ingress_usd_per_gb=0.01,
    stopped_instance_bills=True,
    boot_minutes=5.0,
    internet_gbits_per_s=10.0,
    disk_write_gbytes_per_s=2.0,
)
DATA = JobData(
    dataset_gb=50.0, model_download_gb=16.0, checkpoint_gb=1.0, result_gb=16.0, runs=5, idle_hours=0.5
)


def _bill(facts: ProviderFacts, data: JobData = DATA, hours: float = 10.0, wall: float | None = None) -> Any:
    return itemized_bill(
        hours=hours,
        wall_hours=hours if wall is None else wall,
        price_per_hour=2.0,
        granularity="second",
        minimum_hours=0.0,
        nodes=1,
        interval_hours=1.0,
        data=data,
        facts=facts,
    )


# --- the items ------------------------------------------------------------------------------------


def test_every_item_of_a_fully_stated_provider() -> None:
    bill = _bill(FULL, wall=12.0)
    items = bill.items
    assert items["compute"] == 5 * 10.0 * 2.0
    assert items["spot_rework"] == 5 * 2.0 * 2.0  # 2 h of rework per run
    # nothing persists: model and dataset move every session, 66 GB × 5 at 10 Gb/s, 5 boots
    assert items["setup"] == pytest.approx((5 * 5 / 60 + 5 * 66 * 8 / 10 / 3600) * 2.0)
    assert items["storage"] == 0.0
    assert items["checkpoint"] == pytest.approx(5 * 10 * 1.0 / 2.0 / 3600 * 2.0)  # 10 writes a run
    assert items["egress"] == pytest.approx((5 * 16 - 1) * 0.05)
    assert items["ingress"] == pytest.approx(5 * 66 * 0.01)
    assert items["idle"] == 4 * 0.5 * 2.0  # stopped-and-billed: the 4 gaps at the instance price
    assert bill.total_usd == pytest.approx(sum(items.values()))
    assert bill.unknown_items == () and bill.missing_facts == ()


def test_unpublished_facts_leave_their_items_unknown_and_named() -> None:
    bill = _bill(ProviderFacts())
    assert bill.unknown_items == ("setup", "storage", "checkpoint", "egress", "ingress", "idle")
    assert bill.missing_facts == FACTS
    # the total is what is known: compute (and rework, none on demand)
    assert bill.total_usd == bill.items["compute"] == 5 * 10.0 * 2.0 and bill.items["spot_rework"] == 0.0


def test_an_item_of_zero_quantity_is_zero_whatever_the_facts() -> None:
    one_run = JobData(dataset_gb=1.0, model_download_gb=1.0, checkpoint_gb=1.0, result_gb=0.0)
    bill = _bill(ProviderFacts(), one_run, hours=0.5)  # no idle gap, no download, no checkpoint
    assert bill.items["idle"] == bill.items["egress"] == bill.items["checkpoint"] == 0.0
    assert bill.missing_facts == (
        "storage_persists_on_stop",
        "volume_price_per_gb_month",
        "ingress_price_per_gb",
        "boot_minutes",
        "internet_gbits_per_s",
    )


def test_storage_that_survives_moves_the_data_once() -> None:
    kept = _bill(FULL.__class__(**{**FULL.__dict__, "storage_persists_on_stop": True}))
    lost = _bill(FULL)
    # five boots either way; the 66 GB crosses the network once instead of five times
    transfer = 66 * 8 / 10 / 3600 * 2.0
    assert lost.items["setup"] - kept.items["setup"] == pytest.approx(4 * transfer)
    assert kept.items["ingress"] == pytest.approx(66 * 0.01)
    # persisting without a published volume price: its storage is unknown, not free
    assert kept.items["storage"] is None and "volume_price_per_gb_month" in kept.missing_facts


def test_storage_is_the_volume_price_over_the_experiment() -> None:
    bill = _bill(AWS, wall=12.0)
    hours = 5 * 12.0 + 4 * 0.5
    assert bill.items["storage"] == pytest.approx(0.08 * (50 + 16 + 1) * hours / 730)


def test_compute_and_rework_are_the_spot_cost_of_every_run() -> None:
    wall = expected_spot_hours(10.0, 0.05, 1.0, 0.25)
    bill = _bill(RUNPOD, wall=wall)
    spot_cost = billed_hours(wall, "second") * 2.0
    assert bill.items["compute"] + bill.items["spot_rework"] == pytest.approx(5 * spot_cost)


@settings(max_examples=200, deadline=None)
@given(
    runs=st.integers(1, 10),
    idle=st.floats(0, 5),
    result=st.floats(0, 500),
    free=st.one_of(st.none(), st.floats(0, 200)),
    stopped=st.sampled_from([None, True, False]),
    persists=st.sampled_from([None, True, False]),
)
def test_total_adds_the_known_items_and_never_falls_below_compute(
    runs: int, idle: float, result: float, free: float | None, stopped: bool | None, persists: bool | None
) -> None:
    facts = ProviderFacts(
        storage_persists_on_stop=persists,
        egress_usd_per_gb=0.09,
        egress_free_gb_per_month=free,
        stopped_instance_bills=stopped,
    )
    data = JobData(10.0, 16.0, 1.0, result, runs, idle)
    bill = _bill(facts, data)
    known = [v for v in bill.items.values() if v is not None]
    assert all(v >= 0 for v in known)
    assert bill.total_usd == pytest.approx(sum(known)) and bill.total_usd >= bill.items["compute"]
    assert (bill.items["idle"] is None) == (runs > 1 and idle > 0 and stopped is None)


# --- what a job carries ------------------------------------------------------------------------


def test_checkpoint_of_full_fine_tuning_is_weights_and_optimizer_states() -> None:
    fjob = FinetuneJob("f", LLAMA_8B.model_id, Job(method="full"), 10**8, 1.0)
    # bf16-mixed AdamW: bf16 weights 2 + fp32 master 4 + m, v 8 = 14 B/param; gradients not saved
    assert checkpoint_gb(LLAMA_8B, fjob) == pytest.approx(LLAMA_8B.params * 14 / 1e9)
    assert result_gb(LLAMA_8B, fjob) == model_download_gb(LLAMA_8B) == LLAMA_8B.params * 2 / 1e9


def test_checkpoint_of_lora_is_the_adapters_and_their_optimizer_state() -> None:
    job = Job(method="lora")
    fjob = FinetuneJob("l", LLAMA_8B.model_id, job, 10**8, 1.0)
    adapters = adapter_params(LLAMA_8B, job)
    # fp32 adapters under bf16-mixed (their own master copy) + AdamW m, v in fp32; no frozen base
    assert checkpoint_gb(LLAMA_8B, fjob) == pytest.approx(adapters * (4 + 8) / 1e9)
    assert result_gb(LLAMA_8B, fjob) == pytest.approx(adapters * 4 / 1e9)
    merged = FinetuneJob("m", LLAMA_8B.model_id, job, 10**8, 1.0, Experiment(download="merged"))
    assert result_gb(LLAMA_8B, merged) == model_download_gb(LLAMA_8B)
    nothing = FinetuneJob("n", LLAMA_8B.model_id, job, 10**8, 1.0, Experiment(download="none"))
    assert result_gb(LLAMA_8B, nothing) == 0.0


def test_dataset_defaults_to_its_tokens_at_four_bytes_each() -> None:
    fjob = FinetuneJob("d", LLAMA_8B.model_id, Job(), 250_000_000, 3.0)
    assert fjob.dataset_gb == 250_000_000 * DATASET_BYTES_PER_TOKEN / 1e9 == 1.0  # epochs do not copy it
    stated = FinetuneJob("d", LLAMA_8B.model_id, Job(), 250_000_000, 3.0, Experiment(dataset_gb=50.0))
    assert job_data(LLAMA_8B, stated).dataset_gb == 50.0


def test_experiment_refuses_what_cannot_run() -> None:
    with pytest.raises(ValueError, match="not both"):
        Experiment(checkpoint_every_hours=1.0, checkpoint_every_steps=500)
    assert Experiment().every_hours == 0.5 and Experiment(checkpoint_every_steps=500).every_hours is None
    with pytest.raises(ValueError, match="runs"):
        Experiment(runs=0)
    with pytest.raises(ValueError, match="no adapter"):
        FinetuneJob("f", LLAMA_8B.model_id, Job(method="full"), 1, 1.0, Experiment(download="adapter"))


def test_a_step_interval_is_those_steps_of_the_run() -> None:
    fjob = FinetuneJob(
        "s", LLAMA_8B.model_id, Job(seq_len=4096, micro_batch=2, grad_accumulation=4), 10**9, 1
    )
    per_step = tokens_per_gpu_step(fjob)
    assert per_step == 2 * 4096 * 4
    steps = 10**9 / (per_step * 8)  # on 8 GPUs
    assert checkpoint_interval_hours(None, 500, 20.0, 10**9, per_step, 8) == pytest.approx(500 / steps * 20.0)
    assert checkpoint_interval_hours(0.75, None, 20.0, 10**9, per_step, 8) == 0.75


# --- the options -------------------------------------------------------------------------------


def test_checkpoint_every_takes_minutes_hours_or_steps() -> None:
    assert parse_checkpoint_every("30m") == (0.5, None)
    assert parse_checkpoint_every("1h") == (1.0, None)
    assert parse_checkpoint_every("500steps") == (None, 500)
    assert parse_duration_hours("90s", "--idle") == pytest.approx(0.025)
    for bad in ("often", "0m", "0steps"):
        with pytest.raises(typer.Exit):
            parse_checkpoint_every(bad)
    with pytest.raises(typer.Exit):
        parse_duration_hours("half an hour", "--idle")


def test_job_options_make_the_experiment() -> None:
    options = JobOptions(
        method="lora", dataset_gb=50.0, checkpoint_every="1h", download="merged", runs=5, idle="30m"
    )
    assert options.experiment() == Experiment(50.0, 1.0, None, "merged", 5, 0.5)
    with pytest.raises(typer.Exit):
        JobOptions(method="full", download="adapter").experiment()


# --- billing rules: a month-billed rental, a set-up fee, serverless ----------------------------


def _ruled(granularity: Any = "second", data: JobData = DATA, hours: float = 10.0, **rules: Any) -> Any:
    return itemized_bill(
        hours=hours,
        wall_hours=hours,
        price_per_hour=2.0,
        granularity=granularity,
        minimum_hours=0.0,
        nodes=2,
        interval_hours=1.0,
        data=data,
        facts=FULL,
        **rules,
    )


def test_a_month_is_730_hours_rounded_up_whole() -> None:
    assert billed_hours(5.0, "month") == 730.0
    assert billed_hours(730.0, "month") == 730.0  # exactly one month is one month
    assert billed_hours(730.5, "month") == 1460.0
    assert billed_hours(0.0, "month") == 0.0


def test_a_five_hour_job_on_a_month_billed_rental_pays_a_month_and_its_setup_fee() -> None:
    one = JobData(dataset_gb=1.0, model_download_gb=1.0, checkpoint_gb=1.0, result_gb=0.0)
    bill = _ruled("month", one, hours=5.0, setup_fee_usd=79.0)
    assert bill.items["compute"] == 730.0 * 2.0 * 2  # a whole month of both instances
    assert bill.items["fees"] == 79.0 * 2  # once per instance
    assert bill.total_usd >= 730.0 * 2.0 * 2 + 79.0 * 2


def test_a_month_billed_rental_is_held_across_runs_and_gaps() -> None:
    # 5 runs of 10 h with 4 gaps of 0.5 h: 52 h, one month, not five; the gaps are inside it
    bill = _ruled("month")
    assert bill.items["compute"] == 730.0 * 2.0 * 2
    assert bill.items["idle"] == 0.0
    # billed per second the same experiment pays every run and, a stopped instance billing, the gaps
    per_second = _ruled("second")
    assert per_second.items["compute"] == 5 * 10.0 * 2.0 * 2
    assert per_second.items["idle"] == 4 * 0.5 * 2.0 * 2
    # 80 runs of 10 h and 79 gaps: 839.5 h, two months
    long = _ruled("month", JobData(1.0, 1.0, 1.0, 0.0, runs=80, idle_hours=0.5))
    assert long.items["compute"] == 1460.0 * 2.0 * 2


def test_a_fee_is_charged_once_per_experiment_and_none_stated_is_none() -> None:
    assert _ruled(setup_fee_usd=10.0).items["fees"] == 10.0 * 2  # 5 runs, one fee per instance
    assert _ruled().items["fees"] == 0.0
    assert "fees" not in _ruled().unknown_items


def test_serverless_bills_no_idle_time_even_where_a_stopped_instance_would() -> None:
    assert FULL.stopped_instance_bills is True
    bill = _ruled(serverless=True)
    assert bill.items["idle"] == 0.0 and "stopped_instance_bills" not in bill.missing_facts
    assert _ruled(serverless=False).items["idle"] > 0
    # unpublished idle rules do not matter either: nothing runs between runs
    unknown = itemized_bill(
        hours=1.0,
        wall_hours=1.0,
        price_per_hour=2.0,
        granularity="second",
        minimum_hours=0.0,
        nodes=1,
        interval_hours=1.0,
        data=DATA,
        facts=ProviderFacts(),
        serverless=True,
    )
    assert unknown.items["idle"] == 0.0 and "stopped_instance_bills" not in unknown.missing_facts


def test_a_serverless_offer_never_spans_machines() -> None:
    from finetune.offer import node_limit
    from finetune.placement import Hardware

    hw = Hardware("H100-SXM", 8.0, 80.0, 989.0, intra_node_gbytes_per_s=450.0, inter_node_gbits_per_s=3200.0)
    assert node_limit(hw, None, 64) == 8
    assert node_limit(hw, None, 64, serverless=True) == 1


# --- the mart: facts joined to offers, every item equal to the pure bill ------------------------


def _offers(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=OFFER_SCHEMA | ft.FACT_SCHEMA)


def _facts(facts: ProviderFacts) -> dict[str, Any]:
    return dict(facts.__dict__)


def test_cost_frame_equals_the_pure_bill_for_every_experiment_and_facts() -> None:
    spot = {**L4_ONE, "pricing_type": "spot", "is_spot": True, "price_source": "market", **_facts(FULL)}
    rows = (
        {**L4_ONE, "provider": "full", **_facts(FULL)},
        {**L4_ONE, "provider": "aws", **_facts(AWS)},
        {**L4_ONE, "provider": "none"},
        {**L4_ONE, "provider": "hourly", "billing_granularity": "per_hour", **_facts(AZURE)},
        spot,
        # a bid market (0.05 interruptions/h)
        {**spot, "provider": "vast", "spot_kind": "bid"},
        # a rental paid by the month with a set-up fee: held across runs and gaps, rounded once
        {
            **L4_ONE,
            "provider": "monthly",
            "billing_granularity": "per_month",
            "setup_fee_usd": 79.0,
            **_facts(FULL),
        },
        {**spot, "provider": "monthly_spot", "billing_granularity": "per_month"},
        # serverless under facts where a stopped instance bills: still no idle
        {**L4_ONE, "provider": "serverless", "serverless": True, **_facts(FULL)},
    )
    jobs = [
        FinetuneJob("plain", "Qwen/Qwen2.5-0.5B", Job(method="lora"), 2_000_000, 1.0),
        FinetuneJob(
            "shape",
            "Qwen/Qwen2.5-0.5B",
            Job(method="lora"),
            20_000_000,
            2.0,
            Experiment(dataset_gb=50.0, checkpoint_every_steps=50, download="merged", runs=5, idle_hours=0.5),
        ),
        FinetuneJob(
            "full",
            "Qwen/Qwen2.5-0.5B",
            Job(method="full"),
            20_000_000,
            1.0,
            Experiment(checkpoint_every_hours=0.05, download="none", runs=3),
        ),
        FinetuneJob(
            "rare",
            "Qwen/Qwen2.5-0.5B",
            Job(method="lora"),
            20_000_000,
            1.0,
            Experiment(checkpoint_every_steps=10_000_000),
        ),
    ]
    con = connect(":memory:")
    got = ft.cost_frame(con, jobs, MODELS, _offers(*rows)).to_dicts()
    expected = reference_rows(jobs, MODELS, _offers(*rows))
    assert_same_rows(got, expected)
    priced = [r for r in expected if r["priced"]]
    assert priced and all(r["total_usd"] is not None for r in priced)
    # the rows reach every item and both kinds of interval
    assert {r["bill_unknown_items"] is None for r in priced} == {True, False}
    assert all(any((r[f"{item}_usd"] or 0) > 0 for r in priced) for item in BILL_ITEMS)
    never = [r for r in expected if r["unpriced_reason"] and "never finishes" in r["unpriced_reason"]]
    # both spot offers, market and bid: hundreds of hours between checkpoints
    assert sorted((r["job_id"], r["provider"]) for r in never) == [
        ("rare", "gcp"),
        ("rare", "monthly_spot"),
        ("rare", "vast"),
    ]
    # the billing rules reached the rows: fees only where a fee is stated, no idle serverless or
    # held by the month, though the facts say a stopped instance bills
    assert {r["provider"] for r in priced if r["fees_usd"] > 0} == {"monthly"}
    shaped = {r["provider"]: r for r in priced if r["job_id"] == "shape"}
    assert shaped["full"]["idle_usd"] > 0
    assert shaped["serverless"]["idle_usd"] == 0 and shaped["monthly"]["idle_usd"] == 0
    assert all(
        f"checkpoints every {r['checkpoint_interval_hours']:g} h" in r["unpriced_reason"] for r in never
    )


@pytest.fixture
def facts_warehouse(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for path in ft.Path(ft.__file__).parent.joinpath("seeds").glob("*.csv"):
        (seeds / path.name).write_bytes(path.read_bytes())
    (seeds / "provider_storage.csv").write_text(FACTS_CSV, encoding="utf-8")
    con = connect(":memory:")
    migrate(con)
    load_seeds(con, seeds)
    yield con
    con.close()


def test_read_offers_joins_the_facts_cast_and_in_usd(facts_warehouse: duckdb.DuckDBPyConnection) -> None:
    from datetime import UTC, datetime

    from tests.factories import make_offer

    now = datetime(2026, 12, 1, tzinfo=UTC)
    load_offers(facts_warehouse, "r1", "aws", [make_offer("p5.48xlarge", 55.04)], now=now)
    build_marts(facts_warehouse, finetune=lambda c: {})
    row = ft.read_offers(facts_warehouse).row(0, named=True)
    assert row["volume_usd_per_gb_month"] == 0.08 and row["egress_free_gb_per_month"] == 100.0
    assert row["storage_persists_on_stop"] is True and row["stopped_instance_bills"] is False
    assert row["boot_minutes"] is None  # empty in the seed: unpublished
    # a EUR price is converted at the latest rate; a currency without a rate is unknown
    facts_warehouse.execute("update core.provider_storage set currency = 'EUR' where provider = 'aws'")
    assert ft.read_offers(facts_warehouse)["volume_usd_per_gb_month"].to_list() == [None]
    facts_warehouse.execute(
        "insert into core.fx_rates values ('EUR', '2026-11-30', 1.05, 'ecb', 'r0', now()), "
        "('EUR', '2026-11-01', 1.2, 'ecb', 'r0', now())"
    )
    assert ft.read_offers(facts_warehouse)["volume_usd_per_gb_month"].to_list() == [
        pytest.approx(0.08 * 1.05)
    ]
    # no facts seed at all: every fact unknown, nothing fails
    facts_warehouse.execute("drop table core.provider_storage")
    assert ft.read_offers(facts_warehouse)["egress_usd_per_gb"].to_list() == [None]


# --- rankings built from providers' published numbers -------------------------------------------


def _rank(*rows: dict[str, Any], fjob: FinetuneJob) -> list[dict[str, Any]]:
    con = connect(":memory:")
    got = ft.cost_frame(con, [fjob], MODELS, _offers(*rows), max_gpus=None)
    return sorted(got.filter(got["priced"]).to_dicts(), key=lambda r: r["total_usd"])


# 70B LoRA, 50 GB dataset, hourly checkpoints, 5 runs with 30 min idle, merged download: the job of
# issue 21's "done when"
DONE_WHEN = FinetuneJob(
    "done-when",
    LLAMA_70B.model_id,
    Job(method="lora"),
    100_000_000,
    1.0,
    Experiment(dataset_gb=50.0, checkpoint_every_hours=1.0, download="merged", runs=5, idle_hours=0.5),
)


def test_same_gpu_price_free_egress_and_cheaper_volume_rank_first() -> None:
    aws = {**H100_NODE, "provider": "aws", **_facts(AWS)}
    runpod = {**H100_NODE, "provider": "runpod", "instance_type": "8x H100 SXM", **_facts(RUNPOD)}
    first, second = _rank(aws, runpod, fjob=DONE_WHEN)
    assert (first["provider"], second["provider"]) == ("runpod", "aws")
    assert first["compute_usd"] == second["compute_usd"]  # the GPU-hours alone tie
    # AWS bills 5 × 141 GB of merged weights beyond its 100 GB a month at $0.09
    assert (
        second["egress_usd"] == pytest.approx((5 * second["result_gb"] - 100) * 0.09)
        and first["egress_usd"] == 0
    )
    assert second["total_usd"] - first["total_usd"] == pytest.approx(
        second["egress_usd"] + second["storage_usd"] - first["storage_usd"]
    )


def test_a_stopped_instance_that_still_bills_pays_for_the_idle_time() -> None:
    aws = {**H100_NODE, "provider": "aws", **_facts(AWS)}
    azure = {**H100_NODE, "provider": "azure", "instance_type": "ND96isr_H100_v5", **_facts(AZURE)}
    first, second = _rank(aws, azure, fjob=DONE_WHEN)
    assert (first["provider"], second["provider"]) == ("aws", "azure")
    assert second["idle_usd"] == 4 * 0.5 * 55.04 and first["idle_usd"] == 0  # p5.48xlarge at $55.04/h
    # azure's unpublished facts are named, and left out of its total rather than guessed
    assert "egress" in second["bill_unknown_items"] and "egress_price_per_gb" in second["bill_missing_facts"]
    assert first["bill_unknown_items"] == "setup, checkpoint"


def test_one_run_with_nothing_to_download_ranks_as_gpu_hours_did() -> None:
    plain = FinetuneJob(
        "plain", LLAMA_70B.model_id, Job(method="lora"), 100_000_000, 1.0, Experiment(download="none")
    )
    aws = {**H100_NODE, "provider": "aws", **_facts(AWS), "price_usd_per_hour": 50.0}
    azure = {**H100_NODE, "provider": "azure", "instance_type": "ND96isr_H100_v5", **_facts(AZURE)}
    first, second = _rank(aws, azure, fjob=plain)
    assert first["provider"] == "aws" and first["cost_usd"] < second["cost_usd"]
    assert (
        second["idle_usd"] == 0.0
        and second["egress_usd"] == 0.0
        and math.isclose(
            first["total_usd"], first["compute_usd"] + first["storage_usd"] + first["ingress_usd"]
        )
    )


def test_plans_of_older_code_are_replanned_not_appended(facts_warehouse: duckdb.DuckDBPyConnection) -> None:
    facts_warehouse.execute("create schema if not exists marts")
    facts_warehouse.execute(
        "create table marts.finetune_plans as select 'k' as job_key, 1::bigint as hardware_key"
    )
    assert ft._reusable_plans(facts_warehouse) == set()


# --- `gpucost estimate` with the bill ---------------------------------------------------------------

runner = CliRunner()
T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
BILL_ARGS = ["--dataset-gb", "50", "--checkpoint-every", "1h", "--runs", "5", "--idle", "30m"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A warehouse with aws and azure offers and this file's facts rows in core.provider_storage."""
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    con.execute(
        "create or replace table core.provider_storage as select * from "
        "read_csv(?, header = true, auto_detect = true, sample_size = -1)",
        [str(Path(__file__).parent / "fixtures" / "bill" / "provider_storage.csv")],
    )
    load_offers(con, "r1", "aws", [make_offer("p5.48xlarge", 55.04), make_offer("g6e.xlarge", 1.861)], now=T0)
    load_offers(con, "r1", "azure", [make_offer("Standard_NC24ads_A100_v4", 3.673, "azure")], now=T0)
    build_marts(con, finetune=build_finetune_marts)
    con.close()
    return tmp_path


def test_estimate_json_ranks_by_the_whole_bill(home: Path) -> None:
    args = [
        "estimate",
        "--model",
        "Llama-3.1-8B",
        "--tokens",
        "50M",
        *BILL_ARGS,
        "--download",
        "merged",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["total_usd"] for r in rows] == sorted(r["total_usd"] for r in rows) and len(rows) == 3
    for r in rows:
        known = [r[f"{item}_usd"] for item in BILL_ITEMS if r[f"{item}_usd"] is not None]
        assert r["total_usd"] == pytest.approx(sum(known)) and r["runs"] == 5 and r["dataset_gb"] == 50.0
        assert r["checkpoint_interval_hours"] == 1.0
    aws = [r for r in rows if r["provider"] == "aws"]
    azure = next(r for r in rows if r["provider"] == "azure")
    # aws publishes its volume and egress; azure (in these rows) only that a stopped VM bills
    assert all(r["storage_usd"] > 0 and r["idle_usd"] == 0 for r in aws)
    assert azure["idle_usd"] == pytest.approx(4 * 0.5 * 3.673) and "storage" in azure["bill_unknown_items"]


def test_estimate_bill_view_itemizes_and_names_what_is_unpublished(home: Path) -> None:
    result = runner.invoke(
        app,
        ["estimate", "--model", "Llama-3.1-8B", "--tokens", "50M", *BILL_ARGS, "--bill"],
        terminal_width=200,
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "the bill of 5 run(s), 30 min idle between, 50.0 GB dataset, checkpoint every 60 min" in text
    assert "azure: storage_persists_on_stop, volume_price_per_gb_month" in text and "?" in text


def test_estimate_table_has_the_bill_and_says_what_it_covers(home: Path) -> None:
    result = runner.invoke(
        app, ["estimate", "--model", "Llama-3.1-8B", "--tokens", "50M"], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "bill $" in text and "1 run(s), 0.2 GB dataset, checkpoint every 30 min, adapter download" in text
    assert "*: aws, azure leave(s) boot_minutes" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--checkpoint-every", "often"], "write minutes or hours (30m, 1h) or steps (500steps)"),
        (["--idle", "a while"], "--idle 'a while': write a duration like 30m"),
        (["--method", "full", "--download", "adapter"], "full fine-tuning trains no adapter"),
    ],
)
def test_estimate_refuses_a_bad_experiment_in_one_line(home: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["estimate", "--model", "Llama-3.1-8B", *args])
    assert result.exit_code == 2 and message in " ".join(result.output.split())


def test_stated_hardware_knows_only_its_gpu_time() -> None:
    args = [
        "estimate",
        "--model",
        "Llama-3.1-8B",
        "--gpu",
        "H100-SXM",
        "--price-per-gpu-hour",
        "2.5",
        *BILL_ARGS,
    ]
    result = runner.invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "known (compute and spot rework); setup, storage, checkpoint, egress, ingress, idle need" in text


# --- the benchmark's comparison ---------------------------------------------------------------------


def test_benchmark_compares_the_two_rankings() -> None:
    from benchmarks.bill_ranking import compare

    rows = pl.DataFrame(
        {
            "provider": ["a", "b", "c"],
            "instance_type": ["x", "y", "z"],
            "region": ["r", "r", "r"],
            "zone": [None, None, None],
            "priced": [True, True, True],
            "cost_usd": [1.0, 2.0, 3.0],
            "compute_usd": [1.0, 2.0, 3.0],
            "spot_rework_usd": [0.0, 0.0, 0.0],
            # a's egress puts it last: the whole ranking reverses
            "total_usd": [9.0, 4.0, 3.5],
            "bill_unknown_items": [None, "egress", None],
        }
    )
    got = compare(rows)
    assert got["rho"] == pytest.approx(-1.0) and got["unknown"] == 1 and got["offers"] == 3
    assert got["mover"] == "a x (r): 1 → 3" and got["extra_max"] == pytest.approx(8.0)
    same = compare(rows.with_columns(pl.col("cost_usd").alias("total_usd")))
    assert same["rho"] == pytest.approx(1.0) and same["mover"] == "none (the top 10s rank alike)"


_maybe_price = st.one_of(st.none(), st.just(0.0), st.floats(0.001, 0.5))


@settings(max_examples=25, deadline=None)
@given(
    persists=st.sampled_from([None, True, False]),
    volume=_maybe_price,
    egress=_maybe_price,
    free=st.one_of(st.none(), st.floats(0, 500)),
    ingress=_maybe_price,
    stopped=st.sampled_from([None, True, False]),
    boot=st.one_of(st.none(), st.floats(0, 20)),
    internet=st.one_of(st.none(), st.floats(0.1, 100)),
    disk=st.one_of(st.none(), st.floats(0.05, 10)),
    runs=st.integers(1, 6),
    idle=st.sampled_from([0.0, 0.25, 1.5]),
    download=st.sampled_from(["merged", "adapter", "none"]),
    every=st.sampled_from([(0.1, None), (None, 300), (2.0, None)]),
)
def test_the_cost_view_is_the_pure_bill_for_any_facts(
    persists: bool | None,
    volume: float | None,
    egress: float | None,
    free: float | None,
    ingress: float | None,
    stopped: bool | None,
    boot: float | None,
    internet: float | None,
    disk: float | None,
    runs: int,
    idle: float,
    download: str,
    every: tuple[float | None, int | None],
) -> None:
    """Bit for bit, whatever a provider publishes or leaves empty and however the experiment runs."""
    facts = ProviderFacts(persists, volume, egress, free, ingress, stopped, boot, internet, disk)
    offer = {**L4_ONE, "provider": "any", **_facts(facts)}
    spot = {**offer, "pricing_type": "spot", "is_spot": True, "price_source": "market"}
    experiment = Experiment(None, every[0], every[1], download, runs, idle)  # type: ignore[arg-type]
    fjob = FinetuneJob("j", "Qwen/Qwen2.5-0.5B", Job(method="lora"), 5_000_000, 1.0, experiment)
    got = ft.cost_frame(connect(":memory:"), [fjob], MODELS, _offers(offer, spot)).to_dicts()
    assert_same_rows(got, reference_rows([fjob], MODELS, _offers(offer, spot)))
