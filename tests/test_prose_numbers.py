"""The notebooks' prose is held to what their cells print.

A number that a run produces may appear in a markdown cell in one of two ways:

- **referred to, not restated**: "the run above prints how many times faster ..." (the only way
  for timings, which change with the machine and its load);
- **marked**: right after the number (and its unit), an HTML comment that Jupyter does not
  render, ``99.8%<!-- prose: after="tagging" tol=0.5 -->``. The test executes the notebook
  (once per run, shared with ``tests/test_notebooks_execute.py``), finds the code cell nearest
  to the markdown (above before below) whose output contains the ``after`` text (several texts
  separated by " ... " are found in order), reads the first number printed after it (``nth=2``:
  the second; ``sign=any``: its absolute value), and requires ``|written - printed| <= tol``,
  in the units written. Tolerances cover other machines and thread counts (training runs are
  seeded but sum in another order); nothing timed is ever marked.

The linter (no execution) fails on any number with a unit that runs produce (%, nats, bits,
seconds, "times"/"x" faster) in a solution's markdown that is neither marked nor on
:data:`FACTS`, the short list of numbers that come from papers, the data or the task's
definition. The convention is described in ``docs/instructor_guide.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted(
    p for p in (ROOT / "solutions").glob("*/*.ipynb") if ".ipynb_checkpoints" not in p.parts
)

NUMBER = r"(?<![\w.])(-?\d[\d,]*(?:\.\d+)?)"  # 1,000 and 0.25; not the 2 of "ViT-B/16" or "x2"
UNIT = (
    r"(?:\s?(?:%|nats?\b|bits?\b|ms\b|seconds?\b|minutes?\b|"
    r"(?:x|×|times)(?=\s+(?:faster|slower|less|more|fewer|as)\b)|x\b(?!\s?\d))|\ss\b)"
)  # "2.5 s" is seconds, "the -100s" a plural
WITH_UNIT = re.compile(NUMBER + r"(?:\*\*)?" + UNIT)  # "**1.86** nats" too
PRINTED = re.compile(r"(?<![\w.])(-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?)")  # 3.4e+08 is one
MARKER = re.compile(r"<!--\s*prose:(?P<args>.*?)-->", re.S)
MARKED = re.compile(NUMBER + rf"(?:{UNIT})?(?:\*\*|_)?\s?<!--\s*prose:(?P<args>.*?)-->", re.S)
ARGS = re.compile(r'(\w+)=(?:"([^"]*)"|(\S+))')
MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$|`[^`\n]*`", re.S)  # formulas and code: not prose

# Notebooks whose markdown is not linted (none: notebook 00's prose refers to its printed output).
NOT_LINTED: set[str] = set()
BENCH = "a recorded run in benchmarks/README.md"

# Numbers with a unit that no run of the notebook produces: (snippet around the number, source):
# papers, the data, definitions, and benchmark runs recorded in benchmarks/README.md. A number is
# allowed when it lies inside an occurrence of one of its notebook's snippets.
FACTS: dict[str, list[tuple[str, str]]] = {
    "03_positional_encodings": [],
    "05_transformer_block": [],
    "06_bert": [
        ("(15% chosen; 80% `[MASK]`, 10% random, 10% kept)", "Devlin et al., 2019"),
        ("hide 15% of the tokens", "Devlin et al., 2019"),
        ("replace **80%** with `[MASK]`, **10%** with", "Devlin et al., 2019"),
        ("leave **10% unchanged**", "Devlin et al., 2019"),
        ("With 10% random and 10% unchanged", "Devlin et al., 2019"),
        ("The random 10% must", "Devlin et al., 2019"),
        ("of 80 / 10 / 10 %", "Devlin et al., 2019"),
        ("the paper's 15% is a compromise", "Devlin et al., 2019"),
        ("85% thrown away", "the complement of the paper's 15%"),
        ("and only 15% of the positions", "Devlin et al., 2019"),
        ("the 85% of words left", "the complement of the paper's 15%"),
        ("exactly 50% if every line", "chance on a balanced two-class task"),
        ("about 50% on a random", "chance on a balanced two-class task"),
        ("chooses 15% of the non-special tokens; 80% become `[MASK]`, 10% a random", "Devlin"),
        ("ordinary token, 10% stay", "Devlin et al., 2019"),
        ("reaches **85.3%** with positions and **51.1%** without", BENCH + " (bench_bert)"),
        ("take it to about 85%", BENCH + " (bench_bert)"),
    ],
    "07_gpt": [
        ("in 16 or 8 bits", "the number formats"),
        (
            "ends at **1.846** nats per character for BPE and **2.091** for",
            BENCH + " (bench_bpe_gpt)",
        ),
    ],
    "08_vision_transformer": [
        ("about 8.6 times as many", "577^2 / 197^2: the paper's sequence lengths"),
    ],
    "09_attention_at_scale": [],
}


def _markdown(nb) -> list[tuple[int, str]]:
    return [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _args(raw: str) -> dict[str, str]:
    return {k: quoted if quoted else bare for k, quoted, bare in ARGS.findall(raw)}


def unmarked_numbers(name: str, nb) -> list[str]:
    """'cell N: "... number ..."' for every number with a unit that is neither marked nor a fact."""
    found = []
    for index, source in _markdown(nb):
        allowed = [
            (m.start(), m.end())
            for snippet, _ in FACTS.get(name, [])
            for m in re.finditer(re.escape(snippet), source)
        ]
        marked = {m.start(1) for m in MARKED.finditer(source)}
        prose = MATH.sub(
            lambda m: " " * len(m.group()), MARKER.sub(lambda m: " " * len(m.group()), source)
        )
        for m in WITH_UNIT.finditer(prose):
            if m.start(1) in marked or any(a <= m.start() and m.end() <= b for a, b in allowed):
                continue
            context = source[max(0, m.start() - 50) : m.end() + 20].replace("\n", " ")
            found.append(f'cell {index}: {m.group().strip()!r} in "...{context}..."')
    return found


def _output_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif "data" in output and "text/plain" in output["data"]:
            parts.append(output["data"]["text/plain"])
    return "".join(parts)


def marked_numbers(nb) -> list[tuple[int, float, dict[str, str]]]:
    """(markdown cell index, written value, marker arguments) for every marker."""
    marks = []
    for index, source in _markdown(nb):
        for m in MARKED.finditer(source):
            marks.append((index, _value(m.group(1)), _args(m.group("args"))))
        if len(MARKER.findall(source)) != len(MARKED.findall(source)):
            raise AssertionError(
                f"cell {index}: a prose marker does not follow a number directly: {source[:80]!r}."
            )
    return marks


def printed_value(nb, index: int, after: str, nth: int = 1) -> float | None:
    """The ``nth`` number printed after the text ``after`` by the code cell nearest to cell
    ``index`` (above before below) whose output contains that text (None if there is none). ``after`` may name
    several texts separated by " ... ", to be found in that order."""
    nearest_first = sorted(range(len(nb.cells)), key=lambda i: (abs(i - index), i > index))
    for cell in (nb.cells[i] for i in nearest_first):
        if cell.cell_type != "code":
            continue
        text, end = _output_text(cell), 0
        for anchor in after.split(" ... "):  # "learned ... at 16:": "at 16:" after "learned"
            start = text.find(anchor, end)
            if start < 0:
                break
            end = start + len(anchor)
        else:
            numbers = PRINTED.findall(text[end:])
            return _value(numbers[nth - 1]) if len(numbers) >= nth else None
    return None


@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_no_unmarked_run_numbers_in_prose(solution):
    """Lint: every run-produced number in the markdown is marked, referred to, or a listed fact."""
    if solution.parent.name in NOT_LINTED:
        pytest.skip(f"{solution.parent.name}'s prose is being reworked by its owner (NOT_LINTED).")
    nb = nbformat.read(solution, as_version=4)
    marked_numbers(nb)  # markers are well placed
    found = unmarked_numbers(solution.parent.name, nb)
    assert not found, (
        f"{solution.parent.name}: numbers with a unit in the prose that are neither marked "
        "(<!-- prose: after=... tol=... -->) nor listed in FACTS (say that the run above prints "
        "them, or mark them):\n  " + "\n  ".join(found)
    )


def test_facts_still_occur():
    """Every snippet in FACTS is still in its notebook (a stale entry would hide nothing)."""
    stale = []
    for name, facts in FACTS.items():
        (path,) = (ROOT / "solutions" / name).glob("*.ipynb")
        text = "\n".join(source for _, source in _markdown(nbformat.read(path, as_version=4)))
        stale += [f"{name}: {snippet!r}" for snippet, _ in facts if snippet not in text]
    assert not stale, "FACTS entries no longer in the notebooks:\n  " + "\n  ".join(stale)


def test_the_linter_catches_restated_numbers():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            "It reaches 63.1% and 3.23 nats, 1.4x faster, in 2.5 s; a 16 × 16 grid; "
            'marked: 62.7%<!-- prose: after="acc" tol=1 --> and **3.2**<!-- prose: after="x" tol=0.1 -->; '
            "$0.5\\%$ in a formula."
        )
    ]
    found = unmarked_numbers("none", nb)
    assert [f.split(" in ")[0] for f in found] == [
        "cell 0: '63.1%'",
        "cell 0: '3.23 nats'",
        "cell 0: '1.4x'",
        "cell 0: '2.5 s'",
    ]
    assert [(v, a["after"]) for _, v, a in marked_numbers(nb)] == [(62.7, "acc"), (3.2, "x")]


@pytest.mark.slow
@pytest.mark.parametrize(
    "solution",
    [p for p in SOLUTIONS if "prose:" in p.read_text(encoding="utf-8")],
    ids=lambda p: p.stem,
)
def test_marked_numbers_match_the_executed_notebook(solution, executed_solution):
    nb = executed_solution(solution)  # executed once per run, shared with test_notebooks_execute
    marks = marked_numbers(nb)
    assert marks, "the notebook mentions 'prose:' but has no marker after a number"
    wrong = []
    for index, written, args in marks:
        after, tol = args.get("after"), float(args.get("tol", "0"))
        nth, any_sign = int(args.get("nth", "1")), args.get("sign") == "any"
        if not after:
            wrong.append(f'cell {index}: {written}: the marker has no after="..."')
            continue
        printed = printed_value(nb, index, after, nth)
        if printed is not None and any_sign:  # "1.4% below" restates a printed -1.4%
            printed = abs(printed)
        if printed is None:
            wrong.append(
                f"cell {index}: {written}: no cell above prints number {nth} after {after!r}"
            )
        elif abs(written - printed) > tol + 1e-9:
            wrong.append(
                f"cell {index}: the prose says {written}, the run printed {printed} after "
                f"{after!r} (tolerance {tol})"
            )
    assert not wrong, f"{solution.parent.name}: prose and output disagree:\n  " + "\n  ".join(wrong)
