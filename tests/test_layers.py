"""The package's three layers, held from the source: the core imports nothing of the course support
above it, and the top level lists the core and the course support only (lesson helpers live in
``transformer_lab/lessons/``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_import_graph import PACKAGE, graph

CORE = {
    "transformer_lab.attention",
    "transformer_lab.heads",
    "transformer_lab.positional",
    "transformer_lab.masks",
    "transformer_lab.blocks",
    "transformer_lab.tiled",
    "transformer_lab.gqa",
    "transformer_lab.interpret",
    "transformer_lab.bert_inputs",
    "transformer_lab.bpe",
    "transformer_lab.models",
}
ABOVE_THE_CORE = ("lessons", "checks", "grading", "widgets", "train", "cli", "data", "pretrained")
COURSE_SUPPORT = {"data", "train", "threads", "pretrained", "checkpoints", "widgets", "checks"}
COURSE_SUPPORT |= {"grading", "lessons", "cli", "utils"}
PRIVATE = {"__init__", "_mode", "_renames", "_validate", "_hugepages"}


def _is_core(module: str) -> bool:
    return any(module == c or module.startswith(c + ".") for c in CORE)


def test_the_core_imports_nothing_above_it():
    edges = graph()
    bad = {
        f"{m} -> {t}"
        for m, targets in edges.items()
        if _is_core(m)
        for t in targets
        if t.split(".")[1] in ABOVE_THE_CORE
    }
    assert not bad, f"the core reaches up into course support or lessons: {sorted(bad)}"


def test_the_top_level_is_the_core_and_the_course_support():
    top = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()
    }
    core = {c.split(".")[1] for c in CORE}
    unexpected = top - core - COURSE_SUPPORT - PRIVATE
    assert not unexpected, (
        f"top-level modules that are neither core nor course support: {sorted(unexpected)} "
        "(a helper for one notebook's demonstration belongs in transformer_lab/lessons/)"
    )


@pytest.mark.parametrize("old", ["baselines", "span", "tokens_compare"])
def test_moved_modules_import_under_their_old_names(old):
    import importlib

    with pytest.warns(DeprecationWarning, match=f"transformer_lab.lessons.{old}"):
        module = importlib.import_module(f"transformer_lab.{old}")
    assert module is importlib.import_module(f"transformer_lab.lessons.{old}")
    assert Path(module.__file__).parent.name == "lessons"


def test_an_old_grading_module_name_still_imports_in_the_grading_process():
    """An existing course's nbgrader_config.py names transformer_lab.grading.feedback.X: it still
    loads, in the grading process (without PyTorch) and in a plain import."""
    import subprocess
    import sys

    driver = PACKAGE / "grading" / "run" / "driver.py"
    code = (
        "import runpy, sys, warnings\n"
        f"runpy.run_path({str(driver)!r}, run_name='x')['grading_without_torch']()\n"
        "warnings.simplefilter('ignore')\n"
        "from traitlets.utils.importstring import import_item\n"
        "cls = import_item('transformer_lab.grading.feedback.SanitizedHTMLExporter')\n"
        "print(cls.__module__, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["transformer_lab.grading.channels.feedback", "False"]


def test_the_record_never_imports_its_channels():
    """grading/record/ is the grade record; grading/channels/ is derived from it, not the reverse."""
    edges = graph()
    bad = sorted(
        f"{m} -> {t}"
        for m, targets in edges.items()
        if m.startswith("transformer_lab.grading.record")
        for t in targets
        if t.startswith("transformer_lab.grading.channels")
    )
    assert not bad, f"the record reaches into its channels: {bad}"
