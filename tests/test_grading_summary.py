"""``tlab grade``'s summary (issue 27): a decided review is not "NEEDS REVIEW (earlier run)",
and the report's paragraph and the run's paragraph never contradict each other.

The gradebook is the SQLite one of tests/test_grading_term.py (ada graded; ben and cy flagged
for a timeout), built with nbgrader's API, no kernels.
"""

from __future__ import annotations

import re

from test_grading_term import COURSE, A, _course

from transformer_lab import cli
from transformer_lab.grading.record import decisions
from transformer_lab.grading.record.report import NEEDS_REVIEW, GradingReport
from transformer_lab.grading.run.parallel import run_summary


def _rows(summary: str) -> dict[str, str]:
    return {
        line.split()[0]: line
        for line in summary.splitlines()
        if re.match(r"^  \w+ +\d+ / \d+", line)  # a score row of the report
    }


def _counts(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\((\d+) of the graded need review", text)]


def test_a_decision_settles_the_summary_and_the_counts_agree(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    root = _course(tmp_path / "course", url)
    argv = ["--root", str(root), "review", A, "ben", "--score", "5", "--note", "ran in 2 s"]
    assert cli.main([*argv, "--by", "prof"]) == 0
    capsys.readouterr()

    report = GradingReport.load(root, A)
    report.graded_now = ["ada"]  # a later run that regraded only ada: ben and cy are older
    report.reviewed = decisions.reviewed(url, COURSE, report)
    assert list(report.reviewed) == ["ben"]
    assert report.reviewed["ben"].startswith("score set to 5 by prof at ")

    summary, run = report.summary(), run_summary(report, 3.0, jobs=2)
    rows = _rows(summary)
    assert "REVIEWED: score set to 5 by prof" in rows["ben"]
    assert "NEEDS REVIEW" not in rows["ben"] and "(earlier run)" in rows["ben"]
    assert "NEEDS REVIEW" in rows["cy"]  # no decision yet
    flagged = summary.split("Flagged for review")[1].split("In the report")[0]
    assert "cy" in flagged and "ben" not in flagged
    # One count of open reviews, the same in the rows, the report's and the run's paragraphs.
    open_rows = sum("NEEDS REVIEW" in line for line in rows.values())
    assert _counts(summary) == [open_rows] == [1]
    assert "(1 of the graded need review; 1 reviewed)" in summary
    assert "1 graded, 0 not graded (0 of the graded need review)" in run  # ada only, this run
    assert "Review:" not in run


def test_without_decisions_every_flag_is_open_and_counted_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    root = _course(tmp_path / "course", url)
    report = GradingReport.load(root, A)
    report.graded_now = sorted(report.students)
    report.reviewed = decisions.reviewed(url, COURSE, report)
    assert report.reviewed == {}
    summary, run = report.summary(), run_summary(report, 3.0, jobs=1)
    rows = _rows(summary)
    flagged = sorted(s for s, r in report.students.items() if r.status == NEEDS_REVIEW)
    assert sorted(s for s, line in rows.items() if "NEEDS REVIEW" in line) == flagged
    assert _counts(summary) == _counts(run) == [len(flagged)] == [2]
    assert "3 graded, 0 not graded (2 of the graded need review)" in run
    assert "Review: ben, cy" in run


def test_a_decision_on_an_earlier_submission_settles_nothing(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    root = _course(tmp_path / "course", url)
    assert cli.main(["--root", str(root), "review", A, "cy", "--accept", "--note", "ok"]) == 0
    capsys.readouterr()
    report = GradingReport.load(root, A)
    report.students["cy"].fingerprint = "resubmitted"
    assert decisions.reviewed(url, COURSE, report) == {}
