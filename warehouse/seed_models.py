"""The fine-tuning seeds, read into the `finetune` package's types.

`load_models` reads seeds/llm_models.csv, `load_finetune_jobs` seeds/finetune_jobs.csv: the same
files `load_seeds` puts in core.*, parsed once, here.
"""

from __future__ import annotations

import csv
from pathlib import Path

from finetune import FinetuneJob, ModelSpec, job_from_seed_row, model_from_seed_row

SEEDS_DIR = Path(__file__).resolve().parent / "seeds"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def load_models(path: Path | None = None) -> dict[str, ModelSpec]:
    """ModelSpecs from llm_models.csv (default: warehouse/seeds/llm_models.csv), keyed by model_id."""
    specs = (model_from_seed_row(row) for row in _rows(path or SEEDS_DIR / "llm_models.csv"))
    return {spec.model_id: spec for spec in specs}


def load_finetune_jobs(path: Path | None = None) -> list[FinetuneJob]:
    """The default job grid (warehouse/seeds/finetune_jobs.csv)."""
    return [job_from_seed_row(row) for row in _rows(path or SEEDS_DIR / "finetune_jobs.csv")]
