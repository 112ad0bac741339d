"""Evidence for notebook 9's merge of online-softmax statistics: the tuple's order, one set
kept instead of both, and which factors rescale l and o (from a vocabulary of the usual ones)."""

from __future__ import annotations

import torch

from transformer_lab.checks.engine.core import Runner


def _tuple_order(run: Runner, value: tuple, expected: tuple) -> str | None:
    """'m, o, l' when the student's tuple is the right values in another order."""
    import itertools

    for perm in itertools.permutations(range(3)):
        if perm == (0, 1, 2):
            continue
        if all(run.matches(value[i], expected[p], 1e-5, 1e-5) for i, p in enumerate(perm)):
            return ", ".join("mlo"[p] for p in perm)
    return None


def _one_set_evidence(run: Runner, got, args, both) -> str | None:
    """Per query: does l (and o) come from one set alone (the larger maximum's, or either)?"""
    m1, l1, o1, m2, l2, o2 = args
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - safe), torch.exp(m2 - safe)
    _, l, o = got  # noqa: E741
    rows = both & ~torch.isclose(a1 * l1, a2 * l2)[..., 0]  # queries where the two sets differ
    if not rows.any():
        return None
    pieces = ((l1, o1), (l2, o2), (a1 * l1, a1 * o1), (a2 * l2, a2 * o2))
    one = torch.zeros_like(rows)
    for pl, po in pieces:
        one |= torch.isclose(l, pl, atol=1e-5, rtol=1e-5)[..., 0] & torch.isclose(
            o, po, atol=1e-5, rtol=1e-5
        ).all(-1)
    if one[rows].all():
        return (
            "l and o hold only one of the two sets (the one with the larger maximum?): the union's "
            "statistics are the sum of both, each rescaled to m, l = exp(m1 - m) l1 + exp(m2 - m) l2"
        )
    return None


def _rescaling_evidence(got, args, both) -> str | None:
    """Which factors multiply each set's l and o (on the queries that saw keys in both sets)?
    A small vocabulary of the usual ones; name them when they explain m, l and o exactly."""
    m1, l1, o1, m2, l2, o2 = args
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - safe), torch.exp(m2 - safe)
    vocabulary = [
        ("exp(m1 - m) and exp(m2 - m)", a1, a2),
        ("1 (not rescaled)", torch.ones_like(a1), torch.ones_like(a2)),
        ("exp(m - m1) and exp(m - m2) (inverted)", torch.exp(safe - m1), torch.exp(safe - m2)),
        ("exp(m1) and exp(m2) (not shifted by the maximum m)", torch.exp(m1), torch.exp(m2)),
        ("half of exp(m1 - m) and exp(m2 - m) (the sets averaged)", a1 / 2, a2 / 2),
        ("exp(m1 - m) for both sets (the second set's factor is exp(m2 - m))", a1, a1),
        ("exp(m2 - m) for both sets (the first set's factor is exp(m1 - m))", a2, a2),
        (
            "exp(m2 - m) for the first set and exp(m1 - m) for the second (the factors are "
            "swapped: each set is rescaled by its own maximum, l1 by exp(m1 - m))",
            a2,
            a1,
        ),
        (
            "2^(m1 - m) and 2^(m2 - m) (exp2: the base of the softmax is e, use exp)",
            torch.exp2(m1 - safe),
            torch.exp2(m2 - safe),
        ),
    ]
    if not both.any():
        return None

    def explain(value, x1, x2) -> str | None:
        for name, c1, c2 in vocabulary:
            want = c1 * x1 + c2 * x2
            if value.shape == want.shape and torch.allclose(
                value[both], want[both], atol=1e-5, rtol=1e-5
            ):
                return name
        return None

    m_ok = torch.equal(got[0][both], m[both])
    shared = _global_maximum(got, args, both)
    if shared:
        return shared
    l_name, o_name = explain(got[1], l1, l2), explain(got[2], o1, o2)
    right = vocabulary[0][0]
    if not m_ok:
        for name, value in (("min(m1, m2)", torch.minimum(m1, m2)), ("m1", m1), ("m2", m2),
                            ("m1 + m2", m1 + m2)):  # fmt: skip
            if torch.equal(got[0][both], value[both]):
                return (
                    f"the merged maximum is {name}; it must be m = max(m1, m2), and l and o are "
                    f"rescaled to it by exp(m1 - m) and exp(m2 - m)"
                )
        return None
    if l_name is None or o_name is None:
        return _common_factor(got, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2, both)
    if l_name == right and o_name == right:
        return None
    parts = [f"{x} is multiplied by {n}" for x, n in (("l", l_name), ("o", o_name)) if n != right]
    return (
        "; ".join(parts)
        + f": both sets must be rescaled to m = max(m1, m2), l by {right} and o by the same factors"
    )


def _common_factor(got, l_want, o_want, both) -> str | None:
    """l and o both off by the same factor per query (so o / l is right): the two sets were
    rescaled consistently, but to a shift other than the merged maximum m."""
    _, l, o = got  # noqa: E741
    if l.shape != l_want.shape or o.shape != o_want.shape:
        return None
    rows = both & (l_want[..., 0] > 0)
    if not rows.any():
        return None
    r = l[rows] / l_want[rows]  # (n, 1)
    if not torch.allclose(o[rows], r * o_want[rows], atol=1e-5, rtol=1e-4):
        return None
    if torch.allclose(r, torch.ones_like(r), atol=1e-5, rtol=1e-5):
        return None
    return (
        "l and o are both off by the same factor on some queries (o / l is right): they are "
        "rescaled to a shift other than the merged maximum m; subtract m itself, "
        "exp(m1 - m) and exp(m2 - m), using 0 only where m is -inf"
    )


def _global_maximum(got, args, both) -> str | None:
    """One maximum for the whole tensor (a reduction over every query, not per query): the
    merged m is that one number, or l and o are rescaled to it although m is per query."""
    m1, l1, o1, m2, l2, o2 = args
    big = torch.maximum(m1, m2)[both].max()  # the largest maximum of any query
    per_query = torch.maximum(m1, m2)
    if torch.equal(per_query[both], big.expand_as(per_query[both])):
        return None  # every query has the same maximum: no evidence either way
    m, l, o = got  # noqa: E741
    f1, f2 = torch.exp(m1 - big), torch.exp(m2 - big)
    l_fit = l.shape == l1.shape and torch.allclose(l[both], (f1 * l1 + f2 * l2)[both], 1e-4, 1e-6)
    o_fit = o.shape == o1.shape and torch.allclose(o[both], (f1 * o1 + f2 * o2)[both], 1e-4, 1e-6)
    m_global = m.shape == m1.shape and torch.equal(m[both], big.expand_as(m[both]))
    if m_global or (l_fit and o_fit):
        return (
            "one maximum is shared by all queries (the largest over the whole tensor, "
            f"{float(big):.4g}): the merge is per query, m = torch.maximum(m1, m2) element by "
            "element, and each query's l and o are rescaled to its own m by exp(m1 - m) and "
            "exp(m2 - m)"
        )
    return None
