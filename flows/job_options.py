"""The job options of `gpucost memory` and `gpucost estimate`, declared once.

`JobOptions` holds what describes one fine-tuning job on the command line (model, method,
sequence shape, precision, optimizer, LoRA, loss, checkpointing, …); `with_job_options` adds
those options to a command's signature (typer reads the signature) and hands the command one
`JobOptions`. A new job knob is one field and one `JOB_OPTIONS` entry, and reaches both commands.
`JobOptions.model_spec` and `JobOptions.job` turn it into the model's `ModelSpec` and `Job`, with
one line naming the flag for a value out of range (never a traceback).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import inspect
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, get_args

import typer

from finetune import (
    Attention,
    Job,
    LoraTargets,
    Loss,
    Method,
    ModelSpec,
    Optimizer,
    Precision,
    Quant,
    Sharding,
    model_from_hf_config,
)
from finetune.job import (
    CheckpointPolicy,
    Download,
    Experiment,
    Kernels,
    MixedPrecision,
    OptimizerImpl,
    PaddedShape,
    TrainEmbeddings,
    Zero3Impl,
    knobs_without_effect,
    padded_shape,
    require_data_parallel,
)
from finetune.memory import require_expressible
from flows.hf_configs import ConfigNotFound, parse_config, resolve_config
from flows.output import err
from warehouse.seed_models import load_models


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
# A Hub repo id is `name` or `org/name` of letters, digits, `-`, `_`, `.`, at most 96 characters,
# no "--" or ".." (huggingface_hub.utils.validate_repo_id, huggingface.co/docs/huggingface_hub/
# package_reference/utilities, checked 2026-12-02): anything else (a URL, a path) is never looked up
MODEL_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")


class OptionError(typer.Exit):
    """A job option the rules refuse: `message` names the flag and says what to give instead.

    A typer.Exit, so a command that raises it exits with its code; `gpucost serve` catches it and
    answers HTTP 422 with the same message (`quiet_option_errors`)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(code)
        self.message = message


# set by `gpucost serve` (flows/web.py): the message goes into the HTTP answer, not to stderr
_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("quiet_option_errors", default=False)


@contextlib.contextmanager
def quiet_option_errors() -> Iterator[None]:
    """Within it, an OptionError is raised without printing its line (the caller reports it)."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def _fail(message: str, code: int = 1) -> OptionError:
    if not _QUIET.get():
        err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return OptionError(message, code)


def _usage(message: str) -> OptionError:
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


# Bounds on a model read from a config.json (file, HF cache, Hub or pasted): about 4-8× the
# largest public configs (meta-llama/Llama-3.1-405B: 126 layers, hidden 16384, 128 heads,
# intermediate 53248; google/gemma-3: vocabulary 262144; deepseek-ai/DeepSeek-V3: 256 experts;
# checked 2026-12-02 on their config.json).
# A value past them is a typo or a document built to make the model loop for hours.
MODEL_BOUNDS = {
    "layers": 1024,
    "hidden_size": 65536,
    "attention_heads": 1024,
    "kv_heads": 1024,
    "intermediate_size": 262144,
    "vocab_size": 1_048_576,
    "num_experts": 1024,
}


def _bounded(spec: ModelSpec, where: str) -> ModelSpec:
    for name, most in MODEL_BOUNDS.items():
        value = getattr(spec, name, None)
        if isinstance(value, int) and value > most:
            raise _fail(
                f"{where}: {name} {value:,} is beyond any model this estimates (at most {most:,}); "
                "check the config.json"
            )
    return spec


def config_model(data: dict[str, object], where: str) -> ModelSpec:
    """The model of a parsed config.json (`where` names it in messages), within MODEL_BOUNDS."""
    try:
        spec = model_from_hf_config(data, str(data.get("_name_or_path") or where))
    except (ValueError, TypeError) as exc:
        raise _fail(str(exc)) from None
    return _bounded(spec, where)


def pasted_model(text: str) -> ModelSpec:
    """The model of a config.json's text (pasted into `gpucost serve`), with the --config rules."""
    try:
        data = parse_config(text, "the pasted config.json")
    except ConfigNotFound as exc:
        raise _fail(str(exc)) from None
    return config_model(data, "the pasted config.json")


def resolve_model(job: JobOptions, pasted_config: str | None = None) -> ModelSpec:
    """The model of `job` (--model or --config) or of a config.json's text pasted into `gpucost
    serve` instead, with the same rules; no context warning printed (`job.context_warning`)."""
    if pasted_config is not None:
        if job.model is not None or job.config is not None:
            raise _fail("give exactly one of --model ID or a pasted config.json, not both")
        return pasted_model(pasted_config)
    return _model(job.model, job.config)


def _model(model: str | None, config: Path | None) -> ModelSpec:
    if (model is None) == (config is None):
        raise _fail("give exactly one of --model ID (warehouse/seeds/llm_models.csv) or --config config.json")
    if config is not None:
        try:
            data = parse_config(config.read_bytes(), str(config))
        except OSError as exc:
            raise _fail(f"cannot read {config}: {exc}") from None
        except ConfigNotFound as exc:
            raise _fail(str(exc)) from None
        return config_model(data, str(config))
    assert model is not None
    if not MODEL_ID.fullmatch(model) or ".." in model or "--" in model:
        raise _fail(
            f"--model {model[:120]!r} is not a model id: give a seeded model (gpucost models) or a "
            "Hugging Face id like org/name (letters, digits, -, _, .), or pass its config.json with --config"
        )
    models = load_models()
    if "/" in model and not _seeded(model, models):
        try:
            data = resolve_config(model)
        except ConfigNotFound as exc:
            raise _fail(str(exc)) from None
        try:
            return _bounded(model_from_hf_config(data, model), model)
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
        require_data_parallel(job)  # PP: one line saying what to ask instead
    except ValueError as exc:  # OutsideModelError is one
        raise _fail(str(exc)) from None
    return job


_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_tokens(text: str) -> float:
    """ "50M" → 5e7, "1.5B" → 1.5e9, "2000000" or "2_000_000" → 2e6."""
    match = re.fullmatch(r"\s*([0-9][0-9_]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kmbgt]?)\s*", text.lower())
    value = float(match.group(1).replace("_", "")) * _SUFFIX[match.group(2)] if match else math.nan
    # 1e15 tokens is ~70× the largest public pretraining corpus: a typo, not a fine-tuning run;
    # below one token there is nothing to train on (the job counts whole tokens)
    if not (math.isfinite(value) and 1 <= value <= 1e15):
        raise _usage(f"--tokens {text!r}: write a count of at least one token, like 50M, 1.5B or 2000000")
    return value


# --- bill options (issue 21): what the experiment carries and how it runs ----------------------

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|sec|m|min|h|hour|hours)\s*", re.IGNORECASE)
_STEPS = re.compile(r"\s*([0-9]+)\s*steps?\s*", re.IGNORECASE)
_HOURS_PER_UNIT = {
    "s": 1 / 3600,
    "sec": 1 / 3600,
    "m": 1 / 60,
    "min": 1 / 60,
    "h": 1.0,
    "hour": 1.0,
    "hours": 1.0,
}


def parse_duration_hours(text: str, flag: str) -> float:
    """ "30m" → 0.5, "2h" → 2.0, "90s" → 0.025; one line naming `flag` otherwise."""
    match = _DURATION.fullmatch(text)
    if not match:
        raise _usage(f"{flag} {text!r}: write a duration like 30m, 1.5h or 90s")
    return float(match.group(1)) * _HOURS_PER_UNIT[match.group(2).lower()]


def parse_checkpoint_every(text: str) -> tuple[float | None, int | None]:
    """--checkpoint-every as (hours, None) for "30m" / "1h", or (None, steps) for "500steps"."""
    steps = _STEPS.fullmatch(text)
    if steps:
        if int(steps.group(1)) < 1:
            raise _usage(f"--checkpoint-every {text!r}: checkpoint at least every 1 step")
        return None, int(steps.group(1))
    match = _DURATION.fullmatch(text)
    if not match:
        raise _usage(f"--checkpoint-every {text!r}: write minutes or hours (30m, 1h) or steps (500steps)")
    hours = float(match.group(1)) * _HOURS_PER_UNIT[match.group(2).lower()]
    if hours <= 0:
        raise _usage(f"--checkpoint-every {text!r}: the interval must be longer than zero")
    return hours, None


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
DocLenOpt = Annotated[
    float | None,
    typer.Option(
        help="Packed data whose documents attend only within themselves (a fused varlen kernel: "
        "axolotl sample_packing, TRL padding_free): mean document length in tokens."
    ),
]
MicroBatchOpt = Annotated[int, typer.Option(min=1, help="Sequences per GPU per step.")]
GradAccumulationOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="Micro-batches per optimizer step (HF gradient_accumulation_steps): the optimizer step, "
        "DDP's all-reduce and ZeRO-2's weight all-gather run once per N, and --checkpoint-every "
        "Nsteps counts optimizer steps. Memory is unchanged, except FSDP1 under HF/Accelerate "
        "(--fsdp-no-sync), which keeps unsharded gradients through accumulation.",
    ),
]
OffloadOpt = Annotated[bool, typer.Option(help="ZeRO CPU offload of optimizer state (needs zero2/zero3).")]
PrecisionOpt = Annotated[PrecisionChoice, typer.Option(help="bf16 with fp32 master weights, or pure bf16.")]
OptimizerOpt = Annotated[
    OptimizerChoice | None,
    typer.Option(help="Optimizer (8-bit ones keep 2 B/param). Default: adamw; paged-adamw8bit for qlora."),
]
CheckpointingOpt = Annotated[bool, typer.Option(help="Activation (gradient) checkpointing.")]
AttentionOpt = Annotated[
    AttentionChoice,
    typer.Option(
        help="flash: FlashAttention-2-class (flash-attn 2, SDPA's flash backend); native: the GPU's "
        "own fused kernel (FlashAttention-3, cuDNN or TransformerEngine on Hopper, FlashAttention-4 "
        "or cuDNN on datacenter Blackwell; FA2-class elsewhere), also what PyTorch SDPA picks on "
        "H100/H200/B200 from torch 2.11 (its cuDNN newer than 9.15.0); flash1: FlashAttention-1-class "
        "(flash-attn 1.x, its Triton port, SDPA's flash backend before torch 2.2), half FA2's rate; "
        "eager: unfused."
    ),
]
RankOpt = Annotated[int, typer.Option(min=1, help="LoRA rank.")]
TargetsOpt = Annotated[TargetsChoice, typer.Option(help="LoRA on attention projections or all linears.")]
LossOpt = Annotated[
    LossChoice,
    typer.Option(
        help="standard (HF, fp32 logits), chunked (torchtune), fused (Liger, Cut-Cross-Entropy) "
        "or compiled (the standard loss under torch.compile, as torchtitan runs it)."
    ),
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
TensorParallelOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="Tensor-parallel degree: groups of this many GPUs in one node split every layer "
        "(Megatron-style, with sequence parallelism); --sharding runs over the groups. lora/full.",
    ),
]
SequenceParallelOpt = Annotated[
    bool,
    typer.Option(
        help="With --tensor-parallel: split the norms and residuals by sequence too (torchtitan, "
        "Megatron --sequence-parallel); off keeps them whole on every GPU of the group."
    ),
]
PipelineParallelOpt = Annotated[
    int, typer.Option(min=1, help="Pipeline-parallel degree; above 1 is outside this model.")
]
Zero3ImplChoice = _choices("Zero3ImplChoice", Zero3Impl)
TrainEmbeddingsChoice = _choices("TrainEmbeddingsChoice", TrainEmbeddings)
Zero3ImplOpt = Annotated[
    Zero3ImplChoice,
    typer.Option(
        help="Who shards a zero3 job: fsdp (2 units + embedding/head gathered, fp32 gradient "
        "shard) or deepspeed (its 1e9-parameter live budget, bf16 gradient partition)."
    ),
]
TrainEmbeddingsOpt = Annotated[
    TrainEmbeddingsChoice,
    typer.Option(
        help="LoRA/QLoRA: also train a copy of the head, or of embedding and head (PEFT modules_to_save)."
    ),
]
BILL = "The whole bill (estimate)"
DownloadChoice = _choices("DownloadChoice", Download)
DatasetGbOpt = Annotated[
    float | None,
    typer.Option(
        "--dataset-gb",
        min=0.0,
        rich_help_panel=BILL,
        help="Dataset size in GB, uploaded to the instance. Default: --tokens × 4 bytes (about 4 "
        "characters of text, or one int32 id, per token).",
    ),
]
CheckpointEveryOpt = Annotated[
    str,
    typer.Option(
        "--checkpoint-every",
        rich_help_panel=BILL,
        help="Checkpoint interval: minutes or hours (30m, 1h) or optimizer steps (500steps). Sets the "
        "checkpoint writes and the work a spot interruption loses.",
    ),
]
DownloadOpt = Annotated[
    DownloadChoice | None,
    typer.Option(
        rich_help_panel=BILL,
        help="What each run downloads at its end (egress). Default: adapter for lora/qlora, merged for full.",
    ),
]
RunsOpt = Annotated[int, typer.Option(min=1, rich_help_panel=BILL, help="Training runs in the experiment.")]
IdleOpt = Annotated[
    str,
    typer.Option(
        rich_help_panel=BILL,
        help="Inspection time between runs (30m, 1h), billed where a stopped instance still bills.",
    ),
]
DEFAULT_CHECKPOINT_EVERY = "30m"  # finetune.job.DEFAULT_CHECKPOINT_EVERY_HOURS
DEFAULT_POLICY = CheckpointPolicyChoice("full")
DEFAULT_IMPL = OptimizerImplChoice("foreach")
DEFAULT_ZERO3_IMPL = Zero3ImplChoice("fsdp")
DEFAULT_TRAIN_EMBEDDINGS = TrainEmbeddingsChoice("off")
DEFAULT_SEQ_LEN = 2048
# --- modeltime (issue 23): the kernel stack ---
KernelsChoice = _choices("KernelsChoice", Kernels)
KernelsOpt = Annotated[
    KernelsChoice,
    typer.Option(
        help="Kernel stack: plain (transformers/PEFT defaults: SDPA, eager norms/rotary/LoRA, fp32 loss) "
        "or fused (FlashAttention-2 + Liger/Unsloth fused RMSNorm, RoPE, SwiGLU, LoRA, cross-entropy)."
    ),
]
DEFAULT_KERNELS = KernelsChoice("plain")
LoraInFsdpUnitsOpt = Annotated[
    bool,
    typer.Option(
        help="FSDP1 wraps each decoder layer with its LoRA adapters in one FlatParameter "
        "(use_orig_params=True): the frozen weights get gradients too, kept sharded and "
        "reduce-scattered. Off: adapters wrapped apart (PEFT's fsdp_auto_wrap_policy, HF Trainer) or FSDP2."
    ),
]

# --- modelmem (issue 23): memory-model options ---
MixedPrecisionChoice = _choices("MixedPrecisionChoice", MixedPrecision)
MixedPrecisionOpt = Annotated[
    MixedPrecisionChoice,
    typer.Option(
        help="bf16-mixed via bf16 modules (fsdp: FSDP MixedPrecision, DeepSpeed, HF bf16 load with "
        "the Trainer's autocast), torch.autocast over fp32 modules (fp32 weights, residual stream "
        "and checkpoints), or none: bf16 modules and no autocast (a plain loop; PEFT's fp32 "
        "adapters compute in fp32)."
    ),
]
QuantizeHeadOpt = Annotated[
    bool, typer.Option(help="QLoRA: quantize the output head too (frameworks converting every linear).")
]
LoraHeadOpt = Annotated[bool, typer.Option(help="LoRA/QLoRA: LoRA adapters on the output head as well.")]
FsdpNoSyncOpt = Annotated[
    bool,
    typer.Option(
        help="--grad-accumulation > 1 on FSDP1 under the HF Trainer / Accelerate (no_sync): every GPU "
        "keeps the trained weights' whole gradient between optimizer steps and reduce-scatters once "
        "per step. Off: FSDP2 (torchtune, torchtitan), reduce-scattering every micro-batch.",
    ),
]
DsReduceBufferOpt = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        help="DeepSpeed's gradient reduce buffer in elements (zero2; zero3 with --zero3-impl "
        "deepspeed): the config's reduce_bucket_size, twice it under ZeRO-2 with overlap_comm. "
        "Default: 5e8 under zero2 (DeepSpeed's own), hidden_size² under zero3 (a config's \"auto\").",
    ),
]
DdpBucketViewOpt = Annotated[
    bool,
    typer.Option(
        help="--sharding none on several GPUs: DDP's gradients are views into its all-reduce buckets "
        "(gradient_as_bucket_view=True, or FSDP NO_SHARD). Off: torch's, Accelerate's and the HF "
        "Trainer's default, one more copy of the trained gradients on every GPU."
    ),
]
DEFAULT_MIXED_PRECISION = MixedPrecisionChoice("fsdp")


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


@dataclass(frozen=True)
class JobOptions:
    """One fine-tuning job as the command line states it (values as typed; Enums unwrapped)."""

    model: str | None = None
    config: Path | None = None
    method: str = "lora"
    seq_len: int | None = None
    mean_len: float | None = None
    max_len: int | None = None
    doc_len: float | None = None
    micro_batch: int = 1
    grad_accumulation: int = 1
    zero3_impl: str = "fsdp"
    train_embeddings: str = "off"
    offload: bool = False
    precision: str = "bf16-mixed"
    optimizer: str | None = None
    grad_checkpointing: bool = True
    attention: str = "flash"
    lora_rank: int = 16
    lora_targets: str = "all-linear"
    loss: str = "standard"
    quant: str = "nf4-dq"
    lora_dropout: float | None = None
    checkpoint_policy: str = "full"
    optimizer_impl: str = "foreach"
    full_state_dict_load: bool = False
    tensor_parallel: int = 1
    sequence_parallel: bool = True
    pipeline_parallel: int = 1
    # --- modelmem (issue 23) ---
    mixed_precision: str = "fsdp"
    quantize_head: bool = False
    lora_head: bool = False
    ddp_bucket_view: bool = False
    fsdp_no_sync: bool = False
    ds_reduce_buffer_elements: float | None = None
    # --- modeltime (issue 23) ---
    kernels: str = "plain"
    lora_in_fsdp_units: bool = False
    # --- bill options (issue 21): the experiment, not the Job ---
    dataset_gb: float | None = None
    checkpoint_every: str = DEFAULT_CHECKPOINT_EVERY
    download: str | None = None
    runs: int = 1
    idle: str = "0m"

    def experiment(self) -> Experiment:
        """The experiment around the run (finetune.job.Experiment) from the bill options."""
        hours, steps = parse_checkpoint_every(self.checkpoint_every)
        download = None if self.download is None else _choice_of(self.download, Download, "--download")
        if download == "adapter" and self.method == "full":
            raise _usage("--download adapter: full fine-tuning trains no adapter; use merged or none")
        return Experiment(
            dataset_gb=self.dataset_gb,
            checkpoint_every_hours=hours,
            checkpoint_every_steps=steps,
            download=download,
            runs=self.runs,
            idle_hours=parse_duration_hours(self.idle, "--idle"),
        )

    def model_spec(self) -> ModelSpec:
        """The model of --model or --config; one line and exit 1 when neither resolves. A sequence
        longer than the model's context length (max_position_embeddings) is warned of in one line."""
        spec = _model(self.model, self.config)
        warning = self.context_warning(spec)
        warn(warning)
        return spec

    def context_warning(self, spec: ModelSpec) -> str | None:
        """One line when the sequence is longer than `spec`'s context length, else None."""
        longest, flag = (
            (self.max_len, "--max-len")
            if self.max_len is not None
            else (self.seq_len or DEFAULT_SEQ_LEN, "--seq-len" if self.seq_len else "the default --seq-len")
        )
        if longest <= spec.max_context:
            return None
        return (
            f"{flag} {longest} is beyond {spec.model_id}'s context length of "
            f"{spec.max_context} tokens (max_position_embeddings in its config): it was not trained "
            "on sequences this long; the estimate assumes it runs them (RoPE scaling, say)"
        )

    def job(
        self,
        *,
        sharding: str,
        padding_efficiency: float | None = None,
        compiled: bool = False,
        model: ModelSpec | None = None,
    ) -> tuple[Job, PaddedShape | None]:
        """The model's Job (and the padded shape, for padded data) under `sharding`; with `model`,
        also refused where that model cannot run it as stated (`require_expressible`)."""
        shape_knobs, shape = _shape(
            self.seq_len, self.mean_len, self.max_len, self.micro_batch, padding_efficiency
        )
        knobs = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_JOB_FIELDS}
        job = _job(**knobs, **shape_knobs, compiled=compiled, sharding=sharding)
        if model is not None:
            try:
                require_expressible(model, job)
            except ValueError as exc:
                raise _fail(str(exc)) from None
        return job, shape


def warn(warning: str | None) -> None:
    """One `warning:` line on stderr, if any (stdout stays the answer, parseable under --json)."""
    if warning:
        err.print(f"[yellow]warning:[/] {warning}", soft_wrap=True, highlight=False)


def knob_warning(placements: Iterable[tuple[Job, int]]) -> str | None:
    """One line naming the options that change nothing in any of `placements` (each the job as it
    would run, with its sharding, and its GPU count), and why; None when each counts somewhere.
    Stated hardware is one placement; a ranking, where each offer gets its own sharding, passes
    every sharding it may pick."""
    found: dict[str, str] | None = None
    for job, n_gpus in placements:
        idle = {
            name: f"{_flag_text(job, name)} changes nothing here: {why}"
            for name, why in knobs_without_effect(job, n_gpus)
        }
        found = idle if found is None else {name: text for name, text in found.items() if name in idle}
    return "; ".join(found.values()) if found else None


def _flag_text(job: Job, name: str) -> str:
    """The option that set Job field `name` as typed: --flag, --no-flag or --flag value."""
    value, flag = getattr(job, name), "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return flag if value else "--no-" + flag.removeprefix("--")
    if isinstance(value, float):
        # 2e8 as typed, not %g's 2e+08
        return f"{flag} " + re.sub(r"e\+?0*(\d)", r"e\1", f"{value:g}")
    return f"{flag} {value}"


# JobOptions fields that are not Job fields: what the model is, and the shape _shape derives
_NOT_JOB_FIELDS = frozenset(
    {"model", "config", "seq_len", "mean_len", "max_len"}
    | {"dataset_gb", "checkpoint_every", "download", "runs", "idle"}  # the experiment's (bill)
)

# The options `with_job_options` adds, in --help order: (annotation, default) per JobOptions field.
JOB_OPTIONS: dict[str, tuple[Any, Any]] = {
    "model": (ModelOpt, None),
    "config": (ConfigOpt, None),
    "method": (MethodOpt, DEFAULT_METHOD),
    "seq_len": (SeqLenOpt, None),
    "mean_len": (MeanLenOpt, None),
    "max_len": (MaxLenOpt, None),
    "doc_len": (DocLenOpt, None),
    "micro_batch": (MicroBatchOpt, 1),
    "grad_accumulation": (GradAccumulationOpt, 1),
    "zero3_impl": (Zero3ImplOpt, DEFAULT_ZERO3_IMPL),
    "train_embeddings": (TrainEmbeddingsOpt, DEFAULT_TRAIN_EMBEDDINGS),
    "offload": (OffloadOpt, False),
    "precision": (PrecisionOpt, DEFAULT_PRECISION),
    "optimizer": (OptimizerOpt, None),
    "grad_checkpointing": (CheckpointingOpt, True),
    "attention": (AttentionOpt, DEFAULT_ATTENTION),
    "lora_rank": (RankOpt, 16),
    "lora_targets": (TargetsOpt, DEFAULT_TARGETS),
    "loss": (LossOpt, DEFAULT_LOSS),
    "quant": (QuantOpt, DEFAULT_QUANT),
    "lora_dropout": (DropoutOpt, None),
    "checkpoint_policy": (PolicyOpt, DEFAULT_POLICY),
    "optimizer_impl": (ImplOpt, DEFAULT_IMPL),
    "full_state_dict_load": (FullLoadOpt, False),
    "tensor_parallel": (TensorParallelOpt, 1),
    "sequence_parallel": (SequenceParallelOpt, True),
    "pipeline_parallel": (PipelineParallelOpt, 1),
    # --- modelmem (issue 23) ---
    "mixed_precision": (MixedPrecisionOpt, DEFAULT_MIXED_PRECISION),
    "quantize_head": (QuantizeHeadOpt, False),
    "lora_head": (LoraHeadOpt, False),
    "ddp_bucket_view": (DdpBucketViewOpt, False),
    "fsdp_no_sync": (FsdpNoSyncOpt, False),
    "ds_reduce_buffer_elements": (DsReduceBufferOpt, None),
    # --- modeltime (issue 23) ---
    "kernels": (KernelsOpt, DEFAULT_KERNELS),
    "lora_in_fsdp_units": (LoraInFsdpUnitsOpt, False),
    # --- bill options (issue 21) ---
    "dataset_gb": (DatasetGbOpt, None),
    "checkpoint_every": (CheckpointEveryOpt, DEFAULT_CHECKPOINT_EVERY),
    "download": (DownloadOpt, None),
    "runs": (RunsOpt, 1),
    "idle": (IdleOpt, "0m"),
}


def _choice_of(value: str, literal: Any, flag: str) -> Any:
    for option in get_args(literal):
        if option == value:
            return option
    raise _usage(f"{flag} {value!r}: choose one of {', '.join(get_args(literal))}")


def with_job_options(command: Callable[..., None]) -> Callable[..., None]:
    """`command(job: JobOptions, **own)` as a typer command taking every JOB_OPTIONS option too.

    The wrapper's signature is the job options, then the command's own (all keyword-only, so
    typer sees one flat list); the wrapper folds the job options into one JobOptions.
    """
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "job"]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        for name, (annotation, default) in JOB_OPTIONS.items()
    ]
    parameters = shared + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]

    @functools.wraps(command)
    def wrapper(**values: Any) -> None:
        knobs = {name: _plain(values.pop(name, default)) for name, (_, default) in JOB_OPTIONS.items()}
        command(job=JobOptions(**knobs), **values)

    wrapper.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value
