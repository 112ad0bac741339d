"""Evidence for the block exercises (notebook 5): trace what each sublayer receives.

A block is wiring: which tensor goes into which sublayer, with which mask, in which order, and
what is returned. Running the student's block with recording sublayers, and the reference with
the same ones, shows the first place the two differ: a sublayer never called or called in the
wrong order, a sublayer that receives the wrong tensor (described as what it is: ``x``, the
output of a norm, a residual sum ...), a wrong mask (missing, inverted, the other one), or a
wrong final combination. This names mistakes nobody listed, for any placement of the norms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from transformer_lab.checks.engine.guards import TRUSTED

__all__ = ["Call", "traced", "explain_wiring", "wiring_message"]

_ATTENTION = ("self_attn", "cross_attn")
_MAJOR = ("self_attn", "cross_attn", "mlp")
_ATOL, _RTOL = 2e-5, 1e-4


@dataclass
class Call:
    name: str  # "self_attn", "mlp_norm", ...
    inputs: tuple[Tensor, ...]  # (query, key_value) for attention, (x,) otherwise
    mask: Any  # the mask passed to an attention (None if none)
    output: Tensor


def traced(layer: Any) -> tuple[Any, list[Call]]:
    """A copy of ``layer`` (a Sublayers) whose functions record every call into the list."""
    calls: list[Call] = []

    def attention(name: str, fn: Callable) -> Callable:
        def attend(query, key_value=None, mask=None):
            out = fn(query, key_value, mask)
            kv = query if key_value is None else key_value
            calls.append(Call(name, (_keep(query), _keep(kv)), _keep(mask), _keep(out)))
            return out

        return attend

    def plain(name: str, fn: Callable) -> Callable:
        def apply(x):
            out = fn(x)
            calls.append(Call(name, (_keep(x),), None, _keep(out)))
            return out

        return apply

    fields = {}
    for name in ("self_attn", "self_attn_norm", "mlp", "mlp_norm", "cross_attn", "cross_attn_norm"):
        fn = getattr(layer, name)
        if fn is not None:
            fields[name] = attention(name, fn) if name in _ATTENTION else plain(name, fn)
    return replace(layer, **fields), calls


def _keep(value: Any) -> Any:
    return value.detach().clone() if TRUSTED.is_tensor(value) else value


def _same(a: Any, b: Any) -> bool:
    if not (TRUSTED.is_tensor(a) and TRUSTED.is_tensor(b)) or a.shape != b.shape:
        return False
    if a.dtype == torch.bool or b.dtype == torch.bool:
        return a.dtype == b.dtype and TRUSTED.equal(a, b)
    return bool(TRUSTED.allclose(a.double(), b.double(), atol=_ATOL, rtol=_RTOL, equal_nan=True))


def _dedup(calls: list[Call]) -> list[Call]:
    """Drop repeated calls of one sublayer on the same inputs (``norm(x)`` computed twice)."""
    kept: list[Call] = []
    for call in calls:
        if any(
            k.name == call.name
            and len(k.inputs) == len(call.inputs)
            and all(_same(a, b) for a, b in zip(k.inputs, call.inputs))
            and _same_mask(k.mask, call.mask)
            for k in kept
        ):
            continue
        kept.append(call)
    return kept


# -- naming tensors ------------------------------------------------------------------------------
class _Names:
    """Known tensors and short expressions for them ("x", "self_attn_norm(x)", "x + self_attn(…)")."""

    def __init__(self, roots: list[tuple[Tensor, str]]) -> None:
        self.known: list[tuple[Tensor, str]] = list(roots)

    def find(self, t: Tensor, sums: bool = True) -> str | None:
        for value, label in self.known:
            if _same(t, value):
                return label
        if sums:
            for i, (a, la) in enumerate(self.known):
                for b, lb in self.known[i + 1 :]:
                    if a.shape == b.shape == t.shape and _same(t, a + b):
                        return f"{la} + {lb}"
        return None

    def add_call(self, call: Call) -> None:
        if call.name in _ATTENTION:
            label = f"{call.name}(…)"
        else:
            inner = self.find(call.inputs[0]) or "…"
            label = f"{call.name}({inner})" if len(inner) <= 24 else f"{call.name}(…)"
        self.add(call.inputs)
        self.known.append((call.output, label))

    def add(self, inputs: tuple) -> None:
        for t in inputs:  # residual sums become known under their expression
            if self.find(t, sums=False) is None:
                label = self.find(t)
                if label is not None:
                    self.known.append((t, label))


def _role(call: Call, index: int) -> str:
    if call.name in _ATTENTION:
        return "query" if index == 0 else "keys and values"
    return "input"


# -- masks ---------------------------------------------------------------------------------------
def _broadcast(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor] | None:
    try:
        shape = torch.broadcast_shapes(a.shape, b.shape)
        return a.expand(shape), b.expand(shape)
    except RuntimeError:
        return None


def _same_mask(student: Any, reference: Any) -> bool:
    if student is None or reference is None:
        return student is None and reference is None
    if not (TRUSTED.is_tensor(student) and TRUSTED.is_tensor(reference)):
        return False
    if student.dtype != torch.bool or reference.dtype != torch.bool:
        return False
    pair = _broadcast(student, reference)
    return pair is not None and TRUSTED.equal(*pair)


def _describe_mask(mask: Any, masks: dict[str, Tensor | None]) -> str:
    if mask is None:
        return "no mask"
    if not TRUSTED.is_tensor(mask):
        return f"a {type(mask).__name__}"
    for label, value in masks.items():
        if value is None:
            continue
        if _same_mask(mask, value):
            return label
        if mask.dtype == torch.bool and _same_mask(mask, ~value):
            return f"~{label} (inverted: True must mean 'may attend')"
        if label.startswith("causal") and mask.dim() >= 2 and mask.shape[-1] == mask.shape[-2]:
            T = mask.shape[-1]
            tril = torch.ones(T, T, dtype=torch.bool).tril()
            if _same_mask(mask, tril.T):
                return (
                    "the upper triangle (triu): each position would see the future and not the past"
                )
            if _same_mask(mask, tril.tril(-1)):
                return "the causal mask without its diagonal: each position must also see itself"
    return "a mask that differs from " + " and ".join(k for k, v in masks.items() if v is not None)


# -- the diagnosis -------------------------------------------------------------------------------
def explain_wiring(
    student_calls: list[Call],
    student_out: Any,
    reference_calls: list[Call],
    reference_out: Tensor,
    roots: list[tuple[Tensor, str]],
    masks: dict[str, Tensor | None],
) -> str | None:
    """The first difference between the two traces, as one sentence; None if none is found."""
    ours, theirs = _dedup(student_calls), _dedup(reference_calls)
    names_ours, names_theirs = [c.name for c in ours], [c.name for c in theirs]
    for name in dict.fromkeys(names_theirs):
        if name not in names_ours:
            return (
                f"your block never calls layer.{name}: every sublayer has its own norm and the "
                f"block uses each of self_attn, cross_attn (decoder), mlp with its own norm"
                if name.endswith("_norm")
                else f"your block never calls layer.{name}"
            )
    major_ours = [n for n in names_ours if n in _MAJOR]
    major_theirs = [n for n in names_theirs if n in _MAJOR]
    if sorted(major_ours) == sorted(major_theirs) and major_ours != major_theirs:
        return (
            f"the sublayers run in the wrong order: yours calls {', '.join(major_ours)}; the order "
            f"is {', '.join(major_theirs)} (each one reads the stream the previous one wrote)"
        )
    for name in dict.fromkeys(names_theirs):
        n_ours, n_theirs = names_ours.count(name), names_theirs.count(name)
        if n_ours != n_theirs:
            extra = ""
            if name.endswith("_norm") and n_ours > n_theirs:
                extra = " (a norm applied again, e.g. a final norm inside the block?)"
            return (
                f"your block calls layer.{name} {n_ours} times on different inputs; the block "
                f"calls it {n_theirs} time{'s' if n_theirs > 1 else ''}{extra}"
            )
    if names_ours != names_theirs:
        return None
    names = _Names(roots)
    for mine, want in zip(ours, theirs):
        for index, (a, b) in enumerate(zip(mine.inputs, want.inputs)):
            if not _same(a, b):
                got = (
                    names.find(a)
                    or "a tensor that is none of x, memory, a sublayer's output or a residual sum"
                )
                expected = names.find(b) or "another tensor"
                return _residual(got, expected) or (
                    f"layer.{mine.name} receives {got} as its {_role(mine, index)}, but it should "
                    f"receive {expected}"
                )
        if mine.name in _ATTENTION and not _same_mask(mine.mask, want.mask):
            return (
                f"layer.{mine.name} gets {_describe_mask(mine.mask, masks)} as its mask, but it "
                f"needs {_describe_mask(want.mask, masks)}"
            )
        names.add_call(want)
    if TRUSTED.is_tensor(student_out) and student_out.shape == reference_out.shape:
        got = names.find(student_out)
        expected = names.find(reference_out) or "the stream after the last residual sum"
        if got is not None:
            return _residual(got, expected) or (
                f"every sublayer receives the right inputs, but your block returns {got}; it "
                f"should return {expected}"
            )
        return (
            "every sublayer receives the right inputs, but the returned value is not "
            f"{expected}: check the last residual sum (and, in post-norm, the last norm)"
        )
    return None


def _residual(got: str, expected: str) -> str | None:
    """Two residual sums with the same branch but another stream: "a + f(…)" for "x + f(…)"."""
    if " + " not in got or " + " not in expected:
        return None
    mine, branch = got.rsplit(" + ", 1)
    theirs, want_branch = expected.rsplit(" + ", 1)
    if branch != want_branch or mine == theirs:
        return None
    return (
        f"the residual connection adds {branch} to {mine}; it should add it to {theirs}: "
        f"{expected} (the residual carries the stream itself, not a normalised copy)"
        if "norm" in mine and "norm" not in theirs
        else f"the residual connection adds {branch} to {mine}; it should add it to {theirs}: "
        f"{expected}"
    )


def wiring_message(
    run: Any,
    case: Any,
    layer_index: int,
    reference: Callable[[Any], Tensor],
    roots: list[tuple[Tensor, str]],
    masks: dict[str, Tensor | None],
) -> str | None:
    """Run the student's block (``case.args[layer_index]`` is the Sublayers) and ``reference(layer)``
    with recording sublayers; the first difference of the traces, or None."""
    from transformer_lab.checks.engine.core import _clone

    layer = case.args[layer_index]
    student_layer, student_calls = traced(layer)
    args = list(_clone(tuple(case.args)))
    args[layer_index] = student_layer
    with torch.no_grad():
        out, error, forbidden = run.attempt(tuple(args), _clone(dict(case.kwargs)))
        if error is not None or forbidden:
            return None
        reference_layer, reference_calls = traced(layer)
        want = reference(reference_layer)
    try:
        return explain_wiring(student_calls, out, reference_calls, want, roots, masks)
    except Exception:  # evidence that cannot be computed is no evidence
        return None
