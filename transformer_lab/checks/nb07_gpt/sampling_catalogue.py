"""What notebook 07's filter_logits is checked with: the reference filter, the usual mistakes (each
a function of logits, temperature, top_k, top_p: ties dropped, top-k off by one, the nucleus
without the token that crosses p, ...) and the evidence of which tokens survived. The check is
in sampling.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.models import gpt as _gpt

__all__ = ["reference_filter_logits"]


NEG_INF = float("-inf")


def reference_filter_logits(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """Temperature, then top-k, then top-p: the package's filter on ``logits / temperature``."""
    return _gpt.filter_logits(logits / temperature, top_k, top_p)


# ---------------------------------------------------------------------------------------------
# the usual mistakes, each as a function of (logits, temperature, top_k, top_p)
def _top_k(z: Tensor, k, ties: bool = True, off_by_one: bool = False, smallest=False) -> Tensor:
    if not k:
        return z
    k = min(k, z.shape[-1])
    if smallest:  # sorted ascending: the k-th SMALLEST logit as the threshold
        kth = torch.sort(z, dim=-1).values[..., k - 1 : k]
        return z.masked_fill(z < kth, NEG_INF)
    values, idx = torch.topk(z, k, dim=-1)
    if not ties:  # exactly k survive: ties with the k-th are dropped
        keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
        return z.masked_fill(~keep, NEG_INF)
    kth = values[..., -1:]
    return z.masked_fill(z <= kth if off_by_one else z < kth, NEG_INF)


def _top_p(
    z: Tensor,
    p,
    rule: str = "mass_before",
    probs_from: Tensor | None = None,
    scatter=True,
    probs_as: str = "softmax",
    probs_dim: int = -1,
    cum_dim: int = -1,
) -> Tensor:
    if p is None or p >= 1.0 and rule != "no_skip":
        return z
    source = z if probs_from is None else probs_from
    if probs_as == "other_axis":  # the softmax over another axis (probs_dim), then sorted
        probs = torch.softmax(source, dim=probs_dim)
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        remove = sorted_probs.cumsum(-1) - sorted_probs >= p
        return z.masked_fill(remove.scatter(-1, order, remove), NEG_INF)
    if scatter == "unsorted":  # the running total in vocabulary order, nothing sorted
        probs = torch.softmax(source, dim=-1)
        return z.masked_fill(probs.cumsum(-1) - probs >= p, NEG_INF)
    sorted_src, order = torch.sort(source, dim=-1, descending=True)
    if probs_as == "logits":  # the running total of the logits themselves
        probs = sorted_src
    elif probs_as == "exp":  # e^z without the normalisation
        probs = torch.exp(sorted_src)
    elif probs_as == "sorted_other_axis":  # the sorted logits' softmax over another axis
        probs = torch.softmax(sorted_src, dim=probs_dim)
    else:
        probs = torch.softmax(sorted_src, dim=-1)
    cum = probs.cumsum(cum_dim)  # cum_dim != -1: the running total across rows, a mistake
    if rule in ("mass_before", "no_skip"):
        remove = cum - probs >= p
    else:  # "crossing_dropped": keeps only tokens whose running total stays within p
        remove = cum > p
        remove[..., 0] = False
    if scatter == "gather":  # mapped back with gather, the wrong inverse of the sort
        return z.masked_fill(remove.gather(-1, order), NEG_INF)
    if not scatter:  # the sorted mask applied to the vocabulary order
        return z.masked_fill(remove, NEG_INF)
    return z.masked_fill(remove.scatter(-1, order, remove), NEG_INF)


def _mistakes(z: Tensor, t: float, k, p) -> list[tuple[str, Tensor]]:
    zt = z / t
    return [
        (
            "the temperature multiplies the logits; divide them by it (logits / temperature): "
            "a temperature below 1 must sharpen the distribution",
            _top_p(_top_k(z * t, k), p),
        ),
        (
            "the temperature has no effect: divide the LOGITS by it before anything else (dividing "
            "the probabilities after the softmax only changes the normalisation, which cancels)",
            _top_p(_top_k(z, k), p),
        ),
        (
            "the top-p nucleus is computed from the probabilities before the temperature: divide "
            "by the temperature first, then filter",
            _top_p(_top_k(zt, k), p, probs_from=_top_k(z, k)),
        ),
        (
            "top-k drops tokens tied with the k-th largest logit: keep every token whose logit is "
            ">= the k-th largest (logits < kth are removed), as Hugging Face does",
            _top_p(_top_k(zt, k, ties=False), p),
        ),
        (
            "top-k keeps only k - 1 tokens: remove the logits strictly below the k-th largest "
            "(logits < kth), not those <= it",
            _top_p(_top_k(zt, k, off_by_one=True), p),
        ),
        (
            "top-p drops the token that crosses p: keep the smallest set of most likely tokens whose "
            "mass REACHES p, i.e. keep a token if the mass of the tokens before it is still < p",
            _top_p(_top_k(zt, k), p, rule="crossing_dropped"),
        ),
        (
            "top-p is computed before top-k (on the full distribution): the order is temperature, "
            "then top-k, then top-p on the softmax of what top-k left (the survivors renormalised)",
            _top_k(_top_p(zt, p), k),
        ),
        (
            "the top-p mask was made in sorted order but applied in vocabulary order: scatter it "
            "back with the sort indices (mask.scatter(-1, order, mask))",
            _top_p(_top_k(zt, k), p, scatter=False),
        ),
        (
            "the top-p mask is mapped back to the vocabulary order with gather: the inverse of "
            "the sort is a scatter, mask.scatter(-1, order, mask)",
            _top_p(_top_k(zt, k), p, scatter="gather"),
        ),
        (
            "top-p sums the sorted logits themselves: the nucleus is measured in probabilities, "
            "so take the softmax of the sorted logits before the cumulative sum",
            _top_p(_top_k(zt, k), p, probs_as="logits"),
        ),
        (
            "top-p sums e^logits without normalising them: take the softmax of the sorted logits "
            "(probabilities that sum to 1) before the cumulative sum",
            _top_p(_top_k(zt, k), p, probs_as="exp"),
        ),
        (
            "with top_p = 1 nothing may be removed, but in float32 the running total reaches "
            "exactly 1.0 before a tail of tiny probabilities, which then count as outside the "
            "nucleus: skip top-p when top_p >= 1",
            _top_p(_top_k(zt, k), p, rule="no_skip"),
        ),
        (
            "top-k keeps the tokens above the k-th SMALLEST logit (an ascending sort): the "
            "threshold is the k-th largest, torch.topk(z, k).values[..., -1:] or a descending sort",
            _top_p(_top_k(zt, k, smallest=True), p),
        ),
        (
            "top-p accumulates the probabilities in vocabulary order: sort them in descending "
            "order first (torch.sort(..., descending=True)), take the cumulative sum there, then "
            "map the mask back to token ids with mask.scatter(-1, order, mask)",
            _top_p(_top_k(zt, k), p, scatter="unsorted"),
        ),
        *[
            (
                f"top-p's running total (the cumsum) runs along dim {d}, across the rows of the "
                "batch, not along each row's sorted probabilities: take cumsum(dim=-1), the last "
                "dim",
                _top_p(_top_k(zt, k), p, cum_dim=d),
            )
            for d in range(z.dim() - 1)
        ],
    ]


def _nucleus_axis(z, t, k, p, out) -> str | None:
    """Top-p's probabilities normalised along another axis than the vocabulary (softmax before
    or after the sort): the survivors of one of those variants, per axis."""
    if p is None or p >= 1.0 or z.dim() < 2:
        return None
    zk = _top_k(z / t, k)
    for d in range(z.dim() - 1):
        for how in ("other_axis", "sorted_other_axis"):
            variant = _top_p(zk, p, probs_as=how, probs_dim=d)
            if TRUSTED.equal(TRUSTED.isfinite(out), TRUSTED.isfinite(variant)):
                return (
                    f"top-p's probabilities are a softmax over dim {d}, not over the vocabulary: "
                    "the nucleus is measured in each row's own distribution, "
                    "softmax(sorted_logits, dim=-1), before the cumulative sum."
                )
    return None


def _survivor_evidence(z, t, k, p, out, kept, want) -> str | None:
    """Name a class of mistake from which tokens survive: the filter run along another
    dimension, top-k keeping a wrong count, or the right count but not the most likely tokens."""
    for d in range(z.dim() - 1):  # the reference along another axis than the vocabulary
        try:
            other = reference_filter_logits(z.movedim(d, -1), t, k, p).movedim(-1, d)
        except Exception:
            continue
        if TRUSTED.equal(kept, TRUSTED.isfinite(other)):
            return (
                f"your filter runs along dim {d}: top-k and top-p act on each row's vocabulary, "
                "the last dimension (dim=-1)."
            )
    n_mine, n_want = kept.sum(-1), want.sum(-1)  # (...,) survivors per row
    if k and (p is None or p >= 1.0) and k < z.shape[-1]:
        if bool((kept | ~want).all()) and bool((n_mine == n_want + 1).all()):
            return (
                f"top-k keeps k + 1 = {k + 1} tokens per row, one too many: the threshold is the "
                "k-th largest logit, torch.topk(z, k).values[..., -1:], not the (k+1)-th."
            )
    if not TRUSTED.equal(kept, want):
        # are the survivors the most likely tokens of their row?
        lowest_kept = torch.where(kept, z / t, torch.full_like(z, float("inf"))).amin(-1, True)
        beaten = ~kept & (z / t > lowest_kept)  # removed, yet above a kept token of its row
        if bool(beaten.any()):
            where = tuple(beaten.nonzero()[0].tolist())
            same = "as many tokens as the reference, but " if TRUSTED.equal(n_mine, n_want) else ""
            return (
                f"each row keeps {same}not the most likely tokens: token {where} was removed "
                "although a less likely token of its row survives. Both filters keep the top of "
                "each row sorted in descending order; map a mask made in sorted order back to "
                "token ids with mask.scatter(-1, order, mask)."
            )
        if k and (p is None or p >= 1.0) and k < z.shape[-1]:
            V = z.shape[-1]
            if bool((n_mine == V - k + 1).all()) and V - k + 1 != k:
                return (
                    f"top-k keeps V - k + 1 = {V - k + 1} tokens per row: the threshold is the "
                    "k-th SMALLEST logit (an ascending sort); take the k-th largest, "
                    "torch.topk(z, k).values[..., -1:] or a descending sort."
                )
    return None


def _shared_threshold(zt: Tensor, kept: Tensor, want: Tensor) -> str | None:
    """One cut-off for the whole batch: every survivor, in every row, is above every removed
    token, while the reference's survivors are not (each row has its own threshold)."""
    rows_kept, rows_want = kept.reshape(-1, kept.shape[-1]), want.reshape(-1, want.shape[-1])
    if rows_kept.shape[0] < 2 or bool(kept.all()) or not bool(kept.any()):
        return None
    finite = TRUSTED.isfinite(zt)

    def one_cut(keep: Tensor) -> bool:
        removed = ~keep & finite
        if not bool(keep.any()) or not bool(removed.any()):
            return True
        return bool(zt[removed].max() < zt[keep].min())

    if not one_cut(kept) or one_cut(want):  # no evidence if the reference fits one cut too
        return None
    per_row = rows_kept.sum(-1)
    if bool((per_row == per_row[0]).all()) and TRUSTED.equal(per_row, rows_want.sum(-1)):
        return None
    return (
        "one threshold is used for every row: the survivors of all rows lie above a single "
        "cut-off, so some rows keep too many tokens and others too few. Compute the threshold "
        "per row, along the last dimension (e.g. torch.topk(z, k, dim=-1).values[..., -1:], "
        "which keeps one value per row)."
    )


def _same_distribution(a: Tensor, b: Tensor) -> bool:
    """Same surviving tokens and the same softmax over them (logits up to a constant per row)."""
    if a.shape != b.shape:
        return False
    kept_a, kept_b = TRUSTED.isfinite(a), TRUSTED.isfinite(b)
    if not TRUSTED.equal(kept_a, kept_b) or not bool(kept_a.any(-1).all()):
        return False
    pa, pb = torch.softmax(a.double(), -1), torch.softmax(b.double(), -1)
    return TRUSTED.allclose(pa, pb, atol=1e-6, rtol=1e-4)
