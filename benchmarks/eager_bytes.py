"""Count the bytes transformers' and PEFT's eager code moves, op by op, and check the time model's
per-element counts against the count.

    # anywhere with torch, transformers and peft; the CPU is enough (ops are counted, not timed):
    python3 -m venv /tmp/eb && /tmp/eb/bin/pip install torch==2.13.0 transformers peft
    /tmp/eb/bin/python benchmarks/eager_bytes.py count --out counts.json
    # here:
    uv run python benchmarks/eager_bytes.py compare counts.json

`count` imports torch, transformers and peft only, never this project. A TorchDispatchMode sees
every aten op the code dispatches and adds the bytes of its tensor inputs and outputs (numel ×
element size). Ops that return a view move nothing and are left out; in-place ops count; `empty`
and `empty_like` only allocate. Matmuls and attention are set apart, since the model prices them
by FLOPs. What is counted, in bf16 (`COUNTS`):

* rms_norm: LlamaRMSNorm forward, per element;
* rotary: apply_rotary_pos_emb forward, per q and k element, with the cos and sin rows (one per
  position, shared by the heads) apart;
* loss: `F.cross_entropy(logits.float(), labels)`, forward and backward, per logit;
* layer: a LlamaDecoderLayer's forward outside its matmuls and attention, per token; bare, with
  PEFT LoRA on all seven linears in bf16 (`lora`) and in PEFT's default fp32 (`lora_fp32`); and
  the bare layer's backward with its weights frozen (`bare_backward`), against
  ELEMENTWISE_BACKWARD_RATIO × its forward.

`compare` reads the same quantities from `finetune.time` and prints both with their difference.
A count only checks what it counts: the layout copies around attention depend on the transformers
version (benchmarks/README.md), and the CPU's dropout is not CUDA's fused kernel, so neither is
compared. Counts are exact for the transformers and peft that ran; run it again after upgrading.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from finetune.architecture import ModelSpec

# the decoder layer counted: small, with Llama's proportions and GQA (8 query, 4 key/value heads)
LAYER = {"hidden": 512, "intermediate": 1376, "heads": 8, "kv_heads": 4, "head_dim": 64, "tokens": 1024}
ROTARY = {"tokens": 512, "heads": 4, "kv_heads": 2, "head_dim": 64}
LOSS = {"tokens": 512, "vocab": 1000}
NORM = {"tokens": 512, "hidden": 256}
LORA_RANK = 16
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# aten ops the model prices by FLOPs, not bytes: matmuls and attention kernels (name prefixes)
FLOP_OPS = ("aten.mm", "aten.addmm", "aten.bmm", "aten._scaled_dot_product", "aten.scaled_dot_product")
ALLOCATIONS = ("aten.empty", "aten.empty_like", "aten._unsafe_view", "aten.detach")


# ---------------------------------------------------------------- count (torch side)


def _counter(torch: Any) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Count(TorchDispatchMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[tuple[str, int, int]] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            name = str(func)
            views = [
                r for r in func._schema.returns if r.alias_info is not None and not r.alias_info.is_write
            ]
            if views or name.startswith(ALLOCATIONS):
                return out
            ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            self.ops.append(
                (
                    name,
                    sum(t.numel() * t.element_size() for t in ins),
                    sum(t.numel() * t.element_size() for t in outs),
                )
            )
            return out

    return Count


def _bytes(ops: list[tuple[str, int, int]]) -> float:
    return float(sum(r + w for name, r, w in ops if not name.startswith(FLOP_OPS)))


def count_layer(torch: Any, adapters: str | None, backward: bool = False) -> float:
    """Forward bytes per token of one decoder layer outside its matmuls and attention; with
    `backward`, the bytes of its backward instead, its weights frozen (LoRA's base) and the input
    requiring a gradient (a layer that is not the first)."""
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama

    c = LAYER
    config = LlamaConfig(
        hidden_size=c["hidden"],
        intermediate_size=c["intermediate"],
        num_attention_heads=c["heads"],
        num_key_value_heads=c["kv_heads"],
        head_dim=c["head_dim"],
        num_hidden_layers=1,
        vocab_size=1000,
    )
    config._attn_implementation = "sdpa"
    layer: Any = modeling_llama.LlamaDecoderLayer(config, 0).to(torch.bfloat16)
    layer.requires_grad_(False)
    if adapters:
        from peft import LoraConfig, get_peft_model

        class Holder(torch.nn.Module):  # type: ignore[misc,name-defined]
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, *args: Any, **kwargs: Any) -> Any:
                return self.inner(*args, **kwargs)

        # PEFT casts adapters on a bf16 base to fp32 (autocast_adapter_dtype); `lora` casts back
        lora = LoraConfig(
            r=LORA_RANK, lora_alpha=2 * LORA_RANK, lora_dropout=0.0, target_modules=list(LORA_TARGETS)
        )
        layer = get_peft_model(Holder(layer), lora)
        if adapters == "bf16":
            layer = layer.to(torch.bfloat16)
    x = torch.randn(1, c["tokens"], c["hidden"], dtype=torch.bfloat16, requires_grad=True)
    cos, sin = modeling_llama.LlamaRotaryEmbedding(config)(x, torch.arange(c["tokens"])[None])
    with _counter(torch)() as forward:
        out = layer(x, position_embeddings=(cos, sin), attention_mask=None)
    if not backward:
        return _bytes(forward.ops) / c["tokens"]
    out = out[0] if isinstance(out, tuple) else out
    grad = torch.randn_like(out)
    with _counter(torch)() as counted:
        out.backward(grad)
    return _bytes(counted.ops) / c["tokens"]


def count(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        print(
            "eager_bytes count needs torch, transformers and peft: run it with a python that has them "
            "(see this file's docstring), not in this project's environment",
            file=sys.stderr,
        )
        return 2
    import peft
    import transformers
    from transformers.models.llama import modeling_llama

    bf16 = torch.bfloat16
    counter = _counter(torch)
    norm_shape = (NORM["tokens"], NORM["hidden"])
    norm = modeling_llama.LlamaRMSNorm(NORM["hidden"]).to(bf16)
    x = torch.randn(*norm_shape, dtype=bf16)
    with counter() as c_norm:
        norm(x)

    r = ROTARY
    q = torch.randn(1, r["tokens"], r["heads"], r["head_dim"], dtype=bf16).transpose(1, 2)
    k = torch.randn(1, r["tokens"], r["kv_heads"], r["head_dim"], dtype=bf16).transpose(1, 2)
    angle = torch.arange(r["tokens"], dtype=torch.float32)[:, None] * torch.rand(r["head_dim"])
    cos, sin = angle.cos().to(bf16)[None], angle.sin().to(bf16)[None]
    with counter() as c_rotary:
        modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    # each of the four products reads its cos or sin rows whole
    rows = 4 * r["tokens"] * r["head_dim"] * 2

    logits = torch.randn(LOSS["tokens"], LOSS["vocab"], dtype=bf16, requires_grad=True)
    labels = torch.randint(LOSS["vocab"], (LOSS["tokens"],))
    with counter() as c_loss:
        torch.nn.functional.cross_entropy(logits.float(), labels).backward()

    elements = r["tokens"] * (r["heads"] + r["kv_heads"]) * r["head_dim"]
    report = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "rms_norm_per_element": _bytes(c_norm.ops) / (NORM["tokens"] * NORM["hidden"]),
        "rotary_per_element": (_bytes(c_rotary.ops) - rows) / elements,
        "loss_ops": [name for name, _, _ in c_loss.ops],
        "loss_per_logit": _bytes(c_loss.ops) / (LOSS["tokens"] * LOSS["vocab"]),
        "layer_per_token": {
            "bare": count_layer(torch, None),
            "lora": count_layer(torch, "bf16"),
            "lora_fp32": count_layer(torch, "fp32"),
            "bare_backward": count_layer(torch, None, backward=True),
        },
    }
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


# ---------------------------------------------------------------- compare (this side)


def layer_model() -> ModelSpec:
    """The decoder layer `count` builds, as the time model reads a config."""
    from finetune.architecture import model_from_hf_config

    c = LAYER
    return model_from_hf_config(
        {
            "model_type": "llama",
            "hidden_size": c["hidden"],
            "intermediate_size": c["intermediate"],
            "num_attention_heads": c["heads"],
            "num_key_value_heads": c["kv_heads"],
            "head_dim": c["head_dim"],
            "num_hidden_layers": 1,
            "vocab_size": 1000,
        },
        "eager-bytes-layer",
    )


def model_counts() -> dict[str, float]:
    """The same quantities from the time model's own functions, for the shapes `count` uses."""
    from dataclasses import replace

    from finetune import Job
    from finetune.memory import adapted_linears
    from finetune.time import (
        EAGER_RMS_NORM_BYTES,
        EAGER_ROTARY_BYTES,
        ELEMENTWISE_BACKWARD_RATIO,
        HEAD_LOGIT_WRITE_BYTES,
        LOSS_BYTES_PER_LOGIT,
        _elementwise_bytes_per_token,
        _fp32_adapter_bytes_per_token,
        attention_layout_bytes,
    )

    c = LAYER
    model = layer_model()
    layout = attention_layout_bytes(model)  # version-dependent: not compared
    bare = _elementwise_bytes_per_token(model, Job(method="full", seq_len=c["tokens"])) - layout
    # the adapters as `count` builds them: bf16 (as FSDP casts them) and PEFT's fp32 (one GPU, no
    # autocast), r 16 on all seven linears, no dropout
    bf16 = Job(
        method="lora",
        seq_len=c["tokens"],
        lora_rank=LORA_RANK,
        lora_targets="all-linear",
        lora_dropout=0.0,
        sharding="zero3",
    )
    fp32 = replace(bf16, sharding="none", mixed_precision="none")
    # the count leaves matmuls out, so the adapters' own matmul traffic comes off the model's: A
    # reads its input and B writes its output, 2 bytes per element in bf16 and 4 in fp32
    matmul_io = sum(d_in + d_out for d_in, d_out in adapted_linears(model, bf16))
    lora = _elementwise_bytes_per_token(model, bf16) - layout - 2 * matmul_io
    lora_fp32 = (
        _elementwise_bytes_per_token(model, fp32)
        + _fp32_adapter_bytes_per_token(model, fp32)
        - layout
        - 4 * matmul_io
    )
    return {
        "rms_norm_per_element": float(EAGER_RMS_NORM_BYTES),
        "rotary_per_element": float(EAGER_ROTARY_BYTES),
        # `count`'s loss starts from logits the head already wrote
        "loss_per_logit": LOSS_BYTES_PER_LOGIT["standard"] - HEAD_LOGIT_WRITE_BYTES,
        "layer bare": bare,
        "layer lora": lora,
        "layer lora_fp32": lora_fp32,
        # backward as the model prices it: ELEMENTWISE_BACKWARD_RATIO × the whole forward, layout
        # term included (the backward's own gradient copies: rotate_half's slice backward
        # zero-fills a full q or k, contiguous's backward clones, in transformers 5.x, which
        # makes no layout copy in forward)
        "layer bare_backward": ELEMENTWISE_BACKWARD_RATIO * (bare + layout),
    }


# The loss's ops as transformers' causal-LM loss dispatches them (upcast, log_softmax, nll_loss,
# the unit gradient, their backwards, the cast back)
LOSS_OPS = (
    "aten._to_copy.default",
    "aten._log_softmax.default",
    "aten.nll_loss_forward.default",
    "aten.ones_like.default",
    "aten.nll_loss_backward.default",
    "aten._log_softmax_backward_data.default",
    "aten._to_copy.default",
)


def kernel_loss_bytes(report: dict[str, Any]) -> float:
    """The loss's bytes per logit as its kernels move them, from the dispatch count: log_softmax
    reads its input twice (the row max, then the sum of exponentials: +4 over the one read the
    dispatch sees), and nll_loss's forward and backward touch only the targets' entries of the
    fp32 tensor they are passed (−4 each: the backward's dense write is its zero-fill, counted).
    Only for the seven-op path above; another path is reported as counted."""
    if tuple(report["loss_ops"]) != LOSS_OPS:
        return float(report["loss_per_logit"])
    second_read = 4.0  # log_softmax's second pass over its fp32 input
    gathers = 2 * 4.0  # nll_loss forward and backward: passed the fp32 tensor, read the targets'
    return float(report["loss_per_logit"]) + second_read - gathers


def compare_rows(report: dict[str, Any]) -> list[tuple[str, float, float]]:
    """(quantity, counted, the model's) for each quantity the count and the model share."""
    model = model_counts()
    counted = {
        "rms_norm_per_element": report["rms_norm_per_element"],
        "rotary_per_element": report["rotary_per_element"],
        "loss_per_logit": kernel_loss_bytes(report),
        **{f"layer {k}": v for k, v in report["layer_per_token"].items()},
    }
    return [(name, counted[name], model[name]) for name in model if name in counted]


def compare(args: argparse.Namespace) -> int:
    report = json.loads(Path(args.counts).read_text())
    print(
        f"# eager bytes counted with torch {report['torch']}, transformers {report['transformers']}, "
        f"peft {report['peft']}\n"
    )
    print("| quantity | counted | the time model | difference |")
    print("|---|---|---|---|")
    for name, counted, model in compare_rows(report):
        print(f"| {name} | {counted:,.1f} | {model:,.1f} | {(counted / model - 1) * 100:+.1f} % |")
    print(f"\nthe loss's ops: {', '.join(report['loss_ops'])}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    c = sub.add_parser("count", help="with torch, transformers and peft: write counts.json")
    c.add_argument("--out", default="counts.json")
    m = sub.add_parser("compare", help="here: the counts against finetune.time")
    m.add_argument("counts", help="counts.json from `count`")
    args = parser.parse_args(argv)
    return count(args) if args.verb == "count" else compare(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
