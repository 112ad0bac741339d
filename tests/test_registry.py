"""The registry of exercises is the one list: the solution notebooks, the ``checks`` namespace,
``checks.EXERCISES``, sealing, exercises.json and the docs' tables all agree with it."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_lab import checks
from transformer_lab.checks import registry
from transformer_lab.checks.engine import guards as _guards
from transformer_lab.checks.registry import REGISTRY, Cell, Exercise

PACKAGE = Path(checks.__file__).parent  # transformer_lab/checks

ROOT = Path(__file__).resolve().parents[1]


def _graded_calls(notebook: Path) -> set[tuple[str, str, str, str, int]]:
    """(notebook, grade_id, exercise, function, points) for every ``checks.check_X(fn, ...)`` call
    in a graded cell of ``notebook``."""
    found = set()
    for cell in json.loads(notebook.read_text())["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if not meta.get("grade") or cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
        for node in ast.walk(ast.parse("\n".join(lines))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "checks"
                and node.func.attr.startswith("check_")
            ):
                assert node.args and isinstance(node.args[0], ast.Name), (
                    f"{notebook.name}: {meta['grade_id']} calls {node.func.attr} without the "
                    f"student's function as its first argument"
                )
                exercise = node.func.attr.removeprefix("check_")
                found.add((notebook.parent.name, meta["grade_id"], exercise, node.args[0].id,
                           meta["points"]))  # fmt: skip
    return found


def test_every_graded_check_call_is_registered_and_every_exercise_is_graded():
    in_notebooks = set()
    for notebook in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        in_notebooks |= _graded_calls(notebook)
    in_registry = {
        (e.notebook, c.grade_id, e.name, c.function, c.points)
        for e in REGISTRY.values()
        for c in e.cells
    }
    assert in_notebooks - in_registry == set(), "graded in a notebook but not (so) in the registry"
    assert in_registry - in_notebooks == set(), "in the registry but not (so) in a notebook"


def test_notebook_points_add_up_to_ten_each():
    totals: dict[str, int] = {}
    for e in REGISTRY.values():
        totals[e.notebook] = totals.get(e.notebook, 0) + e.points
    assert totals and all(t == 10 for t in totals.values()), totals


def test_checks_namespace_and_exercises_are_derived_from_the_registry():
    assert list(checks.EXERCISES) == list(REGISTRY)
    for name, exercise in REGISTRY.items():
        assert checks.EXERCISES[name] == (exercise.check, exercise.reference)
        public = getattr(checks, f"check_{name}")
        assert public.__wrapped__ is exercise.check  # the grading wrapper around the check
        assert f"check_{name}" in checks.__all__
    assert {n for n in checks.__all__ if n.startswith("check_")} == {f"check_{n}" for n in REGISTRY}


def test_every_checks_module_is_imported_and_sealed():
    names = {
        info.name
        for info in pkgutil.walk_packages(checks.__path__, prefix="transformer_lab.checks.")
        if not info.name.endswith(".__main__")
    }
    files = {  # every .py file of the tree, subpackages included
        ".".join(
            ("transformer_lab.checks", *p.relative_to(PACKAGE).with_suffix("").parts)
        ).removesuffix(".__init__")
        for p in PACKAGE.rglob("*.py")
        if p.name != "__main__.py"
    }
    assert names == files - {"transformer_lab.checks"}
    assert "transformer_lab.checks.nb07_gpt.lm_loss" in names
    assert names - set(_guards._SEALED) == set()
    assert "transformer_lab.checks" in _guards._SEALED
    with pytest.raises(AttributeError, match="read-only"):
        checks.registry.register = None


def test_exercises_json_is_up_to_date():
    assert registry.JSON_PATH.read_text() == registry.dumps(), (
        "transformer_lab/checks/exercises.json is out of date: run python -m transformer_lab.checks"
    )


@pytest.mark.parametrize("doc", sorted(registry.GENERATED))
def test_docs_tables_are_up_to_date(doc):
    text = (ROOT / "docs" / doc).read_text()
    assert registry.splice(text, registry.GENERATED[doc](), doc) == text, (
        f"docs/{doc}'s exercise table is out of date: run python -m transformer_lab.checks"
    )


def test_the_grader_reads_the_exercises_without_torch():
    reader = (
        "import importlib.util, json, sys; from pathlib import Path\n"
        "spec = importlib.util.find_spec('transformer_lab')\n"
        "path = Path(spec.submodule_search_locations[0]) / 'checks' / 'exercises.json'\n"
        "rows = json.loads(path.read_text())['exercises']\n"
        "assert 'torch' not in sys.modules and 'transformer_lab' not in sys.modules\n"
        "print(json.dumps({r['name']: [r['notebook'], r['cells'], r['kind']] for r in rows}))\n"
    )
    out = subprocess.run([sys.executable, "-c", reader], capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)
    assert set(rows) == set(REGISTRY)
    assert rows["gpt_from_blocks"][2] == "class" and rows["mlm_corrupt"][2] == "random"
    assert rows["multi_head_attention"][1] == [
        {"grade_id": "mha_loop_tests", "function": "multi_head_attention_loop", "points": 2},
        {"grade_id": "mha_tests", "function": "multi_head_attention", "points": 3},
    ]


def test_an_exercise_is_declared_once_and_checked_by_its_own_check():
    exercise = REGISTRY["softmax"]
    with pytest.raises(ValueError, match="declared twice"):
        registry.register(Exercise(**{**exercise.__dict__, "signature": "softmax(x)"}))
    with pytest.raises(ValueError, match="check_softmax"):
        Exercise("softmax", "01", "softmax(x)", (Cell("t", "softmax", 1),), REGISTRY["mlp"].check)


def test_a_toy_exercise_needs_one_registration_to_reach_diagnose():
    """Adding an exercise: its check and one ``register(...)`` beside it; diagnose finds it."""
    import torch

    from transformer_lab.checks.engine.core import Runner

    def check_double(double, hidden=False):
        run = Runner("check_double", double, hidden=hidden)
        x = torch.arange(3.0)
        if not torch.equal(torch.as_tensor(double(x)), 2 * x):
            run.fail("double(x) should be 2 * x", None)
        run.passed()

    toy = Exercise("double", "99_toy", "double(x) -> 2 x", (Cell("double_tests", "double", 1),),
                   check_double, reference=lambda x: 2 * x)  # fmt: skip
    registry.register(toy)
    try:
        assert checks.diagnose("double", lambda x: 2 * x) is None
        verdict = checks.diagnose("double", lambda x: x + 2, case=(torch.ones(2),))
        assert verdict is not None and "2 * x" in verdict.message
        assert torch.equal(verdict.reference, torch.full((2,), 2.0))
        assert "double" in {row["name"] for row in registry.plain()["exercises"]}
    finally:
        del REGISTRY["double"], registry.EXERCISES["double"]


def test_each_exercise_is_checked_in_its_notebooks_package():
    """The tree reads like the course: notebook 07's checks are in ``checks/nb07_gpt/``."""
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    for exercise in REGISTRY.values():
        package = f"nb{exercise.notebook}"
        assert package in packages, f"{exercise.notebook} has no checks package {package}"
        assert exercise.check.__module__.startswith(f"transformer_lab.checks.{package}."), (
            f"check_{exercise.name} is in {exercise.check.__module__}, not in checks/{package}/"
        )
    notebooks = {e.notebook for e in REGISTRY.values()}
    assert packages == {"engine"} | {f"nb{n}" for n in notebooks}


def test_a_checks_module_over_300_lines_says_why():
    """Issue 25: no module over about 300 lines without a stated reason in its docstring."""
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > 300 and "300 lines" not in doc:
            long[str(path.relative_to(PACKAGE))] = lines
    assert not long, f"over 300 lines with no reason in the docstring: {long}"
