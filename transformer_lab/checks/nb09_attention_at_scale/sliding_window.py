"""Check for notebook 09's sliding-window mask.

sliding_window_mask(T, window) -> (T, T) bool, query t sees keys t - window + 1 .. t
"""

from __future__ import annotations

import torch

from transformer_lab import masks as _masks
from transformer_lab.checks.engine.core import Case, Mistake, Runner
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import _expect_value_error, _hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_sliding_window_mask"]


def _window_tip(exc: BaseException, case: Case) -> str:
    T, w = case.args
    if w > T:
        return (
            f"it fails when the window ({w}) is longer than the sequence (T={T}): then every "
            f"query sees all earlier keys, the plain causal mask"
        )
    return ""


_INVERTED = (
    "the mask is inverted (its polarity is reversed, the opposite of what is asked): you marked "
    "the blocked keys True; True must mean 'may attend' (t - window < s <= t), False blocked"
)


# ---------------------------------------------------------------------------------------------
def _window_mistakes(T: int, w: int) -> list[Mistake]:
    ones = torch.ones(T, T, dtype=torch.bool)
    band = ones.tril() & ~ones.tril(-w)
    return [
        Mistake("off by one: each query sees window + 1 keys; it should see exactly window keys (itself included)",
                lambda: ones.tril() & ~ones.tril(-w - 1)),
        Mistake("off by one: each query sees window - 1 keys; it should see exactly window keys (itself included)",
                lambda: ones.tril() & ~ones.tril(-w + 1)),
        Mistake("the window is not causal: keys after the query are visible; keep the lower triangle (s <= t)",
                lambda: ~ones.tril(-w) & ~ones.triu(w)),
        Mistake(_INVERTED, lambda: ~band),
        Mistake("the mask is transposed: row t is query t, which may attend to the keys just before it",
                lambda: band.T),
        Mistake("the window is measured from the start (keys 0..window-1); it slides with the "
                "query: t - window + 1 .. t",
                lambda: ones.tril() & (torch.arange(T)[None, :] < w)),
        Mistake("that is the plain causal mask: limit it to the last window keys", lambda: ones.tril()),
        Mistake("a query must see itself: the diagonal belongs to the window, t - window < s <= t "
                "(window keys, the query's own included)",
                lambda: ones.tril(-1) & ~ones.tril(-w - 1)),
    ]  # fmt: skip


def check_sliding_window_mask(sliding_window_mask, hidden: bool = False) -> None:
    """Check ``sliding_window_mask(T, window)``: (T, T) bool, True for t - window < s <= t."""
    __tracebackhide__ = True
    run = Runner("check_sliding_window_mask", sliding_window_mask,
                 [Forbidden("transformer_lab's sliding_window_mask", function=_masks.sliding_window_mask)],
                 hidden, lambda e, c: _window_tip(e, c) or _hint("sliding_window_mask(T, window)")(e, c))  # fmt: skip
    specs = [(7, 3), (5, 1), (6, 6), (4, 9), (8, 2)] + (
        [(13, 4), (20, 7), (3, 2)] if hidden else []
    )
    for T, w in specs:
        case = Case(f"T={T}, window={w}", (T, w), {}, f"T={T}, window={w}")
        expected = _masks.sliding_window_mask(T, w)
        out = run.expect_tensor(run.call(case), case, (T, T), torch.bool, "mask")
        if not torch.equal(out, expected):
            message = run.diagnose(out, _window_mistakes(T, w), 0, 0)
            if message is None:  # inverted on top of another slip: negate it and look again
                other = run.diagnose(~out, _window_mistakes(T, w), 0, 0)
                message = other and f"{_INVERTED}; once negated, {other[0].lower()}{other[1:]}"
            future = out & ~torch.ones(T, T, dtype=torch.bool).tril()
            if message is None and not out.diagonal().any():
                rest = torch.equal(out | torch.eye(T, dtype=torch.bool), expected)
                message = (
                    "the diagonal is False: query t does not see itself, but its own key belongs "
                    "to its window, t - window < s <= t (window keys, the query's own included)"
                    + ("; the rest of the mask is right" if rest else "")
                )
            if message is None and future.any():
                t, s = future.nonzero()[0].tolist()
                message = (
                    f"the mask is not causal: query {t} may attend to key {s}, which comes after it; "
                    f"a sliding window only looks back (t - window < s <= t)"
                )
            if message:
                run.fail(message, case)
            case.data["axes"] = ("query", "key")
            run.explain(out, expected, case, (), 0, 0, what="mask")
    bad = Case("window=0", (5, 0), {}, "T=5, window=0")
    _expect_value_error(run, lambda: sliding_window_mask(5, 0), bad, ["0"], "a window of 0 keys")
    bad = Case("window=-2", (5, -2), {}, "T=5, window=-2")
    _expect_value_error(
        run, lambda: sliding_window_mask(5, -2), bad, ["-2"], "a negative window (window < 1)"
    )
    run.passed()


register(
    Exercise(
        "sliding_window_mask",
        "09_attention_at_scale",
        "sliding_window_mask(T, window) -> (T, T) bool",
        cells=(Cell("sliding_window_mask_tests", "sliding_window_mask", 2),),
        check=check_sliding_window_mask,
        reference=_masks.sliding_window_mask,
    )
)
