"""Checks for notebook 1 (and 4): softmax, scaled dot-product attention, self- and cross-attention.

Student-facing signatures:

    softmax(x, dim=-1) -> tensor of x's shape
    scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)
    self_attention(x, w_q, w_k, w_v) -> out or (out, weights)          row vectors: Q = X W_q
    cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None) -> out or (out, weights)
    self_attention_macs(T, C, D) -> int, multiply-adds of one single-head self-attention
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from transformer_lab import attention as _ref
from transformer_lab import heads as _heads
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._guards import TRUSTED, Forbidden

__all__ = [
    "check_softmax",
    "check_scaled_dot_product_attention",
    "check_self_attention",
    "check_cross_attention",
    "check_self_attention_macs",
]

ATOL, RTOL = 1e-5, 1e-4


# ---------------------------------------------------------------------------------------------
# What a student's function may not call while it is checked.
def _softmax_forbidden() -> list[Forbidden]:
    return [
        Forbidden("transformer_lab's reference softmax", function=_ref.softmax),
        Forbidden(
            "PyTorch's built-in softmax (torch.softmax, F.softmax, Tensor.softmax, nn.Softmax)",
            codes={F.softmax.__code__, F.log_softmax.__code__, nn.Softmax.forward.__code__},
            builtin_names=("softmax", "_softmax", "log_softmax", "_log_softmax", "special_softmax"),
        ),
    ]


def _attention_forbidden() -> list[Forbidden]:
    return [
        Forbidden(
            "transformer_lab's reference scaled_dot_product_attention",
            function=_ref.scaled_dot_product_attention,
        ),
        Forbidden("transformer_lab's SelfAttention", function=_ref.SelfAttention.forward),
        Forbidden(
            "transformer_lab's MultiHeadAttention", function=_heads.MultiHeadAttention.forward
        ),
        Forbidden(
            "PyTorch's built-in attention (F.scaled_dot_product_attention, nn.MultiheadAttention)",
            codes={F.multi_head_attention_forward.__code__, nn.MultiheadAttention.forward.__code__},
            builtin_names=("scaled_dot_product_attention", "_scaled_dot_product_attention_math"),
        ),
    ]


def _signature_hint(exc: BaseException, expected: str) -> str:
    text = str(exc)
    if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
        return f"keep the signature `{expected}`"
    return ""


# ---------------------------------------------------------------------------------------------
# softmax
def _softmax_cases(hidden: bool) -> list[Case]:
    g = generator(9101 if hidden else 101)

    def r(*shape: int, scale: float = 1.0) -> Tensor:
        return torch.randn(*shape, generator=g) * scale

    rows_apart = torch.stack([r(5), r(5) - 3000.0])  # one max per row matters
    with_inf = r(3, 5)
    with_inf[0, 1] = with_inf[2, 0] = with_inf[2, 4] = float("-inf")  # masked scores
    cases = [
        Case("a vector, default dim", (r(5),), {}),
        Case("rows of a matrix", (r(4, 6),), {"dim": -1}),
        Case("square matrix", (r(5, 5),), {"dim": -1}),
        Case("3-D input, dim=1", (r(2, 5, 3),), {"dim": 1}),
        Case("columns, dim=0", (r(6, 4),), {"dim": 0}),
        Case("large scores (about +-3000)", (r(3, 5, scale=1000.0),), {"dim": -1}),
        Case("rows on very different scales", (rows_apart,), {"dim": -1}),
        Case("-inf entries (masked scores)", (with_inf,), {"dim": -1}),
        Case("float64 input", (r(3, 4).double(),), {"dim": -1}),
    ]
    if hidden:
        cases += [
            Case("4-D scores (B, H, T, S)", (r(2, 3, 4, 5),), {"dim": -1}),
            Case("negative dim=-2", (r(3, 4, 5),), {"dim": -2}),
            Case("large negative scores (about -1000)", (r(2, 6) - 1000.0,), {"dim": -1}),
            Case("a single element", (r(1),), {"dim": 0}),
            Case("large scores along dim=0", (r(7, 3, scale=500.0),), {"dim": 0}),
        ]
    for case in cases:
        x = case.args[0]
        dim = case.kwargs.get("dim", -1)
        case.describe = describe_args(x=x, dim=dim)
        case.data["x"], case.data["dim"] = x, dim
        case.data["expected"] = _ref.softmax(x, dim=dim)
    return cases


def _softmax_mistakes(x: Tensor, dim: int) -> list[Mistake]:
    ndim, d = x.dim(), dim % max(x.dim(), 1)
    out = []
    for other in range(ndim):
        if other == d:
            continue
        if other == ndim - 1:
            msg = (
                f"your softmax ignores the `dim` argument and always normalises the last dimension; "
                f"the slices along dim={dim} must sum to 1 (use `dim` in max, exp-sum and keepdim)"
            )
        else:
            msg = f"softmax taken over dimension {other} instead of dim={dim}: the slices along `dim` must sum to 1"
        out.append(Mistake(msg, lambda o=other: torch.softmax(x, dim=o)))
    out += [
        Mistake(
            "overflow: exp() of large scores is inf, and inf/inf is NaN. Subtract the maximum along "
            "`dim` first (x - x.amax(dim, keepdim=True)); it cancels in the ratio, so the result is unchanged",
            lambda: torch.exp(x) / torch.exp(x).sum(dim=dim, keepdim=True),
        ),
        Mistake(
            "you subtract the maximum of the whole tensor; subtract the maximum of each slice along `dim` "
            "(x.amax(dim, keepdim=True)), otherwise rows far below the global maximum underflow to 0/0",
            lambda: torch.exp(x - x.max()) / torch.exp(x - x.max()).sum(dim=dim, keepdim=True),
        ),
        Mistake(
            "the sum is taken without keepdim=True, so it broadcasts along the wrong dimension; "
            "use .sum(dim=dim, keepdim=True)",
            lambda: (
                torch.exp(x - x.amax(dim, keepdim=True))
                / torch.exp(x - x.amax(dim, keepdim=True)).sum(dim=dim)
            ),
        ),
    ]
    return out


def _softmax_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "must match the size" in text or "broadcast" in text:
        return "the reductions need keepdim=True so they broadcast back over `dim`"
    return _signature_hint(exc, "softmax(x, dim=-1)")


def check_softmax(softmax, hidden: bool = False) -> None:
    """Check ``softmax(x, dim=-1)`` against the package's stable softmax.

    Covers the default dim, other dims, large and very negative inputs (stability), -inf
    entries and float64. Raises AssertionError naming the most likely mistake.
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner("check_softmax", softmax, _softmax_forbidden(), hidden, _softmax_error_hint)
    for case in _softmax_cases(hidden):
        x, dim, expected = case.data["x"], case.data["dim"], case.data["expected"]

        def shape_hint(got: tuple, x=x, dim=dim) -> str | None:
            reduced = tuple(s for i, s in enumerate(x.shape) if i != dim % x.dim())
            if got == reduced:
                return "that is the shape of a sum over `dim`; return exp(...) divided by the sum, same shape as x"
            return None

        out = run.expect_tensor(run.call(case), case, x.shape, x.dtype, shape_hint=shape_hint)
        if run.close(out, expected, ATOL, RTOL):
            continue
        message = run.diagnose(out, _softmax_mistakes(x, dim), ATOL, RTOL)
        if message is None and not torch.isfinite(out).all():
            message = (
                "your output contains NaN or inf: exp() overflowed (or 0/0). Subtract the maximum along "
                "`dim` before exp()"
            )
        run.fail(message or run.mismatch(out, expected), case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# scaled dot-product attention
def _attention_cases(hidden: bool) -> list[Case]:
    g = generator(9202 if hidden else 202)

    def r(*shape: int, scale: float = 1.0) -> Tensor:
        return torch.randn(*shape, generator=g) * scale

    def pad(lengths: list[int], S: int) -> Tensor:
        return (torch.arange(S)[None, :] < torch.tensor(lengths)[:, None])[
            :, None, None, :
        ]  # (B, 1, 1, S)

    def causal(T: int) -> Tensor:
        return torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)

    specs = [
        ("2-D inputs, T != S", r(3, 4), r(5, 4), r(5, 6), None),
        ("batched (B, T, D)", r(2, 3, 4), r(2, 5, 4), r(2, 5, 3), None),
        ("square T = S = D", r(2, 4, 4), r(2, 4, 4), r(2, 4, 4), None),
        ("heads (B, H, T, D)", r(2, 2, 3, 8), r(2, 2, 6, 8), r(2, 2, 6, 8), None),
        ("causal mask (T, T)", r(2, 5, 4), r(2, 5, 4), r(2, 5, 4), causal(5)),
        ("padding mask (B, 1, 1, S)", r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 4), pad([5, 2], 5)),
        ("large scores", r(2, 4, 16, scale=10.0), r(2, 4, 16, scale=10.0), r(2, 4, 16), None),
    ]
    if hidden:
        specs += [
            ("one query (T = 1)", r(2, 1, 8), r(2, 7, 8), r(2, 7, 2), None),
            ("causal mask with heads", r(1, 3, 6, 4), r(1, 3, 6, 4), r(1, 3, 6, 5), causal(6)),
            (
                "padding mask, large width",
                r(3, 2, 4, 32),
                r(3, 2, 6, 32),
                r(3, 2, 6, 3),
                pad([6, 1, 4], 6),
            ),
            (
                "causal and padding mask",
                r(2, 2, 5, 4),
                r(2, 2, 5, 4),
                r(2, 2, 5, 4),
                causal(5) & pad([5, 3], 5),
            ),
        ]
    cases = []
    for name, q, k, v, mask in specs:
        kwargs = {} if mask is None else {"mask": mask}
        case = Case(name, (q, k, v), kwargs, describe_args(q=q, k=k, v=v, mask=mask))
        case.data.update(q=q, k=k, v=v, mask=mask)
        case.data["expected"] = _ref.scaled_dot_product_attention(q, k, v, mask)
        cases.append(case)
    return cases


def _attend(
    q, k, v, mask=None, *, scale="sqrt", mask_mode="before", keys="mT", softmax_dim=-1, order="qk"
):
    """Attention with exactly one deliberate mistake switched on (for diagnosis)."""
    kt = {
        "mT": lambda: k.transpose(-2, -1),
        "none": lambda: k,
        "T": lambda: k.permute(*reversed(range(k.dim()))),
        "01": lambda: k.transpose(0, 1),
        "12": lambda: k.transpose(1, 2),
    }[keys]()
    scores = q @ kt if order == "qk" else k @ q.transpose(-2, -1)  # (..., T, S) or (..., S, T)
    d = q.shape[-1]
    scores = {
        "sqrt": scores / math.sqrt(d),
        "none": scores,
        "d": scores / d,
        "times": scores * math.sqrt(d),
    }[scale]
    if mask is not None and mask_mode == "before":
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None and mask_mode == "reversed":
        scores = scores.masked_fill(mask, float("-inf"))
    elif mask is not None and mask_mode == "zero":
        scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and mask_mode == "after":
        weights = weights * mask
    return weights @ v, weights


def _attention_mistakes(q, k, v, mask) -> list[Mistake]:
    A = lambda **kw: lambda: _attend(q, k, v, mask, **kw)  # noqa: E731
    out = [
        Mistake(
            "the 1/sqrt(D) scaling is missing: divide the scores by sqrt(d_k) = sqrt(q.shape[-1]) before the softmax",
            A(scale="none"),
        ),
        Mistake(
            "the scores are divided by D instead of sqrt(D): the scaling is 1/sqrt(d_k)",
            A(scale="d"),
        ),
        Mistake("the scores are multiplied by sqrt(D) instead of divided by it", A(scale="times")),
        Mistake(
            "the softmax runs over the queries (dim=-2); each query's weights over the keys (dim=-1) must sum to 1",
            A(softmax_dim=-2),
        ),
        Mistake(
            "the keys are not transposed: the scores are Q K^T, i.e. q @ k.transpose(-2, -1)",
            A(keys="none"),
        ),
        Mistake(
            "the keys are transposed over the wrong dimensions (k.T / k.transpose(0, 1) / k.transpose(1, 2) reorder batch or head dimensions); use k.transpose(-2, -1)",
            A(keys="T"),
        ),
        Mistake(
            "the keys are transposed over the wrong dimensions; use k.transpose(-2, -1), which swaps only the last two",
            A(keys="01"),
        ),
        Mistake(
            "the keys are transposed over the wrong dimensions; use k.transpose(-2, -1), which swaps only the last two",
            A(keys="12"),
        ),
        Mistake(
            "the scores are K Q^T (one row per key); use Q K^T so each row belongs to a query",
            A(order="kq"),
        ),
    ]
    if mask is not None:
        out += [
            Mistake(
                "the mask is applied after the softmax: masked keys get weight 0 but the rows no longer sum to 1. Set masked scores to -inf *before* the softmax",
                A(mask_mode="after"),
            ),
            Mistake(
                "the mask polarity is reversed: True means 'may attend', so fill the scores where the mask is False: scores.masked_fill(~mask, float('-inf'))",
                A(mask_mode="reversed"),
            ),
            Mistake(
                "masked scores are set to 0 instead of -inf: a score of 0 still gets weight exp(0) > 0; use float('-inf')",
                A(mask_mode="zero"),
            ),
            Mistake(
                "the mask is ignored: set the scores to -inf where mask is False before the softmax",
                A(mask_mode="none"),
            ),
        ]
    return out


def _attention_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "masked_fill" in text or "Boolean" in text or "bool" in text:
        return "the mask is a boolean tensor (True = may attend): scores.masked_fill(~mask, float('-inf'))"
    if isinstance(exc, (RuntimeError, IndexError)) and any(
        w in text for w in ("size", "shape", "dimension", "multiplied", "range")
    ):
        return (
            "the scores are q @ k.transpose(-2, -1): transpose only the last two dimensions of k "
            "(k.T, k.transpose(0, 1) and k.transpose(1, 2) also move batch or head dimensions)"
        )
    return _signature_hint(exc, "scaled_dot_product_attention(q, k, v, mask=None)")


def _split_output(run: Runner, value, case: Case, name: str = "(out, weights)"):
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return value[0], value[1]
    if value is None:
        run.fail(f"your function returned None: return the tuple {name}.", case)
    run.fail(
        f"your function should return a tuple {name}, but it returned a {type(value).__name__}.",
        case,
    )


def check_scaled_dot_product_attention(scaled_dot_product_attention, hidden: bool = False) -> None:
    """Check ``scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)``.

    Covers 2-D, batched and multi-head shapes, T != S, value width != key width, causal and
    padding masks (True = may attend) and large scores.
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_scaled_dot_product_attention",
        scaled_dot_product_attention,
        _attention_forbidden(),
        hidden,
        _attention_error_hint,
    )
    for case in _attention_cases(hidden):
        q, k, v, mask = (case.data[n] for n in ("q", "k", "v", "mask"))
        exp_out, exp_w = case.data["expected"]
        out, weights = _split_output(run, run.call(case), case)
        T, S = q.shape[-2], k.shape[-2]

        def weights_hint(got: tuple, T=T, S=S) -> str | None:
            if got[-2:] == (S, T) and S != T:
                return "the rows are keys: the scores are Q K^T (queries x keys), not K Q^T"
            return None

        weights = run.expect_tensor(
            weights,
            case,
            exp_w.shape,
            exp_w.dtype,
            what="attention weights",
            shape_hint=weights_hint,
        )
        mistakes = _attention_mistakes(q, k, v, mask)
        if not run.close(weights, exp_w, ATOL, RTOL):
            message = run.diagnose(weights, mistakes, ATOL, RTOL, pick=lambda r: r[1])
            if message is None and not torch.isfinite(weights).all():
                message = (
                    "the attention weights contain NaN or inf: your softmax overflows on large scores "
                    "(subtract the row maximum), or a mask left a row with no key"
                )
            run.fail(message or run.mismatch(weights, exp_w, "attention weights"), case)
        out = run.expect_tensor(
            out,
            case,
            exp_out.shape,
            exp_out.dtype,
            what="output",
            shape_hint=lambda got: (
                "the output is weights @ v, shape (..., T, Dv)" if got[-1] != v.shape[-1] else None
            ),
        )
        if not run.close(out, exp_out, ATOL, RTOL):
            run.fail(
                "the weights are right but the output is not: the output is weights @ v "
                f"({run.mismatch(out, exp_out)})",
                case,
            )
    run.passed()


# ---------------------------------------------------------------------------------------------
# self-attention and cross-attention with explicit projection matrices (row vectors: Q = X W_q)
def _projection_forbidden() -> list[Forbidden]:
    return [
        f
        for f in _attention_forbidden()
        if "scaled_dot_product_attention" not in f.label or "PyTorch" in f.label
    ]


def _optional_weights(run: Runner, value, case: Case):
    """Accept ``out`` or ``(out, weights)``; returns (out, weights or None)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            run.fail(
                f"return `out` or the tuple `(out, weights)`, but your function returned {len(value)} values.",
                case,
            )
        return value[0], value[1]
    return value, None


def _self_attention_cases(hidden: bool) -> list[Case]:
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
        case.data.update(x=x, wq=wq, wk=wk, wv=wv)
        case.data["expected"] = _ref.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv)
        cases.append(case)
    return cases


def check_self_attention(self_attention, hidden: bool = False) -> None:
    """Check ``self_attention(x, w_q, w_k, w_v) -> out or (out, weights)``.

    Row-vector convention: ``Q = x @ w_q`` with ``w_q`` of shape (C, D); scores scaled by sqrt(D).
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_self_attention",
        self_attention,
        _projection_forbidden(),
        hidden,
        lambda e, c: (
            "the projections are (C, D) matrices applied as x @ w (row vectors)"
            if isinstance(e, RuntimeError)
            else _signature_hint(e, "self_attention(x, w_q, w_k, w_v)")
        ),
    )
    for case in _self_attention_cases(hidden):
        x, wq, wk, wv = (case.data[n] for n in ("x", "wq", "wk", "wv"))
        exp_out, exp_w = case.data["expected"]
        out, weights = _optional_weights(run, run.call(case), case)
        C, D = wq.shape
        mistakes = [
            Mistake(
                "the 1/sqrt(D) scaling is missing",
                lambda: _attend(x @ wq, x @ wk, x @ wv, scale="none"),
            ),
            Mistake(
                f"the scores are scaled by sqrt(C) = sqrt({C}) (the model width) instead of sqrt(D) = sqrt({D}) (the key width)",
                lambda: (
                    torch.softmax((x @ wq) @ (x @ wk).transpose(-2, -1) / math.sqrt(C), -1)
                    @ (x @ wv),
                ),
            ),
            Mistake(
                "queries and keys are swapped (scores K Q^T): Q = x @ w_q, K = x @ w_k, scores = Q K^T",
                lambda: _attend(x @ wk, x @ wq, x @ wv),
            ),
            Mistake(
                "the projections are applied as x @ w.T: the course uses row vectors, Q = x @ w_q",
                lambda: _attend(x @ wq.T, x @ wk.T, x @ wv.T),
            ),
            Mistake(
                "the values are not projected: use V = x @ w_v", lambda: _attend(x @ wq, x @ wk, x)
            ),
        ]
        if weights is not None:
            weights = run.expect_tensor(
                weights, case, exp_w.shape, exp_w.dtype, what="attention weights"
            )
        out = run.expect_tensor(
            out,
            case,
            exp_out.shape,
            exp_out.dtype,
            shape_hint=lambda got: "the output has the value width of w_v: (..., T, w_v.shape[1])",
        )
        if not run.close(out, exp_out, ATOL, RTOL):
            message = run.diagnose(out, mistakes, ATOL, RTOL, pick=lambda r: r[0])
            run.fail(message or run.mismatch(out, exp_out), case)
        if weights is not None and not run.close(weights, exp_w, ATOL, RTOL):
            run.fail(
                "the output is right but the returned attention weights are not the softmax of the scaled scores",
                case,
            )
    run.passed()


def _cross_attention_cases(hidden: bool) -> list[Case]:
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
    ]
    if hidden:
        specs += [
            ("one query", r(3, 1, 4), r(3, 6, 2), r(4, 4), r(2, 4), r(2, 2), pad([6, 1, 3], 6))
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
        case.data.update(xq=xq, xkv=xkv, wq=wq, wk=wk, wv=wv, mask=mask)
        case.data["expected"] = _ref.scaled_dot_product_attention(xq @ wq, xkv @ wk, xkv @ wv, mask)
        cases.append(case)
    return cases


def check_cross_attention(cross_attention, hidden: bool = False) -> None:
    """Check ``cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None) -> out or (out, weights)``.

    Queries come from ``x_q`` (B, T, C), keys and values from ``x_kv`` (B, S, C_kv); the
    optional boolean mask (True = may attend) broadcasts to (B, T, S).
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_cross_attention",
        cross_attention,
        _projection_forbidden(),
        hidden,
        lambda e, c: (
            "queries come from x_q (with w_q), keys and values from x_kv (with w_k, w_v)"
            if isinstance(e, RuntimeError)
            else _signature_hint(e, "cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None)")
        ),
    )
    for case in _cross_attention_cases(hidden):
        xq, xkv, wq, wk, wv, mask = (case.data[n] for n in ("xq", "xkv", "wq", "wk", "wv", "mask"))
        exp_out, exp_w = case.data["expected"]
        out, weights = _optional_weights(run, run.call(case), case)
        T, S = xq.shape[1], xkv.shape[1]

        def out_hint(got: tuple, T=T, S=S) -> str | None:
            if got[1] == S and S != T:
                return "one row per key/value token: the queries must come from x_q, keys and values from x_kv"
            return None

        def w_hint(got: tuple, T=T, S=S) -> str | None:
            if got[-1] == T and S != T:
                return "the keys were computed from x_q; in cross-attention keys and values come from x_kv"
            return None

        if weights is not None:
            weights = run.expect_tensor(
                weights, case, exp_w.shape, exp_w.dtype, what="attention weights", shape_hint=w_hint
            )
        out = run.expect_tensor(out, case, exp_out.shape, exp_out.dtype, shape_hint=out_hint)
        mistakes = [
            Mistake(
                "keys and values come from x_q instead of x_kv",
                lambda: _attend(xq @ wq, xq @ wk, xq @ wv, None),
            ),
            Mistake(
                "the 1/sqrt(D) scaling is missing",
                lambda: _attend(xq @ wq, xkv @ wk, xkv @ wv, mask, scale="none"),
            ),
        ]
        if mask is not None:
            mistakes += [
                Mistake(
                    "the mask is ignored",
                    lambda: _attend(xq @ wq, xkv @ wk, xkv @ wv, mask, mask_mode="none"),
                ),
                Mistake(
                    "the mask polarity is reversed (True = may attend)",
                    lambda: _attend(xq @ wq, xkv @ wk, xkv @ wv, mask, mask_mode="reversed"),
                ),
                Mistake(
                    "the mask is applied after the softmax; mask the scores with -inf before it",
                    lambda: _attend(xq @ wq, xkv @ wk, xkv @ wv, mask, mask_mode="after"),
                ),
            ]
        if not run.close(out, exp_out, ATOL, RTOL):
            message = run.diagnose(out, mistakes, ATOL, RTOL, pick=lambda r: r[0])
            run.fail(message or run.mismatch(out, exp_out), case)
        if weights is not None and not run.close(weights, exp_w, ATOL, RTOL):
            run.fail("the output is right but the returned attention weights are not", case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# the cost of self-attention, compared with a measurement of the reference
class _MultiplyAddCounter(TorchFunctionMode):
    """Counts the multiply-adds of every matrix product PyTorch executes inside a `with` block."""

    PRODUCTS = {
        torch.matmul,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.mm,
        torch.bmm,
        F.linear,
    }

    def __init__(self) -> None:
        super().__init__()
        self.macs = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self.PRODUCTS:
            # every output entry is one dot product over the last dimension of the first operand
            self.macs += out.numel() * args[0].shape[-1]
        return out


def _measured_macs(T: int, C: int, D: int) -> int:
    """Multiply-adds of the matrix products executed in one run of the reference self-attention."""
    with torch.random.fork_rng(
        devices=[]
    ):  # the layer's init must not move the notebook's global RNG
        layer = _ref.SelfAttention(C, D)  # W_q, W_k, W_v without bias
    x = torch.randn(T, C, generator=generator(0))
    with torch.no_grad(), _MultiplyAddCounter() as counter:
        layer(x)
    return counter.macs


def check_self_attention_macs(self_attention_macs, hidden: bool = False) -> None:
    """Check ``self_attention_macs(T, C, D) -> int`` against the multiply-adds measured while the
    package's SelfAttention runs (three projections plus the two T x T products)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden(
            "transformer_lab's SelfAttention (count with the formula, do not measure)",
            function=_ref.SelfAttention.forward,
        )
    ]
    run = Runner(
        "check_self_attention_macs",
        self_attention_macs,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "self_attention_macs(T, C, D)"),
    )
    sizes = [(3, 2, 2), (10, 8, 4), (7, 16, 16), (64, 32, 8)]
    if hidden:
        sizes = [(1, 5, 3), (33, 12, 6), (128, 16, 16), (5, 64, 64)]
    first_failure = (
        None  # (message, case): kept while a size is ambiguous (e.g. 3TCD = 2T^2 D at T=3, C=2)
    )
    for T, C, D in sizes:
        want = _measured_macs(T, C, D)  # measured before the student's code runs
        case = Case(f"T={T}, C={C}, D={D}", (T, C, D), {}, f"T={T}, C={C}, D={D}")
        got = run.call(case)
        if TRUSTED.is_tensor(got) and got.numel() == 1:
            run.fail(
                "return a Python int (e.g. with int(...) or .item()), but received a tensor.", case
            )
        if not isinstance(got, int) or isinstance(got, bool):
            if got is None:
                run.fail("your function returned None: did you forget `return`?", case)
            run.fail(f"return a Python int, but received {type(got).__name__}.", case)
        if got == want:
            continue
        hints = [
            hint
            for count, hint in (
                (3 * T * C * D, " You counted the projections only; add the two T x T products."),
                (
                    3 * T * C * D + T * T * D,
                    " Only one of the two T x T products is counted (scores and weights @ V).",
                ),
                (2 * T * T * D, " The three projections X W (T x C times C x D) are missing."),
                (
                    2 * want,
                    " That is FLOPs (2 per multiply-add, as FLOP counters report); count multiply-adds.",
                ),
            )
            if got == count
        ]
        message = f"for T={T}, C={C}, D={D} the count is {want}, but received {got}."
        if len(hints) == 1:
            run.fail(message + hints[0], case)
        if first_failure is None:
            first_failure = (message, case)
    if first_failure is not None:
        run.fail(*first_failure)
    run.passed()
