"""Check for notebook 09, part 1: the online softmax's merge of two key sets' statistics.

merge_softmax_stats(m1, l1, o1, m2, l2, o2) -> (m, l, o) of the union of two key sets
"""

from __future__ import annotations

import torch

from transformer_lab import tiled as _tiled
from transformer_lab.checks.engine.core import Case, Mistake, Runner, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import (
    _hint,
    _merge_tip,
)
from transformer_lab.checks.nb09_attention_at_scale.magnitude_probe import merge_overflow_probe
from transformer_lab.checks.nb09_attention_at_scale.merge_evidence import (
    _one_set_evidence,
    _rescaling_evidence,
    _tuple_order,
)
from transformer_lab.checks.nb09_attention_at_scale.tiled import _stats
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_merge_softmax_stats"]


# ---------------------------------------------------------------------------------------------
# merging two sets of statistics
def _merge_cases(hidden: bool) -> list[Case]:
    g = generator(9901 if hidden else 901)
    specs = [((4,), 3, 5, 2, 0.0), ((2, 3, 5), 4, 4, 3, 0.0), ((6,), 2, 7, 1, 0.0)]
    if hidden:
        specs += [((3, 2, 7), 5, 3, 4, 0.0), ((9,), 6, 6, 5, 0.0)]
    specs += [((6,), 4, 3, 2, 300.0)]  # large maxima, +300 and -300: exp(m) alone over/underflows
    cases = []
    for batch_t, b1, b2, Dv, offset in specs:
        shape = (*batch_t[:-1], batch_t[-1])  # (..., T)
        sign = 1 - 2 * (torch.arange(shape[-1]) % 2)  # +1, -1, +1, ... per query
        off = (offset * sign)[:, None].float()  # (T, 1)
        s1 = torch.randn(*shape, b1, generator=g) * 3 + torch.randn(*shape, 1, generator=g) * 4
        s2 = torch.randn(*shape, b2, generator=g) * 3 - 2
        s1, s2 = s1 + off, s2 + off
        v1, v2 = (
            torch.randn(*shape[:-1], b1, Dv, generator=g),
            torch.randn(*shape[:-1], b2, Dv, generator=g),
        )
        s1.view(-1, b1)[0] = float("-inf")  # the first query sees nothing in set 1 ...
        s1.view(-1, b1)[1] = float("-inf")  # ... the second query sees nothing at all:
        s2.view(-1, b2)[1] = float("-inf")
        args = (*_stats(s1, v1), *_stats(s2, v2))
        describe = f"m, l of shape {tuple(args[0].shape)}, o of shape {tuple(args[2].shape)}"
        name = f"{b1} + {b2} keys, T={shape[-1]}" + (
            f", maxima near +-{offset:g}" if offset else ""
        )
        case = Case(name, args, {}, describe)
        case.data.update(args=args, scores=torch.cat([s1, s2], -1), v=torch.cat([v1, v2], -2))
        case.data["offset"] = off if offset else None
        cases.append(case)
    return cases


def _merge_mistakes(m1, l1, o1, m2, l2, o2) -> list[Mistake]:
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - safe), torch.exp(m2 - safe)
    inv1, inv2 = torch.exp(safe - m1), torch.exp(safe - m2)
    return [
        Mistake(
            "the sums l are rescaled but the outputs o are not: o must be multiplied by the same "
            "factors exp(m1 - m) and exp(m2 - m)",
            lambda: (m, a1 * l1 + a2 * l2, o1 + o2),
        ),
        Mistake(
            "nothing is rescaled: l and o of each set were computed with that set's own maximum, "
            "so multiply them by exp(m1 - m) and exp(m2 - m) before adding",
            lambda: (m, l1 + l2, o1 + o2),
        ),
        Mistake(
            "the rescaling factors are inverted: a set whose maximum is below the new one must "
            "shrink, by exp(m_old - m_new) <= 1",
            lambda: (m, inv1 * l1 + inv2 * l2, inv1 * o1 + inv2 * o2),
        ),
        Mistake(
            "the outputs are divided by l while merging; keep o unnormalised and divide once, after "
            "the last block",
            lambda: (m, a1 * l1 + a2 * l2, (a1 * o1 + a2 * o2) / (a1 * l1 + a2 * l2)),
        ),
        Mistake(
            "the new maximum should be max(m1, m2), not m1: a later block can hold a larger score",
            lambda: (
                m1,
                torch.exp(m1 - m1) * l1 + torch.exp(m2 - m1) * l2,
                o1 + torch.exp(m2 - m1) * o2,
            ),
        ),
        Mistake(
            "the maxima are added; the merged maximum is max(m1, m2)",
            lambda: (m1 + m2, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2),
        ),
        Mistake(
            "only the second set is rescaled; both sets must move to the common maximum m",
            lambda: (m, l1 + a2 * l2, o1 + a2 * o2),
        ),
        Mistake(
            "the outputs come out in the order (o, l) or with m and l swapped: return (m, l, o)",
            lambda: (a1 * l1 + a2 * l2, m, a1 * o1 + a2 * o2),
        ),
    ]


def check_merge_softmax_stats(merge_softmax_stats, hidden: bool = False) -> None:
    """Check ``merge_softmax_stats(m1, l1, o1, m2, l2, o2) -> (m, l, o)``."""
    __tracebackhide__ = True
    run = Runner(
        "check_merge_softmax_stats",
        merge_softmax_stats,
        [Forbidden("transformer_lab's merge_softmax_stats", function=_tiled.merge_softmax_stats)],
        hidden,
        _hint("merge_softmax_stats(m1, l1, o1, m2, l2, o2)", _merge_tip),
    )
    for case in _merge_cases(hidden):
        args = case.data["args"]
        expected = _tiled.merge_softmax_stats(*args)
        value = run.call(case)
        if not isinstance(value, tuple) or len(value) != 3:
            kind = type(value).__name__ + (
                f" of length {len(value)}" if isinstance(value, (tuple, list)) else ""
            )
            run.fail(f"expected a tuple (m, l, o), but your function returned a {kind}.", case)
        order = _tuple_order(run, value, expected)
        if order:
            run.fail(
                f"the tuple is in the wrong order: you return ({order}); return (m, l, o).", case
            )
        got = [
            run.expect_tensor(x, case, e.shape, e.dtype, name)
            for x, e, name in zip(value, expected, "mlo")
        ]
        ok = all(
            torch.equal(g.isnan(), e.isnan()) and run.matches(g, e, 1e-5, 1e-5)
            for g, e in zip(got, expected)
        )
        if ok:
            continue
        # Name a mistake from the queries that saw keys in both sets; empty sets are judged apart.
        both = (torch.isfinite(args[0]) & torch.isfinite(args[3]))[..., 0]  # (..., T)
        for mistake in _merge_mistakes(*args):
            try:
                candidate = mistake.compute()
            except Exception:
                continue
            if all(
                c.shape == g.shape and run.matches(g[both], c[both], 1e-5, 1e-5)
                for g, c in zip(got, candidate)
            ):
                run.fail(mistake.message, case)
        overflow = merge_overflow_probe(run, case)
        if overflow:
            run.fail(overflow, case)
        if any(g.isnan().any() for g in got):
            run.fail(
                "NaN where a query has seen no key in either set (m1 = m2 = -inf): exp(-inf - (-inf)) "
                "is NaN; shift by 0 when the new maximum is -inf (its l and o stay 0)",
                case,
            )
        wrong = [
            name for name, g, e in zip("mlo", got, expected) if not run.matches(g, e, 1e-5, 1e-5)
        ]
        message = _one_set_evidence(run, got, args, both) or _rescaling_evidence(got, args, both)
        if message:
            run.fail(message, case)
        first = wrong[0]
        run.fail(
            f"{', '.join(wrong)} differ from the reference; "
            + run.mismatch(got["mlo".index(first)], expected["mlo".index(first)], first),
            case,
            named=False,
        )
    run.passed()


register(
    Exercise(
        "merge_softmax_stats",
        "09_attention_at_scale",
        "merge_softmax_stats(m1, l1, o1, m2, l2, o2) -> (m, l, o)",
        cells=(Cell("merge_softmax_stats_tests", "merge_softmax_stats", 2),),
        check=check_merge_softmax_stats,
        reference=_tiled.merge_softmax_stats,
    )
)
