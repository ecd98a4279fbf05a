"""What a fine-tuning job is: method, precision, optimizer, shapes, loss, quantization (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Method = Literal["full", "lora", "qlora"]
Precision = Literal["bf16-mixed", "bf16-pure"]
Optimizer = Literal["adamw", "adamw8bit", "paged-adamw", "paged-adamw8bit"]
Sharding = Literal["none", "zero2", "zero3"]
Attention = Literal["flash", "eager"]
LoraTargets = Literal["attention", "all-linear"]
# standard: the HF causal-LM loss (full b·s·V logits, upcast to fp32); chunked: torchtune's
# CEWithChunkedOutputLoss (logits in chunks, fp32 one chunk at a time); fused: Liger /
# Cut-Cross-Entropy / Unsloth (the logits are never materialized).
Loss = Literal["standard", "chunked", "fused"]
# What `qlora` quantizes the frozen base to: NF4 (bitsandbytes, blocksize 64, fp32 absmax), NF4
# with double quantization (QLoRA's default, `bnb_4bit_use_double_quant=True`), or a GPTQ int4
# checkpoint (group size 128, fp16 scales and packed zeros, as Qwen's Q-LoRA recipe uses).
Quant = Literal["nf4", "nf4-dq", "gptq"]

# LoRA dropout by recipe when the job does not say: PEFT's LoraConfig and torchtune default to 0
# (nn.Identity, no copy); the QLoRA reference scripts (artidoro/qlora scripts/finetune_guanaco_7b.sh)
# train with lora_dropout 0.1.
DEFAULT_LORA_DROPOUT: dict[str, float] = {"full": 0.0, "lora": 0.0, "qlora": 0.1}


@dataclass(frozen=True)
class Job:
    """One fine-tuning configuration; defaults are the common HF/PEFT choices.

    `padding_efficiency` is the share of computed tokens that are real: 1 for packed data; for
    padded batches, mean sample length / padded length. Throughput counts real tokens.
    `lora_dropout` None means the recipe default of the method (DEFAULT_LORA_DROPOUT).
    """

    method: Method = "lora"
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    seq_len: int = 2048
    micro_batch: int = 1
    grad_checkpointing: bool = True
    attention: Attention = "flash"
    lora_rank: int = 16
    lora_targets: LoraTargets = "all-linear"
    loss: Loss = "standard"
    sharding: Sharding = "none"
    offload: bool = False
    quant: Quant = "nf4-dq"
    lora_dropout: float | None = None
    # bitsandbytes' prepare_model_for_kbit_training casts the non-quantized parameters
    # (embeddings, head, norms) to fp32; PEFT's QLoRA examples call it, axolotl and torchtune do not
    kbit_upcast: bool = False
    padding_efficiency: float = 1.0
    # micro-batches per optimizer step: the optimizer step and DDP/ZeRO-2 gradient reduction run
    # once per `grad_accumulation` micro-steps
    grad_accumulation: int = 1

    def __post_init__(self) -> None:
        if min(self.seq_len, self.micro_batch, self.lora_rank, self.grad_accumulation) < 1:
            raise ValueError(f"seq_len, micro_batch, lora_rank and grad_accumulation must be ≥ 1: {self}")
        if self.offload and self.sharding == "none":
            raise ValueError("offload needs sharding='zero2' or 'zero3' (DeepSpeed/FSDP CPU offload)")
        if self.lora_dropout is not None and not (0.0 <= self.lora_dropout < 1.0):
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if not (math.isfinite(self.padding_efficiency) and 0.0 < self.padding_efficiency <= 1.0):
            raise ValueError(f"padding_efficiency must be in (0, 1], got {self.padding_efficiency}")

    @property
    def chunked_ce(self) -> bool:
        """Whether the loss avoids the full fp32 logits (the marts' `chunked_ce` column)."""
        return self.loss != "standard"

    @property
    def dropout(self) -> float:
        if self.method == "full":
            return 0.0
        return DEFAULT_LORA_DROPOUT[self.method] if self.lora_dropout is None else self.lora_dropout


@dataclass(frozen=True)
class FinetuneJob:
    """One row of finetune_jobs.csv: a model, the job knobs and the data it trains on."""

    job_id: str
    model_id: str
    job: Job
    dataset_tokens: int
    epochs: float

    @property
    def train_tokens(self) -> float:
        return self.dataset_tokens * self.epochs


def _bool(value: str) -> bool:
    return value.strip().lower() in ("true", "1", "yes")


def job_from_seed_row(row: Mapping[str, str]) -> FinetuneJob:
    """A FinetuneJob from one row of warehouse/seeds/finetune_jobs.csv."""
    loss = row.get("loss") or ("chunked" if _bool(row.get("chunked_ce") or "false") else "standard")
    return FinetuneJob(
        job_id=row["job_id"],
        model_id=row["model_id"],
        job=Job(
            method=row["method"],  # type: ignore[arg-type]
            precision=row["precision"],  # type: ignore[arg-type]
            optimizer=row["optimizer"],  # type: ignore[arg-type]
            seq_len=int(row["seq_len"]),
            micro_batch=int(row["micro_batch"]),
            grad_checkpointing=_bool(row["grad_checkpointing"]),
            attention=row["attention"],  # type: ignore[arg-type]
            lora_rank=int(row["lora_rank"]),
            lora_targets=row["lora_targets"],  # type: ignore[arg-type]
            loss=loss,  # type: ignore[arg-type]
            sharding=row["sharding"],  # type: ignore[arg-type]
            offload=_bool(row["offload"]),
        ),
        dataset_tokens=int(row["dataset_tokens"]),
        epochs=float(row["epochs"]),
    )
