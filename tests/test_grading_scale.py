"""A whole class: parallel grading, shards, a PostgreSQL gradebook and the LMS export, end to end.

Everything runs for real: nbgrader, kernels, SQLite and a throw-away PostgreSQL server
(tests/pg_server.py; skipped, saying why, only where the machine lacks PostgreSQL's binaries).
The class is the fixture assignment of test_grading_e2e (max score 6) with five submissions:
a full solution, an untouched notebook, a partial answer, a kernel that dies and a file that is
not a notebook.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pg_server import PostgresServer
from test_grading_e2e import FULL, KILL, A, _submit, answer

from transformer_lab import cli
from transformer_lab.grading.record.gradebook import check_driver_available, guard_gradebook
from transformer_lab.grading.record.report import GRADED, NOT_GRADED, GradingReport
from transformer_lab.grading.run.parallel import deal, parse_shard, select_shard, shard_index

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "course"
TLAB = [sys.executable, "-m", "transformer_lab.cli"]
LIMITS = ["--timeout", "90", "--quiet"]  # generous: no submission here hangs; the machine is shared

# student: (how the submission is made, expected status, expected score)
CLASS = {
    "ada": (answer(**FULL), GRADED, 6),
    "ben": (None, GRADED, 0),
    "cy": (answer(softmax_impl="solution"), GRADED, 2),
    "dee": (answer(**{**FULL, "softmax_impl": KILL}), NOT_GRADED, None),
    "eve": ("{ not a notebook", NOT_GRADED, None),
}


def _make_course(root: Path, db_url: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    config = (REPO / "nbgrader_config.py").read_text()
    if db_url:
        config += f"\nc.CourseDirectory.db_url = {db_url!r}\n"
    (root / "nbgrader_config.py").write_text(config)
    shutil.copytree(FIXTURE / "solutions", root / "solutions")
    assert cli.main(["--root", str(root), "release"]) == 0
    for sid, (how, _, _) in CLASS.items():
        if isinstance(how, str):
            _submit(root, sid, raw=how)
        else:
            _submit(root, sid, how)
    return root


def _tlab(root: Path, *args: str) -> subprocess.Popen:
    env = dict(
        os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    )
    return subprocess.Popen(
        [*TLAB, "--root", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _check_class(report: GradingReport) -> None:
    assert sorted(report.students) == sorted(CLASS)
    for sid, (_, status, score) in CLASS.items():
        r = report.students[sid]
        assert (r.status, r.score) == (status, score), (sid, r)


def _gradebook_scores(url: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(url, "transformer-lab") as gb:
        return {s.student.id: s.score for s in gb.find_assignment(A).submissions}


def _read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


# ------------------------------------------------------------------ shards and lanes (no I/O)
def test_parse_shard_and_its_errors():
    assert parse_shard("3/8") == (3, 8)
    for bad in ("0/4", "5/4", "2", "a/b", "1/0"):
        with pytest.raises(ValueError, match="expected --shard K/N"):
            parse_shard(bad)


def test_shards_cover_every_student_exactly_once_and_are_stable():
    ids = [f"student{i:04d}" for i in range(500)]
    for n in (1, 2, 3, 7):
        slices = [select_shard(ids, (k, n)) for k in range(1, n + 1)]
        assert sorted(s for part in slices for s in part) == sorted(ids)
        assert all(len(part) > 500 / n * 0.7 for part in slices)  # roughly even
    # The slice of a student does not depend on who else is in the class or the order.
    assert [shard_index(s, 4) for s in ids[::-1]] == [shard_index(s, 4) for s in ids][::-1]
    assert deal(list("abcde"), 2) == [["a", "c", "e"], ["b", "d"]]


def test_bad_gradebook_urls_and_options_are_one_sentence_errors(capsys):
    with pytest.raises(ValueError, match=r"postgresql\+psycopg://.*got postgresql://u:\*\*\*@h/db"):
        check_driver_available("postgresql://u:secret@h/db")
    check_driver_available("sqlite:///x.db")  # nothing to check
    for args in (["--jobs", "0"], ["--shard", "3/2"]):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args(["grade", A, *args])
        assert "expected" in capsys.readouterr().err


# ------------------------------------------------------------------ SQLite, --jobs 2
@pytest.fixture(scope="module")
def sqlite_class(tmp_path_factory, bwrap):
    root = _make_course(tmp_path_factory.mktemp("sqlite") / "course")
    proc = _tlab(root, "grade", A, "--jobs", "2", *LIMITS)
    out, _ = proc.communicate(timeout=600)
    return root, proc.returncode, out


@pytest.mark.slow
def test_jobs_2_on_sqlite_grades_every_submission_once(sqlite_class):
    root, code, out = sqlite_class
    print(out)
    assert code == 1, out  # two submissions could not be graded: exit status 1
    _check_class(GradingReport.load(root, A))
    assert "database is locked" not in out
    assert "This run: 5 submission(s)" in out and "2 job(s): 3 graded, 2 not graded" in out
    assert "Time per submission" in out
    scores = _gradebook_scores(f"sqlite:///{root / 'gradebook.db'}")
    assert {s: scores[s] for s in ("ada", "ben", "cy")} == {"ada": 6, "ben": 0, "cy": 2}
    # nbgrader's own CSV covers the whole class (written once, after both lanes).
    rows = list(csv.DictReader(open(root / "reports" / "nbgrader_grades.csv")))
    assert {r["student_id"] for r in rows} >= {"ada", "ben", "cy"}
    assert (root / "feedback" / "ada" / A / f"{A}.html").is_file()


DRIVER_PY = (
    Path(__file__).resolve().parents[1] / "transformer_lab" / "grading" / "run" / "driver.py"
)


def _guarded_writer(url: str, prefix: str, count: int, errors: list) -> None:
    # the gradebook guard as the grading driver loads it: no torch in these four processes
    code = (
        "import runpy\n"
        f"runpy.run_path({str(DRIVER_PY)!r}, run_name='tlab_driver')['grading_without_torch']()\n"
        "from transformer_lab.grading.record.gradebook import guard_gradebook\n"
        "from nbgrader.api import Gradebook\n"
        f"guard_gradebook({url!r})\n"
        f"for i in range({count}):\n"
        f"    with Gradebook({url!r}, 'c') as gb:\n"
        f"        gb.add_student('{prefix}%03d' % i)\n"
    )
    env = dict(
        os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode:
        errors.append(done.stderr[-2000:])


@pytest.mark.slow
def test_concurrent_sqlite_writers_are_serialised_not_locked_out(tmp_path):
    """Four processes add students to one SQLite gradebook at once: none lost, none locked."""
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    guard_gradebook(url)  # this process too, while it creates the file
    from nbgrader.api import Gradebook

    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    with Gradebook(url, "c"):
        pass
    errors: list = []
    threads = [
        threading.Thread(target=_guarded_writer, args=(url, f"w{k}_", 40, errors)) for k in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Gradebook(url, "c") as gb:
        assert len(gb.students) == 160


# ------------------------------------------------------------------ PostgreSQL, shards, export
@pytest.fixture(scope="module")
def postgres(postgresql):
    with PostgresServer() as server:
        yield server


@pytest.mark.slow
def test_concurrent_postgres_writers_on_an_empty_database_lose_nothing(postgres):
    """Four processes start on an empty database at once (racing to create nbgrader's tables)
    and add students concurrently: every row arrives."""
    url = postgres.create_database("race")
    errors: list = []
    threads = [
        threading.Thread(target=_guarded_writer, args=(url, f"p{k}_", 40, errors)) for k in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    from nbgrader.api import Gradebook

    with Gradebook(url, "c") as gb:
        assert len(gb.students) == 160


@pytest.fixture(scope="module")
def pg_class(postgres, tmp_path_factory, bwrap):
    """Two shards grade the class at the same time into one PostgreSQL gradebook."""
    url = postgres.create_database("gradebook")
    root = _make_course(tmp_path_factory.mktemp("pg") / "course", db_url=url)
    # Both start on an empty database, as a job array would: they race to create the tables.
    procs = [_tlab(root, "grade", A, "--shard", f"{k}/2", *LIMITS) for k in (1, 2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    return root, url, outs


@pytest.mark.slow
def test_two_shards_at_once_into_postgres_merge_into_one_report(pg_class):
    root, url, outs = pg_class
    for out in outs:
        print(out)
        assert "could not load" not in out and "Traceback" not in out
    expected = [select_shard(sorted(CLASS), (k, 2)) for k in (1, 2)]
    assert expected[0] and expected[1]  # the fixture class lands in both shards
    assert sorted(expected[0] + expected[1]) == sorted(CLASS)
    for out, part in zip(outs, expected):  # each shard graded exactly its slice
        assert f"This run: {len(part)} submission(s)" in out
    report = GradingReport.load(root, A)
    _check_class(report)  # the merged report: every student, once, with the right outcome
    rows = list(csv.DictReader(open(root / "reports" / f"{A}_grades.csv")))
    assert sorted(r["student_id"] for r in rows) == sorted(CLASS)
    scores = _gradebook_scores(url)
    assert {s: scores[s] for s in ("ada", "ben", "cy")} == {"ada": 6, "ben": 0, "cy": 2}
    assert not (root / "gradebook.db").exists()  # nothing went to SQLite


@pytest.mark.slow
def test_export_canvas_and_moodle_from_postgres_then_regrade(pg_class):
    root, url, _ = pg_class
    out_dir = root / "lms"
    assert cli.main(["--root", str(root), "export", "--out", str(out_dir)]) == 0
    canvas = _read_csv(out_dir / "canvas_grades.csv")
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A]
    assert canvas[1][0] == "Points Possible" and canvas[1][5] == "6"
    by_login = {row[3]: row[5] for row in canvas[2:]}
    assert by_login == {"ada": "6", "ben": "0", "cy": "2", "dee": "", "eve": ""}
    moodle = _read_csv(out_dir / "moodle_grades.csv")
    assert moodle[0] == [
        "First name",
        "Last name",
        "ID number",
        "Email address",
        A,
        f"{A} feedback",
    ]
    by_id = {row[2]: (row[4], row[5]) for row in moodle[1:]}
    assert by_id["ben"] == ("0", "")  # a real zero stays a zero
    assert by_id["dee"][0] == "-" and by_id["dee"][1].startswith(
        "NOT GRADED: not graded: the kernel died"
    )
    assert by_id["eve"][0] == "-" and "not a notebook" in by_id["eve"][1]
    missing = _read_csv(out_dir / "not_graded.csv")
    assert sorted(r[0] for r in missing[1:]) == ["dee", "eve"]

    # cy finishes the work and resubmits; dee fixes the crash. Re-grade with two jobs.
    _submit(root, "cy", answer(**FULL))
    _submit(root, "dee", answer(softmax_impl="solution"))
    proc = _tlab(root, "grade", A, "--jobs", "2", *LIMITS)
    out, _ = proc.communicate(timeout=600)
    print(out)
    # Only the changed ones, and eve's (submissions that could not be graded are always retried).
    assert "This run: 3 submission(s)" in out and "(earlier run)" in out
    report = GradingReport.load(root, A)
    assert (report.students["cy"].score, report.students["dee"].score) == (6, 2)
    assert report.students["ada"].score == 6 and report.students["eve"].status == NOT_GRADED
    assert _gradebook_scores(url)["cy"] == 6
    assert (
        cli.main(["--root", str(root), "export", "--format", "canvas", "--out", str(out_dir)]) == 0
    )
    by_login = {row[3]: row[5] for row in _read_csv(out_dir / "canvas_grades.csv")[2:]}
    assert by_login == {"ada": "6", "ben": "0", "cy": "6", "dee": "2", "eve": ""}
