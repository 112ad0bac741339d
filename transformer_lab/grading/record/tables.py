"""tlab's own tables in the gradebook's database, beside nbgrader's (SQLite or PostgreSQL).

    tlab_score_history   every change of a submission's grade: old, new, who, when, why
    tlab_test_versions   the fingerprint of each graded cell's tests a submission was graded under
    tlab_due             an assignment's late policy (its due date is nbgrader's ``duedate``)
    tlab_extensions      a student's extension of one assignment (until when, who, why)
    tlab_roster          what the LMS roster says beyond nbgrader's student columns (SIS id,
                         section, the LMS's own columns)

The review decisions have their table in :mod:`.decisions`. Every table is created on first use.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import getpass

__all__ = ["connect", "now", "whoami", "TABLES"]


def _metadata():
    from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text

    meta = MetaData()

    def table(name: str, *columns):
        key = Column("id", Integer, primary_key=True, autoincrement=True)
        return Table(name, meta, key, Column("course_id", String(128), nullable=False), *columns)

    table(
        "tlab_score_history",
        Column("assignment", String(128), nullable=False),
        Column("student_id", String(128), nullable=False),
        Column("old_score", Float, nullable=True),
        Column("new_score", Float, nullable=True),
        Column("what", String(32), nullable=False),  # grade | regrade | decision | late
        Column("why", Text, nullable=False),
        Column("changed_by", String(128), nullable=False),
        Column("changed_at", String(32), nullable=False),
    )
    table(
        "tlab_test_versions",
        Column("assignment", String(128), nullable=False),
        Column("student_id", String(128), nullable=False),
        Column("cell", String(128), nullable=False),
        Column("fingerprint", String(64), nullable=False),
        Column("recorded_at", String(32), nullable=False),
    )
    table(
        "tlab_due",
        Column("assignment", String(128), nullable=False),
        Column("policy", String(16), nullable=False),  # none | penalty | refuse
        Column("per_day", Float, nullable=True),  # percent of the grade per day started
        Column("set_by", String(128), nullable=False),
        Column("set_at", String(32), nullable=False),
    )
    table(
        "tlab_extensions",
        Column("assignment", String(128), nullable=False),
        Column("student_id", String(128), nullable=False),
        Column("until", String(32), nullable=False),  # ISO 8601, UTC
        Column("note", Text, nullable=False),
        Column("granted_by", String(128), nullable=False),
        Column("granted_at", String(32), nullable=False),
    )
    table(
        "tlab_roster",
        Column("student_id", String(128), nullable=False),
        Column("lms", String(16), nullable=False),
        Column("sis_user_id", String(128), nullable=False),
        Column("section", String(256), nullable=False),
        Column("extra", Text, nullable=False),  # the row's other columns, as JSON
    )
    return meta


TABLES = (
    "tlab_score_history",
    "tlab_test_versions",
    "tlab_due",
    "tlab_extensions",
    "tlab_roster",
)


@contextlib.contextmanager
def connect(url: str):
    """``with connect(url) as (conn, tables):`` one transaction on the gradebook's database."""
    from sqlalchemy import create_engine

    engine = create_engine(url, future=True)
    meta = _metadata()
    try:
        meta.create_all(engine, checkfirst=True)
        with engine.begin() as conn:
            yield conn, meta.tables
    finally:
        engine.dispose()


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def whoami(by: str = "") -> str:
    return by or getpass.getuser()
