"""How the checks speak: the failure type students see, and how values are described.

CheckFailed      the AssertionError a check raises (IPython shows the student's line only)
kind_of(x)       'a numpy array of shape (3, 4)', 'a tuple of length 2', 'a float'
describe_args    'q (2, 5, 4), mask (5, 5)' for a case's inputs
signature_hint   'keep the signature `softmax(x, dim=-1)`' when a TypeError means it was changed
stub_left        what to do when the student's function still raises NotImplementedError
"""

from __future__ import annotations

import linecache
import os
from typing import Any

import torch

from transformer_lab.checks.engine.guards import TRUSTED

__all__ = [
    "CheckFailed",
    "signature_hint",
    "kind_of",
    "shape_of",
    "describe_args",
    "generator",
    "common_error_hint",
    "stub_left",
]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def generator(seed: int) -> torch.Generator:
    """A private, seeded RNG (the global RNG of the notebook is left alone)."""
    from transformer_lab.checks.engine.grading_hooks import (
        hidden_seed,
    )  # the grader's secret, if grading

    return torch.Generator().manual_seed(hidden_seed(seed))


def kind_of(x: Any) -> str:
    """How a message names a value's type: 'a numpy array', 'a list of length 2', 'a float'."""
    if TRUSTED.is_tensor(x):
        return f"a tensor of shape {tuple(x.shape)} and dtype {x.dtype}"
    if type(x).__module__ == "numpy" and hasattr(x, "shape"):
        if type(x).__name__ == "ndarray":
            return f"a numpy array of shape {tuple(x.shape)} (convert with torch.as_tensor)"
        return f"a numpy scalar ({type(x).__name__})"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    if x is None:
        return "None"
    return f"a {type(x).__name__}"


def shape_of(x: Any) -> str:
    if TRUSTED.is_tensor(x):
        return str(tuple(x.shape))
    return kind_of(x)


def describe_args(**named: Any) -> str:
    """'q (2, 5, 4), k (2, 5, 4)' style description of the inputs of a case."""
    parts = []
    for name, value in named.items():
        if TRUSTED.is_tensor(value):
            parts.append(f"{name} {tuple(value.shape)}")
        elif value is not None:
            parts.append(f"{name}={value!r}")
    return ", ".join(parts)


class CheckFailed(AssertionError):
    """A check's verdict: one short message naming the mistake (or what was observed).

    Attributes: ``check`` (e.g. "check_softmax"), ``message`` (without the check's name),
    ``case`` (the failing case's name or None), ``named`` (True when a mistake is named,
    False when the message describes an observation), ``student`` / ``reference`` (the
    failing case's outputs, when there were outputs to compare).

    IPython renders it with :meth:`_render_traceback_`: the student's own line and the message,
    without the frames of the checks.
    """

    def __init__(
        self,
        check: str,
        message: str,
        case: str | None = None,
        where: str = "",
        named: bool = False,
        student: Any = None,
        reference: Any = None,
    ) -> None:
        super().__init__(f"{check}: {message}{where}")
        self.check, self.message, self.case, self.named = check, message, case, named
        self.student, self.reference = student, reference

    def _render_traceback_(self) -> list[str]:
        lines = []
        tb = self.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            path = os.path.abspath(code.co_filename)
            ours = path.startswith(_PACKAGE_DIR) or "site-packages" in path
            if not ours and not code.co_filename.startswith("<frozen"):
                text = linecache.getline(code.co_filename, tb.tb_lineno).strip()
                if text:
                    lines.append(f"line {tb.tb_lineno}: {text}")
            tb = tb.tb_next
        red, reset = "\x1b[0;31m", "\x1b[0m"
        return lines[-1:] + [f"{red}CheckFailed{reset}: {self}"]


def common_error_hint(exc: BaseException) -> str:
    """Hints for PyTorch errors that mean the same thing in every exercise."""
    text = str(exc)
    if "torch.return_types" in text:
        return (
            "x.max(dim) and x.min(dim) return (values, indices): use x.amax(dim, keepdim=True) "
            "or .values"
        )
    if "view size is not compatible" in text:
        return (
            ".view(...) needs a contiguous tensor, and this one is not (a slice such as "
            "x[:, :-1], a transpose or a permute makes such views): use .reshape(...)"
        )
    if "Expected target size" in text:  # F.cross_entropy on (B, T, V) logits
        return (
            "F.cross_entropy reads the classes on dim 1: flatten the logits to (N, V) and the "
            "targets to (N,) (logits.reshape(-1, V), targets.reshape(-1)) before calling it"
        )
    if "leaf Variable" in text:
        return "copy into parameters under `with torch.no_grad():`"
    if "same device" in text:
        return "keep every tensor on the inputs' device (no .cuda() / .to(device) inside)"
    return ""


def signature_hint(exc: BaseException, expected: str) -> str:
    """A hint for a TypeError that means the signature was changed."""
    text = str(exc)
    if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
        return f"keep the signature `{expected}`"
    return ""


def stub_left(function: str = "") -> str:
    """The message for a function that still raises NotImplementedError (the student's notebook
    shows ``# YOUR CODE HERE`` and ``raise NotImplementedError()`` where the answer goes)."""
    where = f"the cell that defines `{function}`" if function else "your function's cell"
    return (
        f"not implemented yet: in {where}, replace the lines `# YOUR CODE HERE` and "
        f"`raise NotImplementedError()` with your code, run that cell, then run this one again."
    )
