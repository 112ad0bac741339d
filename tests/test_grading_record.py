"""The grade record (issue 37): the instructor's word is the grade, on every channel.

One class of four (notebook ``01_topic``, 6 points) in nbgrader's gradebook, built with
nbgrader's own API (no kernels), once in SQLite and once in a throw-away PostgreSQL server:

- an override and an accept reach, identically, the feedback page ``nbgrader release_feedback``
  sends, nbgrader's gradebook (what the formgrader and nbgrader's export show), the report CSV
  and both LMS files; an undecided flag says "under review" on the page and is blank in the LMS;
- every change of a grade is in the history (old, new, who, when, why);
- a due date, a late penalty, a refusal and an extension, applied without regrading;
- a changed test cell or check module names the submissions graded under the old version.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from transformer_lab import cli
from transformer_lab.grading.record.gradebook import alembic_on_path
from transformer_lab.grading.record.ledger import score_history
from transformer_lab.grading.record.report import GRADED, NEEDS_REVIEW, GradingReport, StudentResult

A = "01_topic"
COURSE = "record-test"
CANVAS_ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section
"Lovelace, Ada",101,S101,ada,Sec A
"Babbage, Ben",102,S102,ben,Sec A
"Cy, Cyrus",103,S103,cy,Sec B
"Dee, Dora",104,S104,dee,Sec B
"""
MOODLE_ROSTER = """First name,Last name,ID number,Institution,Department,Email address
Ada,Lovelace,ada,,,ada@uni.example
Ben,Babbage,ben,,,ben@uni.example
Cyrus,Cy,cy,,,cy@uni.example
Dora,Dee,dee,,,dee@uni.example
"""
PAGE = (
    "<!DOCTYPE html>\n<html>\n<head><title>x</title></head>\n<body>\n"
    '<div class="panel-heading"><h4>{nb} (Score: {score} / 6.0)</h4></div>\n'
    "<pre>AssertionError: {msg}</pre>\n</body>\n</html>\n"
)
# ben: flagged (a cell stopped at its time limit), 2/6; cy: flagged, 4/6; dee: graded 5/6, late
AUTO = {"ada": 6.0, "ben": 2.0, "cy": 4.0, "dee": 5.0}
HANDED_IN = {"ada": "2026-11-01T10:00:00+00:00", "dee": "2026-11-03T12:00:00+00:00"}


def _autograded(path: Path, timeout_in: str | None) -> None:
    """An autograded notebook: two answers (sdpa calls softmax), two graded test cells."""

    def cell(kind, gid, src, points=None, outputs=()):
        meta = {"grade_id": gid, "solution": kind == "answer", "grade": kind == "test"}
        if points is not None:
            meta["points"] = points
        return {"cell_type": "code", "metadata": {"nbgrader": meta}, "source": src,
                "outputs": list(outputs), "execution_count": None}  # fmt: skip

    err = {"output_type": "error", "ename": "CellTimeoutError", "evalue": "time limit",
           "traceback": []}  # fmt: skip
    fail = {"output_type": "error", "ename": "AssertionError", "evalue": "wrong", "traceback": []}
    cells = [
        cell("answer", "softmax_impl", "def softmax(x):\n    return x\n"),
        cell("test", "test_softmax", "check(softmax)", 3, [err] if timeout_in else [fail]),
        cell("answer", "sdpa_impl", "def sdpa(q, k, v):\n    return softmax(q @ k.T) @ v\n"),
        cell("test", "test_sdpa", "check(sdpa)", 3, [fail]),
    ]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")


def _course(root: Path, url: str) -> Path:
    alembic_on_path()
    root.mkdir(parents=True, exist_ok=True)
    (root / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = {COURSE!r}\n"
        f"c.CourseDirectory.db_url = {url!r}\n",
        encoding="utf-8",
    )
    with Gradebook(url, COURSE) as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        gb.add_grade_cell("test_softmax", A, A, max_score=3, cell_type="code")
        gb.add_grade_cell("test_sdpa", A, A, max_score=3, cell_type="code")
        for sid, auto in AUTO.items():
            gb.add_student(sid)
            gb.add_submission(A, sid)
            first = min(auto, 3.0)
            for gid, score in (("test_softmax", first), ("test_sdpa", auto - first)):
                grade = gb.find_grade(gid, A, A, sid)
                grade.auto_score, grade.needs_manual_grade = score, False
        gb.db.commit()
    report = GradingReport(A, max_score=6)
    for sid, auto in AUTO.items():
        flagged = sid in ("ben", "cy")
        report.students[sid] = StudentResult(
            sid, NEEDS_REVIEW if flagged else GRADED, auto, 6, fingerprint=f"f{sid}",
            reason="1 flag(s): timeout" if flagged else "",
            flags=["timeout: 1 cell(s) stopped at the 6 s time limit (scored 0)"] if flagged else [],
            handed_in=HANDED_IN.get(sid, ""),
        )  # fmt: skip
        page = root / "feedback" / sid / A / f"{A}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(PAGE.format(nb=A, score=f"{auto:.1f}", msg="x" * 400), encoding="utf-8")
        _autograded(root / "autograded" / sid / A / f"{A}.ipynb", "ben" if flagged else None)
    report.graded_now = sorted(report.students)
    report.save(root)
    from transformer_lab.grading.channels.publish import settle
    from transformer_lab.grading.record.decisions import sync_flags

    sync_flags(url, COURSE, report, report.graded_now)
    settle(root, report, "graded by tlab grade", "tlab grade")
    for lms, text in (("canvas", CANVAS_ROSTER), ("moodle", MOODLE_ROSTER)):
        (root / f"{lms}.csv").write_text(text, encoding="utf-8")
    assert _tlab(root, "roster", "import", str(root / "canvas.csv")) == 0
    assert (
        _tlab(root, "roster", "import", str(root / "moodle.csv"), "--id-column", "ID number") == 0
    )
    return root


def _tlab(root: Path, *argv: str) -> int:
    return cli.main(["--root", str(root), *argv])


@pytest.fixture(scope="module")
def pg_server(postgresql):
    from pg_server import PostgresServer

    with PostgresServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def course(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    else:
        name = "record_" + request.node.name.split("[")[0].removeprefix("test_")
        url = request.getfixturevalue("pg_server").create_database(name[:60])
    return _course(tmp_path / "course", url), url


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _channels(root: Path, url: str) -> dict[str, dict[str, str]]:
    """Every channel's grade per student: page heading, gradebook, report, Canvas, Moodle."""
    assert _tlab(root, "export") == 0
    pages = {}
    for sid in AUTO:
        html = (root / "feedback" / sid / A / f"{A}.html").read_text(encoding="utf-8")
        pages[sid] = html.split("(Score: ", 1)[1].split(" / ")[0]
    with Gradebook(url, COURSE) as gb:
        nbgrader = {
            s.student.id: f"{s.score - s.late_submission_penalty:.1f}"
            for s in gb.find_assignment(A).submissions
        }
    report = {r["student_id"]: r["score"] for r in _csv(root / "reports" / f"{A}_grades.csv")}
    canvas = {r["SIS Login ID"]: r[A] for r in _csv(root / "reports" / "canvas_grades.csv")[1:]}
    moodle = {r["ID number"]: r[A] for r in _csv(root / "reports" / "moodle_grades.csv")}
    return {"page": pages, "gradebook": nbgrader, "report": report, "canvas": canvas,
            "moodle": moodle}  # fmt: skip


def test_a_decision_is_the_grade_on_every_channel(course, capsys):
    root, url = course
    before = _channels(root, url)
    assert before["page"]["ben"] == "under review, autograded 2.0"  # not released as final
    assert before["canvas"]["ben"] == "" and before["moodle"]["ben"] == "-"
    page = (root / "feedback" / "ben" / A / f"{A}.html").read_text(encoding="utf-8")
    assert "<b>Under review</b>" in page
    # The flag names its cell and its points, never a bare "(scored 0)".
    assert "test_softmax (0 of 3 points)" in page and "(scored 0)" not in page
    # A failure caused by an earlier exercise says so.
    assert "test_sdpa fails because test_softmax fails: your answer calls softmax" in page
    assert "white-space: pre-wrap" not in page  # (the wrap rule is the sanitizer's, below)

    assert (
        _tlab(root, "review", A, "ben", "--score", "5", "--note", "ran in 2 s", "--by", "prof") == 0
    )
    assert _tlab(root, "review", A, "cy", "--accept", "--note", "fine", "--by", "prof") == 0
    capsys.readouterr()
    after = _channels(root, url)
    expected = {"ada": "6.0", "ben": "5.0", "cy": "4.0", "dee": "5.0"}
    assert after["page"] == expected
    assert after["gradebook"] == expected  # the formgrader's and nbgrader's export's score
    assert after["report"] == {"ada": "6", "ben": "5", "cy": "4", "dee": "5"}
    assert after["canvas"] == after["report"] and after["moodle"] == after["report"]
    # Each LMS gets its own ids back, though the Moodle roster was imported after Canvas's.
    canvas = _csv(root / "reports" / "canvas_grades.csv")[1:]
    assert {r["SIS Login ID"]: (r["ID"], r["SIS User ID"]) for r in canvas}["ada"] == (
        "101",
        "S101",
    )
    assert {
        r["Email address"]: r["ID number"] for r in _csv(root / "reports" / "moodle_grades.csv")
    }["ada@uni.example"] == "ada"
    page = (root / "feedback" / "ben" / A / f"{A}.html").read_text(encoding="utf-8")
    assert "Grade decided by your instructor: 5.0 / 6.0</b> (autograded 2.0): ran in 2 s" in page
    assert page.count('class="tlab-record"') == 1  # rebuilt, never stacked
    rows = {r["student_id"]: r for r in _csv(root / "reports" / f"{A}_grades.csv")}
    assert rows["ben"]["status"] == "reviewed" and rows["ben"]["autograded_score"] == "2"
    assert "score set to 5 by prof" in rows["ben"]["decision"]

    history = score_history(url, COURSE, A)["ben"]
    assert [(h["old_score"], h["new_score"], h["changed_by"]) for h in history] == [
        (None, 5.0, "prof")
    ]
    assert "review: score set to 5 by prof" in history[0]["why"]
    assert _tlab(root, "review", A, "ben") == 0
    assert "grade changes:\n  none -> 5 by prof at" in capsys.readouterr().out


def test_due_date_penalty_refusal_and_extension(course, capsys):
    root, url = course
    # dee handed in 36 h after a due date of 2026-11-02 00:00 UTC: two days started.
    assert _tlab(root, "due", A, "2026-11-02T00:00", "--late", "penalty", "--per-day", "10") == 0
    out = capsys.readouterr().out
    assert "due 2026-11-02 00:00 UTC; late work loses 10% per day" in out
    grades = _channels(root, url)
    assert grades["report"]["dee"] == "4" and grades["canvas"]["dee"] == "4"  # 5 - 20%
    assert grades["page"]["dee"] == "4.0" and grades["gradebook"]["dee"] == "4.0"
    assert grades["report"]["ada"] == "6"  # on time
    page = (root / "feedback" / "dee" / A / f"{A}.html").read_text(encoding="utf-8")
    assert "handed in 36.0 h after the due date: -1 points" in page
    with Gradebook(url, COURSE) as gb:
        assert str(gb.find_assignment(A).duedate) == "2026-11-02 00:00:00"  # nbgrader's own
        assert gb.find_submission_notebook(A, A, "dee").late_submission_penalty == 1.0

    assert _tlab(root, "due", A, "2026-11-02T00:00", "--late", "refuse") == 0
    assert _channels(root, url)["report"]["dee"] == "0"
    assert _tlab(root, "extend", A, "dee", "2026-11-04", "--note", "ill", "--by", "prof") == 0
    grades = _channels(root, url)
    assert grades["report"]["dee"] == "5" and grades["moodle"]["dee"] == "5"
    with Gradebook(url, COURSE) as gb:
        assert gb.find_submission(A, "dee").extension.days == 2
    changes = [(h["old_score"], h["new_score"]) for h in score_history(url, COURSE, A)["dee"]]
    assert changes == [(None, 5.0), (5.0, 4.0), (4.0, 0.0), (0.0, 5.0)]
    with pytest.raises(SystemExit):  # argparse: a note is required
        _tlab(root, "extend", A, "dee", "2026-11-05")


def test_changed_tests_name_the_submissions_graded_under_the_old_version(tmp_path):
    from transformer_lab.grading.record.test_versions import (
        cell_versions,
        changed_cells,
        store_versions,
        stored_versions,
    )

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    src = tmp_path / "source" / A
    src.mkdir(parents=True)
    nb = tmp_path / "source" / A / f"{A}.ipynb"
    meta = {"grade": True, "solution": False, "grade_id": "test_softmax", "points": 3}
    text = "checks.check_softmax(softmax)\n### BEGIN HIDDEN TESTS\nassert softmax(1) == 1\n"
    cells = [{"cell_type": "code", "metadata": {"nbgrader": meta}, "source": text}]
    nb.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    old = cell_versions(src)
    store_versions(url, COURSE, A, ["ada", "ben"], old)
    assert changed_cells(stored_versions(url, COURSE, A)["ada"], cell_versions(src)) == []
    cells[0]["source"] = text.replace("== 1", "== 2")  # the hidden assert edited
    nb.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    now = cell_versions(src)
    assert changed_cells(stored_versions(url, COURSE, A)["ada"], now) == [f"{A}/test_softmax"]
    store_versions(url, COURSE, A, ["ada"], now)  # ada graded again
    stored = stored_versions(url, COURSE, A)
    assert changed_cells(stored["ada"], now) == [] and changed_cells(stored["ben"], now) != []


def test_a_check_module_is_part_of_the_version(tmp_path, monkeypatch):
    from transformer_lab.grading.record import test_versions

    src = tmp_path / A
    src.mkdir()
    meta = {"grade": True, "solution": False, "grade_id": "t", "points": 1}
    cells = [{"cell_type": "code", "metadata": {"nbgrader": meta}, "source": "checks.check_x(f)"}]
    (src / "a.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
    module = tmp_path / "check_x.py"
    module.write_text("def check_x(f): pass\n", encoding="utf-8")
    monkeypatch.setattr(test_versions, "_check_modules", lambda: {"check_x": module})
    before = test_versions.cell_versions(src)
    module.write_text("def check_x(f): assert f(1) == 1\n", encoding="utf-8")
    assert test_versions.cell_versions(src) != before


def test_the_feedback_page_wraps_long_messages():
    from transformer_lab.grading.channels.feedback import sanitize_page

    page = sanitize_page("<html><head><style>p{}</style></head><body><pre>x</pre></body></html>")
    assert "white-space: pre-wrap" in page
