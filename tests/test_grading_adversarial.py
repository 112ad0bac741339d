"""An adversarial class graded through ``tlab grade`` (issue 18).

``tests/adversarial_class.py`` builds notebook 01's course with 13 attacks (each with wrong
answers, so any point must come from the trick) and 5 honest variants. One ``tlab grade`` run
in the bubblewrap sandbox grades them all (per-cell limit 8 s, hang budget 10 s); the tests
then show:

- no wrong answer scores above zero without a review flag;
- no submission changes any other submission's grade, files or feedback, nor anything outside
  its sandbox (classmates' files hashed before and after, marker files, a loopback listener);
- no solution, hidden test, classmate's data or instructor's environment variable reaches a
  student's feedback;
- every honest variant (stderr print, slow cells, metadata stripped, 100 MB print) gets full
  marks without a flag, and the untouched release is graded 0 (the real course's check for
  notebook 01).
"""

from __future__ import annotations

import csv
import hashlib
import os
import socket
import threading
import time
from pathlib import Path

import adversarial_class as klass
import pytest

from transformer_lab import cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.needs_bwrap,
]
A = klass.A
SECRET = "5ec7e7f00d5ec7e7f00d5ec7e7f00d42"
MARKER_FILES = [Path("/tmp/tlab_vandal_was_here"), Path("/var/tmp/tlab_vandal_was_here")]


def _hashes(root: Path, folder: str) -> dict[str, str]:
    base = root / folder
    return {
        str(p.relative_to(base)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


class _Listener:
    """A loopback TCP server that records whether anything connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop = True
        self.thread.join(timeout=2)
        self.sock.close()


def _score(row: dict) -> float:
    """The row's points: the decided score, else (under review) the autograded one."""
    return float(row["score"] or row.get("autograded_score") or 0)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("adversarial")
    for marker in MARKER_FILES:
        marker.unlink(missing_ok=True)
    listener = _Listener()
    students = klass.build(root, port=listener.port)
    submitted_before = _hashes(root, "submitted")
    os.environ[klass.ENV_MARKER] = "instructor-only-value-7f3a"
    started = time.monotonic()
    from transformer_lab.grading import autograde

    token_hex = autograde.secrets.token_hex  # the run's secret, known here to look for leaks
    autograde.secrets.token_hex = lambda n=16: SECRET
    try:
        code = cli.main(
            ["--root", str(root), "grade", A, "--timeout", "8", "--budget", "10", "--quiet"]
        )
    finally:
        autograde.secrets.token_hex = token_hex
        os.environ.pop(klass.ENV_MARKER, None)
        listener.close()
    seconds = time.monotonic() - started
    with (root / "reports" / f"{A}_grades.csv").open() as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    print(f"\ngraded {len(students)} submissions in {seconds:.0f} s (exit code {code})")
    for sid, row in sorted(rows.items()):
        print(f"  {sid:18s} {row['status']:12s} {row['score']:>4s}  {row['reason'][:150]}")
    return root, rows, submitted_before, listener


@pytest.mark.parametrize("student", sorted(klass.EXPECTED))
def test_outcome(graded, student):
    _, rows, _, _ = graded
    statuses, best, flagged = klass.EXPECTED[student]
    row = rows[student]
    assert row["status"] in statuses, row
    if row["status"] != "not_graded":
        assert _score(row) <= best, row
    if flagged:
        assert row["flags"], row
    if student.startswith("honest"):
        assert _score(row) == 10 and not row["flags"], row
    if student == klass.UNTOUCHED:  # the release as handed out: graded, nothing earned
        assert _score(row) == 0 and float(row["max_score"]) == 10, row


def test_no_wrong_answer_scores_without_a_flag(graded):
    _, rows, _, _ = graded
    for student in klass.ATTACKS:
        row = rows[student]
        if row["status"] != "not_graded" and _score(row) > 0:
            assert row["status"] == "needs_review" and row["flags"], row


def test_the_flags_name_the_trick(graded):
    _, rows, _, _ = graded
    expect = {
        "function_mode": "TorchFunctionMode",
        "sys_modules": "sys.modules",
        "vars_edit": "namespace",
        "int_eq": "subclass",
        "lying_tensor": "subclass of torch.Tensor",
        "thread_reference": "threads",
        "read_solutions": "files",
        "gradebook_rewrite": "files",
        "vandal": "files",
        "leaker": "environment variables",
        "network": "network",
        "runpy_reference": "runpy",
    }
    for student, words in expect.items():
        assert words in rows[student]["flags"], (student, rows[student]["flags"])


def test_nobody_changes_anything_of_anyone_else(graded):
    root, rows, submitted_before, listener = graded
    assert _hashes(root, "submitted") == submitted_before  # classmates' files untouched
    for sid in klass.HONEST:
        assert rows[sid]["status"] == "graded" and _score(rows[sid]) == 10
        feedback = root / "feedback" / sid / A / f"{A}.html"
        assert "vandalised" not in feedback.read_text(encoding="utf-8")
    for marker in MARKER_FILES:
        assert not marker.exists(), f"a submission wrote {marker} outside its sandbox"
    assert listener.connections == 0  # no network from inside the sandbox
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:  # the gradebook is the grader's
        for cell in gb.find_notebook(A, A).source_cells:
            assert cell.source != "pass"
        for sid in klass.HONEST:
            submission = gb.find_submission_notebook(A, A, sid)
            assert all(g.manual_score is None for g in submission.grades)


def test_feedback_reveals_no_solution_hidden_test_or_secret(graded):
    root, _, _, _ = graded
    solution_line = "m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))"
    for student in [*klass.ATTACKS, *klass.HONEST]:
        feedback = root / "feedback" / student / A / f"{A}.html"
        if not feedback.exists():
            continue
        text = feedback.read_text(encoding="utf-8")
        assert solution_line not in text, student
        assert "hidden=True" not in text and "BEGIN HIDDEN TESTS" not in text, student
        assert SECRET not in text, student
        assert "instructor-only-value-7f3a" not in text and klass.ENV_MARKER not in text, student
        assert "SQLite format 3" not in text, student  # the gradebook's bytes
        others = [s for s in klass.EXPECTED if s != student and len(s) > 6]
        leaked = [s for s in others if f"submitted/{s}" in text or f"/{s}/" in text]
        assert not leaked, (student, leaked)
        assert len(text) < 2_000_000, (student, len(text))


def test_the_kernel_never_saw_the_hidden_tests_or_the_secret(graded):
    root, _, _, _ = graded
    autograded = root / "autograded" / "history_dump" / A / f"{A}.ipynb"
    text = autograded.read_text(encoding="utf-8")
    assert "HISTORY" in text and "SESSION" in text  # the dump ran and printed the history
    assert SECRET not in text
    for line in text.splitlines():
        if "HISTORY" in line or "SESSION" in line:
            assert "hidden=True" not in line and "BEGIN HIDDEN" not in line, line[:300]


def test_outputs_are_truncated(graded):
    root, _, _, _ = graded
    autograded = root / "autograded" / "honest_big_print" / A / f"{A}.ipynb"
    assert autograded.stat().st_size < 1_000_000
    assert "not kept by the grader" in autograded.read_text()


def test_stderr_and_metadata_notes(graded):
    _, rows, _, _ = graded
    assert "matched by content" in rows["honest_stripped"]["notes"]
