"""Checks for notebook 7 (GPT), part 2: temperature, top-k and top-p (nucleus) filtering.

Student-facing signature:

    filter_logits(logits, temperature=1.0, top_k=None, top_p=None) -> (..., V) logits:
        divided by the temperature, every token outside the top-k and outside the top-p
        nucleus set to -inf (Hugging Face's order: temperature, then top-k, then top-p)

The reference is the package's :func:`transformer_lab.models.gpt.filter_logits` applied to
``logits / temperature``; the tests prove it equal to Hugging Face's ``TemperatureLogitsWarper``,
``TopKLogitsWarper`` and ``TopPLogitsWarper``. Outputs are compared as distributions (which
tokens survive, and the softmax of what is left), so logits shifted by a constant per row, e.g.
log-probabilities, pass too.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.models import gpt as _gpt

__all__ = ["check_filter_logits", "reference_filter_logits"]

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
) -> Tensor:
    if p is None or p >= 1.0 and rule != "no_skip":
        return z
    source = z if probs_from is None else probs_from
    if scatter == "unsorted":  # the running total in vocabulary order, nothing sorted
        probs = torch.softmax(source, dim=-1)
        return z.masked_fill(probs.cumsum(-1) - probs >= p, NEG_INF)
    sorted_src, order = torch.sort(source, dim=-1, descending=True)
    if probs_as == "logits":  # the running total of the logits themselves
        probs = sorted_src
    elif probs_as == "exp":  # e^z without the normalisation
        probs = torch.exp(sorted_src)
    else:
        probs = torch.softmax(sorted_src, dim=-1)
    cum = probs.cumsum(-1)
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
    ]


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


# ---------------------------------------------------------------------------------------------
def _filter_cases(hidden: bool) -> list[Case]:
    g = generator(9505 if hidden else 505)

    def r(*shape: int, scale: float = 2.0) -> Tensor:
        return torch.randn(*shape, generator=g) * scale

    # [0.5, 0.3, 0.2]: with p = 0.6 the nucleus is the first two (the second crosses 0.6).
    crossing = torch.log(torch.tensor([[0.2, 0.5, 0.3], [0.3, 0.2, 0.5]]))
    ties = torch.tensor([[3.0, 2.0, 2.0, 2.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    tail = torch.cat([r(2, 6), torch.full((2, 40), -30.0)], dim=-1)  # tiny-probability tail
    specs = [
        ("no filtering", r(3, 10), 1.0, None, None),
        ("temperature only", r(3, 10), 0.5, None, None),
        ("top-k", r(4, 12), 1.0, 3, None),
        ("top-k with ties", ties, 1.0, 2, None),
        ("top-p, the crossing token", crossing, 1.0, None, 0.6),
        ("top-p", r(4, 12), 1.0, None, 0.8),
        ("top-p = 1 with a long tail", tail, 1.0, None, 1.0),
        ("temperature then top-p", r(3, 12), 0.5, None, 0.7),
        ("top-k then top-p", r(3, 12), 1.0, 6, 0.6),
        ("all three, batched (B, T, V)", r(2, 3, 16), 0.7, 5, 0.8),
        ("top_k = 0 means off", r(2, 8), 1.3, 0, None),
        ("top_k larger than V", r(2, 5), 1.0, 9, None),
        ("a tiny top-p keeps the top token", r(3, 9), 2.0, None, 0.01),
    ]
    if hidden:
        specs += [
            ("hidden: all three", r(5, 65, scale=3.0), 0.8, 10, 0.9),
            ("hidden: hot temperature, top-p", r(4, 30), 1.7, None, 0.5),
            ("hidden: top-k 1 (greedy)", r(3, 20), 0.9, 1, None),
            ("hidden: (B, T, V) top-p", r(2, 4, 33), 1.0, None, 0.95),
            (
                "hidden: already masked entries",
                torch.cat([r(2, 8), torch.full((2, 3), NEG_INF)], -1),
                1.0,
                4,
                0.7,
            ),
        ]
    cases = []
    for name, z, t, k, p in specs:
        kwargs = {"temperature": t, "top_k": k, "top_p": p}
        case = Case(name, (z,), kwargs, describe_args(logits=z, temperature=t, top_k=k, top_p=p))
        case.data.update(z=z, t=t, k=k, p=p, expected=reference_filter_logits(z, t, k, p))
        cases.append(case)
    return cases


def _filter_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    k = case.kwargs.get("top_k")
    if k is None and ("NoneType" in text or "'<'" in text or "'>'" in text):
        return "top_k=None and top_p=None mean 'no filtering': skip that step"
    if "selected index k out of range" in text or "k not in range" in text:
        return "top_k larger than V keeps every token: use min(top_k, V)"
    if k == 0:  # the earlier top-k cases ran: the only new thing here is k = 0
        return "top_k=0 means 'no top-k filtering' (as in Hugging Face and the package): skip it"
    return signature_hint(exc, "filter_logits(logits, temperature=1.0, top_k=None, top_p=None)")


def check_filter_logits(filter_logits, hidden: bool = False) -> None:
    """Check ``filter_logits(logits, temperature, top_k, top_p)``: same surviving tokens and
    the same renormalised distribution as temperature -> top-k -> top-p (Hugging Face's order)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden("transformer_lab's reference filter_logits", function=_gpt.filter_logits),
        Forbidden("transformer_lab's sample_next_token", function=_gpt.sample_next_token),
    ]
    run = Runner("check_filter_logits", filter_logits, forbidden, hidden, _filter_error_hint)
    for case in _filter_cases(hidden):
        z, t, k, p, expected = (case.data[n] for n in ("z", "t", "k", "p", "expected"))
        value = run.call(case)
        out = run.expect_tensor(value, case, z.shape, z.dtype, "filtered logits")
        if _same_distribution(out, expected):
            continue
        kept, want = TRUSTED.isfinite(out), TRUSTED.isfinite(expected)
        sums = out.double().sum(-1)
        if (
            bool(kept.all())
            and bool((out >= 0).all())
            and TRUSTED.allclose(sums, torch.ones_like(sums))
        ):
            run.fail(
                "you returned probabilities: return logits, with float('-inf') at the removed "
                "tokens (the sampler applies the softmax afterwards).",
                case,
            )
        zt = z / t
        untouched = TRUSTED.allclose(out.double(), zt.double(), atol=1e-5, rtol=1e-4)
        if bool(kept.all()) and not bool(want.all()) and not untouched:
            if bool((out < -1e4).any()):
                run.fail(
                    "removed tokens must be exactly float('-inf') (a large negative number still "
                    "has a probability above 0 and hides the removal).",
                    case,
                )
            run.fail(
                "removed tokens must be float('-inf'): setting them to 0 (or another finite value) "
                "leaves them a probability e^0 / Z.",
                case,
            )
        if k == 0:
            run.fail(
                "top_k = 0 means off (no top-k filtering, like None), but yours changes which "
                "tokens survive: skip top-k when top_k is 0 (`if top_k:`).",
                case,
            )
        if not bool(kept.any(-1).all()) and _shared_threshold(z / t, kept, want) is None:
            run.fail(  # an observation: it says what is wrong, not which step caused it
                "a row has no token left: the most likely token must always survive.",
                case,
                named=False,
            )
        for message, variant in _mistakes(z, t, k, p):
            if _same_distribution(out, variant):
                run.fail(message + ".", case)
        message = _shared_threshold(z / t, kept, want) or _survivor_evidence(
            z, t, k, p, out, kept, want
        )
        if message is not None:
            run.fail(message, case)
        missing = (want & ~kept).nonzero()
        extra = (kept & ~want).nonzero()
        if len(missing) or len(extra):
            what = (
                f"token {tuple(missing[0].tolist())} should survive but was removed"
                if len(missing)
                else f"token {tuple(extra[0].tolist())} should be removed but survived"
            )
            run.fail(
                f"{int(kept.sum())} tokens survive where the reference keeps {int(want.sum())}: "
                f"{what}.",
                case,
                named=False,
            )
        for scale, what in ((1.0, "not divided by the temperature"),
                            (1.0 / (t * t), "divided by the temperature twice"),
                            (t, "multiplied by the temperature")):  # fmt: skip
            if t != 1.0 and _same_distribution(out, (z * scale).masked_fill(~want, NEG_INF)):
                run.fail(
                    f"the right tokens survive, but the logits you return are {what}: return "
                    "logits / temperature (filtered), once.",
                    case,
                )
        run.fail(
            "the right tokens survive, but their logits are not logits / temperature "
            "(the renormalised probabilities differ).",
            case,
            named=False,
        )
    run.passed()


register(
    Exercise(
        "filter_logits",
        "07_gpt",
        "filter_logits(logits, temperature=1.0, top_k=None, top_p=None) -> (..., V)",
        cells=(Cell("filter_logits_tests", "filter_logits", 2),),
        check=check_filter_logits,
        against="transformer_lab.models.gpt.filter_logits",
    )
)
