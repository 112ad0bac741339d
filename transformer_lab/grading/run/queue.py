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

A claim is a lease: the claiming process renews it while it grades (:class:`Lease`); a process
that is killed stops renewing, and once its lease expires another process takes the submission
up again. A row leaves the queue as ``done`` (graded) or ``failed`` (not graded: a later run
queues it again). ``--force`` queues again what was done before this run started.
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

__all__ = ["WorkQueue", "Lease", "queue_url", "LEASE_SECONDS"]

LEASE_SECONDS = 90.0  # renewed every third of it while a submission is graded
QUEUED, LEASED, DONE, FAILED = "queued", "leased", "done", "failed"

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
    PRIMARY KEY (assignment, student)
)
"""


def queue_url(root: Path, gradebook: str) -> str:
    """Where the queue of the course at ``root`` lives (see the module's docstring)."""
    if is_postgres(gradebook):
        return gradebook
    folder = Path(root) / ".tlab"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'queue.db'}"


class WorkQueue:
    """One assignment's queue, shared by every lane of every ``tlab grade`` process."""

    def __init__(self, url: str, assignment: str, lease_seconds: float = LEASE_SECONDS) -> None:
        from sqlalchemy import create_engine, event

        self.assignment = assignment
        self.lease_seconds = lease_seconds
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.postgres = is_postgres(url)
        self.engine = create_engine(url, future=True)
        if not self.postgres:  # wait for another process's claim instead of failing at once

            @event.listens_for(self.engine, "connect")
            def _busy_timeout(dbapi_connection, _record) -> None:  # noqa: ANN001
                dbapi_connection.execute("PRAGMA busy_timeout = 30000")

        with self.engine.begin() as db:
            db.exec_driver_sql(_SCHEMA)

    def put(self, students: Iterable[str], fingerprints: dict[str, str], force: bool = False):
        """Queue ``students`` unless another process has them queued or leased already.

        A row done or failed before is queued again when its fingerprint changed, when it
        failed, or with ``force`` (for rows finished before this call).
        """
        from sqlalchemy import text

        now = time.time()
        with self.engine.begin() as db:
            for sid in students:
                row = db.execute(
                    text(
                        "SELECT state, fingerprint, queued_at FROM tlab_work_queue "
                        "WHERE assignment = :a AND student = :s"
                    ),
                    {"a": self.assignment, "s": sid},
                ).first()
                params = {"a": self.assignment, "s": sid, "f": fingerprints.get(sid, ""), "t": now}
                if row is None:
                    db.execute(
                        text(
                            "INSERT INTO tlab_work_queue (assignment, student, fingerprint, "
                            "state, attempts, queued_at) VALUES (:a, :s, :f, 'queued', 0, :t)"
                        ),
                        params,
                    )
                elif row.state in (DONE, FAILED) and (
                    force or row.state == FAILED or row.fingerprint != params["f"]
                ):
                    db.execute(
                        text(
                            "UPDATE tlab_work_queue SET state = 'queued', fingerprint = :f, "
                            "worker = NULL, lease_until = NULL, queued_at = :t "
                            "WHERE assignment = :a AND student = :s"
                        ),
                        params,
                    )

    def claim(self) -> str | None:
        """The next queued (or abandoned) submission, leased to this process; None when none."""
        from sqlalchemy import text

        now = time.time()
        pick = (
            "SELECT student FROM tlab_work_queue WHERE assignment = :a AND "
            "(state = 'queued' OR (state = 'leased' AND lease_until < :now)) "
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
        return None if row is None else row.student

    def renew(self, student: str) -> bool:
        """Extend this process's lease on ``student``; False if it is no longer ours."""
        return self._set(student, LEASED, time.time() + self.lease_seconds)

    def finish(self, student: str, graded: bool) -> bool:
        """``student`` leaves the queue: done (graded) or failed (a later run queues it again)."""
        return self._set(student, DONE if graded else FAILED, None)

    def release(self, student: str) -> bool:
        """Give ``student`` back to the queue (another lane or process may take it)."""
        return self._set(student, QUEUED, None)

    def _set(self, student: str, state: str, until: float | None) -> bool:
        from sqlalchemy import text

        with self.engine.begin() as db:
            done = db.execute(
                text(
                    "UPDATE tlab_work_queue SET state = :state, lease_until = :until "
                    "WHERE assignment = :a AND student = :s AND worker = :w AND state = 'leased'"
                ),
                {
                    "state": state,
                    "until": until,
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

    def close(self) -> None:
        self.engine.dispose()


class Lease:
    """Renews a claim every third of the lease while a submission is graded (a context)."""

    def __init__(self, queue: WorkQueue, student: str) -> None:
        self.queue, self.student = queue, student
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True, name="tlab-lease")

    def _renew(self) -> None:
        while not self._stop.wait(self.queue.lease_seconds / 3):
            try:
                self.queue.renew(self.student)
            except Exception:  # noqa: BLE001 - the database may be briefly away: try again
                pass

    def __enter__(self) -> Lease:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
