"""The review workflow (issue 27): flags in nbgrader's gradebook, decisions, resolved exports.

The gradebook is built with nbgrader's own API (no kernels), once in SQLite and once in a
throw-away PostgreSQL server: the decisions table must work in both.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from transformer_lab import cli
from transformer_lab.grading.record import decisions
from transformer_lab.grading.record.gradebook import alembic_on_path
from transformer_lab.grading.record.report import GRADED, NEEDS_REVIEW, GradingReport, StudentResult

A = "01_topic"
COURSE = "term-test"


def _course(root: Path, url: str) -> Path:
    alembic_on_path()  # nbgrader runs `alembic` when it creates a gradebook
    root.mkdir(parents=True, exist_ok=True)
    (root / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = {COURSE!r}\n"
        f"c.CourseDirectory.db_url = {url!r}\n",
        encoding="utf-8",
    )
    with Gradebook(url, COURSE) as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        gb.add_grade_cell("c1", A, A, max_score=6, cell_type="code")
        for sid, auto in (("ada", 6), ("ben", 2), ("cy", 4)):
            gb.add_student(sid, first_name=sid.title(), last_name="Doe")
            gb.add_submission(A, sid)
            grade = gb.find_grade("c1", A, A, sid)
            grade.auto_score, grade.needs_manual_grade = auto, False
        gb.db.commit()
    report = GradingReport(A, max_score=6)
    report.students["ada"] = StudentResult("ada", GRADED, 6, 6, fingerprint="fa")
    for sid, score in (("ben", 2), ("cy", 4)):
        report.students[sid] = StudentResult(
            sid,
            NEEDS_REVIEW,
            score,
            6,
            reason="1 flag(s): timeout",
            flags=["timeout: 1 cell(s) stopped at the 30 s time limit (scored 0)"],
            notes=["1 cell(s) interrupted at the time limit"],
            fingerprint=f"f{sid}",
        )
    report.graded_now = sorted(report.students)
    report.save(root)
    decisions.sync_flags(url, COURSE, report, report.graded_now)
    return root


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
        name = "term_" + request.node.name.split("[")[0].removeprefix("test_")
        url = request.getfixturevalue("pg_server").create_database(name)
    return _course(tmp_path / "course", url), url


def _flags(url: str) -> dict[str, bool]:
    with Gradebook(url, COURSE) as gb:
        return {sid: gb.find_submission_notebook(A, A, sid).flagged for sid in ("ada", "ben", "cy")}


def _canvas(root: Path) -> dict[str, str]:
    with open(root / "reports" / "canvas_grades.csv", newline="") as fh:
        return {row[3]: row[5] for row in list(csv.reader(fh))[2:]}


def test_review_flags_decides_and_exports(course, capsys):
    root, url = course
    # needs_review is nbgrader's flagged: the formgrader's "Flagged?" column lists it.
    assert _flags(url) == {"ada": False, "ben": True, "cy": True}
    assert cli.main(["--root", str(root), "export", "--format", "canvas"]) == 0
    assert _canvas(root) == {"ada": "6", "ben": "", "cy": ""}  # flagged: not uploaded

    assert cli.main(["--root", str(root), "review", A]) == 0
    out = capsys.readouterr().out
    assert "2 submission(s) to review" in out and "ben" in out and "cy" in out
    assert cli.main(["--root", str(root), "review", A, "ben"]) == 0
    out = capsys.readouterr().out
    assert "timeout: 1 cell(s) stopped" in out and "flagged by tlab grade at" in out

    # A decision needs a reason; a score must be in range.
    assert cli.main(["--root", str(root), "review", A, "ben", "--accept"]) == 1
    assert "note" in capsys.readouterr().err
    assert cli.main(["--root", str(root), "review", A, "ben", "--score", "9", "--note", "x"]) == 1
    capsys.readouterr()

    argv = ["--root", str(root), "review", A, "ben", "--score", "5", "--note", "ran in 2 s here"]
    assert cli.main([*argv, "--by", "prof"]) == 0
    assert "score set to 5 by prof" in capsys.readouterr().out
    assert cli.main(["--root", str(root), "review", A, "cy", "--accept", "--note", "fine"]) == 0
    assert _flags(url) == {"ada": False, "ben": False, "cy": False}
    assert cli.main(["--root", str(root), "export", "--format", "canvas"]) == 0
    assert _canvas(root) == {"ada": "6", "ben": "5", "cy": "4"}

    # Who, when, why: kept in the gradebook's own database.
    history = decisions.decision_history(url, COURSE, A, "ben")
    assert [(d.decision, d.score, d.note, d.decided_by) for d in history] == [
        ("flagged", None, "1 flag(s): timeout", "tlab grade"),
        ("override", 5.0, "ran in 2 s here", "prof"),
    ]
    assert history[0].decided_at.endswith("UTC")

    # A changed submission needs a new decision: the old one was made on other work.
    report = GradingReport.load(root, A)
    report.students["ben"].fingerprint = "changed"
    report.graded_now = ["ben"]
    report.save(root)
    decisions.sync_flags(url, COURSE, report, ["ben"])
    assert _flags(url)["ben"] is True
    assert cli.main(["--root", str(root), "export", "--format", "canvas"]) == 0
    assert _canvas(root)["ben"] == ""
    assert cli.main(["--root", str(root), "review", A, "ben"]) == 0
    assert "(on an earlier submission)" in capsys.readouterr().out


def test_review_resolved_in_the_formgrader(course, capsys):
    root, url = course
    with Gradebook(url, COURSE) as gb:
        gb.find_grade("c1", A, A, "ben").manual_score = 3  # the formgrader's manual grade
        gb.find_submission_notebook(A, A, "cy").flagged = False  # the formgrader's flag toggle
        gb.db.commit()
    assert cli.main(["--root", str(root), "review", A]) == 0
    out = capsys.readouterr().out
    assert "ben resolved in the formgrader (manual grade" in out
    assert "cy resolved in the formgrader (flag cleared" in out
    assert "0 submission(s) to review" in out
    assert cli.main(["--root", str(root), "export", "--format", "canvas"]) == 0
    assert _canvas(root) == {"ada": "6", "ben": "3", "cy": "4"}
    who = decisions.decision_history(url, COURSE, A, "ben")
    assert [(d.decision, d.decided_by) for d in who] == [
        ("flagged", "tlab grade"),
        ("formgrader", "formgrader"),
    ]


def test_a_flag_tlab_never_set_is_not_a_resolution(tmp_path, capsys):
    root = _course(tmp_path / "course", f"sqlite:///{tmp_path / 'gradebook.db'}")
    report = GradingReport.load(root, A)
    report.students["ada"].status = NEEDS_REVIEW  # as if flagged with no flag in nbgrader
    report.save(root)
    assert cli.main(["--root", str(root), "review", A]) == 0
    assert "ada" in capsys.readouterr().out.split("to review")[1].split("reviewed")[0]
    assert cli.main(["--root", str(root), "export", "--format", "canvas"]) == 0
    assert _canvas(root)["ada"] == ""


def test_review_of_a_student_not_flagged_is_refused(course, capsys):
    root, _ = course
    assert cli.main(["--root", str(root), "review", A, "ada", "--accept", "--note", "x"]) == 1
    assert "status is graded" in capsys.readouterr().err
    assert cli.main(["--root", str(root), "review", A, "zed"]) == 1


def test_the_guides_postgres_steps_run_as_written(pg_server, tmp_path):
    """The guide's non-interactive role and database creation, against a throw-away cluster."""
    import os
    import subprocess

    guide = (Path(__file__).resolve().parents[1] / "docs" / "instructor_guide.md").read_text()
    start = guide.index("PW=$(openssl rand -hex 16)")
    end = guide.index("\n", guide.index("createdb --owner grader transformer_lab", start))
    script = guide[start:end]
    assert "sudo" not in script and "--pwprompt" not in script
    if pg_server.owner is None:  # not root: the guide's `runuser -u postgres --` needs root
        script = script.replace("runuser -u postgres -- ", "")
    else:
        script = script.replace("runuser -u postgres --", f"runuser -u {pg_server.owner} --")
    env = {**os.environ, "PGHOST": str(pg_server.dir), "PGUSER": pg_server.user}
    env["PGDATABASE"] = "postgres"  # as Debian's postgres user connects by default
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script + '\necho "$PW"'],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    password = done.stdout.strip().splitlines()[-1]
    assert len(password) == 32
    import psycopg

    with psycopg.connect(host=str(pg_server.dir), user=pg_server.user, dbname="postgres") as conn:
        row = conn.execute(
            "SELECT r.rolcanlogin, a.rolpassword IS NOT NULL, d.datname FROM pg_roles r "
            "JOIN pg_authid a ON a.rolname = r.rolname "
            "JOIN pg_database d ON d.datdba = r.oid WHERE r.rolname = 'grader'"
        ).fetchone()
    assert row == (True, True, "transformer_lab")
    url = f"postgresql+psycopg://grader@/transformer_lab?host={pg_server.dir}"
    alembic_on_path()
    from transformer_lab.grading.record.gradebook import graded_in_gradebook

    assert graded_in_gradebook(url, COURSE, A) == set()  # nbgrader made its tables as grader


@pytest.mark.slow
def test_a_real_term_flag_review_export_and_a_new_gradebook(bwrap, tmp_path, capsys):
    """tlab grade flags a hanging submission in nbgrader, the review resolves it, the export
    writes it; pointing the course at a new, empty gradebook regrades instead of trusting
    the local report."""
    import shutil

    from test_grading_e2e import FULL, HANG, _submit, answer
    from test_grading_e2e import A as FA

    repo = Path(__file__).resolve().parents[1]
    root = tmp_path / "course"
    root.mkdir()
    config = (repo / "nbgrader_config.py").read_text()
    (root / "nbgrader_config.py").write_text(config)
    shutil.copytree(Path(__file__).parent / "fixtures" / "course" / "solutions", root / "solutions")
    assert cli.main(["--root", str(root), "release"]) == 0
    _submit(root, "ada", answer(**FULL))
    _submit(root, "hal", answer(**{**FULL, "attention_impl": HANG}))
    limits = ["--timeout", "5", "--quiet"]
    cli.main(["--root", str(root), "grade", FA, *limits])
    report = GradingReport.load(root, FA)
    assert report.students["hal"].status == NEEDS_REVIEW, report.students["hal"]
    url = f"sqlite:///{root / 'gradebook.db'}"
    with Gradebook(url, "transformer-lab") as gb:
        flagged = {s.student.id: s.notebooks[0].flagged for s in gb.find_assignment(FA).submissions}
    assert flagged == {"ada": False, "hal": True}  # the formgrader's "Flagged?" column

    note = ["--note", "hangs only in attention"]
    assert cli.main(["--root", str(root), "review", FA, "hal", "--score", "3", *note]) == 0
    capsys.readouterr()
    assert cli.main(["--root", str(root), "export", "--format", "canvas"]) == 0
    rows = list(csv.reader(open(root / "reports" / "canvas_grades.csv", newline="")))
    assert {r[3]: r[5] for r in rows[2:]} == {"ada": "6", "hal": "3"}

    # A new, empty gradebook: "earlier run" must not be believed; the change is said.
    (root / "nbgrader_config.py").write_text(
        config + f"\nc.CourseDirectory.db_url = 'sqlite:///{root / 'new.db'}'\n"
    )
    cli.main(["--root", str(root), "grade", FA, *limits, "--student", "ada"])
    out = capsys.readouterr().out
    assert "the gradebook changed since the last run" in out
    assert "This run: 1 submission(s)" in out  # unchanged, yet regraded: not in this gradebook
    with Gradebook(f"sqlite:///{root / 'new.db'}", "transformer-lab") as gb:
        assert gb.find_submission(FA, "ada").score == 6
