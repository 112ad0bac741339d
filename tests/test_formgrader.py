"""The formgrader cannot bypass the sandbox (issue 27).

The formgrader's Autograde button calls ``NbGraderAPI.autograde``, which runs nbgrader's
Autograde converter inside the Jupyter server. With the course's ``nbgrader_config.py`` that
converter refuses before it touches a file or the gradebook, and says what to run instead;
``tlab grade``'s own grading processes (which carry the per-run secret) are let through.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from transformer_lab.grading.export import _alembic_on_path
from transformer_lab.grading.formgrader_guard import REFUSAL, TlabOnlyExporter

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

    _alembic_on_path()
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
