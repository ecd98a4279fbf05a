"""flows/ keeps options, Prefect and printing: no SQL text, no model arithmetic (issue 20).

SQL lives in .sql files under warehouse/ and answers/; the model is reached through answers/.
`gpucost sql` runs the user's own statements, the one SQL call flows/ makes (`statement.query`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

FLOWS = Path(__file__).resolve().parents[1] / "flows"
SQL = re.compile(
    r"\b(select\b.+\bfrom|insert\s+into|update\s+\w+(\.\w+)?\s+set|delete\s+from|create\s+(or\s+replace\s+)?"
    r"(table|view|schema))\b",
    re.IGNORECASE | re.DOTALL,
)
# what computes the model's numbers; flows/ asks answers/ instead
MODEL_ARITHMETIC = {
    "estimate_time",
    "memory_per_gpu",
    "billed_hours",
    "expected_spot_hours",
    "trainable_params",
    "flops_per_token",
    "place",
    "place_at",
    "plan_job",
    "cost_frame",
    "hardware_of",
    "intra_node_gbytes_per_s",
    "MemoryTable",
    "USABLE_VRAM_FRACTION",
}


def _modules() -> list[Path]:
    return sorted(FLOWS.glob("*.py"))


def test_flows_holds_no_sql() -> None:
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # a statement starts with its verb; help text and docstrings that mention one do not
            text = (
                node.value.strip() if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
            )
            if SQL.match(text) or text.lower().startswith("with\n"):
                found.append(f"{path.name}:{node.lineno}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"sql", "execute"}
                and not (node.args and ast.unparse(node.args[0]) == "statement.query")
            ):
                found.append(f"{path.name}:{node.lineno} .{node.func.attr}(…)")
    assert not found, f"SQL in flows/ (move it to warehouse/pipeline.py or answers/): {found}"


def test_flows_calls_no_model_arithmetic() -> None:
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = {alias.name for alias in node.names}
                if (node.module or "").startswith(
                    ("finetune", "warehouse.finetune_marts")
                ) and names & MODEL_ARITHMETIC:
                    found.append(f"{path.name}:{node.lineno} imports {sorted(names & MODEL_ARITHMETIC)}")
    assert not found, f"model arithmetic in flows/ (ask answers/ instead): {found}"


def test_the_checks_catch_what_they_look_for() -> None:
    """The patterns are not vacuous: the code this issue moved out would fail them (checked by
    hand against flows/ at 5f6b4e2: 15 SQL sites and 2 model imports)."""
    assert SQL.match("select run_id from ops.runs where status = 'running'")
    assert SQL.match("update ops.runs set marts_built_at = ? where run_id = ?")
    assert not SQL.match("Only spot offers.")
    tree = ast.parse("from finetune import billed_hours, estimate_time\n")
    node = tree.body[0]
    assert isinstance(node, ast.ImportFrom)
    assert {a.name for a in node.names} & MODEL_ARITHMETIC
