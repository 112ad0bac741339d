"""Check for notebook 01's self-attention with explicit projection matrices, and the mistakes of
projections shared with notebook 04's cross-attention (which imports ``_check`` from here: the
earliest notebook that uses them).

self_attention(x, w_q, w_k, w_v) -> (out, weights)          row vectors: Q = X W_q
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
from transformer_lab.checks.engine.attention_mistakes import attend
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_self_attention"]


def _forbidden():
    return [
        f
        for f in attention_forbidden()
        if "scaled_dot_product_attention" not in f.label or "PyTorch" in f.label
    ]


def _projection_mistakes(xq, xkv, wq, wk, wv, mask, kv_name: str) -> list[Mistake]:
    """Mistakes in the projections; each is compared on the output (first element)."""

    def A(make, m=mask) -> object:  # make() -> (q, k, v); built only when tried
        return lambda sm: attend(*make(), m, sm)

    swapped = (
        (lambda: (xkv @ wk, xq @ wq, xq @ wv))
        if xq is xkv
        else (lambda: (xq @ wk, xkv @ wq, xkv @ wv))
    )
    return [
        Mistake(
            "queries and keys are swapped (scores K Q^T): Q = x @ w_q, K = x @ w_k, scores = Q K^T",
            A(swapped),
            softmax=True,
        ),
        Mistake(
            "the projections are applied as x @ w.T: the course uses row vectors, Q = x @ w_q",
            A(lambda: (xq @ wq.T, xkv @ wk.T, xkv @ wv.T)),
            softmax=True,
        ),
        Mistake(
            "the keys use w_q: K = x @ w_k (each of w_q, w_k, w_v has its own role)",
            A(lambda: (xq @ wq, xkv @ wq, xkv @ wv)),
            softmax=True,
        ),
        Mistake(
            f"the values are not projected: use V = {kv_name} @ w_v",
            A(lambda: (xq @ wq, xkv @ wk, xkv)),
            softmax=True,
        ),
        Mistake(
            "keys and values come from x_q instead of x_kv",
            A(lambda: (xq @ wq, xq @ wk, xq @ wv), None),
            softmax=True,
        ),
    ] + _role_mistakes(xq, xkv, wq, wk, wv, A, kv_name)


def _role_mistakes(xq, xkv, wq, wk, wv, A, kv_name: str) -> list[Mistake]:
    """One projection built with another role's weight or input (queries with w_k, values
    from x_q, ...): each role is tried with every other weight and source."""
    weights = {"w_q": wq, "w_k": wk, "w_v": wv}
    roles = [
        ("queries", "Q", "w_q", "x_q"),
        ("keys", "K", "w_k", kv_name),
        ("values", "V", "w_v", kv_name),
    ]
    rule = (
        f"Q = x_q @ w_q, K = {kv_name} @ w_k, V = {kv_name} @ w_v"
        if xq is not xkv
        else ("Q = x @ w_q, K = x @ w_k, V = x @ w_v")
    )
    out = []
    for i, (role, _, own, _) in enumerate(roles):
        for name, w in weights.items():
            if name == own:
                continue

            def make(i=i, w=w):
                qkv = [xq @ wq, xkv @ wk, xkv @ wv]
                qkv[i] = (xq if i == 0 else xkv) @ w
                return tuple(qkv)

            out.append(
                Mistake(f"the {role} use {name} instead of {own}: {rule}", A(make), softmax=True)
            )
    if xq is not xkv:
        for i, (role, _, _, src) in enumerate(roles):

            def swap(i=i):
                qkv = [xq @ wq, xkv @ wk, xkv @ wv]
                qkv[i] = (xkv if i == 0 else xq) @ (wq, wk, wv)[i]
                return tuple(qkv)

            wrong_src = kv_name if i == 0 else "x_q"
            out.append(
                Mistake(
                    f"the {role} come from {wrong_src} instead of {src}: {rule}",
                    A(swap),
                    softmax=True,
                )
            )
    return out


def _right_per_sequence(run: Runner, case: Case) -> bool:
    """The student's function, called on each batch element alone, gives the reference's."""
    exp_out, exp_w = case.data["expected"]
    for b in range(case.args[0].shape[0]):
        args = tuple(a[b].clone() if torch.is_tensor(a) and a.dim() == 3 else a for a in case.args)
        value, error, calls = run.attempt(args, {})
        if error is not None or calls or not isinstance(value, tuple) or len(value) != 2:
            return False
        o, w = value
        if not (torch.is_tensor(o) and torch.is_tensor(w)) or o.shape != exp_out[b].shape:
            return False
        if w.shape != exp_w[b].shape or not run.close(o.detach(), exp_out[b], 1e-5, 1e-4):
            return False
        if not run.close(w.detach(), exp_w[b], 1e-5, 1e-4):
            return False
    return True


def _batch_mixed(run: Runner, case: Case, out: Tensor) -> bool:
    """Sequence 0's output changes when only the other sequences of the batch change."""
    args = tuple(
        torch.cat([a[:1], a[1:].flip(-1) * 1.5]) if torch.is_tensor(a) and a.dim() == 3 else a
        for a in case.args
    )
    value, error, calls = run.attempt(args, {})
    if error is not None or calls or not isinstance(value, tuple) or not torch.is_tensor(value[0]):
        return False
    return value[0].shape == out.shape and not run.close(
        value[0][0].detach(), out[0].detach(), 1e-6, 1e-5
    )


def _check(run: Runner, case: Case, xq, xkv, wq, wk, wv, mask, kv_name: str) -> None:
    __tracebackhide__ = True
    exp_out, exp_w = case.data["expected"]
    value = run.call(case)
    out, weights = run.expect_tuple(value, case, ("out", "weights"), (exp_out, exp_w))
    if torch.is_tensor(out) and out.shape == exp_out.shape and torch.is_tensor(weights):
        if weights.shape == exp_w.shape and not run.close(out.detach(), exp_out, 1e-5, 1e-4):
            message = run.diagnose(
                out.detach(),
                _projection_mistakes(xq, xkv, wq, wk, wv, mask, kv_name),
                1e-5,
                1e-4,
                pick=lambda r: r[0],
            )
            if message:
                run.fail(message, case)
    if xq.dim() == 3 and mask is None and torch.is_tensor(out) and out.shape == exp_out.shape:
        if not run.close(out.detach(), exp_out, 1e-5, 1e-4) and _right_per_sequence(run, case):
            if _batch_mixed(run, case, out):  # else an axis counted from the front: diagnosed below
                run.fail(
                    "your function is right on each sequence alone but wrong on the batch: the "
                    "batch elements are mixed (changing sequence 1 changes the output of "
                    "sequence 0; e.g. a reshape to (B*T, C) lets tokens of different sequences "
                    "attend to each other); keep the batch axis, x @ w works on (B, T, C)",
                    case,
                )

    q, k, v = xq @ wq, xkv @ wk, xkv @ wv
    C_q, C_kv = xq.shape[-1], xkv.shape[-1]
    widths = {"C": (C_q, "the model width") if C_q == C_kv else (C_q, "the width of x_q")}
    if C_kv != C_q:
        widths["C_kv"] = (C_kv, "the width of x_kv")
    widths["Dv"] = (wv.shape[-1], "the values' width")
    widths["T"] = (xq.shape[-2], "the number of queries")
    if xkv is not xq:
        widths["S"] = (xkv.shape[-2], "the number of keys")
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
        widths,
        out_hint=f"the output has the values' width: (..., T, w_v.shape[1]) with V = {kv_name} @ w_v",
    )


def _self_cases(hidden: bool) -> list[Case]:
    g = generator(9303 if hidden else 303)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    specs = [
        ("one sequence (T, C)", r(5, 6), r(6, 4), r(6, 4), r(6, 5)),
        ("batched (B, T, C)", r(2, 5, 6), r(6, 4), r(6, 4), r(6, 3)),
    ]
    if hidden:
        specs += [
            ("square projections", r(3, 4, 8), r(8, 8), r(8, 8), r(8, 8)),
            ("single token", r(2, 1, 4), r(4, 2), r(4, 2), r(4, 2)),
        ]
    cases = []
    for name, x, wq, wk, wv in specs:
        case = Case(name, (x, wq, wk, wv), {}, describe_args(x=x, w_q=wq, w_k=wk, w_v=wv))
        case.data.update(x=x, wq=wq, wk=wk, wv=wv, sums_to_one=-1)
        case.data["expected"] = _ref.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv)
        cases.append(case)
    return cases


def check_self_attention(self_attention, hidden: bool = False) -> None:
    """Check ``self_attention(x, w_q, w_k, w_v) -> (out, weights)``.

    Row-vector convention: ``Q = x @ w_q`` with ``w_q`` of shape (C, D); scores scaled by sqrt(D).
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_self_attention",
        self_attention,
        _forbidden(),
        hidden,
        lambda e, c: tensor_error_hint(e, "self_attention(x, w_q, w_k, w_v)", c.args[0].shape[-1]),
        reference=lambda x, wq, wk, wv: _ref.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv),
    )
    for case in _self_cases(hidden):
        x, wq, wk, wv = (case.data[n] for n in ("x", "wq", "wk", "wv"))
        _check(run, case, x, x, wq, wk, wv, None, "x")
    run.passed()


def _self_attention_reference(x, w_q, w_k, w_v):
    """The answer with the student's signature (for ``checks.diagnose``)."""
    return _ref.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)


register(
    Exercise(
        "self_attention",
        "01_self_attention",
        "self_attention(x, w_q, w_k, w_v) -> (out, weights)",
        cells=(Cell("self_attention_tests", "self_attention", 3),),
        check=check_self_attention,
        reference=_self_attention_reference,
        against="transformer_lab.attention.scaled_dot_product_attention",
    )
)
