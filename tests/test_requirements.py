"""The fine-tuning requirements model: DeepSpeed closed forms, bytes per parameter, configs, seeds."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from finetune import (
    GB,
    Job,
    ModelSpec,
    bytes_per_param,
    count_params,
    estimate_time,
    flops_per_token,
    largest_layer_params,
    memory_per_gpu,
    model_from_hf_config,
    model_states_bytes,
    trainable_params,
)
from warehouse.seed_models import SEEDS_DIR, load_finetune_jobs, load_models

GIB = 2**30


# DeepSpeed's estimators, transcribed from deepspeed/runtime/zero/stage_1_and_2.py and stage3.py
# (@38327e0). They return (cpu_bytes, gpu_bytes); only the GPU side is ours to match.
def ds_zero2_gpu(total_params: int, total_gpus: int, cpu_offload: bool) -> int:
    if cpu_offload:
        return 2 * total_params
    # GPU's total_params multipliers: 2 = params_16bit,
    # 18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit
    return 2 * total_params + int(18 * total_params / total_gpus)


def ds_zero3_gpu(
    total_params: int, largest_layer_params: int, total_gpus: int, offload_params_and_optim: bool
) -> int:
    largest_layer_memory = 4 * largest_layer_params
    if offload_params_and_optim:
        return largest_layer_memory
    return largest_layer_memory + int(18 * total_params / total_gpus)


T5_3B_PARAMS = 2_851_000_000  # DeepSpeed docs/code-docs/source/memory.rst worked example
T5_3B_LARGEST_LAYER = 32_900_000  # its 32128 × 1024 shared embedding


@pytest.mark.parametrize("total_gpus", [1, 2, 8, 16, 64, 512])
@pytest.mark.parametrize("offload", [False, True])
@pytest.mark.parametrize(
    ("params", "largest"),
    [
        (T5_3B_PARAMS, T5_3B_LARGEST_LAYER),
        (8_030_261_248, 525_336_576),  # Llama-3.1-8B: embedding 128256 × 4096
        (70_553_706_496, 1_050_673_152),  # Llama-3.1-70B
    ],
)
def test_model_states_equal_deepspeed_estimators(
    params: int, largest: int, total_gpus: int, offload: bool
) -> None:
    zero2 = model_states_bytes(params, largest, "bf16-mixed", "adamw", "zero2", total_gpus, offload)
    zero3 = model_states_bytes(params, largest, "bf16-mixed", "adamw", "zero3", total_gpus, offload)
    # the estimator's "4_grads_32bit" is ZeRO-2's optimizer step, not what it keeps between steps
    step_fp32_grads = 0 if offload else 4 * params / total_gpus
    assert zero2.total + step_fp32_grads == pytest.approx(ds_zero2_gpu(params, total_gpus, offload), abs=1)
    assert zero3.total == pytest.approx(ds_zero3_gpu(params, largest, total_gpus, offload), abs=1)


def test_deepspeed_worked_example_t5_3b() -> None:
    """memory.rst: t5-3b on 1 node × 8 GPUs, ZeRO-3 0.12 GiB (offload) and 6.10 GiB (none)."""
    off = model_states_bytes(T5_3B_PARAMS, T5_3B_LARGEST_LAYER, "bf16-mixed", "adamw", "zero3", 8, True)
    on = model_states_bytes(T5_3B_PARAMS, T5_3B_LARGEST_LAYER, "bf16-mixed", "adamw", "zero3", 8, False)
    z2_off = model_states_bytes(T5_3B_PARAMS, 0, "bf16-mixed", "adamw", "zero2", 8, True)
    assert round(off.total / GIB, 2) == 0.12
    assert round(on.total / GIB, 2) == 6.10
    assert round(z2_off.total / GIB, 2) == 5.31


@pytest.mark.parametrize(
    ("precision", "optimizer", "expected"),
    [
        ("bf16-mixed", "adamw", 18.0),  # LLaMA-Factory "18x", DeepSpeed's 18 (plus 16-bit weights)
        ("bf16-pure", "adamw", 8.0),  # LLaMA-Factory pure_bf16 "8x"
        ("bf16-mixed", "adamw8bit", 12.0),  # fp32 grads + master + 1 B m + 1 B v
        ("bf16-pure", "adamw8bit", 6.0),  # torchtune low-memory recipes without optimizer_in_bwd
        ("bf16-pure", "paged-adamw8bit", 6.0),  # paging changes where, not how much
    ],
)
def test_bytes_per_param_by_regime(precision: str, optimizer: str, expected: float) -> None:
    assert sum(bytes_per_param(precision, optimizer)) == expected  # type: ignore[arg-type]
    ddp = model_states_bytes(1e9, 0, precision, optimizer, "none", 1, False)  # type: ignore[arg-type]
    assert ddp.total == pytest.approx(expected * 1e9)


def test_qlora_weights_are_nf4_double_quant_with_16bit_embeddings(models: dict[str, ModelSpec]) -> None:
    m = models["meta-llama/Llama-3.1-8B"]
    q = memory_per_gpu(m, Job(method="qlora"))
    # 6.98e9 linear params at 4.127 bits + 1.05e9 embedding/head params in bf16 + one dequant buffer
    linear = 32 * (4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    expected_base = linear * 4.127 / 8 + 2 * (m.params - linear) + 2 * 4096 * 14336
    adapters = 4 * trainable_params(m, Job(method="qlora"))
    assert q.weights_gb * GB == pytest.approx(expected_base + adapters, rel=1e-3)
    assert 5.5 < q.weights_gb < 6.5


@pytest.fixture(scope="module")
def models() -> dict[str, ModelSpec]:
    return load_models()


# --- seeds ---------------------------------------------------------------------------------------


def test_llm_models_seed_covers_the_families_people_fine_tune(models: dict[str, ModelSpec]) -> None:
    assert len(models) >= 25
    ids = " ".join(models).lower()
    for needle in [
        "llama-3.2-1b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen2.5-0.5b",
        "qwen2.5-72b", "qwen3-", "mistral-7b", "mistral-nemo", "mixtral-8x7b", "mixtral-8x22b",
        "gemma-2-", "gemma-3-", "phi-3", "phi-4", "deepseek-r1-distill-qwen", "deepseek-r1-distill-llama",
    ]:  # fmt: skip
        assert needle in ids, needle


def test_every_seed_row_has_a_source_and_consistent_architecture() -> None:
    with (SEEDS_DIR / "llm_models.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        assert row["source"].startswith("https://huggingface.co/"), row["model_id"]
    for spec in load_models().values():
        assert spec.params == count_params(spec)
        if spec.is_moe:
            assert spec.active_params < spec.params
        else:
            assert spec.active_params == spec.params


@pytest.mark.parametrize(
    ("model_id", "published_b"),
    [
        ("meta-llama/Llama-3.1-8B", 8.03),
        ("meta-llama/Llama-3.1-70B", 70.6),
        ("meta-llama/Llama-3.1-405B", 405.9),
        ("Qwen/Qwen2.5-7B", 7.62),
        ("mistralai/Mistral-7B-v0.3", 7.25),
        ("mistralai/Mixtral-8x7B-v0.1", 46.7),
        ("google/gemma-2-9b", 9.24),
        ("microsoft/phi-4", 14.7),
        # DeepSeek-R1 distills (model cards' safetensors totals): the 1.5B unties Qwen2.5's head
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1.78),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 7.62),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", 14.8),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", 32.8),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", 8.03),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", 70.6),
    ],
)
def test_architecture_reproduces_published_parameter_counts(
    models: dict[str, ModelSpec], model_id: str, published_b: float
) -> None:
    assert models[model_id].params / 1e9 == pytest.approx(published_b, rel=0.005)


def test_finetune_jobs_grid_is_valid(models: dict[str, ModelSpec]) -> None:
    jobs = load_finetune_jobs()
    assert {j.job.method for j in jobs} == {"full", "lora", "qlora"}
    assert len({j.job_id for j in jobs}) == len(jobs)
    # every job prices a seeded model; seeded models without a grid row (the DeepSeek-R1 distills)
    # are still listed by `gpucost models` and estimated by `gpucost estimate`
    assert {j.model_id for j in jobs} <= set(models)
    for j in jobs:
        assert j.job.seq_len <= models[j.model_id].max_context
        assert j.train_tokens > 0


# --- HF config.json ------------------------------------------------------------------------------

LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip
MIXTRAL = {
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
    "max_position_embeddings": 32768, "tie_word_embeddings": False,
}  # fmt: skip
QWEN3_MOE = {
    "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_attention_heads": 32, "num_hidden_layers": 48,
    "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
    "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": False,
}  # fmt: skip
GEMMA3_4B = {
    "model_type": "gemma3",
    "text_config": {
        "model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
        "num_attention_heads": 8, "num_hidden_layers": 34, "num_key_value_heads": 4,
        "head_dim": 256, "vocab_size": 262208, "max_position_embeddings": 131072,
    },
    "vision_config": {"hidden_size": 1152},
}  # fmt: skip
FALCON_7B = {
    "model_type": "falcon", "hidden_size": 4544, "n_head": 71, "n_layer": 32,
    "multi_query": True, "new_decoder_architecture": False, "parallel_attn": True,
    "vocab_size": 65024,
}  # fmt: skip
PYTHIA_69B = {
    "model_type": "gpt_neox", "hidden_size": 4096, "intermediate_size": 16384,
    "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 50432,
    "max_position_embeddings": 2048, "tie_word_embeddings": False,
}  # fmt: skip
QWEN1_7B = {
    "model_type": "qwen", "hidden_size": 4096, "intermediate_size": 22016,
    "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 151936,
    "seq_length": 8192, "kv_channels": 128, "tie_word_embeddings": False,
}  # fmt: skip
T5_3B = {
    "model_type": "t5", "d_model": 1024, "d_ff": 16384, "d_kv": 128, "num_heads": 32,
    "num_layers": 24, "num_decoder_layers": 24, "vocab_size": 32128,
    "feed_forward_proj": "relu",
}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "params_b", "active_b"),
    [
        (LLAMA_31_8B, 8.03, 8.03),
        (MIXTRAL, 46.70, 12.88),
        (QWEN3_MOE, 30.53, 3.35),
        (GEMMA3_4B, 3.88, 3.88),  # text tower only; the 0.42B vision tower is not fine-tuned here
        (FALCON_7B, 6.92, 6.92),
        (PYTHIA_69B, 6.86, 6.86),
        (QWEN1_7B, 7.72, 7.72),
        (T5_3B, 2.85, 2.85),  # DeepSpeed's memory.rst: 2851M
    ],
)
def test_model_from_hf_config_counts_parameters(
    config: dict[str, object], params_b: float, active_b: float
) -> None:
    spec = model_from_hf_config(config, "x")
    assert spec.params / 1e9 == pytest.approx(params_b, abs=0.01)
    assert spec.active_params / 1e9 == pytest.approx(active_b, abs=0.01)


def test_model_from_hf_config_matches_the_seed_row(models: dict[str, ModelSpec]) -> None:
    spec = model_from_hf_config(LLAMA_31_8B, "meta-llama/Llama-3.1-8B")
    seed = models["meta-llama/Llama-3.1-8B"]
    assert spec == seed


def test_model_from_hf_config_explains_what_is_missing() -> None:
    with pytest.raises(ValueError, match="num_hidden_layers"):
        model_from_hf_config({"hidden_size": 10, "num_attention_heads": 2, "vocab_size": 5}, "bad")


# --- memory details ------------------------------------------------------------------------------


def test_breakdown_sums_to_total(models: dict[str, ModelSpec]) -> None:
    m = memory_per_gpu(models["Qwen/Qwen2.5-7B"], Job(method="full", sharding="zero3"), n_gpus=8)
    d = m.as_dict()
    assert set(d) == {
        "weights_gb", "gradients_gb", "optimizer_gb", "activations_gb", "logits_gb",
        "overhead_gb", "total_gb",
    }  # fmt: skip
    assert d["total_gb"] == pytest.approx(sum(v for k, v in d.items() if k != "total_gb"))


def test_checkpointing_flash_and_chunked_ce_each_save_memory(models: dict[str, ModelSpec]) -> None:
    m = models["meta-llama/Llama-3.1-8B"]
    base = Job(method="lora", seq_len=4096, grad_checkpointing=False, attention="eager")
    gc = Job(**{**base.__dict__, "grad_checkpointing": True})
    flash = Job(**{**base.__dict__, "attention": "flash"})
    chunked = Job(**{**base.__dict__, "loss": "chunked"})
    total = memory_per_gpu(m, base).total_gb
    for better in (gc, flash, chunked):
        assert memory_per_gpu(m, better).total_gb < total
    # the logits of a 128k vocabulary at 4096 tokens: 12 B × 4096 × 128256 ≈ 6.3 GB
    assert memory_per_gpu(m, base).logits_gb == pytest.approx(6.30, abs=0.01)


def test_lora_trainable_params_match_peft_counts(models: dict[str, ModelSpec]) -> None:
    # PEFT prints "trainable params: 41,943,040" for Llama-3.1-8B, r=16, all linear layers,
    # and 6,815,744 for r=8 on q_proj,k_proj,v_proj,o_proj... computed: 32·8·(2·(4096+4096)+2·(4096+1024))
    m = models["meta-llama/Llama-3.1-8B"]
    assert trainable_params(m, Job(method="lora", lora_rank=16)) == 41_943_040
    assert trainable_params(m, Job(method="lora", lora_rank=8, lora_targets="attention")) == 6_815_744


def test_offload_requires_sharding() -> None:
    with pytest.raises(ValueError, match="offload"):
        Job(method="full", offload=True)


# --- time ----------------------------------------------------------------------------------------


def test_flops_per_token_is_6n_for_full_and_4n_for_lora(models: dict[str, ModelSpec]) -> None:
    m = models["meta-llama/Llama-2-7b-hf"]
    n = m.params - m.vocab_size * m.hidden_size
    full = flops_per_token(m, Job(method="full", seq_len=1, grad_checkpointing=False))
    lora = flops_per_token(m, Job(method="lora", seq_len=1, grad_checkpointing=False, lora_rank=1))
    assert full == pytest.approx(6 * n, rel=1e-3)
    assert lora == pytest.approx(4 * n, rel=1e-3)
    recompute = flops_per_token(m, Job(method="full", seq_len=1, grad_checkpointing=True))
    # checkpointing reruns the decoder layers' forward, not the head (it is outside them)
    head = m.vocab_size * m.hidden_size
    assert recompute == pytest.approx(8 * n - 2 * head, rel=1e-3)


def test_time_single_gpu_has_no_communication(models: dict[str, ModelSpec]) -> None:
    m = models["meta-llama/Llama-3.1-8B"]
    t = estimate_time(m, Job(method="lora"), 1e8, 1, 1, 989.0, None, None)
    assert t.comm_hours == 0 and not t.multi_node and t.warning is None
    assert t.hours == pytest.approx(t.compute_hours)
    # hours = steps × seconds per step: 1e8 tokens in steps of 2048
    assert t.step is not None
    assert t.hours * 3600 == pytest.approx(1e8 / 2048 * t.step.total_s)


def test_zero3_over_pcie_is_communication_bound(models: dict[str, ModelSpec]) -> None:
    m = models["meta-llama/Llama-3.1-8B"]
    job = Job(method="full", sharding="zero3", micro_batch=1, seq_len=2048)
    nvlink = estimate_time(m, job, 1e8, 8, 8, 989.0, 900 * 8, None)
    pcie = estimate_time(m, job, 1e8, 8, 8, 989.0, 32 * 8, None)
    assert pcie.comm_hours > pcie.compute_hours
    assert pcie.hours > nvlink.hours
    # ZeRO-3 moves 3 × 2 B × Ψ per micro-step per GPU (× 7/8 for the ring)
    steps = 1e8 / (2048 * 8)
    expected_s = steps * 3 * 2 * m.params * 7 / 8 * 8 / (32 * 8 * 1e9 * 0.75)
    assert pcie.comm_hours * 3600 == pytest.approx(expected_s, rel=1e-6)


def test_multi_node_without_fast_fabric_is_flagged(models: dict[str, ModelSpec]) -> None:
    m = models["meta-llama/Llama-3.1-70B"]
    job = Job(method="full", sharding="zero3")
    slow = estimate_time(m, job, 1e8, 16, 8, 989.0, 7200.0, 100.0)
    unknown = estimate_time(m, job, 1e8, 16, 8, 989.0, 7200.0, None)
    fast = estimate_time(m, job, 1e8, 16, 8, 989.0, 7200.0, 3200.0)
    assert slow.multi_node and slow.needs_fast_fabric_warning and slow.warning
    assert math.isinf(unknown.hours) and unknown.warning
    assert fast.nodes == 2 and not fast.needs_fast_fabric_warning
    assert fast.hours < slow.hours


def test_default_csv_paths_point_into_the_package() -> None:
    assert (SEEDS_DIR / "llm_models.csv").is_file()
    assert (SEEDS_DIR / "finetune_jobs.csv").is_file()
    assert Path(SEEDS_DIR).name == "seeds"


def test_largest_layer_is_a_decoder_layer_or_the_embedding(models: dict[str, ModelSpec]) -> None:
    m = models["meta-llama/Llama-3.1-70B"]
    layer = (m.params - 2 * m.vocab_size * m.hidden_size - m.hidden_size) // m.layers
    assert largest_layer_params(m) == max(layer, m.vocab_size * m.hidden_size)
