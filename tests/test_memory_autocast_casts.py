"""Autocast over fp32 modules: each linear casts its input anew, and keeps its own cast.

torch.autocast caches only casts of leaves that require grad (the trained weights), never of
activations, so q, k and v each cast the fp32 normed stream to bf16 on their own; whichever of
them needs its input for a gradient keeps that copy. The expected figures below are counted op by
op, per token and layer, for Llama-3.1-8B (h = 4096, I = 14336 = 3.5h, 32 query heads and 8 KV
heads of 128: q_out = h, kv_out = h/4), in units of h bytes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job, ModelSpec
from finetune.job import Method
from finetune.memory import (
    _layer_activation_bytes_per_token,
    activation_bytes,
    is_adapted,
    layer_linears,
    saved_weight_bytes_per_layer,
)
from warehouse.seed_models import load_models

MODELS = load_models()
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B"]
H = LLAMA_8B.hidden_size
SEQ = 2048


def per_layer_h(job: Job, model: ModelSpec = LLAMA_8B) -> float:
    """Saved bytes per token of one decoder layer, in units of the model's hidden size."""
    return _layer_activation_bytes_per_token(model, job, SEQ) / model.hidden_size


def test_the_constants_of_the_counts_below() -> None:
    assert LLAMA_8B.intermediate_size == 3.5 * H
    assert LLAMA_8B.attention_heads * LLAMA_8B.head_dim_ == H
    assert LLAMA_8B.kv_heads * LLAMA_8B.head_dim_ == H / 4


def test_full_fine_tuning_keeps_one_cast_per_linear_that_reads_the_fp32_stream() -> None:
    # norms: the fp32 upcast (4h) and the fp32 normed output for the trained weight (4h), twice
    # = 16h; q, k, v, gate, up each keep their own bf16 cast (5 × 2h); FlashAttention q, k, v,
    # out (2 + 0.5 + 0.5 + 2 = 5h, out is also o's input); gate, act, up outputs (6I = 21h);
    # down's bf16 input (2I = 7h)
    auto = Job(method="full", grad_checkpointing=False, mixed_precision="autocast")
    assert per_layer_h(auto) == pytest.approx(16 + 10 + 5 + 21 + 7)
    # with bf16 modules the five share two inputs (q/k/v's and gate/up's), and the norms' kept
    # normed output is bf16: 12h + 2h + 5h + 21h + 2h + 7h
    assert per_layer_h(replace(auto, mixed_precision="fsdp")) == pytest.approx(12 + 2 + 5 + 21 + 2 + 7)


def test_lora_adapters_each_keep_their_own_bf16_cast() -> None:
    # the frozen fp32 base keeps only its weight's cast; every adapter's lora_A keeps a bf16 cast
    # of its input: q, k, v, o (4 × 2h), gate, up (2 × 2h), down (2I = 7h); norms 8h, attention
    # 5h, the MLP's inner tensors 21h
    auto = Job(method="lora", grad_checkpointing=False, mixed_precision="autocast")
    assert per_layer_h(auto) == pytest.approx(8 + 8 + 5 + 21 + 4 + 7)
    # the same copies as the HF Trainer's round trip over bf16 modules (one GPU): both end in a
    # bf16 cast of its own under every lora_A
    trainer = replace(auto, mixed_precision="fsdp")
    assert trainer.adapter_input_round_trip
    assert per_layer_h(auto) == pytest.approx(per_layer_h(trainer))
    # sharded bf16 modules (FSDP MixedPrecision casts the adapters to bf16) share the inputs
    sharded = replace(auto, sharding="zero3")
    assert per_layer_h(sharded) - per_layer_h(replace(sharded, mixed_precision="fsdp")) == pytest.approx(
        (8 + 4 + 7) - (2 + 2 + 7)
    )


def test_lora_dropout_adds_its_mask_to_each_adapters_own_copy() -> None:
    auto = Job(method="lora", grad_checkpointing=False, mixed_precision="autocast")
    adapted_inputs = 3 + 1 + 2 + 3.5  # q, k, v, o, gate, up, down: d_in in units of h
    assert per_layer_h(replace(auto, lora_dropout=0.1)) - per_layer_h(auto) == pytest.approx(adapted_inputs)


def test_qv_lora_keeps_casts_for_its_two_adapters_only() -> None:
    auto = Job(method="lora", grad_checkpointing=False, mixed_precision="autocast", lora_targets="qv")
    # q and v adapters: 2 × 2h; nothing of the MLP's inputs (no adapter, frozen base)
    assert per_layer_h(auto) == pytest.approx(8 + 4 + 5 + 21)


def test_bnb_qlora_bases_keep_their_casts_and_the_mlp_runs_in_fp32() -> None:
    auto = Job(method="qlora", grad_checkpointing=False, mixed_precision="autocast", lora_dropout=0.0)
    # Linear4bit casts to the compute dtype and MatMul4Bit keeps the cast: q, k, v, gate, up
    # (5 × 2h) and down, whose input is fp32 behind the fp32 outputs (7h); o reads the bf16
    # attention output as it is. Adapters: those on fp32 inputs keep their own cast (q, k, v,
    # gate, up: 5 × 2h; down 7h); PEFT's bnb layer skips its cast under autocast, so o's adapter
    # shares the attention output. The MLP's inner tensors are fp32: 12I = 42h.
    assert per_layer_h(auto) == pytest.approx(8 + (10 + 7) + (10 + 7) + 5 + 42)
    # with bf16 modules: one shared q/k/v input, one gate/up input, down's input, bf16 MLP
    fsdp = replace(auto, mixed_precision="fsdp")
    assert per_layer_h(fsdp) == pytest.approx(8 + 2 + 5 + 21 + 2 + 7)


def test_bnb_qlora_dropout_puts_a_copy_under_every_adapter_including_o() -> None:
    auto = Job(method="qlora", grad_checkpointing=False, mixed_precision="autocast", lora_dropout=0.0)
    dropped = replace(auto, lora_dropout=0.1)
    # every adapter gains the 1-byte mask (9.5h in all); o's adapter, which shared the bf16
    # attention output, now keeps dropout's bf16 output too (2h)
    assert per_layer_h(dropped) - per_layer_h(auto) == pytest.approx(9.5 + 2)


def test_gptq_adapters_share_the_bf16_inputs_and_cast_the_fp32_ones() -> None:
    auto = Job(
        method="qlora", quant="gptq", grad_checkpointing=False, mixed_precision="autocast", lora_dropout=0.0
    )
    # GPTQ's base keeps its dequantized weight, not x; its outputs follow autocast (bf16).
    # Adapters on q, k, v, gate, up keep their own casts (5 × 2h); o's and down's read bf16
    # inputs as they are (down's product counted once, 7h; o's output is attention's)
    assert per_layer_h(auto) == pytest.approx(8 + 10 + 5 + 21 + 7)


def test_a_parallel_block_casts_once_per_linear_too() -> None:
    # Phi-2: q, k, v and fc1 all read the one LayerNorm output; under autocast each casts it
    phi = MODELS["microsoft/phi-2"]
    assert phi.parallel_block and not phi.gated_mlp
    auto = Job(method="full", grad_checkpointing=False, mixed_precision="autocast")
    fsdp = replace(auto, mixed_precision="fsdp")
    h = phi.hidden_size
    extra = _layer_activation_bytes_per_token(phi, auto, SEQ) - _layer_activation_bytes_per_token(
        phi, fsdp, SEQ
    )
    # four own casts where one shared input was (+3 × 2h); LayerNorm keeps its input in fp32
    # (+2h, one norm)
    assert extra == pytest.approx((3 * 2 + 2) * h)


@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_autocast_never_keeps_less_than_bf16_modules(method: Method) -> None:
    for checkpointing in (True, False):
        job = Job(method=method, grad_checkpointing=checkpointing, seq_len=4096)
        auto = replace(job, mixed_precision="autocast")
        assert activation_bytes(LLAMA_8B, auto) > activation_bytes(LLAMA_8B, job)


def test_with_checkpointing_only_the_recomputed_layer_keeps_the_casts() -> None:
    job = Job(method="lora", seq_len=8192, mixed_precision="autocast")
    no_gc = replace(job, grad_checkpointing=False)
    # each live layer also keeps its frozen weights' bf16 casts (a fixed cost)
    per_layer = _layer_activation_bytes_per_token(LLAMA_8B, job, 8192) * 8192
    per_layer += saved_weight_bytes_per_layer(LLAMA_8B, job)
    # without checkpointing every layer's casts are alive; with it, the recomputed layer's only,
    # beside the 32 fp32 layer inputs (4h per token each) and the final norm and head input (10h)
    assert activation_bytes(LLAMA_8B, job) == pytest.approx(per_layer + (4 * 32 + 10) * H * 8192)
    assert activation_bytes(LLAMA_8B, no_gc) == pytest.approx(32 * per_layer + 10 * H * 8192)


def test_the_layer_linears_and_which_each_target_adapts() -> None:
    attention, mlp = layer_linears(LLAMA_8B)
    assert [n for n, _, _ in attention] == ["q", "k", "v", "o"]
    assert [n for n, _, _ in mlp] == ["gate", "up", "down"]
    # a plain MLP names fc1 "up" and fc2 "down"
    assert [n for n, _, _ in layer_linears(MODELS["microsoft/phi-2"])[1]] == ["up", "down"]
    lora = Job(method="lora", lora_targets="qv")
    assert [n for n, _, _ in attention + mlp if is_adapted(lora, n)] == ["q", "v"]
    assert not any(is_adapted(replace(lora, method="full"), n) for n, _, _ in attention + mlp)
    # bitsandbytes bases are NF4 QLoRA's only
    assert Job(method="qlora").bnb_base and not Job(method="qlora", quant="gptq").bnb_base
    assert not Job(method="lora").bnb_base
