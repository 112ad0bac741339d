"""`tlab release`: notebooks/ is exactly what nbgrader generates from solutions/.

The first test is the CI guard: a stale, hand-edited, missing or extra student notebook in the
repository fails it. The others prove on a temporary course that the release is deterministic,
that --check notices every kind of drift, and that released notebooks look like student
notebooks (answers and hidden tests removed, outputs empty, nbgrader checksums present).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from transformer_lab import cli
from transformer_lab.grading.authoring.release import build_release, compare_trees, release

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "course"
A = "fx_attention"


def test_repository_notebooks_are_exactly_the_release():
    result = release(REPO, check=True)
    assert result.differences == [], (
        "notebooks/ is not what `tlab release` generates from solutions/:\n  "
        + "\n  ".join(result.differences)
    )


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A temporary course, released once (each release costs a few seconds of nbgrader)."""
    root = tmp_path_factory.mktemp("release_course")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(FIXTURE / "solutions", root / "solutions")
    assert cli.main(["--root", str(root), "release"]) == 0
    return root


@pytest.fixture(scope="module")
def fresh(course, tmp_path_factory):
    """A second, independent release of the same solutions."""
    out = tmp_path_factory.mktemp("fresh")
    build_release(course, out)
    return out


def _released(root: Path) -> Path:
    return root / "notebooks" / A / f"{A}.ipynb"


def test_release_is_deterministic_and_writes_nothing_else(course, fresh):
    assert _released(course).read_bytes() == (fresh / A / f"{A}.ipynb").read_bytes()
    assert compare_trees(fresh / A, course / "notebooks" / A) == []
    assert sorted(p.name for p in course.iterdir()) == [
        "nbgrader_config.py",
        "notebooks",
        "solutions",
    ]


def test_released_notebook_is_a_student_notebook(course):
    nb = nbformat.read(_released(course), as_version=4)
    text = json.dumps(nb)
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text and "hidden=True" not in text
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert len(answers) == 3 and all("raise NotImplementedError()" in c.source for c in answers)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert [c.metadata.nbgrader.points for c in tests] == [2, 3, 1]
    assert all("checksum" in c.metadata.nbgrader for c in tests)
    assert all(c.get("outputs", []) == [] for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("drift", ["hand-edit", "deleted", "extra-file", "reformatted"])
def test_comparison_catches_every_drift(fresh, tmp_path, drift):
    drifted = tmp_path / A
    shutil.copytree(fresh / A, drifted)
    path = drifted / f"{A}.ipynb"
    if drift == "hand-edit":
        nb = json.loads(path.read_text())
        nb["cells"][0]["source"] = ["# edited by hand\n"]
        path.write_text(json.dumps(nb))
        words = "differs from the release (cell 0"
    elif drift == "deleted":
        path.unlink()
        words = "missing"
    elif drift == "extra-file":
        (drifted / "notes.txt").write_text("hand-made")
        words = "not produced by the release"
    else:  # JSON-equal, bytes differ: not a drift
        path.write_text(json.dumps(json.loads(path.read_text()), indent=4))
        assert compare_trees(fresh / A, drifted) == []
        return
    differences = compare_trees(fresh / A, drifted)
    assert len(differences) == 1 and words in differences[0], differences


def test_check_command_fails_on_drift_and_release_repairs_it(course, tmp_path, capsys):
    root = tmp_path / "course"
    shutil.copytree(course, root)  # a released course, without paying for another release
    src = root / "solutions" / A / f"{A}.ipynb"
    src.write_text(
        src.read_text().replace("Fixture: attention", "Fixture: attention, revised")
    )  # stale release
    (root / "notebooks" / "99_old").mkdir()  # an assignment that no longer exists
    assert cli.main(["--root", str(root), "release", "--check"]) == 1
    out = capsys.readouterr().out
    assert (
        f"notebooks/{A}/{A}.ipynb: differs from the release" in out and "notebooks/99_old/: " in out
    )
    assert cli.main(["--root", str(root), "release"]) == 0
    assert "removed stale release folder: 99_old" in capsys.readouterr().out
    assert "revised" in _released(root).read_text()


def test_release_refuses_unnormalised_solutions(tmp_path, capsys):
    shutil.copy(REPO / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    shutil.copytree(FIXTURE / "solutions", tmp_path / "solutions")
    src = tmp_path / "solutions" / A / f"{A}.ipynb"
    nb = nbformat.read(src, as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="leftover output\n")]
    nb.cells[1].execution_count = 3
    nbformat.write(nb, src)
    assert cli.main(["--root", str(tmp_path), "release"]) == 1  # refused before nbgrader runs
    assert "not normalised" in capsys.readouterr().err
    assert not (tmp_path / "notebooks").exists()


def test_release_works_when_the_venv_is_not_on_path(tmp_path, monkeypatch):
    # `.venv/bin/tlab release` or `make test` without activating the venv: nbgrader still has to
    # find its own `alembic` command to open the gradebook.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    shutil.copy(REPO / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    shutil.copytree(FIXTURE / "solutions", tmp_path / "solutions")
    assert cli.main(["--root", str(tmp_path), "release"]) == 0
    assert list(
        (tmp_path / "notebooks" / A).glob("*.ipynb")
    )  # the release directory of nbgrader_config.py


def test_failure_detail_shows_nbgraders_logged_error_not_its_generic_exception():
    from transformer_lab.grading.course import failure_detail

    event = {
        "error": "Traceback ...\nNbGraderException: Please see the the above traceback for details",
        "log": "[INFO] Updating assignment\n[ERROR] There was an error processing assignment: x\n"
        "[ERROR] Traceback ...\nFileNotFoundError: [Errno 2] No such file or directory: 'alembic'\n",
    }
    detail = failure_detail(event)
    assert (
        detail.startswith("[ERROR] There was an error processing assignment")
        and "'alembic'" in detail
    )
    assert failure_detail({"error": "boom", "log": "[INFO] all fine"}) == "boom"
    assert failure_detail(None, "the child's stderr") == "the child's stderr"
