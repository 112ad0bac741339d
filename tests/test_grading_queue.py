"""The work queue of ``tlab grade`` (grading/run/queue.py), proven on SQLite and PostgreSQL.

Unit tests drive :class:`WorkQueue` directly: two processes (not threads) claiming from one
queue get each row once; a lease that is not renewed expires and is taken up; a graded row stays
leased until its report holds it; ``put`` queues again what changed, what failed and (with
``force``) what was done before the run began, but never a row another process is working on.
The end-to-end tests (slow) start two ``tlab grade`` processes on one course, and kill one of
them (with its grading processes) while it holds a lease: every submission ends graded exactly
once in the report and the gradebook.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from pg_server import PostgresServer
from test_grading_e2e import FULL, A, _submit, answer
from test_grading_scale import FIXTURE, LIMITS, REPO, TLAB, _gradebook_scores

from transformer_lab import cli
from transformer_lab.grading import autograde
from transformer_lab.grading.autograde import GradeOptions, grade
from transformer_lab.grading.record.report import GradingReport
from transformer_lab.grading.run import lanes
from transformer_lab.grading.run import queue as wq
from transformer_lab.grading.run.kernel_clock import process_tree
from transformer_lab.grading.run.loaded import LoadStamp
from transformer_lab.grading.run.queue import WorkQueue

DRIVER_PY = Path(wq.__file__).with_name("driver.py")


@pytest.fixture(scope="module")
def pg_server(postgresql):
    with PostgresServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'queue.db'}"
    server = request.getfixturevalue("pg_server")
    return server.create_database(f"q{time.monotonic_ns()}")


def _fps(students, value="fp1"):
    return {s: value for s in students}


# ------------------------------------------------------------------ two processes, one queue
_CLAIMER = """
import json, runpy, sys, time
runpy.run_path({driver!r}, run_name="tlab_driver")["grading_without_torch"]()
from transformer_lab.grading.run.queue import WorkQueue
q = WorkQueue({url!r}, "A")
while time.time() < {start}:  # both processes start claiming together
    time.sleep(0.005)
got = []
while (sid := q.claim()) is not None:
    got.append(sid)
    time.sleep(0.002)  # 'grading': the other process claims meanwhile
    assert q.finish(sid, graded=True), sid
print(json.dumps(got))
q.close()
"""


def test_two_processes_claim_every_row_exactly_once(url):
    students = [f"s{i:02d}" for i in range(50)]
    q = WorkQueue(url, "A")
    q.put(students, _fps(students))
    code = _CLAIMER.format(driver=str(DRIVER_PY), url=url, start=time.time() + 3)
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    got = [json.loads(out) for out in outs]
    assert sorted(got[0] + got[1]) == students  # each row once, none lost
    assert got[0] and got[1]  # both processes took part
    assert set(q.states().values()) == {"graded"}
    q.close()


# ------------------------------------------------------------------ leases
def test_a_lease_not_renewed_expires_and_another_process_takes_it_up(url):
    dead = WorkQueue(url, "A", lease=0.5)
    dead.put(["x"], {"x": "fp"})
    assert dead.claim() == "x"
    dead._stop.set()  # the heartbeat stops, as in a killed process
    other = WorkQueue(url, "A", lease=30)
    assert other.claim() is None  # the lease still holds
    time.sleep(1.0)
    assert other.claim() == "x"  # expired: taken up
    assert not dead.finish("x", graded=True)  # no longer the first process's
    assert other.finish("x", graded=True)
    dead.close()
    other.close()


def test_the_heartbeat_keeps_a_lease_and_a_graded_row_until_it_is_recorded(url):
    q = WorkQueue(url, "A", lease=0.6)
    q.put(["x", "y"], _fps(["x", "y"]))
    other = WorkQueue(url, "A", lease=30)
    assert q.claim() == "x"
    time.sleep(1.5)  # longer than the lease: renewed meanwhile
    assert other.claim() == "y"  # not x: still leased
    assert q.finish("x", graded=True)
    time.sleep(1.5)
    assert q.states()["x"] == "graded"
    assert other.claim() is None  # graded, not yet in a report, still ours
    assert q.recorded(["x"]) == 1
    assert q.states()["x"] == "done"
    q.close()
    assert other.claim() is None  # a done row is never claimed again
    other.close()


def test_a_graded_row_whose_process_died_before_recording_is_graded_again(url):
    dead = WorkQueue(url, "A", lease=0.5)
    dead.put(["x"], {"x": "fp"})
    assert dead.claim() == "x" and dead.finish("x", graded=True)
    dead._stop.set()
    time.sleep(1.0)
    other = WorkQueue(url, "A", lease=30)
    assert other.claim() == "x"
    assert dead.recorded(["x"]) == 0  # too late: another process has it
    other.close()
    dead.close()


# ------------------------------------------------------------------ finish, release, put
def test_finish_release_and_put(url):
    q = WorkQueue(url, "A", lease=30)
    q.put(["a", "b", "c"], _fps("abc"))
    assert [q.claim(), q.claim(), q.claim(), q.claim()] == ["a", "b", "c", None]
    assert q.release("a")  # a timed-out submission: back in the queue, any lane takes it
    assert q.claim() == "a"
    assert q.finish("a", graded=True) and q.recorded(["a"]) == 1
    assert q.finish("b", graded=False)
    assert not q.finish("b", graded=True)  # finished already
    assert q.states() == {"a": "done", "b": "failed", "c": "leased"}

    started = time.time()  # a second run begins ...
    time.sleep(0.05)
    assert q.finish("c", graded=True) and q.recorded(["c"]) == 1  # ... c done by the first
    q.put(["a", "b", "c"], _fps("abc"), since=started)
    # failed before the run began: queued again; done: kept (same submission, no force)
    assert q.states() == {"a": "done", "b": "queued", "c": "done"}
    q.put(["a", "c"], _fps("abc"), force=True, since=started)
    # force: a (done before the run began) again; c was graded since, by a process at work
    assert q.states() == {"a": "queued", "b": "queued", "c": "done"}
    q.put(["c"], {"c": "fp2"}, since=started)  # the student handed in again
    assert q.states()["c"] == "queued"
    assert sorted([q.claim(), q.claim(), q.claim()]) == ["a", "b", "c"]
    q.put(["a", "b", "c"], _fps("abc", "fp3"), force=True)  # leased rows are never touched
    assert set(q.states().values()) == {"leased"}
    q.close()


def test_each_assignment_and_shard_has_a_queue_of_its_own(url):
    one, two = WorkQueue(url, "A"), WorkQueue(url, "A#shard-1-of-2")
    one.put(["x"], {"x": "f"})
    assert two.claim() is None and one.claim() == "x"
    one.close()
    two.close()


def test_recording_closes_the_held_queues(tmp_path, url):
    q = WorkQueue(url, "A", lease=30)
    q.put(["x", "y"], _fps("xy"))
    q.claim(), q.claim()
    q.finish("x", graded=True)
    q.finish("y", graded=False)
    wq.hold_until_recorded(tmp_path, "A", q)
    wq.now_recorded(tmp_path, "A", ["x", "y"])
    assert q._stop.is_set()
    assert WorkQueue(url, "A").states() == {"x": "done", "y": "failed"}


def test_lease_seconds_from_the_environment(monkeypatch):
    monkeypatch.delenv("TLAB_QUEUE_LEASE", raising=False)
    assert wq.lease_seconds() == 90.0
    monkeypatch.setenv("TLAB_QUEUE_LEASE", "2.5")
    assert wq.lease_seconds() == 2.5
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv("TLAB_QUEUE_LEASE", bad)
        with pytest.raises(ValueError, match="expected TLAB_QUEUE_LEASE to be a positive"):
            wq.lease_seconds()


# ------------------------------------------------------------------ two `tlab grade` processes
def _course(root: Path, students: dict) -> Path:
    root.mkdir(parents=True)
    (root / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text())
    shutil.copytree(FIXTURE / "solutions", root / "solutions")
    assert cli.main(["--root", str(root), "release"]) == 0
    for sid, how in students.items():
        _submit(root, sid, raw=how) if isinstance(how, str) else _submit(root, sid, how)
    return root


def _queue_rows(root: Path) -> dict[str, tuple[str, int]]:
    """student -> (state, attempts) in the course's SQLite queue."""
    db = sqlite3.connect(root / ".tlab" / "queue.db", timeout=30)
    try:
        rows = db.execute("SELECT student, state, attempts FROM tlab_work_queue").fetchall()
    except sqlite3.OperationalError:  # not made yet
        rows = []
    finally:
        db.close()
    return {s: (state, attempts) for s, state, attempts in rows}


def _has_queue(root: Path) -> bool:
    return (root / ".tlab" / "queue.db").is_file()


def _grade(root: Path, *args: str, lease: str = "90", **popen) -> subprocess.Popen:
    env = dict(os.environ, TLAB_QUEUE_LEASE=lease)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    return subprocess.Popen(
        [*TLAB, "--root", str(root), "grade", *args, *LIMITS],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        **popen,
    )


def _graded_this_run(out: str) -> int:
    m = re.search(r"This run: (\d+) submission", out)
    return int(m.group(1)) if m else 0


@pytest.mark.slow
def test_two_tlab_grade_processes_grade_each_submission_once(tmp_path, bwrap, monkeypatch):
    root = _course(
        tmp_path / "course",
        {"ada": answer(**FULL), "ben": None, "cy": answer(softmax_impl="solution"), "eve": "{"},
    )
    procs = [_grade(root, A) for _ in range(2)]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    for out in outs:
        print(out)
        assert "Traceback" not in out and "could not load" not in out
    # Between them: every submission once (the queue's claims), none twice.
    assert sum(_graded_this_run(out) for out in outs) == 4
    assert _queue_rows(root) == {
        "ada": ("done", 1),
        "ben": ("done", 1),
        "cy": ("done", 1),
        "eve": ("failed", 1),
    }
    scores = _gradebook_scores(f"sqlite:///{root / 'gradebook.db'}")
    assert {s: scores[s] for s in ("ada", "ben", "cy")} == {"ada": 6, "ben": 0, "cy": 2}
    report = GradingReport.load(root, A)
    # channels/publish.settle merges under the report's lock too: the last process to settle
    # keeps the other's rows (this test once caught it dropping them).
    assert sorted(report.students) == ["ada", "ben", "cy", "eve"]
    assert {s: r.score for s, r in report.students.items()} == {
        "ada": 6,
        "ben": 0,
        "cy": 2,
        "eve": None,
    }
    # Nothing new (eve's file withdrawn): no grading process is started at all.
    shutil.rmtree(root / "submitted" / "eve")

    def no_process(*args, **kwargs):
        raise AssertionError("a grading process was started with nothing new to grade")

    monkeypatch.setattr(lanes, "run_driver", no_process)
    monkeypatch.setattr(autograde, "run_driver", no_process)
    again = grade(root, A, GradeOptions(quiet=True))
    assert again.graded_now == [] and again.students["ada"].score == 6


@pytest.mark.slow
def test_a_killed_worker_s_submissions_are_graded_by_the_next_run(tmp_path, bwrap):
    """SIGKILL a ``tlab grade`` (and its grading processes) while it holds a lease, one
    submission graded but not recorded: the next run, started at once, waits for the lease to
    expire and grades both; each submission ends in the report once, with its score."""
    class_ = {"ada": answer(**FULL), "ben": None, "cy": answer(softmax_impl="solution")}
    root = _course(tmp_path / "course", {**class_, "dee": answer(**FULL)})
    first = _grade(root, A, lease="4", start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # one graded (unrecorded), the next in flight
        states = [s for s, _ in _queue_rows(root).values()] if _has_queue(root) else []
        if "graded" in states and "leased" in states:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the first worker never held a lease")
    killed = set(process_tree(first.pid))  # tlab and its grading processes
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate(timeout=60)
    held = {s: st for s, (st, _) in _queue_rows(root).items() if st in ("graded", "leased")}
    assert sorted(held.values()) == ["graded", "leased"]

    second = _grade(root, A, lease="4")
    out = second.communicate(timeout=900)[0]
    print(out)
    assert second.returncode == 0, out
    assert _graded_this_run(out) == 4  # its own two and the killed worker's two
    rows = _queue_rows(root)
    assert {s: st for s, (st, _) in rows.items()} == dict.fromkeys(rows, "done")
    assert all(rows[s][1] == 2 for s in held)  # claimed once by each worker
    report = GradingReport.load(root, A)
    assert {s: r.score for s, r in report.students.items()} == {
        "ada": 6,
        "ben": 0,
        "cy": 2,
        "dee": 6,
    }
    scores = _gradebook_scores(f"sqlite:///{root / 'gradebook.db'}")
    assert scores == {s: r.score for s, r in report.students.items()}
    # The killed processes' private folders (sockets, seed) were removed by the next run.
    left = [
        p
        for base in ("/dev/shm", tempfile.gettempdir())
        for p in Path(base).glob("tlab-*-*-*")
        if p.name.split("-")[2].isdigit() and int(p.name.split("-")[2]) in killed
    ]
    assert not left, left


# ------------------------------------------------------------------ the load stamp
def test_the_load_stamp_follows_the_sources(tmp_path):
    dirs = {"source": "solutions", "release": "notebooks"}
    for folder in ("solutions/A", "notebooks/A"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "A.ipynb").write_text("{}")
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    generated = tmp_path / "tmp" / "A"
    generated.mkdir(parents=True)
    (generated / "A.ipynb").write_text("{}")

    stamp = LoadStamp(tmp_path, dirs, "A", "sqlite:///gradebook.db")
    assert not stamp.matches()  # never loaded
    stamp.save(generated)
    assert LoadStamp(tmp_path, dirs, "A", "sqlite:///gradebook.db").matches()
    assert (stamp.release / "A" / "A.ipynb").is_file()
    assert not LoadStamp(tmp_path, dirs, "A", "sqlite:///other.db").matches()
    for changed in ("solutions/A/A.ipynb", "notebooks/A/A.ipynb", "nbgrader_config.py"):
        before = (tmp_path / changed).read_text()
        (tmp_path / changed).write_text(before + " ")
        assert not LoadStamp(tmp_path, dirs, "A", "sqlite:///gradebook.db").matches(), changed
        (tmp_path / changed).write_text(before)
    assert LoadStamp(tmp_path, dirs, "A", "sqlite:///gradebook.db").matches()
