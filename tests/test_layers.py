"""The layout is enforced: pyproject.toml's import contracts hold, and they catch a violation.

`.ci/run` runs `lint-imports` before the tests; these run the same contracts so that `uv run pytest`
alone fails on a layer broken, a forbidden import or an import circle. The second half builds tiny
packages with the project's package names in a temp dir and checks each contract breaks on them.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

PYPROJECT = REPO / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(cwd: Path, config: Path) -> subprocess.CompletedProcess[str]:
    # --no-cache: no cache folder left in the checkout or the temp dir
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(config)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _settings() -> dict:
    return tomllib.loads(PYPROJECT.read_text())


def test_the_import_contracts_hold():
    done = _lint(REPO, PYPROJECT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_every_package_is_under_the_contracts_and_the_type_checker():
    """A package added to the wheel (answers/, say) must be added to the contracts and to mypy too."""
    settings = _settings()
    shipped = set(settings["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"])
    linter = settings["tool"]["importlinter"]
    contracts = {c["id"]: c for c in linter["contracts"]}
    layered = {name.strip("()") for layer in contracts["layers"]["layers"] for name in layer.split("|")}
    layered = {name.strip().strip("()") for name in layered}
    hint = "add it to [tool.importlinter] root_packages, the no-circles ancestors and [tool.mypy] packages"
    assert set(linter["root_packages"]) == shipped, hint
    assert set(contracts["no-circles"]["ancestors"]) == shipped, hint
    assert set(settings["tool"]["mypy"]["packages"]) == shipped, hint
    # every shipped package has its layer; `answers` may still be missing (an optional layer)
    assert shipped <= layered and layered - shipped <= {"answers"}, contracts["layers"]["layers"]


# --- each contract breaks on a violation -----------------------------------------------------------


def _contracts_only(tmp_path: Path) -> Path:
    """pyproject.toml with only the [tool.importlinter] tables, as a config file in tmp_path."""
    kept, keeping = [], False
    for line in PYPROJECT.read_text().splitlines():
        if line.startswith("["):
            keeping = line.lstrip("[").startswith("tool.importlinter")
        if keeping:
            kept.append(line)
    config = tmp_path / "contracts.toml"
    config.write_text("\n".join(kept) + "\n")
    return config


def _project(tmp_path: Path, modules: dict[str, str]) -> Path:
    """Empty packages named as the project's, plus `modules` ({"warehouse/x.py": source})."""
    root = tmp_path / "src"
    for package in _settings()["tool"]["importlinter"]["root_packages"]:
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text('"""A stand-in package."""\n')
    for path, source in modules.items():
        (root / path).write_text(source)
    return root


@pytest.mark.parametrize(
    ("modules", "broken"),
    [
        ({"connectors/x.py": "import warehouse\n"}, "layers"),
        ({"warehouse/x.py": "import flows\n"}, "layers"),
        ({"finetune/x.py": "import connectors\n"}, "layers"),  # siblings stay independent
        ({"finetune/x.py": "import duckdb\n"}, "finetune-pure"),
        ({"finetune/x.py": "import httpx\n"}, "finetune-pure"),
        ({"connectors/x.py": "import duckdb\n"}, "connectors-fetch-only"),
        ({"connectors/x.py": "from prefect import flow\n"}, "connectors-fetch-only"),
        ({"warehouse/x.py": "import prefect\n"}, "warehouse-no-prefect"),
        (
            {
                "warehouse/dictionary.py": "from warehouse import export\n",
                "warehouse/export.py": "from warehouse import dictionary\n",
            },
            "no-circles",
        ),
    ],
)
def test_a_violation_breaks_its_contract(tmp_path: Path, modules: dict[str, str], broken: str):
    root = _project(tmp_path, modules)
    done = _lint(root, _contracts_only(tmp_path))
    names = {c["id"]: c["name"] for c in _settings()["tool"]["importlinter"]["contracts"]}
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{names[broken]} BROKEN" in done.stdout, done.stdout


def test_the_stand_in_project_keeps_every_contract(tmp_path: Path):
    """The stand-ins above break only what each case adds: the bare packages keep all contracts."""
    done = _lint(_project(tmp_path, {}), _contracts_only(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_ci_checks_the_layout_and_the_types_then_runs_the_readme_test_command():
    steps = [
        line.strip()
        for line in (REPO / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert steps[-1] == "uv run --frozen pytest"  # the README's `uv run pytest`, on the locked versions
    lint, types = steps.index("uv run --frozen lint-imports"), steps.index("uv run --frozen mypy")
    assert lint < types < len(steps) - 1
