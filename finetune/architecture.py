"""Architecture facts of a decoder transformer, from a Hugging Face config.json or a seed row (pure).

`ModelSpec` holds what the memory and time models need; parameter counts are computed from the
architecture (embeddings + L·(attention + MLP + 2 norms) + final norm), never looked up.

Gated vs plain MLP is read from the architecture: the model families whose transformers modeling
code builds the MLP as fc1 → act → fc2 are listed in `PLAIN_MLP_MODEL_TYPES` (data, one line per
family); every other family with a gate/up/down MLP (LlamaMLP and its descendants, Gemma's GeGLU,
Phi-3's fused gate_up_proj) is gated. An unknown `model_type` is gated unless its activation names
no gating and its config says `mlp_type`/`ffn_type` otherwise; T5 reads `feed_forward_proj`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

# model_type → plain two-matrix MLP, from each family's transformers modeling file
# (class names in parentheses): fc1/fc2 or c_fc/c_proj, no gate projection.
PLAIN_MLP_MODEL_TYPES: frozenset[str] = frozenset(
    {
        "phi",  # Phi-1, 1.5, 2 (PhiMLP: fc1, fc2)
        "gptj",  # GPT-J (GPTJMLP: fc_in, fc_out)
        "codegen",  # CodeGen (CodeGenMLP: fc_in, fc_out)
        "mpt",  # MPT (MptMLP: up_proj, down_proj)
        "starcoder2",  # StarCoder2 (Starcoder2MLP: c_fc, c_proj)
        "gpt2",  # GPT-2 (GPT2MLP: c_fc, c_proj)
        "gpt_bigcode",  # StarCoder 1, SantaCoder (GPTBigCodeMLP)
        "gpt_neox",  # Pythia, GPT-NeoX (GPTNeoXMLP: dense_h_to_4h, dense_4h_to_h)
        "gpt_neo",  # GPT-Neo (GPTNeoMLP)
        "falcon",  # Falcon (FalconMLP: dense_h_to_4h, dense_4h_to_h)
        "bloom",  # BLOOM (BloomMLP)
        "opt",  # OPT (fc1, fc2 in OPTDecoderLayer)
        "persimmon",  # Persimmon (PersimmonMLP: dense_h_to_4h, dense_4h_to_h)
        "biogpt",  # BioGPT (fc1, fc2 in BioGptDecoderLayer)
    }
)
# model_type → nn.LayerNorm (F.layer_norm, one native kernel that keeps its input and per-token
# mean/rstd) instead of the RMSNorm Llama-style code writes in torch ops with an fp32 upcast. The
# same families as the plain MLPs above, from their transformers modeling files (MPT's
# LPLayerNorm calls F.layer_norm too).
LAYER_NORM_MODEL_TYPES: frozenset[str] = PLAIN_MLP_MODEL_TYPES
# model_type → parallel block: one norm feeds attention and the MLP side by side
# (PhiDecoderLayer: input_layernorm only; GPTJBlock: ln_1 only; CodeGenBlock: ln_1 only). Falcon
# is parallel with one norm when its config says parallel_attn and not new_decoder_architecture.
PARALLEL_BLOCK_MODEL_TYPES: frozenset[str] = frozenset({"phi", "gptj", "codegen"})
# hidden_act values transformers implements as the tanh-approximated GELU written in torch ops
# (activations.py: NewGELUActivation for "gelu_new", FastGELUActivation for "gelu_fast", both
# 0.5·x·(1 + tanh(…))): autograd keeps the tanh output, 0.5·x and 1 + tanh, three I-sized
# tensors a fused activation (nn.GELU, F.silu) does not keep.
TANH_GELU_OPS_ACTIVATIONS: frozenset[str] = frozenset({"gelu_new", "gelu_fast"})
# model_type → no rotary embedding on q and k: the position enters as a learned table added to the
# token embeddings, or as a bias on the attention scores, from each family's transformers modeling
# file. Every other family rotates q and k (Llama and its descendants, GPT-J, CodeGen, GPT-NeoX,
# Phi's partial rotary, Persimmon, StarCoder2, Falcon unless its config says alibi).
ROTARY_FREE_MODEL_TYPES: frozenset[str] = frozenset(
    {
        "mpt",  # ALiBi (MptAttention's position_bias); llm-foundry's own MPT may learn a table instead
        "gpt2",  # learned wpe
        "gpt_bigcode",  # learned wpe
        "gpt_neo",  # learned wpe
        "opt",  # OPTLearnedPositionalEmbedding
        "biogpt",  # BioGptLearnedPositionalEmbedding
        "bloom",  # ALiBi (build_alibi_tensor)
        "t5",  # relative position bias (T5Attention.relative_attention_bias)
        "mt5",
        "umt5",
    }
)
# Seeded models of those families (the seed has no architecture-kind columns): id → (layer norm,
# parallel block, tanh-GELU ops), from each config.json (phi: model_type "phi", hidden_act
# "gelu_new"; falcon-7b: "parallel_attn": true, "new_decoder_architecture": false, nn.GELU).
SEEDED_BLOCK_KINDS: dict[str, tuple[bool, bool, bool]] = {
    "microsoft/phi-1_5": (True, True, True),
    "microsoft/phi-2": (True, True, True),
    "tiiuae/falcon-7b": (True, True, False),
}
# Configs state the intermediate size under different keys; Qwen 1 counts both SwiGLU branches.
INTERMEDIATE_KEYS = ("moe_intermediate_size", "intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim")
# Absurd sizes are refused with one line rather than priced: 10 T parameters is ~5× the largest
# model anyone has trained in public; 1e7 hidden or 1e4 layers has no precedent either.
MAX_PARAMS = 10e12


@dataclass(frozen=True)
class ModelSpec:
    """Architecture facts of a decoder (or encoder-decoder) transformer, from its config.json."""

    model_id: str
    params: int
    active_params: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    max_context: int
    num_experts: int | None = None
    experts_per_token: int | None = None
    head_dim: int | None = None
    gated_mlp: bool = True
    # Gemma 2 soft-caps attention logits: FlashAttention-2 has no soft-cap, so HF runs it eager
    attn_logit_softcapping: bool = False
    # Gemma 2 also soft-caps the final logits (tanh): one more fp32 b·s·V copy kept for backward
    final_logit_softcapping: bool = False
    # --- modelmem (issue 23): block kinds that change the saved activations ---
    # nn.LayerNorm (bf16 in, bf16 out) instead of an RMSNorm upcast to fp32 in torch ops
    layer_norm: bool = False
    # one norm per layer feeding attention and MLP in parallel (Phi, GPT-J, CodeGen, Falcon-7B)
    parallel_block: bool = False
    # the MLP's GELU is the tanh approximation written in torch ops (gelu_new)
    tanh_gelu_ops: bool = False
    # q and k are rotated (RoPE); False for families that add learned positions or bias the scores
    rotary: bool = True

    def __post_init__(self) -> None:
        for name in (
            "layers",
            "hidden_size",
            "attention_heads",
            "kv_heads",
            "intermediate_size",
            "vocab_size",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{self.model_id}: {name} must be ≥ 1, got {getattr(self, name)}")
        if self.params > MAX_PARAMS:
            raise ValueError(f"{self.model_id}: {self.params:.3g} parameters is beyond any known model")

    @property
    def norms_per_layer(self) -> int:
        """Norms one layer runs: two, or one feeding attention and the MLP of a parallel block."""
        return 1 if self.parallel_block else 2

    @property
    def head_dim_(self) -> int:
        return self.head_dim or self.hidden_size // self.attention_heads

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts and self.num_experts > 1)


def _attention_params_per_layer(m: ModelSpec) -> int:
    q_out = m.attention_heads * m.head_dim_
    kv_out = m.kv_heads * m.head_dim_
    return m.hidden_size * q_out + 2 * m.hidden_size * kv_out + q_out * m.hidden_size


def _mlp_params_per_expert(m: ModelSpec) -> int:
    return (3 if m.gated_mlp else 2) * m.hidden_size * m.intermediate_size


def _mlp_params_per_layer(m: ModelSpec, active: bool = False) -> int:
    experts = (m.experts_per_token if active else m.num_experts) if m.is_moe else 1
    router = m.hidden_size * m.num_experts if m.is_moe and m.num_experts else 0
    return int(experts or 1) * _mlp_params_per_expert(m) + router


def layer_params(m: ModelSpec, active: bool = False) -> int:
    """One decoder layer: attention + MLP (all experts, or the routed ones) + two norms."""
    return _attention_params_per_layer(m) + _mlp_params_per_layer(m, active) + 2 * m.hidden_size


def embedding_params(m: ModelSpec) -> int:
    """Input embedding plus an untied output head (V·h each)."""
    return m.vocab_size * m.hidden_size * (1 if m.tied_embeddings else 2)


def linear_params(m: ModelSpec) -> int:
    """Parameters in the decoder's nn.Linear layers: what QLoRA quantizes."""
    return m.layers * (_attention_params_per_layer(m) + _mlp_params_per_layer(m))


def count_params(m: ModelSpec, active: bool = False) -> int:
    """Parameters implied by the architecture: embeddings + L·(attention + MLP + 2 norms) + norm.

    Biases are ignored (Qwen2's q/k/v biases are < 0.01% of the model).
    """
    return embedding_params(m) + m.layers * layer_params(m, active) + m.hidden_size


def largest_layer_params(m: ModelSpec) -> int:
    """The largest unit gathered whole under ZeRO-3/FSDP: one decoder layer or the embedding.

    FSDP wraps one decoder layer per unit (transformer_layer_cls_to_wrap in HF, torchtune, axolotl);
    DeepSpeed's estimator calls this `largest_layer_params`.
    """
    return max(layer_params(m), m.vocab_size * m.hidden_size)


def matmul_params(m: ModelSpec) -> int:
    """Parameters that do matmul work per token: active params minus the embedding lookup."""
    lookup = 0 if m.tied_embeddings else m.vocab_size * m.hidden_size
    return m.active_params - lookup


# --- from a seed row or a config.json -------------------------------------------------------------


def _bool(value: str) -> bool:
    return value.strip().lower() in ("true", "1", "yes")


def _opt_int(value: str | None) -> int | None:
    return int(value) if value else None  # None and "" both mean: not stated


def _is_gemma2(model_id: str) -> bool:
    return model_id.lower().split("/")[-1].startswith("gemma-2-")


def model_from_seed_row(row: Mapping[str, str]) -> ModelSpec:
    """A ModelSpec from one row of warehouse/seeds/llm_models.csv."""
    return ModelSpec(
        model_id=row["model_id"],
        params=int(row["params"]),
        active_params=int(row["active_params"]),
        layers=int(row["layers"]),
        hidden_size=int(row["hidden_size"]),
        attention_heads=int(row["attention_heads"]),
        kv_heads=int(row["kv_heads"]),
        intermediate_size=int(row["intermediate_size"]),
        vocab_size=int(row["vocab_size"]),
        tied_embeddings=_bool(row["tied_embeddings"]),
        max_context=int(row["max_context"]),
        num_experts=_opt_int(row.get("num_experts")),
        experts_per_token=_opt_int(row.get("experts_per_token")),
        head_dim=_opt_int(row.get("head_dim")),
        gated_mlp=_bool(row.get("gated_mlp") or "true"),
        # the seed has no soft-capping column; Gemma 2 is the one seeded family that soft-caps
        attn_logit_softcapping=_is_gemma2(row["model_id"]),
        final_logit_softcapping=_is_gemma2(row["model_id"]),
        **_seeded_block_kind(row["model_id"]),
    )


def _seeded_block_kind(model_id: str) -> dict[str, bool]:
    layer_norm, parallel, tanh_gelu = SEEDED_BLOCK_KINDS.get(model_id.lower(), (False, False, False))
    return {"layer_norm": layer_norm, "parallel_block": parallel, "tanh_gelu_ops": tanh_gelu}


def block_kind(config: Mapping[str, object]) -> dict[str, bool]:
    """layer_norm / parallel_block / tanh_gelu_ops / rotary of a config.json (see the tables above)."""
    model_type = str(config.get("model_type", "")).lower()
    parallel = model_type in PARALLEL_BLOCK_MODEL_TYPES or (
        model_type == "falcon"
        and bool(config.get("parallel_attn", True))
        and not config.get("new_decoder_architecture")
    )
    act = str(config.get("hidden_act") or config.get("activation_function") or "").lower()
    return {
        "layer_norm": model_type in LAYER_NORM_MODEL_TYPES,
        "parallel_block": parallel,
        "tanh_gelu_ops": act in TANH_GELU_OPS_ACTIVATIONS,
        # Falcon-RW and Falcon's own `alibi` option bias the scores instead of rotating
        "rotary": model_type not in ROTARY_FREE_MODEL_TYPES
        and not (model_type == "falcon" and bool(config.get("alibi"))),
    }


def _count(value: object) -> int | None:
    """A count from a config.json value (an int, or a float or string holding one); None when unset."""
    if not value:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a number in config.json, got {value!r}")
    return int(value)


def _first(config: Mapping[str, object], *keys: str, default: object = None) -> object:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def is_gated_mlp(config: Mapping[str, object]) -> bool:
    """Whether the MLP has a gate projection (SwiGLU/GeGLU), from the config's architecture."""
    model_type = str(config.get("model_type", "")).lower()
    if "feed_forward_proj" in config:  # T5 family: "gated-gelu" (v1.1, Flan) vs "relu" (original)
        return str(config["feed_forward_proj"]).startswith("gated")
    return model_type not in PLAIN_MLP_MODEL_TYPES


def model_from_hf_config(config: Mapping[str, object], model_id: str) -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json dict.

    Understands Llama/Mistral/Qwen2/Qwen3/Gemma/Phi keys (hidden_size, num_hidden_layers,
    num_attention_heads, num_key_value_heads, intermediate_size, head_dim), Mixtral/Qwen-MoE experts
    (num_local_experts | num_experts, num_experts_per_tok, moe_intermediate_size), Gemma 3's nested
    text_config, Qwen 1 (intermediate_size counts both SwiGLU branches, seq_length), Falcon
    (n_layer, n_head, multi_query, num_kv_heads, ffn_hidden_size), GPT-2/GPT-J/CodeGen/GPT-NeoX
    (n_embd, n_inner, n_positions; n_inner unset = 4h), MPT (d_model, n_heads, expansion_ratio) and
    T5 (d_model, d_ff, d_kv, num_heads, num_layers + num_decoder_layers; decoder layers count
    double for their cross-attention). Parameters are computed unless the config states them.
    Raises ValueError (one line) for a config that cannot describe a trainable model.
    """
    text = config.get("text_config")
    if isinstance(text, Mapping):
        config = {**config, **text}
    model_type = str(config.get("model_type", "")).lower()
    is_t5 = model_type in ("t5", "mt5", "umt5") or "d_ff" in config
    attn_raw = config.get("attn_config")
    attn_config: Mapping[str, object] = attn_raw if isinstance(attn_raw, Mapping) else {}

    def num(*keys: str, default: object = None) -> int:
        value = _first(config, *keys, default=default)
        if value is None:
            raise ValueError(f"{model_id}: config.json has none of {keys}; cannot size the model")
        # an infinite value (JSON's 1e400) has no int(): it must fail as one line, not OverflowError
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value != int(value)
        ):
            raise ValueError(f"{model_id}: config.json {keys[0]}={value!r} is not a whole number")
        return int(value)

    hidden = num("hidden_size", "d_model", "n_embd")
    heads = num("num_attention_heads", "n_head", "num_heads", "n_heads")
    if heads < 1 or hidden < 1:
        raise ValueError(f"{model_id}: config.json gives {heads} attention heads and hidden size {hidden}")
    head_dim_cfg = _first(config, "head_dim", "d_kv")
    dec = 0
    if is_t5:
        enc = num("num_layers")
        dec = num("num_decoder_layers", default=enc)
        layers = enc + dec
        inter = num("d_ff")
        kv_heads = heads
        tied = bool(config.get("tie_word_embeddings", True))
    else:
        layers = num("num_hidden_layers", "n_layer", "num_layers", "n_layers")
        # multi-query attention: one shared key/value head (FalconAttention without
        # new_decoder_architecture; GPTBigCodeAttention: `self.kv_heads = 1 if self.multi_query
        # else self.num_heads`, StarCoder 1 and SantaCoder)
        multi_query = bool(config.get("multi_query"))
        if (model_type == "falcon" and multi_query and not config.get("new_decoder_architecture")) or (
            model_type == "gpt_bigcode" and multi_query
        ):
            kv_heads = 1
        else:
            kv_heads = num(
                "num_key_value_heads",
                "num_kv_heads",
                "n_head_kv",
                default=attn_config.get("kv_n_heads", heads),
            )
        if model_type == "mpt":
            inter = int(num("expansion_ratio", default=4) * hidden)
        else:
            inter = num(*INTERMEDIATE_KEYS, default=4 * hidden)
        if model_type == "qwen":  # Qwen 1: intermediate_size covers w1 and w2 together
            inter //= 2
        # transformers' PretrainedConfig defaults tie_word_embeddings to True
        tied = bool(config.get("tie_word_embeddings", True))
    experts = _first(config, "num_local_experts", "num_experts", "n_routed_experts")
    per_token = _first(config, "num_experts_per_tok", "experts_per_token", "top_k")
    spec = ModelSpec(
        model_id=model_id,
        params=0,
        active_params=0,
        layers=layers,
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=kv_heads,
        intermediate_size=inter,
        vocab_size=num("vocab_size", "padded_vocab_size"),
        tied_embeddings=tied,
        max_context=num(
            "max_position_embeddings",
            "seq_length",
            "n_positions",
            "max_seq_len",
            "max_sequence_length",
            default=2048 if not is_t5 else 512,
        ),
        num_experts=_count(experts),
        experts_per_token=_count(per_token) if experts else None,
        head_dim=_count(head_dim_cfg),
        gated_mlp=is_gated_mlp(config),
        attn_logit_softcapping=bool(config.get("attn_logit_softcapping")),
        final_logit_softcapping=bool(config.get("final_logit_softcapping")),
        **block_kind(config),
    )
    stated = _first(config, "num_parameters", "n_params")
    if stated:
        params = _count(stated) or 0
    elif is_t5:
        # encoder-decoder: each decoder layer adds cross-attention and a third norm
        attn = _attention_params_per_layer(spec)
        params = count_params(spec) + dec * (attn + hidden)
    else:
        params = count_params(spec)
    active = count_params(spec, active=True) if spec.is_moe else params
    return ModelSpec(**{**asdict(spec), "params": params, "active_params": active})
