"""`gpucost memory` and `gpucost estimate`: one fine-tuning job, by hand.

    gpucost memory --model Llama-3.1-8B --method qlora [--gpus 8 --sharding zero3] [--json]
    gpucost memory --config path/to/config.json --method full --sharding zero3 --gpus 8
    gpucost estimate --model Llama-3.1-70B --method lora --tokens 50M [--spot] [--max-nodes 2]

`memory` needs no warehouse. `estimate` reads marts.gpu_offers read-only and prices the job on every
current offer with `warehouse.finetune.cost_frame`, the same code that builds marts.finetune_costs.
By default it ranks on-demand offers; `--spot` adds spot offers (their expected cost includes the
work lost to interruptions), ranked together by cost.

Registered on the app in flows/cli.py: `app.command()(cli_finetune.memory)`.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from rich import box
from rich.table import Table

from flows.output import console, err
from warehouse.db import Settings, WarehouseError, connect
from warehouse.finetune import cost_frame, read_offers
from warehouse.requirements import (
    Attention,
    FinetuneJob,
    Job,
    LoraTargets,
    Method,
    ModelSpec,
    Optimizer,
    Precision,
    Sharding,
    load_models,
    memory_per_gpu,
    model_from_hf_config,
    trainable_params,
)


def _choices(name: str, literal: object) -> Any:
    """A str Enum of a Literal's values, which typer shows as the option's choices."""
    return Enum(name, [(value, value) for value in get_args(literal)], type=str)


MethodChoice = _choices("MethodChoice", Method)
PrecisionChoice = _choices("PrecisionChoice", Precision)
OptimizerChoice = _choices("OptimizerChoice", Optimizer)
ShardingChoice = _choices("ShardingChoice", Sharding)
AttentionChoice = _choices("AttentionChoice", Attention)
TargetsChoice = _choices("TargetsChoice", LoraTargets)
# defaults as module-level values (ruff B008); the same as requirements.Job's
DEFAULT_METHOD = MethodChoice("lora")
DEFAULT_SHARDING = ShardingChoice("none")
DEFAULT_PRECISION = PrecisionChoice("bf16-mixed")
# Without --optimizer, each method gets the optimizer of its usual recipe, as in the default job grid
# (warehouse/seeds/finetune_jobs.csv): QLoRA's paper pairs NF4 with paged 8-bit AdamW.
METHOD_OPTIMIZER = {"full": "adamw", "lora": "adamw", "qlora": "paged-adamw8bit"}
DEFAULT_ATTENTION = AttentionChoice("flash")
DEFAULT_TARGETS = TargetsChoice("all-linear")


def _fail(message: str) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(1)


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
    short = {mid.rsplit("/", 1)[-1].lower(): mid for mid in models}
    close = difflib.get_close_matches(wanted, list(short), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(short[c] for c in close)}?" if close else ""
    raise _fail(
        f"no model {name!r} in warehouse/seeds/llm_models.csv{hint} "
        "(or pass its Hugging Face config.json with --config)"
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
    return find_model(model, load_models())


def _job(**knobs: Any) -> Job:
    values = {k: v.value if isinstance(v, Enum) else v for k, v in knobs.items()}
    if values.get("optimizer") is None:
        values["optimizer"] = METHOD_OPTIMIZER[values["method"]]
    try:
        return Job(**values)
    except ValueError as exc:
        raise _fail(str(exc)) from None


_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_tokens(text: str) -> float:
    """ "50M" → 5e7, "1.5B" → 1.5e9, "2000000" or "2_000_000" → 2e6."""
    match = re.fullmatch(r"\s*([0-9][0-9_]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kmbgt]?)\s*", text.lower())
    if not match or float(match.group(1).replace("_", "")) <= 0:
        raise _fail(f"--tokens {text!r}: write a positive count like 50M, 1.5B or 2000000")
    return float(match.group(1).replace("_", "")) * _SUFFIX[match.group(2)]


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
SeqLenOpt = Annotated[int, typer.Option(min=1, help="Sequence length in tokens.")]
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
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def memory(
    model: ModelOpt = None,
    config: ConfigOpt = None,
    method: MethodOpt = DEFAULT_METHOD,
    seq_len: SeqLenOpt = 2048,
    micro_batch: MicroBatchOpt = 1,
    gpus: Annotated[int, typer.Option(min=1, help="Data-parallel GPUs.")] = 1,
    sharding: Annotated[ShardingChoice, typer.Option(help="ZeRO stage / FSDP.")] = DEFAULT_SHARDING,
    offload: OffloadOpt = False,
    precision: PrecisionOpt = DEFAULT_PRECISION,
    optimizer: OptimizerOpt = None,
    grad_checkpointing: CheckpointingOpt = True,
    attention: AttentionOpt = DEFAULT_ATTENTION,
    lora_rank: RankOpt = 16,
    lora_targets: TargetsOpt = DEFAULT_TARGETS,
    as_json: JsonOpt = False,
) -> None:
    """Peak memory per GPU (GB = 1e9 bytes) of one fine-tuning configuration. Needs no warehouse."""
    spec = _model(model, config)
    job = _job(
        method=method,
        seq_len=seq_len,
        micro_batch=micro_batch,
        sharding=sharding,
        offload=offload,
        precision=precision,
        optimizer=optimizer,
        grad_checkpointing=grad_checkpointing,
        attention=attention,
        lora_rank=lora_rank,
        lora_targets=lora_targets,
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
                "memory_gb": breakdown.as_dict(),
            }
        )
        return
    console.print(
        f"[bold]{spec.model_id}[/] {job.method}: {spec.params / 1e9:.2f}B params, "
        f"{trainable_params(spec, job) / 1e6:,.1f}M trainable; seq {job.seq_len} × micro-batch "
        f"{job.micro_batch}, {job.precision}, {job.optimizer}; {gpus} GPU(s), sharding {job.sharding}",
        highlight=False,
    )
    table = Table(title="peak memory per GPU")
    table.add_column("component")
    table.add_column("GB", justify="right")
    for name, value in breakdown.as_dict().items():
        label = name.removesuffix("_gb")
        table.add_row(f"[bold]{label}[/]" if label == "total" else label, f"{value:,.2f}")
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
    seq_len: SeqLenOpt = 2048,
    micro_batch: MicroBatchOpt = 1,
    offload: OffloadOpt = False,
    precision: PrecisionOpt = DEFAULT_PRECISION,
    optimizer: OptimizerOpt = None,
    grad_checkpointing: CheckpointingOpt = True,
    attention: AttentionOpt = DEFAULT_ATTENTION,
    lora_rank: RankOpt = 16,
    lora_targets: TargetsOpt = DEFAULT_TARGETS,
    as_json: JsonOpt = False,
) -> None:
    """Rank current offers by what this fine-tuning run would cost (reads the warehouse)."""
    spec = _model(model, config)
    # sharding is chosen per offer (none → zero2 → zero3); offload rules out `none`
    job = _job(
        method=method,
        seq_len=seq_len,
        micro_batch=micro_batch,
        sharding="zero3" if offload else "none",
        offload=offload,
        precision=precision,
        optimizer=optimizer,
        grad_checkpointing=grad_checkpointing,
        attention=attention,
        lora_rank=lora_rank,
        lora_targets=lora_targets,
    )
    dataset_tokens = parse_tokens(tokens)
    fjob = FinetuneJob("adhoc", spec.model_id, job, int(dataset_tokens), epochs)
    try:
        con = connect(Settings().warehouse_path, read_only=True)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    try:
        offers = read_offers(con)
        if not spot:
            offers = offers.filter(~offers["is_spot"])
        rows = cost_frame(con, [fjob], {spec.model_id: spec}, offers, max_nodes=max_nodes, max_gpus=None)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()
    if rows.is_empty():
        kind = "" if spot else "on-demand "
        raise _fail(f"no current {kind}offers in the warehouse; run `gpucost refresh`")
    priced = rows.filter(rows["priced"]).sort(["cost_usd", "estimated_hours", "provider", "instance_type"])
    if priced.is_empty():
        raise _fail(_nothing_priced(rows, max_nodes))
    ranked = priced.head(top)
    if as_json:
        _print_json(ranked.to_dicts())
        return
    fitting = rows.filter(rows["fits"]).height
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title=(
            f"{spec.model_id} {job.method}, {fjob.train_tokens / 1e6:,.0f}M tokens: "
            f"{priced.height} priced of {rows.height} {'' if spot else 'on-demand '}offers"
        ),
        caption=(
            f"{fitting - priced.height} more fit but are not priced (no bf16 TFLOPS, or multi-node "
            "without fast fabric); see marts.finetune_costs.unpriced_reason"
            if fitting > priced.height
            else None
        ),
    )
    table.add_column("offer (region)", overflow="fold")
    table.add_column("GPUs", overflow="fold")
    for column in ("sharding", "GB/GPU", "hours", "on-dem. $", "spot $", "$/M tok"):
        table.add_column(column, justify="left" if column == "sharding" else "right", no_wrap=True)
    for r in ranked.iter_rows(named=True):
        nodes = f"{r['nodes_used']}×{r['gpus_per_node']}" if r["multi_node"] else str(r["gpus_used"])
        table.add_row(
            f"{r['provider']} {r['instance_type']} ({r['region']})",
            f"{nodes}× {r['gpu_name']}",
            r["sharding"],
            f"{r['total_gb']:.1f}",
            f"{r['estimated_hours']:,.2f}",
            _money(r["on_demand_cost_usd"]),
            _money(r["expected_spot_cost_usd"]),
            f"{r['usd_per_million_tokens']:,.3f}",
        )
    console.print(table)


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
