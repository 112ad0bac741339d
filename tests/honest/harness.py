"""Grading the honest alternatives: the instant check in-process, then ``tlab grade``.

For a notebook, submission k (student ``honest_k``) is the released student notebook with every
answer cell filled by the solution's code, except the exercises that have an alternative number
k, which get that alternative instead. So each notebook gives as many submissions as its longest
list of alternatives, and every alternative is graded exactly once.

In-process (:func:`instant_results`) each alternative runs through its exercise's check (visible
cases, then hidden cases) and through the visible asserts of its graded cell, in a namespace
holding the notebook's imports and its other solutions.

Run as a script to grade notebooks and print expected vs got::

    python tests/honest/harness.py [01 07 ...] [--keep DIR]
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import functools
import io
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

if __package__ in (None, ""):  # run as a script: make ``honest`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "honest"

from shipped_course import copy_course  # noqa: E402  (tests/ is on the path)

from . import NOTEBOOKS, Alternative, alternatives  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
_CHECK_CALL = re.compile(r"checks\.(check_\w+)\((\w+)\s*[,)]")
_DEFINES = re.compile(r"^(?:def|class) (\w+)", re.M)


@dataclass(frozen=True)
class Exercise:
    grade_id: str  # the answer cell, "softmax_impl"
    tests_id: str  # its graded test cell, "softmax_tests"
    name: str  # the function or class the cell defines
    check: str  # "check_softmax"
    solution: str  # the solution's code, markers removed


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _strip_markers(source: str) -> str:
    return "\n".join(
        ln
        for ln in source.splitlines()
        if "### BEGIN SOLUTION" not in ln and "### END SOLUTION" not in ln
    )


@functools.cache
def _solution_notebook(notebook: str) -> dict:
    return json.loads((REPO / "solutions" / notebook / f"{notebook}.ipynb").read_text())


def exercises(notebook: str) -> list[Exercise]:
    """Every answer cell of ``notebook`` with its graded cell and check, in notebook order."""
    cells = _solution_notebook(notebook)["cells"]
    by_id = {_nbgrader(c).get("grade_id"): c for c in cells}
    found = []
    for cell in cells:
        meta = _nbgrader(cell)
        if cell["cell_type"] != "code" or not meta.get("solution"):
            continue
        gid = meta["grade_id"]
        tests_id = gid.removesuffix("_impl") + "_tests"
        source = "".join(cell["source"])
        name = _DEFINES.search(source).group(1)
        tests = "".join(by_id[tests_id]["source"])
        check = next(c for c, arg in _CHECK_CALL.findall(tests) if arg == name)
        found.append(Exercise(gid, tests_id, name, check, _strip_markers(source)))
    return found


def graded_cell_source(notebook: str, tests_id: str) -> str:
    """The instructor's source of a graded test cell (hidden tests included)."""
    cells = {_nbgrader(c).get("grade_id"): c for c in _solution_notebook(notebook)["cells"]}
    return "".join(cells[tests_id]["source"])


def _code(source: str) -> str:
    return "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith("%"))


def base_namespace(notebook: str) -> dict:
    """The notebook's import and read-only cells and all its solutions (a fresh copy)."""
    return dict(_base_namespace(notebook))


@functools.cache
def _base_namespace(notebook: str) -> dict:
    namespace: dict = {}
    before_answers = True
    for cell in _solution_notebook(notebook)["cells"]:
        source = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        before_answers = before_answers and "solution" not in tags
        imports = before_answers and cell["cell_type"] == "code" and "import" in source
        if imports or "readonly" in tags or "solution" in tags:
            source = _strip_markers(source) if "solution" in tags else source
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(_code(source), f"<{notebook}>", "exec"), namespace)
    return namespace


@dataclass
class InstantResult:
    grade_id: str
    index: int  # alternative number, 1-based
    note: str
    check: str | None  # None: the check passed (visible and hidden cases); else its message
    graded_cell: str | None  # None: the graded cell's asserts passed in-process; else the error


def _run(fn) -> str | None:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            fn()
    except AssertionError as err:
        return f"AssertionError: {err}"
    except Exception as err:  # noqa: BLE001  (an honest answer must not raise either)
        return f"{type(err).__name__}: {err}"
    return None


def instant_result(notebook: str, grade_id: str, index: int) -> InstantResult:
    """Alternative ``index`` (1-based) of ``grade_id`` through its check and its graded cell."""
    from transformer_lab import checks

    ex = next(e for e in exercises(notebook) if e.grade_id == grade_id)
    alt = alternatives(notebook)[grade_id][index - 1]
    cells = {_nbgrader(c).get("grade_id"): c for c in _solution_notebook(notebook)["cells"]}
    namespace = base_namespace(notebook)
    label = f"<{grade_id} #{index}>"
    error = _run(lambda: exec(compile(alt.source, label, "exec"), namespace))
    if error is not None:
        return InstantResult(grade_id, index, alt.note, error, error)
    fn = namespace[ex.name]
    check = getattr(checks, ex.check)
    message = _run(lambda: check(fn)) or _run(lambda: check(fn, hidden=True))
    tests = _code("".join(cells[ex.tests_id]["source"]))
    graded = _run(lambda: exec(compile(tests, f"<{ex.tests_id}>", "exec"), namespace))
    return InstantResult(grade_id, index, alt.note, message, graded)


def instant_results(notebook: str) -> list[InstantResult]:
    """Every alternative of ``notebook`` through its instant check and its graded cell."""
    table = alternatives(notebook)
    return [
        instant_result(notebook, ex.grade_id, i)
        for ex in exercises(notebook)
        for i in range(1, len(table.get(ex.grade_id, [])) + 1)
    ]


# --------------------------------------------------------------------- submissions and grading


def submissions(notebook: str) -> dict[str, dict[str, Alternative]]:
    """``{student: {grade_id: alternative}}``: student honest_k holds every alternative k."""
    table = alternatives(notebook)
    count = max(len(v) for v in table.values())
    return {
        f"honest_{k}": {gid: alts[k - 1] for gid, alts in table.items() if len(alts) >= k}
        for k in range(1, count + 1)
    }


def submission_notebook(notebook: str, root: Path, chosen: dict[str, Alternative]):
    """The released notebook with the solution in every answer cell, except ``chosen``."""
    solution = {ex.grade_id: ex.solution for ex in exercises(notebook)}
    nb = nbformat.read(root / "notebooks" / notebook / f"{notebook}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = _nbgrader(cell).get("grade_id")
        if _nbgrader(cell).get("solution") and gid in solution:
            cell.source = chosen[gid].source if gid in chosen else solution[gid]
    return nb


def build_course(notebook: str, root: Path, students: dict[str, dict[str, Alternative]]) -> None:
    """A course in ``root`` with ``notebook`` released and one submission per student."""
    copy_course(root, notebook)  # the shipped release (tests/shipped_course.py)
    for student, chosen in students.items():
        folder = root / "submitted" / student / notebook
        folder.mkdir(parents=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
        (folder / "timestamp.txt").write_text(stamp)
        nbformat.write(submission_notebook(notebook, root, chosen), folder / f"{notebook}.ipynb")


@dataclass
class Graded:
    student: str
    status: str
    score: float | None
    max_score: float | None
    reason: str
    flags: str
    notes: str
    seconds: float
    lost: dict[str, str] = field(default_factory=dict)  # test grade_id -> "got/max: error"


def _cell_errors(root: Path, student: str, notebook: str) -> dict[str, str]:
    path = root / "autograded" / student / notebook / f"{notebook}.ipynb"
    if not path.exists():
        return {}
    errors = {}
    for cell in json.loads(path.read_text())["cells"]:
        gid = _nbgrader(cell).get("grade_id")
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errors[gid] = f"{out.get('ename')}: {out.get('evalue', '')}"[:400]
    return errors


def _cell_scores(root: Path, student: str, notebook: str) -> dict[str, tuple[float, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        try:
            nb = gb.find_submission_notebook(notebook, notebook, student)
        except Exception:  # noqa: BLE001  (not graded: no submission notebook)
            return {}
        return {g.name: (g.score, g.max_score) for g in nb.grades}


def grade(notebook: str, root: Path, timeout: int = 120, budget: float = 300.0) -> dict:
    """``tlab grade`` (as a command, niced) over the course; ``{student: Graded}``."""
    command = [
        "nice", "-n", "10", sys.executable, "-m", "transformer_lab.cli", "--root", str(root),
        "grade", notebook, "--quiet", "--timeout", str(timeout), "--budget", str(budget),
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    report = root / "reports" / f"{notebook}_grades.csv"
    if not report.exists():
        raise RuntimeError(f"tlab grade wrote no report (exit {done.returncode}): {done.stderr}")
    with report.open() as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    graded = {}
    for student, row in rows.items():
        scores = _cell_scores(root, student, notebook)
        errors = _cell_errors(root, student, notebook)
        lost = {
            gid: f"{got:g}/{top:g}: {errors.get(gid, 'no error output')}"
            for gid, (got, top) in scores.items()
            if got is None or got < top
        }
        score = float(row["score"]) if row["score"] else None
        top = float(row["max_score"]) if row["max_score"] else None
        graded[student] = Graded(
            student,
            row["status"],
            score,
            top,
            row["reason"],
            row["flags"],
            row["notes"],
            float(row["seconds"] or 0),
            lost,
        )
    print(f"{notebook}: tlab grade {len(rows)} submissions in {seconds:.0f} s", file=sys.stderr)
    return graded


def describe(notebook: str, graded: dict) -> list[str]:
    """One line per submission: expected vs got, and what lost points (with the alternative)."""
    students = submissions(notebook)
    tests_to_impl = {ex.tests_id: ex.grade_id for ex in exercises(notebook)}
    lines = []
    for student, chosen in students.items():
        g = graded.get(student)
        if g is None:
            lines.append(f"{notebook} {student}: not in the report")
            continue
        lines.append(
            f"{notebook} {student}: expected {g.max_score:g}/{g.max_score:g} graded, got "
            f"{g.score}/{g.max_score} {g.status}"
            + (f" flags={g.flags}" if g.flags else "")
            + (f" reason={g.reason}" if g.reason else "")
        )
        for tests_id, why in g.lost.items():
            gid = tests_to_impl.get(tests_id, tests_id)
            alt = chosen.get(gid)
            which = f"alternative: {alt.note}" if alt else "the solution's own code"
            lines.append(f"    lost {tests_id} ({which}): {why}")
    return lines


def main(argv: list[str]) -> int:
    keep = None
    if "--keep" in argv:
        at = argv.index("--keep")
        keep = Path(argv[at + 1])
        argv = argv[:at] + argv[at + 2 :]
    chosen = [n for n in NOTEBOOKS if not argv or n[:2] in argv]
    import tempfile

    for notebook in chosen:
        for r in instant_results(notebook):
            if r.check or r.graded_cell:
                print(
                    f"{notebook} {r.grade_id} #{r.index} ({r.note}): check={r.check!r} "
                    f"graded_cell={r.graded_cell!r}"
                )
        root = (
            (keep / notebook) if keep else Path(tempfile.mkdtemp(prefix=f"honest{notebook[:2]}_"))
        )
        if root.exists():
            shutil.rmtree(root)
        build_course(notebook, root, submissions(notebook))
        graded = grade(notebook, root)
        print("\n".join(describe(notebook, graded)), flush=True)
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
