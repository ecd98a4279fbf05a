"""Issue 23 memory terms: autocast vs bf16 modules, GPTQ's fixed cost, quantized and LoRA heads."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest

from benchmarks.memory_accuracy import EXTRA_CSV, evaluate, hardware_class, row_to_case, summary
from finetune import GB, Job, activation_bytes, logits_bytes, memory_per_gpu
from finetune.architecture import ModelSpec, _attention_params_per_layer, _mlp_params_per_layer, block_kind
from finetune.job import MixedPrecision
from finetune.memory import (
    GPTQ_G_IDX_BYTES,
    QUANT_BYTES_PER_PARAM,
    adapter_params,
    autocast_cast_bytes,
    bytes_per_param,
    model_states_bytes,
    saved_weight_bytes_per_layer,
    trainable_params,
)
from flows.job_options import JOB_OPTIONS, JobOptions
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]


def _acts(job: Job) -> float:
    return activation_bytes(LLAMA_8B, job)


def test_autocast_keeps_the_residual_stream_and_final_norm_in_fp32() -> None:
    # NF4 QLoRA saves no extra weight copies, so the difference is the fp32 residual (each
    # checkpointed layer input and the final norm's output gain 2 bytes per element) and the one
    # recomputed layer's own casts (tests/test_memory_autocast_casts.py): its five bases that read
    # the fp32 normed stream each keep a bf16 cast instead of sharing two (+6h), and the fp32 MLP
    # inner tensors behind bnb's fp32 outputs (+6I); the adapters' casts replace dropout's copies
    base = Job(method="qlora", seq_len=8192, grad_checkpointing=True)
    auto = replace(base, mixed_precision="autocast")
    tokens, h, inter = 8192, LLAMA_8B.hidden_size, LLAMA_8B.intermediate_size
    residual = 2 * h * tokens * (LLAMA_8B.layers + 1)
    assert _acts(auto) - _acts(base) == pytest.approx(residual + (6 * h + 6 * inter) * tokens)


def test_autocast_weighs_most_at_long_sequences_on_several_gpus() -> None:
    # sharded states leave the checkpoints as the bulk: the issue's 1.3–1.8× regime
    job = Job(method="lora", seq_len=32768, sharding="zero3", loss="chunked")
    fsdp = memory_per_gpu(LLAMA_8B, job, 8).total_gb
    auto = memory_per_gpu(LLAMA_8B, replace(job, mixed_precision="autocast"), 8).total_gb
    assert 1.3 <= auto / fsdp <= 1.8


def test_autocast_full_states_are_fp32_master_and_moments_only() -> None:
    assert bytes_per_param("bf16-mixed", "adamw", "autocast") == (4.0, 4.0, 8.0)
    assert bytes_per_param("bf16-mixed", "adamw") == (2.0, 4.0, 12.0)


def test_autocast_caches_bf16_casts_of_trained_leaves_but_not_fsdp_views() -> None:
    job = Job(method="full", mixed_precision="autocast")
    assert autocast_cast_bytes(LLAMA_8B, job) == 2.0 * LLAMA_8B.params
    assert autocast_cast_bytes(LLAMA_8B, replace(job, sharding="zero3")) == 0.0
    assert autocast_cast_bytes(LLAMA_8B, Job(method="full")) == 0.0


def test_autocast_lora_base_is_fp32_and_saves_its_bf16_casts() -> None:
    fsdp = Job(method="lora")
    auto = replace(fsdp, mixed_precision="autocast")
    w_fsdp = memory_per_gpu(LLAMA_8B, fsdp).weights_gb
    w_auto = memory_per_gpu(LLAMA_8B, auto).weights_gb
    # fp32 instead of bf16 base, plus the cached bf16 casts of the (fp32) adapters
    extra = 2.0 * LLAMA_8B.params + 2.0 * adapter_params(LLAMA_8B, auto)
    assert w_auto - w_fsdp == pytest.approx(extra / GB, rel=1e-6)
    linears = _attention_params_per_layer(LLAMA_8B) + _mlp_params_per_layer(LLAMA_8B)
    assert saved_weight_bytes_per_layer(LLAMA_8B, auto) == 2.0 * linears
    assert saved_weight_bytes_per_layer(LLAMA_8B, fsdp) == 0.0


def test_autocast_needs_bf16_mixed() -> None:
    with pytest.raises(ValueError, match="bf16-mixed"):
        Job(precision="bf16-pure", mixed_precision="autocast")


def test_gptq_fixed_cost_is_one_layer_of_dequantized_weights_under_checkpointing() -> None:
    linears = _attention_params_per_layer(LLAMA_8B) + _mlp_params_per_layer(LLAMA_8B)
    short = Job(method="qlora", quant="gptq", seq_len=1, lora_targets="qv", lora_dropout=0.0)
    assert saved_weight_bytes_per_layer(LLAMA_8B, short) == 2.0 * linears
    # without checkpointing every layer keeps its dequantized copies
    no_gc = replace(short, grad_checkpointing=False)
    nf4_no_gc = replace(no_gc, quant="nf4")
    gap = activation_bytes(LLAMA_8B, no_gc) - activation_bytes(LLAMA_8B, nf4_no_gc)
    assert gap > 2.0 * linears * LLAMA_8B.layers * 0.99


def test_gptq_per_token_slope_is_below_nf4s() -> None:
    # GPTQ's frozen linears do not save their inputs, MatMul4Bit does
    def slope(quant: str) -> float:
        job = Job(method="qlora", quant=quant, lora_targets="qv", grad_checkpointing=False)  # type: ignore[arg-type]
        return _acts(replace(job, seq_len=4096)) - _acts(replace(job, seq_len=2048))

    assert slope("gptq") < slope("nf4")


def test_gptq_weights_carry_one_int32_group_index_per_input_row() -> None:
    gptq = Job(method="qlora", quant="gptq")
    no_idx = QUANT_BYTES_PER_PARAM["gptq"]
    h, inter, L = LLAMA_8B.hidden_size, LLAMA_8B.intermediate_size, LLAMA_8B.layers
    rows = L * (3 * h + LLAMA_8B.attention_heads * LLAMA_8B.head_dim_ + 2 * h + inter)
    weights = memory_per_gpu(LLAMA_8B, gptq).weights_gb * GB
    nf4 = memory_per_gpu(LLAMA_8B, replace(gptq, quant="nf4")).weights_gb * GB
    quantized = L * (_attention_params_per_layer(LLAMA_8B) + _mlp_params_per_layer(LLAMA_8B))
    expected = (no_idx - QUANT_BYTES_PER_PARAM["nf4"]) * quantized + GPTQ_G_IDX_BYTES * rows
    assert weights - nf4 == pytest.approx(expected, rel=1e-6)


def test_quantized_head_stores_the_head_in_4_bits_and_dequantizes_it_whole() -> None:
    job = Job(method="qlora")
    vh = LLAMA_8B.vocab_size * LLAMA_8B.hidden_size
    q = QUANT_BYTES_PER_PARAM["nf4-dq"]
    plain = memory_per_gpu(LLAMA_8B, job).weights_gb * GB
    quant = memory_per_gpu(LLAMA_8B, replace(job, quantize_head=True)).weights_gb * GB
    # the stored head shrinks from bf16 to 4 bits; the dequantization buffer grows to V×h
    buffer_growth = 2.0 * LLAMA_8B.hidden_size * (LLAMA_8B.vocab_size - LLAMA_8B.intermediate_size)
    assert quant - plain == pytest.approx((q - 2.0) * vh + buffer_growth, rel=1e-6)


def test_lora_head_trains_r_times_h_plus_v_and_adds_a_logits_copy() -> None:
    job = Job(method="lora", lora_rank=16)
    head = replace(job, lora_head=True)
    assert adapter_params(LLAMA_8B, head) - adapter_params(LLAMA_8B, job) == 16 * (
        LLAMA_8B.hidden_size + LLAMA_8B.vocab_size
    )
    assert trainable_params(LLAMA_8B, head) > trainable_params(LLAMA_8B, job)
    elements = job.seq_len * job.micro_batch * LLAMA_8B.vocab_size
    assert logits_bytes(LLAMA_8B, head) - logits_bytes(LLAMA_8B, job) == 2.0 * elements
    fused = replace(head, loss="fused")
    assert logits_bytes(LLAMA_8B, fused) == 0.0


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"method": "lora", "quantize_head": True}, "qlora"),
        ({"method": "full", "lora_head": True}, "lora"),
        ({"method": "lora", "lora_head": True, "train_embeddings": "head"}, "choose one"),
    ],
)
def test_head_knobs_refuse_what_no_framework_does(knobs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Job(**knobs)


@pytest.mark.parametrize("mixed", get_args(MixedPrecision))
def test_qlora_below_lora_below_full_in_either_mixed_precision(mixed: str) -> None:
    totals = [
        memory_per_gpu(LLAMA_8B, Job(method=m, mixed_precision=mixed)).total_gb  # type: ignore[arg-type]
        for m in ("qlora", "lora", "full")
    ]
    assert totals == sorted(totals) and len(set(totals)) == 3


def test_autocast_memory_grows_with_sequence_length() -> None:
    totals = [
        memory_per_gpu(LLAMA_8B, Job(seq_len=s, mixed_precision="autocast")).total_gb
        for s in (512, 2048, 8192, 32768)
    ]
    assert totals == sorted(totals)


@pytest.mark.parametrize(
    ("hardware", "cls"),
    [
        ("2x RTX 3090 24GB (no NVLink)", "consumer"),
        ("1x GeForce RTX 5090", "consumer"),
        ("4x RTX A6000", "workstation"),
        ("2x RTX 6000 Ada", "workstation"),
        ("8x H200 141GB", "datacenter"),
        ("1x L40S", "datacenter"),
        ("1x GPU (unstated)", "unstated"),
    ],
)
def test_hardware_class(hardware: str, cls: str) -> None:
    assert hardware_class(hardware) == cls


def test_extra_rows_each_cite_a_source_and_a_quote() -> None:
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows
    for row in rows:
        assert row["source"].strip() and row["quote"].strip()
        # the quoted table row holds the measured figure
        assert row["measured_peak_gb"] in row["quote"]


def test_extra_set_meets_the_issue_targets() -> None:
    s = summary(evaluate(Path(EXTRA_CSV)))
    assert s["expressible"] == s["points"]
    assert s["within_20_share"] >= 0.85
    assert s["median_abs_error_pct"] <= 10.0


def test_cli_options_reach_the_job() -> None:
    for name in ("mixed_precision", "quantize_head", "lora_head"):
        assert name in JOB_OPTIONS
    options = JobOptions(
        model="x", method="qlora", mixed_precision="autocast", quantize_head=True, lora_head=True
    )
    job, _ = options.job(sharding="none")
    assert (job.mixed_precision, job.quantize_head, job.lora_head) == ("autocast", True, True)


# --- block kinds: Phi-1.5 / Phi-2 (parallel block, LayerNorm, tanh-GELU in torch ops) ---


def _published_b(text: str) -> float:
    return float(text.removesuffix("B"))


@pytest.mark.parametrize("model_id", ["microsoft/phi-1_5", "microsoft/phi-2"])
def test_phi_seeds_match_their_published_totals(model_id: str) -> None:
    with (Path(__file__).resolve().parents[1] / "warehouse" / "seeds" / "llm_models.csv").open(
        newline="", encoding="utf-8"
    ) as f:
        row = next(r for r in csv.DictReader(f) if r["model_id"] == model_id)
    spec = MODELS[model_id]
    assert spec.params / 1e9 == pytest.approx(_published_b(row["published_params"]), rel=0.01)
    assert (spec.gated_mlp, spec.layer_norm, spec.parallel_block, spec.tanh_gelu_ops) == (
        False,
        True,
        True,
        True,
    )


@pytest.mark.parametrize(
    ("config", "kind"),
    [
        ({"model_type": "phi", "hidden_act": "gelu_new"}, (True, True, True)),
        (
            {"model_type": "falcon", "parallel_attn": True, "new_decoder_architecture": False},
            (True, True, False),
        ),
        (
            {"model_type": "falcon", "parallel_attn": True, "new_decoder_architecture": True},
            (True, False, False),
        ),
        ({"model_type": "gpt_neox", "hidden_act": "gelu"}, (True, False, False)),
        ({"model_type": "llama", "hidden_act": "silu"}, (False, False, False)),
    ],
)
def test_block_kind_reads_the_config(config: dict, kind: tuple[bool, bool, bool]) -> None:
    got = block_kind(config)
    assert (got["layer_norm"], got["parallel_block"], got["tanh_gelu_ops"]) == kind


PHI_2 = MODELS["microsoft/phi-2"]
NO_GC = Job(method="lora", lora_targets="qv", seq_len=1024, grad_checkpointing=False)


def _per_token_layer(spec: ModelSpec, job: Job = NO_GC) -> float:
    head = 8.0 * spec.hidden_size * job.seq_len
    return (activation_bytes(spec, job) - head) / (job.seq_len * spec.layers)


def test_layer_norm_keeps_its_bf16_input_where_rmsnorm_keeps_an_fp32_copy() -> None:
    rms = replace(PHI_2, layer_norm=False)
    # one norm (parallel block): 4h for the fp32 upcast against 2h for the bf16 input
    assert _per_token_layer(rms) - _per_token_layer(PHI_2) == pytest.approx(2 * PHI_2.hidden_size)


def test_parallel_block_has_one_norm_and_shares_fc1s_input_with_qkv() -> None:
    serial = replace(PHI_2, parallel_block=False)
    h = PHI_2.hidden_size
    assert _per_token_layer(serial) - _per_token_layer(PHI_2) == pytest.approx(2 * h)
    # full fine-tuning keeps fc1's input: shared in the parallel block, its own 2h otherwise
    full = Job(method="full", seq_len=1024, grad_checkpointing=False)
    assert _per_token_layer(serial, full) - _per_token_layer(PHI_2, full) == pytest.approx(4 * h)


def test_tanh_gelu_in_torch_ops_keeps_three_more_intermediate_tensors() -> None:
    fused = replace(PHI_2, tanh_gelu_ops=False)
    assert _per_token_layer(PHI_2) - _per_token_layer(fused) == pytest.approx(6 * PHI_2.intermediate_size)


def test_plain_mlp_keeps_fc1s_output_once() -> None:
    # fc1's output is kept by the activation; the activation's output is fc2's input, kept only
    # when fc2 needs it (not for a frozen, unadapted fc2): 2I against the gated MLP's 6I
    plain = replace(PHI_2, tanh_gelu_ops=False)
    gated = replace(plain, gated_mlp=True)
    assert _per_token_layer(gated) - _per_token_layer(plain) == pytest.approx(4 * PHI_2.intermediate_size)


# --- the loss on 16-bit logits (Qwen-1 under DeepSpeed) ---


def test_16_bit_loss_keeps_8_bytes_per_logit() -> None:
    job = Job(method="qlora", quant="gptq", seq_len=4096)
    elements = 4096 * LLAMA_8B.vocab_size
    assert logits_bytes(LLAMA_8B, job) == 12.0 * elements
    assert logits_bytes(LLAMA_8B, replace(job, logits_fp32=False)) == 8.0 * elements
    # chunked and fused losses do their own thing whatever the logits' dtype
    assert logits_bytes(LLAMA_8B, replace(job, logits_fp32=False, loss="fused")) == 0.0


@pytest.mark.parametrize(
    ("model", "method", "precision", "fp32"),
    [
        ("Qwen-14B", "qlora (GPTQ int4)", "fp16 compute, int4 base", False),
        ("Qwen-1.8B", "full (DeepSpeed ZeRO-3, 1 GPU)", "bf16", False),
        ("Qwen-1.8B", "lora", "bf16", True),  # HF Trainer's autocast runs the loss in fp32
        ("Qwen2.5-7B", "qlora", "fp16", True),  # transformers' own loss upcasts
        ("Llama-2-7B", "lora", "fp16", True),
    ],
)
def test_benchmark_reads_a_16_bit_loss_from_qwen1_under_deepspeed(
    model: str, method: str, precision: str, fp32: bool
) -> None:
    row = {
        "model": model, "params_b": "7", "method": method, "precision": precision, "seq_len": "2048",
        "micro_batch": "1", "grad_checkpointing": "yes", "optimizer": "AdamW", "measured_peak_gb": "10",
        "hardware": "1x A100 80GB", "source": "test row",
    }  # fmt: skip
    case = row_to_case(row, MODELS)
    assert case.job is not None and case.job.logits_fp32 is fp32


def test_autocast_zero3_gathers_fp32_units_and_zero2_keeps_no_16_bit_gradient_copy() -> None:
    largest, params = 2e8, 8e9
    bf16 = model_states_bytes(params, largest, "bf16-mixed", "adamw", "zero3", 8, offload=True)
    fp32 = model_states_bytes(
        params, largest, "bf16-mixed", "adamw", "zero3", 8, True, mixed_precision="autocast"
    )
    assert fp32.weights == 2 * bf16.weights == 4.0 * largest
    z2 = model_states_bytes(
        params, largest, "bf16-mixed", "adamw", "zero2", 8, False, mixed_precision="autocast"
    )
    assert z2.gradients == 4.0 * params / 8  # the fp32 gradient partition only


def test_selective_checkpointing_keeps_an_fp32_layer_input_under_autocast() -> None:
    base = Job(method="qlora", seq_len=4096, checkpoint_policy="selective")
    auto = replace(base, mixed_precision="autocast")
    h, inter, tokens = LLAMA_8B.hidden_size, LLAMA_8B.intermediate_size, 4096
    # the kept layer inputs and final norm in fp32, and the recomputed layer's own casts and fp32
    # MLP tensors (as in test_autocast_keeps_the_residual_stream_and_final_norm_in_fp32)
    residual = 2 * h * tokens * (LLAMA_8B.layers + 1)
    assert _acts(auto) - _acts(base) == pytest.approx(residual + (6 * h + 6 * inter) * tokens)


def test_quantized_head_of_a_tied_model_keeps_the_bf16_embedding_for_the_lookup() -> None:
    tied = replace(
        LLAMA_8B, tied_embeddings=True, params=LLAMA_8B.params - LLAMA_8B.vocab_size * LLAMA_8B.hidden_size
    )
    plain = memory_per_gpu(tied, Job(method="qlora")).weights_gb * GB
    quant = memory_per_gpu(tied, Job(method="qlora", quantize_head=True)).weights_gb * GB
    vh = tied.vocab_size * tied.hidden_size
    buffer_growth = 2.0 * tied.hidden_size * (tied.vocab_size - tied.intermediate_size)
    # the shared matrix stays bf16 (once) and a 4-bit head is added next to it
    assert quant - plain == pytest.approx(QUANT_BYTES_PER_PARAM["nf4-dq"] * vh + buffer_growth, rel=1e-6)


def test_fsdp_root_unit_holds_a_quantized_head_in_4_bits() -> None:
    job = Job(method="qlora", sharding="zero3")
    plain = memory_per_gpu(LLAMA_8B, job, 4).weights_gb
    quant = memory_per_gpu(LLAMA_8B, replace(job, quantize_head=True), 4).weights_gb
    assert quant < plain
