"""`gpucost memory` and `gpucost estimate` through the real typer app."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from connectors.base import Offer
from finetune import (
    Job,
    memory_per_gpu,
    model_from_hf_config,
)
from flows.cli import app
from flows.cli_finetune import parse_tokens
from tests.factories import make_offer
from warehouse.db import connect, open_warehouse
from warehouse.finetune_marts import build_finetune_marts
from warehouse.load import load_offers
from warehouse.marts import build_marts
from warehouse.seed_models import load_models

runner = CliRunner()
T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
LLAMA_8B = "meta-llama/Llama-3.1-8B"

TINY_CONFIG = {
    "_name_or_path": "example/tiny-llama",
    "model_type": "llama",
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}


def test_memory_json_equals_the_model() -> None:
    result = runner.invoke(
        app, ["memory", "--model", "Llama-3.1-8B", "--method", "qlora", "--seq-len", "4096", "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    # without --optimizer, QLoRA gets its recipe's paged 8-bit AdamW (as in the default job grid)
    job = Job(method="qlora", seq_len=4096, optimizer="paged-adamw8bit")
    expected = memory_per_gpu(load_models()[LLAMA_8B], job, 1)
    assert payload["model_id"] == LLAMA_8B
    assert payload["memory_gb"] == pytest.approx(expected.as_dict())
    assert payload["job"]["method"] == "qlora" and payload["n_gpus"] == 1
    assert payload["job"]["optimizer"] == "paged-adamw8bit"
    explicit = runner.invoke(
        app, ["memory", "--model", "Llama-3.1-8B", "--method", "qlora", "--optimizer", "adamw", "--json"]
    )
    assert json.loads(explicit.output)["job"]["optimizer"] == "adamw"


def test_memory_sharded_full_json() -> None:
    args = ["memory", "--model", "meta-llama/Llama-3.1-8B", "--method", "full", "--gpus", "8"]
    result = runner.invoke(app, [*args, "--sharding", "zero3", "--optimizer", "adamw8bit", "--json"])
    assert result.exit_code == 0, result.output
    job = Job(method="full", sharding="zero3", optimizer="adamw8bit")
    expected = memory_per_gpu(load_models()[LLAMA_8B], job, 8)
    assert json.loads(result.output)["memory_gb"] == pytest.approx(expected.as_dict())


def test_memory_table() -> None:
    result = runner.invoke(app, ["memory", "--model", "llama-3.1-8b"])
    assert result.exit_code == 0, result.output
    total = memory_per_gpu(load_models()[LLAMA_8B], Job(), 1).total_gb
    assert "total" in result.output and f"{total:,.2f}" in result.output


def test_memory_from_config(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_CONFIG))
    result = runner.invoke(app, ["memory", "--config", str(config), "--method", "full", "--json"])
    assert result.exit_code == 0, result.output
    spec = model_from_hf_config(TINY_CONFIG, "example/tiny-llama")
    payload = json.loads(result.output)
    assert payload["model_id"] == "example/tiny-llama" and payload["params"] == spec.params
    assert payload["memory_gb"] == pytest.approx(memory_per_gpu(spec, Job(method="full"), 1).as_dict())


def test_memory_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama"}))
    result = runner.invoke(app, ["memory", "--config", str(config)])
    assert result.exit_code == 1 and "cannot size the model" in result.output


def test_memory_unknown_model_suggests_close_matches() -> None:
    result = runner.invoke(app, ["memory", "--model", "Llama-3.1-9B"])
    assert result.exit_code == 1
    assert "no model 'Llama-3.1-9B'" in result.output and LLAMA_8B in result.output


def test_memory_ambiguous_model_lists_candidates() -> None:
    result = runner.invoke(app, ["memory", "--model", "8B"])
    assert result.exit_code == 1
    assert "matches several models" in result.output and "Qwen/Qwen3-8B" in result.output


def test_memory_needs_model_or_config() -> None:
    result = runner.invoke(app, ["memory"])
    assert result.exit_code == 1 and "--model" in result.output


def test_memory_rejects_offload_without_sharding() -> None:
    result = runner.invoke(app, ["memory", "--model", "Llama-3.1-8B", "--offload"])
    assert result.exit_code == 1 and "offload needs" in result.output


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("50M", 5e7), ("1.5B", 1.5e9), ("2000000", 2e6), ("2_000_000", 2e6), ("250k", 2.5e5), ("1e6", 1e6)],
)
def test_parse_tokens(text: str, tokens: float) -> None:
    assert parse_tokens(text) == tokens


# --- estimate --------------------------------------------------------------------------------


def _offer(provider: str, instance_type: str, price: float, **kw: object) -> Offer:
    return make_offer(instance_type, price, provider, **kw)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A warehouse with a few current offers and its marts, under GPUCOST_HOME=tmp_path."""
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    aws = [
        _offer("aws", "p5.48xlarge", 55.04),
        _offer(
            "aws",
            "p5.48xlarge",
            33.21,
            pricing_type="spot",
            price_source="market",
            provider_data={"interruption_rate_min": 0.05, "interruption_rate_max": 0.1},
        ),
        _offer("aws", "g6.xlarge", 0.8048),
        _offer("aws", "g6.xlarge", 0.3412, pricing_type="spot", price_source="market"),
    ]
    load_offers(con, "r1", "aws", aws, now=T0)
    load_offers(con, "r1", "azure", [_offer("azure", "Standard_NC24ads_A100_v4", 3.673)], now=T0)
    build_marts(con, finetune=build_finetune_marts)
    con.close()
    return tmp_path


def test_estimate_json_matches_the_mart(home: Path) -> None:
    # the seed job llama-3.1-8b__lora__s2048: LoRA r16 all-linear, seq 2048, 100M tokens, 1 epoch
    result = runner.invoke(app, ["estimate", "--model", "Llama-3.1-8B", "--tokens", "100M", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows and all(r["priced"] and not r["is_spot"] for r in rows)
    assert [r["cost_usd"] for r in rows] == sorted(r["cost_usd"] for r in rows)
    con = connect(home / "warehouse.duckdb", read_only=True)
    mart = {
        (p, i): (h, c)
        for p, i, h, c in con.execute(
            "select provider, instance_type, estimated_hours, cost_usd from marts.finetune_costs "
            "where job_id = 'llama-3.1-8b__lora__s2048' and not is_spot and priced"
        ).fetchall()
    }
    con.close()
    assert len(rows) == len(mart) == 3
    for r in rows:
        hours, cost = mart[(r["provider"], r["instance_type"])]
        assert (r["estimated_hours"], r["cost_usd"]) == pytest.approx((hours, cost))


def test_estimate_spot_adds_spot_offers(home: Path) -> None:
    result = runner.invoke(
        app, ["estimate", "--model", "Llama-3.1-8B", "--tokens", "50M", "--spot", "--json"]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    spot = [r for r in rows if r["is_spot"]]
    assert spot and all(r["expected_spot_cost_usd"] == r["cost_usd"] for r in spot)
    assert all(r["on_demand_cost_usd"] is None for r in spot)


def test_estimate_table(home: Path) -> None:
    result = runner.invoke(app, ["estimate", "--model", "Qwen2.5-7B", "--method", "qlora", "--tokens", "50M"])
    assert result.exit_code == 0, result.output
    # narrow (80-column) output folds long names; the GPUs column stays whole
    assert "Qwen/Qwen2.5-7B qlora" in result.output and "1× L4" in result.output
    assert "3 priced of 3 on-demand offers" in result.output


def test_estimate_top_limits_rows(home: Path) -> None:
    result = runner.invoke(app, ["estimate", "--model", "Qwen2.5-7B", "--top", "1", "--spot", "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)) == 1


def test_estimate_nothing_fits(home: Path) -> None:
    result = runner.invoke(
        app, ["estimate", "--model", "Llama-3.1-405B", "--method", "full", "--tokens", "1B"]
    )
    assert result.exit_code == 1
    assert "no current offer can hold this job" in result.output
    assert "zero3" in result.output and "--max-nodes" in result.output


def test_estimate_max_nodes_spans_fabric_connected_nodes(home: Path) -> None:
    args = ["estimate", "--model", "Llama-3.1-70B", "--method", "full", "--tokens", "10M", "--json"]
    assert runner.invoke(app, args).exit_code == 1
    result = runner.invoke(app, [*args, "--max-nodes", "4"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert (row["instance_type"], row["nodes_used"], row["sharding"]) == ("p5.48xlarge", 3, "zero3")


def test_estimate_without_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "empty"))
    result = runner.invoke(app, ["estimate", "--model", "Llama-3.1-8B"])
    assert result.exit_code == 1 and "gpucost refresh" in result.output


def test_estimate_bad_tokens(home: Path) -> None:
    result = runner.invoke(app, ["estimate", "--model", "Llama-3.1-8B", "--tokens", "lots"])
    assert result.exit_code == 2 and "--tokens" in result.output


def test_estimate_with_tensor_parallel_ranks_the_nodes_that_hold_a_group(home: Path) -> None:
    args = ["estimate", "--model", "Llama-3.1-8B", "--tensor-parallel", "2", "--tokens", "10M"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    # the 8-GPU p5 holds 2-way groups; the two one-GPU offers cannot, and the caption says so
    assert "at tensor-parallel 2" in result.output and "1 priced of 3 on-demand offers" in result.output
    assert "2 offer(s) have nodes that cannot hold a tensor-parallel group of 2 GPUs" in result.output
    # only one-GPU offers left: the answer says why nothing is ranked (not "does not fit in memory")
    result = runner.invoke(app, [*args, "--offer-gpu", "L4"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "tensor-parallel groups" in result.output and "multiple of 2 GPUs" in result.output
    assert "smaller --tensor-parallel" in result.output


def test_the_ranking_counts_the_offers_a_group_does_not_fit() -> None:
    import polars as pl

    from finetune import Job
    from flows.cli_finetune import _tensor_parallel_text, _unplaceable_note

    rows = pl.DataFrame({"total_gb": [float("nan"), 31.5, float("nan")]})
    job = Job(method="lora", tensor_parallel=4)
    assert _unplaceable_note(rows, job).startswith("2 offer(s) have nodes that cannot hold")
    assert _unplaceable_note(pl.DataFrame({"total_gb": [31.5]}), job) == ""
    assert _tensor_parallel_text(job) == " at tensor-parallel 4" and _tensor_parallel_text(Job()) == ""
