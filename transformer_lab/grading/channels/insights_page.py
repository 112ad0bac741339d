"""The insights page: one self-contained HTML file (no scripts, figures inline as data: URIs).

Per assignment, two figures: each exercise's score distribution (students with none, part and
all of its points) and pass rate, and the most common mistakes of each exercise ranked by how
many students made them; then per exercise a table of every mistake; across the page, a
student-by-exercise map. The course's page (every assignment) shows the ranked mistakes as
tables only: a matplotlib figure costs 0.05-0.15 s of CPU (its text above all), and the page of
a course of 48 exercises and 500 students must be written in well under 5 s.
Every figure (matplotlib, Agg) has alt text generated from the numbers it plots and a table of
the same numbers beside it. Colours: Okabe-Ito bars (>= 3:1 on white), a cividis map, text at
AA contrast. Students are "student 1..N" (sorted by id, so the numbering is stable for a class)
unless the instructor asks for names.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from pathlib import Path

from transformer_lab.grading.channels.insights import (
    GENERIC,
    Insights,
    assignments_in,
    count,
    read_class,
    resolve_assignment,
    write_csv,
)

__all__ = ["PageOptions", "render_page", "write_report"]

BLUE, VERMILLION, ORANGE = "#0072B2", "#D55E00", "#E69F00"  # Okabe-Ito
GREY = "#595959"  # 7:1 on white
CSS = """
body { font-family: system-ui, sans-serif; color: #1a1a1a; background: #fff; margin: 1.5em;
       line-height: 1.5; max-width: 78em; }
h1, h2, h3 { color: #1a1a1a; }
.pair { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
.pair img { max-width: 100%; height: auto; border: 1px solid #c8c8c8; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #8a8a8a; padding: 0.2em 0.5em; text-align: left; }
th { background: #ececec; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { max-height: 28em; overflow: auto; }
.note { color: #3d3d3d; }
code { overflow-wrap: anywhere; }
"""


@dataclass
class PageOptions:
    names: bool = False  # real names instead of "student N"
    below: float | None = None  # list the students under this share of the points
    title: str = ""


def _labels(students: list[str], names: dict[str, str], real: bool) -> dict[str, str]:
    ordered = sorted(students)
    if real:
        return {s: f"{names.get(s, s)} ({s})" if names.get(s, s) != s else s for s in ordered}
    return {s: f"student {i}" for i, s in enumerate(ordered, start=1)}


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=80)
    fig.patch.set_facecolor("white")
    return fig


def _img(fig, alt: str) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, pil_kwargs={"compress_level": 1})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt, quote=True)}">'


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _table(header: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=num' if i in numeric else ''}>{html.escape(str(c))}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _levels(fractions: list[float]) -> tuple[int, int, int]:
    """Students with none, part and all of an exercise's points."""
    none = sum(f <= 0.0 for f in fractions)
    full = sum(f >= 0.999 for f in fractions)
    return none, len(fractions) - none - full, full


def _margins(fig, label_chars: int, top: float = 0.2) -> None:
    """Room on the left for bar labels of ``label_chars`` characters (tight_layout is slow)."""
    width, height = fig.get_size_inches()
    left = min(0.6, (0.3 + 0.075 * label_chars) / width)
    fig.subplots_adjust(left=left, right=0.97, bottom=0.6 / height, top=1 - top / height)


def _scores(insights: Insights) -> str:
    """One bar per exercise: the shares of students with none, part and all of its points."""
    exercises = insights.exercises
    fig = _figure(8.0, 0.42 * len(exercises) + 1.3)
    ax = fig.add_subplot()
    names = [e.exercise for e in exercises][::-1]
    left = [0.0] * len(exercises)
    for level, colour, hatch, label in (
        (0, VERMILLION, "//", "no points"),
        (1, ORANGE, "..", "part of the points"),
        (2, BLUE, "", "all the points"),
    ):
        shares = [100 * _levels(e.fractions)[level] / max(len(e.fractions), 1) for e in exercises]
        shares = shares[::-1]
        ax.barh(names, shares, left=left, color=colour, hatch=hatch, edgecolor="white", label=label)
        left = [x + y for x, y in zip(left, shares, strict=True)]
    ax.set_xlim(0, 100)
    ax.set_xlabel("students (%)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    _margins(fig, max((len(n) for n in names), default=4), top=0.5)
    words = "; ".join(
        f"{e.exercise}: {_pct(e.pass_rate)} passed every check, students with no/part/all "
        "points " + "/".join(str(n) for n in _levels(e.fractions))
        for e in exercises
    )
    alt = f"Stacked bar chart of the scores of {insights.assignment} per exercise: {words}"
    rows = [
        [e.exercise, e.class_size, e.passed, _pct(e.pass_rate), *_levels(e.fractions)]
        for e in exercises
    ]
    header = ["exercise", "students", "passed", "pass rate", "no points", "part", "all points"]
    return f'<div class="pair">{_img(fig, alt)}{_table(header, rows, {1, 2, 3, 4, 5, 6})}</div>'


def _short(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _mistakes(insights: Insights, figure: bool, per_exercise: int = 4) -> str:
    """The most common mistakes of each exercise, ranked by the students who made them: a
    table, and beside it a figure when ``figure``."""
    bars = [(e.exercise, m) for e in insights.exercises for m in e.mistakes[:per_exercise]]
    if not bars:
        return "<p>No check failed.</p>"
    rows = [[ex, m.name, len(m.students), _pct(m.share)] for ex, m in bars]
    table = _table(["exercise", "mistake", "students", "share"], rows, {2, 3})
    if not figure:
        return f'<div class="scroll">{table}</div>'
    fig = _figure(9.0, 0.3 * len(bars) + 1.0)
    ax = fig.add_subplot()
    labels = [f"{ex}: {_short(m.name)}" for ex, m in bars][::-1]
    drawn = ax.barh(range(len(bars)), [len(m.students) for _, m in bars][::-1], color=VERMILLION)
    for bar, (_, m) in zip(drawn, bars[::-1], strict=True):
        if not m.named:
            bar.set_color(GREY)
            bar.set_hatch("//")
            bar.set_edgecolor("white")
    ax.set_yticks(range(len(bars)), labels, fontsize=8)
    ax.set_xlabel("students (grey, hatched: failed without a named mistake)")
    _margins(fig, max(len(t) for t in labels) * 8 // 10)
    alt = f"Bar chart of the most common mistakes per exercise of {insights.assignment}: " + (
        "; ".join(f"{ex}: {m.name}, {len(m.students)} ({_pct(m.share)})" for ex, m in bars)
    )
    return f'<div class="pair">{_img(fig, alt)}<div class="scroll">{table}</div></div>'


def _exercise_section(ex) -> str:
    """One exercise in words and a table: its pass rate, score levels, every mistake ranked."""
    rows = [
        [i, m.name, m.lane, len(m.students), _pct(m.share), m.example]
        for i, m in enumerate(ex.mistakes, start=1)
    ]
    header = ["rank", "mistake", "tests", "students", "share", "example message"]
    none, part, full = _levels(ex.fractions)
    return (
        f"<h3>{html.escape(ex.exercise)}</h3>"
        f"<p>{ex.class_size} students counted; {ex.passed} passed every check "
        f"({_pct(ex.pass_rate)}); points: none {none}, part {part}, all {full}.</p>"
        + (f'<div class="scroll">{_table(header, rows, {0, 3, 4})}</div>' if rows else "")
    )


def _map(all_insights: list[Insights], labels: dict[str, str]) -> str:
    """Student-by-exercise map: each cell the student's share of that exercise's points."""
    import numpy as np

    columns = [(i.assignment, e.exercise) for i in all_insights for e in i.exercises]
    students = sorted(labels)
    lookup = {(i.assignment, s, e): f for i in all_insights for (s, e), f in i.fraction.items()}
    grid = np.full((len(students), len(columns)), np.nan)
    for r, s in enumerate(students):
        for c, (a, e) in enumerate(columns):
            grid[r, c] = lookup.get((a, s, e), np.nan)
    longest = max((len(e) for _, e in columns), default=4)
    label_in = 0.4 + 0.075 * longest  # room under the map for the rotated exercise names
    fig = _figure(min(max(5.5, 2.5 + 0.3 * len(columns)), 16),
                  min(max(4.5, 1.0 + label_in + 0.04 * len(students)), 16))  # fmt: skip
    ax = fig.add_subplot()
    image = ax.imshow(grid, aspect="auto", cmap="cividis", vmin=0, vmax=1, interpolation="nearest")
    ax.set_xticks(range(len(columns)), [e for _, e in columns], rotation=90, fontsize=7)
    ax.set_ylabel(f"students 1..{len(students)}, top to bottom")
    ax.set_yticks([])
    fig.colorbar(image, ax=ax, label="share of the points")
    height = fig.get_figheight()
    fig.subplots_adjust(left=0.1, right=0.92, bottom=label_in / height, top=1 - 0.2 / height)
    means = np.nanmean(np.where(np.isnan(grid), np.nan, grid), axis=0) if students else []
    alt = (
        f"Heat map of {len(students)} students by {len(columns)} exercises, each cell the "
        f"student's share of the exercise's points (dark blue 0%, yellow 100%); class mean per "
        "exercise: "
        + "; ".join(f"{e} {_pct(m)}" for (_, e), m in zip(columns, means, strict=False))
    )
    rows = [
        [labels[s]] + ["" if np.isnan(v) else _pct(v) for v in grid[r]]
        for r, s in enumerate(students)
    ]
    table = _table(["student"] + [e for _, e in columns], rows, set(range(1, len(columns) + 1)))
    return f'<div class="pair">{_img(fig, alt)}<div class="scroll" tabindex="0">{table}</div></div>'


def _below(all_insights: list[Insights], labels: dict[str, str], threshold: float) -> str:
    shares: dict[str, list[float]] = {s: [] for s in labels}
    for i in all_insights:
        for s in labels:
            for e in i.exercises:
                shares[s].append(i.fraction.get((s, e.exercise), 0.0))
    low = sorted(
        (sum(v) / len(v), s) for s, v in shares.items() if v and sum(v) / len(v) < threshold
    )
    rows = [[labels[s], _pct(m)] for m, s in low]
    return (
        f"<h2>Students below {_pct(threshold)} of the points</h2>"
        f"<p class=note>Mean share over the exercises on this page; an assignment not submitted "
        f"counts as 0.</p>" + (_table(["student", "share"], rows, {1}) if rows else "<p>None.</p>")
    )


def render_page(all_insights: list[Insights], options: PageOptions) -> str:
    """The whole page as one HTML string."""
    students = sorted({s for i in all_insights for s in i.students})
    names = {k: v for i in all_insights for k, v in i.names.items()}
    labels = _labels(students, names, options.names)
    title = options.title or "What the class got wrong"
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p class=note>{len(students)} students; "
        f"{'names shown' if options.names else 'students anonymous (student 1..N, by id)'}. "
        f"“{html.escape(GENERIC)}”: a check failed without naming a mistake of its catalogue "
        "(see the instructor guide, “Reading the insights report”).</p>",
    ]
    for insights in all_insights:
        parts.append(f"<h2>{html.escape(insights.assignment)}</h2>")
        if insights.set_aside:
            who = (
                ": "
                + "; ".join(f"{labels[s]} ({d})" for s, d in sorted(insights.set_aside.items()))
                if options.names
                else ""
            )
            parts.append(
                f"<p class=note>{len(insights.set_aside)} submission(s) set aside by a review "
                f"decision that overrode the score: not counted as misconceptions{html.escape(who)}.</p>"
            )
        parts.append("<h3>Scores and pass rate per exercise</h3>" + _scores(insights))
        parts.append("<h3>Mistakes ranked</h3>" + _mistakes(insights, len(all_insights) == 1))
        parts += [_exercise_section(ex) for ex in insights.exercises]
    parts.append(
        "<h2>Student by exercise</h2><p class=note>Each cell: the student's share of the "
        "exercise's points (dark blue none, yellow all; blank: not submitted).</p>"
        + _map(all_insights, labels)
    )
    if options.below is not None:
        parts.append(_below(all_insights, labels, options.below))
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )


def write_report(url: str, course_id: str, reports: Path, assignment: str | None = None,
                 names: bool = False, below: float | None = None) -> tuple[Path, Path, list]:  # fmt: skip
    """``reports/A_insights.csv`` and ``.html`` for one assignment (``course_insights.*`` for
    every assignment with submissions); returns both paths and the counts."""
    known = assignments_in(url, course_id)
    chosen = [resolve_assignment(assignment, known)] if assignment else known
    if not chosen:
        raise ValueError("expected a gradebook with graded submissions, but it has none")
    all_insights = [count(read_class(url, course_id, a)) for a in chosen]
    stem = chosen[0] if assignment else "course"
    csv_path = write_csv(all_insights, reports / f"{stem}_insights.csv")
    title = f"What the class got wrong: {stem if assignment else 'the course'}"
    page = render_page(all_insights, PageOptions(names=names, below=below, title=title))
    html_path = reports / f"{stem}_insights.html"
    html_path.write_text(page, encoding="utf-8")
    return csv_path, html_path, all_insights
