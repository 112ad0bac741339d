"""Checks for notebook 4, exercises 1 and 3: the causal mask and the padding mask
(True = may attend).

    causal_mask(T) -> (T, T) bool, True where query t may attend to key s (s <= t)
    padding_mask(lengths, S) -> (B, 1, 1, S) bool, True at the real (non-padding) keys
"""

from __future__ import annotations

import torch

from transformer_lab import masks as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = [
    "check_causal_mask",
    "check_padding_mask",
]


def _causal_mistakes(T: int) -> list[Mistake]:
    ones = torch.ones(T, T, dtype=torch.bool)
    return [
        Mistake(
            "the mask is inverted (its polarity is reversed, True and False swapped): True = "
            "may attend, so the lower triangle (s <= t) must be True",
            lambda: ones.triu(1),
        ),
        Mistake(
            "off by one: the diagonal is excluded, but every token may attend to itself (use tril(), diagonal=0)",
            lambda: ones.tril(-1),
        ),
        Mistake(
            "off by one: each query may also see the next token; use tril() with diagonal=0",
            lambda: ones.tril(1),
        ),
        Mistake(
            "the mask is transposed: query t (row t) may attend to keys s <= t, the lower triangle",
            lambda: ones.triu(0),
        ),
        Mistake("nothing is masked: the future keys (s > t) must be False", lambda: ones),
    ]


def check_causal_mask(causal_mask, hidden: bool = False) -> None:
    """Check ``causal_mask(T)``: a (T, T) boolean mask, True on and below the diagonal."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [Forbidden("transformer_lab's reference causal_mask", function=_ref.causal_mask)]
    run = Runner(
        "check_causal_mask",
        causal_mask,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "causal_mask(T)"),
    )
    # a telling size first (T=1 hides most mistakes); a long one last (a table sliced to T)
    sizes = [5, 2, 1, 8, 40] + ([3, 16, 33] if hidden else [])
    for T in sizes:
        case = Case(f"T={T}", (T,), {}, f"T={T}")
        expected = _ref.causal_mask(T)
        value = run.call(case)
        if torch.is_tensor(value) and value.dtype != torch.bool and tuple(value.shape) == (T, T):
            kind = "0/-inf" if torch.isinf(value.float()).any() else "numeric"
            run.fail(
                f"the mask should be a boolean tensor (True = may attend), but yours is a {kind} tensor of dtype "
                f"{value.dtype}; an additive 0/-inf mask is another convention. Return e.g. "
                f"torch.ones(T, T, dtype=torch.bool).tril()",
                case,
            )
        out = run.expect_tensor(
            value,
            case,
            expected.shape,
            torch.bool,
            shape_hint=lambda got, T=T: (
                "return the (T, T) mask itself; broadcasting adds the leading dimensions later"
                if got[-2:] == (T, T)
                else _fixed_size_hint(run, got, T)
            ),
            expected=expected,
        )
        if not torch.equal(out, expected):
            case.data["axes"] = ("query", "key")
            known = run.diagnose(out, _causal_mistakes(T), 0, 0, expected=expected)
            if known is not None:
                run.fail(known, case)
            rows = (out != expected).any(dim=1).nonzero().flatten().tolist()
            if T > 2 and rows in ([0], [T - 1]):
                which, loop = ("first", "range(1, T)") if rows == [0] else ("last", "range(T - 1)")
                run.fail(
                    f"only the {which} row (query {rows[0]}) is wrong, the others are right: a "
                    f"loop over {loop} instead of range(T)? Row t is True for keys 0 .. t",
                    case,
                )
            run.explain(out, expected, case, _causal_mistakes(T), 0, 0, what="mask")
    run.passed()


def _fixed_size_hint(run: Runner, got: tuple, T: int) -> str | None:
    """The same shape for another T too: the size does not come from the argument."""
    again, error, calls = run.attempt((T + 3,), {})
    if error is None and not calls and torch.is_tensor(again) and tuple(again.shape) == got:
        return (
            f"your mask has shape {got} for T={T} and for T={T + 3} alike: a size hard-coded from "
            f"the visible test? Build it from the argument T"
        )
    return None


def _padding_cases(hidden: bool) -> list[Case]:
    g = generator(9707 if hidden else 707)
    specs = [([3, 1, 4], 5), ([5, 5], 5), ([2, 0], 4), ([1], 1)]
    if hidden:
        lengths = torch.randint(0, 9, (6,), generator=g).tolist()
        specs += [(lengths, 9), ([7, 3], 10)]
    cases = []
    for lengths, S in specs:
        t = torch.tensor(lengths, dtype=torch.long)
        case = Case(f"lengths {lengths}, S={S}", (t, S), {}, describe_args(lengths=t, S=S))
        case.data.update(lengths=t, S=S, expected=_ref.padding_mask_from_lengths(t, S))
        cases.append(case)
    return cases


def _edge_rows_hint(wrong_lengths: torch.Tensor, S: int) -> str:
    """Only the sequences with no padding (length S) or no token (length 0) are wrong."""
    if bool((wrong_lengths == S).all()):
        return (
            f"only the sequences with no padding (length == S = {S}) are wrong: every token of "
            f"such a sequence is real, so its entire row must be True (mind the edge case S - "
            f"length == 0: a slice [-(S - length):] is then [-0:] = [0:], the whole row)"
        )
    if bool((wrong_lengths == 0).all()):
        return (
            "only the empty sequences (length 0) are wrong: every position of such a sequence is "
            "padding, so its entire row must be False (mind the edge case length == 0: an index "
            "such as -length or length - 1 then wraps around)"
        )
    return ""


def check_padding_mask(padding_mask, hidden: bool = False) -> None:
    """Check ``padding_mask(lengths, S)``: (B, 1, 1, S) boolean, True at positions < length."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden(
            "transformer_lab's padding_mask_from_lengths", function=_ref.padding_mask_from_lengths
        ),
        Forbidden("transformer_lab's padding_mask_from_ids", function=_ref.padding_mask_from_ids),
    ]
    run = Runner(
        "check_padding_mask",
        padding_mask,
        forbidden,
        hidden,
        lambda e, c: (
            "compare the positions (1, S) with the lengths as a column (B, 1): "
            "torch.arange(S)[None, :] < lengths[:, None]"
            if "must match the size" in str(e)
            else _signature_hint(e, "padding_mask(lengths, S)")
        ),
    )
    partial_rows_right = False  # a row with 0 < length < S was right: the polarity holds
    for case in _padding_cases(hidden):
        lengths, S, expected = case.data["lengths"], case.data["S"], case.data["expected"]
        B = len(lengths)

        def hint(got: tuple, B=B, S=S) -> str | None:
            if got == (B, S):
                return "index it as mask[:, None, None, :] so it broadcasts over heads and queries"
            if got in ((B, 1, S), (B, S, 1), (B, S, 1, 1)):
                return (
                    "the course's padding masks are (B, 1, 1, S): one row per sequence, "
                    "broadcast over heads and queries"
                )
            if len(got) == 4 and got[0] == B and got[-2:] == (S, S) and S > 1:
                return (
                    "yours is one (S, S) mask per sequence, so it also hides the padded queries; "
                    "a padding mask hides keys only: (B, 1, 1, S), broadcast over heads and queries"
                )
            if len(got) == 4 and got[:3] == (B, 1, 1) and got[3] != S:
                return (
                    f"your mask has {got[3]} columns: use the `S` argument (the padded length), "
                    f"not lengths.max()"
                )
            return None

        value = run.call(case)
        if (
            torch.is_tensor(value)
            and value.dtype != torch.bool
            and value.numel() == expected.numel()
        ):
            run.fail(
                f"the mask should be boolean (True = real token), but yours has dtype {value.dtype}",
                case,
            )
        out = run.expect_tensor(
            value, case, expected.shape, torch.bool, shape_hint=hint, expected=expected
        )
        if not torch.equal(out, expected) and bool(out.all()):
            run.fail(
                "your mask is all True, so nothing is masked: the padding positions (position >= "
                "length) must be False",
                case,
            )
        row_right = (out == expected).flatten(1).all(dim=1)
        partial = (lengths > 0) & (lengths < S)
        partial_rows_right = partial_rows_right or bool((row_right & partial).any())
        if not torch.equal(out, expected) and partial_rows_right:
            edge = _edge_rows_hint(lengths[~row_right], S)
            if edge:
                run.fail(edge, case)
        if not torch.equal(out, expected):
            pos = torch.arange(S)[None, :]
            ln = lengths[:, None]
            mistakes = [
                Mistake(
                    "the mask is inverted (its polarity is reversed, True and False swapped): "
                    "True = a real token (position < length, may attend), False = padding",
                    lambda: (pos >= ln)[:, None, None, :],
                ),
                Mistake(
                    "off by one: position `length` is already padding; use positions < length",
                    lambda: (pos <= ln)[:, None, None, :],
                ),
                Mistake(
                    "off by one: the last real token (position length - 1) must be True",
                    lambda: (pos < ln - 1)[:, None, None, :],
                ),
                Mistake(
                    "every row uses the first sequence's length: the lengths of the other rows "
                    "were ignored; compare the positions with each row's own length, "
                    "lengths[:, None]",
                    lambda: (pos < ln[:1]).expand(len(ln), S)[:, None, None, :],
                ),
                Mistake(
                    "you mark the last `length` positions as real, as if the padding were on "
                    "the left, at the start of each sequence: the padding is at the end, so the "
                    "real tokens are positions 0 .. length - 1",
                    lambda: (pos >= S - ln)[:, None, None, :],
                ),
            ]
            case.data["axes"] = ("batch element", "head", "query", "key")
            run.explain(out, expected, case, mistakes, 0, 0, what="mask")
    run.passed()


register(
    Exercise(
        "causal_mask",
        "04_masking_and_cross_attention",
        "causal_mask(T) -> (T, T) bool, True = may attend",
        cells=(Cell("causal_mask_tests", "causal_mask", 2),),
        check=check_causal_mask,
        reference=_ref.causal_mask,
    )
)


register(
    Exercise(
        "padding_mask",
        "04_masking_and_cross_attention",
        "padding_mask(lengths, S) -> (B, 1, 1, S) bool",
        cells=(Cell("padding_mask_tests", "padding_mask", 2),),
        check=check_padding_mask,
        reference=_ref.padding_mask_from_lengths,
    )
)
