"""Our per-GPU memory next to LLaMA-Factory's published "Hardware Requirement" estimates.

    uv run python benchmarks/hardware_table.py

LLaMA-Factory's table (hiyouga/LLaMA-Factory README.md @ff6d4d12eeb0, section "Hardware
Requirement", marked "* estimated"; https://github.com/hiyouga/LLaMA-Factory#hardware-requirement)
is a rule of thumb in bytes per parameter (18x, 8x, 2x, x/2) with no activation term. We print our
model states alone (comparable) and the whole peak for one sequence of 2048 tokens with gradient
checkpointing and FlashAttention on one GPU (what a run needs). Sizes: Qwen2.5-7B/14B/32B and
Llama-3.1-70B stand in for LLaMA-Factory's 7B/14B/30B/70B columns.
"""

from __future__ import annotations

from finetune import (
    Job,
    memory_per_gpu,
)
from warehouse.seed_models import load_models

MODELS = {
    "7B": "Qwen/Qwen2.5-7B",
    "14B": "Qwen/Qwen2.5-14B",
    "32B": "Qwen/Qwen2.5-32B",
    "70B": "meta-llama/Llama-3.1-70B",
}
# LLaMA-Factory README @ff6d4d12eeb0, columns 7B / 14B / 30B / 70B, GB.
LLAMA_FACTORY_GB: dict[str, tuple[int, int, int, int]] = {
    "Full (bf16 mixed, AdamW)": (120, 240, 600, 1200),
    "Full (pure bf16, AdamW)": (60, 120, 300, 600),
    "LoRA (bf16 base)": (16, 32, 64, 160),
    "QLoRA (4-bit)": (6, 12, 24, 48),
}
JOBS: dict[str, Job] = {
    "Full (bf16 mixed, AdamW)": Job(method="full", precision="bf16-mixed"),
    "Full (pure bf16, AdamW)": Job(method="full", precision="bf16-pure"),
    "LoRA (bf16 base)": Job(method="lora", lora_rank=16, lora_targets="all-linear"),
    "QLoRA (4-bit)": Job(method="qlora", lora_rank=16, lora_targets="all-linear"),
}
SEQ_LEN = 2048


def main() -> None:
    models = load_models()
    print(f"Per-GPU memory, GB (1e9 B), one GPU, micro-batch 1 × {SEQ_LEN} tokens, gradient")
    print("checkpointing, FlashAttention, LoRA r16 all-linear. Cells: ours, model states only /")
    print("ours, whole peak / LLaMA-Factory estimate.\n")
    print("| Method | " + " | ".join(f"{size} ({MODELS[size].split('/')[1]})" for size in MODELS) + " |")
    print("|---|" + "---|" * len(MODELS))
    for label, base_job in JOBS.items():
        cells = []
        for i, model_id in enumerate(MODELS.values()):
            job = Job(**{**base_job.__dict__, "seq_len": SEQ_LEN})
            m = memory_per_gpu(models[model_id], job)
            states = m.weights_gb + m.gradients_gb + m.optimizer_gb
            cells.append(f"{states:.0f} / {m.total_gb:.0f} / {LLAMA_FACTORY_GB[label][i]}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("\nLLaMA-Factory's 30B column is set against our 32B model; its table has no activation term.")


if __name__ == "__main__":
    main()
