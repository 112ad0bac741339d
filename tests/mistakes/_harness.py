"""Runs the wrong-implementation catalogues: each entry is the source of a function written the
way a student writes it, the words its check's message must contain, and the exercise.

Before this work (commit 3ba5afe; `python -m tests.mistakes.report` with that checkout first on
PYTHONPATH), 176 wrong implementations:

    notebook total named generic misleading passed
    01          50    33      10          4      3
    02          39    22       8          5      4
    03          40    16      12          5      7
    04          47    24      18          0      5
    all        176    95      48         14     19

Outcomes per wrong implementation (the share the issue asks for):
  named       the check fails and its message contains every required word;
  generic     the check fails with an observation (no mistake named) lacking the words;
  misleading  the check fails naming a mistake, but not this one (worse than no name);
  passed      the check passed a wrong implementation.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import pathlib
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = pathlib.Path(__file__).resolve().parents[2]

# exercise -> (check name, notebook, graded cells as (cell id, name the cell calls))
EXERCISES = {
    "softmax": ("check_softmax", "01_self_attention", [("softmax_tests", "softmax")]),
    "scaled_dot_product_attention": (
        "check_scaled_dot_product_attention",
        "01_self_attention",
        [("sdpa_tests", "scaled_dot_product_attention")],
    ),
    "self_attention": (
        "check_self_attention",
        "01_self_attention",
        [("self_attention_tests", "self_attention")],
    ),
    "self_attention_macs": (
        "check_self_attention_macs",
        "01_self_attention",
        [("macs_tests", "self_attention_macs")],
    ),
    "split_heads": (
        "check_split_heads",
        "02_multi_head_attention",
        [("split_heads_tests", "split_heads")],
    ),
    "merge_heads": (
        "check_merge_heads",
        "02_multi_head_attention",
        [("merge_heads_tests", "merge_heads")],
    ),
    "multi_head_attention": (
        "check_multi_head_attention",
        "02_multi_head_attention",
        [("mha_loop_tests", "multi_head_attention_loop"), ("mha_tests", "multi_head_attention")],
    ),
    "to_torch_mha": (
        "check_to_torch_mha",
        "02_multi_head_attention",
        [("torch_mha_tests", "to_torch_mha")],
    ),
    "sinusoidal_encoding": (
        "check_sinusoidal_encoding",
        "03_positional_encodings",
        [("sinusoidal_tests", "sinusoidal_encoding")],
    ),
    "shift_matrix": (
        "check_shift_matrix",
        "03_positional_encodings",
        [("shift_matrix_tests", "shift_matrix")],
    ),
    "offset_dot_product": (
        "check_offset_dot_product",
        "03_positional_encodings",
        [("offset_tests", "offset_dot_product")],
    ),
    "apply_rope": ("check_apply_rope", "03_positional_encodings", [("rope_tests", "apply_rope")]),
    "causal_mask": (
        "check_causal_mask",
        "04_masking_and_cross_attention",
        [("causal_mask_tests", "causal_mask")],
    ),
    "future_leaks": (
        "check_future_leaks",
        "04_masking_and_cross_attention",
        [("future_leaks_tests", "future_leaks")],
    ),
    "padding_mask": (
        "check_padding_mask",
        "04_masking_and_cross_attention",
        [("padding_mask_tests", "padding_mask")],
    ),
    "pad_and_truncate": (
        "check_pad_and_truncate",
        "04_masking_and_cross_attention",
        [("pad_and_truncate_tests", "pad_and_truncate")],
    ),
    "cross_attention": (
        "check_cross_attention",
        "04_masking_and_cross_attention",
        [("cross_attention_tests", "cross_attention")],
    ),
}

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


@dataclass
class Entry:
    exercise: str
    words: tuple[str, ...]  # every word must appear in the message (case-insensitive); () = correct
    src: str
    label: str = ""
    notebook: str = field(default="")

    def __post_init__(self) -> None:
        first = self.src.strip().splitlines()[0]
        self.label = self.label or (first[1:].strip() if first.startswith("#") else first)
        self.notebook = EXERCISES[self.exercise][1][:2]


def wrong(exercise: str, words: str, src: str) -> Entry:
    """``words``: required words separated by ' & '."""
    return Entry(exercise, tuple(w.strip() for w in words.split("&")), src)


def right(exercise: str, src: str) -> Entry:
    return Entry(exercise, (), src)


def base_namespace() -> dict:
    ns = {"torch": torch, "math": math, "np": np, "F": F, "nn": nn}
    exec(HELPERS, ns)
    return ns


def build(entry: Entry, ns: dict | None = None):
    """The entry's function (the last function its source defines), defined in ``ns``."""
    ns = base_namespace() if ns is None else ns
    before = set(ns)
    exec(entry.src, ns)
    names = [n for n in ns if n not in before or n == _defined_name(entry.src)]
    name = _defined_name(entry.src)
    return ns[name] if name in ns else ns[names[-1]]


def _defined_name(src: str) -> str:
    defs = [line.split("(")[0][4:] for line in src.splitlines() if line.startswith("def ")]
    return defs[-1]


GENERIC = (
    "differs from the reference",
    "entries of the",
    "contains nan",
    "should be [",
    "but received [",
    "differs from p_(t+k)",
    "differ from the reference",
)


def _named_flag(message: str) -> bool:
    """For checks without CheckFailed.named (the baseline): does the message name a mistake?"""
    low = message.lower()
    if "check the pairing" in low:
        return True  # the baseline's RoPE fallback names a mistake
    if any(g in low for g in GENERIC) and " — " not in message:
        return False
    if "raised" in low and " — " not in message:
        return False
    core = low.split(" [case")[0].rstrip()
    if ("should have shape" in core or "ids should" in core) and core.endswith(")."):
        return False
    if core.endswith("but received " + core.rsplit("but received ", 1)[-1]) and "." in core[-2:]:
        return core.count(".") <= 2  # "... but received X." with nothing after it
    if "yet your detector said" in core and core.endswith((" true.", " false.")):
        return False
    if "must be a torch.tensor" in core:
        return False
    return True


def run_check(entry: Entry, checks_module) -> tuple[str, str, bool | None]:
    """Like classify, but uses CheckFailed.named when the checks provide it."""
    fn = build(entry)
    check = getattr(checks_module, EXERCISES[entry.exercise][0])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            check(fn)
    except AssertionError as exc:
        message = str(exc)
        flag = getattr(exc, "named", None)
    else:
        return "passed", "", None
    low = message.lower()
    if all(any(alt in low for alt in w.lower().split("|")) for w in entry.words):
        return "named", message, flag
    if flag is None:
        flag = _named_flag(message)
    return ("misleading" if flag else "generic"), message, flag


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
        import os

        import matplotlib

        matplotlib.use("Agg")
        os.environ.setdefault("TLAB_GRADING", "1")
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
        import matplotlib.pyplot as plt

        plt.close("all")
        _NOTEBOOK_NS[notebook] = ns
    return _NOTEBOOK_NS[notebook]


def graded_cells_pass(entry: Entry) -> tuple[bool, str]:
    """Does every graded cell of the entry's exercise pass with the entry's function in it?"""
    _, notebook, cells = EXERCISES[entry.exercise]
    base = notebook_namespace(notebook)
    for cell_id, name in cells:
        ns = dict(base)
        fn = build(entry, ns)
        ns[name] = fn
        torch.manual_seed(0)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(graded_source(notebook, cell_id), f"<{cell_id}>", "exec"), ns)
        except Exception as exc:  # noqa: BLE001 - any failure of the graded cell
            return False, f"{cell_id}: {type(exc).__name__}: {exc}"
    return True, ""
