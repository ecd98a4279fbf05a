"""Fine-tuning marts: placement (fit, nodes, sharding), time, billing, spot, and the two marts."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import duckdb
import polars as pl
import pytest

from finetune import (
    FinetuneJob,
    Job,
    billed_hours,
    expected_spot_hours,
    memory_per_gpu,
)
from finetune.placement import place_at
from tests.factories import make_offer
from warehouse.db import connect, load_seeds, migrate
from warehouse.finetune_marts import (
    CHECKPOINT_INTERVAL_HOURS,
    DEFAULT_INTERRUPTIONS_PER_HOUR,
    HOURS_PER_MONTH,
    OFFER_SCHEMA,
    RESTART_OVERHEAD_HOURS,
    USABLE_VRAM_FRACTION,
    build_finetune_marts,
    cost_frame,
    interruptions_per_hour,
)
from warehouse.load import load_offers
from warehouse.marts import build_marts
from warehouse.seed_models import load_finetune_jobs, load_models

T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
MODELS = load_models()
LLAMA_70B = "meta-llama/Llama-3.1-70B"
LLAMA_8B = "meta-llama/Llama-3.1-8B"
QWEN_7B = "Qwen/Qwen2.5-7B"
QWEN_05B = "Qwen/Qwen2.5-0.5B"


H100_NODE = {
    "provider": "aws",
    "instance_type": "p5.48xlarge",
    "region": "us-east-1",
    "zone": None,
    "pricing_type": "on_demand",
    "is_spot": False,
    "price_source": "list",
    "gpu_name": "H100-SXM",
    "gpu_count": 8.0,
    "vram_gb": 80.0,
    "price_usd_per_hour": 55.04,
    "bf16_tflops": 989.0,
    "intra_node_interconnect": "NVSwitch",
    "intra_node_gbps": 900.0,
    "inter_node_gbps": 3200.0,
    "pcie_gen": 5,
    "billing_granularity": "per_second",
    "minimum_charge_seconds": 60,
    "spot_kind": "market",
    "interruption_rate_min": None,
    "interruption_rate_max": None,
}
A100_80_ONE = {
    **H100_NODE,
    "provider": "azure",
    "instance_type": "Standard_NC24ads_A100_v4",
    "gpu_name": "A100-80GB-PCIe",
    "gpu_count": 1.0,
    "price_usd_per_hour": 3.673,
    "bf16_tflops": 312.0,
    "intra_node_interconnect": "none",
    "intra_node_gbps": 0.0,
    "inter_node_gbps": None,
    "pcie_gen": 4,
    "billing_granularity": "per_minute",
    "minimum_charge_seconds": None,
}
L4_ONE = {
    **A100_80_ONE,
    "provider": "gcp",
    "instance_type": "g2-standard-4",
    "gpu_name": "L4",
    "vram_gb": 24.0,
    "price_usd_per_hour": 0.708,
    "bf16_tflops": 121.0,
    "billing_granularity": "per_second",
    "minimum_charge_seconds": 60,
}


def offers(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=OFFER_SCHEMA)


def job(model_id: str, tokens: float = 1e8, job_id: str = "j", **knobs: Any) -> FinetuneJob:
    return FinetuneJob(job_id, model_id, Job(**knobs), int(tokens), 1.0)


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(":memory:")
    yield con
    con.close()


def costs(con: duckdb.DuckDBPyConnection, jobs: list[FinetuneJob], *rows: dict[str, Any], **kw: Any) -> list:
    return cost_frame(con, jobs, MODELS, offers(*rows), **kw).to_dicts()


# --- placement -------------------------------------------------------------------------------


def test_70b_full_does_not_fit_one_a100_80gb(con: duckdb.DuckDBPyConnection) -> None:
    (row,) = costs(con, [job(LLAMA_70B, method="full")], A100_80_ONE, max_nodes=1)
    assert not row["fits"] and not row["priced"]
    assert row["cost_usd"] is None and row["estimated_hours"] is None
    assert row["unpriced_reason"].startswith("does not fit")
    # the closest miss is reported; on one GPU sharding only adds the gathered layers
    assert (row["sharding"], row["gpus_used"]) == ("none", 1)
    assert row["total_gb"] > row["usable_vram_gb"] == pytest.approx(80 * USABLE_VRAM_FRACTION)
    # the mart's default search (up to 64 GPUs) spreads it over many such instances, which have
    # no inter-node fabric: it then fits in memory but is flagged and not priced
    (spread,) = costs(con, [job(LLAMA_70B, method="full")], A100_80_ONE)
    assert spread["fits"] and spread["multi_node"] and spread["nodes_used"] > 8
    assert not spread["priced"] and "no known inter-node fabric" in spread["fabric_warning"]


def test_70b_full_on_8xh100_needs_zero3_and_fits_one_node_only_with_lean_states(
    con: duckdb.DuckDBPyConnection,
) -> None:
    # bf16-mixed AdamW keeps 18 B/param (2 + 4 + 12): 70.6e9 × 18 / 8 GPUs = 159 GB > 80 GB,
    # so one 8×H100 node is not enough; three EFA-connected nodes are (zero3 over 24 GPUs).
    (mixed,) = costs(con, [job(LLAMA_70B, method="full")], H100_NODE)
    assert mixed["fits"] and mixed["sharding"] == "zero3"
    assert (mixed["nodes_used"], mixed["gpus_used"], mixed["multi_node"]) == (3, 24, True)
    assert mixed["priced"] and mixed["fabric_warning"] is None  # EFA 3200 Gb/s
    # pure bf16 with 8-bit AdamW keeps 6 B/param: 53 GB per GPU with zero3 on one node
    lean = job(LLAMA_70B, method="full", precision="bf16-pure", optimizer="adamw8bit")
    (row,) = costs(con, [lean], H100_NODE)
    assert (row["fits"], row["sharding"], row["nodes_used"], row["gpus_used"]) == (True, "zero3", 1, 8)
    expected = memory_per_gpu(MODELS[LLAMA_70B], Job(**{**vars(lean.job), "sharding": "zero3"}), 8)
    assert row["total_gb"] == pytest.approx(expected.total_gb)
    assert row["total_gb"] <= row["usable_vram_gb"]


def test_qlora_7b_fits_one_l4(con: duckdb.DuckDBPyConnection) -> None:
    (row,) = costs(con, [job(QWEN_7B, method="qlora")], L4_ONE)
    assert (row["fits"], row["sharding"], row["gpus_used"], row["nodes_used"]) == (True, "none", 1, 1)
    assert row["total_gb"] <= 24 * USABLE_VRAM_FRACTION
    assert row["priced"] and row["cost_usd"] > 0


def test_the_fastest_sharding_that_fits_is_chosen(con: duckdb.DuckDBPyConnection) -> None:
    rows = costs(con, [job(LLAMA_8B, method="lora", job_id="lora"), job(LLAMA_8B, method="full")], H100_NODE)
    by_job = {r["job_id"]: r for r in rows}
    # replicated LoRA fits, and so do ZeRO-2 and ZeRO-3: the one with the fewest hours is priced
    # (DeepSpeed's bf16 engine runs the adapters in bf16, the HF Trainer's DDP in fp32)
    lora = by_job["lora"]
    lora_job = [job(LLAMA_8B, method="lora", job_id="lora")]
    stated = {}
    for sharding in ("none", "zero2", "zero3"):
        (row,) = costs(con, lora_job, H100_NODE, max_nodes=1, placer=partial(place_at, sharding=sharding))
        assert row["fits"] and row["sharding"] == sharding
        stated[sharding] = row["estimated_hours"]
    assert lora["sharding"] == min(stated, key=stated.__getitem__)
    assert lora["estimated_hours"] == pytest.approx(min(stated.values()))
    full = by_job["j"]
    # full 8B: DDP replicas (18 B/param = 145 GB) do not fit; ZeRO-2 over the node does
    assert memory_per_gpu(MODELS[LLAMA_8B], Job(method="full"), 8).total_gb > full["usable_vram_gb"]
    assert full["sharding"] == "zero2" and full["nodes_used"] == 1


def test_offload_job_never_uses_ddp(con: duckdb.DuckDBPyConnection) -> None:
    (row,) = costs(con, [job(LLAMA_8B, method="full", sharding="zero2", offload=True)], H100_NODE)
    assert row["sharding"] in ("zero2", "zero3")


def test_max_nodes_caps_the_search(con: duckdb.DuckDBPyConnection) -> None:
    (row,) = costs(con, [job(LLAMA_70B, method="full")], H100_NODE, max_nodes=2, max_gpus=None)
    assert not row["fits"] and row["nodes_used"] == 2 and row["sharding"] == "zero3"


# --- time, fabric, unknown hardware ------------------------------------------------------------


def test_multi_node_without_fabric_is_flagged_not_priced(con: duckdb.DuckDBPyConnection) -> None:
    no_fabric = {**H100_NODE, "provider": "runpod", "instance_type": "8x H100", "inter_node_gbps": None}
    slow = {**H100_NODE, "provider": "gcp", "instance_type": "slow", "inter_node_gbps": 100.0}
    rows = {r["provider"]: r for r in costs(con, [job(LLAMA_70B, method="full")], no_fabric, slow)}
    for row in rows.values():
        assert row["fits"] and row["multi_node"] and row["nodes_used"] == 3
        assert not row["priced"] and row["fabric_warning"]
        assert row["unpriced_reason"] == row["fabric_warning"]
        assert row["cost_usd"] is None and row["on_demand_cost_usd"] is None
        assert row["billed_hours"] is None and row["usd_per_million_tokens"] is None
    assert "no known inter-node fabric" in rows["runpod"]["fabric_warning"]
    assert "100 Gb/s" in rows["gcp"]["fabric_warning"]
    assert rows["gcp"]["estimated_hours"] > 0  # the estimate over the slow link is still shown


def test_gpu_without_bf16_tflops_fits_but_is_not_priced(con: duckdb.DuckDBPyConnection) -> None:
    t4 = {**L4_ONE, "instance_type": "n1+t4", "gpu_name": "T4", "vram_gb": 16.0, "bf16_tflops": None}
    (row,) = costs(con, [job(QWEN_05B, method="lora")], t4)
    assert row["fits"] and not row["priced"]
    assert "T4" in row["unpriced_reason"] and row["estimated_hours"] is None and row["cost_usd"] is None


def test_gpu_without_bf16_trains_in_fp16_at_its_fp16_rate(con: duckdb.DuckDBPyConnection) -> None:
    # a T4 has no bf16; fp16 mixed precision keeps the same bytes and runs at the fp16 tensor rate
    t4 = {
        **L4_ONE,
        "instance_type": "n1+t4",
        "gpu_name": "T4",
        "vram_gb": 16.0,
        "bf16_tflops": None,
        "fp16_tflops": 65.0,
    }
    as_if_bf16 = {**t4, "instance_type": "same-rate", "bf16_tflops": 65.0, "fp16_tflops": None}
    rows = {r["instance_type"]: r for r in costs(con, [job(QWEN_05B, method="lora")], t4, as_if_bf16)}
    assert rows["n1+t4"]["priced"] and rows["n1+t4"]["cost_usd"] > 0
    assert rows["n1+t4"]["estimated_hours"] == pytest.approx(rows["same-rate"]["estimated_hours"])


def test_pcie_offer_without_stated_bandwidth_uses_its_pcie_generation(con: duckdb.DuckDBPyConnection) -> None:
    l4_pair = {**L4_ONE, "gpu_count": 2.0, "intra_node_interconnect": "PCIe", "intra_node_gbps": None}
    # PCIe 4 x16 as the seeds state links: 64 GB/s both directions together, 32 each way
    stated = {**l4_pair, "instance_type": "stated", "intra_node_gbps": 64.0}
    rows = costs(con, [job(LLAMA_8B, method="qlora")], l4_pair, stated, max_gpus=2)
    assert rows[0]["priced"] and rows[0]["comm_hours"] > 0
    assert rows[0]["estimated_hours"] == pytest.approx(rows[1]["estimated_hours"])


def test_fractional_gpu_gets_its_share_of_compute(con: duckdb.DuckDBPyConnection) -> None:
    half = {**L4_ONE, "instance_type": "half", "gpu_count": 0.5, "vram_gb": 12.0}
    rows = {r["instance_type"]: r for r in costs(con, [job(QWEN_05B, method="lora")], L4_ONE, half)}
    assert rows["half"]["gpus_used"] == 1 and rows["half"]["nodes_used"] == 1
    assert rows["half"]["estimated_hours"] == pytest.approx(2 * rows["g2-standard-4"]["estimated_hours"])


# --- billing and spot ----------------------------------------------------------------------------


def test_per_hour_billing_rounds_up_and_minimum_applies(con: duckdb.DuckDBPyConnection) -> None:
    hourly = {
        **L4_ONE,
        "provider": "vultr",
        "billing_granularity": "per_hour",
        "minimum_charge_seconds": None,
    }
    tiny = job(QWEN_05B, tokens=2e6, method="lora")  # minutes of work
    rows = {r["provider"]: r for r in costs(con, [tiny], hourly, L4_ONE)}
    hours = rows["vultr"]["estimated_hours"]
    assert 0 < hours < 1
    assert rows["vultr"]["billed_hours"] == 1.0
    assert rows["vultr"]["cost_usd"] == pytest.approx(hourly["price_usd_per_hour"])
    per_second = rows["gcp"]
    assert per_second["billed_hours"] == billed_hours(hours, "second", 60 / 3600)
    assert hours <= per_second["billed_hours"] < hours + 1 / 3600 + 1e-12
    (minimum,) = costs(con, [job(QWEN_05B, tokens=1000, method="lora")], L4_ONE)
    assert minimum["estimated_hours"] < 60 / 3600 and minimum["billed_hours"] == pytest.approx(60 / 3600)


def test_unknown_billing_granularity_bills_whole_hours(con: duckdb.DuckDBPyConnection) -> None:
    unknown = {**L4_ONE, "billing_granularity": None, "minimum_charge_seconds": None}
    (row,) = costs(con, [job(QWEN_05B, tokens=2e6, method="lora")], unknown)
    assert (row["billing_granularity"], row["billed_hours"]) == ("hour", 1.0)


def test_spot_cost_covers_lost_work(con: duckdb.DuckDBPyConnection) -> None:
    band = {**H100_NODE, "pricing_type": "spot", "is_spot": True, "price_source": "market"}
    band |= {"price_usd_per_hour": 33.21, "interruption_rate_min": 0.05, "interruption_rate_max": 0.10}
    bid = {**band, "provider": "runpod", "spot_kind": "bid", "interruption_rate_min": None}
    bid["interruption_rate_max"] = None
    jobs = [job(LLAMA_8B, method="lora"), job(LLAMA_70B, method="full", job_id="big")]
    for row in costs(con, jobs, band, bid):
        assert row["priced"] and row["on_demand_cost_usd"] is None
        nodes, price = row["nodes_used"], row["price_usd_per_hour"]
        uninterrupted = billed_hours(row["estimated_hours"], "second", 60 / 3600) * price * nodes
        assert row["expected_spot_cost_usd"] == row["cost_usd"] >= uninterrupted
        assert row["expected_spot_hours"] > row["estimated_hours"]
        per_instance = (
            -math.log(1 - 0.075) / HOURS_PER_MONTH
            if row["provider"] == "aws"
            else DEFAULT_INTERRUPTIONS_PER_HOUR["bid"]
        )
        # any node's interruption stops the job
        assert row["interruptions_per_hour"] == pytest.approx(per_instance * nodes)
        assert row["expected_spot_hours"] == pytest.approx(
            expected_spot_hours(
                row["estimated_hours"],
                row["interruptions_per_hour"],
                CHECKPOINT_INTERVAL_HOURS,
                RESTART_OVERHEAD_HOURS,
            )
        )
    sources = {r["provider"]: r["interruption_source"] for r in costs(con, jobs[:1], band, bid)}
    assert sources == {"aws": "spot_advisor_band", "runpod": "default_bid"}


def test_interruption_rate_defaults_by_spot_kind() -> None:
    base = {"is_spot": True, "interruption_rate_min": None, "interruption_rate_max": None}
    assert interruptions_per_hour({**base, "is_spot": False, "spot_kind": "market"}) == (None, None)
    assert interruptions_per_hour({**base, "spot_kind": "fixed_discount"})[1] == "default_fixed_discount"
    rate, source = interruptions_per_hour({**base, "spot_kind": None})
    assert source == "default_market" and rate == pytest.approx(-math.log(0.85) / 24)
    # the open-ended top band (>20%, max 1.0) stays finite
    top, _ = interruptions_per_hour({**base, "interruption_rate_min": 0.2, "interruption_rate_max": 1.0})
    assert math.isfinite(top) and top > 0


def test_costs_are_consistent(con: duckdb.DuckDBPyConnection) -> None:
    spot = {**H100_NODE, "pricing_type": "spot", "is_spot": True, "price_usd_per_hour": 30.0}
    jobs = [job(QWEN_7B, method="qlora"), job(LLAMA_70B, method="full", job_id="big")]
    rows = [r for r in costs(con, jobs, H100_NODE, spot, A100_80_ONE, L4_ONE) if r["priced"]]
    assert len(rows) >= 6
    for r in rows:
        assert r["cost_usd"] == pytest.approx(r["billed_hours"] * r["price_usd_per_hour"] * r["nodes_used"])
        assert r["usd_per_million_tokens"] == pytest.approx(r["cost_usd"] / r["train_tokens"] * 1e6)
        chosen = r["expected_spot_cost_usd"] if r["is_spot"] else r["on_demand_cost_usd"]
        other = r["on_demand_cost_usd"] if r["is_spot"] else r["expected_spot_cost_usd"]
        assert chosen == r["cost_usd"] and other is None
        assert r["billed_hours"] >= r["estimated_hours"]


# --- the marts, through build_marts --------------------------------------------------------------


_offer = make_offer


@pytest.fixture
def warehouse() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    load_offers(
        con,
        "r1",
        "aws",
        [
            _offer("p5.48xlarge", 55.04),
            _offer(
                "p5.48xlarge",
                33.21,
                pricing_type="spot",
                price_source="market",
                provider_data={"interruption_rate_min": 0.2, "interruption_rate_max": 1.0},
            ),
            _offer("g6.xlarge", 0.8048),
            _offer("g4dn.xlarge", 0.526),
        ],
        now=T0,
    )
    load_offers(con, "r1", "azure", [_offer("Standard_NC24ads_A100_v4", 3.673, "azure")], now=T0)
    load_offers(con, "r1", "gcp", [_offer("g2-standard-96", 8.032, "gcp")], now=T0)
    yield con
    con.close()


def test_build_marts_creates_both_marts(warehouse: duckdb.DuckDBPyConnection) -> None:
    counts = build_marts(warehouse, finetune=build_finetune_marts)
    jobs = load_finetune_jobs()
    offers_count = counts["marts.gpu_offers"]
    assert offers_count == 6
    per_job = [3 - int(j.job.offload) for j in jobs]
    assert counts["marts.finetune_requirements"] == 7 * sum(per_job)
    assert counts["marts.finetune_costs"] == len(jobs) * offers_count
    # each job × offer once
    dupes = warehouse.execute(
        "select count(*) from (select job_id, provider, instance_type, pricing_type, count(*) as n "
        "from marts.finetune_costs group by all having n > 1)"
    ).fetchall()[0][0]
    assert dupes == 0
    rows = warehouse.sql(
        "select job_id, instance_type, fits, priced, sharding, nodes_used, unpriced_reason "
        "from marts.finetune_costs where job_id in "
        "('llama-3.1-70b__full__s2048', 'qwen2.5-7b__qlora__s2048', 'llama-3.1-8b__lora__s2048')"
    ).fetchall()
    table = {(j, i): rest for j, i, *rest in rows}
    fits, priced, _, nodes, reason = table[("llama-3.1-70b__full__s2048", "Standard_NC24ads_A100_v4")]
    assert not priced and nodes > 1 and "inter-node fabric" in reason
    assert table[("llama-3.1-70b__full__s2048", "p5.48xlarge")][:3] == [True, True, "zero3"]
    assert table[("qwen2.5-7b__qlora__s2048", "g6.xlarge")][:4] == [True, True, "none", 1]
    # T4 has no bf16: a 7B QLoRA trains on it in fp16 and is priced at the fp16 rate, while an 8B
    # LoRA needs more than one 16 GB card and g4dn.xlarge has no inter-node fabric
    assert table[("qwen2.5-7b__qlora__s2048", "g4dn.xlarge")][:2] == [True, True]
    assert "inter-node fabric" in table[("llama-3.1-8b__lora__s2048", "g4dn.xlarge")][4]
    # gcp g2-standard-96 is 8×L4 over 100 Gb/s ethernet: a 70B full job would need many of them
    fits, priced, _, nodes, reason = table[("llama-3.1-70b__full__s2048", "g2-standard-96")]
    assert not priced and (not fits or (nodes > 1 and "no fast fabric" in reason))


def test_requirements_mart_equals_memory_model(warehouse: duckdb.DuckDBPyConnection) -> None:
    build_marts(warehouse, finetune=build_finetune_marts)
    fjob = next(j for j in load_finetune_jobs() if j.job_id == "llama-3.1-8b__full__s2048")
    rows = warehouse.execute(
        "select n_gpus, sharding, weights_gb, optimizer_gb, total_gb, total_flops, train_tokens "
        "from marts.finetune_requirements where job_id = ? order by sharding, n_gpus",
        [fjob.job_id],
    ).fetchall()
    assert [(n, s) for n, s, *_ in rows] == [
        (n, s) for s in ("none", "zero2", "zero3") for n in (1, 2, 4, 8, 16, 32, 64)
    ]
    model = MODELS[fjob.model_id]
    for n, sharding, weights, optimizer, total, flops, tokens in rows:
        expected = memory_per_gpu(model, Job(**{**vars(fjob.job), "sharding": sharding}), n)
        assert (weights, optimizer, total) == pytest.approx(
            (expected.weights_gb, expected.optimizer_gb, expected.total_gb)
        )
        assert tokens == fjob.train_tokens and flops > 6 * model.params * tokens


def test_build_finetune_marts_with_no_offers() -> None:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    counts = build_marts(con, finetune=build_finetune_marts)
    assert counts["marts.finetune_costs"] == 0 and counts["marts.finetune_requirements"] > 0
    columns = [c[0] for c in con.sql("describe marts.finetune_costs").fetchall()]
    assert {"fits", "priced", "cost_usd", "usd_per_million_tokens", "unpriced_reason"} <= set(columns)


def test_offer_schema_is_what_read_offers_returns() -> None:
    # a hand-built offer frame (answers.estimate's stated hardware) goes through the same cost SQL
    # as the mart's offers: its columns and types are read_offers', in the same order
    from warehouse.finetune_marts import read_offers

    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    build_marts(con)
    frame = read_offers(con)
    con.close()
    assert list(frame.columns) == list(OFFER_SCHEMA)
    assert dict(frame.schema) == OFFER_SCHEMA
