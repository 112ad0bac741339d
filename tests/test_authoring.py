"""`tlab author`: cell tags become valid nbgrader metadata, idempotently; --check validates."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from transformer_lab import cli
from transformer_lab.grading.authoring.author import author_notebook

REPO = Path(__file__).resolve().parents[1]


def test_repository_solutions_are_normalised(capsys):
    # The CI guard: every solution notebook has valid nbgrader metadata and no outputs.
    code = cli.main(["--root", str(REPO), "author", "--check"])
    assert code == 0, capsys.readouterr().out


def code(source, tags=(), **meta):
    cell = nbformat.v4.new_code_cell(source)
    if tags:
        cell.metadata.tags = list(tags)
    cell.metadata.update(meta)
    return cell


def write(tmp_path, *cells, name="nb.ipynb"):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


ANSWER = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION"
TEST = "assert f(1) == 2\n### BEGIN HIDDEN TESTS\nassert f(2) == 3\n### END HIDDEN TESTS"


def _meta(path, i):
    return nbformat.read(path, as_version=4).cells[i].metadata.get("nbgrader")


def test_tags_become_schema_3_metadata(tmp_path):
    md = nbformat.v4.new_markdown_cell("Explain why.")
    md.metadata.tags = ["solution", "tests:2", "id:why"]
    path = write(
        tmp_path,
        code("import torch", ["readonly"]),
        code(ANSWER, ["solution", "id:f_impl"]),
        code(TEST, ["tests:3"]),
        md,
        code("print('free cell')"),
    )
    result = author_notebook(path)
    assert result.ok and result.written, result.errors
    nb = nbformat.read(path, as_version=4)
    assert _meta(path, 0) == {
        "grade": False,
        "grade_id": f"cell-{nb.cells[0].id}",
        "locked": True,
        "schema_version": 3,
        "solution": False,
    }
    assert _meta(path, 1) == {
        "grade": False,
        "grade_id": "f_impl",
        "locked": False,
        "schema_version": 3,
        "solution": True,
    }
    assert _meta(path, 2) == {
        "grade": True,
        "grade_id": f"cell-{nb.cells[2].id}",
        "locked": True,
        "points": 3,
        "schema_version": 3,
        "solution": False,
    }
    assert _meta(path, 3) == {
        "grade": True,
        "grade_id": "why",
        "locked": False,
        "points": 2,
        "schema_version": 3,
        "solution": True,
    }
    assert _meta(path, 4) is None
    assert nb.cells[1].metadata.tags == [
        "solution",
        "id:f_impl",
    ]  # tags stay: re-running is idempotent


def test_idempotent_and_check_mode(tmp_path):
    cell = code(ANSWER, ["solution"])
    cell.outputs = [nbformat.v4.new_output("stream", text="hi\n")]
    cell.execution_count = 7
    cell.metadata["execution"] = {"iopub.status.busy": "2024-01-01"}
    path = write(tmp_path, cell, code(TEST, ["tests:1"]))
    assert cli.main(["author", "--check", str(path)]) == 1  # outputs, missing metadata
    assert cli.main(["author", str(path)]) == 0
    once = path.read_bytes()
    assert cli.main(["author", str(path)]) == 0
    assert path.read_bytes() == once
    assert cli.main(["author", "--check", str(path)]) == 0
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].outputs == [] and nb.cells[0].execution_count is None
    assert "execution" not in nb.cells[0].metadata


@pytest.mark.parametrize(
    "cells,words",
    [
        ([code("def f(x):\n    return x", ["solution"])], "must mark its answer"),
        ([code(TEST, ["tests:0"])], "positive number of points"),
        ([code(TEST, ["tests:two"])], "positive number of points"),
        ([code(ANSWER, ["solution", "id:bad id!"])], "must match [A-Za-z0-9_-]+"),
        (
            [code(ANSWER, ["solution", "id:x"]), code(TEST, ["tests:1", "id:x"])],
            "duplicate grade id 'x'",
        ),
        ([code(ANSWER, ["solution", "readonly"])], "cannot be combined"),
        ([code("x = 1", ["id:lonely"])], "needs a role tag"),
        (
            [code("assert True\n### BEGIN HIDDEN TESTS\nassert True", ["tests:1"])],
            "without a matching",
        ),
        (
            [code("x = 1\n### BEGIN HIDDEN TESTS\nassert x\n### END HIDDEN TESTS")],
            "not tagged 'tests:N'",
        ),
        ([code(ANSWER)], "not tagged 'solution'"),
    ],
    ids=[
        "no-markers",
        "zero-points",
        "bad-points",
        "bad-id",
        "duplicate",
        "conflict",
        "id-only",
        "unbalanced",
        "hidden-untagged",
        "solution-untagged",
    ],
)
def test_authoring_errors_are_reported_and_nothing_written(tmp_path, cells, words):
    path = write(tmp_path, *cells)
    before = path.read_bytes()
    result = author_notebook(path)
    assert not result.ok
    assert any(words in e for e in result.errors), result.errors
    assert path.read_bytes() == before
    assert cli.main(["author", "--check", str(path)]) == 1


def test_markdown_solution_must_be_graded(tmp_path):
    md = nbformat.v4.new_markdown_cell("answer")
    md.metadata.tags = ["solution"]
    result = author_notebook(write(tmp_path, md))
    assert any("markdown cell must be tagged both" in e for e in result.errors)


def test_hand_written_metadata_is_validated(tmp_path):
    good = code(
        ANSWER,
        nbgrader={
            "grade": False,
            "grade_id": "f",
            "locked": False,
            "schema_version": 3,
            "solution": True,
        },
    )
    bad = code(
        TEST,
        nbgrader={
            "grade": True,
            "grade_id": "t",
            "locked": True,
            "schema_version": 3,
            "solution": False,
        },
    )  # no points
    assert author_notebook(write(tmp_path, good, name="good.ipynb"), check=True).ok
    result = author_notebook(write(tmp_path, good, bad, name="bad.ipynb"), check=True)
    assert any("does not have points" in e for e in result.errors), result.errors


def test_grade_ids_are_stable_and_copies_get_their_own(tmp_path):
    path = write(tmp_path, code(ANSWER, ["solution"]), code(TEST, ["tests:1"]))
    author_notebook(path)
    nb = nbformat.read(path, as_version=4)
    first_id = nb.cells[1].metadata.nbgrader.grade_id
    # A copy-pasted test cell carries the old derived id; it must get a new one, the original keeps its id.
    copy = nbformat.v4.new_code_cell(nb.cells[1].source, metadata=dict(nb.cells[1].metadata))
    nb.cells.append(copy)
    nbformat.write(nb, path)
    result = author_notebook(path)
    assert result.ok, result.errors
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[1].metadata.nbgrader.grade_id == first_id
    assert nb.cells[2].metadata.nbgrader.grade_id == f"cell-{nb.cells[2].id}" != first_id


def test_old_notebooks_get_cell_ids(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [code(ANSWER, ["solution"])]
    nb.nbformat_minor = 4
    for c in nb.cells:
        del c["id"]
    path = tmp_path / "old.ipynb"
    path.write_text(nbformat.writes(nb, version=4))
    result = author_notebook(path)
    assert result.ok, result.errors
    new = nbformat.read(path, as_version=4)
    assert new.nbformat_minor >= 5 and new.cells[0].id
    assert new.cells[0].metadata.nbgrader.grade_id == f"cell-{new.cells[0].id}"
