"""The work queue of ``tlab grade``: free lanes take the next submission, in any process.

Every ``tlab grade NN`` process puts the submissions it finds new or changed into one queue and
its lanes *claim* them one at a time as they become free, so a slow submission holds back
nobody, and any number of processes share one class: two terminals, Slurm array tasks or
Kubernetes Job pods started on the same course grade each submission exactly once between them.

Where the queue lives:
    PostgreSQL gradebook  a table ``tlab_work_queue`` beside nbgrader's, claimed with
                          ``SELECT ... FOR UPDATE SKIP LOCKED`` (machines anywhere)
    SQLite gradebook      ``.tlab/queue.db`` in the course folder (processes on one machine;
                          SQLite serialises the claims)

A row's life::

    queued  --claim-->  leased  --finish-->  graded  --recorded-->  done
    leased  --finish(graded=False)-->  failed
    leased  --release-->  queued        (a timed-out submission, graded once more)

A claim is a lease that the claiming process renews (every third of it, one heartbeat thread per
process) while it grades the submission *and until its report holds the grade*: ``graded`` means
graded but not yet in the report, which :func:`parallel.save_merged` writes at the end of the
run. A process that is killed stops renewing; once its lease expires (``TLAB_QUEUE_LEASE``
seconds, 90 by default) another process takes the submission up again, whether it was in flight
or graded and unrecorded. A later run queues again a row that is done or failed when the
submission changed (its fingerprint), and, for the submissions that run lists, when it failed or
was finished before that run began (``since``): a ``--force`` run, tests that changed, a new
gradebook. A row finished after the run began was graded by a process working at the same time,
and is not graded twice.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from transformer_lab.grading.record.gradebook import is_postgres

__all__ = ["WorkQueue", "queue_url", "lease_seconds", "hold_until_recorded", "now_recorded"]

QUEUED, LEASED, GRADED, DONE, FAILED = "queued", "leased", "graded", "done", "failed"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tlab_work_queue (
    assignment VARCHAR(128) NOT NULL,
    student VARCHAR(128) NOT NULL,
    fingerprint VARCHAR(128) NOT NULL,
    state VARCHAR(16) NOT NULL,
    worker VARCHAR(128),
    lease_until DOUBLE PRECISION,
    attempts INTEGER NOT NULL DEFAULT 0,
    queued_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    PRIMARY KEY (assignment, student)
)
"""
# A table made before finished_at existed gets the column (both databases accept this form).
_ADD_FINISHED = "ALTER TABLE tlab_work_queue ADD COLUMN finished_at DOUBLE PRECISION"


def lease_seconds() -> float:
    """The lease of a claim: ``TLAB_QUEUE_LEASE`` seconds (a positive number), else 90."""
    raw = os.environ.get("TLAB_QUEUE_LEASE", "").strip()
    if not raw:
        return 90.0
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ValueError(
            f"expected TLAB_QUEUE_LEASE to be a positive number of seconds, got {raw!r}"
        )
    return value


def queue_url(root: Path, gradebook: str) -> str:
    """Where the queue of the course at ``root`` lives (see the module's docstring)."""
    if is_postgres(gradebook):
        return gradebook
    folder = Path(root) / ".tlab"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'queue.db'}"


class WorkQueue:
    """One assignment's queue, shared by every lane of every ``tlab grade`` process."""

    def __init__(self, url: str, assignment: str, lease: float | None = None) -> None:
        from sqlalchemy import create_engine, event

        self.assignment = assignment
        self.lease_seconds = lease if lease is not None else lease_seconds()
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.postgres = is_postgres(url)
        self.engine = create_engine(url, future=True)
        if not self.postgres:  # wait for another process's claim instead of failing at once

            @event.listens_for(self.engine, "connect")
            def _busy_timeout(dbapi_connection, _record) -> None:  # noqa: ANN001
                dbapi_connection.execute("PRAGMA busy_timeout = 30000")

        self._create()
        self._stop = threading.Event()
        self._heart: threading.Thread | None = None

    def _create(self) -> None:
        from sqlalchemy import exc, text

        if self.postgres:  # two processes creating the table at once: one waits for the other
            with self.engine.begin() as db:
                db.exec_driver_sql("SELECT pg_advisory_xact_lock(4141)")
                db.exec_driver_sql(_SCHEMA)
        else:
            with self.engine.begin() as db:
                db.exec_driver_sql(_SCHEMA)
        try:
            with self.engine.begin() as db:
                db.execute(text("SELECT finished_at FROM tlab_work_queue LIMIT 1"))
        except exc.DBAPIError:
            with self.engine.begin() as db:
                db.exec_driver_sql(_ADD_FINISHED)

    def put(
        self,
        students: Iterable[str],
        fingerprints: dict[str, str],
        force: bool = False,
        since: float | None = None,
    ) -> None:
        """Queue ``students`` unless another process has them queued, leased or graded.

        A row done or failed before is queued again when its fingerprint changed; a failed row
        (or with ``force`` a done one) too when it was finished before ``since`` (default: now),
        the time the caller's run began.
        """
        from sqlalchemy import text

        now = time.time()
        since = now if since is None else since
        insert = text(
            "INSERT INTO tlab_work_queue (assignment, student, fingerprint, state, attempts, "
            "queued_at) VALUES (:a, :s, :f, 'queued', 0, :t) "
            "ON CONFLICT (assignment, student) DO NOTHING"
        )
        again = text(
            "UPDATE tlab_work_queue SET state = 'queued', fingerprint = :f, worker = NULL, "
            "lease_until = NULL, finished_at = NULL, queued_at = :t "
            "WHERE assignment = :a AND student = :s AND state IN ('done', 'failed') AND "
            "(fingerprint <> :f OR (finished_at < :since AND (state = 'failed' OR :force)))"
        )
        with self.engine.begin() as db:
            for sid in students:
                params = {"a": self.assignment, "s": sid, "f": fingerprints.get(sid, ""), "t": now}
                if db.execute(insert, params).rowcount == 0:
                    db.execute(again, {**params, "since": since, "force": bool(force)})

    def claim(self) -> str | None:
        """The next queued (or abandoned) submission, leased to this process; None when none."""
        from sqlalchemy import text

        now = time.time()
        pick = (
            "SELECT student FROM tlab_work_queue WHERE assignment = :a AND "
            "(state = 'queued' OR (state IN ('leased', 'graded') AND lease_until < :now)) "
            "ORDER BY attempts, student LIMIT 1"
        )
        if self.postgres:
            pick += " FOR UPDATE SKIP LOCKED"
        sql = text(
            "UPDATE tlab_work_queue SET state = 'leased', worker = :w, lease_until = :until, "
            f"attempts = attempts + 1 WHERE assignment = :a AND student = ({pick}) "
            "RETURNING student"
        )
        params = {"a": self.assignment, "now": now, "w": self.worker}
        params["until"] = now + self.lease_seconds
        # One statement: SQLite takes its write lock when the statement starts (claims are
        # serialised), PostgreSQL locks the chosen row and skips rows other claims hold.
        with self.engine.begin() as db:
            row = db.execute(sql, params).first()
        if row is not None:
            self._beat()
        return None if row is None else row.student

    def leased_elsewhere(self) -> float | None:
        """When the first lease another process holds on an in-flight submission ends (seconds
        since the epoch), or None when no other process is grading one of this queue's."""
        from sqlalchemy import text

        with self.engine.begin() as db:
            until = db.execute(
                text(
                    "SELECT MIN(lease_until) FROM tlab_work_queue WHERE assignment = :a AND "
                    "state = 'leased' AND worker <> :w AND lease_until >= :now"
                ),
                {"a": self.assignment, "w": self.worker, "now": time.time()},
            ).scalar()
        return None if until is None else float(until)

    def renew(self) -> int:
        """Extend every lease this process holds (leased and graded rows); how many."""
        from sqlalchemy import text

        with self.engine.begin() as db:
            done = db.execute(
                text(
                    "UPDATE tlab_work_queue SET lease_until = :until WHERE assignment = :a "
                    "AND worker = :w AND state IN ('leased', 'graded')"
                ),
                {"a": self.assignment, "w": self.worker, "until": time.time() + self.lease_seconds},
            )
        return done.rowcount

    def finish(self, student: str, graded: bool) -> bool:
        """``student`` is graded (kept leased until :meth:`recorded`) or failed (a later run
        queues it again); False if the lease was no longer ours (another process took it)."""
        until = time.time() + self.lease_seconds if graded else None
        return self._set(student, (LEASED,), GRADED if graded else FAILED, until, time.time())

    def release(self, student: str) -> bool:
        """Give ``student`` back to the queue (another lane or process may take it)."""
        return self._set(student, (LEASED,), QUEUED, None, None)

    def recorded(self, students: Iterable[str]) -> int:
        """The report now holds these graded submissions: they are done; how many."""
        return sum(self._set(s, (GRADED,), DONE, None, None, keep=True) for s in students)

    def _set(self, student, was, state, until, finished, keep: bool = False) -> bool:  # noqa: ANN001
        from sqlalchemy import text

        finished_sql = "" if keep else ", finished_at = :finished"
        with self.engine.begin() as db:
            done = db.execute(
                text(
                    f"UPDATE tlab_work_queue SET state = :state, lease_until = :until{finished_sql} "
                    "WHERE assignment = :a AND student = :s AND worker = :w AND state IN "
                    "(" + ", ".join(f"'{w}'" for w in was) + ")"
                ),
                {
                    "state": state,
                    "until": until,
                    "finished": finished,
                    "a": self.assignment,
                    "s": student,
                    "w": self.worker,
                },
            )
        return done.rowcount == 1

    def states(self) -> dict[str, str]:
        """Every queued student's state (for reports and tests)."""
        from sqlalchemy import text

        with self.engine.begin() as db:
            rows = db.execute(
                text("SELECT student, state FROM tlab_work_queue WHERE assignment = :a"),
                {"a": self.assignment},
            )
            return {r.student: r.state for r in rows}

    def _beat(self) -> None:
        """Start the heartbeat that renews this process's leases (once)."""
        if self._heart is None:
            self._heart = threading.Thread(target=self._renewing, daemon=True, name="tlab-lease")
            self._heart.start()

    def _renewing(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            try:
                self.renew()
            except Exception:  # noqa: BLE001 - the database may be briefly away: try again
                pass

    def close(self) -> None:
        """Stop renewing (rows still leased or graded expire) and close the connections."""
        self._stop.set()
        if self._heart is not None:
            self._heart.join(timeout=5)
        self.engine.dispose()


# Queues whose graded rows wait for the report (parallel.save_merged), per (course, assignment).
_UNRECORDED: dict[tuple[str, str], list[WorkQueue]] = {}
_UNRECORDED_LOCK = threading.Lock()


def hold_until_recorded(root: Path, assignment: str, queue: WorkQueue) -> None:
    """Keep ``queue``'s leases on graded rows alive until :func:`now_recorded` is called."""
    with _UNRECORDED_LOCK:
        _UNRECORDED.setdefault((str(Path(root).resolve()), assignment), []).append(queue)


def now_recorded(root: Path, assignment: str, students: Iterable[str]) -> None:
    """The report of ``assignment`` holds ``students``: their graded rows are done, and the
    queues held for it close."""
    with _UNRECORDED_LOCK:
        queues = _UNRECORDED.pop((str(Path(root).resolve()), assignment), [])
    students = list(students)
    for queue in queues:
        try:
            queue.recorded(students)
        finally:
            queue.close()
