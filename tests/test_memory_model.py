"""Memory model additions: loss kinds, plain MLPs, QLoRA fixed costs, phases and totals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job, memory_per_gpu, model_from_hf_config
from finetune.architecture import ModelSpec
from finetune.memory import QUANT_BYTES_PER_PARAM, logits_bytes
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]

# Plain fc1 → act → fc2 families, with the totals their model cards publish.
PHI_2 = {
    "model_type": "phi", "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 32,
    "num_attention_heads": 32, "vocab_size": 51200, "tie_word_embeddings": False,
    "max_position_embeddings": 2048,
}  # fmt: skip
STARCODER2_3B = {
    "model_type": "starcoder2", "hidden_size": 3072, "intermediate_size": 12288,
    "num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2,
    "vocab_size": 49152, "max_position_embeddings": 16384,
}  # fmt: skip
GPT_J_6B = {
    "model_type": "gptj", "n_embd": 4096, "n_layer": 28, "n_head": 16, "n_inner": None,
    "vocab_size": 50400, "n_positions": 2048, "tie_word_embeddings": False,
}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "published_b"),
    [(PHI_2, 2.78), (STARCODER2_3B, 3.03), (GPT_J_6B, 6.05)],
)
def test_plain_mlp_families_reproduce_published_parameter_counts(config: dict, published_b: float) -> None:
    spec = model_from_hf_config(config, "x")
    assert not spec.gated_mlp
    assert spec.params / 1e9 == pytest.approx(published_b, rel=0.01)


def test_llama_family_is_gated() -> None:
    spec = model_from_hf_config({**PHI_2, "model_type": "llama"}, "x")
    assert spec.gated_mlp


@pytest.mark.parametrize("bad", [{"num_attention_heads": 0}, {"hidden_size": 0}, {"num_hidden_layers": 0}])
def test_degenerate_configs_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        model_from_hf_config({**PHI_2, **bad}, "x")


def test_absurd_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="beyond"):
        model_from_hf_config({**PHI_2, "hidden_size": 10_000_000, "intermediate_size": 40_000_000}, "x")


def test_loss_decides_the_logits_term() -> None:
    job = Job(seq_len=4096, micro_batch=2)
    standard, chunked, fused = (
        logits_bytes(LLAMA_8B, replace(job, loss=k)) for k in ("standard", "chunked", "fused")
    )
    elements = 4096 * 2 * LLAMA_8B.vocab_size
    # bf16 logits + fp32 copy + fp32 grad + bf16 grad; chunked keeps bf16 + one fp32 chunk of 8
    assert standard == pytest.approx(12 * elements)
    assert chunked == pytest.approx(3 * elements)
    assert fused == 0


def test_gemma2_soft_capping_adds_a_logits_copy_and_disables_flash() -> None:
    gemma = MODELS["google/gemma-2-9b"]
    assert gemma.final_logit_softcapping and gemma.attn_logit_softcapping
    plain = replace(gemma, final_logit_softcapping=False, attn_logit_softcapping=False)
    job = Job(seq_len=4096, grad_checkpointing=False)
    assert memory_per_gpu(gemma, job).activations_gb > memory_per_gpu(plain, job).activations_gb
    assert logits_bytes(gemma, job) > logits_bytes(plain, job)


def test_quantization_formats_order_by_bits() -> None:
    assert QUANT_BYTES_PER_PARAM["nf4-dq"] < QUANT_BYTES_PER_PARAM["gptq"] < QUANT_BYTES_PER_PARAM["nf4"]
    base = Job(method="qlora", lora_dropout=0.0)
    weights = {
        q: memory_per_gpu(LLAMA_8B, replace(base, quant=q)).weights_gb for q in ("nf4", "nf4-dq", "gptq")
    }
    assert weights["nf4-dq"] < weights["gptq"] < weights["nf4"]


def test_lora_dropout_copies_adapter_inputs() -> None:
    job = Job(method="lora", lora_dropout=0.0, grad_checkpointing=False)
    with_dropout = replace(job, lora_dropout=0.1)
    assert (
        memory_per_gpu(LLAMA_8B, with_dropout).activations_gb > memory_per_gpu(LLAMA_8B, job).activations_gb
    )
    # recipe default: QLoRA's reference scripts use 0.1, plain LoRA (PEFT default) 0
    assert Job(method="qlora").dropout == 0.1 and Job(method="lora").dropout == 0.0


def test_kbit_preparation_upcasts_the_unquantized_parameters() -> None:
    job = Job(method="qlora")
    upcast = replace(job, kbit_upcast=True)
    extra = (memory_per_gpu(LLAMA_8B, upcast).weights_gb - memory_per_gpu(LLAMA_8B, job).weights_gb) * 1e9
    # embedding + untied head + norms go from 2 to 4 bytes
    unquantized = 2 * LLAMA_8B.vocab_size * LLAMA_8B.hidden_size + (2 * 32 + 1) * LLAMA_8B.hidden_size
    assert extra == pytest.approx(2 * unquantized, rel=1e-6)


def test_totals_are_ordered_and_the_phase_is_named() -> None:
    b = memory_per_gpu(LLAMA_8B, Job(method="lora", seq_len=4096))
    assert b.allocated_gb <= b.reserved_gb <= b.device_gb == b.total_gb
    assert b.peak_phase == "step"
    assert dict(b.phases_gb)["step"] == pytest.approx(b.total_gb)


def test_foreach_adamw_temporaries_can_set_the_peak() -> None:
    # full fine-tuning of a small model with a tiny batch: the optimizer step's sqrt(v) tensor
    # (4 B/param) outweighs the activations and logits the step held
    tiny = ModelSpec("t", 0, 0, 4, 1024, 8, 8, 4096, 1000, True, 2048)
    p = 1000 * 1024 + 4 * (4 * 1024 * 1024 + 3 * 1024 * 4096 + 2 * 1024) + 1024
    tiny = replace(tiny, params=p, active_params=p)
    b = memory_per_gpu(tiny, Job(method="full", seq_len=16, micro_batch=1))
    assert b.peak_phase == "optimizer"


# --- second pass: checkpoint policy, optimizer implementation, load phase ----------------------


def test_selective_checkpointing_keeps_more_than_full_and_less_than_none() -> None:
    from dataclasses import replace

    from finetune import Job, activation_bytes
    from warehouse.seed_models import load_models

    m = load_models()["meta-llama/Llama-3.1-8B"]
    none = Job(method="full", seq_len=8192, micro_batch=2, grad_checkpointing=False)
    full = replace(none, grad_checkpointing=True)
    selective = replace(full, checkpoint_policy="selective")
    assert activation_bytes(m, full) < activation_bytes(m, selective) < activation_bytes(m, none)


def test_fused_adamw_has_no_foreach_temporary() -> None:
    from dataclasses import replace

    from finetune import Job, memory_per_gpu
    from warehouse.seed_models import load_models

    m = load_models()["meta-llama/Llama-3.2-1B"]
    job = Job(method="full", seq_len=128, micro_batch=1)
    foreach = dict(memory_per_gpu(m, job).phases_gb)["optimizer"]
    fused = dict(memory_per_gpu(m, replace(job, optimizer_impl="fused")).phases_gb)["optimizer"]
    # foreach's sqrt(v) is one fp32 state-sized tensor list: 4 B per parameter
    assert foreach - fused == pytest.approx(4 * m.params / 1e9)


def test_full_state_dict_load_holds_the_whole_bf16_model_on_each_gpu() -> None:
    from dataclasses import replace

    from finetune import Job, memory_per_gpu
    from warehouse.seed_models import load_models

    m = load_models()["meta-llama/Llama-3.1-70B"]
    # LoRA: the sharded frozen base is small per GPU, so the gathered load decides the peak
    job = Job(method="lora", sharding="zero3", seq_len=2048, micro_batch=1)
    streamed = dict(memory_per_gpu(m, job, 8).phases_gb)["load"]
    gathered = memory_per_gpu(m, replace(job, full_state_dict_load=True), 8)
    assert dict(gathered.phases_gb)["load"] > 2 * m.params / 1e9 > streamed
    assert gathered.peak_phase == "load"


def test_peft_default_q_v_targets_match_peft_trainable_params() -> None:
    from finetune import Job, trainable_params
    from warehouse.seed_models import load_models

    # PEFT prints "trainable params: 4,194,304" for Llama-2-7B with r=8 on q_proj, v_proj
    m = load_models()["meta-llama/Llama-2-7b-hf"]
    assert trainable_params(m, Job(method="lora", lora_rank=8, lora_targets="qv")) == 4_194_304
