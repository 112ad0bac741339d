"""LMS files (issue 27): the roster in from Canvas/Moodle, grade files out that import safely.

The importers' rules these tests rely on are written below as data, each with its source. The
files ``tlab export`` writes are checked against them as the importer would read them.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from nbgrader.api import Gradebook

from transformer_lab import cli
from transformer_lab.grading.channels.roster import read_roster
from transformer_lab.grading.record.gradebook import alembic_on_path
from transformer_lab.grading.record.report import GRADED, NEEDS_REVIEW, GradingReport, StudentResult

A = "01_topic"
COURSE = "lms-test"

# Canvas: "How do I import grades in the Gradebook?" (Canvas Instructor Guide) and the layout
# of Canvas's own Gradebook export; the blank rule is what issue 27 observed on re-import.
CANVAS_RULES = {
    "leading_columns": ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"],
    "points_possible_row": "Points Possible",
    "matches_on": ["ID", "SIS User ID", "SIS Login ID"],  # a row must match a student by one
    "assignment_header": r"^.+ \((\d+)\)$",  # "Name (12345)" updates assignment 12345
    "blank_on_reimport": "clears an existing score",
}
# Moodle: "Grade import" (docs.moodle.org, CSV import, grade/import/csv): one unmatched user
# row aborts the import; "-" is the value the importer skips; an empty cell is not skipped (it
# becomes 0 in a new grade item and wipes an existing grade, as issue 27 observed).
MOODLE_RULES = {
    "map_from": ["Email address", "ID number"],
    "skip_value": "-",
    "unmatched_row": "aborts the import",
    "empty_cell": "is a grade (0 or a wipe), never skipped",
}

CANVAS_EXPORT = """Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (9001)
    Points Possible,,,,,10
"Lovelace, Ada",101,S101,ada,Sec A,8
"King, Jr., Martin",104,S104,mlk,Sec B,7
"Babbage, Ben",102,S102,ben,Sec A,
"Student, Test",999,,test-student,Sec A,
"Cy, Cyrus",103,,cy,Sec B,
"""
MOODLE_EXPORT = (
    (
        "First name,Last name,ID number,Institution,Department,Email address,Quiz 1 (Real),"
        "Last downloaded from this course\n"
    )
    + """Ada,Lovelace,ada,,,ada@uni.example,8.00,1700000000
Ben,Babbage,ben,,,ben@uni.example,-,1700000000
Cyrus,Cy,cy,,,cy@uni.example,-,1700000000
"""
)


def _course(root: Path) -> tuple[Path, str]:
    alembic_on_path()
    root.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{root / 'gradebook.db'}"
    (root / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = {COURSE!r}\n", encoding="utf-8"
    )
    with Gradebook(url, COURSE) as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        gb.add_grade_cell("c1", A, A, max_score=6, cell_type="code")
        for sid, auto in (("ada", 6), ("ben", 2), ("zed", 5)):  # zed: not on any roster
            gb.add_student(sid)
            gb.add_submission(A, sid)
            grade = gb.find_grade("c1", A, A, sid)
            grade.auto_score, grade.needs_manual_grade = auto, False
        gb.db.commit()
    report = GradingReport(A, max_score=6)
    report.students["ada"] = StudentResult("ada", GRADED, 6, 6, fingerprint="a")
    report.students["zed"] = StudentResult("zed", GRADED, 5, 6, fingerprint="z")
    report.students["ben"] = StudentResult(
        "ben", NEEDS_REVIEW, 2, 6, reason="1 flag(s): timeout", fingerprint="b"
    )
    report.save(root)
    return root, url


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _check_canvas(rows: list[list[str]], roster: dict[str, str]) -> None:
    """Every rule Canvas's importer applies to the file (roster: Canvas ID -> login)."""
    n = len(CANVAS_RULES["leading_columns"])
    assert rows[0][:n] == CANVAS_RULES["leading_columns"]
    assert rows[1][0] == CANVAS_RULES["points_possible_row"]
    for header in rows[0][n:]:
        assert re.match(CANVAS_RULES["assignment_header"], header), header
    for row in rows[2:]:
        assert roster.get(row[1]) == row[3], f"row {row} matches no Canvas student"
        for cell in row[n:]:
            assert cell == "" or float(cell) >= 0


def _check_moodle(rows: list[list[str]], emails: set[str]) -> None:
    header = rows[0]
    assert all(col in header for col in MOODLE_RULES["map_from"])
    email = header.index("Email address")
    grade_cols = [i for i, h in enumerate(header[4:], start=4) if not h.endswith(" feedback")]
    for row in rows[1:]:
        assert row[email] in emails, f"row {row} would abort Moodle's import"
        for i in grade_cols:
            assert row[i] != "", "an empty Moodle grade is not skipped"
            assert row[i] == MOODLE_RULES["skip_value"] or float(row[i]) >= 0


def test_canvas_roster_import_and_export(tmp_path, capsys):
    root, url = _course(tmp_path / "course")
    roster_file = tmp_path / "canvas_export.csv"
    roster_file.write_text(CANVAS_EXPORT, encoding="utf-8")
    assert cli.main(["--root", str(root), "roster", "import", str(roster_file)]) == 0
    assert "4 student(s) from a Canvas export" in capsys.readouterr().out
    with Gradebook(url, COURSE) as gb:
        ada = gb.find_student("ada")
        assert (ada.first_name, ada.last_name, ada.lms_user_id) == ("Ada", "Lovelace", "101")
        mlk = gb.find_student("mlk")  # a suffix stays with the last name
        assert (mlk.first_name, mlk.last_name) == ("Martin", "King, Jr.")
        assert "test-student" not in {s.id for s in gb.students}  # Canvas's test student

    argv = ["--root", str(root), "export", "--format", "canvas", "--canvas-id", f"{A}=4242"]
    assert cli.main(argv) == 1  # zed is not on the roster: left out, and said
    out = capsys.readouterr().out
    assert "LEFT OUT" in out and "zed" in out
    rows = _rows(root / "reports" / "canvas_grades.csv")
    _check_canvas(rows, {"101": "ada", "102": "ben", "103": "cy", "104": "mlk"})
    assert rows[0][5] == f"{A} (4242)"
    assert {r[3]: r[5] for r in rows[2:]} == {"ada": "6", "ben": "", "cy": "", "mlk": ""}
    # Canvas's own columns go back as the roster wrote them: name, SIS User ID, Section.
    by_login = {r[3]: r[:5] for r in rows[2:]}
    assert by_login["ada"] == ["Lovelace, Ada", "101", "S101", "ada", "Sec A"]
    assert by_login["mlk"] == ["King, Jr., Martin", "104", "S104", "mlk", "Sec B"]
    assert by_login["cy"][2] == "" and by_login["cy"][4] == "Sec B"
    assert _rows(root / "reports" / "unmatched.csv")[1][:2] == ["zed", "canvas"]

    assert cli.main([*argv[:-2], "--canvas-id", f"{A}=abc"]) == 2


def test_moodle_roster_import_and_export(tmp_path, capsys):
    root, url = _course(tmp_path / "course")
    roster_file = tmp_path / "moodle_export.csv"
    roster_file.write_text(MOODLE_EXPORT, encoding="utf-8")
    argv = ["--root", str(root), "roster", "import", str(roster_file)]
    assert cli.main(argv) == 1  # Moodle exports no user name: which column is it?
    assert "--id-column" in capsys.readouterr().err
    assert cli.main([*argv, "--id-column", "ID number"]) == 0
    with Gradebook(url, COURSE) as gb:
        assert gb.find_student("ben").email == "ben@uni.example"
    assert cli.main(["--root", str(root), "export", "--format", "moodle"]) == 1
    rows = _rows(root / "reports" / "moodle_grades.csv")
    _check_moodle(rows, {"ada@uni.example", "ben@uni.example", "cy@uni.example"})
    by_id = {r[2]: (r[4], r[5]) for r in rows[1:]}
    assert by_id["ada"] == ("6", "")
    assert by_id["ben"][0] == "-" and by_id["ben"][1].startswith("NOT GRADED: needs review")
    assert by_id["cy"] == ("-", "NOT GRADED: nothing submitted")
    assert "zed" not in by_id


def test_without_a_roster_everyone_is_written_and_the_check_is_said(tmp_path, capsys):
    root, _ = _course(tmp_path / "course")
    assert cli.main(["--root", str(root), "export"]) == 0
    out = capsys.readouterr().out
    assert "no Canvas roster imported" in out and "only by SIS Login ID" in out
    rows = _rows(root / "reports" / "moodle_grades.csv")
    assert {r[2] for r in rows[1:]} == {"ada", "ben", "zed"}
    assert all(r[4] != "" for r in rows[1:])


def test_roster_errors_are_one_sentence(tmp_path, one_sentence):
    import pytest

    from transformer_lab.grading.course import CourseError

    bad = tmp_path / "bad.csv"
    bad.write_text("Name,Mail\nx,y\n", encoding="utf-8")
    with pytest.raises(CourseError) as err:
        read_roster(bad)
    one_sentence(str(err.value))
    missing = tmp_path / "missing_login.csv"
    missing.write_text(CANVAS_EXPORT.replace(",ben,", ",,"), encoding="utf-8")
    with pytest.raises(CourseError, match="line\\(s\\) 5"):
        read_roster(missing)
    # The same id twice is refused with both lines named, never merged.
    twice = tmp_path / "twice.csv"
    twice.write_text(CANVAS_EXPORT.replace(",ben,", ",ada,"), encoding="utf-8")
    with pytest.raises(CourseError, match="'ada' on lines 3, 5; nothing imported") as err:
        read_roster(twice)
    one_sentence(str(err.value))
    # Moodle's default export has no user name: the column must be named, never guessed.
    moodle = tmp_path / "moodle.csv"
    moodle.write_text(MOODLE_EXPORT, encoding="utf-8")
    with pytest.raises(CourseError, match="--id-column") as err:
        read_roster(moodle)
    one_sentence(str(err.value))
    assert [e.id for e in read_roster(moodle, "ID number")[1]] == ["ada", "ben", "cy"]
    with pytest.raises(CourseError, match="'Username'"):
        read_roster(moodle, "Username")
