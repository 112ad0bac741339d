"""End to end: release a fixture assignment into a temporary course, submit good and faulty
notebooks, run `tlab grade` once over all of them, and check every outcome.

The fixture (tests/fixtures/course) has three exercises built on the checks: softmax (2 points),
attention (3) and a causal mask (1). One batch grades 11 students, each in the sandbox; the
per-cell timeout is 8 s and the hang budget 10 s, so the hanging student costs about 16 s (cells
stopped at 8 s of the kernel's own time until 10 s are lost, then 1 s each; graded once: the
time was its own); the other cells take well under a second.
Tricks that used to be merely caught are now also flagged (status needs_review). Then a second run
checks that nothing is regraded or lost, and a third that a failed regrade keeps the old score.
The real course's assignments are graded in tests/test_grading_real_course.py.
"""

from __future__ import annotations

import csv
import datetime
import json
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from transformer_lab import cli
from transformer_lab.grading.autograde import GradeOptions, grade
from transformer_lab.grading.course import run_driver
from transformer_lab.grading.preflight.repair import restore_missing_cells
from transformer_lab.grading.record.report import GRADED, NEEDS_REVIEW, NOT_GRADED

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "course"
A = "fx_attention"
OPTIONS = dict(timeout=8, budget=10.0, quiet=True)

pytestmark = pytest.mark.slow


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _solution_source(root: Path, grade_id: str) -> str:
    nb = nbformat.read(root / "solutions" / A / f"{A}.ipynb", as_version=4)
    lines = _cell(nb, grade_id).source.splitlines()
    return "\n".join(ln for ln in lines if "BEGIN SOLUTION" not in ln and "END SOLUTION" not in ln)


def _submit(root: Path, student: str, edit=None, raw: str | None = None) -> None:
    folder = root / "submitted" / student / A
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text(
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    )
    if raw is not None:
        (folder / f"{A}.ipynb").write_text(raw)
        return
    nb = nbformat.read(root / "notebooks" / A / f"{A}.ipynb", as_version=4)
    if edit is not None:
        edit(nb, root)
    nbformat.write(nb, folder / f"{A}.ipynb")


def answer(**sources):
    """An edit that fills answer cells: answer(softmax_impl="...") or "solution" for the solution."""

    def edit(nb, root):
        for gid, src in sources.items():
            _cell(nb, gid).source = _solution_source(root, gid) if src == "solution" else src

    return edit


FULL = dict(softmax_impl="solution", attention_impl="solution", causal_impl="solution")
HANG = "def scaled_dot_product_attention(q, k, v, mask=None):\n    while True:\n        pass"
KILL = "import os\n\ndef softmax(x, dim=-1):\n    os._exit(1)"
NO_MAX = (
    "def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)"
)
PATCHED = (
    "import numpy as np\n"
    "torch.allclose = lambda *a, **k: True\n"
    "np.allclose = lambda *a, **k: True\n"
    "def softmax(x, dim=-1):\n    return x"
)
FAKE_CHECKS = (
    "class _Anything:\n    def __getattr__(self, name):\n        return lambda *a, **k: None\n\n"
    "checks = _Anything()\n\n"
    "def softmax(x, dim=-1):\n    return x"
)
REFERENCE = "from transformer_lab.attention import softmax as _sm\n\ndef softmax(x, dim=-1):\n    return _sm(x, dim)"


def _edit_test(nb, root):
    answer(**{**FULL, "softmax_impl": NO_MAX})(nb, root)
    _cell(nb, "test_softmax").source = "pass  # nothing to see here"


def _delete_test(nb, root):
    answer(**FULL)(nb, root)
    nb.cells.remove(_cell(nb, "test_causal"))  # follows the (ungraded) instant-check cell


STUDENTS = {
    # student: (edit or raw text, expected status, expected score)
    "full": (answer(**FULL), GRADED, 6),
    "untouched": (None, GRADED, 0),
    "partial": (answer(softmax_impl="solution"), GRADED, 2),
    "hanging": (  # a final timeout is marked for review, never a silent 0 with "graded"
        answer(softmax_impl="solution", causal_impl="solution", attention_impl=HANG),
        NEEDS_REVIEW,
        3,
    ),
    "kernel_killer": (answer(**{**FULL, "softmax_impl": KILL}), NOT_GRADED, None),
    "edited_test": (_edit_test, GRADED, 4),
    "deleted_test": (_delete_test, GRADED, 6),
    "invalid_json": ("{ this is not a notebook", NOT_GRADED, None),
    # The patch reaches nothing: the grader compares outside the kernel (softmax wrong: 0 of 2;
    # the two correct exercises keep their 4 points) and the patch is flagged.
    "patched_comparisons": (answer(**{**FULL, "softmax_impl": PATCHED}), NEEDS_REVIEW, 4),
    "fake_checks": (answer(**{**FULL, "softmax_impl": FAKE_CHECKS}), NEEDS_REVIEW, 4),
    # the check gives the softmax 0 points, and the code scan flags the reference's use (issue 22)
    "uses_reference": (answer(**{**FULL, "softmax_impl": REFERENCE}), NEEDS_REVIEW, 4),
}


@pytest.fixture(scope="module")
def course(tmp_path_factory, bwrap):
    root = tmp_path_factory.mktemp("course")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(FIXTURE / "solutions", root / "solutions")
    assert cli.main(["--root", str(root), "release"]) == 0
    for student, (edit, _, _) in STUDENTS.items():
        if isinstance(edit, str):
            _submit(root, student, raw=edit)
        else:
            _submit(root, student, edit)
    started = time.monotonic()
    report = grade(root, A, GradeOptions(**OPTIONS))
    seconds = time.monotonic() - started
    print(f"\ngraded {len(STUDENTS)} submissions in {seconds:.1f} s")
    for sid, r in sorted(report.students.items()):
        print(f"  {sid:20s} {r.status:10s} {r.score!s:5s} {r.seconds}s {r.reason} {r.notes}")
    return root, report


def _rows(root: Path) -> dict[str, dict]:
    with (root / "reports" / f"{A}_grades.csv").open() as fh:
        return {row["student_id"]: row for row in csv.DictReader(fh)}


@pytest.mark.parametrize("student", sorted(STUDENTS))
def test_each_submission_outcome(course, student):
    root, report = course
    _, status, score = STUDENTS[student]
    result = report.students[student]
    assert result.status == status, (result.reason, result.notes)
    assert result.score == score
    row = _rows(root)[student]
    assert row["status"] == status
    if status == NOT_GRADED:
        assert row["score"] == "" and row["reason"], row  # never an ordinary 0
    else:
        # a row under review has no decided score yet: its points are the autograded score
        points = row["score"] if status != NEEDS_REVIEW else row["autograded_score"]
        assert float(points) == score and float(row["max_score"]) == 6


def test_reasons_and_notes(course):
    root, report = course
    assert "kernel died" in report.students["kernel_killer"].reason
    assert "invalid JSON" in report.students["invalid_json"].reason
    assert any(
        "restored deleted cell(s) test_causal" in n for n in report.students["deleted_test"].notes
    )
    assert report.students["hanging"].timeouts >= 1
    assert any("interrupted" in n for n in report.students["hanging"].notes)
    assert not report.all_graded
    summary = report.summary()
    assert "Could not be graded" in summary and "kernel_killer" in summary


def _autograded(root: Path, student: str) -> dict:
    return json.loads((root / "autograded" / student / A / f"{A}.ipynb").read_text())


def _outputs(nb: dict) -> str:
    return json.dumps([c.get("outputs", []) for c in nb["cells"]])


def test_grading_mode_and_integrity_messages(course):
    root, _ = course
    assert "grading mode: True" in _outputs(_autograded(root, "full"))
    # The patch changes nothing the grader uses: its own check fails the wrong softmax.
    patched = _outputs(_autograded(root, "patched_comparisons"))
    assert "[the grader]" in patched and "GradedTestFailed" in patched
    assert "reference softmax" in _outputs(_autograded(root, "uses_reference"))
    hanging = _outputs(_autograded(root, "hanging"))
    # The kernel's own cell no longer calls it; the grader's call is interrupted at the limit.
    assert "CellTimeoutError" in hanging or "did not finish within the time limit" in hanging
    # The edited test cell was restored from the gradebook before running.
    edited = _autograded(root, "edited_test")
    cell = next(
        c
        for c in edited["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_softmax"
    )
    assert "check_softmax" in "".join(cell["source"])


def test_feedback_hides_hidden_tests(course):
    root, report = course
    for sid, r in report.students.items():
        html = root / "feedback" / sid / A / f"{A}.html"
        if r.status != GRADED:
            continue
        text = html.read_text()
        assert "HIDDEN TESTS" not in text and "hidden=True" not in text, sid


def test_nbgrader_export_and_originals_untouched(course):
    root, _ = course
    export = (root / "reports" / "nbgrader_grades.csv").read_text()
    assert "full" in export and "raw_score" in export
    # Pre-flight worked on copies: the students' files are exactly what they submitted.
    assert (
        root / "submitted" / "invalid_json" / A / f"{A}.ipynb"
    ).read_text() == "{ this is not a notebook"
    deleted = nbformat.read(root / "submitted" / "deleted_test" / A / f"{A}.ipynb", as_version=4)
    assert not any(
        c.metadata.get("nbgrader", {}).get("grade_id") == "test_causal" for c in deleted.cells
    )


def test_rerun_keeps_grades_and_failed_regrade_keeps_previous_score(course):
    root, first = course
    before = {sid: (r.status, r.score) for sid, r in first.students.items()}
    again = grade(root, A, GradeOptions(students=["full", "partial"], **OPTIONS))
    assert again.graded_now == []  # unchanged submissions are not regraded
    assert {sid: (r.status, r.score) for sid, r in again.students.items()} == before

    _submit(root, "full", answer(**{**FULL, "softmax_impl": KILL}))  # a resubmission that crashes
    third = grade(root, A, GradeOptions(students=["full"], **OPTIONS))
    full = third.students["full"]
    assert third.graded_now == ["full"]
    assert full.status == NOT_GRADED and full.previous_score == 6
    assert _rows(root)["full"]["previous_score"] == "6"
    assert (
        root / "autograded" / "full" / A / f"{A}.ipynb"
    ).is_file()  # the last good grading is kept
    assert third.students["partial"].score == 2  # others untouched


def test_unknown_student_is_a_clear_error(course):
    root, _ = course
    assert cli.main(["--root", str(root), "grade", A, "--student", "nobody", "--quiet"]) == 1


def test_restore_missing_cells_after_a_non_graded_cell():
    """The case where nbgrader 0.9.6's add_missing_cells raises KeyError."""
    release = nbformat.v4.new_notebook()

    def meta(gid, **kw):
        base = {"grade_id": gid, "schema_version": 3, "grade": False, "solution": False}
        return {"nbgrader": {**base, "locked": False, **kw}}

    cells = [
        nbformat.v4.new_code_cell("def f(): ...", metadata=meta("impl", solution=True)),
        nbformat.v4.new_code_cell("checks.check_f(f)"),  # ungraded instant check
        nbformat.v4.new_code_cell(
            "assert f() is None", metadata=meta("test_f", grade=True, locked=True, points=1)
        ),
        nbformat.v4.new_code_cell(
            "assert True", metadata=meta("test_g", grade=True, locked=True, points=1)
        ),
    ]
    release.cells = cells
    submitted = nbformat.v4.new_notebook()
    submitted.cells = [cells[0], cells[1]]  # both test cells deleted
    fixed, restored = restore_missing_cells(submitted, release)
    assert restored == ["test_f", "test_g"]
    assert [c.source for c in fixed.cells] == [c.source for c in cells]


def test_watchdog_kills_a_hung_grading_process(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text("import time\ntime.sleep(120)\n")
    started = time.monotonic()
    events, code, _ = run_driver(
        {"root": str(tmp_path), "ops": [{"op": "scores", "assignment": A}]}, idle_timeout=3
    )
    assert code == -9 and events == []
    assert time.monotonic() - started < 60


@pytest.mark.needs_bwrap  # grade() probes the sandbox before it starts the (fake) driver
def test_a_hung_process_is_reported_and_the_others_still_graded(tmp_path, monkeypatch):
    """Simulate the nbgrader process hanging on one student: it is reported, the rest graded."""
    shutil.copy(REPO / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    shutil.copytree(FIXTURE / "solutions", tmp_path / "solutions")
    for sid in ("a", "b", "c"):
        (tmp_path / "submitted" / sid / A).mkdir(parents=True)
    calls = []

    def fake_driver(job, on_event=None, env=None, idle_timeout=None, feed=None):
        """The grading process as the lanes drive it: one submission at a time from ``feed``."""
        students: list[str] = []
        calls.append(students)
        events = []

        def emit(event):
            events.append(event)
            on_event(event)

        for op in job["ops"]:
            if op["op"] == "generate_assignment":  # the release it generated (its files: none)
                (Path(op["release_dir"]) / op["assignment"]).mkdir(parents=True, exist_ok=True)
                emit({"op": "generate_assignment", "success": True})
        ops, last = feed(None)
        while True:
            answered = None
            for op in ops:
                if op["op"] == "grade_student":
                    students.append(op["student"])
                    if op["student"] == "b" and len(calls) == 1:
                        return events, -9, ""  # hung on b: killed by the watchdog
                    answered = {"op": "grade_student", "student": op["student"], "success": True}
                    emit(answered)
                elif op["op"] == "scores":
                    scores = {s: {"score": 1.0, "max_score": 6.0} for s in "ac"}
                    emit({"op": "scores", "success": True, "scores": scores})
            if last:
                return events, 0, ""
            ops, last = feed(answered)

    monkeypatch.setattr("transformer_lab.grading.run.lanes.run_driver", fake_driver)
    report = grade(tmp_path, A, GradeOptions(quiet=True, export=False))
    assert calls == [["a", "b"], ["c"]]  # a new grading process takes up the queue after b
    assert (
        report.students["b"].status == NOT_GRADED
        and "stopped responding" in report.students["b"].reason
    )
    assert report.students["a"].status == GRADED and report.students["c"].status == GRADED
