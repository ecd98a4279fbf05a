"""llm-foundry's MPT training benchmarks as a throughput set (issue 23): 216 rows transcribed from
its README tables (`benchmarks/data/throughput_llm_foundry.csv`), each with the table row it was
read from. The tests check the transcription against the table's own columns, that the runner
reads each row's stack as the source states it, and that the exclusions say why."""

from __future__ import annotations

import csv
import json
import re

import pytest

from benchmarks.throughput_accuracy import (
    DATA_DIR,
    FOUNDRY_CSV,
    attention_of,
    evaluate,
    load_gpus,
    loss_of,
    main,
    row_model,
    row_to_case,
    summary,
)
from finetune.architecture import count_params
from warehouse.seed_models import load_models

MODELS = load_models()
GPUS = load_gpus()
with FOUNDRY_CSV.open(newline="", encoding="utf-8") as _f:
    ROWS = list(csv.DictReader(_f))
SOURCE = "https://github.com/mosaicml/llm-foundry/blob/5e85bd62"
# the README's columns, in its order
COLUMNS = [
    "model",
    "seq",
    "gpus",
    "gpu",
    "mfu",
    "hfu",
    "tflop",
    "micro_batch",
    "accum",
    "global_batch",
    "samples_per_s",
    "tokens_per_s",
    "tokens_per_s_per_gpu",
    "global_tokens",
    "precision",
    "mp_mode",
    "sharding",
    "checkpointing",
    "offload",
    "params",
]


def _table(row: dict[str, str]) -> dict[str, str]:
    """The README row the CSV row quotes, by column."""
    cells = [c.strip() for c in row["quote"].strip().strip("|").split("|")]
    assert len(cells) == len(COLUMNS), row["id"]
    return dict(zip(COLUMNS, cells, strict=True))


def test_every_row_quotes_its_table_row_and_pins_the_commit() -> None:
    assert len(ROWS) == 216
    for row in ROWS:
        assert row["source_url"].startswith(SOURCE), row["id"]
        assert row["score"] in ("yes", "no"), row["id"]
        assert bool(row["exclusion_reason"]) == (row["score"] == "no"), row["id"]


def test_the_columns_are_the_quoted_tables() -> None:
    gpu = {"h100_80gb": "H100-SXM", "a100_80gb": "A100-80GB-SXM", "a100_40gb": "A100-40GB-SXM"}
    for row in ROWS:
        t = _table(row)
        assert float(row["tokens_per_s"]) == float(t["tokens_per_s"]), row["id"]
        assert (row["seq_len"], row["micro_batch"], row["gpus"]) == (t["seq"], t["micro_batch"], t["gpus"])
        assert row["grad_accumulation"] == t["accum"], row["id"]
        assert row["gpu"] == gpu[t["gpu"]], row["id"]
        assert row["grad_checkpointing"] == ("yes" if t["checkpointing"] == "True" else "no"), row["id"]
        assert row["sharding"] == {"FULL_SHARD": "zero3", "SHARD_GRAD_OP": "zero2"}[t["sharding"]]
        assert row["config"] == f"configs/mpt-{t['model']}.json", row["id"]
        # T/s is the whole job's: T/s/GPU × GPUs, up to the table's rounding
        per_gpu = float(t["tokens_per_s_per_gpu"]) * int(t["gpus"])
        assert float(t["tokens_per_s"]) == pytest.approx(per_gpu, rel=2e-3, abs=int(t["gpus"])), row["id"]


def test_the_configs_give_the_tables_parameter_counts() -> None:
    # NumParams also counts what our ModelSpec leaves out (neither is a matmul): the learned
    # position table (max_seq_len × d_model) and, with MPT's no_bias False, every bias: Wqkv 3h,
    # out_proj h, up_proj 4h, down_proj h and the two norms' 2h per layer, the final norm's h
    for row in ROWS:
        t = _table(row)
        model = row_model(row, MODELS)
        h = model.hidden_size
        biases = model.layers * (3 + 1 + 4 + 1 + 2) * h + h
        assert count_params(model) == int(t["params"]) - int(t["seq"]) * h - biases, row["id"]


def test_the_configs_are_mpt_blocks() -> None:
    for path in sorted((DATA_DIR / "configs").glob("mpt-*.json")):
        config = json.loads(path.read_text(encoding="utf-8"))
        assert config["model_type"] == "mpt" and config["attn_config"]["attn_impl"] == "triton"
    model = row_model(ROWS[0], MODELS)
    assert model.layer_norm and not model.rotary and not model.gated_mlp and model.tied_embeddings


def test_a_missing_config_is_refused_with_where_it_was_looked_for() -> None:
    row = {**ROWS[0], "config": "configs/mpt-nope.json"}
    with pytest.raises(LookupError, match="not under"):
        row_model(row, MODELS)
    assert row_to_case({**row, "score": "yes"}, MODELS, GPUS).skip_reason is not None


def test_the_runner_reads_the_stack_the_source_states() -> None:
    scored = next(r for r in ROWS if r["score"] == "yes" and r["grad_accumulation"] == "21")
    case = row_to_case(scored, MODELS, GPUS)
    assert case.job is not None
    # attn_impl: triton → FlashAttention-1 class; flash-attn's xentropy → the fused loss
    assert case.job.attention == "flash1"
    assert case.job.loss == "fused"
    assert case.job.grad_accumulation == 21
    assert not case.job.compiled
    assert case.job.method == "full" and case.job.precision == "bf16-mixed"


def test_framework_words_pick_the_attention_kernel() -> None:
    assert attention_of("llm-foundry (attn_impl: triton flash attention)") == "flash1"
    assert attention_of("flash-attn 1.0.9") == "flash1"
    assert attention_of("nemo (transformerengine layers)") == "native"
    assert attention_of("axolotl") == "flash"


def test_framework_words_pick_the_loss() -> None:
    assert loss_of("llm-foundry (flash-attn xentropy fused cross-entropy)") == "fused"
    assert loss_of("torchtune (compile on, chunked ce, packed)") == "chunked"
    assert loss_of("transformers trainer") == "standard"


def test_rows_naming_one_config_share_one_parsed_model() -> None:
    same = [r for r in ROWS if r["config"] == "configs/mpt-7b.json"]
    assert len(same) > 1
    assert all(row_model(r, MODELS) is row_model(same[0], MODELS) for r in same)


def test_a100_multi_node_rows_run_over_the_stated_roce_network() -> None:
    multi = [r for r in ROWS if int(r["gpus"]) > 8 and r["gpu"].startswith("A100")]
    assert multi
    for row in multi:
        case = row_to_case(row, MODELS, GPUS)
        assert case.inter_node_gbps == 1600.0 and case.skip_reason is None, row["id"]


def test_unstated_h100_fabric_and_fp8_rows_are_excluded_with_their_reason() -> None:
    reasons = {r["id"]: r["exclusion_reason"] for r in ROWS if r["score"] == "no"}
    h100_multi = [r for r in ROWS if r["gpu"] == "H100-SXM" and int(r["gpus"]) > 8]
    fp8 = [r for r in ROWS if "amp_fp8" in r["quote"]]
    assert {r["id"] for r in h100_multi} | {r["id"] for r in fp8} == set(reasons)
    assert all(re.search("network", reasons[r["id"]]) for r in h100_multi if "amp_fp8" not in r["quote"])
    assert all("FP8" in reasons[r["id"]] for r in fp8)


def test_the_set_is_scored_on_its_own() -> None:
    results = evaluate(FOUNDRY_CSV)
    scored = [r for r in results if r.error_pct is not None]
    assert len(scored) == 176
    assert summary(scored)["cases"] == 176


def test_the_default_run_scores_the_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["throughput_accuracy.py"]) == 0
    assert "## throughput_llm_foundry.csv" in capsys.readouterr().out
