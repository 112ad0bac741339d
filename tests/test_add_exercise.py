"""Adding an exercise touches the notebook, one checks module and its catalogue, nothing else.

A copy of the package, in a temporary folder laid out like a checkout, gets a toy exercise the
way a course author adds one: a solution notebook ``solutions/10_toys/10_toys.ipynb`` with the
student's cell and the graded cell, one module ``transformer_lab/checks/nb10_toys/double.py``
holding the check and its ``register(Exercise("toy_double", ...))``, and a catalogue
``tests/catalogues/nb10.py`` in the holdout's format. Nothing else is edited. A fresh Python
process importing that copy then finds the toy everywhere the course's exercises are used: the
registry, ``checks.check_toy_double`` (sealed), ``checks.diagnose``, exercises.json and the docs'
tables (``python -m transformer_lab.checks``), the grader's judge on the graded cell, and the
catalogue's report and floor test. The toy lives only in that process and folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHECK_MODULE = '''"""Check of notebook 10's toy exercise: ``toy_double(x) -> 2 x``."""

from __future__ import annotations

import torch

from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.registry import Cell, Exercise, register

WRONG = {  # what the student returned -> what the message says
    "add": (lambda x: x + 2, "you add 2: double multiplies by 2"),
    "square": (lambda x: x * x, "you square x: double multiplies it by 2"),
    "same": (lambda x: x.clone(), "you return x unchanged: multiply it by 2"),
    "half": (lambda x: x / 2, "you halve x: multiply it by 2"),
    "four": (lambda x: 4 * x, "you multiply by 4: by 2 is enough"),
    "negated": (lambda x: -2 * x, "your sign is flipped: 2 * x, not -2 * x"),
    "plus_one": (lambda x: 2 * x + 1, "you add 1 after doubling"),
    "summed": (lambda x: x + x.sum(), "you add the sum of x: add x to itself"),
}


def check_toy_double(toy_double, hidden: bool = False) -> None:
    """Check ``toy_double(x) -> 2 x`` on seeded tensors."""
    __tracebackhide__ = True
    run = Runner("check_toy_double", toy_double, (), hidden, reference=lambda x: 2 * x)
    g = generator(9010 if hidden else 10)
    for shape in [(5,), (2, 3)]:
        x = torch.randn(*shape, generator=g)
        want = 2 * x
        case = Case(f"x {shape}", (x,), {}, describe_args(x=x))
        out = run.expect_tensor(run.call(case), case, x.shape, x.dtype, expected=want)
        if not run.close(out, want, 1e-6, 1e-6):
            mistakes = [Mistake(say, lambda f=f, x=x: f(x)) for f, say in WRONG.values()]
            run.explain(out, want, case, mistakes, 1e-6, 1e-6)
    run.passed()


register(
    Exercise(
        "toy_double",
        "10_toys",
        "toy_double(x) -> 2 x, x's shape",
        cells=(Cell("toy_double_tests", "toy_double", 1),),
        check=check_toy_double,
        reference=lambda x: 2 * x,
        against="2 * x",
    )
)
'''

CATALOGUE = '''"""Notebook 10's catalogue (the toy's): eight wrong answers and two right ones."""

from tests.holdout._harness import collector

MISTAKES, CORRECT = [], []
wrong, right = collector(MISTAKES, "10"), collector(CORRECT, "10")


@wrong("toy_double", "add 2")
def adds_two(x):
    return x + 2


@wrong("toy_double", "square")
def squares(x):
    return x**2


@wrong("toy_double", "unchanged")
def unchanged(x):
    return x


@wrong("toy_double", "halve")
def halves(x):
    return x * 0.5


@wrong("toy_double", "by 4")
def quadruples(x):
    return x + x + x + x


@wrong("toy_double", "sign")
def negated(x):
    return -(x + x)


@wrong("toy_double", "add 1")
def plus_one(x):
    return x * 2 + 1


@wrong("toy_double", "sum of x")
def plus_sum(x):
    return x.sum() + x


@right("toy_double")
def doubled(x):
    return x + x


@right("toy_double")
def scaled(x):
    return x.mul(2.0)


NAMED_AT_LEAST = 1.0
'''


def _cell(kind: str, source: str, nbgrader: dict | None = None, tags=()) -> dict:
    cell = {"cell_type": kind, "metadata": {"tags": list(tags)}, "source": source}
    if nbgrader:
        cell["metadata"]["nbgrader"] = {"schema_version": 3, **nbgrader}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


NOTEBOOK = {
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {},
    "cells": [
        _cell("markdown", "# 10 Toys\n\nWrite `toy_double(x)`: every entry of x, doubled."),
        _cell("code", "import torch\n\nfrom transformer_lab import checks"),
        _cell(
            "code",
            "def toy_double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
            {"grade": False, "grade_id": "toy_double_impl", "locked": False, "solution": True},
            ("solution", "id:toy_double_impl"),
        ),
        _cell(
            "code",
            "assert toy_double(torch.ones(2)).tolist() == [2.0, 2.0]\n"
            "checks.check_toy_double(toy_double)\n### BEGIN HIDDEN TESTS\n"
            "checks.check_toy_double(toy_double, hidden=True)\n### END HIDDEN TESTS",
            {"grade": True, "grade_id": "toy_double_tests", "locked": True, "points": 1},
            ("tests:1", "id:toy_double_tests"),
        ),
    ],
}

# Run in a fresh process on the copy: every place that lists exercises finds the toy.
FOLLOW_THE_TOY = """
import contextlib, io, json, math, sys
from pathlib import Path

import torch

import transformer_lab
assert Path(transformer_lab.__file__).resolve().parent == Path.cwd() / "transformer_lab"
from transformer_lab import checks
from transformer_lab.checks import registry
from transformer_lab.checks.__main__ import write_all
from transformer_lab.checks.engine import serve
from transformer_lab.grading.decide.judge import graded_calls, judge_cell
from transformer_lab.grading.decide.remote import RemoteKernel

out = {}
exercise = registry.REGISTRY["toy_double"]
out["module"] = exercise.check.__module__
out["in_all"] = "check_toy_double" in checks.__all__
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    checks.check_toy_double(lambda x: x + x)
out["instant"] = printed.getvalue().strip()
try:
    checks.check_toy_double = None
except AttributeError as exc:
    out["sealed"] = str(exc)
verdict = checks.diagnose("toy_double", lambda x: x + 2, case=(torch.ones(3),))
out["diagnose"] = [verdict.message, verdict.named, verdict.reference.tolist()]
out["rewrote"] = sorted(str(p.relative_to(Path.cwd())) for p in write_all())
rows = json.loads(registry.JSON_PATH.read_text())["exercises"]
out["json"] = [r for r in rows if r["name"] == "toy_double"]
out["api_row"] = [l for l in Path("docs/api.md").read_text().splitlines() if "toy_double" in l]
out["guide_row"] = [
    l for l in Path("docs/instructor_guide.md").read_text().splitlines() if "10_toys" in l
]

# The grader: the graded cell of the solution notebook, judged on functions in a 'kernel'.
cells = json.loads(Path("solutions/10_toys/10_toys.ipynb").read_text())["cells"]
graded = next(c for c in cells if c["metadata"].get("nbgrader", {}).get("grade"))
solution = next(c for c in cells if "solution" in c["metadata"]["tags"])
out["calls"] = [(c.name, c.expression, c.hidden) for c in graded_calls(graded["source"])]
namespace = {"torch": torch}
serve.NAMESPACES.append(namespace)
kernel = RemoteKernel(lambda expression, timeout: repr(eval(expression, {})))
exec(solution["source"], namespace)
right = judge_cell(kernel, graded["source"], secret="s3cret")
namespace["toy_double"] = lambda x: x * x
wrong = judge_cell(kernel, graded["source"], secret="s3cret")
out["judge"] = [right.passed, right.lines, wrong.passed, wrong.failure]

# The catalogue: the one report and the one floor test pick it up.
from tests.holdout import report
from tests.holdout._harness import classify
from tests.holdout.test_holdout import test_floor

found = dict((m.__name__, (k, m)) for k, m in report.modules(("catalogue",)))
nb10 = found["tests.catalogues.nb10"]
test_floor(nb10)
out["catalogue"] = [classify(m)[0] for m in nb10[1].MISTAKES]
with contextlib.redirect_stdout(io.StringIO()):
    for c in nb10[1].CORRECT:
        checks.check_toy_double(c.fn, hidden=True)
print(json.dumps(out))
"""


def _checkout_with_a_toy(tmp_path: Path) -> Path:
    """A checkout-like folder: the package, the tests' catalogue machinery, docs with the
    generated tables' markers, and the toy's three files."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pt")
    shutil.copytree(ROOT / "transformer_lab", tmp_path / "transformer_lab", ignore=ignore)
    for part in ("holdout", "holdout_text", "catalogues"):
        shutil.copytree(ROOT / "tests" / part, tmp_path / "tests" / part, ignore=ignore)
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions", ignore=ignore)
    (tmp_path / "docs").mkdir()
    for doc in ("api.md", "instructor_guide.md"):
        shutil.copy(ROOT / "docs" / doc, tmp_path / "docs" / doc)
    # The three files a course author writes.
    (tmp_path / "solutions" / "10_toys").mkdir(parents=True)
    (tmp_path / "solutions" / "10_toys" / "10_toys.ipynb").write_text(json.dumps(NOTEBOOK))
    package = tmp_path / "transformer_lab" / "checks" / "nb10_toys"
    package.mkdir()
    (package / "__init__.py").write_text('"""Checks of notebook 10: the toy."""\n')
    (package / "double.py").write_text(CHECK_MODULE)
    (tmp_path / "tests" / "catalogues" / "nb10.py").write_text(CATALOGUE)
    return tmp_path


def test_a_toy_exercise_reaches_everything_from_its_three_files(tmp_path):
    copy = _checkout_with_a_toy(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", FOLLOW_THE_TOY], cwd=copy, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])

    assert out["module"] == "transformer_lab.checks.nb10_toys.double"
    assert out["in_all"] and out["instant"].startswith("✓ check_toy_double passed")
    assert "read-only" in out["sealed"]
    message, named, reference = out["diagnose"]
    assert named and "you add 2" in message and reference == [2.0, 2.0, 2.0]
    # python -m transformer_lab.checks: the plain data and both docs' tables
    assert out["rewrote"] == [
        "docs/api.md",
        "docs/instructor_guide.md",
        "transformer_lab/checks/exercises.json",
    ]
    (row,) = out["json"]
    assert row["notebook"] == "10_toys" and row["module"] == out["module"]
    assert row["cells"] == [{"grade_id": "toy_double_tests", "function": "toy_double", "points": 1}]
    (api_row,) = out["api_row"]
    assert "`check_toy_double` (checks/nb10_toys/double.py)" in api_row
    assert out["guide_row"] == ["| `10_toys` | `toy_double` (1) | 1 |"]
    # the grader judges the graded cell with the toy's check, visible and hidden
    assert out["calls"] == [
        ["check_toy_double", "toy_double", False],
        ["check_toy_double", "toy_double", True],
    ]
    right_passed, right_lines, wrong_passed, wrong_failure = out["judge"]
    assert right_passed and len(right_lines) == 2 and "hidden cases" in right_lines[1]
    assert not wrong_passed and "you square x" in wrong_failure
    # the catalogue: every mistake named, the floor test held
    assert out["catalogue"] == ["named"] * 8
    # and the checkout the test runs in is untouched
    assert "toy_double" not in (ROOT / "transformer_lab/checks/exercises.json").read_text()
