"""Check for notebook 1, exercise 4: the multiply-adds of single-head self-attention.

self_attention_macs(T, C, D) -> int, compared with a count measured while the package's
SelfAttention runs (three projections X W plus the two T x T products)
"""

from __future__ import annotations

import torch

from transformer_lab import attention as _ref
from transformer_lab.checks.engine.core import Case, Runner, generator, kind_of
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.utils import MultiplyAddCounter

__all__ = ["check_self_attention_macs"]

# Formulas students arrive at instead, each with what it means. A size names the formula only
# when no other formula gives the same number for it (then a later size decides).
_FORMULAS = (
    (
        lambda T, C, D: 3 * T * C * D,
        "You counted the projections only; add the two T x T products.",
    ),
    (
        lambda T, C, D: 3 * T * C * D + T * T * D,
        "Only one of the two T x T products is counted (scores Q K^T and weights @ V).",
    ),
    (lambda T, C, D: 2 * T * T * D, "The three projections X W (T x C times C x D) are missing."),
    (
        lambda T, C, D: 2 * (3 * T * C * D + 2 * T * T * D),
        "That is FLOPs (2 per multiply-add, as FLOP counters report); count multiply-adds.",
    ),
    (
        lambda T, C, D: 3 * T * C * C + 2 * T * T * C,
        "Your count uses C where the head width D belongs (3TC^2 + 2T^2C): W_q, W_k, W_v map "
        "C to D.",
    ),
    (
        lambda T, C, D: 3 * T * C * D + 2 * T * T,
        "Each of the two T x T products costs T * T * D multiply-adds (a dot product of width "
        "D per entry), not T * T.",
    ),
    (
        lambda T, C, D: 3 * T * C * D + 2 * T * T * C,
        "The two T x T products are dot products of width D (T * T * D each), not C.",
    ),
    (
        lambda T, C, D: 4 * T * C * D + 2 * T * T * D,
        "You counted a fourth projection (an output projection W_o); single-head self-attention "
        "here has W_q, W_k, W_v only.",
    ),
)


_PROBES = [(2, 3, 5), (3, 5, 7), (5, 7, 2), (7, 2, 3), (4, 9, 5), (6, 4, 11), (11, 6, 4),
           (9, 13, 8), (13, 8, 6), (8, 11, 13), (10, 3, 9), (12, 10, 7)]  # fmt: skip
# the monomials a count of this layer can be made of, and how to read each
_MONOMIALS = (
    ("T*C*D", lambda T, C, D: T * C * D),
    ("T^2*D", lambda T, C, D: T * T * D),
    ("T*C^2", lambda T, C, D: T * C * C),
    ("T^2*C", lambda T, C, D: T * T * C),
    ("T^2", lambda T, C, D: T * T),
    ("T*C", lambda T, C, D: T * C),
    ("T*D", lambda T, C, D: T * D),
    ("T*D^2", lambda T, C, D: T * D * D),
    ("C*D", lambda T, C, D: C * D),
    ("T", lambda T, C, D: T),
)


def _probe(run: Runner) -> dict | None:
    """The student's count on the probe sizes (None if it fails or is not an int there)."""
    counts = {}
    for size in _PROBES:
        out, error, calls = run.attempt(size, {})
        if error is not None or calls or not isinstance(out, int) or isinstance(out, bool):
            return None
        counts[size] = out
    return counts


def _constant_factor(counts: dict) -> float | None:
    """The ratio of the student's count to the right one, if it is the same on every probe size
    (up to the rounding of an integer division) and not 1."""
    ratios = [c / (3 * T * C * D + 2 * T * T * D) for (T, C, D), c in counts.items()]
    r = sum(ratios) / len(ratios)
    if r <= 0 or abs(r - 1) < 0.05 or max(ratios) - min(ratios) > 0.01 * r:
        return None
    return r


def _terms(counts: dict) -> str | None:
    """Read the student's count as a sum of monomials (exact on every probe size) and say which
    terms differ from 3*T*C*D + 2*T^2*D; None when it is no such sum."""
    sizes = list(counts)
    A = torch.tensor([[f(*n) for _, f in _MONOMIALS] for n in sizes], dtype=torch.float64)
    b = torch.tensor([counts[n] for n in sizes], dtype=torch.float64)
    coef = torch.linalg.lstsq(A, b[:, None]).solution[:, 0]
    coef = [round(c * 2) / 2 for c in coef.tolist()]  # integers or halves
    if any(sum(c * f(*n) for c, (_, f) in zip(coef, _MONOMIALS)) != counts[n] for n in sizes):
        return None
    got = {name: c for (name, _), c in zip(_MONOMIALS, coef) if c}
    want = {"T*C*D": 3, "T^2*D": 2}
    if got == want:
        return None
    show = lambda terms: " + ".join(f"{c:g}*{n}" for n, c in terms.items()) or "0"  # noqa: E731
    parts = [f"Your count is {show(got)}; the right one is 3*T*C*D + 2*T^2*D."]
    # a term in the place of a right one (same coefficient), and why it is wrong
    stand_ins = {
        "T*C*D": (
            ("T*C", "the factor D is missing: each output entry of X W is a dot product of "
                    "width C, and there are T*D of them"),
            ("T*C^2", "C appears where the head width D belongs (W_q, W_k, W_v map C to D)"),
        ),
        "T^2*D": (
            ("T^2", "the factor D is missing: each of the T x T scores is a dot product of width D"),
            ("T*D^2", "the scores are T x T, each a dot product of width D: T^2*D, not T*D^2"),
            ("T^2*C", "the T x T products have width D, not C"),
        ),
    }  # fmt: skip
    explained = set()
    for term, want_c in want.items():
        have = got.get(term, 0)
        if have == want_c:
            continue
        for other, why in stand_ins[term]:
            if got.get(other) == want_c - have and other not in explained:
                parts.append(
                    f"{want_c - have:g}*{other} where {want_c - have:g}*{term} belongs: {why}."
                )
                explained.add(other)
                break
        else:
            what = (
                "The projections X W_q, X W_k, X W_v cost T*C*D each, 3*T*C*D in all"
                if term == "T*C*D"
                else "The two T x T products (Q K^T and weights @ V) cost T^2*D each, 2*T^2*D "
                "in all"
            )
            parts.append(f"{what} (you have {have:g}*{term}).")
    extra = {n: c for n, c in got.items() if n not in want and n not in explained}
    if extra:
        parts.append(
            f"The extra term {show(extra)} is not a multiply-add of the three projections or "
            f"the two T x T products (the softmax and the scaling are not counted)."
        )
    return " ".join(parts)


def _measured_macs(T: int, C: int, D: int) -> int:
    """Multiply-adds of the matrix products executed in one run of the reference self-attention."""
    with torch.random.fork_rng(devices=[]):  # the layer's init must not move the global RNG
        layer = _ref.SelfAttention(C, D)  # W_q, W_k, W_v without bias
    x = torch.randn(T, C, generator=generator(0))
    with torch.no_grad(), MultiplyAddCounter() as counter:
        layer(x)
    return counter.macs


def check_self_attention_macs(self_attention_macs, hidden: bool = False) -> None:
    """Check ``self_attention_macs(T, C, D) -> int`` against the multiply-adds measured while the
    package's SelfAttention runs (three projections plus the two T x T products)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden(
            "transformer_lab's SelfAttention (count with the formula, do not measure)",
            function=_ref.SelfAttention.forward,
        )
    ]
    run = Runner(
        "check_self_attention_macs",
        self_attention_macs,
        forbidden,
        hidden,
        lambda e, c: signature_hint(e, "self_attention_macs(T, C, D)"),
    )
    sizes = [(3, 2, 2), (10, 8, 4), (7, 16, 16), (64, 32, 8), (5, 12, 3)]
    if hidden:
        sizes = [(1, 5, 3), (33, 12, 6), (128, 16, 16), (5, 64, 64), (9, 10, 2)]
    first_failure = None  # kept while a size is ambiguous (e.g. 3TCD = 2T^2 D at T=3, C=2)
    for T, C, D in sizes:
        want = _measured_macs(T, C, D)  # measured before the student's code runs
        case = Case(f"T={T}, C={C}, D={D}", (T, C, D), {}, f"T={T}, C={C}, D={D}")
        got = run.call(case)
        if got is None:
            run.fail("your function returned None: did you forget `return`?", case)
        if TRUSTED.is_tensor(got) or not isinstance(got, int) or isinstance(got, bool):
            tip = " (e.g. with int(...) or .item())" if TRUSTED.is_tensor(got) else ""
            if isinstance(got, float) and got.is_integer():
                tip = " (a count is an int: use * and // or int(...), not / or float factors)"
            run.fail(f"return a Python int{tip}, but received {kind_of(got)}.", case)
        if got == want:
            continue
        counts = _probe(run)  # the student's formula on more sizes: a name must fit them all
        hints = [
            hint
            for formula, hint in _FORMULAS
            if formula(T, C, D) == got
            and (counts is None or all(formula(*n) == c for n, c in counts.items()))
        ]
        message = f"for T={T}, C={C}, D={D} the count is {want}, but received {got}."
        if len(hints) == 1:
            run.fail(message + " " + hints[0], case)
        terms = _terms(counts) if counts is not None else None
        if terms:
            run.fail(message + " " + terms, case)
        factor = _constant_factor(counts) if counts is not None else None
        if factor is not None:
            run.fail(
                message + f" On every size your count is about {factor:.3g} times the right one: "
                f"a constant factor too many (each multiply-add counts once, and all 3*T*C*D + "
                f"2*T^2*D of them count).",
                case,
            )
        if first_failure is None:
            first_failure = (message, case)
    if first_failure is not None:
        message, case = first_failure
        run.fail(
            message + " The count is 3 projections (T x C times C x D) plus the two T x T "
            "products (width D each).",
            case,
            named=False,
        )
    run.passed()


register(
    Exercise(
        "self_attention_macs",
        "01_self_attention",
        "self_attention_macs(T, C, D) -> int multiply-adds",
        cells=(Cell("macs_tests", "self_attention_macs", 2),),
        check=check_self_attention_macs,
        against="transformer_lab.attention.SelfAttention (multiply-adds counted while it runs)",
    )
)
