"""Checks for notebook 4: the causal mask and the padding mask (True = may attend).

Student-facing signatures:

    causal_mask(T) -> (T, T) bool, True where query t may attend to key s (s <= t)
    padding_mask(lengths, S) -> (B, 1, 1, S) bool, True at the real (non-padding) keys
    future_leaks(attend, T, C, seed=0) -> bool, True if an output position depends on a later token
    pad_and_truncate(sequences, max_len, pad_id) -> (ids (B, L) long, lengths (B,) long)
"""

from __future__ import annotations

import torch

from transformer_lab import masks as _ref
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator, kind_of
from transformer_lab.checks._integrity import TRUSTED, Forbidden
from transformer_lab.checks.softmax import signature_hint as _signature_hint
from transformer_lab.utils import LEAK_MODES, attention_layer

__all__ = [
    "check_causal_mask",
    "check_padding_mask",
    "check_future_leaks",
    "check_pad_and_truncate",
]


def _causal_mistakes(T: int) -> list[Mistake]:
    ones = torch.ones(T, T, dtype=torch.bool)
    return [
        Mistake(
            "the polarity is reversed: True must mean 'may attend', i.e. the lower triangle (s <= t) is True",
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
    sizes = [5, 2, 1, 8] + (
        [3, 16, 33] if hidden else []
    )  # a telling size first: T=1 hides most mistakes
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
                else None
            ),
            expected=expected,
        )
        if not torch.equal(out, expected):
            case.data["axes"] = ("query", "key")
            run.explain(out, expected, case, _causal_mistakes(T), 0, 0, what="mask")
    run.passed()


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
        if not torch.equal(out, expected):
            pos = torch.arange(S)[None, :]
            ln = lengths[:, None]
            mistakes = [
                Mistake(
                    "the polarity is reversed: True marks the real tokens (positions < length), False the padding",
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
                    "you mark the last `length` positions as real: the padding is at the end, "
                    "so the real tokens are positions 0 .. length - 1",
                    lambda: (pos >= S - ln)[:, None, None, :],
                ),
            ]
            run.explain(out, expected, case, mistakes, 0, 0, what="mask")
    run.passed()


# ---------------------------------------------------------------------------------------------
# a leak detector: small attention layers that do and do not let the future in
_LEAK_HINTS = {
    "after softmax": " It leaks through the softmax's denominator, more weakly than the allowed "
    "keys: compare exactly (torch.equal), not with a tolerance.",
    "faint leak": " The future enters with a weight of 1e-6: compare exactly (torch.equal), "
    "not with a tolerance.",
    "last token to first": " The only leak is from the LAST token to the FIRST query: change every "
    "j and compare all t < j.",
    "second token to first": " The only leak is from token 1 to query 0: change every later "
    "token j (1 .. T - 1), not only the last one.",
    "strictly past": " This mask is wrong (no token sees itself) but causal: nothing from the "
    "future enters.",
}


class _Recorder:
    """An attention layer that remembers what the student's detector feeds it."""

    def __init__(self, attend) -> None:
        self.attend, self.inputs, self.first = attend, [], None

    def __call__(self, x):
        if self.first is None:
            self.first = x  # the object itself: a later in-place change shows
        self.inputs.append(x.detach().clone())
        return self.attend(x)


def _leak_diagnosis(answers: dict, records: dict, T: int, C: int) -> str:
    wrong = [m for m, got in answers.items() if got != LEAK_MODES[m]]
    if len(wrong) == len(answers):
        return (
            "your detector is inverted: it returns True when nothing leaks and False when the "
            "future leaks; return True when an earlier output changed"
        )
    rec = records[wrong[0]]
    base = rec.inputs[0] if rec.inputs else None
    if rec.first is not None and base is not None and not torch.equal(rec.first, base):
        return (
            "your detector changes x itself (changed = x, then changed[j] = ...): every test "
            "must start from the same input, so copy it with x.clone()"
        )
    changed = set()
    for x in rec.inputs[1:]:
        if x.shape == base.shape:
            changed |= set((x != base).any(dim=-1).nonzero().flatten().tolist())
    if len(rec.inputs) > 1 and not changed:
        return (
            "your detector never changed a token: every input it passed to attend equals the "
            "first one; set changed[j] to new random values"
        )
    mode = wrong[0]
    if not LEAK_MODES[mode]:
        return (
            f"the causal layer '{mode}' does not leak, yet your detector said True: changing "
            f"token j may change outputs j, j + 1, ... without any leak, so compare only the "
            f"outputs before the changed token, out[:j] (and change tokens j >= 1)"
        )
    if changed and changed <= {T - 1} and mode == "second token to first":
        return (
            "attention with mask variant 'second token to first' leaks, yet your detector "
            "said False: you change only the last token; change every later token j (1 .. T - 1)"
        )
    return (
        f"attention with mask variant '{mode}' (T={T}, C={C}) leaks, yet your detector said "
        f"False.{_LEAK_HINTS.get(mode, '')}"
    )


def check_future_leaks(future_leaks, hidden: bool = False) -> None:
    """Check ``future_leaks(attend, T, C)`` on attention layers that do and do not leak the future."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_future_leaks",
        future_leaks,
        (),
        hidden,
        lambda e, c: _signature_hint(e, "future_leaks(attend, T, C, seed=0)"),
    )
    sizes, seed = ([(2, 3), (12, 8)], 5) if hidden else ([(5, 4), (8, 6)], 0)
    for T, C in sizes:
        answers, records = {}, {}
        for mode in LEAK_MODES:
            records[mode] = _Recorder(attention_layer(T, C, mode, seed))
            case = Case(f"mask variant '{mode}'", (records[mode], T, C), {}, f"T={T}, C={C}")
            got = run.call(case)
            if not isinstance(got, bool):
                tip = " (convert with bool(...) or .item())" if TRUSTED.is_tensor(got) else ""
                run.fail(f"return True or False, but received {kind_of(got)}{tip}.", case)
            answers[mode] = got
        if any(got != LEAK_MODES[m] for m, got in answers.items()):
            run.fail(_leak_diagnosis(answers, records, T, C), Case(f"T={T}, C={C}"))
    run.passed()


# ---------------------------------------------------------------------------------------------
# padding and truncating a batch of token ids
def _pad_batches(hidden: bool) -> list[tuple[list[list[int]], int, int]]:
    g = generator(3 if hidden else 0)
    batches = [
        ([[5, 6, 7], [8], [9, 10]], 8, 0),
        ([[1, 2, 3, 4, 5], [6, 7]], 3, 0),
        ([[4], [], [2, 2]], 5, -1),
        ([[3, 3, 3]], 3, 99),
    ]
    lengths = torch.randint(0, 12, (6,), generator=g).tolist()
    batches.append(([torch.randint(1, 50, (n,), generator=g).tolist() for n in lengths], 7, 0))
    return batches


def check_pad_and_truncate(pad_and_truncate, hidden: bool = False) -> None:
    """Check ``pad_and_truncate(sequences, max_len, pad_id) -> (ids, lengths)`` against a direct
    construction, and that ``max_len < 1`` raises a ValueError."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_pad_and_truncate",
        pad_and_truncate,
        (),
        hidden,
        lambda e, c: _signature_hint(e, "pad_and_truncate(sequences, max_len, pad_id)"),
    )
    batches = _pad_batches(hidden)
    for seqs, max_len, pad_id in batches:
        kept = [s[:max_len] for s in seqs]
        B, L = len(seqs), max(len(s) for s in kept)
        want_ids = torch.tensor(
            [s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long
        ).reshape(B, L)
        left_padded = torch.tensor(
            [[pad_id] * (L - len(s)) + s for s in kept], dtype=torch.long
        ).reshape(B, L)
        want_lengths = torch.tensor([len(s) for s in kept], dtype=torch.long)
        case = Case(
            f"max_len={max_len}, pad_id={pad_id}",
            ([list(s) for s in seqs], max_len, pad_id),
            {},
            f"sequences={seqs}, max_len={max_len}, pad_id={pad_id}",
        )
        result = run.call(case)
        if result is None:
            run.fail("your function returned None: return the tuple (ids, lengths).", case)
        if not isinstance(result, tuple) or len(result) != 2:
            run.fail(
                f"return the tuple (ids, lengths), but your function returned {kind_of(result)}.",
                case,
            )
        ids, lengths = result
        if (
            TRUSTED.is_tensor(ids)
            and TRUSTED.is_tensor(lengths)
            and ids.dim() == 1
            and lengths.dim() == 2
        ):
            run.fail("the tuple is in the wrong order: return (ids, lengths).", case)
        if not TRUSTED.is_tensor(ids) or ids.dtype != torch.long:
            run.fail(
                f"ids must be a torch.long tensor, but yours is "
                f"{getattr(ids, 'dtype', None) or kind_of(ids)}.",
                case,
            )
        if not TRUSTED.is_tensor(lengths) or lengths.dtype != torch.long:
            run.fail(
                f"lengths must be a torch.long tensor, but yours is "
                f"{getattr(lengths, 'dtype', None) or kind_of(lengths)}.",
                case,
            )
        short = [s[: max_len - 1] if len(s) >= max_len else s for s in seqs]
        L_short = max(len(s) for s in short)
        if tuple(ids.shape) != tuple(want_ids.shape):
            hint = ""
            if ids.shape[-1:] == (max_len,):
                hint = " Pad to the longest sequence after truncation, not to max_len."
            elif tuple(ids.shape) == (B, L_short):
                hint = " You truncate to max_len - 1 tokens; keep max_len (s[:max_len])."
            run.fail(
                f"ids should have shape {tuple(want_ids.shape)}, but yours has "
                f"{tuple(ids.shape)}.{hint}",
                case,
                named=bool(hint),
            )
        if tuple(lengths.shape) != tuple(want_lengths.shape) or not TRUSTED.equal(
            lengths, want_lengths
        ):
            hint = ""
            if lengths.tolist() == [len(s) for s in seqs]:
                hint = " Those are the lengths before truncation; count after it."
            run.fail(
                f"lengths should be {want_lengths.tolist()} (after truncation), but received "
                f"{lengths.tolist()}.{hint}",
                case,
                named=bool(hint),
            )
        if not TRUSTED.equal(ids, want_ids):
            kept_last = [s[-max_len:] if len(s) > max_len else s for s in seqs]
            last = torch.tensor(
                [s + [pad_id] * (L - len(s)) for s in kept_last], dtype=torch.long
            ).reshape(B, L)
            hint = ""
            if TRUSTED.equal(ids, left_padded):
                hint = " You padded on the left; pad at the end."
            elif TRUSTED.equal(ids, last):
                hint = " You kept the last max_len tokens; keep the first ones, s[:max_len]."
            run.fail(
                f"ids should be {want_ids.tolist()}, but received {ids.tolist()}.{hint}",
                case,
                named=bool(hint),
            )
    for max_len in [-3] + ([0] if hidden else []):
        case = Case(
            f"max_len={max_len}",
            ([[1, 2]], max_len, 0),
            {},
            f"sequences=[[1, 2]], max_len={max_len}",
        )
        run.expect_raises(case, ValueError, f"max_len={max_len}", (str(max_len),))
    run.passed()
