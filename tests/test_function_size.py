"""Issue 35: no function in grading/ over about 60 lines without a stated reason.

A function that must stay longer says why in its docstring, with the words "stays whole".
"""

from __future__ import annotations

import ast
from pathlib import Path

GRADING = Path(__file__).resolve().parents[1] / "transformer_lab" / "grading"
LIMIT = 60


def long_functions() -> list[str]:
    found = []
    for path in sorted(GRADING.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lines = node.end_lineno - node.lineno + 1
            if lines > LIMIT and "stays whole" not in (ast.get_docstring(node) or ""):
                found.append(
                    f"{path.relative_to(GRADING)}:{node.lineno} {node.name} ({lines} lines)"
                )
    return found


def test_no_grading_function_is_over_60_lines_without_a_reason():
    assert not long_functions(), (
        "split these into steps, or say in the docstring why each 'stays whole': "
        + "; ".join(long_functions())
    )
