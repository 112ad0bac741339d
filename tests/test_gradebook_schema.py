"""A new gradebook is stamped with nbgrader's schema revision without starting ``alembic``.

nbgrader runs ``alembic heads`` in a subprocess (about 1.7 s) for every new gradebook;
``database.schema_revision`` reads the same revision from nbgrader's migration scripts. The
reference is the ``alembic`` command itself.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

from transformer_lab.grading.record import gradebook as database


def test_schema_revision_is_what_alembic_heads_prints(monkeypatch):
    import nbgrader.api

    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    nbgraders_own = getattr(
        nbgrader.api.get_alembic_version, "__wrapped__", nbgrader.api.get_alembic_version
    )
    assert database.schema_revision() == nbgraders_own()


def test_a_new_gradebook_is_stamped_without_a_subprocess(tmp_path, monkeypatch):
    import subprocess

    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    database.guard_gradebook(url)

    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"a subprocess was started: {args[0]}")

    monkeypatch.setattr(subprocess, "check_output", no_subprocess)
    with Gradebook(url):
        pass
    with sqlite3.connect(tmp_path / "gradebook.db") as db:
        (version,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    assert version == database.schema_revision()
