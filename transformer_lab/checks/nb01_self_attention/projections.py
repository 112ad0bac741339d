"""Check for notebook 01's self-attention with explicit projection matrices, and the mistakes of
projections shared with notebook 04's cross-attention (which imports ``_check`` from here: the
earliest notebook that uses them).

self_attention(x, w_q, w_k, w_v) -> (out, weights)          row vectors: Q = X W_q

The mistakes it names are computed in projections_mistakes.py; the evidence it reads from reruns
(values of another width than the queries, the batch elements mixed) in projections_evidence.py.
"""

from __future__ import annotations

import torch

from transformer_lab import attention as _ref
from transformer_lab.checks.engine.attention_evidence import (
    attention_forbidden,
    check_attention_pair,
    tensor_error_hint,
)
from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.nb01_self_attention.projections_evidence import (
    _batch_mixed,
    _right_per_sequence,
    _stacked_split_found,
    _value_width_crash,
)
from transformer_lab.checks.nb01_self_attention.projections_mistakes import _projection_mistakes
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_self_attention"]


def _forbidden():
    return [
        f
        for f in attention_forbidden()
        if "scaled_dot_product_attention" not in f.label or "PyTorch" in f.label
    ]


def _check(run: Runner, case: Case, xq, xkv, wq, wk, wv, mask, kv_name: str) -> None:
    __tracebackhide__ = True
    exp_out, exp_w = case.data["expected"]
    value = run.call(case)
    out, weights = run.expect_tuple(value, case, ("out", "weights"), (exp_out, exp_w))
    if xq is xkv and (found := _stacked_split_found(run, out, weights, xq, wq, wk, wv)):
        run.fail(found, case)
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
        lambda e, c: (
            _value_width_crash(run, c)
            or tensor_error_hint(e, "self_attention(x, w_q, w_k, w_v)", c.args[0].shape[-1])
        ),
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
