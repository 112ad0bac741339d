"""``tlab insights`` end to end: a class of notebook 01 with planted mistakes, graded by ``tlab
grade``, counted exactly from the gradebook; the page opened in headless Chromium.

The class (built from the shipped release, answers filled from the solution notebook): three
students normalise the softmax over dimension 0 (written three ways), one forgets to subtract
the maximum, two are right; every other exercise is the solution. Grading six in the sandbox
takes about a minute on two cores.
"""

from __future__ import annotations

import csv
import datetime
import shutil
from pathlib import Path

import nbformat
import pytest
from shipped_course import copy_course

from transformer_lab import cli

pytestmark = pytest.mark.slow
A = "01_self_attention"

OVER_DIM_0 = [
    "def softmax(x, dim=-1):\n    e = torch.exp(x - x.amax(dim=dim, keepdim=True))\n"
    "    return e / e.sum(0, keepdim=True)",
    "def softmax(x, dim=-1):\n    shifted = x - x.max(dim=dim, keepdim=True).values\n"
    "    num = torch.exp(shifted)\n    return num / torch.sum(num, dim=0, keepdim=True)",
    "def softmax(x, dim=-1):\n    z = (x - x.amax(dim, keepdim=True)).exp()\n"
    "    total = z.sum(axis=0, keepdims=True)\n    return z / total",
]
NO_MAX = (
    "def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)"
)
CLASS = {
    **{f"dim{i}": src for i, src in enumerate(OVER_DIM_0, start=1)},
    "overflow": NO_MAX,
    "right1": None,
    "right2": None,
}


def _solution(root: Path) -> dict[str, str]:
    nb = nbformat.read(root / "solutions" / A / f"{A}.ipynb", as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: "\n".join(
            ln for ln in c.source.splitlines() if "SOLUTION" not in ln
        )
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def _submit(root: Path, student: str, softmax: str | None, answers: dict[str, str]) -> None:
    nb = nbformat.read(root / "notebooks" / A / f"{A}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = softmax if gid == "softmax_impl" and softmax else answers[gid]
    folder = root / "submitted" / student / A
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    (folder / "timestamp.txt").write_text(stamp)
    nbformat.write(nb, folder / f"{A}.ipynb")


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bwrap):
    root = copy_course(tmp_path_factory.mktemp("insights"), A)
    answers = _solution(root)
    for student, softmax in CLASS.items():
        _submit(root, student, softmax, answers)
    assert cli.main(["--root", str(root), "grade", A, "--quiet", "--no-feedback"]) == 0
    assert cli.main(["--root", str(root), "insights", "01", "--below", "0.9"]) == 0
    return root


def test_csv_counts_what_was_planted(graded):
    with (graded / "reports" / f"{A}_insights.csv").open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["exercise"] == "softmax"]
    got = {r["mistake"]: (r["students"], r["share_of_class"], r["tests"], r["named"]) for r in rows}
    over_dim = next(m for m in got if "dimension 0" in m)
    assert got == {
        over_dim: ("3", "0.500", "visible", "yes"),
        "overflow": ("1", "0.167", "visible", "yes"),
    }
    assert all(r["class_size"] == "6" for r in rows)
    assert all(r["example_message"].startswith("check_softmax") for r in rows)


def test_page_shows_its_figures_in_chromium(graded, chromium):
    from browser_helpers import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    page_path = graded / "reports" / f"{A}_insights.html"
    text = page_path.read_text(encoding="utf-8")
    assert "<script" not in text.lower() and "http" not in text  # offline: nothing fetched
    assert "student 6" in text and "right1" not in text  # anonymous by default
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page()
            page.goto(page_path.as_uri())
            images = page.eval_on_selector_all(
                "img",
                "els => els.map(e => [e.complete, e.naturalWidth, e.getAttribute('alt') || ''])",
            )
            lang = page.eval_on_selector("html", "e => e.lang")
        finally:
            browser.close()
    assert len(images) == 3  # scores per exercise, mistakes ranked, the student map
    for complete, width, alt in images:
        assert complete and width > 100
        assert len(alt) > 60
    assert lang == "en"
