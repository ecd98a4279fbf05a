"""Issue 23, memory: what FSDP leaves whole on each rank, the loss against the recomputed layer,
loops that keep their output, the load-time peak, fsdp_qlora's defaults, parameter totals of the
plain-MLP families."""

from __future__ import annotations

import csv
import itertools
import statistics
from dataclasses import replace

import pytest

from benchmarks.memory_accuracy import DEFAULT_CSV, EXTRA_CSV, evaluate, row_to_case
from finetune import (
    GB,
    Job,
    activation_bytes,
    largest_layer_params,
    logits_bytes,
    memory_per_gpu,
    model_from_hf_config,
)
from finetune.memory import (
    BF16_BYTES,
    FP32_BYTES,
    QUANT_BYTES_PER_PARAM,
    QUANT_CODE_BYTES_PER_PARAM,
    _frozen_weight_bytes,
    adapter_params,
    fsdp_offload_live_factor,
    largest_quantized_bf16_bytes,
    model_states,
    per_rank_frozen_bytes,
    quantized_params,
    recomputed_layer_bytes,
    returned_logits_bytes,
    step_transient_bytes,
)
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
LLAMA_70B = MODELS["meta-llama/Llama-3.1-70B"]
QLORA = Job(method="qlora", seq_len=2048, micro_batch=2, lora_targets="all-linear")


# --- quant statistics and the dequantization block are whole on every rank ---


def test_per_rank_bytes_are_the_statistics_plus_one_bf16_block() -> None:
    stats = (QUANT_BYTES_PER_PARAM["nf4-dq"] - QUANT_CODE_BYTES_PER_PARAM) * quantized_params(
        LLAMA_70B, QLORA
    )
    block = BF16_BYTES * LLAMA_70B.hidden_size * LLAMA_70B.intermediate_size
    assert largest_quantized_bf16_bytes(LLAMA_70B, QLORA) == block
    assert per_rank_frozen_bytes(LLAMA_70B, QLORA) == pytest.approx(stats + block)
    # double quantization: 8/64 + 32/(64·256) bits per weight, ≈ 1.1 GB on a 70B base
    assert 1.0e9 < stats < 1.2e9


def test_an_unquantized_base_has_nothing_kept_per_rank() -> None:
    assert per_rank_frozen_bytes(LLAMA_8B, replace(QLORA, method="lora")) == 0.0


def test_the_frozen_total_is_unchanged_by_the_split() -> None:
    # codes + statistics + rest + dequantization block: the same bytes as before the split
    q = quantized_params(LLAMA_8B, QLORA)
    rest = BF16_BYTES * (LLAMA_8B.params - q)
    block = largest_quantized_bf16_bytes(LLAMA_8B, QLORA)
    expected = QUANT_BYTES_PER_PARAM["nf4-dq"] * q + rest + block
    assert _frozen_weight_bytes(LLAMA_8B, QLORA) == pytest.approx(expected)


def test_sharding_divides_only_what_fsdp_flattens() -> None:
    job = replace(QLORA, sharding="zero3")
    frozen = _frozen_weight_bytes(LLAMA_70B, job)
    kept = per_rank_frozen_bytes(LLAMA_70B, job)
    w2, w4 = (model_states(LLAMA_70B, job, n).weights for n in (2, 4))
    # the gathered units do not depend on n, the adapters' weights neither
    assert w2 - w4 == pytest.approx((frozen - kept) * (1 / 2 - 1 / 4))


def test_cpu_offload_keeps_the_statistics_and_each_live_units_shard_copy_on_the_gpu() -> None:
    job = replace(QLORA, sharding="zero3", offload=True)
    kept = per_rank_frozen_bytes(LLAMA_70B, job)
    adapters = FP32_BYTES * adapter_params(LLAMA_70B, job)  # bf16-mixed: fp32 adapters

    def live(n: int) -> float:
        return model_states(LLAMA_70B, job, n).weights - kept - adapters

    # the gathered units plus the 1/N shard each one is copied from (FlatParamHandle.pre_unshard)
    assert live(2) > 0
    assert live(2) / live(8) == pytest.approx(fsdp_offload_live_factor(2) / fsdp_offload_live_factor(8))
    assert fsdp_offload_live_factor(2) == 1.5


def test_full_fsdp_offload_gathers_the_largest_unit_with_its_shard_copy() -> None:
    job = Job(method="full", precision="bf16-pure", sharding="zero3", offload=True)
    w = model_states(LLAMA_70B, job, 8).weights
    assert w == pytest.approx(BF16_BYTES * largest_layer_params(LLAMA_70B) * (1 + 1 / 8))


# --- checkpointing: the loss's transients and the recomputed layer are never alive together ---


def test_without_checkpointing_activations_and_logits_add() -> None:
    job = replace(QLORA, grad_checkpointing=False)
    assert recomputed_layer_bytes(LLAMA_8B, job) == 0.0
    assert step_transient_bytes(LLAMA_8B, job) == (
        activation_bytes(LLAMA_8B, job),
        logits_bytes(LLAMA_8B, job),
    )


def test_a_large_vocabulary_peaks_at_the_loss() -> None:
    # Llama 3's 128k vocabulary: 12 B × V per token outweighs one recomputed layer
    acts, logits = step_transient_bytes(LLAMA_8B, QLORA)
    recompute = recomputed_layer_bytes(LLAMA_8B, QLORA)
    assert logits_bytes(LLAMA_8B, QLORA) > recompute
    assert (acts, logits) == pytest.approx(
        (activation_bytes(LLAMA_8B, QLORA) - recompute, logits_bytes(LLAMA_8B, QLORA))
    )


def test_a_fused_loss_peaks_at_the_recomputed_layer() -> None:
    job = replace(QLORA, loss="fused")
    assert step_transient_bytes(LLAMA_8B, job) == (activation_bytes(LLAMA_8B, job), 0.0)


def test_the_step_is_the_checkpoints_plus_the_larger_transient() -> None:
    acts, logits = step_transient_bytes(LLAMA_8B, QLORA)
    stored = activation_bytes(LLAMA_8B, QLORA) - recomputed_layer_bytes(LLAMA_8B, QLORA)
    larger = max(logits_bytes(LLAMA_8B, QLORA), recomputed_layer_bytes(LLAMA_8B, QLORA))
    assert acts + logits == pytest.approx(stored + larger)


def test_kept_outputs_hold_the_returned_logits_through_the_backward() -> None:
    kept = replace(QLORA, keeps_outputs=True)
    elements = 2048 * 2 * LLAMA_8B.vocab_size
    assert returned_logits_bytes(LLAMA_8B, QLORA) == 0.0
    assert returned_logits_bytes(LLAMA_8B, kept) == FP32_BYTES * elements
    assert returned_logits_bytes(LLAMA_8B, replace(kept, logits_fp32=False)) == BF16_BYTES * elements
    assert returned_logits_bytes(LLAMA_8B, replace(kept, loss="fused")) == 0.0
    a0, l0 = step_transient_bytes(LLAMA_8B, QLORA)
    a1, l1 = step_transient_bytes(LLAMA_8B, kept)
    assert (a1 + l1) - (a0 + l0) == pytest.approx(FP32_BYTES * elements)


def test_kept_logits_sit_beside_the_recomputed_layer_on_a_small_vocabulary() -> None:
    llama2 = MODELS["meta-llama/Llama-2-7b-hf"]
    # eager attention keeps the fp32 + bf16 softmax (6·a·s per token): the layer outweighs the loss
    job = Job(method="qlora", seq_len=2048, micro_batch=4, attention="eager", keeps_outputs=True)
    recompute = recomputed_layer_bytes(llama2, job)
    kept = returned_logits_bytes(llama2, job)
    assert recompute + kept > logits_bytes(llama2, job) + kept  # the recomputation is the peak here
    assert step_transient_bytes(llama2, job) == pytest.approx((activation_bytes(llama2, job), kept))


@pytest.mark.parametrize("model_id", ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-2-7b-hf"])
@pytest.mark.parametrize("keeps", [False, True])
def test_qlora_below_lora_below_full_still_holds(model_id: str, keeps: bool) -> None:
    model = MODELS[model_id]
    base = Job(seq_len=2048, micro_batch=2, keeps_outputs=keeps)
    totals = [memory_per_gpu(model, replace(base, method=m)).total_gb for m in ("qlora", "lora", "full")]
    assert totals == sorted(totals) and len(set(totals)) == 3


@pytest.mark.parametrize("gc", [False, True])
def test_memory_grows_with_tokens_across_the_switch_between_peaks(gc: bool) -> None:
    # the peak moves from the recomputed layer to the loss as tokens grow: still monotone
    llama2 = MODELS["meta-llama/Llama-2-7b-hf"]
    totals = [
        memory_per_gpu(
            llama2, replace(QLORA, micro_batch=b, grad_checkpointing=gc, keeps_outputs=True)
        ).total_gb
        for b in range(1, 17)
    ]
    assert all(b > a for a, b in itertools.pairwise(totals))


# --- the load-time peak ---


def test_qlora_load_peak_is_the_stored_base_plus_the_bf16_tensor_being_quantized() -> None:
    job = replace(QLORA, loss="fused", micro_batch=1, seq_len=128)
    b = memory_per_gpu(LLAMA_8B, job)
    load = dict(b.phases_gb)["load"]
    # the load phase holds the weights as stored, the one bf16 tensor in flight and the context
    stored = model_states(LLAMA_8B, job, 1).weights
    assert load == pytest.approx((stored + 0.5 * GB) / GB)
    assert stored > _frozen_weight_bytes(LLAMA_8B, job) - 1  # the in-flight block is in it
    assert b.peak_phase in ("load", "step", "optimizer")
    assert b.total_gb == pytest.approx(max(dict(b.phases_gb).values()))


def test_a_quantized_head_is_the_largest_tensor_in_flight() -> None:
    job = replace(QLORA, quantize_head=True)
    assert (
        largest_quantized_bf16_bytes(LLAMA_8B, job) == BF16_BYTES * LLAMA_8B.hidden_size * LLAMA_8B.vocab_size
    )


# --- the benchmark reads fsdp_qlora rows as that script's defaults ---


def _rows(path) -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_fsdp_qlora_rows_take_the_scripts_defaults() -> None:
    rows = [r for r in _rows(EXTRA_CSV) if "fsdp_qlora" in r["source"]]
    assert rows
    for row in rows:
        job = row_to_case(row, MODELS).job
        assert job is not None
        assert (job.precision, job.lora_rank, job.lora_targets, job.keeps_outputs) == (
            "bf16-pure",
            64,
            "all-linear",
            True,
        )
        assert job.dropout == pytest.approx(0.1)


def test_other_rows_keep_the_trainer_loop() -> None:
    for row in _rows(EXTRA_CSV) + (_rows(DEFAULT_CSV) if DEFAULT_CSV.exists() else []):
        case = row_to_case(row, MODELS)
        if case.job is not None and "fsdp_qlora" not in row["source"].lower():
            assert not case.job.keeps_outputs


def test_extra_set_qlora_slice_meets_the_median_target() -> None:
    errors = [
        abs(r.error_pct) for r in evaluate(EXTRA_CSV) if r.error_pct is not None and r.case.method == "qlora"
    ]
    assert len(errors) >= 9
    assert statistics.median(errors) <= 10.0


# --- plain-MLP families against their published parameter totals ---
# Each config holds the family's config.json values (the fields model_from_hf_config reads); the
# totals are what the model cards publish. The count leaves out biases and learned positions, so
# GPT-2 and StarCoder sit a fraction of a percent low.

FAMILIES = [
    pytest.param(
        {
            "model_type": "gpt2",
            "n_embd": 768,
            "n_layer": 12,
            "n_head": 12,
            "vocab_size": 50257,
            "n_positions": 1024,
        },
        124e6,
        0.01,
        id="gpt2-124M (openai-community/gpt2 card: 124M)",
    ),
    pytest.param(
        {
            "model_type": "gpt_neox",
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "intermediate_size": 16384,
            "vocab_size": 50432,
            "tie_word_embeddings": False,
        },
        6_857_302_016,
        0.001,
        id="pythia-6.9b (Pythia card: total params 6,857,302,016)",
    ),
    pytest.param(
        {
            "model_type": "gptj",
            "n_embd": 4096,
            "n_layer": 28,
            "n_head": 16,
            "n_inner": None,
            "vocab_size": 50400,
            "tie_word_embeddings": False,
        },
        6_053_381_344,
        0.001,
        id="gpt-j-6b (EleutherAI/gpt-j-6b card: n_parameters 6,053,381,344)",
    ),
    pytest.param(
        {
            "model_type": "gpt_bigcode",
            "n_embd": 6144,
            "n_layer": 40,
            "n_head": 48,
            "n_inner": 24576,
            "multi_query": True,
            "vocab_size": 49152,
            "n_positions": 8192,
        },
        15.5e9,
        0.01,
        id="starcoder (bigcode: 15.5B parameters, multi-query attention)",
    ),
    pytest.param(
        {"model_type": "bloom", "hidden_size": 4096, "n_layer": 30, "n_head": 32, "vocab_size": 250880},
        7_069_016_064,
        0.001,
        id="bloom-7b1 (7,069,016,064 parameters as Hugging Face reports)",
    ),
]


@pytest.mark.parametrize(("config", "published", "rel"), FAMILIES)
def test_plain_mlp_families_match_their_published_totals(config: dict, published: float, rel: float) -> None:
    spec = model_from_hf_config(config, config["model_type"])
    assert not spec.gated_mlp
    assert spec.params == pytest.approx(published, rel=rel)


def test_starcoder_has_one_key_value_head() -> None:
    config = dict(FAMILIES[3].values[0])  # type: ignore[arg-type]
    assert model_from_hf_config(config, "bigcode/starcoder").kv_heads == 1
    config["multi_query"] = False
    assert model_from_hf_config(config, "bigcode/starcoder").kv_heads == 48


def test_every_scored_row_names_the_phase_of_its_peak() -> None:
    results = [r for r in evaluate(EXTRA_CSV) if r.predicted_gb is not None]
    assert results and all(r.phase in ("load", "step", "optimizer") for r in results)
    for r in results:
        assert r.case.model is not None and r.case.job is not None
        assert r.phase == memory_per_gpu(r.case.model, r.case.job, r.case.n_gpus).peak_phase


# --- autocast over fp32 modules against bf16 modules, long sequences, several GPUs ---


@pytest.mark.parametrize("method", ["lora", "qlora"])
@pytest.mark.parametrize("seq_len", [16384, 32768])
@pytest.mark.parametrize("n_gpus", [2, 4, 8])
def test_autocast_is_one_point_three_to_one_point_eight_times_bf16_modules(
    method: str, seq_len: int, n_gpus: int
) -> None:
    # the measured regime: fp32 residual stream, norm outputs and checkpoints (and an fp32
    # frozen base under LoRA) against bf16 modules with FSDP MixedPrecision
    job = Job(method=method, seq_len=seq_len, sharding="zero3", loss="chunked")
    fsdp = memory_per_gpu(LLAMA_8B, job, n_gpus).total_gb
    auto = memory_per_gpu(LLAMA_8B, replace(job, mixed_precision="autocast"), n_gpus).total_gb
    assert 1.3 <= auto / fsdp <= 1.8
