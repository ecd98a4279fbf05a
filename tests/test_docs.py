"""Documentation that can drift from the code is checked against it."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED
from tests.replay_warehouse import replay_only_home
from warehouse.db import connect, load_seeds, migrate
from warehouse.marts import build_marts

README = (REPO / "README.md").read_text()


def test_every_cli_command_is_in_the_readme():
    from flows.cli import app

    names = {c.name or c.callback.__name__ for c in app.registered_commands}
    assert names >= {"refresh", "sql", "export", "status", "gpus", "unmapped", "memory", "estimate"}
    for name in names:
        assert f"gpucost {name}" in README, f"`gpucost {name}` is not documented in README.md"


def test_every_option_of_every_cli_command_is_in_the_readme():
    """An option `--help` shows but the README never names is documentation out of step."""
    import typer.main

    from flows.cli import app

    root = typer.main.get_command(app)
    missing = []
    for name, command in root.commands.items():
        leaves = getattr(command, "commands", {None: command})
        for sub, leaf in leaves.items():
            for param in leaf.params:
                for opt in param.opts:
                    if opt.startswith("--") and opt != "--help" and opt not in README:
                        missing.append(f"gpucost {name}{' ' + sub if sub else ''} {opt}")
    assert len(root.commands) > 10
    assert not missing, f"options missing from README.md: {missing}"


def test_every_setting_is_in_env_example_and_readme():
    from warehouse.settings import setting_names

    example = (REPO / ".env.example").read_text()
    for field in setting_names():
        variable = f"GPUCOST_{field.upper()}"
        assert variable in example, f"{variable} missing from .env.example"
        assert variable in README, f"{variable} missing from README.md"


def test_readme_documents_every_mart():
    from warehouse.finetune_marts import build_finetune_marts

    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    build_marts(con, finetune=build_finetune_marts)
    marts = {
        r[0]
        for r in con.execute("select table_name from duckdb_tables() where schema_name = 'marts'").fetchall()
    }
    for mart in marts:
        assert f"marts.{mart}" in README, f"marts.{mart} is not documented in README.md"


def test_design_contract_columns_exist_in_gpu_offers():
    design = SHARED / "DESIGN.md"
    if not design.exists():
        pytest.skip("../shared/DESIGN.md is absent")
    row = next(line for line in design.read_text().splitlines() if line.startswith("| `marts.gpu_offers`"))
    promised = set(re.findall(r"`([a-z_]+)`", row.split("Stable column names others rely on:")[1]))
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    build_marts(con)
    columns = {r[0] for r in con.execute("describe marts.gpu_offers").fetchall()}
    assert promised <= columns, promised - columns


# --- the README's commands, run ------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """One `uv run gpucost …` of a README code block, and the output shown under it (`$ ` ones)."""

    args: tuple[str, ...]
    output: tuple[str, ...]

    @property
    def id(self) -> str:
        words = [self.args[0], *(a for a in self.args[1:2] if re.fullmatch(r"[a-z]+", a))]
        return " ".join(words) + f" ({len(self.args)} args)"


def readme_examples(text: str = README) -> list[Example]:
    """Every `uv run gpucost` line of a fenced block (a quoted argument may span lines; `#` starts a
    comment), with the lines up to the next `$ ` as its output when it is shown as `$ uv run …`."""
    examples = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.M | re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            shown = lines[i].startswith("$ ")
            command = lines[i].removeprefix("$ ")
            i += 1
            if not command.startswith("uv run gpucost"):
                continue
            while True:
                try:
                    argv = shlex.split(command, comments=True)
                    break
                except ValueError:  # an open quote: the argument goes on on the next line
                    command += "\n" + lines[i]
                    i += 1
            output: list[str] = []
            while shown and i < len(lines) and not lines[i].startswith("$ "):
                output.append(lines[i])
                i += 1
            examples.append(Example(tuple(argv[3:]), tuple(output)))
    return examples


RULE = re.compile(r"\s*[─━┡╇┩]+\s*")


def header_lines(output: list[str] | tuple[str, ...]) -> list[tuple[str, ...]]:
    """The column headers of each table: the words of the line above a rule (`───` under a simple
    head, `┡━╇━┩` under a boxed one), box characters and spacing aside, so widths do not matter."""
    return [
        tuple(re.findall(r"[^\s┃│]+", line))
        for line, below in itertools.pairwise(output)
        if RULE.fullmatch(below) and not RULE.fullmatch(line) and line.strip()
    ]


# Whatever needs the network or a Prefect server; every other README command runs offline.
OFFLINE_SKIPS = {
    "refresh": "a live refresh asks every provider's API, over the network (tests/test_flow.py "
    "runs the replay one)",
    "deploy": "deploy registers deployments on a running Prefect server and work pool",
    "server": "server starts a background Prefect server process",
    "backup": "the README's backup goes to S3 over the network (tests/test_backup.py backs up to "
    "an S3 API on loopback and to a folder)",
    "restore": "the README's restore reads S3 over the network (tests/test_backup.py restores from "
    "an S3 API on loopback and from a folder)",
    "pull": "pull reads a publication from a bucket or server (tests/test_pull.py serves one on loopback)",
    "serve": "serve runs until it is stopped (tests/test_serve.py starts it on loopback and stops it)",
}
EXAMPLES = readme_examples()


def test_the_readme_parser_finds_its_commands_and_their_output():
    sample = (
        '```\n$ uv run gpucost sql "select 1,\n  2"\n┏━━━┓\n┃ a ┃\n┡━━━┩\n'
        "$ uv run gpucost prices --gpu H100  # a comment\nGPU  provider\n───────\n```\n"
        "```\nuv run gpucost deploy   # no output shown\nuv run prefect worker start\n```\n"
    )
    sql, prices, deploy = readme_examples(sample)
    assert sql.args == ("sql", "select 1,\n  2") and header_lines(sql.output) == [("a",)]
    assert prices.args == ("prices", "--gpu", "H100") and header_lines(prices.output) == [("GPU", "provider")]
    assert deploy == Example(("deploy",), ())
    assert {e.args[0] for e in EXAMPLES} >= {"sql", "prices", "memory", "estimate", "check", "refresh"}


@pytest.fixture(scope="module")
def replay_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replay_only_home(tmp_path_factory.getbasetemp())


def run_example(example: Example, home: Path, feeds: Path) -> subprocess.CompletedProcess[str]:
    """`gpucost` with the example's arguments on the warehouse in `home`, 150 columns wide: the
    width the README's outputs are generated at (estimate's wide layout needs >= 140)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    env.update(GPUCOST_HOME=str(home), GPUCOST_FEEDS_DIR=str(feeds), HF_HUB_OFFLINE="1", COLUMNS="150")
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *example.args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# What differs from one run on the replay warehouse to the next: when its prices were fetched and
# how old they are (`now`, `1m`, `2h` in an age column)
_FETCHED = re.compile(r"fetched \d{4}-\d\d-\d\d \d\d:\d\d UTC \([^)]*\)")
_AGE = re.compile(r"(?<![\w.])(?:now|\d+[mhd])(?![\w.])")


def comparable(lines: list[str] | tuple[str, ...]) -> list[str]:
    """`lines` with spacing collapsed and the run's own times masked; blank lines dropped."""
    masked = (_AGE.sub("<age>", _FETCHED.sub("fetched <time>", " ".join(line.split()))) for line in lines)
    return [line for line in masked if line]


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_every_readme_command_runs_on_the_replay_warehouse_with_the_output_shown(
    example: Example, replay_home: Path, tmp_path: Path
):
    """The README's commands with its arguments, on the warehouse `refresh --replay tests/replay`
    leaves: exit 0, and the output shown is the output printed (stderr, then stdout), line for
    line, the fetch time and ages aside. The shown outputs once drifted for weeks ("419 priced of
    479 offers" where the command said 476 of 518) while only their headers were checked."""
    if example.args[0] in OFFLINE_SKIPS and "--replay" not in example.args:
        pytest.skip(OFFLINE_SKIPS[example.args[0]])
    done = run_example(example, replay_home, tmp_path / "feeds")
    assert done.returncode == 0, f"gpucost {' '.join(example.args)}: {done.stderr[-2000:]}"
    printed = done.stderr.splitlines() + done.stdout.splitlines()
    assert comparable(example.output) == comparable(printed), (
        f"README.md shows another output under `gpucost {example.id}`; it prints now:\n" + "\n".join(printed)
    )
    assert header_lines(example.output), f"the README shows no table under `gpucost {example.id}`"


# --- the README's accuracy figures, scored now -----------------------------------------------------

# The README's paragraphs wrap anywhere; compare with whitespace collapsed.
README_FLAT = " ".join(README.split())


def _pct(share: float) -> str:
    """A share as the README writes it: '85 %'."""
    return f"{share:.0%}".replace("%", " %")


def test_the_readme_states_the_repos_own_throughput_set_as_the_benchmark_scores_it():
    """The accuracy paragraph once kept a set's figures after the set grew from 21 rows to 27 (71 %
    → 70 % within ±35 %, median 7.4 → 7.7 %): the README's numbers are the benchmark's, today."""
    from benchmarks.throughput_accuracy import EXTRA_CSV, evaluate, summary

    results = evaluate(EXTRA_CSV)
    s = summary([r for r in results if r.error_pct is not None])
    assert f"{s['cases']:.0f} scored of {len(results)}" in README_FLAT
    stated = f"is {_pct(s['within_share'])} within ±35 %, median {s['median_abs_error_pct']:.1f} %"
    assert stated in README_FLAT, f"README.md should say the repo's own throughput set {stated}"


def test_the_readme_states_the_llm_foundry_set_as_the_benchmark_scores_it():
    from benchmarks.throughput_accuracy import FOUNDRY_CSV, evaluate, summary

    results = evaluate(FOUNDRY_CSV)
    s = summary([r for r in results if r.error_pct is not None])
    assert f"{s['cases']:.0f} scored of {len(results)}" in README_FLAT
    stated = f"is {_pct(s['within_share'])} within ±35 %, median {s['median_abs_error_pct']:.1f} % ("
    assert stated in README_FLAT, f"README.md should say llm-foundry's set {stated}"


def test_the_readme_states_qwens_profile_as_the_benchmark_scores_it():
    from benchmarks.throughput_accuracy import QWEN_CSV, evaluate, summary

    results = evaluate(QWEN_CSV)
    scored = [r for r in results if r.error_pct is not None]
    s = summary(scored)
    assert f"{s['cases']:.0f} scored of {len(results)}" in README_FLAT
    stated = f"is {_pct(s['within_share'])} within ±35 %, median {s['median_abs_error_pct']:.1f} % ("
    assert stated in README_FLAT, f"README.md should say Qwen's profile {stated}"
    lora = summary([r for r in scored if r.case.method == "lora"])
    assert f"LoRA {_pct(lora['within_share'])}, {lora['median_abs_error_pct']:.1f} %" in README_FLAT
    misses = [r for r in scored if abs(r.error_pct or 0.0) > 35]
    assert f"Its {len(misses)} misses" in README_FLAT.replace("ten misses", "10 misses")
    long_steps = [abs(r.error_pct or 0.0) for r in scored if r.case.job and r.case.job.seq_len >= 2048]
    assert max(long_steps) < 19, "the README says every row of 2,048 tokens or more is within ±19 %"


def test_the_readme_states_the_shared_throughput_calibration_as_the_benchmark_scores_it():
    from benchmarks.throughput_accuracy import DEFAULT_CSV, evaluate, summary

    if not DEFAULT_CSV.exists():
        pytest.skip(f"the shared calibration data is absent ({DEFAULT_CSV}); CI has it")
    results = evaluate(DEFAULT_CSV)
    scored = [r for r in results if r.error_pct is not None]
    s = summary(scored)
    stated = (
        f"{len(scored)} scored cases ({len(results) - len(scored)} excluded by the data's own `score=no`), "
        f"{_pct(s['within_share'])} within ±35 %, median absolute error {s['median_abs_error_pct']:.1f} %, "
        f"median bias {s['median_bias_pct']:+.1f} %"
    )
    assert stated in README_FLAT, f"README.md should say: {stated}"


def test_the_readme_states_the_memory_sets_as_the_benchmark_scores_them():
    from benchmarks.memory_accuracy import DEFAULT_CSV, EXTRA_CSV, QWEN_CSV, evaluate, summary

    extra = summary(evaluate(EXTRA_CSV))
    stated = f"{_pct(extra['within_20_share'])} within ±20 %, median {extra['median_abs_error_pct']:.1f} %"
    assert stated in README_FLAT, f"README.md should say the repo's own memory set is {stated}"
    qwen = summary(evaluate(QWEN_CSV))
    # every row of it is expressible, and the README counts them
    assert qwen["expressible"] == qwen["points"]
    stated = f"Qwen's whole profile (`benchmarks/data/memory_qwen.csv`, {qwen['points']:.0f} rows"
    assert stated in README_FLAT, f"README.md should name the Qwen memory set: {stated}"
    share, median = _pct(qwen["within_20_share"]), qwen["median_abs_error_pct"]
    stated = f"{share} within ±20 %, median {median:.1f} % (without"
    assert stated in README_FLAT, f"README.md should say the Qwen memory set is {stated}"
    if not DEFAULT_CSV.exists():
        pytest.skip(f"the shared calibration data is absent ({DEFAULT_CSV}); CI has it")
    s = summary(evaluate(DEFAULT_CSV))
    stated = (
        f"{s['expressible']:.0f} of {s['points']:.0f} points expressible, {_pct(s['within_20_share'])} "
        f"within ±20 %, median absolute error {s['median_abs_error_pct']:.1f} %"
    )
    assert stated in README_FLAT, f"README.md should say: {stated}"
