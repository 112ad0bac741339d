"""Check for notebook 09's grouped-query attention (part 2 of the notebook; the cache's size
is checked in kv_cache_bytes.py, sliding windows in sliding_window.py).

grouped_query_attention(q, k, v) -> (B, H, T, D); k, v have H_kv heads, H a multiple of H_kv
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab import gqa as _gqa
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.precision import float32_inside
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import _expect_value_error, _hint
from transformer_lab.checks.nb09_attention_at_scale.tiled import _TORCH_ATTENTION
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_grouped_query_attention"]


# ---------------------------------------------------------------------------------------------
def _attend(q, k, v, scale=True, mask=None, dim=-1):
    s = q @ k.transpose(-2, -1)
    if scale is True:
        s = s / math.sqrt(q.shape[-1])
    elif scale:
        s = s / scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=dim) @ v


def _gqa_mistakes(q, k, v) -> list[Mistake]:
    H, H_kv = q.shape[1], k.shape[1]
    group = H // H_kv
    T, S, D = q.shape[2], k.shape[2], q.shape[3]
    kr, vr = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    return [
        Mistake(
            "query head h reads key/value head h % H_kv (k.repeat tiles the heads); it should read "
            "head h // (H / H_kv): consecutive query heads share one key/value head, so use "
            "repeat_interleave",
            lambda: _attend(q, k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)),
        ),
        Mistake(
            "every query head reads key/value head 0; query head h reads head h // (H / H_kv)",
            lambda: _attend(q, k[:, :1], v[:, :1]),
        ),
        Mistake(
            "the scores are not divided by sqrt(D)",
            lambda: _attend(
                q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), scale=False
            ),
        ),
        Mistake(
            "the query heads of a group are averaged into one; each query head keeps its own "
            "output, only the keys and values are shared",
            lambda: _attend(q.unflatten(1, (H_kv, group)).mean(2), k, v).repeat_interleave(
                group, 1
            ),
        ),
        Mistake(
            "keys are shared correctly but the values are not: repeat v exactly like k "
            "(repeat_interleave over the head dimension)",
            lambda: _attend(q, k.repeat_interleave(group, 1), v.repeat(1, group, 1, 1)),
        ),
        Mistake(
            "the keys are used as the values too: the weights must average v, attend(q, k, v)",
            lambda: _attend(q, kr, kr),
        ),
        Mistake(
            "the keys and the values are swapped: scores come from q and k, the output averages v",
            lambda: _attend(q, vr, kr),
        ),
        Mistake(
            "the softmax runs over the queries (dim=-2); each query's weights over the keys "
            "must sum to 1: softmax(scores, dim=-1)",
            lambda: _attend(q, kr, vr, dim=-2),
        ),
        Mistake(
            "a causal mask is applied; this exercise has no mask: every query sees every key",
            lambda: _attend(q, kr, vr, mask=torch.ones(T, S, dtype=torch.bool).tril(S - T)),
        ),
        Mistake(
            "a causal mask is applied; this exercise has no mask: every query sees every key",
            lambda: _attend(q, kr, vr, mask=torch.ones(T, S, dtype=torch.bool).tril()),
        ),
    ] + [
        Mistake(
            f"the scores are divided by {name} instead of sqrt(D) = sqrt({D})",
            lambda value=value: _attend(q, kr, vr, scale=value),
        )
        for name, value in (
            (f"D = {D}", D), (f"sqrt(S) = sqrt({S})", math.sqrt(S)), (f"sqrt(T) = sqrt({T})", math.sqrt(T)),
            (f"sqrt(H) = sqrt({H})", math.sqrt(H)), ("sqrt(H * D)", math.sqrt(H * D)), ("2", 2.0),
            (f"sqrt(D * H / H_kv) = sqrt({D * group})", math.sqrt(D * group)),
            (f"sqrt(D / (H / H_kv)) = sqrt({D / group:g})", math.sqrt(D / group)),
            (f"sqrt(H_kv * D) = sqrt({H_kv * D})", math.sqrt(H_kv * D)),
        )
        if abs(value - math.sqrt(D)) > 1e-9
    ]  # fmt: skip


def _gqa_tip(exc: BaseException, case: Case) -> str:
    q, k = case.args[0], case.args[1]
    H, H_kv = q.shape[1], k.shape[1]
    return (
        f"dim 1 holds the heads: q has H={H}, k and v H_kv={H_kv}; repeat each key/value head "
        f"H // H_kv = {H // H_kv} times along dim 1 (repeat_interleave(H // H_kv, dim=1)) so "
        f"that they have H heads too"
    )


def check_grouped_query_attention(grouped_query_attention, hidden: bool = False) -> None:
    """Check ``grouped_query_attention(q, k, v)`` against the repeated-heads formula."""
    __tracebackhide__ = True
    run = Runner(
        "check_grouped_query_attention",
        grouped_query_attention,
        [
            Forbidden(
                "transformer_lab's grouped_query_attention", function=_gqa.grouped_query_attention
            ),
            _TORCH_ATTENTION,
        ],
        hidden,
        _hint("grouped_query_attention(q, k, v)", _gqa_tip),
    )
    g = generator(9903 if hidden else 903)
    specs = [(2, 4, 2, 5, 7, 3), (1, 6, 3, 4, 4, 8), (2, 4, 1, 3, 6, 4), (1, 2, 2, 5, 5, 4)]
    if hidden:
        specs += [(3, 8, 2, 6, 9, 5), (1, 12, 4, 2, 3, 6)]
    specs = [(*spec, torch.float32) for spec in specs] + [(2, 4, 2, 3, 5, 4, torch.float64)]
    for B, H, H_kv, T, S, D, dtype in specs:
        q = torch.randn(B, H, T, D, generator=g).to(dtype)
        k, v = torch.randn(B, H_kv, S, D, generator=g), torch.randn(B, H_kv, S, D, generator=g)
        k, v = k.to(dtype), v.to(dtype)
        name = f"H={H}, H_kv={H_kv}" + (", float64" if dtype == torch.float64 else "")
        case = Case(name, (q, k, v), {}, describe_args(q=q, k=k, v=v))
        expected = _attend(q, k.repeat_interleave(H // H_kv, 1), v.repeat_interleave(H // H_kv, 1))
        out = run.expect_tensor(run.call(case), case, expected.shape, expected.dtype, "output")
        if run.close(out, expected, 1e-5, 1e-5) and float32_inside(out, expected):
            run.fail(float32_inside(out, expected), case)
        if not run.close(out, expected, 1e-5, 1e-5):
            message = run.diagnose(out, _gqa_mistakes(q, k, v), 1e-5, 1e-5)
            message = message or _scale_fit(run, out, q, k, v) or _head_map(run, out, q, k, v)
            if message:
                run.fail(message, case)
            case.data.update(
                axes=("batch element", "head", "query", "feature"), dims={"D": D, "H": H, "S": S}
            )
            run.explain(out, expected, case, (), 1e-5, 1e-5)
    q, k = torch.zeros(1, 6, 2, 4), torch.zeros(1, 4, 2, 4)
    bad = Case("H=6 query heads, H_kv=4", (q, k, k), {}, "q (1, 6, 2, 4), k and v (1, 4, 2, 4)")
    _expect_value_error(
        run,
        lambda: grouped_query_attention(q.clone(), k.clone(), k.clone()),
        bad,
        ["6", "4"],
        "H not a multiple of H_kv",
    )
    run.passed()


def _scale_fit(run: Runner, out: Tensor, q: Tensor, k: Tensor, v: Tensor) -> str | None:
    """Is the output right for some other divisor c of the scores (q k^T / c)? Found by a scan."""
    group = q.shape[1] // k.shape[1]
    kr, vr = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    D = q.shape[-1]
    for c in torch.logspace(-2, 3, 400, dtype=torch.float64).tolist():
        if abs(c - math.sqrt(D)) > 1e-3 * c and run.close(
            out, _attend(q, kr, vr, scale=c), 1e-4, 1e-4
        ):
            return (
                f"your scores are divided by about {c:.3g}, not by sqrt(D) = {math.sqrt(D):.3g}: "
                f"scale q k^T by 1 / sqrt(d_head), the size of one head"
            )
    return None


def _head_map(run: Runner, out: Tensor, q: Tensor, k: Tensor, v: Tensor) -> str | None:
    """Which key head and which value head each query head's output was computed with (found
    by trying every pair): named when every head's output is explained by one pair."""
    H, H_kv = q.shape[1], k.shape[1]
    if H_kv < 2 or out.shape != (*q.shape[:3], v.shape[-1]):
        return None
    keys, values = [], []
    for h in range(H):
        pairs = [
            (a, b)
            for a in range(H_kv)
            for b in range(H_kv)
            if run.close(out[:, h], _attend(q[:, h], k[:, a], v[:, b]), 1e-5, 1e-5)
        ]
        if len(pairs) != 1:
            return None
        keys.append(pairs[0][0])
        values.append(pairs[0][1])
    want = [h // (H // H_kv) for h in range(H)]
    if keys == want and values != want:
        return (
            f"the keys are shared right but the values are not: query heads 0..{H - 1} read "
            f"value heads {values}, and must read {want}, the same heads as their keys; expand "
            "v exactly like k, v.repeat_interleave(H // H_kv, dim=1)"
        )
    if values == want and keys != want:
        return (
            f"the values are shared right but the keys are not: query heads 0..{H - 1} read key "
            f"heads {keys}, and must read {want}; expand k exactly like v, "
            "k.repeat_interleave(H // H_kv, dim=1)"
        )
    return (
        f"query heads 0..{H - 1} read key heads {keys} and value heads {values}; query head h "
        f"must read head h // (H / H_kv) for both, {want}: repeat_interleave(H // H_kv, dim=1)"
    )


register(
    Exercise(
        "grouped_query_attention",
        "09_attention_at_scale",
        "grouped_query_attention(q, k, v) -> (B, H, T, D)",
        cells=(Cell("grouped_query_attention_tests", "grouped_query_attention", 2),),
        check=check_grouped_query_attention,
        reference=_gqa.grouped_query_attention,
    )
)
