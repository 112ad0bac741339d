"""Checks for notebook 8, part 3: attention rollout.

attention_rollout(attentions) -> (B, T, T), attentions a list of (B, H, T, T), first layer first
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import interpret as _interpret
from transformer_lab.checks.engine.core import Case, Mistake, Runner, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import _hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_attention_rollout"]


# ---------------------------------------------------------------------------------------------
# attention rollout
def _random_attentions(g: torch.Generator, L: int, B: int, H: int, T: int) -> list[Tensor]:
    return [torch.softmax(2.0 * torch.randn(B, H, T, T, generator=g), dim=-1) for _ in range(L)]


def _rollout_mistakes(attentions: list[Tensor]) -> list[Mistake]:
    T = attentions[0].shape[-1]
    eye = torch.eye(T)

    def compose(layers: list[Tensor], right_to_left: bool = True) -> Tensor:
        out = layers[0]
        for a in layers[1:]:
            out = a @ out if right_to_left else out @ a
        return out

    mixed = [0.5 * a.mean(dim=1) + 0.5 * eye for a in attentions]
    rows = lambda m: m / m.sum(-1, keepdim=True)  # noqa: E731
    return [
        Mistake(
            "the product is in the wrong order: later layers go on the left, R = A_L ... A_2 A_1 "
            "(rollout = mixed @ rollout)",
            lambda: compose(mixed, right_to_left=False),
        ),
        Mistake(
            "the residual path is missing: mix each layer's head-averaged weights with the "
            "identity, 0.5 * W + 0.5 * I, before multiplying",
            lambda: compose([a.mean(dim=1) for a in attentions]),
        ),
        Mistake(
            "after adding the identity the rows sum to 2, not 1: renormalise each layer (or use "
            "0.5 * W + 0.5 * I)",
            lambda: compose([a.mean(dim=1) + eye for a in attentions]),
        ),
        Mistake(
            "the heads are fused with a max; average them (mean over dim 1)",
            lambda: compose([0.5 * a.amax(dim=1) + 0.5 * eye for a in attentions]),
        ),
        Mistake(
            "only the last layer is used; compose every layer's mixed weights",
            lambda: mixed[-1],
        ),
        Mistake(
            "the layers are summed (or averaged) instead of multiplied; information flows through "
            "them in sequence, so compose them with matrix products",
            lambda: sum(mixed) / len(mixed),
        ),
        Mistake(
            "the layers are summed instead of multiplied; compose them with matrix products",
            lambda: sum(mixed),
        ),
        Mistake(
            "the first layer is left out of the product (the loop starts at layer 1 with an "
            "identity?); include every layer",
            lambda: compose(mixed[1:]) if len(mixed) > 1 else eye.expand_as(mixed[0]),
        ),
        Mistake(
            "only the first layer is used (a `return` inside the loop?); compose every layer's "
            "mixed weights",
            lambda: mixed[0],
        ),
        Mistake(
            "the layers are multiplied element-wise (*); compose them with matrix products (@), "
            "later layers on the left",
            lambda: torch.stack(mixed).prod(0),
        ),
        Mistake(
            "each layer's matrix is transposed: row i of A holds what token i reads (its query "
            "row), so use 0.5 * mean_h(W) + 0.5 * I as it is, without transposing",
            lambda: compose([m.transpose(-1, -2) for m in mixed]),
        ),
        Mistake(
            "your rollout is transposed: R[b, i, j] is how much token i draws from token j, rows "
            "are the reading tokens (R = A_L ... A_1, no transpose)",
            lambda: compose(mixed).transpose(-1, -2),
        ),
        *[
            Mistake(
                f"only head {h} is used: average the heads (mean over dim 1) before mixing in I",
                lambda h=h: compose([0.5 * a[:, h] + 0.5 * eye for a in attentions]),
            )
            for h in range(attentions[0].shape[1])
        ],
        Mistake(
            "the heads are fused with a max (then renormalised); average them (mean over dim 1)",
            lambda: compose([rows(0.5 * a.amax(dim=1) + 0.5 * eye) for a in attentions]),
        ),
        Mistake(
            "you roll out each head on its own and average at the end: average the heads of each "
            "layer first (mean over dim 1), mix in I, then compose the layers",
            lambda: compose([0.5 * a + 0.5 * eye for a in attentions]).mean(dim=1),
        ),
        Mistake(
            "the identity (the residual path) is mixed in only once, after the product: mix "
            "0.5 * W + 0.5 * I into every layer before multiplying",
            lambda: 0.5 * compose([a.mean(dim=1) for a in attentions]) + 0.5 * eye,
        ),
        Mistake(
            "the identity (the residual path) is mixed into the first layer only: mix "
            "0.5 * W + 0.5 * I into every layer before multiplying",
            lambda: compose([mixed[0]] + [a.mean(dim=1) for a in attentions[1:]]),
        ),
        Mistake(
            "the mean is taken over dim 0 (the batch) instead of dim 1 (the heads): each image "
            "keeps its own rollout, only the heads are averaged",
            lambda: compose([0.5 * a.mean(dim=0) + 0.5 * eye for a in attentions]),
        ),
    ]


def check_attention_rollout(attention_rollout, hidden: bool = False) -> None:
    """Check ``attention_rollout(attentions)``: list of (B, H, T, T) -> (B, T, T)."""
    __tracebackhide__ = True
    run = Runner(
        "check_attention_rollout",
        attention_rollout,
        [Forbidden("transformer_lab's attention_rollout", function=_interpret.attention_rollout)],
        hidden,
        _hint("attention_rollout(attentions)"),
    )
    g = generator(9804 if hidden else 804)
    specs = [(3, 2, 2, 5), (1, 1, 3, 4), (2, 3, 1, 6), (4, 1, 4, 3)]
    if hidden:
        specs += [(6, 2, 3, 7), (5, 3, 2, 9)]
    for L, B, H, T in specs:
        attentions = _random_attentions(g, L, B, H, T)
        case = Case(
            f"{L} layers of (B={B}, H={H}, T={T})", (attentions,), {}, f"{L} x ({B}, {H}, {T}, {T})"
        )
        expected = _interpret.attention_rollout(attentions)
        _, error, _ = run.attempt(([a.clone() for a in attentions],), {})
        if error is not None and (found := _wrong_dim_probe(run)):
            run.fail(f"your function raised {type(error).__name__} here; {found}", case)
        value = run.call(case)
        if isinstance(value, (list, tuple)):
            run.fail(
                f"expected one (B, T, T) tensor (the composed rollout), but your function "
                f"returned a {type(value).__name__} of length {len(value)}.",
                case,
            )

        def shape_hint(got: tuple, B=B, T=T) -> str | None:
            if got == (B, T):
                return "that is one row ([CLS]'s); return the whole (B, T, T) matrix"
            if len(got) == 4:
                return "the heads are still there: average them (dim 1) in every layer"
            return None

        out = run.expect_tensor(value, case, expected.shape, expected.dtype, "rollout", shape_hint)
        if not run.close(out, expected, 1e-5, 1e-5):
            message = run.diagnose(out, _rollout_mistakes(attentions), 1e-5, 1e-5)
            message = message or _mix_evidence(run, out, attentions, attention_rollout)
            if message:
                run.fail(message, case)
            case.data.update(axes=("batch element", "token", "token"), sums_to_one=-1)
            run.explain(out, expected, case, (), 1e-5, 1e-5, what="rollout")
    run.passed()


def _mix_evidence(run: Runner, out: Tensor, attentions: list[Tensor], student=None) -> str | None:
    """Which layers, and which mix a * W + b * I, give the student's result? (Both found by
    search: a layer range in order, and weights a, b from the usual suspects.) With two heads a
    sum over the heads looks like a = 1: then a probe with three heads tells them apart."""
    if student is not None and attentions[0].shape[1] == 2:
        probe = _random_attentions(generator(8041), 2, 2, 3, 5)  # L=2, B=2, H=3, T=5
        got, error, calls = run.attempt(([a.clone() for a in probe],), {})
        if error is None and not calls and TRUSTED.is_tensor(got) and got.shape == (2, 5, 5):
            found = _mix_evidence(run, got.detach(), probe)
            if found:
                return found
    T = attentions[0].shape[-1]
    H = attentions[0].shape[1]
    eye = torch.eye(T)
    L = len(attentions)

    def compose_(layers: list[Tensor]) -> Tensor:
        out = layers[0]
        for a in layers[1:]:
            out = a @ out
        return out

    if H > 1:
        summed = [0.5 * w.sum(dim=1) + 0.5 * eye for w in attentions]
        if run.close(out, compose_(summed), 1e-5, 1e-5):
            return (
                f"the heads are summed, not averaged: W is {H} times too large (a factor H); take "
                f"the mean over dim 1, then mix 0.5 * W + 0.5 * I"
            )

    def compose(layers: list[Tensor]) -> Tensor:
        out = layers[0]
        for a in layers[1:]:
            out = a @ out
        return out

    for a, b in ((1.0, 0.5), (0.5, 1.0), (1.0, 1.0), (0.5, 0.0), (1.0, 0.0), (0.25, 0.75),
                 (0.75, 0.25)):  # fmt: skip
        mixed = [a * w.mean(dim=1) + b * eye for w in attentions]
        if run.close(out, compose(mixed), 1e-5, 1e-5):
            rows = "sum to one" if a + b == 1 else f"sum to {a + b:g}, not one"
            return (
                f"each layer is mixed as {a:g} * W + {b:g} * I (its rows {rows}); the residual "
                f"path and the attention weigh the same: A = 0.5 * W + 0.5 * I"
            )
    mixed = [0.5 * w.mean(dim=1) + 0.5 * eye for w in attentions]
    for start in range(L):
        for stop in range(start + 1, L + 1):
            if (start, stop) != (0, L) and run.close(out, compose(mixed[start:stop]), 1e-5, 1e-5):
                return (
                    f"your result is the rollout of layers {start}..{stop - 1} only, out of "
                    f"{L}: the first layer, or the last, is left out; compose every layer"
                )
    return None


def _wrong_dim_probe(run: Runner) -> str | None:
    """The student's function crashed: with as many heads as tokens (H = T) an average over the
    wrong dim no longer crashes, and the result says which dim was averaged."""
    probe = _random_attentions(generator(8042), 2, 2, 4, 4)  # L=2, B=2, H=T=4
    got, error, calls = run.attempt(([a.clone() for a in probe],), {})
    if error is not None or calls or not TRUSTED.is_tensor(got):
        return None
    eye = torch.eye(4)
    names = {0: "dim 0 (the batch)", 2: "dim 2 (the queries)", 3: "the last dim (the keys)"}
    for dim, name in names.items():
        a1, a2 = (0.5 * w.mean(dim=dim) + 0.5 * eye for w in probe)
        if got.shape == a1.shape and run.close(got.detach(), a2 @ a1, 1e-5, 1e-5):
            return (
                f"you average over {name}; average over the heads, dim 1: mean(dim=1) turns "
                f"(B, H, T, T) into (B, T, T)"
            )
    return None


register(
    Exercise(
        "attention_rollout",
        "08_vision_transformer",
        "attention_rollout(attentions) -> (B, T, T)",
        cells=(Cell("attention_rollout_tests", "attention_rollout", 2),),
        check=check_attention_rollout,
        reference=_interpret.attention_rollout,
    )
)
