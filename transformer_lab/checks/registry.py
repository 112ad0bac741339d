"""The course's exercises, each declared once, at the bottom of the module holding its check
(``checks/nbNN_<notebook>/<module>.py``, in the subpackage of the exercise's notebook).

    register(Exercise("softmax", "01_self_attention", "softmax(x, dim=-1)",
                      cells=(Cell("softmax_tests", "softmax", 2),),
                      check=check_softmax, reference=_ref.softmax))

Everything else reads :data:`REGISTRY`: the ``checks`` namespace (``checks.check_softmax``),
``checks.EXERCISES`` and ``checks.diagnose``, the exercise tables of docs/api.md and
docs/instructor_guide.md, the catalogue harness in tests/, and ``exercises.json`` beside this
file: the same facts as plain data for the grader, which must not import torch to read them.
``python -m transformer_lab.checks`` rewrites that file and the two tables;
tests/test_registry.py fails when any of them, or a solution notebook, disagrees.

This module imports nothing of the package, so every checks module can import it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Cell", "Exercise", "REGISTRY", "EXERCISES", "KINDS", "register", "add_honest", "plain"]

KINDS = {
    "function": "a function whose outputs are fixed by its inputs",
    "random": "a function that draws random numbers: its outputs are compared by statistics",
    "class": "an nn.Module subclass the student defines (the check builds and runs instances)",
}


@dataclass(frozen=True)
class Cell:
    """One graded test cell of the solution notebook."""

    grade_id: str  # nbgrader's grade_id, also the cell's ``id:`` tag
    function: str  # the name the student defines and the cell passes to the check
    points: int


@dataclass(frozen=True)
class Exercise:
    """One exercise: where it is graded, what the student writes, and what checks it.

    Args:
        name: the key of ``checks.EXERCISES``; the check is ``check_<name>``.
        notebook: the solution notebook's folder, e.g. "01_self_attention".
        signature: what the student defines, with the shapes it takes and returns.
        cells: the graded test cells calling the check (usually one).
        check: ``check_<name>(student_fn, hidden=False)``.
        reference: a function with the student's signature giving the right answer, used by
            ``checks.diagnose`` to show the expected output of one call; None when the answer is
            not one call of a package function (a module, a bool, a random draw).
        against: what the check compares with, for the docs (defaults to ``reference``'s name).
        kind: one of :data:`KINDS`.
        honest: other correct ways to write it that must pass (filled by the honest-alternative
            catalogue in tests/honest/; the package declares none itself).
    """

    name: str
    notebook: str
    signature: str
    cells: tuple[Cell, ...]
    check: Callable[..., None]
    reference: Callable[..., Any] | None = None
    against: str = ""
    kind: str = "function"
    honest: tuple[Callable[..., Any], ...] = ()

    def __post_init__(self) -> None:
        if self.check.__name__ != f"check_{self.name}":
            raise ValueError(
                f"exercise {self.name!r} must be checked by check_{self.name}, "
                f"but received {self.check.__name__}."
            )
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}, but received {self.kind!r}.")
        if not self.cells:
            raise ValueError(f"exercise {self.name!r} needs at least one graded cell.")
        if not self.against and self.reference is not None:
            module = getattr(self.reference, "__module__", "") or ""
            name = getattr(self.reference, "__qualname__", "")
            if module.startswith("transformer_lab") and "<" not in name and "._" not in module:
                object.__setattr__(self, "against", f"{module}.{name}")

    @property
    def answers(self) -> tuple[str, ...]:
        """``module:qualname`` of the package functions that compute or contain the answer, as
        declared here: the reference, and the entries of :mod:`~transformer_lab.checks.answers`.
        The graded kernel's build leaves these out, with the package functions the check
        forbids (read from the checks' source by the grader: ``grading/scan/forbidden.py``)."""
        from transformer_lab.checks.answers import EXTRA

        own = []
        module = getattr(self.reference, "__module__", "") or ""
        name = getattr(self.reference, "__qualname__", "") or ""
        if module.startswith("transformer_lab") and "<" not in name:
            own.append(f"{module}:{name}")
        return tuple(dict.fromkeys([*own, *EXTRA.get(self.name, ())]))

    @property
    def points(self) -> int:
        return sum(cell.points for cell in self.cells)

    @property
    def number(self) -> str:
        """The notebook's two digits, e.g. "01"."""
        return self.notebook[:2]


# name -> Exercise, in registration order (the order the package imports its checks modules)
REGISTRY: dict[str, Exercise] = {}
# name -> (check, reference): the shape ``checks.EXERCISES`` has always had
EXERCISES: dict[str, tuple[Callable[..., None], Callable[..., Any] | None]] = {}


def register(exercise: Exercise) -> Exercise:
    """Declare ``exercise`` (once: a second exercise of the same name is an error)."""
    if exercise.name in REGISTRY and REGISTRY[exercise.name] is not exercise:
        raise ValueError(f"exercise {exercise.name!r} is declared twice.")
    REGISTRY[exercise.name] = exercise
    EXERCISES[exercise.name] = (exercise.check, exercise.reference)
    return exercise


def add_honest(name: str, *alternatives: Callable[..., Any]) -> Exercise:
    """Record correct alternatives for ``name`` (the honest-alternative catalogue calls this)."""
    import dataclasses

    exercise = dataclasses.replace(REGISTRY[name], honest=REGISTRY[name].honest + alternatives)
    REGISTRY[name] = exercise
    return exercise


def ordered() -> list[Exercise]:
    """The exercises in course order: by notebook, then in the order the notebook grades them."""
    order = {cell: i for i, cell in enumerate(_notebook_order())}
    return sorted(
        REGISTRY.values(),
        key=lambda e: (e.notebook, min(order.get(c.grade_id, 1 << 20) for c in e.cells)),
    )


def _notebook_order() -> list[str]:
    """grade_ids in the order the solution notebooks hold them (empty outside a checkout)."""
    ids: list[str] = []
    solutions = Path(__file__).resolve().parents[2] / "solutions"
    for path in sorted(solutions.glob("*/*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id:
                ids.append(grade_id)
    return ids


def plain() -> dict[str, Any]:
    """The registry as JSON data (what ``exercises.json`` holds), in course order."""
    rows = []
    for e in ordered():
        rows.append(
            {
                "name": e.name,
                "notebook": e.notebook,
                "check": e.check.__name__,
                "module": e.check.__module__,
                "signature": e.signature,
                "kind": e.kind,
                "points": e.points,
                "cells": [
                    {"grade_id": c.grade_id, "function": c.function, "points": c.points}
                    for c in e.cells
                ],
                "against": e.against,
                "answers": list(e.answers),
            }
        )
    return {
        "about": "transformer_lab's exercises: generated from transformer_lab.checks.registry "
        "by `python -m transformer_lab.checks`; do not edit.",
        "kinds": KINDS,
        "exercises": rows,
    }


JSON_PATH = Path(__file__).with_name("exercises.json")


def load_plain(path: Path | None = None) -> dict[str, Any]:
    """Read ``exercises.json``. A process that must not import torch (the grader) reads the file
    without importing the package::

        spec = importlib.util.find_spec("transformer_lab")  # finds, does not import
        path = Path(spec.submodule_search_locations[0]) / "checks" / "exercises.json"
        exercises = json.loads(path.read_text())["exercises"]
    """
    return json.loads((path or JSON_PATH).read_text())


def dumps() -> str:
    return json.dumps(plain(), indent=1, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------
# The docs' tables, generated between markers.
BEGIN, END = (
    "<!-- exercises: generated by python -m transformer_lab.checks -->",
    ("<!-- end of generated exercises -->"),
)


def api_table() -> str:
    """docs/api.md's table: every ``check_<name>`` with what the student defines."""
    lines = ["| check (file) | the student defines | graded cell (points) | checked against |"]
    lines.append("|---|---|---|---|")
    for e in ordered():
        cells = ", ".join(f"`{c.grade_id}` ({c.points})" for c in e.cells)
        against = f"`{e.against}`" if e.against and " " not in e.against else e.against
        signature = e.signature.replace("|", "\\|")
        where = e.check.__module__.removeprefix("transformer_lab.").replace(".", "/") + ".py"
        lines.append(f"| `{e.check.__name__}` ({where}) | `{signature}` | {cells} | {against} |")
    return "\n".join(lines)


def guide_table() -> str:
    """docs/instructor_guide.md's table: each notebook's exercises and points."""
    lines = ["| assignment | exercises (points) | total |", "|---|---|---|"]
    notebooks: dict[str, list[Exercise]] = {}
    for e in ordered():
        notebooks.setdefault(e.notebook, []).append(e)
    for notebook, exercises in notebooks.items():
        parts = []
        for e in exercises:
            for c in e.cells:
                note = {"random": ", random", "class": ", a class"}.get(e.kind, "")
                parts.append(f"`{c.function}` ({c.points}{note})")
        total = sum(e.points for e in exercises)
        lines.append(f"| `{notebook}` | {', '.join(parts)} | {total} |")
    return "\n".join(lines)


def splice(text: str, table: str, where: str) -> str:
    """``text`` with the generated block between the markers replaced by ``table``."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{where} has no generated-exercises markers ({BEGIN} ... {END}).")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


DOCS = Path(__file__).resolve().parents[2] / "docs"
GENERATED: dict[str, Callable[[], str]] = {"api.md": api_table, "instructor_guide.md": guide_table}
