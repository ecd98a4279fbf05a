"""`gpucost memory`, `gpucost estimate` and `gpucost models`: one fine-tuning job, by hand.

    gpucost memory --model Llama-3.1-8B --method qlora [--gpus 8 --sharding zero3] [--json]
    gpucost memory --model Qwen/Qwen3-8B --method lora      # any Hugging Face id
    gpucost memory --config path/to/config.json --method full --sharding zero3 --gpus 8
    gpucost memory --model Llama-3.1-8B --mean-len 210 --max-len 768 --micro-batch 4  # padded data
    gpucost memory --model Qwen/Qwen2.5-7B --gpus 8 --sharding zero3 --zero3-impl deepspeed
    gpucost memory --model Llama-3.2-1B --method lora --train-embeddings head
    gpucost estimate --model Llama-3.1-70B --method lora --tokens 50M [--spot] [--max-nodes 2]
    gpucost estimate --model Llama-3.1-8B --offer-gpu H100 --provider runpod,aws --spot-only [--all]
    gpucost estimate --model Llama-3.1-8B --gpu H100-SXM --gpus 8 [--nodes 2] [--price-per-gpu-hour 2.5]
    gpucost models

`memory` and `estimate --gpu` need no warehouse. Plain `estimate` reads marts.gpu_offers read-only
and prices the job on every current offer with `warehouse.finetune.cost_frame`, the same code that
builds marts.finetune_costs. By default it ranks on-demand offers; `--spot` adds spot offers (their
expected cost includes the work lost to interruptions), ranked together by cost. The filters of
`gpucost prices` (flows/cli_prices.py; `--offer-gpu` for its `--gpu`) narrow the offers, and
`warehouse.answers.frontier` folds those neither faster nor cheaper than another of the same
provider, GPU and pricing type (`--all` shows them).

`--model` takes a seeded model (llm_models.csv, by id or unique suffix; Instruct / chat / -it
variants resolve to their base) or any Hugging Face id, whose config.json comes from the local HF
cache or the Hub (flows/hf_configs.py).

Registered on the app in flows/cli.py: `app.command()(cli_finetune.memory)`.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import asdict
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from rich import box
from rich.table import Table

from finetune import (
    Accelerator,
    Attention,
    FinetuneJob,
    Job,
    LoraTargets,
    Loss,
    Method,
    ModelSpec,
    Optimizer,
    Precision,
    Quant,
    Sharding,
    billed_hours,
    estimate_time,
    memory_per_gpu,
    model_from_hf_config,
    trainable_params,
)
from finetune.job import (
    CheckpointPolicy,
    OptimizerImpl,
    PaddedShape,
    TrainEmbeddings,
    Zero3Impl,
    padded_shape,
    require_data_parallel,
)
from finetune.placement import USABLE_VRAM_FRACTION, MemoryTable, place
from flows.cli_prices import (
    FILTERS,
    GPU_ONLY_MARK,
    UNAVAILABLE_MARK,
    GpuFilterHelp,
    IncludeUnavailableOpt,
    MaxPriceOpt,
    MinVramOpt,
    ProviderOpt,
    RegionOpt,
    fetched_line,
    format_age,
    make_filters,
    source_text,
)
from flows.hf_configs import ConfigNotFound, resolve_config
from flows.output import console, err
from warehouse.answers import OFFER_KEY, OfferFilters, check_filters, current_offers, frontier
from warehouse.db import WarehouseError, open_reader
from warehouse.finetune import cost_frame, has_p2p, read_offers
from warehouse.hardware import GpuSpec, HardwareCatalog
from warehouse.models import load_models


def _choices(name: str, literal: object) -> Any:
    """A str Enum of a Literal's values, which typer shows as the option's choices."""
    return Enum(name, [(value, value) for value in get_args(literal)], type=str)


MethodChoice = _choices("MethodChoice", Method)
PrecisionChoice = _choices("PrecisionChoice", Precision)
OptimizerChoice = _choices("OptimizerChoice", Optimizer)
ShardingChoice = _choices("ShardingChoice", Sharding)
AttentionChoice = _choices("AttentionChoice", Attention)
TargetsChoice = _choices("TargetsChoice", LoraTargets)
LossChoice = _choices("LossChoice", Loss)
QuantChoice = _choices("QuantChoice", Quant)
# defaults as module-level values (ruff B008); the same as requirements.Job's
DEFAULT_METHOD = MethodChoice("lora")
DEFAULT_SHARDING = ShardingChoice("none")
DEFAULT_PRECISION = PrecisionChoice("bf16-mixed")
# Without --optimizer, each method gets the optimizer of its usual recipe, as in the default job grid
# (warehouse/seeds/finetune_jobs.csv): QLoRA's paper pairs NF4 with paged 8-bit AdamW.
METHOD_OPTIMIZER = {"full": "adamw", "lora": "adamw", "qlora": "paged-adamw8bit"}
DEFAULT_ATTENTION = AttentionChoice("flash")
DEFAULT_TARGETS = TargetsChoice("all-linear")
DEFAULT_LOSS = LossChoice("standard")
DEFAULT_QUANT = QuantChoice("nf4-dq")
# Instruct / chat variants share their base model's architecture (same config.json shapes)
VARIANT_SUFFIX = re.compile(r"-(instruct|chat|it|base)(-\d{4})?$", re.IGNORECASE)


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _usage(message: str) -> typer.Exit:
    """Options that contradict each other: one line, exit 2 like click's own usage errors."""
    return _fail(message, code=2)


def find_model(name: str, models: dict[str, ModelSpec]) -> ModelSpec:
    """A model by id, by its name after the slash, or by a unique case-insensitive suffix."""
    if name in models:
        return models[name]
    wanted = name.lower()
    for rule in (
        lambda mid: mid.lower() == wanted,
        lambda mid: mid.lower().rsplit("/", 1)[-1] == wanted,
        lambda mid: mid.lower().endswith(wanted),
    ):
        found = [mid for mid in models if rule(mid)]
        if len(found) == 1:
            return models[found[0]]
        if len(found) > 1:
            raise _fail(f"--model {name!r} matches several models: {', '.join(sorted(found))}")
    base = VARIANT_SUFFIX.sub("", name)
    if base != name:
        return find_model(base, models)
    short = {mid.rsplit("/", 1)[-1].lower(): mid for mid in models}
    close = difflib.get_close_matches(wanted, list(short), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(short[c] for c in close)}?" if close else ""
    raise _fail(
        f"no model {name!r} in warehouse/seeds/llm_models.csv{hint} "
        "(give a Hugging Face id like org/name, or pass its config.json with --config)"
    )


def _model(model: str | None, config: Path | None) -> ModelSpec:
    if (model is None) == (config is None):
        raise _fail("give exactly one of --model ID (warehouse/seeds/llm_models.csv) or --config config.json")
    if config is not None:
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise _fail(f"cannot read {config}: {exc}") from None
        if not isinstance(data, dict):
            raise _fail(f"{config} is not a JSON object (a Hugging Face config.json)")
        try:
            return model_from_hf_config(data, str(data.get("_name_or_path") or config))
        except (ValueError, TypeError) as exc:
            raise _fail(str(exc)) from None
    assert model is not None
    models = load_models()
    if "/" in model and not _seeded(model, models):
        try:
            data = resolve_config(model)
            return model_from_hf_config(data, model)
        except ConfigNotFound as exc:
            raise _fail(str(exc)) from None
        except (ValueError, TypeError) as exc:
            raise _fail(str(exc)) from None
    return find_model(model, models)


def _seeded(name: str, models: dict[str, ModelSpec]) -> bool:
    wanted = VARIANT_SUFFIX.sub("", name).lower()
    return any(mid.lower() == wanted for mid in models)


def _job(**knobs: Any) -> Job:
    values = {k: v.value if isinstance(v, Enum) else v for k, v in knobs.items()}
    if values.get("optimizer") is None:
        values["optimizer"] = METHOD_OPTIMIZER[values["method"]]
    try:
        job = Job(**values)
        require_data_parallel(job)  # TP/PP: one line saying what to ask instead
    except ValueError as exc:  # OutsideModelError is one
        raise _fail(str(exc)) from None
    return job


_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_tokens(text: str) -> float:
    """ "50M" → 5e7, "1.5B" → 1.5e9, "2000000" or "2_000_000" → 2e6."""
    match = re.fullmatch(r"\s*([0-9][0-9_]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kmbgt]?)\s*", text.lower())
    value = float(match.group(1).replace("_", "")) * _SUFFIX[match.group(2)] if match else math.nan
    # 1e15 tokens is ~70× the largest public pretraining corpus: a typo, not a fine-tuning run
    if not (math.isfinite(value) and 0 < value <= 1e15):
        raise _fail(f"--tokens {text!r}: write a positive count like 50M, 1.5B or 2000000")
    return value


def _print_json(payload: object) -> None:
    console.out(json.dumps(payload, indent=2, default=str), highlight=False)


# Options shared by both commands (typer reads them from each signature).
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="model_id from llm_models.csv, or a unique suffix (Llama-3.1-8B)."),
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="A Hugging Face config.json instead of --model.")
]
MethodOpt = Annotated[MethodChoice, typer.Option(help="full fine-tuning, LoRA or QLoRA (NF4 base).")]
SeqLenOpt = Annotated[
    int | None, typer.Option(min=1, help="Sequence length in tokens of packed data (default 2048).")
]
MeanLenOpt = Annotated[
    float | None,
    typer.Option(help="Padded data: mean sample length in tokens (with --max-len, instead of --seq-len)."),
]
MaxLenOpt = Annotated[
    int | None,
    typer.Option(help="Padded data: longest sample in tokens; memory is sized at it (with --mean-len)."),
]
MicroBatchOpt = Annotated[int, typer.Option(min=1, help="Sequences per GPU per step.")]
OffloadOpt = Annotated[bool, typer.Option(help="ZeRO CPU offload of optimizer state (needs zero2/zero3).")]
PrecisionOpt = Annotated[PrecisionChoice, typer.Option(help="bf16 with fp32 master weights, or pure bf16.")]
OptimizerOpt = Annotated[
    OptimizerChoice | None,
    typer.Option(help="Optimizer (8-bit ones keep 2 B/param). Default: adamw; paged-adamw8bit for qlora."),
]
CheckpointingOpt = Annotated[bool, typer.Option(help="Activation (gradient) checkpointing.")]
AttentionOpt = Annotated[AttentionChoice, typer.Option(help="FlashAttention/SDPA or eager attention.")]
RankOpt = Annotated[int, typer.Option(min=1, help="LoRA rank.")]
TargetsOpt = Annotated[TargetsChoice, typer.Option(help="LoRA on attention projections or all linears.")]
LossOpt = Annotated[
    LossChoice,
    typer.Option(help="standard (HF, fp32 logits), chunked (torchtune) or fused (Liger, Cut-Cross-Entropy)."),
]
QuantOpt = Annotated[
    QuantChoice, typer.Option(help="QLoRA base: nf4, nf4-dq (double quantization, default) or gptq int4.")
]
DropoutOpt = Annotated[
    float | None,
    typer.Option(min=0.0, max=0.99, help="LoRA dropout (default by recipe: 0 for lora, 0.1 for qlora)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
CheckpointPolicyChoice = _choices("CheckpointPolicyChoice", CheckpointPolicy)
OptimizerImplChoice = _choices("OptimizerImplChoice", OptimizerImpl)
PolicyOpt = Annotated[
    CheckpointPolicyChoice,
    typer.Option(
        help="What checkpointing recomputes: full layers, or selective (torchtitan's per-op policy)."
    ),
]
ImplOpt = Annotated[
    OptimizerImplChoice,
    typer.Option(help="AdamW kernel: foreach (torch's default) or fused (torchtune, torchtitan)."),
]
FullLoadOpt = Annotated[
    bool,
    typer.Option(help="Load a full state dict into the sharded model (each GPU briefly holds it all)."),
]
CompileOpt = Annotated[
    bool,
    typer.Option(
        "--compile/--no-compile",
        help="torch.compile on (torchtune compile: True): fused elementwise work, fewer launches.",
    ),
]
ParallelOpt = Annotated[
    int, typer.Option(min=1, help="Tensor / pipeline parallel degree; above 1 is outside this model.")
]
Zero3ImplChoice = _choices("Zero3ImplChoice", Zero3Impl)
TrainEmbeddingsChoice = _choices("TrainEmbeddingsChoice", TrainEmbeddings)
Zero3ImplOpt = Annotated[
    Zero3ImplChoice,
    typer.Option(
        help="Who shards a zero3 job: fsdp (2 units + embedding/head gathered) or deepspeed "
        "(its 1e9-parameter live budget)."
    ),
]
TrainEmbeddingsOpt = Annotated[
    TrainEmbeddingsChoice,
    typer.Option(
        help="LoRA/QLoRA: also train a copy of the head, or of embedding and head (PEFT modules_to_save)."
    ),
]
DEFAULT_POLICY = CheckpointPolicyChoice("full")
DEFAULT_IMPL = OptimizerImplChoice("foreach")
DEFAULT_ZERO3_IMPL = Zero3ImplChoice("fsdp")
DEFAULT_TRAIN_EMBEDDINGS = TrainEmbeddingsChoice("off")
DEFAULT_SEQ_LEN = 2048


def _shape(
    seq_len: int | None,
    mean_len: float | None,
    max_len: int | None,
    micro_batch: int,
    padding_efficiency: float | None = None,
) -> tuple[dict[str, Any], PaddedShape | None]:
    """The Job's seq_len / padding_efficiency / peak_seq_len from packed or padded options."""
    if mean_len is None and max_len is None:
        knobs = {
            "seq_len": DEFAULT_SEQ_LEN if seq_len is None else seq_len,
            "padding_efficiency": 1.0 if padding_efficiency is None else padding_efficiency,
        }
        return knobs, None
    if mean_len is None or max_len is None:
        raise _usage("give both --mean-len and --max-len (padded data), or neither (packed data: --seq-len)")
    if seq_len is not None:
        raise _usage(
            "--seq-len is the packed length; with --mean-len/--max-len the padded length is derived "
            "from them: drop --seq-len"
        )
    if padding_efficiency is not None:
        raise _usage(
            "--padding-efficiency is derived from --mean-len/--max-len (mean / expected padded "
            "length): give one or the other"
        )
    try:
        shape = padded_shape(mean_len, max_len, micro_batch)
    except ValueError as exc:
        raise _usage(f"--mean-len {mean_len:g} --max-len {max_len}: {exc}") from None
    knobs = {
        "seq_len": shape.seq_len,
        "padding_efficiency": shape.padding_efficiency,
        "peak_seq_len": shape.max_len,
    }
    return knobs, shape


def _padding(shape: PaddedShape | None) -> dict[str, Any] | None:
    """The --json `padding` object: what --mean-len/--max-len became (None for packed data)."""
    if shape is None:
        return None
    return {
        "mean_len": shape.mean_len,
        "max_len": shape.max_len,
        "expected_padded_len": shape.expected_len,
        "padding_efficiency": shape.padding_efficiency,
        "time_seq_len": shape.seq_len,
        "memory_seq_len": shape.max_len,
    }


def _shape_text(job: Job, shape: PaddedShape | None) -> str:
    if shape is None:
        return f"seq {job.seq_len} × micro-batch {job.micro_batch}"
    return (
        f"padded: mean {shape.mean_len:g}, max {shape.max_len} tokens × micro-batch {job.micro_batch} "
        f"(memory at {shape.max_len}, time at ~{shape.expected_len:,.0f}, "
        f"{shape.padding_efficiency:.0%} real tokens)"
    )


def _sharding_text(job: Job) -> str:
    return f"{job.sharding} ({job.zero3_impl})" if job.sharding == "zero3" else job.sharding


def memory(
    model: ModelOpt = None,
    config: ConfigOpt = None,
    method: MethodOpt = DEFAULT_METHOD,
    seq_len: SeqLenOpt = None,
    mean_len: MeanLenOpt = None,
    max_len: MaxLenOpt = None,
    micro_batch: MicroBatchOpt = 1,
    gpus: Annotated[int, typer.Option(min=1, help="Data-parallel GPUs.")] = 1,
    sharding: Annotated[ShardingChoice, typer.Option(help="ZeRO stage / FSDP.")] = DEFAULT_SHARDING,
    zero3_impl: Zero3ImplOpt = DEFAULT_ZERO3_IMPL,
    train_embeddings: TrainEmbeddingsOpt = DEFAULT_TRAIN_EMBEDDINGS,
    offload: OffloadOpt = False,
    precision: PrecisionOpt = DEFAULT_PRECISION,
    optimizer: OptimizerOpt = None,
    grad_checkpointing: CheckpointingOpt = True,
    attention: AttentionOpt = DEFAULT_ATTENTION,
    lora_rank: RankOpt = 16,
    lora_targets: TargetsOpt = DEFAULT_TARGETS,
    loss: LossOpt = DEFAULT_LOSS,
    quant: QuantOpt = DEFAULT_QUANT,
    lora_dropout: DropoutOpt = None,
    checkpoint_policy: PolicyOpt = DEFAULT_POLICY,
    optimizer_impl: ImplOpt = DEFAULT_IMPL,
    full_state_dict_load: FullLoadOpt = False,
    tensor_parallel: ParallelOpt = 1,
    pipeline_parallel: ParallelOpt = 1,
    as_json: JsonOpt = False,
) -> None:
    """Peak memory per GPU (GB = 1e9 bytes) of one fine-tuning configuration. Needs no warehouse."""
    shape_knobs, shape = _shape(seq_len, mean_len, max_len, micro_batch)
    spec = _model(model, config)
    job = _job(
        method=method,
        **shape_knobs,
        micro_batch=micro_batch,
        sharding=sharding,
        zero3_impl=zero3_impl,
        train_embeddings=train_embeddings,
        offload=offload,
        precision=precision,
        optimizer=optimizer,
        grad_checkpointing=grad_checkpointing,
        attention=attention,
        lora_rank=lora_rank,
        lora_targets=lora_targets,
        loss=loss,
        quant=quant,
        lora_dropout=lora_dropout,
        checkpoint_policy=checkpoint_policy,
        optimizer_impl=optimizer_impl,
        full_state_dict_load=full_state_dict_load,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel,
    )
    breakdown = memory_per_gpu(spec, job, gpus)
    if as_json:
        _print_json(
            {
                "model_id": spec.model_id,
                "params": spec.params,
                "trainable_params": trainable_params(spec, job),
                "n_gpus": gpus,
                "job": asdict(job),
                "padding": _padding(shape),
                "memory_gb": breakdown.as_dict(),
                "totals_gb": _totals(breakdown),
            }
        )
        return
    console.print(
        f"[bold]{spec.model_id}[/] {job.method}: {spec.params / 1e9:.2f}B params, "
        f"{trainable_params(spec, job) / 1e6:,.1f}M trainable; {_shape_text(job, shape)}, "
        f"{job.precision}, {job.optimizer}; {gpus} GPU(s), sharding {_sharding_text(job)}",
        highlight=False,
    )
    table = Table(title="peak memory per GPU")
    table.add_column("component")
    table.add_column("GB", justify="right")
    for name, value in breakdown.as_dict().items():
        label = name.removesuffix("_gb")
        table.add_row(f"[bold]{label}[/]" if label == "total" else label, f"{value:,.2f}")
    console.print(table)
    console.print(
        f"allocated {breakdown.allocated_gb:.2f} GB, reserved {breakdown.reserved_gb:.2f} GB, device "
        f"{breakdown.device_gb:.2f} GB (total = device); peak in the {breakdown.peak_phase} phase",
        highlight=False,
    )


def _totals(breakdown: Any) -> dict[str, Any]:
    return {
        "allocated_gb": breakdown.allocated_gb,
        "reserved_gb": breakdown.reserved_gb,
        "device_gb": breakdown.device_gb,
        "total_is": "device_gb",
        "peak_phase": breakdown.peak_phase,
        "phases_gb": dict(breakdown.phases_gb),
    }


def models() -> None:
    """The seeded models (warehouse/seeds/llm_models.csv) with their parameter counts."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="seeded models (any Hugging Face id works too)")
    for column in ("model_id", "params", "active", "layers", "hidden", "heads/kv", "vocab", "context"):
        table.add_column(column, justify="left" if column == "model_id" else "right")
    for spec in sorted(load_models().values(), key=lambda m: m.model_id.lower()):
        table.add_row(
            spec.model_id,
            f"{spec.params / 1e9:,.2f}B",
            f"{spec.active_params / 1e9:,.2f}B" if spec.is_moe else "",
            str(spec.layers),
            str(spec.hidden_size),
            f"{spec.attention_heads}/{spec.kv_heads}",
            f"{spec.vocab_size:,}",
            f"{spec.max_context:,}",
        )
    console.print(table)


def estimate(
    model: ModelOpt = None,
    config: ConfigOpt = None,
    method: MethodOpt = DEFAULT_METHOD,
    tokens: Annotated[str, typer.Option(help="Dataset tokens: 50M, 1.5B, 2000000.")] = "100M",
    epochs: Annotated[float, typer.Option(min=0.001, help="Passes over the dataset.")] = 1.0,
    spot: Annotated[
        bool, typer.Option("--spot", help="Include spot offers (default: on-demand only).")
    ] = False,
    max_nodes: Annotated[int, typer.Option(min=1, help="Most instances one job may span.")] = 1,
    top: Annotated[int, typer.Option(min=1, help="Rows to show.")] = 10,
    seq_len: SeqLenOpt = None,
    mean_len: MeanLenOpt = None,
    max_len: MaxLenOpt = None,
    micro_batch: MicroBatchOpt = 1,
    offload: OffloadOpt = False,
    zero3_impl: Zero3ImplOpt = DEFAULT_ZERO3_IMPL,
    train_embeddings: TrainEmbeddingsOpt = DEFAULT_TRAIN_EMBEDDINGS,
    precision: PrecisionOpt = DEFAULT_PRECISION,
    optimizer: OptimizerOpt = None,
    grad_checkpointing: CheckpointingOpt = True,
    attention: AttentionOpt = DEFAULT_ATTENTION,
    lora_rank: RankOpt = 16,
    lora_targets: TargetsOpt = DEFAULT_TARGETS,
    loss: LossOpt = DEFAULT_LOSS,
    quant: QuantOpt = DEFAULT_QUANT,
    lora_dropout: DropoutOpt = None,
    padding_efficiency: Annotated[
        float | None,
        typer.Option(
            min=0.01, max=1.0, help="Real tokens / computed tokens: 1 packed (default), < 1 padded."
        ),
    ] = None,
    checkpoint_policy: PolicyOpt = DEFAULT_POLICY,
    optimizer_impl: ImplOpt = DEFAULT_IMPL,
    full_state_dict_load: FullLoadOpt = False,
    compiled: CompileOpt = False,
    tensor_parallel: ParallelOpt = 1,
    pipeline_parallel: ParallelOpt = 1,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="Estimate on this GPU (gpus.csv name, e.g. H100-SXM), no offer."),
    ] = None,
    gpus: Annotated[int, typer.Option(min=1, help="With --gpu: GPUs per node.")] = 1,
    nodes: Annotated[int, typer.Option(min=1, help="With --gpu: nodes.")] = 1,
    inter_node_gbps: Annotated[
        float, typer.Option(min=0.0, help="With --gpu and --nodes > 1: network Gb/s per node.")
    ] = 3200.0,
    price_per_gpu_hour: Annotated[
        float | None, typer.Option(min=0.0, help="With --gpu: USD per GPU-hour, for a cost.")
    ] = None,
    offer_gpu: Annotated[
        str | None,
        typer.Option(
            "--offer-gpu",
            metavar="NAMES",
            rich_help_panel=FILTERS,
            help=GpuFilterHelp,
        ),
    ] = None,
    provider: ProviderOpt = None,
    region: RegionOpt = None,
    min_vram: MinVramOpt = None,
    max_price: MaxPriceOpt = None,
    include_unavailable: IncludeUnavailableOpt = False,
    spot_only: Annotated[
        bool, typer.Option("--spot-only", rich_help_panel=FILTERS, help="Only spot offers.")
    ] = False,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", rich_help_panel=FILTERS, help="Also show offers folded off the time/cost frontier."
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Rank current offers by what this fine-tuning run would cost, or estimate on stated hardware (--gpu).

    Per provider, GPU and pricing type, an offer neither faster nor cheaper than another is folded.
    """
    shape_knobs, shape = _shape(seq_len, mean_len, max_len, micro_batch, padding_efficiency)
    spec = _model(model, config)
    # sharding is chosen per offer (none → zero2 → zero3); offload rules out `none`
    job = _job(
        method=method,
        **shape_knobs,
        micro_batch=micro_batch,
        sharding="zero3" if offload else "none",
        offload=offload,
        zero3_impl=zero3_impl,
        train_embeddings=train_embeddings,
        precision=precision,
        optimizer=optimizer,
        grad_checkpointing=grad_checkpointing,
        attention=attention,
        lora_rank=lora_rank,
        lora_targets=lora_targets,
        loss=loss,
        quant=quant,
        lora_dropout=lora_dropout,
        checkpoint_policy=checkpoint_policy,
        optimizer_impl=optimizer_impl,
        full_state_dict_load=full_state_dict_load,
        compiled=compiled,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel,
    )
    dataset_tokens = parse_tokens(tokens)
    fjob = FinetuneJob("adhoc", spec.model_id, job, int(dataset_tokens), epochs)
    filters = make_filters(
        offer_gpu, provider, region, min_vram, True if spot_only else None, max_price, include_unavailable
    )
    if gpu is not None:
        if filters != OfferFilters():
            raise _fail(
                f"{filters.describe()} filter current offers, and --gpu estimates on stated hardware "
                "without any; drop one (--offer-gpu is the GPU filter)"
            )
        _estimate_on_hardware(
            spec, fjob, gpu, gpus, nodes, inter_node_gbps, price_per_gpu_hour, as_json, shape
        )
        return
    try:
        con, banner = open_reader()
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    if banner:  # stderr, so --json output stays parseable
        err.print(f"[yellow]{banner}[/]")
    spot = spot or spot_only
    now = datetime.now(UTC)
    try:
        offers = read_offers(con)
        check_filters(con, filters)
        # price age, source details and spot bands of the offers that pass the filters
        details = current_offers(con, filters, now).select([*OFFER_KEY, *_DETAILS])
        offers = offers.join(details.select(OFFER_KEY), on=list(OFFER_KEY), how="semi", nulls_equal=True)
        if not spot:
            offers = offers.filter(~offers["is_spot"])
        rows = cost_frame(con, [fjob], {spec.model_id: spec}, offers, max_nodes=max_nodes, max_gpus=None)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()
    if rows.is_empty():
        kind = "" if spot else "on-demand "
        if filters != OfferFilters():
            raise _fail(f"no current {kind}offers match {filters.describe()}; loosen a filter")
        raise _fail(f"no current {kind}offers in the warehouse; run `gpucost refresh`")
    order = ["cost_usd", "estimated_hours", "provider", "instance_type"]
    priced = rows.filter(rows["priced"])
    if priced.is_empty():
        raise _fail(_nothing_priced(rows, max_nodes))
    marked = frontier(priced)
    folded = marked.height - int(marked["on_frontier"].sum())
    shown = (marked if show_all else marked.filter(marked["on_frontier"])).sort(order)
    ranked = shown.head(top).join(details, on=list(OFFER_KEY), how="left", nulls_equal=True).sort(order)
    if as_json:
        _print_json(ranked.to_dicts())
        return
    fitting = rows.filter(rows["fits"]).height
    wide = console.width >= WIDE_TABLE
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        # narrow terminals: two spaces between columns, not three, leave the offer room to read
        padding=(0, 1) if wide else (0, 1, 0, 0),
        show_edge=wide,
        title=(
            f"{spec.model_id} {job.method}, {fjob.train_tokens / 1e6:,.0f}M tokens: "
            f"{priced.height} priced of {rows.height} {'' if spot else 'on-demand '}offers"
        ),
        caption="\n".join(
            note
            for note in (
                _folded_note(folded, show_all),
                f"{fitting - priced.height} more fit but are not priced (no bf16 TFLOPS, or multi-node "
                "without fast fabric); see marts.finetune_costs.unpriced_reason"
                if fitting > priced.height
                else "",
                f"{GPU_ONLY_MARK}: the price is for the GPU alone (CPU, RAM, disk billed on top)"
                if (ranked["price_covers"] == "gpu").any()
                else "",
                f"{UNAVAILABLE_MARK}: the provider marks the offer unavailable now"
                if ranked["available"].eq(False).any()
                else "",
                "interrupt.: the spot interruption rate assumed (AWS Spot Advisor band per month, "
                "or ~ a default per spot kind per hour)"
                if ranked["is_spot"].any()
                else "",
            )
            if note
        )
        or None,
    )
    table.add_column("offer (region)", overflow="fold")
    table.add_column("GPUs", overflow="fold")
    for column in ("sharding", "GB/GPU", "hours", "on-dem. $", "spot $", "$/M tok"):
        table.add_column(column, justify="left" if column == "sharding" else "right", no_wrap=True)
    # price source, age and the spot band get columns of their own where the terminal is wide
    # enough, else a dim second line under the offer
    with_spot = bool(ranked["is_spot"].any())
    if wide:
        table.add_column("price", no_wrap=True)
        if with_spot:
            table.add_column("interrupt.", no_wrap=True)
    for r in ranked.iter_rows(named=True):
        nodes = f"{r['nodes_used']}×{r['gpus_per_node']}" if r["multi_node"] else str(r["gpus_used"])
        price = source_text(r["price_source"], r["price_statistic"])
        price += f"{' from' if r['price_is_from'] else ''} {format_age(r['price_age_hours'])}"
        band = interruption_band(r)
        offer = f"{r['provider']} {r['instance_type']} ({r['region']})"
        offer += f" {UNAVAILABLE_MARK}" if r["available"] is False else ""
        offer += f" {GPU_ONLY_MARK}" if r["price_covers"] == "gpu" else ""
        offer += "" if r["on_frontier"] else " (folded)"
        if not wide:
            offer += f"\n[dim]{price}{', interrupt. ' + band if band else ''}[/]"
        cells = [
            offer,
            f"{nodes}× {r['gpu_name']}",
            r["sharding"],
            f"{r['total_gb']:.1f}",
            f"{r['estimated_hours']:,.2f}",
            _money(r["on_demand_cost_usd"]),
            _money(r["expected_spot_cost_usd"]),
            f"{r['usd_per_million_tokens']:,.3f}",
        ]
        if wide:
            cells += [price, *([band] if with_spot else [])]
        table.add_row(*cells, style=None if r["on_frontier"] else "dim")
    console.print(table)
    console.print(fetched_line(ranked, banner, now), highlight=False)


# a console this wide shows price source, age and spot band as columns
WIDE_TABLE = 140
# the estimate's extra columns, from warehouse.answers.current_offers
_DETAILS = (
    "price_statistic",
    "price_covers",
    "available",
    "price_is_from",
    "price_since",
    "last_seen_at",
    "price_age_hours",
    "interruption_rate_min",
    "interruption_rate_max",
)


def _folded_note(folded: int, show_all: bool) -> str:
    if not folded:
        return ""
    what = "shown, marked (folded)" if show_all else "folded (--all shows them)"
    return (
        f"{folded} offer(s) neither faster nor cheaper than another of the same provider, GPU and "
        f"pricing type: {what}"
    )


def interruption_band(row: dict[str, Any]) -> str:
    """The spot interruption rate an estimate assumed: AWS' Spot Advisor band ("5–10%/mo") where the
    offer has one, else the default for its spot kind ("~0.05/h"); empty for on-demand."""
    if not row["is_spot"]:
        return ""
    low, high = row.get("interruption_rate_min"), row.get("interruption_rate_max")
    if row.get("interruption_source") == "spot_advisor_band" and low is not None and high is not None:
        # the top band is "> 20%", stored as 0.2–1.0
        return f">{low:.0%}/mo" if high >= 1 else f"{low:.0%}–{high:.0%}/mo"
    rate = row.get("interruptions_per_hour")
    return "" if rate is None else f"~{rate / max(row['nodes_used'] or 1, 1):.2g}/h"


def _money(value: float | None) -> str:
    return "" if value is None else f"{value:,.2f}"


def _nothing_priced(rows: Any, max_nodes: int) -> str:
    fitting = rows.filter(rows["fits"])
    if fitting.is_empty():
        closest = rows.sort(["total_gb", "usable_vram_gb"], descending=[False, True]).row(0, named=True)
        return (
            f"no current offer can hold this job; the smallest per-GPU need is "
            f"{closest['total_gb']:.1f} GB with {closest['sharding']} over {closest['gpus_used']} "
            f"GPU(s) ({closest['gpu_name']}, {closest['usable_vram_gb']:.1f} GB usable); "
            f"try qlora or --max-nodes (now {max_nodes})"
        )
    reasons = sorted(set(fitting["unpriced_reason"].to_list()))
    return f"{fitting.height} offer(s) can hold this job but none can be priced: " + "; ".join(reasons[:3])


def _gpu_spec(name: str) -> GpuSpec:
    catalog = HardwareCatalog.load().gpus
    for key, spec in catalog.items():
        if key.lower() == name.lower():
            return spec
    close = difflib.get_close_matches(name, list(catalog), n=5, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise _fail(f"no GPU {name!r} in warehouse/seeds/gpus.csv{hint} (see `gpucost gpus`)")


def _estimate_on_hardware(
    spec: ModelSpec,
    fjob: FinetuneJob,
    gpu_name: str,
    gpus_per_node: int,
    nodes: int,
    inter_node_gbps: float,
    price_per_gpu_hour: float | None,
    as_json: bool,
    shape: PaddedShape | None = None,
) -> None:
    """Memory, time and (with a price) cost of `fjob` on nodes × gpus_per_node of one GPU."""
    gpu = _gpu_spec(gpu_name)
    tflops = gpu.bf16_tflops or gpu.fp16_tflops
    if not tflops:
        raise _fail(f"{gpu.gpu_name} has no dense bf16 or fp16 TFLOPS in gpus.csv: cannot estimate time")
    n = gpus_per_node * nodes
    memory = MemoryTable().for_job(spec, fjob.job)
    placement = place(memory, gpus_per_node, gpu.vram_gb, nodes)
    # at the stated size exactly: the lightest sharding that fits on all n GPUs
    variant = placement.variant
    for index, (_, job_variant) in enumerate(memory.variants):
        if memory.get(index, n).total_gb <= gpu.vram_gb * USABLE_VRAM_FRACTION and not (
            job_variant.sharding == "none" and nodes > 1
        ):
            variant = index
            break
    sharding, job = memory.variants[variant]
    breakdown = memory.get(variant, n)
    fits = breakdown.total_gb <= gpu.vram_gb * USABLE_VRAM_FRACTION
    # NVLink per GPU (bidirectional GB/s in gpus.csv) → one direction in Gb/s; PCIe otherwise
    intra = (gpu.nvlink_gbps / 2 * 8) if gpu.nvlink_gbps else (32.0 * 8 if gpus_per_node > 1 else None)
    accel = Accelerator(
        tflops=tflops,
        memory_bandwidth_gbps=gpu.memory_bandwidth_gbps,
        architecture=gpu.architecture,
        vram_gb=gpu.vram_gb,
        p2p=has_p2p(gpu.model),
        pcie_gen=gpu.pcie_gen,
    )
    time = estimate_time(
        spec, job, fjob.train_tokens, n, gpus_per_node, tflops, intra, inter_node_gbps if nodes > 1 else None,
        gpu=accel,
    )  # fmt: skip
    cost = None
    if price_per_gpu_hour is not None and math.isfinite(time.hours):
        cost = billed_hours(time.hours, "second") * price_per_gpu_hour * n
    payload = {
        "model_id": spec.model_id,
        "method": job.method,
        "gpu": gpu.gpu_name,
        "gpus_per_node": gpus_per_node,
        "nodes": nodes,
        "n_gpus": n,
        "sharding": sharding,
        "fits": fits,
        "usable_vram_gb": gpu.vram_gb * USABLE_VRAM_FRACTION,
        "train_tokens": fjob.train_tokens,
        "tokens_per_s": time.tokens_per_s,
        "hours": time.hours if math.isfinite(time.hours) else None,
        "mfu": time.utilization,
        "warning": time.warning,
        "cost_usd": cost,
        "price_per_gpu_hour": price_per_gpu_hour,
        "memory_gb": breakdown.as_dict(),
        "totals_gb": _totals(breakdown),
        "job": asdict(job),
        "padding": _padding(shape),
    }
    if as_json:
        _print_json(payload)
        return
    verdict = "fits" if fits else "does NOT fit"
    console.print(
        f"[bold]{spec.model_id}[/] {job.method} on {nodes}×{gpus_per_node} {gpu.gpu_name}: {verdict} "
        f"({breakdown.total_gb:.1f} of {gpu.vram_gb * USABLE_VRAM_FRACTION:.1f} GB usable per GPU, "
        f"{_sharding_text(job)}; {_shape_text(job, shape)})",
        highlight=False,
    )
    hours = f"{time.hours:,.2f} h" if math.isfinite(time.hours) else "unbounded"
    line = f"{time.tokens_per_s:,.0f} tokens/s, {hours} for {fjob.train_tokens / 1e6:,.1f}M tokens"
    line += f", MFU {time.utilization:.0%}"
    if cost is not None:
        line += f"; ${cost:,.2f} at ${price_per_gpu_hour:g}/GPU-hour"
    console.print(line, highlight=False)
    if time.warning:
        console.print(f"[yellow]warning:[/] {time.warning}", highlight=False)
