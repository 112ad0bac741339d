"""Check for notebook 04's cross-attention: queries from one sequence, keys and values from another.

cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None) -> (out, weights)

The projection mistakes are notebook 01's (``projections._check``), with x_kv in the role of x.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import attention as _ref
from transformer_lab.checks.engine.attention_evidence import tensor_error_hint
from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.expect import _clone
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.nb01_self_attention.projections import _check, _forbidden
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_cross_attention"]

LARGE = "large scores"  # the case whose softmax overflows unless it is shifted


def _cross_cases(hidden: bool) -> list[Case]:
    g = generator(9404 if hidden else 404)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731

    def pad(lengths: list[int], S: int) -> Tensor:
        return (torch.arange(S)[None, :] < torch.tensor(lengths)[:, None])[:, None, :]  # (B, 1, S)

    specs = [
        ("different widths, T != S", r(2, 3, 6), r(2, 5, 4), r(6, 8), r(4, 8), r(4, 5), None),
        ("same widths, T != S", r(2, 3, 6), r(2, 5, 6), r(6, 4), r(6, 4), r(6, 4), None),
        (
            "padding mask (B, 1, S)",
            r(2, 4, 6),
            r(2, 5, 6),
            r(6, 4),
            r(6, 4),
            r(6, 3),
            pad([5, 2], 5),
        ),
        (
            "an empty source sequence",
            r(2, 3, 4),
            r(2, 4, 4),
            r(4, 4),
            r(4, 4),
            r(4, 2),
            pad([2, 0], 4),
        ),
        # scores of a few hundred: exp() overflows float32 unless each row's maximum is subtracted
        (LARGE, r(2, 3, 6) * 10, r(2, 5, 6), r(6, 4), r(6, 4), r(6, 3), None),
        (
            "float64 inputs",
            r(2, 3, 5).double(),
            r(2, 4, 3).double(),
            r(5, 4).double(),
            r(3, 4).double(),
            r(3, 2).double(),
            pad([4, 1], 4),
        ),
        # masks that only broadcast to (B, T, S): no batch dimension, or one of size 1
        ("a (1, 1, S) mask", r(2, 3, 4), r(2, 5, 4), r(4, 4), r(4, 4), r(4, 2), pad([3], 5)),
        (
            "a (T, S) mask, no batch dimension",
            r(2, 4, 6),
            r(2, 5, 6),
            r(6, 4),
            r(6, 4),
            r(6, 3),
            _banded(4, 5),
        ),
    ]
    if hidden:
        specs += [
            ("one query", r(3, 1, 4), r(3, 6, 2), r(4, 4), r(2, 4), r(2, 2), pad([6, 1, 3], 6)),
            (
                "float64",
                r(2, 2, 3).double(),
                r(2, 3, 3).double(),
                r(3, 2).double(),
                r(3, 2).double(),
                r(3, 2).double(),
                pad([3, 0], 3),
            ),
            (
                "a (T, S) mask, T < B",
                r(3, 2, 4),
                r(3, 4, 4),
                r(4, 2),
                r(4, 2),
                r(4, 2),
                _banded(2, 4),
            ),
        ]
    cases = []
    for name, xq, xkv, wq, wk, wv, mask in specs:
        kwargs = {} if mask is None else {"mask": mask}
        case = Case(
            name,
            (xq, xkv, wq, wk, wv),
            kwargs,
            describe_args(x_q=xq, x_kv=xkv, w_q=wq, w_k=wk, w_v=wv, mask=mask),
        )
        case.data.update(xq=xq, xkv=xkv, wq=wq, wk=wk, wv=wv, mask=mask, sums_to_one=-1)
        case.data["large_scores"] = name == LARGE
        case.data["expected"] = _ref.scaled_dot_product_attention(xq @ wq, xkv @ wk, xkv @ wv, mask)
        if mask is not None:
            case.data["variations"] = [("mask", {"mask": None})]
        cases.append(case)
    return cases


def _banded(T: int, S: int) -> Tensor:
    """(T, S): query t may attend to keys 0 .. t + 1 (every row different, none empty)."""
    return torch.arange(S)[None, :] <= torch.arange(T)[:, None] + 1


def _answers(value, expected: tuple) -> bool:
    """``value`` is the expected (out, weights)."""
    if not isinstance(value, tuple) or len(value) != 2:
        return False
    return all(
        TRUSTED.is_tensor(v)
        and v.shape == e.shape
        and TRUSTED.allclose(v.to(e.dtype), e, atol=1e-5, rtol=1e-4)
        for v, e in zip(value, expected)
    )


def _broadcast_mask_hint(run: Runner, case: Case) -> str:
    """Wrong with a mask that only broadcasts to (B, T, S), but right with the same mask given a
    batch dimension, or raising with it and running without it: the mask is indexed per batch
    element (mask[b]) or assumed to be (B, 1, S)."""
    mask, (B, T), S = case.data["mask"], case.data["xq"].shape[:2], case.data["xkv"].shape[1]
    if mask is None or (mask.dim() == 3 and mask.shape[0] == B):  # a batch dimension of its own
        return ""
    value_with_mask, error, calls = run.attempt(_clone(case.args), {"mask": mask.clone()})
    if calls or (error is None and _answers(value_with_mask, case.data["expected"])):
        return ""
    advice = (
        "use the mask as it is (the scores broadcast it), without indexing it per batch element "
        "(mask[b]) or assuming the shape of the mask"
    )
    shape = tuple(mask.shape)
    forms = [(B, T, S)] + ([(B, 1, S)] if mask.dim() < 2 or mask.shape[-2] == 1 else [])
    for form in forms:
        value, err, calls = run.attempt(_clone(case.args), {"mask": mask.expand(form).clone()})
        if not calls and err is None and _answers(value, case.data["expected"]):
            return (
                f"your function is right with a {form} mask but not with this {shape} mask, "
                f"which broadcasts to (B, T, S): {advice}"
            )
    q, k, v = (case.data[x] @ case.data[w] for x, w in (("xq", "wq"), ("xkv", "wk"), ("xkv", "wv")))
    if error is None and _answers(value_with_mask, _ref.scaled_dot_product_attention(q, k, v)):
        return (
            f"your function ignores this {shape} mask, which broadcasts to (B, T, S), though it "
            f"applies the (B, 1, S) masks: {advice}"
        )
    if error is not None:
        _, err, calls = run.attempt(_clone(case.args), {})
        if not calls and err is None:
            return (
                f"your function raised {type(error).__name__} with this {shape} mask, which "
                f"broadcasts to (B, T, S), and runs without it: {advice}"
            )
    return ""


def _widths_are_inputs(exc: BaseException, case: Case) -> bool:
    from transformer_lab.checks.engine.attention_evidence import _matmul_widths

    widths = _matmul_widths(str(exc))
    return widths is not None and widths[0] in (case.args[0].shape[-1], case.args[1].shape[-1])


def _key_width_hint(exc: BaseException, case: Case) -> str:
    """q and k of different widths, one of them the values' width: a weight in another role."""
    import re

    found = re.search(r"q has D=(\d+) and k has D=(\d+)", str(exc))
    if not found or len(case.args) < 5:
        return ""
    D, Dv = case.args[3].shape[-1], case.args[4].shape[-1]
    dq, dk = int(found.group(1)), int(found.group(2))
    if D == Dv or {dq, dk} != {D, Dv}:
        return ""
    role = "keys" if dk == Dv else "queries"
    return (
        f"your {role} have the values' width Dv={Dv}: they use w_v; Q = x_q @ w_q and K = x_kv @ "
        f"w_k share the width D={D}, only V = x_kv @ w_v has width Dv"
    )


def check_cross_attention(cross_attention, hidden: bool = False) -> None:
    """Check ``cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None) -> (out, weights)``.

    Queries come from ``x_q`` (B, T, C), keys and values from ``x_kv`` (B, S, C_kv); the
    optional boolean mask (True = may attend) broadcasts to (B, T, S).
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_cross_attention",
        cross_attention,
        _forbidden(),
        hidden,
        lambda e, c: (
            "the projections are Q = x_q @ w_q, K = x_kv @ w_k, V = x_kv @ w_v (row vectors, "
            "each w of shape (C_in, D))"
            if "mat1 and mat2" in str(e) and _widths_are_inputs(e, c)
            else _key_width_hint(e, c)
            or tensor_error_hint(e, "cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None)")
        ),
        reference=lambda xq, xkv, wq, wk, wv, mask=None: _ref.scaled_dot_product_attention(
            xq @ wq, xkv @ wk, xkv @ wv, mask
        ),
    )
    for case in _cross_cases(hidden):
        xq, xkv, wq, wk, wv, mask = (case.data[n] for n in ("xq", "xkv", "wq", "wk", "wv", "mask"))
        hint = _broadcast_mask_hint(run, case)
        if hint:
            run.fail(hint, case)
        _check(run, case, xq, xkv, wq, wk, wv, mask, "x_kv")
    run.passed()


def _cross_attention_reference(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return _ref.scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)


register(
    Exercise(
        "cross_attention",
        "04_masking_and_cross_attention",
        "cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None) -> (out, weights)",
        cells=(Cell("cross_attention_tests", "cross_attention", 2),),
        check=check_cross_attention,
        reference=_cross_attention_reference,
        against="transformer_lab.attention.scaled_dot_product_attention",
    )
)
