"""Documentation that can drift from the code is checked against it."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO, SHARED
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
    from warehouse.db import Settings

    example = (REPO / ".env.example").read_text()
    for field in Settings.model_fields:
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
