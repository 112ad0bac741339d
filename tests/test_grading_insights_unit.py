"""``tlab insights`` counted in-process on hand-made gradebooks (grading/channels/insights*.py).

``make_gradebook`` writes nbgrader's tables and tlab's verdicts directly (bulk SQL, no
grading): these tests, and benchmarks/bench_insights.py's class of 500, use it.
"""

from __future__ import annotations

import csv
import datetime
import random
import re
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from transformer_lab.grading.channels import insights, insights_page
from transformer_lab.grading.channels.insights import GENERIC, mistake_name
from transformer_lab.grading.channels.insights_page import PageOptions, render_page
from transformer_lab.grading.record.decisions import Decision, record_decision

COURSE = "course101"
OVER_DIM = "softmax taken over dimension 0 instead of dim=-1: the slices along `dim` must sum to 1"
OVERFLOW = "overflow: exp() of large scores is inf, and inf/inf is NaN. Subtract the maximum"


_EMPTY: dict[str, Path] = {}  # course -> an empty gradebook, copied for the next test


def _id() -> str:
    return uuid.uuid4().hex


def make_gradebook(url: str, plan: dict, names: dict | None = None, course: str = COURSE) -> None:
    """nbgrader's gradebook and tlab_verdicts holding ``plan``:
    {assignment: {"cells": {grade_id: max_score}, "students": {sid: {grade_id: (score,
    [verdict dicts as the grading process sends them])}}}}; fingerprint "fp-" + sid."""
    from nbgrader.api import Gradebook
    from sqlalchemy import create_engine, text

    from transformer_lab.grading.record.gradebook import alembic_on_path

    file = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    if file is not None and _EMPTY.get(course):
        shutil.copy(_EMPTY[course], file)  # nbgrader's schema takes seconds to create
    else:
        alembic_on_path()  # nbgrader runs alembic to create its tables
        with Gradebook(url, course):
            pass
        if file is not None:
            _EMPTY[course] = Path(tempfile.mkdtemp()) / "empty.db"
            shutil.copy(file, _EMPTY[course])
    engine = create_engine(url, future=True)
    students = sorted({s for a in plan.values() for s in a["students"]})
    rows: dict[str, list[dict]] = {k: [] for k in ("nb", "cell", "sa", "sn", "grade")}
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO student (id, first_name, last_name) VALUES (:id, :f, :l)"),
            [{"id": s, "f": (names or {}).get(s, "First " + s), "l": "Last"} for s in students],
        )
        for name, spec in plan.items():
            aid, nid = _id(), _id()
            conn.execute(
                text("INSERT INTO assignment (id, name, course_id) VALUES (:i, :n, :c)"),
                {"i": aid, "n": name, "c": course},
            )
            rows["nb"].append({"i": nid, "n": name, "a": aid})
            cells = {gid: _id() for gid in spec["cells"]}
            for gid, cid in cells.items():
                rows["cell"].append({"i": cid, "n": gid, "nb": nid, "m": spec["cells"][gid]})
            for sid, got in spec["students"].items():
                sa, sn = _id(), _id()
                rows["sa"].append({"i": sa, "a": aid, "s": sid, "t": datetime.datetime(2026, 1, 1)})
                rows["sn"].append({"i": sn, "a": sa, "nb": nid})
                for gid, (score, _v) in got.items():
                    rows["grade"].append({"i": _id(), "nb": sn, "c": cells[gid], "s": score})
        conn.execute(
            text("INSERT INTO notebook (id, name, assignment_id) VALUES (:i, :n, :a)"), rows["nb"]
        )
        conn.execute(
            text(
                "INSERT INTO base_cell (id, name, notebook_id, type) VALUES (:i, :n, :nb, 'GradeCell')"
            ),
            rows["cell"],
        )
        conn.execute(
            text("INSERT INTO grade_cells (id, max_score, cell_type) VALUES (:i, :m, 'code')"),
            rows["cell"],
        )
        conn.execute(
            text(
                "INSERT INTO submitted_assignment (id, assignment_id, student_id, timestamp) "
                "VALUES (:i, :a, :s, :t)"
            ),
            rows["sa"],
        )
        conn.execute(
            text(
                "INSERT INTO submitted_notebook (id, assignment_id, notebook_id, flagged) VALUES (:i, :a, :nb, 0)"
            ),
            rows["sn"],
        )
        conn.execute(
            text(
                "INSERT INTO grade (id, notebook_id, cell_id, auto_score, needs_manual_grade) "
                "VALUES (:i, :nb, :c, :s, 0)"
            ),
            rows["grade"],
        )
    engine.dispose()
    for name, spec in plan.items():
        _store_bulk(url, course, name, spec)


def _store_bulk(url: str, course: str, assignment: str, spec: dict) -> None:
    engine, table = insights._engine(url)
    cells = insights.exercise_of_cells()
    rows = [
        {
            "course_id": course,
            "assignment": assignment,
            "student_id": sid,
            "fingerprint": "fp-" + sid,
            "grade_id": gid,
            "exercise": cells.get(gid, (gid.removesuffix("_tests"),))[0],
            "lane": "hidden" if v.get("hidden") else "visible",
            "passed": v["passed"],
            "mistake": v.get("mistake"),
            "message": v.get("message", ""),
            "recorded_at": "2026-01-01 00:00:00 UTC",
        }
        for sid, got in spec["students"].items()
        for gid, (_score, verdicts) in got.items()
        for v in verdicts
    ]
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
    engine.dispose()


def ok(hidden: bool = False) -> dict:
    return {"check": "check_x", "hidden": hidden, "passed": True, "mistake": None, "message": ""}


def bad(mistake: str | None, message: str = "", hidden: bool = False) -> dict:
    said = message or f"check_softmax: {mistake or 'the output differs from the reference'}"
    return {
        "check": "check_x",
        "hidden": hidden,
        "passed": False,
        "mistake": mistake,
        "message": said,
    }


def small_class() -> dict:
    """Six students of notebook 01: 3 over the wrong dim, 1 overflow, 2 right; one hidden-only
    failure and one generic failure on the attention exercise."""
    right = (2.0, [ok(), ok(True)])
    students = {
        "s1": {"softmax_tests": (0.0, [bad(OVER_DIM)]), "sdpa_tests": right},
        "s2": {"softmax_tests": (0.0, [bad(OVER_DIM)]), "sdpa_tests": right},
        "s3": {"softmax_tests": (0.0, [bad(OVER_DIM)]), "sdpa_tests": (0.0, [bad(None)])},
        "s4": {"softmax_tests": (0.0, [bad(OVERFLOW)]), "sdpa_tests": right},
        "s5": {"softmax_tests": right, "sdpa_tests": (0.0, [ok(), bad(OVERFLOW, hidden=True)])},
        "s6": {"softmax_tests": right, "sdpa_tests": right},
    }
    return {
        "01_self_attention": {"cells": {"softmax_tests": 2, "sdpa_tests": 2}, "students": students}
    }


@pytest.fixture
def gradebook(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    make_gradebook(url, small_class())
    return url


def _exercise(found, name):
    return next(e for e in found.exercises if e.exercise == name)


def test_mistake_names_are_the_first_clause():
    assert mistake_name(OVERFLOW) == "overflow"
    assert mistake_name(OVER_DIM) == "softmax taken over dimension 0 instead of dim=-1"
    assert mistake_name("you subtract the maximum of the whole tensor; subtract ...") == (
        "you subtract the maximum of the whole tensor"
    )
    assert mistake_name(
        "return a Python int (a count is an int: use * and //), but got a float"
    ) == ("return a Python int (a count is an int: use * and //), but got a float")
    assert mistake_name(None) == GENERIC


def test_counts_what_was_planted(gradebook):
    record = insights.read_class(gradebook, COURSE, "01_self_attention")
    found = insights.count(record)
    soft = _exercise(found, "softmax")
    assert (soft.class_size, soft.passed) == (6, 2)
    got = {m.name: (len(m.students), m.lane, m.named) for m in soft.mistakes}
    assert got == {
        "softmax taken over dimension 0 instead of dim=-1": (3, "visible", True),
        "overflow": (1, "visible", True),
    }
    assert soft.mistakes[0].share == pytest.approx(0.5)
    assert sorted(soft.fractions) == [0, 0, 0, 0, 1, 1]
    sdpa = next(e for e in found.exercises if e.exercise != "softmax")
    assert {m.name: (len(m.students), m.lane) for m in sdpa.mistakes} == {
        "overflow": (1, "hidden"),
        GENERIC: (1, "visible"),
    }


def test_an_overridden_submission_is_set_aside(gradebook):
    decision = Decision("01_self_attention", "s1", "fp-s1", "override", 0.0, "copied", "me", "")
    record_decision(gradebook, COURSE, decision)
    stale = Decision("01_self_attention", "s2", "fp-older", "override", 0.0, "earlier", "me", "")
    record_decision(gradebook, COURSE, stale)  # made on another submission: holds nothing now
    found = insights.count(insights.read_class(gradebook, COURSE, "01_self_attention"))
    assert list(found.set_aside) == ["s1"]
    soft = _exercise(found, "softmax")
    assert soft.class_size == 5
    assert len(soft.mistakes[0].students) == 2


def test_store_replaces_and_keeps_ungraded(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    make_gradebook(url, small_class())
    fresh = [dict(ok(), grade_id="softmax_tests"), dict(ok(True), grade_id="softmax_tests")]
    assert (
        insights.store_verdicts(url, COURSE, "01_self_attention", "s1", "fp-s1", fresh, "graded")
        == 2
    )
    assert (
        insights.store_verdicts(url, COURSE, "01_self_attention", "s2", "fp-s2", [], "not_graded")
        == 0
    )
    assert (
        insights.store_verdicts(url, COURSE, "01_self_attention", "s3", "fp-s3", None, "graded")
        == 0
    )
    found = insights.count(insights.read_class(url, COURSE, "01_self_attention"))
    soft = _exercise(found, "softmax")
    assert soft.passed == 3  # s1 now passes; s2's old verdicts stay
    assert len(soft.mistakes[0].students) == 2


def test_csv_rows_are_neutralised(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    plan = small_class()
    plan["01_self_attention"]["students"]["s6"]["softmax_tests"] = (0.0, [bad("=HYPERLINK(1)")])
    make_gradebook(url, plan)
    csv_path, html_path, _ = insights_page.write_report(url, COURSE, tmp_path / "reports", "01")
    assert csv_path.name == "01_self_attention_insights.csv"
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert {r["mistake"] for r in rows} >= {"'=HYPERLINK(1)", "overflow"}
    over = next(r for r in rows if r["mistake"].startswith("softmax taken"))
    assert (over["students"], over["share_of_class"], over["tests"]) == ("3", "0.500", "visible")
    assert html_path.is_file()


def test_page_is_self_contained_anonymous_and_described(gradebook):
    found = [insights.count(insights.read_class(gradebook, COURSE, "01_self_attention"))]
    page = render_page(found, PageOptions())
    assert "<script" not in page.lower() and "http://" not in page and "https://" not in page
    images = re.findall(r"<img [^>]*>", page)
    assert len(images) == 3  # scores per exercise, mistakes ranked, the map
    for tag in images:
        assert 'src="data:image/png;base64,' in tag
        alt = re.search(r'alt="([^"]*)"', tag).group(1)
        assert len(alt) > 40
    assert (
        "student 6" in page
        and "First s1" not in page
        and "s1" not in re.sub(r"<img[^>]*>", "", page)
    )
    assert "Students below" not in page
    named = render_page(found, PageOptions(names=True, below=0.5))
    assert "First s1 Last (s1)" in named and "Students below 50%" in named


def test_unknown_assignment_is_a_clear_error(gradebook, tmp_path):
    with pytest.raises(ValueError, match="expected an assignment of the gradebook"):
        insights_page.write_report(gradebook, COURSE, tmp_path, "07")


def random_class(n_students: int, notebooks: int, seed: int = 0) -> dict:
    """A generated class over the course's real exercises (``checks/exercises.json``): each
    student passes or makes one of a few mistakes per exercise."""
    cells = insights.exercise_of_cells()
    by_notebook: dict[str, list[str]] = {}
    for gid, (_ex, nb) in cells.items():
        by_notebook.setdefault(nb, []).append(gid)
    rng = random.Random(seed)
    plan = {}
    for nb in sorted(by_notebook)[:notebooks]:
        students = {}
        for i in range(n_students):
            got = {}
            for gid in by_notebook[nb]:
                r = rng.random()
                if r < 0.55:
                    got[gid] = (2.0, [ok(), ok(True)])
                elif r < 0.9:
                    m = f"mistake {rng.randrange(6)} of {gid}: what the check says"
                    got[gid] = (0.0, [bad(m)] if r < 0.8 else [ok(), bad(m, hidden=True)])
                else:
                    got[gid] = (0.0, [bad(None)])
            students[f"student{i:04d}"] = got
        plan[nb] = {"cells": {gid: 2.0 for gid in by_notebook[nb]}, "students": students}
    return plan


def test_whole_course_report(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    make_gradebook(url, random_class(12, 3))
    csv_path, html_path, found = insights_page.write_report(url, COURSE, tmp_path, below=0.5)
    assert csv_path.name == "course_insights.csv" and len(found) == 3
    page = html_path.read_text(encoding="utf-8")
    assert page.count("<img ") == len(found) + 1  # scores per assignment, the map
    assert "Students below 50%" in page


def test_grade_takes_the_notebook_number_as_insights_does(tmp_path):
    """`tlab grade 01` grades 01_self_attention, as `tlab insights 01` reads it; a number that
    names no folder, or several, is passed on for the grader to say what it expected."""
    from transformer_lab.cli import _assignment_folder

    for name in ("01_self_attention", "07_gpt", "07_gpt_extra"):
        (tmp_path / "solutions" / name).mkdir(parents=True)
    assert _assignment_folder(tmp_path, "01") == "01_self_attention"
    assert _assignment_folder(tmp_path, "01_self_attention") == "01_self_attention"
    assert _assignment_folder(tmp_path, "07") == "07"  # two folders start so: not guessed
    assert _assignment_folder(tmp_path, "05") == "05"


def test_a_cell_failing_because_an_earlier_one_fails_is_counted_so(tmp_path):
    """A self-attention whose own softmax is wrong is counted under "fails because softmax
    fails", not as a self-attention mistake; the check's message is kept as the example."""
    import nbformat

    from transformer_lab.grading.channels.publish import cell_facts, failing_dependencies

    nb = nbformat.v4.new_notebook()

    def cell(source, grade_id, solution):
        c = nbformat.v4.new_code_cell(source)
        c.metadata["nbgrader"] = {"grade_id": grade_id, "solution": solution, "grade": not solution}
        return c

    nb.cells = [
        cell("def softmax(x, dim=-1):\n    return x", "softmax_impl", True),
        cell("check_softmax(softmax)", "softmax_tests", False),
        cell("def self_attention(x, w_q, w_k, w_v):\n    return softmax(x @ w_q)", "sa_impl", True),
        cell("check_self_attention(self_attention)", "self_attention_tests", False),
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    builds_on = failing_dependencies(cell_facts(path), {"softmax_tests", "self_attention_tests"})
    assert builds_on == {"self_attention_tests": ("softmax_tests", "softmax")}
    assert failing_dependencies(cell_facts(path), {"self_attention_tests"}) == {}
    # A stub left as released calls nothing, whatever its docstring names: not implemented.
    nb.cells[2] = cell(
        'def self_attention(x, w_q, w_k, w_v):\n    """softmax(x W_q (x W_k)^T) x W_v"""\n'
        "    raise NotImplementedError()",
        "sa_impl",
        True,
    )
    nbformat.write(nb, path)
    assert failing_dependencies(cell_facts(path), {"softmax_tests", "self_attention_tests"}) == {}
    nb.cells[2] = cell(
        "def self_attention(x, w_q, w_k, w_v):\n    return softmax(x @ w_q)", "sa_impl", True
    )
    nbformat.write(nb, path)

    url = f"sqlite:///{tmp_path / 'g.db'}"
    make_gradebook(url, small_class())
    said = "check_self_attention: the attention weights differ from the reference"
    verdicts = [
        dict(bad("softmax taken over dimension 0 instead of dim=-1"), grade_id="softmax_tests"),
        dict(bad(None, said), grade_id="self_attention_tests"),
    ]
    insights.store_verdicts(
        url, COURSE, "01_self_attention", "s1", "fp", verdicts, "graded", builds_on
    )
    found = insights.count(insights.read_class(url, COURSE, "01_self_attention"))
    attention = _exercise(found, "self_attention")
    row = next(m for m in attention.mistakes if "s1" in m.students)
    assert row.name == "fails because softmax fails (calls softmax)"
    assert row.example == said


def test_a_mistake_is_named_by_its_diagnosis_not_by_the_case_observed():
    """One mistake is one row whatever the case's numbers: the name skips an opening
    observation ("... but received 144.") and a raised error's text before its hint."""
    assert (
        mistake_name(
            "for T=3, C=2, D=2 the count is 72, but received 144. That is FLOPs (2 per "
            "multiply-add, as FLOP counters report); count multiply-adds."
        )
        == "That is FLOPs (2 per multiply-add, as FLOP counters report)"
    )
    assert (
        mistake_name(
            "for T=3, C=2, D=2 the count is 72, but received 36. You counted the projections "
            "only; add the two T x T products."
        )
        == "You counted the projections only"
    )
    assert (
        mistake_name(
            "your function raised RuntimeError: The size of tensor a (6) must match the size of "
            "tensor b (4) at non-singleton dimension 1 — the reductions need keepdim=True so they "
            "broadcast back over `dim`"
        )
        == "raised RuntimeError: the reductions need keepdim=True so they broadcast back over `dim`"
    )
    assert mistake_name("the output should have shape (5, 5), but yours has shape (5, 6)") == (
        "the output should have shape (5, 5), but yours has shape (5, 6)"
    )
