"""A whole term, end to end (issue 27): every step an instructor and two students take.

One course (the fixture assignment, 6 points) on a real PostgreSQL gradebook, shared by the
tests below in order:

1. ``tlab roster import`` of Canvas's gradebook export (ada, hal, cy; Canvas's test student
   skipped); ``tlab release`` and ``nbgrader release_assignment`` into an exchange; ada and hal
   ``fetch_assignment`` and ``submit`` from their own homes (ada the full solution, hal an
   softmax that never returns); ``nbgrader collect``; ``tlab grade --jobs 2``.
2. hal's submission is flagged (a timeout on the kernel's own clock; the test cell stopped at
   its limit is not run again by the grader): nbgrader's ``flagged``, shown in the
   formgrader's "Flagged?" column in headless Chromium.
3. ``tlab review`` lists it and shows the evidence; an override with a note settles it (who,
   when, why kept in the gradebook); nbgrader's ``generate_feedback`` remakes a page from what
   tlab graded, nbgrader's feedback is released and each student fetches a page with their own
   score and no hidden test.
4. ``tlab export``'s Canvas file passes Canvas's import rules (tests/test_grading_lms.py); cy,
   who never submitted, is blank, never 0.
5. ada changes her submission and submits again; ``tlab grade`` grades only hers, the gradebook
   and the Canvas file show her new score, hal's score and decision stay, and the summary says
   hal was reviewed (not "NEEDS REVIEW (earlier run)").
6. The same class's Moodle roster (its id column named: Moodle exports no user name), and the
   Moodle file against Moodle's rules (``-``, never blank).
7. A due date with a penalty, an extension, and a hidden assert added after grading: the
   submissions graded under the old test are named and graded again.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook
from test_grading_e2e import FULL, NO_MAX, A, _cell, _solution_source
from test_grading_lms import _check_canvas, _check_moodle, _rows

from transformer_lab import cli
from transformer_lab.grading.record import decisions
from transformer_lab.grading.record.report import GRADED, NEEDS_REVIEW, GradingReport

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # nbgrader's command line, beside this interpreter
FIXTURE = Path(__file__).parent / "fixtures" / "course"
COURSE = "transformer-lab"
LIMITS = ["--timeout", "6", "--budget", "6", "--quiet"]  # a hang costs 6 s per attempt
CANVAS_ID = "4711"  # the assignment's id in Canvas (its URL)
HANG = "def softmax(x, dim=-1):\n    while True:\n        pass"  # the test cell calls it

CANVAS_ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (9001)
    Points Possible,,,,,10
"Lovelace, Ada",201,S201,ada,Sec A,8
"Hopper, Hal",202,S202,hal,Sec A,
"Student, Test",999,,test-student,Sec A,
"Cy, Cyrus",203,,cy,Sec B,
"""
MOODLE_ROSTER = """First name,Last name,ID number,Institution,Department,Email address,Quiz 1 (Real)
Ada,Lovelace,ada,,,ada@uni.example,8.00
Hal,Hopper,hal,,,hal@uni.example,-
Cyrus,Cy,cy,,,cy@uni.example,-
"""

pytestmark = [pytest.mark.slow, pytest.mark.needs_bwrap, pytest.mark.needs_postgres]


def _nbgrader(cwd: Path, *args: str, home: Path | None = None) -> str:
    """nbgrader's own command line (a student with ``home`` as their home folder)."""
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ["PATH"]]))
    if home is not None:
        env["HOME"] = str(home)
    done = subprocess.run(
        [str(BIN / "nbgrader"), *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def _tlab(root: Path, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["--root", str(root), *argv])
    return code, out.getvalue()


def _answers(nb, sources: dict[str, str], root: Path) -> None:
    for gid, src in sources.items():
        _cell(nb, gid).source = _solution_source(root, gid) if src == "solution" else src


def _scores(url: str) -> dict[str, float]:
    with Gradebook(url, COURSE) as gb:
        return {s.student.id: s.score for s in gb.find_assignment(A).submissions}


def _flags(url: str) -> dict[str, bool]:
    with Gradebook(url, COURSE) as gb:
        return {s.student.id: s.notebooks[0].flagged for s in gb.find_assignment(A).submissions}


def _canvas(root: Path) -> dict[str, str]:
    rows = _rows(root / "reports" / "canvas_grades.csv")
    _check_canvas(rows, {"201": "ada", "202": "hal", "203": "cy"})
    assert rows[0][5] == f"{A} ({CANVAS_ID})"  # updates Canvas's assignment, never a new one
    return {r[3]: r[5] for r in rows[2:]}


@pytest.fixture(scope="module")
def term(tmp_path_factory, bwrap, postgresql):
    """Step 1: roster, release through the exchange, two submissions, `tlab grade --jobs 2`."""
    from pg_server import PostgresServer

    tmp = tmp_path_factory.mktemp("term")
    started = time.monotonic()
    with PostgresServer() as server:
        url = server.create_database("term_e2e")
        root = tmp / "course"
        root.mkdir()
        config = (REPO / "nbgrader_config.py").read_text()
        (root / "nbgrader_config.py").write_text(config + f"\nc.CourseDirectory.db_url = {url!r}\n")
        shutil.copytree(FIXTURE / "solutions", root / "solutions")
        exchange = tmp / "exchange"
        exchange.mkdir()
        ex = [f"--Exchange.root={exchange}", f"--CourseDirectory.course_id={COURSE}"]
        t = SimpleNamespace(root=root, url=url, tmp=tmp, ex=ex, out={})

        roster = tmp / "canvas_export.csv"
        roster.write_text(CANVAS_ROSTER, encoding="utf-8")
        t.out["roster"] = _tlab(root, "roster", "import", str(roster))
        assert _tlab(root, "release")[0] == 0
        _nbgrader(root, "release_assignment", A, *ex)
        t.out["outbound"] = (exchange / COURSE / "outbound" / A / f"{A}.ipynb").is_file()

        def submit(student: str, sources: dict[str, str], fetch: bool = True) -> None:
            home = tmp / student
            home.mkdir(exist_ok=True)
            mine = [*ex, f"--Exchange.cache={home / '.cache'}", f"--student={student}"]
            if fetch:
                _nbgrader(home, "fetch_assignment", A, *mine, home=home)
            path = home / A / f"{A}.ipynb"
            nb = nbformat.read(path, as_version=4)
            _answers(nb, sources, root)
            nbformat.write(nb, path)
            _nbgrader(home, "submit", A, *mine, home=home)

        t.submit = submit
        submit("ada", FULL)
        submit("hal", {**FULL, "softmax_impl": HANG})
        _nbgrader(root, "collect", A, *ex)
        t.out["collected"] = {
            s: [(root / "submitted" / s / A / f).is_file() for f in (f"{A}.ipynb", "timestamp.txt")]
            for s in ("ada", "hal")
        }
        t.out["grade"] = _tlab(root, "grade", A, "--jobs", "2", *LIMITS)
        t.seconds = {"set-up and first grading": time.monotonic() - started}
        yield t
    print("term e2e, seconds per step:", {k: round(v, 1) for k, v in t.seconds.items()})


def test_roster_release_submit_and_grade_with_two_jobs(term):
    code, out = term.out["roster"]
    assert code == 0 and "3 student(s) from a Canvas export" in out
    with Gradebook(term.url, COURSE) as gb:
        hal = gb.find_student("hal")
        assert (hal.first_name, hal.last_name, hal.lms_user_id) == ("Hal", "Hopper", "202")
        assert "test-student" not in {s.id for s in gb.students}

    assert term.out["outbound"]  # nbgrader release_assignment put the release in the exchange
    assert term.out["collected"] == {"ada": [True, True], "hal": [True, True]}  # with timestamps
    code, out = term.out["grade"]
    assert code == 0, out
    report = GradingReport.load(term.root, A)
    assert {s: (r.status, r.score) for s, r in report.students.items()} == {
        "ada": (GRADED, 6),
        "hal": (NEEDS_REVIEW, 4),  # softmax (2 points) never returns
    }
    assert "timeout: 1 cell(s) stopped at the" in report.students["hal"].reason
    assert _scores(term.url) == {"ada": 6, "hal": 4}  # the PostgreSQL gradebook
    # The test cell was stopped at its limit in hal's kernel; the grader did not call the
    # hanging softmax again (the cell cost its limit once).
    nb = nbformat.read(term.root / "autograded" / "hal" / A / f"{A}.ipynb", as_version=4)
    texts = [o.get("text", "") + o.get("evalue", "") for o in _cell(nb, "test_softmax").outputs]
    assert any("[in your notebook's kernel] CellTimeoutError" in t for t in texts), texts
    assert any("grading this cell took longer than its time limit" in t for t in texts), texts
    assert not any("did not finish within the time limit" in t for t in texts), texts
    assert _flags(term.url) == {"ada": False, "hal": True}
    # The summary agrees with itself: one graded, one flagged, in both paragraphs.
    assert "NEEDS REVIEW" in next(ln for ln in out.splitlines() if ln.strip().startswith("hal"))
    assert "(1 of the graded need review)" in out
    assert "with 2 job(s): 2 graded, 0 not graded (1 of the graded need review)" in out


def test_the_flag_shows_in_the_formgrader(term, chromium):
    """The formgrader (JupyterLab in headless Chromium, on the same PostgreSQL gradebook)
    lists hal's submission as flagged."""
    from browser_helpers import CHROMIUM_ARGS, free_port, start_lab, stop
    from playwright.sync_api import expect, sync_playwright

    started = time.monotonic()
    token, port = secrets.token_hex(16), free_port()
    # nbgrader reads nbgrader_config.py (PostgreSQL) from the server's working directory.
    proc = start_lab(term.root, term.root, port, token, term.tmp / "jupyterlab.log")
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
            )
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/tree?token={token}")  # logs in (a cookie)
            page.goto(f"http://127.0.0.1:{port}/formgrader/gradebook/{A}/{A}")
            flag = page.locator("td.flagged span.glyphicon-flag")
            expect(flag).to_have_count(1, timeout=60_000)
            expect(page.locator("td.flagged")).to_have_count(2)  # ada's and hal's rows
            page.get_by_text("Show All Names").click()
            expect(page.locator("tr", has=flag)).to_contain_text("Hopper, Hal")  # from the roster
            browser.close()
    finally:
        stop(proc)
    term.seconds["formgrader in Chromium"] = time.monotonic() - started


def test_review_settles_the_flag_and_feedback_reaches_the_students(term):
    started = time.monotonic()
    code, out = _tlab(term.root, "review", A)
    assert code == 0 and "1 submission(s) to review" in out and "hal" in out
    code, out = _tlab(term.root, "review", A, "hal")
    assert "timeout: 1 cell(s) stopped at the 6 s time limit" in out
    note = "softmax loops; the rest is right"
    argv = ["review", A, "hal", "--score", "5", "--note", note, "--by", "prof"]
    code, out = _tlab(term.root, *argv)
    assert code == 0 and "score set to 5 by prof" in out
    assert _flags(term.url) == {"ada": False, "hal": False}
    history = decisions.decision_history(term.url, COURSE, A, "hal")
    assert [(d.decision, d.score, d.decided_by, d.note) for d in history][1:] == [
        ("override", 5.0, "prof", note)
    ]
    assert "0 submission(s) to review" in _tlab(term.root, "review", A)[1]

    # Feedback: tlab grade wrote the pages; nbgrader's exchange hands them back. nbgrader's own
    # feedback step also works on what tlab graded (ada's page made again by it).
    _nbgrader(term.root, "generate_feedback", A, "--student", "ada", "--force")
    _nbgrader(term.root, "release_feedback", A, *term.ex)
    for student, score in (("ada", "6.0"), ("hal", "5.0")):  # the decided grade
        home = term.tmp / student
        mine = [*term.ex, f"--Exchange.cache={home / '.cache'}", f"--student={student}"]
        _nbgrader(home, "fetch_feedback", A, *mine, home=home)
        pages = list((home / A / "feedback").glob(f"*/{A}.html"))
        assert len(pages) == 1, pages
        html = pages[0].read_text()
        assert f"Score: {score} / 6.0" in html
        assert "BEGIN HIDDEN TESTS" not in html and "hidden=True" not in html
    term.seconds["review and feedback"] = time.monotonic() - started


def test_the_canvas_file_follows_canvas_rules(term):
    code, out = _tlab(term.root, "export", "--format", "canvas", "--canvas-id", f"{A}={CANVAS_ID}")
    assert code == 0, out
    assert _canvas(term.root) == {"ada": "6", "hal": "5", "cy": ""}  # cy: nothing submitted
    missing = _rows(term.root / "reports" / "not_graded.csv")
    assert [r[0] for r in missing[1:]] == ["cy"] and "nothing submitted" in missing[1][2]


def test_a_changed_submission_is_regraded_and_the_rest_stays(term):
    started = time.monotonic()
    term.submit("ada", {"softmax_impl": NO_MAX}, fetch=False)  # resubmits: softmax now wrong
    _nbgrader(term.root, "collect", "--update", A, *term.ex)
    code, out = _tlab(term.root, "grade", A, "--jobs", "2", *LIMITS)
    assert code == 0, out
    assert "This run: 1 submission(s)" in out  # ada only; hal's submission is unchanged
    report = GradingReport.load(term.root, A)
    assert (report.students["ada"].status, report.students["ada"].score) == (GRADED, 4)
    assert (report.students["hal"].status, report.students["hal"].score) == (NEEDS_REVIEW, 4)
    assert _scores(term.url) == {"ada": 4, "hal": 5}  # hal: the override, in nbgrader too
    # hal's review is settled by the decision in the gradebook: no stale "NEEDS REVIEW".
    hal_line = next(ln for ln in out.splitlines() if ln.strip().startswith("hal"))
    assert "REVIEWED: score set to 5 by prof" in hal_line and "NEEDS REVIEW" not in hal_line
    assert "(earlier run)" in hal_line
    assert "Flagged for review" not in out and "(0 of the graded need review; 1 reviewed)" in out
    assert _flags(term.url) == {"ada": False, "hal": False}
    assert [d.decision for d in decisions.decision_history(term.url, COURSE, A, "hal")] == [
        "flagged",
        "override",
    ]
    code, out = _tlab(term.root, "export", "--format", "canvas", "--canvas-id", f"{A}={CANVAS_ID}")
    assert code == 0, out
    assert _canvas(term.root) == {"ada": "4", "hal": "5", "cy": ""}
    term.seconds["resubmission and regrade"] = time.monotonic() - started


def test_the_moodle_file_follows_moodle_rules(term):
    roster = term.tmp / "moodle_export.csv"
    roster.write_text(MOODLE_ROSTER, encoding="utf-8")
    assert _tlab(term.root, "roster", "import", str(roster), "--id-column", "ID number")[0] == 0
    code, out = _tlab(term.root, "export", "--format", "moodle")
    assert code == 0, out
    rows = _rows(term.root / "reports" / "moodle_grades.csv")
    _check_moodle(rows, {"ada@uni.example", "hal@uni.example", "cy@uni.example"})
    by_id = {r[2]: (r[4], r[5]) for r in rows[1:]}
    assert set(by_id) == {"ada", "hal", "cy"}
    assert by_id["ada"] == ("4", "") and by_id["hal"][0] == "5"  # hal: the reviewed score
    assert by_id["cy"] == ("-", "NOT GRADED: nothing submitted")  # "-": Moodle skips it


def _due(days: float) -> str:
    import datetime as dt

    when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=days)
    return when.strftime("%Y-%m-%dT%H:%M")


def test_late_work_an_extension_and_a_changed_hidden_test(term):
    """7. A due date passed an hour before the submissions: a 10% penalty; an extension for
    ada; then the instructor adds a hidden assert to test_causal after grading: the next
    ``tlab grade`` names both submissions graded under the old test and grades them again."""
    started = time.monotonic()
    code, out = _tlab(term.root, "due", A, _due(-1 / 24), "--late", "penalty", "--per-day", "10")
    assert code == 0 and "late work loses 10% per day" in out, out
    assert _canvas_after_export(term) == {"ada": "3.60", "hal": "4.50", "cy": ""}  # 4, 5 - 10%
    page = (term.root / "feedback" / "hal" / A / f"{A}.html").read_text(encoding="utf-8")
    assert "(Score: 4.5 / 6.0)" in page and "after the due date: -0.5 points" in page
    assert _tlab(term.root, "extend", A, "ada", _due(1), "--note", "ill", "--by", "prof")[0] == 0
    assert _canvas_after_export(term)["ada"] == "4"

    source = term.root / "solutions" / A / f"{A}.ipynb"
    nb = nbformat.read(source, as_version=4)
    cell = _cell(nb, "test_causal")
    hidden = 'assert causal_mask(2).shape == (3, 3), "an instructor\'s hidden assert"\n'
    cell.source = cell.source.replace("### END HIDDEN TESTS", hidden + "### END HIDDEN TESTS")
    nbformat.write(nb, source)
    code, out = _tlab(term.root, "grade", A, "--jobs", "2", *LIMITS)
    assert code == 0, out
    assert "the tests of fx_attention/test_causal changed since 2 submission(s) were graded; " \
        "graded again: ada, hal" in out  # fmt: skip
    report = GradingReport.load(term.root, A)
    assert "graded again: the tests of fx_attention/test_causal changed" in (
        "; ".join(report.students["ada"].notes + [report.students["ada"].tests_note])
    )
    # The hidden assert counts (decided by the grader): test_causal's point is lost by both.
    assert report.students["ada"].score == 3 and report.students["hal"].score == 3
    assert _canvas_after_export(term) == {"ada": "3", "hal": "4.50", "cy": ""}  # hal: decided 5
    term.seconds["late work and a changed hidden test"] = time.monotonic() - started


def _canvas_after_export(term) -> dict[str, str]:
    code, out = _tlab(term.root, "export", "--format", "canvas", "--canvas-id", f"{A}={CANVAS_ID}")
    assert code == 0, out
    return _canvas(term.root)
