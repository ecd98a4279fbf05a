"""The cost mart at scale: marts.finetune_costs as a view over small tables gives the same rows as
pricing every job on every offer with the pure finetune/ functions, and a refresh recomputes only
the plans whose job, model code or hardware changed."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warehouse.finetune_marts as ft
from finetune import FinetuneJob, Job, ModelSpec, billed_hours, expected_spot_hours
from finetune.cost import (
    BILL_ITEMS,
    ProviderFacts,
    applicable_cap,
    checkpoint_interval_hours,
    itemized_bill,
    job_data,
    run_cost,
    tokens_per_gpu_step,
)
from finetune.offer import HOST_STAGED, intra_node_gbytes_per_s
from finetune.placement import Hardware, MemoryTable, place, plan_job
from tests.factories import make_offer
from tests.test_finetune_marts import A100_80_ONE, H100_NODE, L4_ONE, OFFER_SCHEMA
from warehouse.db import connect, load_seeds, migrate
from warehouse.load import load_offers
from warehouse.marts import build_marts
from warehouse.seed_models import load_finetune_jobs, load_models

REPO = Path(__file__).resolve().parents[1]
MODELS = load_models()
T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
KEY = ("job_id", "provider", "instance_type", "region", "zone", "pricing_type")

# marts.finetune_costs' columns, in order, as the table of the previous implementation had them:
# warehouse/export.py's finetune_costs.v1, `gpucost estimate` and the report page read these.
COST_COLUMNS = (
    "job_id",
    "model_id",
    "method",
    "train_tokens",
    "provider",
    "instance_type",
    "region",
    "zone",
    "pricing_type",
    "is_spot",
    "price_source",
    "gpu_name",
    "gpu_count",
    "vram_gb",
    "price_usd_per_hour",
    "fits",
    "usable_vram_gb",
    "total_gb",
    "sharding",
    "gpus_used",
    "nodes_used",
    "gpus_per_node",
    "multi_node",
    "fabric_warning",
    "estimated_hours",
    "compute_hours",
    "comm_hours",
    "interruptions_per_hour",
    "interruption_source",
    "expected_spot_hours",
    "billing_granularity",
    "billed_hours",
    "priced",
    "unpriced_reason",
    "on_demand_cost_usd",
    "expected_spot_cost_usd",
    "cost_usd",
    "usd_per_million_tokens",
    # the whole bill (issue 21), after what the mart had before it
    *ft.BILL_COLUMNS,
)


# --- the reference: every job on every offer, one at a time, with the pure functions ----------


def reference_rows(
    jobs: list[FinetuneJob],
    models: dict[str, ModelSpec],
    offers: pl.DataFrame,
    max_nodes: int | None = None,
    max_gpus: int | None = ft.MART_MAX_GPUS,
) -> list[dict[str, Any]]:
    """What each job × offer costs, computed offer by offer as the mart did before it was a view."""
    memory = MemoryTable()
    plans: dict[tuple[str, Hardware, int], Any] = {}  # plan_job is pure: the same inputs, the same plan
    out = []
    for offer in offers.iter_rows(named=True):
        offer = {
            c: offer.get(c)
            for c in (*OFFER_SCHEMA, "memory_bandwidth_gbps", "architecture", "gpu_model", *ft.FACT_SCHEMA)
        }
        hw = Hardware(
            gpu_name=offer["gpu_name"],
            gpu_count=float(offer["gpu_count"]),
            vram_gb=float(offer["vram_gb"]),
            tensor_tflops=offer["bf16_tflops"] if offer["bf16_tflops"] is not None else offer["fp16_tflops"],
            intra_node_gbytes_per_s=intra_node_gbytes_per_s(
                offer["intra_node_gbps"],
                offer["gpu_count"],
                offer["intra_node_interconnect"],
                offer["pcie_gen"],
            ),
            inter_node_gbits_per_s=offer["inter_node_gbps"],
            memory_bandwidth_gbps=offer["memory_bandwidth_gbps"],
            architecture=offer["architecture"],
            # a box stated without peer-to-peer (rented PCIe cards whose provider states no link)
            p2p=ft.has_p2p(offer["gpu_model"]) and offer["intra_node_interconnect"] != HOST_STAGED,
            pcie_gen=offer["pcie_gen"],
            sm_count=offer["sm_count"],
            half_rate_accumulate=bool(offer["half_rate_accumulate"]),
            matmul_tflops=offer["matmul_tflops"],
            tensor_flops_per_sm_clock=offer["tensor_flops_per_sm_clock"],
        )
        if hw.gpu_count < 1 or offer.get("serverless"):
            limit = 1  # a GPU slice, or a serverless function, never spans machines
        else:
            cap = max_nodes if max_nodes is not None else math.inf
            if max_gpus is not None:
                cap = min(cap, max(1, max_gpus // hw.gpus_per_node))
            limit = int(cap) if math.isfinite(cap) else 1
        granularity = ft.GRANULARITY.get(offer["billing_granularity"] or "", "hour")
        minimum = (offer["minimum_charge_seconds"] or 0) / 3600
        rate, source = ft.interruptions_per_hour(offer)
        for fjob in jobs:
            if (fjob.job_id, hw, limit) not in plans:
                job_memory = memory.for_job(models[fjob.model_id], fjob.job)
                placement = place(job_memory, hw.gpus_per_node, hw.vram_gb, limit)
                plans[(fjob.job_id, hw, limit)] = plan_job(fjob, hw, placement, job_memory)
            plan = plans[(fjob.job_id, hw, limit)]
            row: dict[str, Any] = {
                "job_id": fjob.job_id,
                "model_id": fjob.model_id,
                "method": fjob.job.method,
                "train_tokens": fjob.train_tokens,
                **{c: offer[c] for c in COST_COLUMNS[4:15]},
                **{c: getattr(plan, c) for c in COST_COLUMNS[15:27]},
                "interruptions_per_hour": rate,
                "interruption_source": source,
                "expected_spot_hours": None,
                "billing_granularity": granularity,
                "billed_hours": None,
                "priced": False,
                "unpriced_reason": plan.unpriced_reason,
            }
            data = job_data(models[fjob.model_id], fjob)
            row |= {
                "checkpoint_interval_hours": None,
                "dataset_gb": data.dataset_gb,
                "model_download_gb": data.model_download_gb,
                "checkpoint_gb": data.checkpoint_gb,
                "result_gb": data.result_gb,
                "runs": data.runs,
                "idle_hours": data.idle_hours,
                **{f"{item}_usd": None for item in BILL_ITEMS},
                "total_usd": None,
                "bill_unknown_items": None,
                "bill_missing_facts": None,
            }
            if plan.priced and plan.estimated_hours is not None:
                hours = plan.estimated_hours
                interval = checkpoint_interval_hours(
                    fjob.experiment.every_hours,
                    fjob.experiment.checkpoint_every_steps,
                    hours,
                    fjob.train_tokens,
                    tokens_per_gpu_step(fjob),
                    plan.gpus_used,
                )
                row["checkpoint_interval_hours"] = interval
                row["priced"] = True
                if rate is not None:
                    job_rate = rate * plan.nodes_used
                    row["interruptions_per_hour"] = job_rate
                    hours = expected_spot_hours(hours, job_rate, interval, ft.RESTART_OVERHEAD_HOURS)
                    if math.isinf(hours):
                        row["priced"] = False
                        row["unpriced_reason"] = (
                            f"spot interruptions ({job_rate:.3g}/h) outpace checkpoints every "
                            f"{interval:g} h: the job never finishes"
                        )
                    else:
                        row["expected_spot_hours"] = hours
                if row["priced"]:
                    row["billed_hours"] = billed_hours(hours, granularity, minimum)
                    bill = itemized_bill(
                        hours=plan.estimated_hours,
                        wall_hours=hours,
                        price_per_hour=offer["price_usd_per_hour"],
                        granularity=granularity,
                        minimum_hours=minimum,
                        nodes=plan.nodes_used,
                        interval_hours=interval,
                        data=data,
                        facts=ProviderFacts(**{f: offer.get(f) for f in ProviderFacts.__dataclass_fields__}),
                        setup_fee_usd=offer.get("setup_fee_usd"),
                        serverless=bool(offer.get("serverless")),
                        monthly_cap_usd=offer.get("monthly_price_cap_usd"),
                    )
                    row |= {f"{item}_usd": bill.items[item] for item in BILL_ITEMS}
                    row["total_usd"] = bill.total_usd
                    row["bill_unknown_items"] = ", ".join(bill.unknown_items) or None
                    row["bill_missing_facts"] = ", ".join(bill.missing_facts) or None
            # one run's cost, capped per month where the offer's hourly rate is (finetune.cost.run_cost)
            month_cap = applicable_cap(
                offer.get("monthly_price_cap_usd"), granularity, bool(offer.get("serverless"))
            )
            cost = (
                run_cost(hours, offer["price_usd_per_hour"], granularity, plan.nodes_used, minimum, month_cap)
                if row["priced"]
                else None
            )
            row["on_demand_cost_usd"] = cost if not offer["is_spot"] else None
            row["expected_spot_cost_usd"] = cost if offer["is_spot"] else None
            row["cost_usd"] = cost
            row["usd_per_million_tokens"] = cost / fjob.train_tokens * 1e6 if cost is not None else None
            out.append(row)
    return out


def by_key(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    keyed = {tuple(r[c] for c in KEY): r for r in rows}
    assert len(keyed) == len(rows), "job × offer key not unique"
    return keyed


def assert_same_rows(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Equal row for row and column for column: the same floating-point operations give the same
    bits, so nothing is compared with a tolerance."""
    got_by, expected_by = by_key(got), by_key(expected)
    assert got_by.keys() == expected_by.keys()
    for key, row in expected_by.items():
        differ = {c: (got_by[key][c], v) for c, v in row.items() if got_by[key][c] != v}
        assert not differ, f"{key}: (view, reference) {differ}"


# --- on the replay data ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replay_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """The warehouse a `gpucost refresh --replay tests/replay` builds, opened read-only."""
    from flows.orchestration import LocalRunner, RefreshPlan, run_refresh

    home = tmp_path_factory.mktemp("gpucost-home")
    # the in-process runner: the same steps as `gpucost refresh --replay`, without Prefect
    plan = RefreshPlan(replay=str(REPO / "tests" / "replay"), home=str(home), feeds_dir=str(home / "feeds"))
    run_refresh(plan, LocalRunner())
    con = connect(home / "warehouse.duckdb", read_only=True)
    yield con
    con.close()


def test_cost_view_equals_the_pure_functions_on_replay_data(
    replay_warehouse: duckdb.DuckDBPyConnection,
) -> None:
    con = replay_warehouse
    offers = ft.read_offers(con)
    jobs = load_finetune_jobs()
    assert offers.height > 300 and offers["is_spot"].any() and len(jobs) > 400  # the whole replay
    got = con.sql("select * from marts.finetune_costs").pl()
    assert tuple(got.columns) == COST_COLUMNS
    expected = reference_rows(jobs, MODELS, offers)
    assert got.height == len(expected) == len(jobs) * offers.height
    assert_same_rows(got.to_dicts(), expected)
    # the replay data exercises what the rows can say
    kinds = got.group_by("priced", "fits", "is_spot", "multi_node").len()
    assert kinds.height >= 6
    assert got["interruption_source"].drop_nulls().unique().len() >= 2


def test_estimate_path_equals_the_pure_functions_on_replay_data(
    replay_warehouse: duckdb.DuckDBPyConnection,
) -> None:
    # an ad-hoc job (not in the grid), a node cap and no GPU cap: what `gpucost estimate` passes
    spec = MODELS["meta-llama/Llama-3.1-8B"]
    fjob = FinetuneJob("adhoc", spec.model_id, Job(method="lora", seq_len=4096), 50_000_000, 1)
    offers = ft.read_offers(replay_warehouse)
    got = ft.cost_frame(replay_warehouse, [fjob], MODELS, offers, max_nodes=8, max_gpus=None)
    assert tuple(got.columns) == COST_COLUMNS
    assert_same_rows(got.to_dicts(), reference_rows([fjob], MODELS, offers, max_nodes=8, max_gpus=None))


def test_cost_mart_is_a_view_over_small_tables(replay_warehouse: duckdb.DuckDBPyConnection) -> None:
    kinds = dict(
        replay_warehouse.execute(
            "select table_name, table_type from information_schema.tables "
            "where table_schema = 'marts' and table_name like 'finetune%'"
        ).fetchall()
    )
    assert kinds == {
        "finetune_requirements": "BASE TABLE",
        "finetune_offers": "BASE TABLE",
        "finetune_plans": "BASE TABLE",
        "finetune_costs": "VIEW",
    }
    count = lambda relation: replay_warehouse.execute(f"select count(*) from {relation}").fetchall()[0][0]  # noqa: E731
    offers, plans = count("marts.finetune_offers"), count("marts.finetune_plans")
    hardware = count("(select distinct hardware_key from marts.finetune_offers)")
    jobs = len(load_finetune_jobs())
    # what is stored grows with offers + jobs × hardware, not with jobs × offers
    assert offers == count("marts.gpu_offers") and plans == jobs * hardware
    assert hardware < offers / 2 and count("marts.finetune_costs") == jobs * offers


# --- edge cases on hand-built offers ------------------------------------------------------------


def _offers(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=OFFER_SCHEMA)


def test_cost_frame_equals_the_pure_functions_on_edge_cases() -> None:
    spot = {**H100_NODE, "pricing_type": "spot", "is_spot": True, "price_source": "market"}
    band = {**spot, "region": "us-west-2", "interruption_rate_min": 0.2, "interruption_rate_max": 1.0}
    # 1-GPU bid-market spot with a fast fabric: 70B full spread over 50 of them is interrupted
    # faster than it checkpoints (0.05/h × nodes × 0.5 h lost ≥ 1) and never finishes
    bid = {
        **A100_80_ONE,
        "provider": "vast",
        "instance_type": "1x A100",
        "pricing_type": "spot",
        "is_spot": True,
        "spot_kind": "bid",
        "vram_gb": 40.0,
        "inter_node_gbps": 3200.0,
    }
    hourly = {
        **L4_ONE,
        "provider": "vultr",
        "billing_granularity": "per_hour",
        "minimum_charge_seconds": None,
    }
    unknown = {**L4_ONE, "provider": "x", "billing_granularity": None}
    half = {**L4_ONE, "instance_type": "half", "gpu_count": 0.5, "vram_gb": 12.0}
    t4 = {**L4_ONE, "instance_type": "t4", "gpu_name": "T4", "vram_gb": 16.0, "bf16_tflops": None}
    t4_fp16 = {**t4, "instance_type": "t4-fp16", "fp16_tflops": 65.0}
    pcie_pair = {**L4_ONE, "instance_type": "2x", "gpu_count": 2.0, "intra_node_interconnect": "PCIe"}
    pcie_pair["intra_node_gbps"] = None
    no_fabric = {**H100_NODE, "provider": "runpod", "instance_type": "8x H100", "inter_node_gbps": None}
    rows = (H100_NODE, spot, band, bid, A100_80_ONE, hourly, unknown, half, t4, t4_fp16, pcie_pair, no_fabric)
    jobs = [
        FinetuneJob("tiny", "Qwen/Qwen2.5-0.5B", Job(method="lora"), 2_000_000, 1.0),
        FinetuneJob("qlora", "Qwen/Qwen2.5-7B", Job(method="qlora"), 100_000_000, 2.0),
        FinetuneJob("big", "meta-llama/Llama-3.1-70B", Job(method="full"), 1_000_000_000, 1.0),
    ]
    con = connect(":memory:")
    got = ft.cost_frame(con, jobs, MODELS, _offers(*rows))
    expected = reference_rows(jobs, MODELS, _offers(*rows))
    assert_same_rows(got.to_dicts(), expected)
    never = [r for r in expected if r["unpriced_reason"] and "never finishes" in r["unpriced_reason"]]
    assert never and all(r["instance_type"] == "1x A100" for r in never)
    assert {r["billing_granularity"] for r in expected} == {"second", "minute", "hour"}


@settings(max_examples=300, deadline=None)
@given(
    hours=st.one_of(
        st.floats(min_value=0, max_value=5000, allow_nan=False),
        st.integers(min_value=0, max_value=36000).map(lambda n: n / 3600),  # float noise: 0.1 h · 3600
        st.integers(min_value=0, max_value=600).map(lambda n: n / 60),
    ),
    granularity=st.sampled_from(["second", "minute", "hour", "month"]),
    minimum_seconds=st.sampled_from([None, 0, 60, 300, 3600]),
    rate=st.one_of(st.none(), st.floats(min_value=0, max_value=3, allow_nan=False)),
)
def test_vectorised_billing_equals_finetune_cost(
    hours: float, granularity: str, minimum_seconds: int | None, rate: float | None
) -> None:
    """_COSTS_SQL's billing over columns is finetune.billed_hours / expected_spot_hours, bit for bit."""
    minimum = (minimum_seconds or 0) / 3600
    wall = hours
    if rate is not None:
        wall = expected_spot_hours(hours, rate, ft.CHECKPOINT_INTERVAL_HOURS, ft.RESTART_OVERHEAD_HOURS)
    expected = billed_hours(wall, granularity, minimum) if math.isfinite(wall) else None  # type: ignore[arg-type]
    loss = ft._LOSS_PER_INTERRUPTION_HOURS
    sql = f"""
        with t as (
            select ?::double as h, ?::double as r, ?::double as minimum_billed_hours, ? as billing_granularity
        ), u as (
            select *, {ft._UNITS_PER_HOUR} as units_per_hour, {ft._HOURS_PER_UNIT} as hours_per_unit,
                case when r is null then h when r * {loss!r} < 1 then h / (1 - r * {loss!r}) end as w
            from t
        )
        select case when w is not null then {ft._billed_hours_sql("w")} end from u
    """
    (got,) = duckdb.execute(sql, [hours, rate, minimum, granularity]).fetchall()[0]
    assert got == expected


# --- refreshes reuse plans ----------------------------------------------------------------------


JOBS = [j for j in load_finetune_jobs() if j.model_id in ("Qwen/Qwen2.5-7B", "meta-llama/Llama-3.1-8B")]


@pytest.fixture
def warehouse() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    offers = [
        make_offer("p5.48xlarge", 55.04),
        make_offer("g6.xlarge", 0.8048),
        make_offer(
            "g6.xlarge",
            0.3412,
            pricing_type="spot",
            price_source="market",
            provider_data={"interruption_rate_min": 0.05, "interruption_rate_max": 0.1},
        ),
    ]
    load_offers(con, "r1", "aws", offers, now=T0)
    yield con
    con.close()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = ft.plan_job

    def plan_job_counted(*args: Any) -> Any:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(ft, "plan_job", plan_job_counted)
    return calls


def _build(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return build_marts(con, finetune=lambda c: ft.build_finetune_marts(c, JOBS, MODELS))


def _costs(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    return con.sql("select * from marts.finetune_costs").pl().to_dicts()


def test_next_refresh_recomputes_no_plan_when_nothing_changed(
    warehouse: duckdb.DuckDBPyConnection, counted: list[int]
) -> None:
    first = _build(warehouse)
    hardware = 2  # p5.48xlarge, g6.xlarge (its spot offer is the same hardware)
    assert counted[0] == len(JOBS) * hardware == first["marts.finetune_plans"]
    before = _costs(warehouse)
    _build(warehouse)
    assert counted[0] == len(JOBS) * hardware  # not one more
    assert_same_rows(_costs(warehouse), before)


def test_new_hardware_plans_only_the_new_hardware(
    warehouse: duckdb.DuckDBPyConnection, counted: list[int]
) -> None:
    _build(warehouse)
    offers = [make_offer("p5.48xlarge", 55.04), make_offer("g6.xlarge", 0.8048)]
    load_offers(warehouse, "r2", "aws", [*offers, make_offer("g4dn.xlarge", 0.526)], now=T0)
    counts = _build(warehouse)
    assert counted[0] == len(JOBS) * 3
    # the spot scope came back empty, so it keeps its last good price: 4 offers on 3 hardware
    assert counts["marts.finetune_plans"] == len(JOBS) * 3
    assert counts["marts.finetune_costs"] == len(JOBS) * 4
    assert_same_rows(_costs(warehouse), reference_rows(JOBS, MODELS, ft.read_offers(warehouse)))


def test_gone_hardware_and_changed_code_or_jobs_drop_their_plans(
    warehouse: duckdb.DuckDBPyConnection, counted: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _build(warehouse)
    load_offers(warehouse, "r2", "aws", [make_offer("g6.xlarge", 0.8048)], now=T0)
    assert _build(warehouse)["marts.finetune_plans"] == len(JOBS)
    assert counted[0] == len(JOBS) * 2
    # other model code: every plan is recomputed (the fingerprint is part of each job_key)
    monkeypatch.setattr(ft, "code_fingerprint", lambda: "another version of finetune/")
    assert _build(warehouse)["marts.finetune_plans"] == len(JOBS)
    assert counted[0] == len(JOBS) * 3
    # one job changed (more epochs): only its plan is recomputed, its old plan is gone
    changed = FinetuneJob(JOBS[0].job_id, JOBS[0].model_id, JOBS[0].job, JOBS[0].dataset_tokens, 3.0)
    jobs = [changed, *JOBS[1:]]
    build_marts(warehouse, finetune=lambda c: ft.build_finetune_marts(c, jobs, MODELS))
    assert counted[0] == len(JOBS) * 3 + 1
    (tokens,) = warehouse.execute(
        "select list(distinct train_tokens) from marts.finetune_plans where job_id = ?", [changed.job_id]
    ).fetchall()[0]
    assert tokens == [changed.train_tokens]
    assert_same_rows(_costs(warehouse), reference_rows(jobs, MODELS, ft.read_offers(warehouse)))


def test_a_warehouse_whose_cost_mart_was_a_table_gets_the_view(warehouse: duckdb.DuckDBPyConnection) -> None:
    warehouse.execute("create schema if not exists marts")
    warehouse.execute("create table marts.finetune_costs as select 1 as job_id")
    _build(warehouse)
    (kind,) = warehouse.execute(
        "select table_type from information_schema.tables where table_name = 'finetune_costs'"
    ).fetchall()[0]
    assert (
        kind == "VIEW" and tuple(warehouse.sql("select * from marts.finetune_costs").columns) == COST_COLUMNS
    )


def test_the_view_reads_on_a_read_only_connection(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    con = connect(path)
    migrate(con)
    load_seeds(con)
    load_offers(con, "r1", "aws", [make_offer("g6.xlarge", 0.8048)], now=T0)
    _build(con)
    con.close()
    reader = connect(path, read_only=True)
    rows = reader.execute(
        "select count(*), count(cost_usd) from marts.finetune_costs where job_id = ?",
        [next(j.job_id for j in JOBS if j.job.method == "qlora")],
    ).fetchall()
    reader.close()
    assert rows == [(1, 1)]


def test_fewest_nodes_tries_one_gpu_first_then_bisects_where_need_only_falls() -> None:
    from finetune.placement import _fewest_nodes

    # one GPU gathers nothing; two hold half the weights plus the gathered set: a toy model can
    # need more at two than at one, after which need falls as 1/k
    need = {1: 10.0, 2: 15.0, 3: 12.0, 4: 11.0, 5: 10.5}.__getitem__
    assert _fewest_nodes(need, usable=10.0, max_nodes=5) == 1
    assert _fewest_nodes(need, usable=11.5, max_nodes=5) == 1
    falling = {1: 40.0, 2: 21.0, 3: 14.0, 4: 10.5, 5: 8.4}.__getitem__
    assert _fewest_nodes(falling, usable=12.0, max_nodes=5) == 4
    assert _fewest_nodes(falling, usable=8.0, max_nodes=5) is None
    assert _fewest_nodes(falling, usable=30.0, max_nodes=1) is None


# -- what a refresh computes once per job and GPU model -----------------------------------------


def test_one_job_on_every_size_and_link_of_one_gpu_computes_its_compute_terms_once() -> None:
    """The compute terms of a step depend on the job and the GPU, not on how many share it or
    how they are linked: 1, 2, 4 and 8 H100s over NVLink or PCIe reuse one computation, and
    each StepTime carries exactly the terms an uncached computation gives."""
    from finetune.time import Accelerator, _compute_terms, step_time

    model = MODELS["meta-llama/Llama-3.1-8B"]
    job = Job(method="lora", sharding="zero2")
    # a GPU no other test builds, so the cache holds nothing of it yet
    gpu = Accelerator(tflops=987.0, memory_bandwidth_gbps=3345.0, architecture="Hopper", sm_count=131)
    before = _compute_terms.cache_info()
    steps = [step_time(model, job, gpu, n, link, True, 8) for n in (1, 2, 4, 8) for link in (450e9, 32e9)]
    after = _compute_terms.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 7)
    fresh = _compute_terms.__wrapped__(model, job, gpu, 1)
    for step in steps:
        got = (step.matmul_s, step.attention_s, step.elementwise_s, step.dequant_s, step.dispatch_s)
        assert got == (
            fresh.matmul_s,
            fresh.attention_s,
            fresh.elementwise_s,
            fresh.dequant_s,
            fresh.dispatch_s,
        )
        assert step.loss_s == fresh.loss_s
    # what does depend on the GPU count still moves: ZeRO-2's optimizer step is 1/N of the update
    assert steps[0].optimizer_s > steps[2].optimizer_s > steps[4].optimizer_s > steps[6].optimizer_s


def test_kept_memory_breakdowns_are_the_ones_computed_afresh() -> None:
    """memory_per_gpu is kept per (model, job, GPUs): a second ask returns what the first
    computed, equal to an uncached computation, and another GPU count is another entry."""
    from finetune.memory import memory_per_gpu

    model = MODELS["meta-llama/Llama-3.1-8B"]
    job = Job(method="full", sharding="zero3", seq_len=3001)  # a length no other test asks for
    first = memory_per_gpu(model, job, 4)
    assert memory_per_gpu(model, job, 4) is first
    assert first == memory_per_gpu.__wrapped__(model, job, 4)
    assert memory_per_gpu(model, job, 8) == memory_per_gpu.__wrapped__(model, job, 8) != first
