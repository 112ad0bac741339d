"""The formgrader cannot bypass the sandbox (issue 27).

The formgrader's Autograde button calls ``NbGraderAPI.autograde``, which runs nbgrader's
Autograde converter inside the Jupyter server. With the course's ``nbgrader_config.py`` that
converter refuses before it touches a file or the gradebook, and says what to run instead;
``tlab grade``'s own grading processes (which carry the per-run secret) are let through.
"""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from transformer_lab.grading.channels.formgrader import REFUSAL, TlabOnlyExporter
from transformer_lab.grading.record.gradebook import alembic_on_path

REPO = Path(__file__).resolve().parents[1]
A = "01_topic"


def _course(root: Path) -> Config:
    root.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os; os.getuid()")])
    for folder in ("submitted/ada", "autograded/ada"):
        (root / folder / A).mkdir(parents=True)
        nbformat.write(nb, root / folder / A / f"{A}.ipynb")
    (root / "autograded/ada" / A / "marker").write_text("graded by tlab", encoding="utf-8")
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    cfg.CourseDirectory.root = str(root)
    return cfg


def test_the_formgrader_autograde_button_is_refused_and_changes_nothing(tmp_path):
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    alembic_on_path()
    root = tmp_path / "course"
    cfg = _course(root)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    api = NbGraderAPI(CourseDirectory(config=cfg), config=cfg)
    result = api.autograde(A, "ada")  # what the formgrader's Autograde button runs
    assert result["success"] is False
    assert result["error"].rstrip().endswith(REFUSAL)  # the formgrader shows this
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert (root / "autograded/ada" / A / "marker").read_text() == "graded by tlab"
    assert not (root / "gradebook.db").exists()  # nbgrader never reached the gradebook


def test_tlab_grade_processes_are_let_through():
    cfg = Config()
    cfg.GuardedExecute.hidden_secret = "0123abcd"
    assert isinstance(TlabOnlyExporter(config=cfg), TlabOnlyExporter)
    with pytest.raises(RuntimeError, match="tlab grade"):
        TlabOnlyExporter(config=Config())
    assert REFUSAL.count(".") <= 2  # one sentence (and the closing period)


def test_course_config_has_no_unrecognised_execute_option(tmp_path, caplog):
    from nbgrader.preprocessors import Execute

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    with caplog.at_level(logging.WARNING):
        Execute(config=cfg)
    assert "not recognized" not in caplog.text
    assert "allow_errors" not in cfg.get("Execute", {})


@pytest.mark.browser
def test_in_chromium_the_flag_shows_and_the_autograde_button_is_refused(chromium, tmp_path):
    """JupyterLab's formgrader in headless Chromium: tlab's flag is in the "Flagged?" column and
    the Autograde button answers with the refusal, leaving tlab's autograded notebook alone."""
    import secrets
    import sys

    from nbgrader.api import Gradebook
    from playwright.sync_api import expect, sync_playwright

    sys.path.insert(0, str(Path(__file__).parent))
    from browser_helpers import CHROMIUM_ARGS, free_port, start_lab, stop

    from transformer_lab.grading.record import decisions
    from transformer_lab.grading.record.report import (
        GRADED,
        NEEDS_REVIEW,
        GradingReport,
        StudentResult,
    )

    alembic_on_path()
    root = tmp_path / "course"
    _course(root)
    url = f"sqlite:///{root / 'gradebook.db'}"
    with open(root / "nbgrader_config.py", "a") as fh:
        fh.write(f"\nc.CourseDirectory.db_url = {url!r}\n")
    with Gradebook(url, "transformer-lab") as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        gb.add_grade_cell("c1", A, A, max_score=6, cell_type="code")
        for sid in ("ada", "ben"):
            gb.add_student(sid)
            gb.add_submission(A, sid)
            grade = gb.find_grade("c1", A, A, sid)
            grade.auto_score, grade.needs_manual_grade = 3, False
        gb.db.commit()
    report = GradingReport(A, max_score=6)
    report.students["ada"] = StudentResult("ada", GRADED, 3, 6, fingerprint="a")
    report.students["ben"] = StudentResult(
        "ben", NEEDS_REVIEW, 3, 6, reason="timeout", fingerprint="b"
    )
    report.save(root)
    decisions.sync_flags(url, "transformer-lab", report, ["ada", "ben"])
    shutil.copytree(root / "autograded/ada", root / "autograded/ben")  # listed only when graded

    token, port = secrets.token_hex(16), free_port()
    # nbgrader reads nbgrader_config.py from the server's working directory: the course.
    proc = start_lab(root, root, port, token, tmp_path / "jupyterlab.log")
    base = f"http://127.0.0.1:{port}/formgrader"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
            )
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/tree?token={token}")  # logs in (a cookie)
            page.goto(f"{base}/gradebook/{A}/{A}")
            flag = page.locator("td.flagged span.glyphicon-flag")
            expect(flag).to_have_count(1, timeout=30_000)
            expect(page.locator("td.flagged")).to_have_count(2)  # ada's and ben's rows
            page.get_by_text("Show All Names").click()
            expect(page.locator("tr", has=flag)).to_contain_text("ben")

            # The review resolved in the formgrader: ben's page, the flag toggled off.
            link = page.locator("tr", has=flag).locator("a[href*='/formgrader/submissions/']")
            page.goto(f"http://127.0.0.1:{port}" + link.first.get_attribute("href"))
            page.wait_for_load_state("networkidle")
            page.wait_for_function("typeof formgrader !== 'undefined'")
            # The flag toggle (Ctrl+Shift+F on this page): the page's own handler.
            page.evaluate("formgrader.flag()")
            for _ in range(100):
                with Gradebook(url, "transformer-lab") as gb:
                    if not gb.find_submission_notebook(A, A, "ben").flagged:
                        break
                page.wait_for_timeout(100)
            else:
                raise AssertionError("the formgrader did not clear ben's flag")

            page.goto(f"{base}/manage_submissions/{A}")
            ada = page.locator("tr", has_text="ada").locator("td.autograde a")
            expect(ada).to_have_count(1, timeout=30_000)
            ada.click()
            modal = page.locator("#error-modal")
            expect(modal).to_be_visible(timeout=60_000)
            expect(modal).to_contain_text("tlab grade ASSIGNMENT --student STUDENT")
            browser.close()
    finally:
        stop(proc)
    assert (root / "autograded/ada" / A / "marker").read_text() == "graded by tlab"
    from transformer_lab import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["--root", str(root), "review", A]) == 0
    assert "ben resolved in the formgrader (flag cleared" in out.getvalue()
