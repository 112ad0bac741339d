"""Is the student's online softmax numerically stable? On a case with large scores (hundreds),
rerun it with the scores brought down to moderate values (the answer is known there too): right
there but wrong here means exp was taken of a raw score or maximum, which overflows float32."""

from __future__ import annotations

import torch

from transformer_lab import attention as _attention
from transformer_lab import tiled as _tiled
from transformer_lab.checks.engine.core import Case, Runner

__all__ = ["merge_overflow_probe", "tiled_overflow_probe"]


def _same(run: Runner, got, want) -> bool:
    return (
        torch.is_tensor(got)
        and got.shape == want.shape
        and torch.equal(got.isnan(), want.isnan())
        and run.matches(got.detach(), want, 1e-5, 1e-5)
    )


def merge_overflow_probe(run: Runner, case: Case) -> str | None:
    """The merge, rerun with every maximum moved back by the case's offset (l and o unchanged)."""
    off = case.data.get("offset")
    if off is None:
        return None
    m1, l1, o1, m2, l2, o2 = case.data["args"]
    moved = (m1 - off, l1.clone(), o1.clone(), m2 - off, l2.clone(), o2.clone())
    want = _tiled.merge_softmax_stats(*moved)
    got, error, calls = run.attempt(moved, {})
    if error is not None or calls or not isinstance(got, tuple) or len(got) != 3:
        return None
    if not all(_same(run, g, w) for g, w in zip(got, want)):
        return None
    big = float(off.abs().max())
    return (
        f"right for moderate maxima but wrong for large ones (here m near +-{big:g}): exp(m1) or "
        f"exp(m2) of a maximum alone overflows to inf (or underflows to 0) in float32; "
        f"exponentiate only the differences, exp(m1 - m) and exp(m2 - m) (at most 1), which keeps "
        f"the merge numerically stable"
    )


def tiled_overflow_probe(run: Runner, case: Case) -> str | None:
    """Tiled attention rerun with q divided by 16: the same softmax structure, scores ~16x
    smaller (exact: a power of two)."""
    q, k, v, block = (case.data[x] for x in ("q", "k", "v", "block"))
    small = q / 16
    want = _attention.scaled_dot_product_attention(small, k, v)[0]
    got, error, calls = run.attempt((small, k.clone(), v.clone(), block), {})
    if error is not None or calls or not _same(run, got, want):
        return None
    return (
        "right for small scores but wrong for large ones (scores in the hundreds): exp of a raw "
        "score overflows float32 above about 88 (inf, then NaN); subtract the running maximum before "
        "exponentiating, exp(s - m), and rescale l and o by exp(m_old - m_new) when it grows"
    )
