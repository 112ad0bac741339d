"""Checks for notebook 7 (GPT), part 2: temperature, top-k and top-p (nucleus) filtering.

Student-facing signature:

    filter_logits(logits, temperature=1.0, top_k=None, top_p=None) -> (..., V) logits:
        divided by the temperature, every token outside the top-k and outside the top-p
        nucleus set to -inf (Hugging Face's order: temperature, then top-k, then top-p)

The reference is the package's :func:`transformer_lab.models.gpt.filter_logits` applied to
``logits / temperature``; the tests prove it equal to Hugging Face's ``TemperatureLogitsWarper``,
``TopKLogitsWarper`` and ``TopPLogitsWarper``. Outputs are compared as distributions (which
tokens survive, and the softmax of what is left), so logits shifted by a constant per row, e.g.
log-probabilities, pass too. The reference and the catalogue of mistakes are in
sampling_catalogue.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.nb07_gpt.sampling_catalogue import (
    NEG_INF,
    _mistakes,
    _nucleus_axis,
    _same_distribution,
    _shared_threshold,
    _survivor_evidence,
    reference_filter_logits,
)
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.models import gpt as _gpt

__all__ = ["check_filter_logits"]


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


def _copies(args: tuple) -> tuple:
    return tuple(a.clone() if TRUSTED.is_tensor(a) else a for a in args)


def _consistent(run: Runner, named: list[str], cases: list[Case]) -> list[str]:
    """Several known mistakes fit this case: keep those that also fit the student's output on
    every other case (the first fitting one is named)."""
    if len(named) < 2:
        return named
    fitting = list(named)
    for other in cases:
        out, error, calls = run.attempt(_copies(other.args), dict(other.kwargs))
        if error is not None or calls or not TRUSTED.is_tensor(out):
            continue
        z, t, k, p = (other.data[n] for n in ("z", "t", "k", "p"))
        variants = dict(_mistakes(z, t, k, p))
        fitting = [m for m in fitting if _same_distribution(out.detach(), variants[m])]
        if len(fitting) <= 1:
            break
    return fitting or named


def _top_p_one_filters(run: Runner, case: Case, kept: Tensor, want: Tensor) -> str | None:
    """top_p = 1 removes tokens that the same call without top-p keeps: top-p is not off."""
    p = case.data["p"]
    if p is None or p < 1.0 or not bool((want & ~kept).any()) or bool((kept & ~want).any()):
        return None
    out, error, calls = run.attempt(_copies(case.args), {**case.kwargs, "top_p": None})
    if error is not None or calls or not TRUSTED.is_tensor(out):
        return None
    if not _same_distribution(out.detach(), case.data["expected"]):
        return None
    return (
        "top_p = 1.0 means no filtering (the nucleus is the whole distribution), but yours "
        "removes tokens: in float32 the running total can reach 1.0 before a tail of tiny "
        "probabilities; skip top-p when top_p >= 1 (top-p off)."
    )


def check_filter_logits(filter_logits, hidden: bool = False) -> None:
    """Check ``filter_logits(logits, temperature, top_k, top_p)``: same surviving tokens and
    the same renormalised distribution as temperature -> top-k -> top-p (Hugging Face's order)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden("transformer_lab's reference filter_logits", function=_gpt.filter_logits),
        Forbidden("transformer_lab's sample_next_token", function=_gpt.sample_next_token),
    ]
    run = Runner("check_filter_logits", filter_logits, forbidden, hidden, _filter_error_hint)
    ambiguous = None  # (message, case) of a case that two known mistakes explain alike
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
        if (found := _top_p_one_filters(run, case, kept, want)) is not None:
            run.fail(found, case)
        axis = _nucleus_axis(z, t, k, p, out)
        named = [m for m, variant in _mistakes(z, t, k, p) if _same_distribution(out, variant)]
        named = _consistent(run, named, _filter_cases(hidden))
        if named and axis:  # two explanations fit this small case: let a later case decide
            ambiguous = ambiguous or (named[0] + ".", case)
            continue
        if named:
            run.fail(named[0] + ".", case)
        message = (
            _shared_threshold(z / t, kept, want)
            or axis
            or _survivor_evidence(z, t, k, p, out, kept, want)
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
    if ambiguous:
        run.fail(*ambiguous)
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
