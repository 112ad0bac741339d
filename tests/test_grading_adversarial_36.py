"""The attacks written after issue 36, graded through ``tlab grade`` (sequentially and with
``--jobs 2``): nothing the kernel claims decides a point, nothing in it is worth reaching.

``tests/adversarial_class_36.py`` builds the class; the tests show, for both runs:

- every outcome within ``EXPECTED`` (no wrong answer scores without a flag; the package's
  answers reached another way score nothing; PyTorch's own softmax reached in hiding keeps its
  points and is flagged);
- no claimed timeout is counted, answers over the stated size or depth are refused and flagged;
- no escape sequence or spreadsheet formula reaches the report or the terminal;
- the honest variants keep full marks without a flag; the untouched release scores 0;
- nothing is left in /dev/shm or the temporary folder by the grading.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import tempfile
import time
from pathlib import Path

import adversarial_class_36 as klass
import pytest

from transformer_lab import cli
from transformer_lab.grading.record.report import GradingReport

pytestmark = [pytest.mark.slow, pytest.mark.needs_bwrap]
A = klass.A
RUNS = {"sequential": [], "jobs2": ["--jobs", "2"]}


def _score(row: dict) -> float:
    """The row's points: the decided score, else (under review) the autograded one."""
    return float(row["score"] or row.get("autograded_score") or 0)


def _leftovers() -> set[str]:
    found = set()
    for base in ("/dev/shm", tempfile.gettempdir()):
        for prefix in ("tlab-ipc-", "tlab-seed-"):
            found |= {str(p) for p in Path(base).glob(prefix + "*")}
    return found


@pytest.fixture(scope="module", params=sorted(RUNS))
def graded(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"adversarial36-{request.param}")
    klass.build(root)
    before = _leftovers()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli.main(
            ["--root", str(root), "grade", A, "--timeout", "8", "--budget", "10"]
            + RUNS[request.param]
        )
    raw = (root / "reports" / f"{A}_grades.csv").read_text(encoding="utf-8")
    rows = {row["student_id"]: row for row in csv.DictReader(io.StringIO(raw))}
    print(f"\n{request.param}: exit code {code}")
    for sid, row in sorted(rows.items()):
        print(f"  {sid:18s} {row['status']:12s} {row['score']:>4s}  {row['flags'][:140]!r}")
    return root, rows, raw, printed.getvalue(), _leftovers() - before


@pytest.mark.parametrize("student", sorted(klass.EXPECTED))
def test_outcome(graded, student):
    _, rows, _, _, _ = graded
    statuses, best, flagged = klass.EXPECTED[student]
    row = rows[student]
    assert row["status"] in statuses, row
    if row["status"] != "not_graded":
        assert _score(row) <= best, row
    if flagged:
        assert row["flags"], row
    if student.startswith("honest"):
        assert _score(row) == 10 and not row["flags"], row


def test_no_wrong_answer_scores_without_a_flag(graded):
    _, rows, _, _, _ = graded
    for student in klass.ATTACKS:
        row = rows[student]
        if row["status"] != "not_graded" and _score(row) > 0:
            assert row["status"] == "needs_review" and row["flags"], row


def test_claims_of_the_kernel_decide_nothing(graded):
    _, rows, _, _, _ = graded
    report = GradingReport.load(graded[0], A)
    for student in ("forged_keyboard", "claimed_timeout"):
        row = rows[student]
        assert not report.students[student].timeouts, row  # only the grader's clock times out
        assert "timeout" not in row["flags"], row
    assert "over the stated size" in rows["oversized_answer"]["flags"]
    assert "nested deeper" in rows["deep_answer"]["flags"]


def test_hidden_reach_is_flagged(graded):
    _, rows, _, _, _ = graded
    for student in ("importlib_built", "exec_base64", "pickled_code", "getattr_joined"):
        assert rows[student]["flags"], student


def test_no_escape_or_formula_reaches_the_report_or_the_terminal(graded):
    _, _, raw, printed, _ = graded
    assert "\x1b" not in raw and "\x1b" not in printed
    for row in csv.reader(io.StringIO(raw)):
        assert not any(cell.startswith(("=", "+", "@")) for cell in row), row


def test_nothing_is_left_behind(graded):
    _, _, _, _, left = graded
    # Folders of kernels another test process is running right now show up too: a real leak is
    # one that is still there once every kernel could have finished.
    deadline = time.monotonic() + 180
    while left and time.monotonic() < deadline:
        time.sleep(2)
        left = {path for path in left if os.path.exists(path)}
    assert not left
