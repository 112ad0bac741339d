"""Check for notebook 06 (BERT), what comes out: the MLM loss (the [CLS] classifier is checked in
cls_logits.py).

Student-facing signature:

    masked_lm_loss(hidden, labels, head) -> 0-dim tensor (head run on the labelled positions only)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from transformer_lab import bert_inputs as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, generator
from transformer_lab.checks.engine.fallback import verdict
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.nb06_bert.bert import _hint
from transformer_lab.checks.nb06_bert.bert_heads_evidence import (
    gradient_to_hidden,
    logit_scale,
    loss_evidence,
    loss_transform,
    which_rows,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_masked_lm_loss"]


_REF_LOSS = _ref.masked_lm_loss


# ---------------------------------------------------------------------------------------------
# Exercise 4: the MLM loss on the labelled positions only
class _CountingHead(nn.Module):
    """A linear MLM head that counts how many vectors it was run on (under grading it runs in the
    graded kernel; the counts come back after each call, see checks.engine.serve)."""

    _tlab_sync = ("rows", "seen")

    def __init__(self, C: int, V: int, g: torch.Generator) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(V, C, generator=g) / C**0.5)
        self.bias = nn.Parameter(0.1 * torch.randn(V, generator=g))
        self.rows = 0
        self.seen: list[torch.Tensor] = []  # what the head was run on

    def forward(self, h):
        self.rows += h.numel() // h.shape[-1]
        self.seen.append(h.detach().reshape(-1, h.shape[-1]))
        return F.linear(h, self.weight, self.bias)


def _loss_cases(hidden: bool) -> list[Case]:
    g = generator(6404 if hidden else 604)
    shapes = [(2, 6, 8, 11), (3, 9, 4, 7), (1, 5, 6, 8)] + (
        [(1, 13, 6, 9), (5, 4, 8, 20)] if hidden else []
    )
    cases = []
    for B, T, C, V in shapes:
        hidden_states = torch.randn(B, T, C, generator=g)
        labels = torch.randint(0, V, (B, T), generator=g)
        keep = torch.rand(B, T, generator=g) < 0.3
        keep[0, 0] = keep[-1, -1] = True
        labels = labels.masked_fill(~keep, _ref.IGNORE_INDEX)
        labels[0, 0] = 0  # a real token with id 0: "labels > 0" would drop it
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=g))
        case = Case(
            f"B={B}, T={T}, C={C}, V={V}",
            (),
            {},
            f"hidden ({B}, {T}, {C}), labels ({B}, {T}), {int(keep.sum())} labelled",
        )
        case.data.update(hidden=hidden_states, labels=labels, C=C, V=V, seed=seed)
        cases.append(case)
    return cases


def _paired_out_of_order(head, h, labels) -> str | None:
    """The head ran on exactly the labelled vectors but in another order than hidden[chosen]
    (time-major, sorted, ...): with the loss wrong, the labels were paired in the other order."""
    chosen = labels != _ref.IGNORE_INDEX
    seen = torch.cat(head.seen) if head.seen else h.new_zeros(0, h.shape[-1])
    rows = h[chosen]
    if seen.shape != rows.shape or torch.equal(seen, rows):
        return None
    distance = torch.cdist(seen.double(), rows.double())
    if not (distance.min(0).values < 1e-5).all() or not (distance.min(1).values < 1e-5).all():
        return None
    return (
        "the labels are paired with the wrong positions: the head saw the labelled vectors in "
        "another order than the labels (a transpose, time-major order?); select both with the "
        "same mask in the same order, hidden[chosen] and labels[chosen]"
    )


def _loss_mistakes(hidden, labels, head) -> list[Mistake]:
    chosen = labels != _ref.IGNORE_INDEX
    logits = head(hidden)  # (B, T, V)
    logp = logits.log_softmax(-1)
    nll = -logp.gather(-1, labels.clamp(min=0)[..., None])[..., 0]  # (B, T), junk at unlabelled
    per_seq = (nll * chosen).sum(1) / chosen.sum(1).clamp(min=1)
    return [
        Mistake(
            "the loss is averaged over every position: unlabelled positions (label -100) must not count",
            lambda: nll.mean(),
        ),
        Mistake(
            "the loss is summed over the labelled positions; take the mean",
            lambda: nll[chosen].sum(),
        ),
        Mistake(
            "the sum over the labelled positions is divided by all B*T positions; divide by the "
            "number of labelled ones",
            lambda: nll[chosen].sum() / labels.numel(),
        ),
        Mistake(
            "each sequence is averaged first and then the sequences: average over all labelled "
            "positions of the batch at once",
            lambda: per_seq[chosen.any(1)].mean(),
        ),
        Mistake(
            "positions are selected with labels > 0, which drops real tokens with id 0: select "
            "labels != -100",
            lambda: F.cross_entropy(logits[labels > 0], labels[labels > 0]),
        ),
        Mistake(
            "the log is missing: cross-entropy is -log softmax(logits)[label], not -softmax",
            lambda: (
                -logits.softmax(-1)
                .gather(-1, labels.clamp(min=0)[..., None])[..., 0][chosen]
                .mean()
            ),
        ),
        Mistake(
            "the softmax is taken over the positions instead of the vocabulary (last dimension)",
            lambda: -logits[chosen].log_softmax(0).gather(-1, labels[chosen][:, None]).mean(),
        ),
        Mistake(
            "softmax is applied before F.cross_entropy, which applies log_softmax itself: pass "
            "the logits, not probabilities",
            lambda: F.cross_entropy(logits[chosen].softmax(-1), labels[chosen]),
        ),
        Mistake(
            "F.nll_loss expects log-probabilities: apply log_softmax to the logits first, or use "
            "F.cross_entropy on the logits",
            lambda: F.nll_loss(logits[chosen], labels[chosen]),
        ),
        Mistake(
            "log_softmax is applied twice? F.cross_entropy takes the logits as they are",
            lambda: F.cross_entropy(logits[chosen].log_softmax(-1).log_softmax(-1), labels[chosen]),
        ),
        Mistake(
            "the head is skipped: apply `head` to the hidden vectors to get (M, V) logits",
            lambda: F.cross_entropy(hidden[chosen], labels[chosen]),
        ),
    ]


def check_masked_lm_loss(masked_lm_loss, hidden: bool = False) -> None:
    """Check ``masked_lm_loss(hidden, labels, head)``: mean cross-entropy over labels != -100,
    the head run on the labelled positions only, and differentiable."""
    __tracebackhide__ = True
    run = Runner(
        "check_masked_lm_loss",
        masked_lm_loss,
        [Forbidden("transformer_lab.bert_inputs.masked_lm_loss", function=_REF_LOSS)],
        hidden,
        _hint(
            "masked_lm_loss(hidden, labels, head)",
            "the head is skipped? cross_entropy needs (M, V) logits, head(hidden[chosen])",
        ),
    )
    for case in _loss_cases(hidden):
        h, labels, C, V = (case.data[k] for k in ("hidden", "labels", "C", "V"))
        head = _CountingHead(C, V, generator(case.data["seed"]))
        with torch.no_grad():
            want = F.cross_entropy(head(h).flatten(0, 1), labels.flatten())  # ignore_index=-100
        head.rows, head.seen = 0, []
        M = int((labels != _ref.IGNORE_INDEX).sum())
        case.args = (h, labels, head)
        value = run.call(case)
        if isinstance(value, float) or (
            TRUSTED.is_tensor(value) is False and isinstance(value, int)
        ):
            run.fail(
                "return the loss as a tensor (not a Python number, so it can be back-propagated): "
                "drop the .item()",
                case,
            )

        def hint(got, M=M):
            return "average the per-position losses into one number" if got == (M,) else None

        loss = run.expect_tensor(value, case, (), torch.float32, what="loss", shape_hint=hint)
        if not run.close(loss, want, atol=1e-5, rtol=1e-5):
            rows = which_rows(head, h, labels, M) or _paired_out_of_order(head, h, labels)
            message = run.diagnose(loss, _loss_mistakes(h, labels, head), 1e-5, 1e-5)
            message = message or rows
            message = message or loss_transform(run, h, labels, head, loss)
            message = message or loss_evidence(run, h, labels, head, loss)
            message = message or logit_scale(run, h, labels, head, loss)
            message, named = verdict(message, loss, want, "loss", {"V": V, "M": M})
            run.fail(message, case, named=named)
        if head.rows != M:
            where = (
                "every position (B*T = " + str(labels.numel()) + ")"
                if head.rows >= labels.numel()
                else f"{head.rows} vectors"
            )
            run.fail(
                f"the loss is right, but your function ran the head on {where}; run it on the "
                f"{M} labelled positions only (hidden[labels != -100]): the (C -> V) head is the "
                "most expensive part of an MLM step, and 85% of its work would be thrown away",
                case,
            )
        if not getattr(value, "requires_grad", False):
            run.fail(
                "the loss is detached from the head's parameters (no gradient would flow): do not "
                "use .detach(), .item() or torch.no_grad() in the loss",
                case,
            )
        message = gradient_to_hidden(run, h, labels, head)
        if message:
            run.fail(message, case)
    run.passed()


register(
    Exercise(
        "masked_lm_loss",
        "06_bert",
        "masked_lm_loss(hidden, labels, head) -> 0-dim tensor",
        cells=(Cell("masked_lm_loss_tests", "masked_lm_loss", 2),),
        check=check_masked_lm_loss,
        against="transformer_lab.bert_inputs.masked_lm_loss",
    )
)
