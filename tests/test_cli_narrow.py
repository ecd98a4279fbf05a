"""The read commands' tables keep every value whole on an 80-column terminal.

rich fits a table to the terminal by wrapping its wrappable columns and, when the unwrappable ones
alone are too wide, by cutting every column short with "…". At 80 columns `gpucost prices` once
printed "1.…" for prices and "H100-P…" for GPUs (a marketplace's long source text had pushed its
no-wrap columns past the width), `models` cut the ids a user types, `providers` every fact."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.replay_warehouse import replay_only_home

COMMANDS = [
    ("prices",),
    ("prices", "--spot"),
    ("prices", "--gpu", "H100", "--max-price", "2"),
    ("models",),
    ("providers",),
    ("gpus",),
    ("history", "--gpu", "H100-SXM"),
    ("estimate", "--model", "Llama-3.1-8B", "--top", "5"),
    ("estimate", "--model", "Llama-3.1-8B", "--bill", "--top", "3"),
    ("memory", "--model", "Llama-3.1-8B"),
]


@pytest.fixture(scope="module")
def replay_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replay_only_home(tmp_path_factory.getbasetemp())


def run_at(width: int, args: tuple[str, ...], home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    env.update(GPUCOST_HOME=str(home), HF_HUB_OFFLINE="1", COLUMNS=str(width))
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_no_value_is_cut_at_80_columns(args: tuple[str, ...], replay_home: Path):
    out = run_at(80, args, replay_home)
    assert out.strip(), "the command printed nothing"
    cut = [line for line in out.splitlines() if "…" in line]
    assert not cut, f"gpucost {' '.join(args)} at 80 columns cut values short: {cut[:3]}"
    # the table is laid out for the terminal, not printed wider than it (a source URL is printed
    # whole on its own line for copying, and left to the terminal to wrap)
    assert max(len(line) for line in out.splitlines() if "://" not in line) <= 80


def test_prices_keep_every_price_and_gpu_whole_where_they_were_cut(replay_home: Path):
    out = run_at(80, ("prices", "--gpu", "H100", "--max-price", "2"), replay_home)
    wide = run_at(200, ("prices", "--gpu", "H100", "--max-price", "2"), replay_home)
    # every price the wide table shows is in the narrow one too
    prices = {
        word
        for line in wide.splitlines()
        for word in line.split()
        if word.lstrip("≥").replace(".", "").isdigit()
    }
    assert prices and prices <= set(out.split())
    assert "H100-SXM" in out.split() and "H100-PCIe" in out.split()


def test_a_narrow_bill_puts_the_items_in_one_cell_and_keeps_every_amount(replay_home: Path):
    # nine item columns and a total need ~120 characters: at 150 they are columns, at 80 the items
    # share one wrapping cell ("compute 4.41 · rework 0.00 · …") and nothing is cut
    args = ("estimate", "--model", "Llama-3.1-8B", "--bill", "--top", "3")
    wide, narrow = run_at(150, args, replay_home), run_at(80, args, replay_home)
    labels = ["compute", "rework", "set-up", "storage", "ckpt", "egress", "ingress", "idle", "fees"]
    head = next(line for line in wide.splitlines() if "offer (region)" in line).split()
    assert head[2 : 2 + len(labels)] == labels and head[-2:] == ["total", "unpublished"]
    amount = re.compile(r"\?|[\d,]+\.\d\d\*?")
    rows = []
    for line in wide.splitlines():
        run = [word for word in line.split() if amount.fullmatch(word)]
        if len(run) == len(labels) + 1:
            rows.append(run)
    assert len(rows) == 3
    # every amount of every row is in the narrow bill, and each item is named once per offer
    tokens = narrow.split()
    assert not Counter(v for row in rows for v in row) - Counter(t for t in tokens if amount.fullmatch(t))
    assert all(tokens.count(label) == len(rows) for label in labels)


@pytest.mark.parametrize("width", [40, 60, 80])
def test_models_on_a_narrow_terminal_leave_out_columns_not_ids(width: int, replay_home: Path):
    # at 60 columns rich once dropped the model_id column altogether and cut the context
    # ("131,0…"): the architecture columns are left out instead, the ids keep their room, and the
    # caption names what is missing
    wide, narrow = run_at(200, ("models",), replay_home), run_at(width, ("models",), replay_home)
    assert "…" not in narrow and max(map(len, narrow.splitlines())) <= width
    head = next(line for line in narrow.splitlines() if "model_id" in line).split()
    assert head[:2] == ["model_id", "params"]
    every = next(line for line in wide.splitlines() if "model_id" in line).split()
    left_out = [column for column in every if column not in head]
    assert left_out, f"all {len(every)} columns fit in {width}: the test no longer tests narrowing"
    caption = " ".join(narrow.split())
    assert f"{', '.join(left_out)} left out to fit the terminal" in caption
    # an id of up to 24 characters reads whole on its line, with its parameter count beside it
    lines = [line.split() for line in narrow.splitlines()]
    for model_id in ("meta-llama/Llama-3.1-8B", "TinyLlama/TinyLlama_v1.1", "bigscience/bloomz-7b1"):
        assert any(words[:1] == [model_id] and words[1].endswith("B") for words in lines if words)
    # and no column is left out at 200
    assert "left out" not in wide
