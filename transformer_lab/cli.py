"""The ``tlab`` command: author, release and grade the course.

    tlab author [PATHS] [--check]     tags -> nbgrader metadata, strip outputs, validate
    tlab release [--check]            regenerate notebooks/ from solutions/ (or verify it)
    tlab grade ASSIGNMENT [options]   autograde + feedback + export, with a status report
    tlab review ASSIGNMENT [STUDENT]  flagged submissions: list, show evidence, accept or override
    tlab roster import FILE           the Canvas or Moodle class list into nbgrader's students
    tlab export [ASSIGNMENTS]         Canvas and Moodle grade files (not graded is never 0)
    tlab due ASSIGNMENT DATE          the due date and late policy (none, penalty, refuse)
    tlab extend ASSIGNMENT STUDENT UNTIL --note WHY   one student's extension
    tlab insights [ASSIGNMENT]        what the class got wrong: mistakes per exercise (HTML, CSV)

Run ``tlab COMMAND --help`` for the options. Exit status: 0 when the work asked for succeeded
(``tlab grade``: every submission of this run was graded, whatever earlier runs left), 1 when
a check fails or something asked for could not be done, 2 for bad usage. The module stays whole (about 300 lines):
each command is a thin handler over :mod:`transformer_lab.grading`, and one parser that names
every command reads better than six small files.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _root(args) -> Path:
    from transformer_lab.grading.course import find_course_root

    return find_course_root(args.root) if args.root else find_course_root()


def _cmd_author(args) -> int:
    from transformer_lab.grading.authoring.author import author_paths

    paths = args.paths
    if not paths:
        from transformer_lab.grading.course import read_course_dirs

        root = _root(args)
        paths = [root / read_course_dirs(root)["source"]]
    results = author_paths(paths, check=args.check)
    if not results:
        print("tlab author: no notebooks found.")
        return 0
    bad = 0
    for r in results:
        for w in r.warnings:
            print(f"warning: {r.path}: {w}")
        for e in r.errors:
            print(f"error: {r.path}: {e}")
        if args.check and r.changes:
            print(f"not normalised: {r.path}:")
            for c in r.changes[:10]:
                print(f"    {c}")
            if len(r.changes) > 10:
                print(f"    ... and {len(r.changes) - 10} more")
        elif r.written:
            print(f"normalised: {r.path} ({len(r.changes)} change(s))")
        bad += bool(r.errors or (args.check and r.changes))
    verdict = "OK" if not bad else f"{bad} notebook(s) need attention"
    print(f"tlab author{' --check' if args.check else ''}: {len(results)} notebook(s), {verdict}.")
    return 1 if bad else 0


def _cmd_release(args) -> int:
    from transformer_lab.grading.authoring.release import release

    result = release(_root(args), check=args.check, assignments=args.assignments or None)
    if args.check:
        for d in result.differences:
            print(f"stale: {d}")
        if result.differences:
            print(
                "tlab release --check: the release directory is NOT what nbgrader generates; run `tlab release`."
            )
            return 1
        print(
            f"tlab release --check: {len(result.assignments)} assignment(s) match the release exactly."
        )
        return 0
    for name in result.removed:
        print(f"removed stale release folder: {name}")
    print(
        f"tlab release: released {len(result.assignments)} assignment(s): {', '.join(result.assignments) or '-'}"
    )
    return 0


def _cmd_grade(args) -> int:
    from transformer_lab.grading.autograde import GradeOptions, grade
    from transformer_lab.grading.run.parallel import run_summary

    options = GradeOptions(
        students=args.student or None,
        force=args.force,
        timeout=args.timeout,
        budget=args.budget,
        sandbox=not args.no_sandbox,
        memory_mb=args.memory,
        feedback=not args.no_feedback,
        export=not args.no_export,
        quiet=args.quiet,
        jobs=args.jobs,
        shard=args.shard,
        keep_old_tests=args.keep_old_tests,
    )
    root = _root(args)
    args.assignment = _assignment_folder(root, args.assignment)
    started = time.monotonic()
    report = grade(root, args.assignment, options)
    print(report.summary())
    print(run_summary(report, time.monotonic() - started, args.jobs))
    print(f"Report: {report.csv_path(root, args.assignment)}")
    # The work asked for: the submissions of this run (one --student: that one) were graded.
    failed = [s for s in report.graded_now if report.students[s].status not in _SCORED]
    return 1 if failed else 0


_SCORED = ("graded", "needs_review")


def _cmd_due(args) -> int:
    from transformer_lab.grading.record.late import set_due

    root, url, course = _record_of(args)
    policy = set_due(url, course, args.assignment, args.date, args.late, args.per_day, args.by)
    print(f"tlab due: {args.assignment} {policy.describe()}.")
    _resettle(root, args.assignment, f"due date and late policy set: {policy.describe()}", args.by)
    return 0


def _cmd_extend(args) -> int:
    from transformer_lab.grading.record.late import grant_extension

    root, url, course = _record_of(args)
    when = grant_extension(
        url, course, args.assignment, args.student, args.until, args.note or "", args.by
    )
    print(f"tlab extend: {args.student} has until {when:%Y-%m-%d %H:%M} UTC for {args.assignment}.")
    why = f"extension until {when:%Y-%m-%d %H:%M} UTC: {args.note}"
    _resettle(root, args.assignment, why, args.by, [args.student])
    return 0


def _record_of(args):
    from transformer_lab.grading.record.decisions import course_id_of
    from transformer_lab.grading.record.gradebook import (
        alembic_on_path,
        check_database,
        gradebook_url,
        guard_gradebook,
    )

    root = _root(args)
    url = gradebook_url(root)
    check_database(url)
    alembic_on_path()
    guard_gradebook(url)
    return root, url, course_id_of(root)


def _resettle(root, assignment: str, why: str, by: str | None, students=None) -> None:
    """Graded submissions get the new rule at once: gradebook, pages, history, report."""
    from transformer_lab.grading.channels.publish import settle
    from transformer_lab.grading.record.report import GradingReport

    report = GradingReport.load(root, assignment)
    if report.students:
        settle(root, report, why, by or "", students)
        print(f"Report: {report.csv_path(root, assignment)}")


def _cmd_export(args) -> int:
    from transformer_lab.grading.channels.export import export

    formats = ("canvas", "moodle") if args.format == "all" else (args.format,)
    canvas_ids = {}
    for item in args.canvas_id or []:
        key, sep, cid = item.partition("=")
        if not sep or not cid.strip().isdigit():
            print(
                f"tlab export: error: expected --canvas-id NOTEBOOK=12345, but got {item!r}",
                file=sys.stderr,
            )
            return 2
        canvas_ids[key.strip()] = cid.strip()
    grades, written = export(_root(args), args.assignments or None, args.out, formats, canvas_ids)
    missing = grades.missing()
    print(
        f"tlab export: {len(grades.students)} student(s) x {len(grades.columns)} notebook(s); "
        f"{len(missing)} grade(s) left EMPTY (not 0) because there is no usable score."
    )
    if grades.skipped:
        print(
            f"  not exported (never released to students: no submission, not in the exchange): "
            f"{', '.join(grades.skipped)}; name them to export them anyway."
        )
    for sid, title, reason in missing[:20]:
        print(f"  {sid:<16} {title:<24} {reason}")
    if len(missing) > 20:
        print(f"  ... and {len(missing) - 20} more (see not_graded.csv)")
    for path in written:
        print(f"wrote {path}")
    for lms in formats:
        if not grades.has_roster(lms):
            print(
                f"warning: no {lms.capitalize()} roster imported (tlab roster import), so the rows "
                f"could not be checked; "
                + (
                    "Canvas will match them only by SIS Login ID."
                    if lms == "canvas"
                    else "map Moodle's import to ID number."
                )
            )
    if grades.unmatched:
        print(
            f"{len(grades.unmatched)} row(s) LEFT OUT because the LMS cannot match them (unmatched.csv):"
        )
        for sid, lms, why in grades.unmatched[:20]:
            print(f"  {sid:<16} {lms:<7} {why}")
        return 1
    return 0


def _cmd_review(args) -> int:
    from transformer_lab.grading.channels.review import review

    print(
        review(
            _root(args),
            args.assignment,
            args.student,
            args.accept,
            args.score,
            args.note or "",
            args.by or "",
        )
    )
    return 0


def _cmd_roster(args) -> int:
    from transformer_lab.grading.channels.roster import import_roster

    lms, n, strangers = import_roster(_root(args), args.file, args.id_column)
    print(
        f"tlab roster import: {n} student(s) from a {lms.capitalize()} export into the gradebook."
    )
    if strangers:
        print(
            f"warning: {len(strangers)} student folder(s) in submitted/ match no id of the roster "
            f"(is --id-column the JupyterHub user name?): {', '.join(strangers[:20])}"
        )
    return 0


def _assignment_folder(root: Path, wanted: str) -> str:
    """``01`` -> ``01_self_attention`` when exactly one folder of solutions/ starts so (as
    ``tlab insights`` reads it); any other name is passed on as it is."""
    from transformer_lab.grading.channels.insights import resolve_assignment

    source = root / "solutions"
    if (source / wanted).is_dir() or not source.is_dir():
        return wanted
    try:
        return resolve_assignment(wanted, sorted(p.name for p in source.iterdir() if p.is_dir()))
    except ValueError:
        return wanted  # the grader names what it expected


def _cmd_insights(args) -> int:
    from transformer_lab.grading.channels.insights_page import write_report

    root, url, course = _record_of(args)
    try:
        csv_path, html_path, found = write_report(
            url, course, root / "reports", args.assignment, args.names, args.below
        )
    except ValueError as exc:
        print(f"tlab insights: error: {exc}", file=sys.stderr)
        return 1
    for insights in found:
        named = sum(len(m.students) for e in insights.exercises for m in e.mistakes if m.named)
        failed = sum(len(m.students) for e in insights.exercises for m in e.mistakes)
        print(
            f"tlab insights: {insights.assignment}: {len(insights.students)} student(s), "
            f"{len(insights.exercises)} exercise(s), {failed} failed exercise(s), {named} with a "
            f"named mistake, {len(insights.set_aside)} set aside by a review decision."
        )
    print(f"wrote {csv_path}\nwrote {html_path}")
    return 0


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, but got {text!r}")
    return value


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, but got {text!r}")
    return int(text)


def _shard(text: str) -> tuple[int, int]:
    from transformer_lab.grading.run.parallel import parse_shard

    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tlab", description="Author, release and grade the transformer-lab course."
    )
    parser.add_argument(
        "--root", help="course directory (default: nearest folder with nbgrader_config.py)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "author", help="turn cell tags into nbgrader metadata, strip outputs, validate"
    )
    p.add_argument("paths", nargs="*", help="notebooks or folders (default: the source directory)")
    p.add_argument(
        "--check", action="store_true", help="only report; exit 1 if anything is not normalised"
    )
    p.set_defaults(func=_cmd_author)

    p = sub.add_parser("release", help="regenerate the student notebooks from the solutions")
    p.add_argument("assignments", nargs="*", help="only these assignments (default: all)")
    p.add_argument(
        "--check", action="store_true", help="verify the release directory instead of writing it"
    )
    p.set_defaults(func=_cmd_release)

    p = sub.add_parser(
        "grade", help="autograde, write feedback and export grades for one assignment"
    )
    p.add_argument("assignment")
    p.add_argument("--student", action="append", help="grade only this student (repeatable)")
    p.add_argument(
        "--force", action="store_true", help="regrade submissions that were graded already"
    )
    p.add_argument(
        "--timeout", type=int, default=None, help="per-cell timeout in seconds (default: config)"
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds a submission may lose to cells stopped at the time limit before later "
        "cells get a 1 s limit (default 30)",
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run student code WITHOUT the bubblewrap sandbox, with your rights (only if you "
        "accept the risk: it can read the solutions and change grades and files)",
    )
    p.add_argument(
        "--memory", type=int, default=None, help="sandbox memory limit per process in MB (4096)"
    )
    p.add_argument("--no-feedback", action="store_true", help="skip the HTML feedback")
    p.add_argument("--no-export", action="store_true", help="skip nbgrader's CSV export")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--jobs", type=_positive_int, default=1, help="grade N submissions at once (default 1)"
    )
    p.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="K/N",
        help="grade only slice K of N of the class (a job array against one PostgreSQL gradebook)",
    )
    p.add_argument(
        "--keep-old-tests",
        action="store_true",
        help="keep grades made under tests changed since (default: grade those again)",
    )
    p.set_defaults(func=_cmd_grade)

    p = sub.add_parser("due", help="set an assignment's due date and late policy")
    p.add_argument("assignment")
    p.add_argument("date", help="due date, ISO 8601 in UTC (2026-12-01 or 2026-12-01T23:59)")
    p.add_argument(
        "--late",
        choices=["none", "penalty", "refuse"],
        default="none",
        help="late work: marked only (none), --per-day percent off per day (penalty), 0 (refuse)",
    )
    p.add_argument("--per-day", type=float, default=0.0, help="percent off per day late")
    p.add_argument("--by", help="who sets it (default: your user name)")
    p.set_defaults(func=_cmd_due)

    p = sub.add_parser("extend", help="give one student more time for an assignment")
    p.add_argument("assignment")
    p.add_argument("student")
    p.add_argument("until", help="the student's own due date, ISO 8601 in UTC")
    p.add_argument("--note", required=True, help="why (kept in the gradebook)")
    p.add_argument("--by", help="who grants it (default: your user name)")
    p.set_defaults(func=_cmd_extend)

    p = sub.add_parser("export", help="write the class's grades for Canvas and Moodle")
    p.add_argument(
        "assignments",
        nargs="*",
        help="only these assignments (default: those released to students: with submissions "
        "or in nbgrader's exchange)",
    )
    p.add_argument(
        "--format", choices=["canvas", "moodle", "all"], default="all", help="which LMS file(s)"
    )
    p.add_argument("--out", type=Path, default=None, help="output folder (default: reports/)")
    p.add_argument(
        "--canvas-id",
        action="append",
        metavar="NOTEBOOK=ID",
        help="Canvas assignment id of a column, written as 'NOTEBOOK (ID)' (repeatable)",
    )
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("review", help="list, show and decide submissions flagged for review")
    p.add_argument("assignment")
    p.add_argument("student", nargs="?", help="show this student's evidence (or decide)")
    p.add_argument("--accept", action="store_true", help="keep the autograded score")
    p.add_argument("--score", type=float, default=None, help="use this score instead")
    p.add_argument("--note", help="why (required with --accept or --score)")
    p.add_argument("--by", help="who decides (default: your user name)")
    p.set_defaults(func=_cmd_review)

    p = sub.add_parser(
        "insights", help="what the class got wrong: mistakes per exercise, from the gradebook"
    )
    p.add_argument(
        "assignment", nargs="?", help="e.g. 01 or 01_self_attention (default: the whole course)"
    )
    p.add_argument("--names", action="store_true", help="show students' names (default: anonymous)")
    p.add_argument(
        "--below",
        type=_fraction,
        default=None,
        metavar="SHARE",
        help="list the students under this share of the points (e.g. 0.5)",
    )
    p.set_defaults(func=_cmd_insights)

    p = sub.add_parser("roster", help="import the class list exported by Canvas or Moodle")
    rsub = p.add_subparsers(dest="roster_command", required=True)
    r = rsub.add_parser("import", help="students (names, ids, emails) into nbgrader's gradebook")
    r.add_argument("file", type=Path, help="Canvas gradebook export or Moodle grade export (CSV)")
    r.add_argument(
        "--id-column",
        help="column holding the JupyterHub user name (Canvas: SIS Login ID by default; "
        'Moodle: required unless the export has Username, e.g. "ID number")',
    )
    r.set_defaults(func=_cmd_roster)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tlab`` console script."""
    # nbformat imports jsonschema, which compiles 38 URI grammars on import (about 0.9 s per
    # command) when the optional rfc3987_syntax is installed; no tlab command validates IRIs.
    sys.modules.setdefault("rfc3987_syntax", None)
    from transformer_lab.grading.course import CourseError
    from transformer_lab.grading.inert import InertStream
    from transformer_lab.grading.record.gradebook import GradebookError

    args = build_parser().parse_args(argv)
    # Much of what tlab prints comes from submissions (flags, reasons, file names): every
    # control character reaches the terminal escaped, whatever the command prints.
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(sys.stdout), InertStream(sys.stderr)
    try:
        return args.func(args)
    except (CourseError, FileNotFoundError, GradebookError) as exc:
        print(f"tlab {args.command}: error: {exc}", file=sys.stderr)
        return 1
    finally:
        sys.stdout, sys.stderr = streams
        if argv is None:  # the `tlab` command, a process of its own about to exit
            # Spare interpreter shutdown its walk over the whole heap (torch, nbgrader) with
            # the cyclic collector, for memory the OS takes back: 0.4 s of CPU for torch alone.
            gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
