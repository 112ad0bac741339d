"""Check for notebook 1, exercise 2: scaled dot-product attention (and the shared pieces the
self-, cross- and multi-head attention checks reuse).

    scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)

A query whose keys are all masked may give zeros or NaN (the text leaves it open here); the
candidate mistakes are built on both behaviours, so the diagnosis does not depend on it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import attention as _ref
from transformer_lab.checks.engine.attention_evidence import (
    attention_forbidden,
    check_attention_pair,
    tensor_error_hint,
)
from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.nb01_self_attention.softmax import check_softmax
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_scaled_dot_product_attention", "check_softmax"]

ATOL, RTOL = 1e-5, 1e-4


def _cases(hidden: bool) -> list[Case]:
    g = generator(9202 if hidden else 202)

    def r(*shape: int, scale: float = 1.0) -> Tensor:
        return torch.randn(*shape, generator=g) * scale

    def pad(lengths: list[int], S: int) -> Tensor:
        return (torch.arange(S)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]

    def causal(T: int) -> Tensor:
        return torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)

    left_padded = causal(4) & torch.tensor([False, True, True, True])  # query 0 sees nothing
    specs = [
        ("2-D inputs, T != S", r(3, 4), r(5, 4), r(5, 6), None),
        ("batched (B, T, D)", r(2, 3, 4), r(2, 5, 4), r(2, 5, 3), None),
        ("square T = S = D", r(2, 4, 4), r(2, 4, 4), r(2, 4, 4), None),
        ("heads (B, H, T, D)", r(2, 2, 3, 8), r(2, 2, 6, 8), r(2, 2, 6, 8), None),
        ("causal mask (T, T)", r(2, 5, 4), r(2, 5, 4), r(2, 5, 4), causal(5)),
        ("padding mask (B, 1, 1, S)", r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 4), pad([5, 2], 5)),
        ("large scores", r(2, 4, 16, scale=10.0), r(2, 4, 16, scale=10.0), r(2, 4, 16), None),
        ("a fully masked row", r(2, 4, 4), r(2, 4, 4), r(2, 4, 3), left_padded),
    ]
    if hidden:
        specs += [
            ("one query (T = 1)", r(2, 1, 8), r(2, 7, 8), r(2, 7, 2), None),
            ("causal mask with heads", r(1, 3, 6, 4), r(1, 3, 6, 4), r(1, 3, 6, 5), causal(6)),
            (
                "padding, large width",
                r(3, 2, 4, 32),
                r(3, 2, 6, 32),
                r(3, 2, 6, 3),
                pad([6, 1, 4], 6),
            ),
            (
                "causal and padding",
                r(2, 2, 5, 4),
                r(2, 2, 5, 4),
                r(2, 2, 5, 4),
                causal(5) & pad([5, 3], 5),
            ),
            ("an empty sequence", r(2, 3, 4), r(2, 3, 4), r(2, 3, 4), pad([3, 0], 3)[:, 0]),
        ]
    g1 = generator(9203 if hidden else 203)  # its own draws: the cases above keep their inputs
    key_mask = torch.tensor([True, False, True, True, False])  # (S,): keys 1 and 4 are hidden
    specs += [
        (
            "a (S,) key mask, T != S",
            *(torch.randn(n, 4, generator=g1) for n in (3, 5, 5)),
            key_mask,
        ),
        ("a (S,) key mask, T = S", *(torch.randn(5, 4, generator=g1) for _ in range(3)), key_mask),
    ]
    cases = []
    for name, q, k, v, mask in specs:
        kwargs = {} if mask is None else {"mask": mask}
        case = Case(name, (q, k, v), kwargs, describe_args(q=q, k=k, v=v, mask=mask))
        case.data.update(q=q, k=k, v=v, mask=mask, sums_to_one=-1)
        case.data["dims"] = {"D": q.shape[-1], "S": k.shape[-2], "T": q.shape[-2]}
        case.data["expected"] = _ref.scaled_dot_product_attention(q, k, v, mask)
        if mask is not None:
            case.data["variations"] = [("mask", {"mask": None})]
        cases.append(case)
    return cases


def _mask_crash_hint(run: Runner, exc: BaseException, case: Case) -> str:
    """Evidence for a crash in the mask handling: the same call without the mask runs."""
    mask = case.data.get("mask")
    if mask is None or not isinstance(exc, (RuntimeError, IndexError)):
        return ""
    _, error, calls = run.attempt(tuple(a.clone() for a in case.args), {})
    if error is not None or calls:
        return ""
    return (
        f"your function runs without the mask but fails with this {tuple(mask.shape)} mask: use "
        f"the mask as it is, it broadcasts to the (..., T, S) scores (True = may attend): "
        f"scores.masked_fill(~mask, float('-inf'))"
    )


def check_scaled_dot_product_attention(scaled_dot_product_attention, hidden: bool = False) -> None:
    """Check ``scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)``.

    Covers 2-D, batched and multi-head shapes, T != S, value width != key width, causal and
    padding masks (True = may attend), large scores and a query with nothing to attend to.
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_scaled_dot_product_attention",
        scaled_dot_product_attention,
        attention_forbidden(),
        hidden,
        lambda e, c: (
            _mask_crash_hint(run, e, c)
            or tensor_error_hint(e, "scaled_dot_product_attention(q, k, v, mask=None)")
        ),
        reference=_ref.scaled_dot_product_attention,
    )
    for case in _cases(hidden):
        q, k, v, mask = (case.data[n] for n in ("q", "k", "v", "mask"))
        exp_out, exp_w = case.data["expected"]
        out, weights = run.expect_tuple(run.call(case), case, ("out", "weights"), (exp_out, exp_w))
        check_attention_pair(
            run,
            case,
            out,
            weights,
            exp_out,
            exp_w,
            mask,
            q,
            k,
            v,
            {
                "Dv": (v.shape[-1], "the values' width"),
                "S": (k.shape[-2], "the number of keys"),
                "T": (q.shape[-2], "the number of queries"),
            },
        )
    run.passed()


register(
    Exercise(
        "scaled_dot_product_attention",
        "01_self_attention",
        "scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)",
        cells=(Cell("sdpa_tests", "scaled_dot_product_attention", 3),),
        check=check_scaled_dot_product_attention,
        reference=_ref.scaled_dot_product_attention,
    )
)
