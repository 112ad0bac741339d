"""Catalogues written as source text (notebooks 01-04): ``wrong(exercise, words, source)`` and
``right(exercise, source)`` build :class:`~tests.holdout._harness.Mistake` entries (the one
catalogue format), and the graded cells of the solution notebooks run them.

Each entry is the source of a function written the way a student writes it; ``words`` are the
required words separated by " & " ("a|b" accepts either). The function is defined in a namespace
holding correct versions of the notebook's earlier answers (:data:`HELPERS`); for the graded
cells it is defined again inside the solution notebook's namespace.

History of the figures (`python -m tests.holdout report 01 02 03 04`): before the feedback work
(commit 3ba5afe) the 176 wrong implementations of notebooks 01-04 were 92 named, 50 generic,
15 misleading and 19 passed; after it 176 of 176 named. The holdout written after tuning
(tests/holdout/nb01_04.py, 25 mistakes): 7 named, 13 generic, 4 misleading, 1 passed before; 20
named and 5 generic after generic fixes only; 25 named when converted to this format.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import pathlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tests.holdout._harness import Mistake, from_source
from transformer_lab.checks.registry import REGISTRY

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Correct helpers a student's notebook has by then (their own versions, not the package's).
HELPERS = """
def softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w

def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}")
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)

def merge_heads(x):
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)
"""


def base_namespace() -> dict:
    ns = {"torch": torch, "math": math, "np": np, "F": F, "nn": nn}
    exec(HELPERS, ns)
    return ns


_BASE = base_namespace()


def wrong(exercise: str, words: str, source: str) -> Mistake:
    """``words``: required words separated by ' & '."""
    return from_source(exercise, tuple(w.strip() for w in words.split("&")), source, _BASE)


def right(exercise: str, source: str) -> Mistake:
    return from_source(exercise, (), source, _BASE)


# ---------------------------------------------------------------------------------------------
# graded cells of the solution notebooks
_NOTEBOOK_NS: dict[str, dict] = {}


def notebook_path(notebook: str) -> pathlib.Path:
    return ROOT / "solutions" / notebook / f"{notebook}.ipynb"


def _cells(notebook: str) -> list[dict]:
    return json.loads(notebook_path(notebook).read_text())["cells"]


def _cell_id(cell: dict) -> str | None:
    for tag in cell["metadata"].get("tags", []):
        if tag.startswith("id:"):
            return tag[3:]
    return cell["metadata"].get("nbgrader", {}).get("grade_id")


def graded_source(notebook: str, cell_id: str) -> str:
    for cell in _cells(notebook):
        if _cell_id(cell) == cell_id:
            return "".join(cell["source"])
    raise KeyError(cell_id)


def notebook_namespace(notebook: str) -> dict:
    """Run the solution notebook's code cells once (grading mode: no widgets, short training)."""
    if notebook not in _NOTEBOOK_NS:
        import matplotlib

        matplotlib.use("Agg")
        # grading mode while the notebook runs, and only then: later tests in this process
        # must see the explorers as a student does
        previous = os.environ.get("TLAB_GRADING")
        os.environ["TLAB_GRADING"] = "1"
        try:
            ns: dict = {"__name__": "__main__"}
            for cell in _cells(notebook):
                if cell["cell_type"] != "code":
                    continue
                src = "".join(cell["source"])
                src = "\n".join(
                    line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))
                )
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(src, f"<{notebook}:{_cell_id(cell)}>", "exec"), ns)
        finally:
            if previous is None:
                os.environ.pop("TLAB_GRADING", None)
            else:
                os.environ["TLAB_GRADING"] = previous
        import matplotlib.pyplot as plt

        plt.close("all")
        _NOTEBOOK_NS[notebook] = ns
    return _NOTEBOOK_NS[notebook]


def _defined_name(src: str) -> str:
    return [line.split("(")[0][4:] for line in src.splitlines() if line.startswith("def ")][-1]


def graded_cells_pass(entry: Mistake) -> tuple[bool, str]:
    """Does every graded cell of the entry's exercise (from the registry) pass with the entry's
    function, defined again in the solution notebook's namespace, in it?"""
    exercise = REGISTRY[entry.exercise]
    base = notebook_namespace(exercise.notebook)
    for cell in exercise.cells:
        ns = dict(base)
        exec(entry.source, ns)
        ns[cell.function] = ns[_defined_name(entry.source)]
        torch.manual_seed(0)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                source = graded_source(exercise.notebook, cell.grade_id)
                exec(compile(source, f"<{cell.grade_id}>", "exec"), ns)
        except Exception as exc:  # noqa: BLE001 - any failure of the graded cell
            return False, f"{cell.grade_id}: {type(exc).__name__}: {exc}"
    return True, ""
