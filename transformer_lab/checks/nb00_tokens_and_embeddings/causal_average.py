"""Check for notebook 0, exercise 7: averaging the past with a lower-triangular matrix.

    causal_average(x) -> the same shape      x (T, C) or (B, T, C), floating point

Row t of the result is the mean of x's rows 0..t along the positions (dim -2), in x's dtype:
``A @ x`` with A (T, T) lower-triangular, row t holding 1/(t + 1) in columns 0..t. A cumulative
sum divided by t + 1, a loop, or a softmax of masked zeros are the same numbers and pass.
"""

from __future__ import annotations

import re

import torch

from transformer_lab.checks.engine.core import Case, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb00_tokens_and_embeddings.causal_mistakes import mistakes
from transformer_lab.checks.nb00_tokens_and_embeddings.runner import WatchedRunner
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.lessons import why_attention as _ref

__all__ = ["check_causal_average"]


def _product_hint(text: str, x: torch.Tensor) -> str:
    """A matrix product of the wrong sizes: which of the usual slips made it."""
    T, C = x.shape[-2], x.shape[-1]
    sizes = re.search(r"\((\d+)x(\d+) and (\d+)x(\d+)\)", text)
    if sizes and (int(sizes[1]), int(sizes[2])) == (T, C):
        return (
            "x @ A multiplies the channels; the positions are x's rows, so multiply from the "
            "left: A @ x with A (T, T)"
        )
    if x.dim() == 3:
        return f"T is x.shape[-2] ({T} here); x.shape[0] is the batch size B when x is (B, T, C)"
    return f"A is (T, T) with T = x.shape[-2] ({T} here), and the product is A @ x"


def _error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    x = case.args[0]
    if x.dim() == 3 and ("too many values to unpack" in text or "must be a matrix" in text):
        return (
            "x may be (B, T, C) too: read T as x.shape[-2] and multiply with @ (torch.matmul "
            "broadcasts A (T, T) over the batch; torch.mm and `T, C = x.shape` take 2-D only)"
        )
    if any(
        words in text
        for words in ("cannot be multiplied", "must match the size", "Expected size for first")
    ):
        return _product_hint(text, x)
    if "same dtype" in text or "expected scalar type" in text or "dtype" in text:
        return (
            f"x is {x.dtype} here: build the weights in x's dtype (torch.ones(T, T, "
            f"dtype=x.dtype), or .to(x.dtype)), not float32 always"
        )
    return _signature_hint(exc, "causal_average(x)")


def _cases(hidden: bool) -> list[Case]:
    g = generator(7300 if hidden else 300)
    shapes = [(5, 3), (2, 4, 3), (4, 4), (1, 6), (3, 6, 2), (1, 1, 4)]
    if hidden:
        shapes += [(7, 5), (6, 6), (4, 9, 3), (2, 5, 5)]
    specs = [(s, torch.float32) for s in shapes] + [((2, 5, 3), torch.float64)]
    cases = []
    for shape, dtype in specs:
        x = torch.randn(*shape, generator=g).to(dtype)
        name = "a sequence" if len(shape) == 2 else "a batch"
        if dtype != torch.float32:
            name = f"a {str(dtype).removeprefix('torch.')} batch"
        case = Case(f"{name} {shape}", (x,), {}, describe_args(x=x))
        case.data["expected"] = _ref.causal_average(x)
        cases.append(case)
    return cases


def _shape_hint(x: torch.Tensor, got: tuple) -> str | None:
    T, C = x.shape[-2], x.shape[-1]
    if got == (T, T):
        return "that is the (T, T) weight matrix: return the averages A @ x, x's own shape"
    if x.dim() == 3 and got == (T, C):
        return (
            "you average one sequence only (x[0]?): x is (B, T, C) here, average every "
            "sequence of the batch (A @ x broadcasts over B)"
        )
    if got == tuple(x.shape[:-2]) + (C,) or got == tuple(x.shape[:-2]) + (1, C):
        return "you averaged the whole sequence into one row: keep one row per position t"
    return None


def check_causal_average(causal_average, hidden: bool = False) -> None:
    """Check ``causal_average(x)``: row t is the mean of rows 0..t, for (T, C) and (B, T, C)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = WatchedRunner(
        "check_causal_average",
        causal_average,
        [
            Forbidden(
                "transformer_lab.lessons.why_attention.causal_average", function=_ref.causal_average
            )
        ],
        hidden,
        _error_hint,
        reference=_ref.causal_average,
        function="causal_average",
    )
    for case in _cases(hidden):
        (x,) = case.args
        want = case.data["expected"]
        value = run.call(case)
        if TRUSTED.is_tensor(value) and value.dtype != x.dtype and value.shape == want.shape:
            run.fail(
                f"the averages should keep x's dtype {x.dtype}, but yours are {value.dtype}: "
                f"build the weights with dtype=x.dtype (no .float() on the result)",
                case,
            )
        got = run.expect_tensor(
            value, case, want.shape, x.dtype, shape_hint=lambda s, x=x: _shape_hint(x, s),
            expected=want,
        )  # fmt: skip
        if run.close(got, want, atol=1e-5, rtol=1e-4):
            continue
        case.data["axes"] = ("batch", "position", "channel")[-x.dim() :]
        known = mistakes(x, got, want)
        run.explain(got, want, case, known, atol=1e-5, rtol=1e-4, what="averages")
    run.passed()


register(
    Exercise(
        "causal_average",
        "00_tokens_and_embeddings",
        "causal_average(x) -> (T, C) or (B, T, C)",
        cells=(Cell("causal_average_tests", "causal_average", 1),),
        check=check_causal_average,
        reference=_ref.causal_average,
    )
)
