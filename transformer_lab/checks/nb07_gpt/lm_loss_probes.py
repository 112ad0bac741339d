"""Probes of a wrong causal LM loss that matches no catalogued mistake (notebook 07): which family
of losses it belongs to (label smoothing, another reduction, ...), and what changes it when the
inputs change where a correct loss must not look (the logits or ids whose target is padding, the
last position's logits, ids[:, 0]), or when its gradient is compared with the reference's.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Runner, generator
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.nb07_gpt.lm_loss_catalogue import (
    ATOL,
    RTOL,
    _lm_cases,
    _nll,
    reference_lm_loss,
)

__all__ = []


def _real_nll(logits: Tensor, ids: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """(B, T - 1) next-token losses and (B, T - 1) bool: which targets are real."""
    nll = _nll(torch.log_softmax(logits[:, :-1], -1), ids[:, 1:])
    keep = torch.ones_like(nll, dtype=torch.bool) if mask is None else mask[:, 1:] == 1
    return nll, keep


_SMOOTHING = (0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


def _lm_family(run: Runner, case: Case, out: Tensor, expected: Tensor) -> str | None:
    """The student's value against a family of plausible formulas on the same inputs: another
    denominator, the exponential of the loss, label smoothing, a target id taken for padding,
    logits and targets flattened in different orders, a softmax over another axis."""
    logits, ids, mask = case.data["logits"], case.data["ids"], case.data["mask"]
    B, T, V = logits.shape
    value = float(out.detach().reshape(()))
    if not torch.isfinite(out.detach()).all():
        return None
    nll, keep = _real_nll(logits, ids, mask)
    total = float(nll[keep].sum())
    n_targets = int(keep.sum())
    n_tokens = B * T if mask is None else int(mask.sum())

    def near(a: float, b: float) -> bool:
        return abs(a - b) <= ATOL + RTOL * abs(b)

    ref = float(expected)
    if (
        abs(ref) > 1e-3
        and near(value, -ref)
        and _confirm(run, case, lambda z, i, m: -reference_lm_loss(z, i, m))
    ):
        return (
            "your loss has the wrong sign: it is the mean log-likelihood (log p of the targets), "
            "which training would push up without bound; the loss is its negative, the mean "
            "-log p (F.cross_entropy gives it)."
        )
    if value > 0 and near(math.log(value), ref):
        return (
            "your loss is the exponential of the cross-entropy (the perplexity, exp(loss)): "
            "return the mean cross-entropy itself; perplexity is for reporting, not for training."
        )
    denominators = [
        (
            n_tokens,
            "the sum is divided by the number of real TOKENS (attention_mask.sum()); "
            "divide by the number of real TARGETS (attention_mask[:, 1:].sum()): the first token "
            "of each sequence is never a target.",
        ),
        (
            B,
            "the losses are summed over the positions and averaged over the batch: average over "
            "every real target token instead (the sum divided by their number).",
        ),
        (
            B * T,
            "the sum is divided by B * T, the number of positions; divide by the number of "
            "real targets (there are T - 1 per full sequence, fewer with padding).",
        ),
    ]
    for count, message in denominators:
        if count != n_targets and near(value, total / count):
            return message
    numerators = [(total, "the real targets' losses")]
    if not bool(keep.all()):
        numerators.append((float(nll.sum()), "the losses of every target, padding included,"))
    for numerator, what in numerators:  # a sum over the right terms, by a whole number
        c = numerator / value if value > 0 else 0.0
        whole = round(c)
        if (
            1 <= whole <= 4 * B * T
            and abs(c - whole) < 2e-5 * c
            and (numerator != total or whole != n_targets)
        ):
            return (
                f"your loss is {what} summed and divided by {whole}: the loss is the mean over "
                f"the real targets, their sum divided by their number ({n_targets} here)."
            )
    uniform = float((-torch.log_softmax(logits[:, :-1], -1).mean(-1))[keep].mean())
    if abs(uniform - ref) > 1e-3:
        eps = (value - ref) / (uniform - ref)
        for e in _SMOOTHING:
            if abs(eps - e) < 1e-4:
                return (
                    f"your loss has label smoothing ({e:g}): the course's loss is the plain "
                    "cross-entropy, without label_smoothing."
                )
    zero = keep & (ids[:, 1:] != 0)
    if bool(zero.any()) and not TRUSTED.equal(zero, keep) and near(value, float(nll[zero].mean())):
        return (
            "the targets equal to token 0 are left out: token 0 is a real token; mark only the "
            "padding targets, with -100 (ignore_index), not with 0."
        )
    if mask is not None and B > 1:
        first = (mask[:1, 1:] == 1).expand(B, -1)
        if not TRUSTED.equal(first, keep) and near(value, float(nll[first].mean())):
            return (
                "every sequence uses the padding of sequence 0: read the mask of each row, "
                "attention_mask[:, 1:] (one row per sequence)."
            )
    return None


def _confirm(run: Runner, case: Case, formula) -> bool:
    """Does the student's loss equal ``formula(logits, ids, mask)`` on another case too?"""
    for other in _lm_cases(run.hidden):
        if other.name == case.name and TRUSTED.equal(other.data["logits"], case.data["logits"]):
            continue
        logits, ids, mask = other.data["logits"], other.data["ids"], other.data["mask"]
        kwargs = {} if mask is None else {"attention_mask": mask.clone()}
        value, error, calls = run.attempt((logits.clone(), ids.clone()), kwargs)
        if error is not None or calls or not TRUSTED.is_tensor(value) or value.numel() != 1:
            return False
        want = float(formula(logits, ids, mask))
        return abs(float(value.detach().reshape(())) - want) <= ATOL + RTOL * abs(want)
    return False


def _gradient_pairs(run: Runner, case: Case) -> tuple[Tensor, Tensor] | None:
    """Which positions the student's loss scores, and against which token: the gradient of a
    cross-entropy is zero at unscored positions and negative only at the target."""
    logits, ids, mask = case.data["logits"], case.data["ids"], case.data["mask"]
    leaf = logits.clone().requires_grad_(True)
    kwargs = {} if mask is None else {"attention_mask": mask.clone()}
    with torch.enable_grad():
        value, error, calls = run.attempt((leaf, ids.clone()), kwargs)
        if error is not None or calls or not TRUSTED.is_tensor(value) or value.numel() != 1:
            return None
        if not value.requires_grad:
            return None
        (grad,) = torch.autograd.grad(value.reshape(()), leaf)
    used = grad.abs().amax(-1) > 1e-9  # (B, T)
    return used, grad.argmin(-1)  # (B, T) each


def _lm_probe(run: Runner, case: Case, out: Tensor) -> str | None:
    """Rerun the student's loss with inputs changed where the loss must NOT look (logits or ids
    whose target is padding, the last position's logits, ids[:, 0]): a change names the class."""
    logits, ids, mask = case.data["logits"], case.data["ids"], case.data["mask"]
    B, T, V = logits.shape
    if not bool(TRUSTED.isfinite(out).all()):
        return None  # NaN or inf never equals itself: a rerun would prove nothing
    g = generator(77)

    def moves(new_logits: Tensor, new_ids: Tensor) -> bool:
        kwargs = {} if mask is None else {"attention_mask": mask.clone()}
        value, error, calls = run.attempt((new_logits, new_ids), kwargs)
        if error is not None or calls or not TRUSTED.is_tensor(value) or value.numel() != 1:
            return False
        if not bool(TRUSTED.isfinite(value.detach()).all()):
            return False
        return not TRUSTED.allclose(value.detach().reshape(()), out.reshape(()), atol=1e-6)

    def shifts(new_logits: Tensor) -> bool:
        kwargs = {} if mask is None else {"attention_mask": mask.clone()}
        value, error, calls = run.attempt((new_logits, ids.clone()), kwargs)
        if error is not None or calls or not TRUSTED.is_tensor(value) or value.numel() != 1:
            return False
        v = value.detach().reshape(()).double()
        return bool(TRUSTED.isfinite(v)) and abs(float(v) - float(out)) > 1e-3 * max(
            1.0, abs(float(out))
        )

    offsets = torch.randn(B, T, 1, generator=g) * 3.0  # one constant per position
    if shifts(logits + offsets):
        return (
            "your loss changes when the same constant is added to all V logits of a position, "
            "which a softmax over the vocabulary cancels: normalise over the last dimension, "
            "log_softmax(logits, dim=-1), or use F.cross_entropy on (N, V) logits."
        )
    pairs = _gradient_pairs(run, case)
    if pairs is not None:
        used, paired = pairs
        targets = ids[:, 1:]
        real = torch.ones_like(targets, dtype=torch.bool) if mask is None else mask[:, 1:] == 1
        want = targets[real].sort().values
        got = paired[used].sort().values
        right = TRUSTED.equal(used[:, :-1], real) and not bool(used[:, -1].any())
        if right and not TRUSTED.equal(paired[:, :-1][real], targets[real]):
            right = False
        nxt = torch.cat([ids[:, 1:], ids[:, -1:] + 1], dim=1)  # (B, T): the next token (or none)
        if (
            not right
            and bool(used.any())
            and TRUSTED.equal(paired[used], ids[used])
            and not TRUSTED.equal(ids[used], nxt[used])
        ):
            return (
                "each position is scored against its own token ids[:, t], not shifted: "
                "logits[:, t] must be scored against the NEXT token ids[:, t + 1] (pair "
                "logits[:, :-1] with ids[:, 1:])."
            )
        if not right and got.shape == want.shape and TRUSTED.equal(got, want):
            return (
                "your loss scores the right number of predictions against the right target "
                "tokens, but pairs them up differently: logits[b, t] must be scored against "
                "ids[b, t + 1]. Flatten logits[:, :-1] and ids[:, 1:] in the same order "
                "(.reshape(-1, V) and .reshape(-1)), without transposing only one of them."
            )
    noise = torch.randn(B, T, V, generator=g) * 3.0
    if mask is not None and bool((mask[:, 1:] == 0).any()):
        pad_target = torch.zeros(B, T, dtype=torch.bool)
        pad_target[:, :-1] = mask[:, 1:] == 0  # positions whose target is padding
        other_ids = torch.where(mask == 0, (ids + 1) % V, ids)
        if moves(torch.where(pad_target[..., None], logits + noise, logits), ids) or moves(
            logits, other_ids
        ):
            return (
                "your loss changes when the logits or ids at positions whose TARGET is padding "
                "change: leave those positions out (attention_mask[:, 1:] == 0), e.g. set their "
                "targets to -100."
            )
    last = torch.zeros(B, T, 1, dtype=torch.bool)
    last[:, -1] = True
    if moves(torch.where(last, logits + noise, logits), ids):
        return (
            "your loss changes with the LAST position's logits, which have no next token to "
            "predict: score logits[:, :-1] against ids[:, 1:]."
        )
    first_ids = ids.clone()
    first_ids[:, 0] = (ids[:, 0] + 1) % V
    if moves(logits, first_ids):
        return (
            "your loss changes with ids[:, 0], which is never a target (nothing predicts the "
            "first token): the targets are ids[:, 1:], scored against logits[:, :-1]."
        )
    return None
