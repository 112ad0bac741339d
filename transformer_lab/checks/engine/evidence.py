"""The pieces of evidence :func:`transformer_lab.checks.engine.diagnose.explain` weighs, one function
each; every one returns a Finding when its evidence fits exactly, else None.

Over 300 lines, kept whole: one small function per kind of evidence, all weighed by
diagnose.explain in one order; splitting them would scatter that list.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from transformer_lab.checks.engine.guards import TRUSTED

__all__ = ["Finding", "same", "permuted", "observe", "DEFAULT"]


class _Default:
    def __repr__(self) -> str:
        return "its default"


DEFAULT = _Default()  # in a variation: leave this argument out (use the function's default)


@dataclass
class Finding:
    message: str
    named: bool


# ---------------------------------------------------------------------------------------------
def _as_tensor(x: Any) -> Tensor | None:
    if TRUSTED.is_tensor(x):
        return x.detach()
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return torch.tensor(float(x), dtype=torch.float64)
    return None


def same(actual: Any, candidate: Any, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Equal shapes and values (NaN matches NaN, inf matches inf)."""
    a, c = _as_tensor(actual), _as_tensor(candidate)
    if a is None or c is None or a.shape != c.shape:
        return False
    if a.dtype == torch.bool or c.dtype == torch.bool:
        return TRUSTED.equal(a.bool(), c.bool())
    a, c = a.to(torch.float64), c.to(torch.float64)
    return bool(TRUSTED.allclose(a, c, atol=atol, rtol=rtol, equal_nan=True))


def _axis(axes: Sequence[str] | None, dim: int, ndim: int) -> str:
    if axes is not None and len(axes) == ndim:
        return axes[dim]
    return f"index along dim {dim}"


def permuted(actual: Tensor, expected: Tensor, axes: Sequence[str] | None = None) -> str | None:
    """'the reference with dims 0 and 1 swapped' if ``actual`` is exactly that, else None."""
    if actual.dim() != expected.dim() or actual.dim() < 2 or actual.dim() > 5:
        return None
    for perm in itertools.permutations(range(expected.dim())):
        if list(perm) == list(range(expected.dim())):
            continue
        moved = expected.permute(*perm)
        if tuple(moved.shape) == tuple(actual.shape) and same(actual, moved):
            swapped = [i for i, p in enumerate(perm) if p != i]
            if len(swapped) == 2:
                i, j = swapped
                names = ""
                if axes is not None and len(axes) == expected.dim():
                    names = f" ({axes[i]} and {axes[j]})"
                return (
                    f"your result is the reference with dims {i} and {j}{names} swapped "
                    f"(transposed); keep the order of the axes"
                )
            return (
                f"your result is the reference with its axes permuted to {tuple(perm)}; keep the "
                f"order of the axes"
            )
    return None


_MEANING = {
    "D": "the head/key width D",
    "C": "the model width C",
    "T": "the number of queries T",
    "S": "the number of keys S",
    "H": "the number of heads H",
    "B": "the batch size B",
}


def _factor_names(c: float, dims: dict | None) -> list[str]:
    candidates: list[tuple[float, str]] = [(-1.0, "-1"), (2.0, "2"), (0.5, "1/2")]
    for name, value in (dims or {}).items():
        value = float(value)
        if value <= 0 or value == 1:
            continue
        what = _MEANING.get(name, name)
        candidates += [
            (value, f"{name} ({what})"),
            (1 / value, f"1/{name} ({what})"),
            (math.sqrt(value), f"sqrt({name})"),
            (1 / math.sqrt(value), f"1/sqrt({name})"),
        ]
    return [name for value, name in candidates if abs(c - value) <= 1e-4 * max(1.0, abs(value))]


def _constant_factor(actual: Tensor, expected: Tensor, dims: dict | None) -> Finding | None:
    a, e = actual.to(torch.float64), expected.to(torch.float64)
    if not (TRUSTED.isfinite(a).all() and TRUSTED.isfinite(e).all()):
        return None
    norm = (e * e).sum()
    if norm.item() == 0:
        return None
    c = ((a * e).sum() / norm).item()
    if abs(c - 1) < 1e-6 or abs(c) < 1e-9 or not TRUSTED.allclose(a, c * e, atol=1e-6, rtol=1e-4):
        return None
    if abs(c + 1) < 1e-6:
        return Finding(
            "your result is the reference with its sign flipped (-1 times it): check a minus sign",
            True,
        )
    names = _factor_names(c, dims)
    if names:
        sizes = [n for n in names if n.split(" ")[0].lstrip("1/") in {"T", "S", "B", "H"}]
        extra = ""
        if sizes and not names[0].startswith(("sqrt", "1/sqrt")):
            extra = " (a sum where a mean belongs, or the reverse?)"
        return Finding(
            f"your result is exactly {c:.6g} times the reference, a factor of "
            + " = ".join(names)
            + extra,
            True,
        )
    return Finding(
        f"your result is the reference multiplied by the constant {c:.6g} everywhere (not a "
        f"factor the inputs' sizes explain): look for a stray scale factor",
        False,
    )


_BATCH_WORDS = ("batch", "head", "sequence")


def _batch_dims(axes, ndim: int) -> list[int]:
    """Dims along which "only the first is right" is evidence: batch-like axes. (Along positions
    or channels, index 0 is often right by accident: angle 0, sin 0 = 0.)"""
    if axes is not None and len(axes) == ndim:
        return [i for i, name in enumerate(axes) if any(w in name for w in _BATCH_WORDS)]
    return list(range(max(0, ndim - 2)))


def _first_only(actual, expected, axes, atol, rtol) -> Finding | None:
    for dim in _batch_dims(axes, expected.dim()):
        n = expected.shape[dim]
        if n < 2:
            continue
        right = [same(actual.select(dim, i), expected.select(dim, i), atol, rtol) for i in range(n)]
        if right[0] and not any(right[1:]):
            name = _axis(axes, dim, expected.dim())
            return Finding(
                f"only the first {name} (index 0 of dim {dim}) is right; the others differ: a "
                f"loop that stops after one step, a `return` inside the loop, or [0] where the "
                f"whole dimension belongs",
                True,
            )
    return None


def _shifted(actual, expected, axes, atol, rtol) -> Finding | None:
    for dim in range(expected.dim()):
        n = expected.shape[dim]
        if n < 3:
            continue
        name = _axis(axes, dim, expected.dim())
        a_tail, e_head = actual.narrow(dim, 1, n - 1), expected.narrow(dim, 0, n - 1)
        if same(a_tail, e_head, atol, rtol):
            return Finding(
                f"shifted by one position along dim {dim} ({name}): your entry i holds the "
                f"reference's entry i - 1 (off by one)",
                True,
            )
        a_head, e_tail = actual.narrow(dim, 0, n - 1), expected.narrow(dim, 1, n - 1)
        if same(a_head, e_tail, atol, rtol):
            return Finding(
                f"shifted by one position along dim {dim} ({name}): your entry i holds the "
                f"reference's entry i + 1 (off by one)",
                True,
            )
    return None


def _masked_rows(actual, expected, masked, atol, rtol) -> Finding | None:
    if masked is None or expected.dim() < 1:
        return None
    try:
        rows = masked.expand(expected.shape[:-1]).to(torch.bool)
    except RuntimeError:
        return None
    if not rows.any() or actual.shape != expected.shape:
        return None
    if not same(actual[~rows], expected[~rows], atol, rtol):
        return None
    bad = actual[rows].to(torch.float64)
    if TRUSTED.isnan(bad).any():
        return Finding(
            "right everywhere except the fully masked rows (queries with no key to attend to), "
            "where yours is NaN: an all -inf slice must give zeros (shift it by 0 instead of its "
            "-inf maximum, and avoid dividing 0 by 0)",
            True,
        )
    n = expected.shape[-1]
    if TRUSTED.allclose(bad, torch.full_like(bad, 1.0 / n), atol=1e-6):
        return Finding(
            "right everywhere except the fully masked rows, where yours gives every key the "
            f"weight 1/{n}: a large finite number (-1e9) instead of float('-inf') makes a row "
            "with nothing to attend to uniform; use -inf, and a softmax that returns zeros "
            "for an all -inf row",
            True,
        )
    return Finding(
        "right everywhere except the fully masked rows (queries with no key to attend to), "
        "where yours is non-zero; they must be zeros",
        True,
    )


def _variations(actual, expected, variations, rerun, atol, rtol) -> Finding | None:
    if rerun is None:
        return None
    for argument, override in variations:
        student_alt, reference_alt = rerun(override)
        if reference_alt is None or same(reference_alt, expected, atol, rtol):
            continue  # this argument does not change the reference here
        value = next(iter(override.values())) if override else None
        shown = "its default" if value is DEFAULT else ("None" if value is None else repr(value))
        if TRUSTED.is_tensor(value):
            shown = "another tensor"
        if same(actual, reference_alt, atol, rtol):
            return Finding(
                f"your result is what the reference gives with `{argument}` = {shown}: your "
                f"function ignores `{argument}` (or uses a fixed value)",
                True,
            )
        if student_alt is not None and same(student_alt, actual, atol, rtol):
            return Finding(
                f"changing `{argument}` (to {shown}) changes the reference but not your "
                f"result: your function ignores `{argument}`",
                True,
            )
    return None


def _reshaped(actual: Tensor, expected: Tensor, axes) -> Finding | None:
    """The reference with two or more of its axes permuted and then reshaped back to its shape:
    a reshape (or view) where a transpose belongs, or a tensor built in another axis order."""
    dims = [d for d in range(expected.dim()) if expected.shape[d] > 1]
    if not 2 <= len(dims) <= 4 or actual.shape != expected.shape:
        return None
    core = expected.reshape([expected.shape[d] for d in dims])  # size-1 axes left out
    for perm in itertools.permutations(range(len(dims))):
        if list(perm) == sorted(perm):
            continue
        moved = core.permute(*perm).reshape(expected.shape)
        if same(moved, expected) or not same(actual, moved):
            continue
        names = [_axis(axes, dims[p], expected.dim()) for p in perm]
        if names[0].startswith("index along"):
            names = [f"dim {dims[p]}" for p in perm]
        order = ", ".join(names)
        return Finding(
            f"your result holds the reference's values in the wrong order: it is the reference "
            f"with its axes swapped (transposed) to ({order}) and then reshaped (or viewed) back "
            f"to its shape; reshape and view never move axes: build the tensor in the right axis "
            f"order, or transpose before reshaping",
            True,
        )
    return None


def _rearranged(actual: Tensor, expected: Tensor) -> Finding | None:
    """The same multiset of numbers in other places: an axis reordering."""
    if actual.numel() < 4 or actual.dtype == torch.bool:
        return None
    a, e = actual.flatten().sort().values, expected.flatten().sort().values
    if not TRUSTED.isfinite(e).all() or len(e.unique()) < 0.9 * e.numel():
        return None  # too many equal values: a coincidence is likely
    if TRUSTED.allclose(a, e, atol=1e-6, rtol=1e-5):
        return Finding(
            "your output holds exactly the reference's numbers, but in other places: axes are "
            "transposed or reshaped in the wrong order (reshape only after moving the axes "
            "into the order the result needs)",
            True,
        )
    return None


def differs(what: str) -> str:
    """ "differs" or "differ", agreeing with ``what`` ("the loss differs", "the logits differ")."""
    last = what.split()[-1] if what.split() else what
    plural = last.endswith("s") and not last.endswith(("ss", "us", "is", "as"))
    return "differ" if plural else "differs"


def observe(actual: Any, expected: Any, what: str = "output", axes=None, sums_to_one=None) -> str:
    """A precise description of how ``actual`` differs from ``expected`` (no diagnosis)."""
    a, e = _as_tensor(actual), _as_tensor(expected)
    if a is None or e is None or a.shape != e.shape:
        return f"the {what} {differs(what)} from the reference"
    if a.dtype == torch.bool or e.dtype == torch.bool:
        wrong = (a.bool() != e.bool()).nonzero()
        first = tuple(wrong[0].tolist()) if len(wrong) else ()
        return (
            f"{len(wrong)} of {e.numel()} entries of the {what} differ from the reference "
            f"(first at index {first}: yours {a[first].item()}, expected {e[first].item()})"
        )
    a, e = a.to(torch.float64), e.to(torch.float64)
    parts = []
    bad_a = ~TRUSTED.isfinite(a) & TRUSTED.isfinite(e)
    if bad_a.any():
        where = tuple(bad_a.nonzero()[0].tolist())
        parts.append(
            f"the {what} contains NaN or inf in {int(bad_a.sum())} entries (first at index "
            f"{where}) where the reference is finite"
        )
    diff = (a - e).abs().nan_to_num(nan=math.inf)
    both_inf = (a == e) & ~TRUSTED.isfinite(e)
    diff = torch.where(both_inf, torch.zeros_like(diff), diff)
    wrong = diff > 1e-5 + 1e-4 * e.abs().nan_to_num(0.0)
    if not parts and wrong.any():
        # which slices hold the differences?
        for dim in range(e.dim()):
            per = wrong.flatten(0, -1) if e.dim() == 1 else wrong.movedim(dim, 0).flatten(1)
            rows = per.any(dim=-1) if e.dim() > 1 else per
            if e.dim() > 1 and 0 < int(rows.sum()) < e.shape[dim] and e.shape[dim] > 1:
                idx = rows.nonzero().flatten().tolist()
                shown = idx if len(idx) <= 6 else idx[:6] + ["..."]
                parts.append(
                    f"only the {_axis(axes, dim, e.dim())} entries {shown} of dim {dim} differ"
                )
                break
        finite = diff.nan_to_num(posinf=0.0)
        idx = tuple(int(i) for i in torch.unravel_index(finite.argmax(), finite.shape))
        parts.append(
            f"the {what} {differs(what)} from the reference in {int(wrong.sum())} of {e.numel()} "
            f"entries, by up to {finite.max().item():.3g} (at index {idx}: yours "
            f"{a[idx].item():.6g}, expected {e[idx].item():.6g})"
        )
    if sums_to_one is not None and a.dim() > 0:
        sums = a.sum(dim=sums_to_one)
        ok = TRUSTED.isfinite(sums)
        if ok.any() and not TRUSTED.allclose(sums[ok], torch.ones_like(sums[ok]), atol=1e-4):
            parts.append(
                f"its slices along dim {sums_to_one} sum to between {sums[ok].min().item():.4g} "
                f"and {sums[ok].max().item():.4g}, not 1"
            )
    return "; ".join(parts) if parts else f"the {what} {differs(what)} from the reference"
