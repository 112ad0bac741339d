"""The decided grade on the student's feedback page (what ``nbgrader release_feedback`` sends).

nbgrader writes the page from the autograded score. :func:`refresh_pages` rewrites each page of
``feedback/STUDENT/ASSIGNMENT/`` in place from the record (:mod:`.ledger`): the heading's
``(Score: X / Y)`` becomes the decided grade, and a box at the top says how it was decided:

- reviewed: the decided grade, the autograded score, and the instructor's note;
- flagged and not yet reviewed: "under review", no final grade (the heading says so too);
- late: when it was handed in and what the late policy took;
- flags: each with the cells it concerns and their points (never "(scored 0)" alone);
- a graded cell that fails because an exercise it builds on fails: which one, to fix first.

The box is rebuilt from scratch every time (it sits between fixed markers), so the page always
shows the current record. Every text is HTML-escaped; the page keeps its CSP (:mod:`.feedback`).
"""

from __future__ import annotations

import ast
import json
import re
from html import escape
from pathlib import Path

from transformer_lab.grading.record.ledger import (
    FinalGrade,
    append_history,
    final_grades,
    write_gradebook,
)
from transformer_lab.grading.record.report import GradingReport, merge_stored, report_lock
from transformer_lab.grading.record.tables import whoami

__all__ = ["settle", "refresh_pages", "record_box", "cell_facts", "failing_dependencies"]

BEGIN, END = '<div class="tlab-record">', "</div><!--/tlab-record-->"
_BOX = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", re.S)
_HEADING = re.compile(r"(<h4>[^<]*?)\(Score: [^)]*\)")
STYLE = (
    "<style>.tlab-record{border:2px solid #c60;padding:.6em 1em;margin:1em 0;"
    "background:#fff8f0;white-space:normal;overflow-wrap:anywhere}"
    ".tlab-record p{margin:.3em 0}</style>"
)


def _num(x) -> str:
    return "-" if x is None else str(round(float(x), 2))  # as nbgrader's page writes scores


def _names(source: str) -> dict[str, set[str]]:
    """The functions and classes an answer cell defines, and the names it calls (read from its
    syntax tree: a docstring's "softmax(q k^T)" is no call; a cell that does not parse, by a
    regular expression)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {
            "defines": set(re.findall(r"^(?:def|class)\s+(\w+)", source, re.M)),
            "calls": set(re.findall(r"\b(\w+)\s*\(", source)),
        }
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        "defines": {n.name for n in tree.body if isinstance(n, defs)},
        "calls": {
            n.func.id if isinstance(n.func, ast.Name) else n.func.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)
        },
    }


def cell_facts(autograded: Path) -> list[dict]:
    """Each graded cell of an autograded notebook: its id, points, score, error, timeout,
    and the names its answer cell defines and calls (in notebook order)."""
    try:
        cells = json.loads(Path(autograded).read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError):
        return []
    facts, answer = [], {"defines": set(), "calls": set()}
    for cell in cells:
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        if meta.get("solution"):
            answer = _names(src)
        if not meta.get("grade") or meta.get("solution"):
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        text = " ".join(str(o.get("ename", "")) + str(o.get("evalue", "")) for o in errors)
        text += " ".join(str(o.get("text", "")) for o in cell.get("outputs", []))
        facts.append(
            {
                "id": meta.get("grade_id", "?"),
                "points": meta.get("points"),
                "failed": bool(errors),
                "timeout": "CellTimeoutError" in text or "time limit" in text,
                **answer,
            }
        )
    return facts


def failing_dependencies(facts: list[dict], failing: set[str] | None = None) -> dict[str, tuple]:
    """``{cell id: (earlier cell id, names)}``: each failing graded cell whose answer calls names
    that an earlier failing answer defines (the last such cell). ``failing``: the ids of the
    cells that failed (default: the cells' own errors, ``fact["failed"]``)."""
    found, seen = {}, []
    for f in facts:
        if f["id"] in failing if failing is not None else f["failed"]:
            causes = [e for e in seen if (e["defines"] & f["calls"]) - f["defines"]]
            if causes:
                e = causes[-1]
                found[f["id"]] = (
                    e["id"],
                    ", ".join(sorted((e["defines"] & f["calls"]) - f["defines"])),
                )
            seen.append(f)
    return found


def _dependency_notes(facts: list[dict]) -> list[str]:
    """ "X fails because Y fails": a failing cell whose answer calls an earlier failing answer."""
    return [
        f"{cell} fails because {cause} fails: your answer calls {names}, "
        f"which {cause} tests; fix {cause} first"
        for cell, (cause, names) in failing_dependencies(facts).items()
    ]


def _flag_lines(row, facts: list[dict], final) -> list[str]:
    timed = [f for f in facts if f["timeout"]]
    where = ", ".join(f"{f['id']} (0 of {f['points']:g} points)" for f in timed if f["points"])
    lines = []
    for flag in row.flags:
        if flag.startswith("timeout") and where:
            flag = re.sub(r"\s*\(scored 0\)", "", flag) + f": {where}"
        elif "(scored 0)" in flag:
            flag = flag.replace("(scored 0)", "(those cells scored 0)")
        lines.append(flag)
    return lines


def record_box(row, final, facts: list[dict]) -> str:
    """The box of decided facts for one student's page (HTML, every text escaped)."""
    paras: list[str] = []
    of = f" / {_num(row.max_score)}"
    if final.status == "needs_review":
        paras.append(
            f"<b>Under review</b>: the autograded score {_num(row.score)}{of} is not final; "
            "your instructor will look at this submission before the grade counts."
        )
    elif final.decision is not None:
        d = final.decision
        paras.append(
            f"<b>Grade decided by your instructor: {_num(final.before_late)}{of}</b> "
            f"(autograded {_num(row.score)}): {escape(d.note)}"
        )
    if final.late_seconds > 0:
        paras.append(f"<b>Late</b>: {escape(final.late_text())}.")
    if final.score is not None and (final.decision is not None or final.late_seconds > 0):
        paras.append(f"<b>Grade: {_num(final.score)}{of}</b>")
    flags = _flag_lines(row, facts, final)
    if flags:
        total = (
            "" if final.score is None else f"; the submission's grade is {_num(final.score)}{of}"
        )
        paras.append(f"<b>Flagged for review</b>{total}:")
        paras += [f"&bull; {escape(f)}" for f in flags]
    paras += [escape(n) for n in _dependency_notes(facts)]
    if not paras:
        return ""
    body = "".join(f"<p>{p}</p>" for p in paras)
    return f"{STYLE}{BEGIN}{body}{END}\n"


def apply_record(page: str, row, final, facts: list[dict], heading: bool = True) -> str:
    """``page`` with the decided grade in its heading and the record's box (idempotent)."""
    page = _BOX.sub("", page).replace(STYLE, "")
    if final.status == "needs_review":
        score = f"(Score: under review, autograded {_num(row.score)} / {_num(row.max_score)})"
    elif final.score is not None:
        score = f"(Score: {_num(final.score)} / {_num(row.max_score)})"
    else:
        score = None
    if score is not None and heading:  # one page per assignment: the heading is its grade
        page = _HEADING.sub(lambda m: m.group(1) + score, page, count=1)
    box = record_box(row, final, facts)
    if box and "<body>\n" in page:
        page = page.replace("<body>\n", "<body>\n" + box, 1)
    return page


def refresh_pages(root: Path, dirs: dict, report, finals: dict, students: list[str]) -> int:
    """Rewrite the feedback pages of ``students`` from the record; returns how many changed."""
    changed = 0
    for sid in students:
        row, final = report.students.get(sid), finals.get(sid)
        folder = Path(root) / dirs["feedback"] / sid / report.assignment
        if row is None or final is None or not folder.is_dir():
            continue
        pages = sorted(folder.glob("*.html"))
        for page_path in pages:
            graded = Path(root) / dirs["autograded"] / sid / report.assignment
            facts = cell_facts(graded / f"{page_path.stem}.ipynb")
            page = page_path.read_text(encoding="utf-8")
            new = apply_record(page, row, final, facts, heading=len(pages) == 1)
            if new != page:
                page_path.write_text(new, encoding="utf-8")
                changed += 1
    return changed


def page_for(root: Path, assignment: str, student: str, page: str, autograded: Path) -> str:
    """``page`` (being written by nbgrader's ``generate_feedback``) with the record applied."""

    report = GradingReport.load(root, assignment)
    row = report.students.get(student)
    if row is None:
        return page
    final = final_grades(root, report).get(student)
    return apply_record(page, row, final, cell_facts(autograded))


def settle(
    root: Path,
    report: GradingReport,
    why: str,
    by: str = "",
    students: list[str] | None = None,
) -> dict[str, FinalGrade]:
    """Write every student's decided grade to the gradebook, the feedback pages, the history
    and the report CSV; ``students`` (default: all) are the ones whose gradebook rows and pages
    are brought up to date. ``why`` and ``by`` go into the history of every changed grade."""
    from transformer_lab.grading.course import read_course_dirs
    from transformer_lab.grading.record.decisions import course_id_of
    from transformer_lab.grading.record.gradebook import gradebook_url

    root = Path(root)
    url, course = gradebook_url(root), course_id_of(root)
    wanted = sorted(report.students) if students is None else list(students)
    write_gradebook(url, course, report, wanted, root)
    # Other processes (tlab grade on the same class, tlab review) may have saved rows meanwhile:
    # merge under the report's lock, so the last to settle never drops theirs.
    with report_lock(root, report.assignment):
        merge_stored(report, root)
        finals = final_grades(root, report)
        append_history(url, course, report.assignment, finals, why, whoami(by))
        refresh_pages(root, read_course_dirs(root), report, finals, wanted)
        report.finals = finals
        report.save(root)
    return finals
