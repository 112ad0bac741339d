"""One process may open the gradebooks of several courses: each takes its own lock.

``database.guard_gradebook`` patches nbgrader's ``Gradebook`` once per process. It once bound
the lock to the first course's URL, so a later course in the same process (a test session, a
notebook grading two courses) waited on the first course's lock file, or on a PostgreSQL server
that was gone. Run in a fresh interpreter, since the guard is installed once per process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_each_gradebook_takes_the_lock_of_its_own_url(tmp_path):
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from nbgrader.api import Gradebook
        from transformer_lab.grading.record import gradebook as database

        base = Path({str(tmp_path)!r})
        # First guarded for a PostgreSQL server that no longer exists (an earlier course).
        database.guard_gradebook("postgresql+psycopg://tlab@/gone?host=" + str(base / "nowhere"))
        for name in ("a", "b"):
            url = f"sqlite:///{{base / name / 'gradebook.db'}}"
            (base / name).mkdir()
            database.guard_gradebook(url)
            with Gradebook(url, "course") as gb:
                gb.add_student(f"student_{{name}}")
                lock = database._file_lock(base / name / "gradebook.db")
                assert lock._depth == 1, lock._depth  # held while open, beside this gradebook
            assert lock._depth == 0
            assert (base / name / "gradebook.db.lock").exists()
            with Gradebook(url, "course") as gb:
                assert [s.id for s in gb.students] == [f"student_{{name}}"]
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
