"""The known mistakes of the projections in notebook 01's self-attention (and notebook 04's
cross-attention, which shares the check): the queries and keys swapped, the weights applied as
x @ w.T, the values not projected, one role built with another role's weight or input (queries
with w_k, keys from x_q, ...). Each is attention computed on the case's inputs with that one
mistake, compared on the output; the check is in projections.py.
"""

from __future__ import annotations

from transformer_lab.checks.engine.attention_mistakes import attend
from transformer_lab.checks.engine.core import Mistake

__all__ = []


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
