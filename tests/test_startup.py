"""Start-up: the read commands import only what they use (issue 22).

Guarded by what a fresh process imports, not by timing (the machine is shared; timings are
benchmarks/startup.py's). Each case runs the `gpucost` entry point in a subprocess on the replay
warehouse and lists the top-level packages it loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.replay_warehouse import replay_only_home

# Prefect and the HTTP stack are for refresh, check, deploy and server; `connectors` pulls in
# every connector and httpx with them.
REFRESH_ONLY = {"prefect", "httpx", "httpcore", "anyio", "connectors", "bs4", "h2"}
# `--help` reads no warehouse and no prices: not even DuckDB, polars or pydantic.
DATA = {"duckdb", "polars", "pydantic", "pydantic_settings"}
# No read command validates with pydantic: Settings is a plain dataclass (warehouse/settings.py)
# and command-line values skip typer's pydantic adapters where they would change nothing
# (flows/cli_params.py); together about a fifth of a second of every command's start.
VALIDATION = {"pydantic", "pydantic_core", "pydantic_settings"}

# Run as the console script does (pyproject [project.scripts]), then list what was imported.
PROBE = """
import atexit, json, sys
out, sys.argv = sys.argv[1], ["gpucost", *sys.argv[2:]]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted({m.split(".")[0] for m in sys.modules}))))
from flows.cli import app
app()
"""


@pytest.fixture(scope="module")
def replay_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replay_only_home(tmp_path_factory.getbasetemp())


def loaded(args: list[str], home: Path, tmp_path: Path) -> set[str]:
    """Top-level packages a `gpucost ARGS` process imported; the command must succeed."""
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    env.update(GPUCOST_HOME=str(home), HF_HUB_OFFLINE="1", COLUMNS="200")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"gpucost {' '.join(args)}: {done.stderr[-2000:]}"
    return set(json.loads(out.read_text()))


def test_importing_the_cli_loads_no_prefect_http_or_data_library():
    code = (
        "import flows.cli, sys; print(sorted({m.split('.')[0] for m in sys.modules} & "
        f"set({sorted(REFRESH_ONLY | DATA | VALIDATION)!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("args", [["--help"], ["prices", "--help"], ["estimate", "--help"]])
def test_help_loads_no_prefect_or_http_stack(args: list[str], replay_home: Path, tmp_path: Path):
    modules = loaded(args, replay_home, tmp_path)
    assert "typer" in modules and "flows" in modules  # the probe saw the app run
    assert not modules & (REFRESH_ONLY | VALIDATION)
    if args == ["--help"]:
        assert not modules & DATA


@pytest.mark.parametrize(
    "args",
    [
        ["prices", "--gpu", "H100"],
        ["sql", "select count(*) from marts.gpu_offers"],
        ["estimate", "--model", "Llama-3.1-8B", "--method", "lora", "--tokens", "50M", "--top", "2"],
        ["memory", "--model", "Llama-3.1-8B", "--method", "qlora"],
        ["history", "--gpu", "H100"],
        ["status"],
        ["models"],
        ["providers"],
    ],
    ids=lambda a: a[0],
)
def test_read_commands_load_no_prefect_or_http_stack(args: list[str], replay_home: Path, tmp_path: Path):
    modules = loaded(args, replay_home, tmp_path)
    assert "duckdb" in modules or args[0] in {"memory", "models"}  # it read something
    assert not modules & REFRESH_ONLY, f"gpucost {args[0]} imported {sorted(modules & REFRESH_ONLY)}"
    assert not modules & VALIDATION, f"gpucost {args[0]} imported {sorted(modules & VALIDATION)}"


@pytest.mark.parametrize(
    "args",
    [
        ["prices"],
        ["prices", "--gpu", "H100", "--region", "us-*", "--min-vram", "40", "--max-price", "9.5"],
        ["prices", "--json"],
        ["sql", "select 1"],
    ],
    ids=" ".join,
)
def test_prices_and_sql_import_no_dataframe_library(args: list[str], replay_home: Path, tmp_path: Path):
    """`prices` answers from DuckDB rows (answers/rows.py) and `sql` prints DuckDB's rows: polars,
    the slowest import on their path, is for history and estimate, and for --csv (its CSV writer)."""
    modules = loaded(args, replay_home, tmp_path)
    assert "duckdb" in modules and not modules & ({"polars", "pyarrow"} | VALIDATION)


def test_an_offline_hub_model_id_is_refused_before_any_http_client(replay_home: Path, tmp_path: Path):
    """A model id outside the seeds and the HF cache is the one read path that needs the HTTP
    client (flows/hf_configs.py imports it there); offline, its one line comes without it."""
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCOST_", "HF_"))}
    env.update(GPUCOST_HOME=str(replay_home), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), "memory", "--model", "acme/not-seeded-7b"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "HF_HUB_OFFLINE" in done.stderr
    assert "httpx" not in json.loads(out.read_text())  # offline: refused before any client


def test_the_start_up_benchmark_keeps_its_bytecode_modes_apart(tmp_path: Path):
    """benchmarks/startup.py: `compiled` reads a prefix its warm-up filled; `source` keeps no
    bytecode at all, so every run compiles from source; a failing command stops it with its line."""
    from benchmarks import startup

    home = tmp_path / "home"
    home.mkdir()
    compiled = startup.environment(home, tmp_path / "pyc-compiled", compiled=True, scratch=tmp_path)
    source = startup.environment(home, tmp_path / "pyc-source", compiled=False, scratch=tmp_path)
    assert startup.run_once(REPO, ("--help",), compiled) > 0
    assert list((tmp_path / "pyc-compiled").rglob("cli.*.pyc"))  # flows/cli.py, compiled there
    assert startup.run_once(REPO, ("--help",), source) > 0
    assert not list(tmp_path.glob("pyc-source/**/*.pyc"))
    with pytest.raises(SystemExit, match="exited 2"):
        startup.run_once(REPO, ("no-such-command",), compiled)
    rows: list[dict[str, object]] = [
        {"command": "gpucost --help", "mode": "source", "before": 1.0, "after": 0.25}
    ]
    assert startup.table(rows, ["before", "after"]).splitlines()[-1] == (
        "| `gpucost --help` | source | 1.00 | 0.25 | 4.0× |"
    )
