"""Checks for notebook 4: the causal mask and the padding mask (True = may attend).

Student-facing signatures:

    causal_mask(T) -> (T, T) bool, True where query t may attend to key s (s <= t)
    padding_mask(lengths, S) -> (B, 1, 1, S) bool, True at the real (non-padding) keys
    future_leaks(attend, T, C, seed=0) -> bool, True if an output position depends on a later token
    pad_and_truncate(sequences, max_len, pad_id) -> (ids (B, L) long, lengths (B,) long)
"""

from __future__ import annotations

import math

import torch

from transformer_lab import attention as _attention
from transformer_lab import masks as _ref
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._guards import TRUSTED, Forbidden
from transformer_lab.checks.attention import _signature_hint

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
        out = run.expect_tensor(value, case, expected.shape, torch.bool)
        if not torch.equal(out, expected):
            run.fail(
                run.diagnose(out, _causal_mistakes(T), 0, 0) or run.mismatch(out, expected, "mask"),
                case,
            )
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
        lambda e, c: _signature_hint(e, "padding_mask(lengths, S)"),
    )
    for case in _padding_cases(hidden):
        lengths, S, expected = case.data["lengths"], case.data["S"], case.data["expected"]
        B = len(lengths)

        def hint(got: tuple, B=B, S=S) -> str | None:
            if got == (B, S):
                return "index it as mask[:, None, None, :] so it broadcasts over heads and queries"
            if got in ((B, 1, S), (B, S, 1)):
                return "the course's padding masks are (B, 1, 1, S): one row per sequence, broadcast over heads and queries"
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
        out = run.expect_tensor(value, case, expected.shape, torch.bool, shape_hint=hint)
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
            ]
            run.fail(run.diagnose(out, mistakes, 0, 0) or run.mismatch(out, expected, "mask"), case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# a leak detector: small attention layers that do and do not let the future in
def _attention_layer(T: int, C: int, mode: str, seed: int):
    """A small self-attention x -> attend(x W_q, x W_k, x W_v) with one masking variant (some leak)."""
    g = generator(seed)
    w_q, w_k, w_v = (torch.randn(C, C, generator=g) / math.sqrt(C) for _ in range(3))
    causal = _ref.causal_mask(T)  # (T, T)
    allowed = {
        "causal": causal,
        "none": torch.ones(T, T, dtype=torch.bool),
        "next token too": torch.ones(T, T, dtype=torch.bool).tril(1),
        "strictly past": torch.ones(T, T, dtype=torch.bool).tril(-1),
    }
    sdpa = _attention.scaled_dot_product_attention

    def attend(x):
        q, k, v = x @ w_q, x @ w_k, x @ w_v  # (T, C) each
        scores = q @ k.T / math.sqrt(C)  # (T, T)
        if (
            mode == "after softmax"
        ):  # zeroing weights after the softmax leaks through the denominator
            return (torch.softmax(scores, -1) * causal) @ v
        if mode == "score zero":  # a masked score of 0 still gets weight e^0
            return torch.softmax(scores.masked_fill(~causal, 0.0), -1) @ v
        if mode == "last token to first":  # one hole: query 0 may see the last key
            mask = causal.clone()
            mask[0, T - 1] = True
            return sdpa(q, k, v, mask)[0]
        if mode == "two layers":  # stacking causal layers keeps causality
            h = sdpa(q, k, v, causal)[0]
            return sdpa(h @ w_q, h @ w_k, h @ w_v, causal)[0]
        return sdpa(q, k, v, allowed[mode])[0]

    return attend


# mask variant -> does it leak?
_LEAK_CASES = {
    "causal": False,
    "none": True,
    "next token too": True,
    "strictly past": False,
    "after softmax": True,
    "score zero": True,
    "last token to first": True,
    "two layers": False,
}

_LEAK_HINTS = {
    "after softmax": " It leaks through the softmax's denominator, more weakly than the allowed keys: "
    "compare exactly, not with a loose tolerance.",
    "last token to first": " The only leak is from the LAST token to the FIRST query: change every j and "
    "compare all t < j.",
    "strictly past": " This mask is wrong (no token sees itself) but causal: nothing from the future enters.",
}


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
        for mode, leaks in _LEAK_CASES.items():
            case = Case(
                f"mask variant '{mode}'",
                (_attention_layer(T, C, mode, seed), T, C),
                {},
                f"T={T}, C={C}",
            )
            got = run.call(case)
            if not isinstance(got, bool):
                tip = " (convert with bool(...) or .item())" if TRUSTED.is_tensor(got) else ""
                run.fail(f"return True or False, but received {type(got).__name__}{tip}.", case)
            if got != leaks:
                why = (
                    "it leaks, yet your detector said False"
                    if leaks
                    else "it does not leak, yet your detector said True"
                )
                run.fail(
                    f"attention with mask variant '{mode}' (T={T}, C={C}): {why}.{_LEAK_HINTS.get(mode, '')}",
                    case,
                )
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
                f"return the tuple (ids, lengths), but your function returned a {type(result).__name__}.",
                case,
            )
        ids, lengths = result
        if not TRUSTED.is_tensor(ids) or ids.dtype != torch.long:
            run.fail(
                f"ids must be a torch.long tensor, but yours is {getattr(ids, 'dtype', type(ids).__name__)}.",
                case,
            )
        if not TRUSTED.is_tensor(lengths) or lengths.dtype != torch.long:
            run.fail(
                f"lengths must be a torch.long tensor, but yours is "
                f"{getattr(lengths, 'dtype', type(lengths).__name__)}.",
                case,
            )
        if tuple(ids.shape) != tuple(want_ids.shape):
            hint = (
                " Pad to the longest sequence after truncation, not to max_len."
                if ids.shape[-1:] == (max_len,)
                else ""
            )
            run.fail(
                f"ids should have shape {tuple(want_ids.shape)}, but yours has {tuple(ids.shape)}.{hint}",
                case,
            )
        if tuple(lengths.shape) != tuple(want_lengths.shape) or not TRUSTED.equal(
            lengths, want_lengths
        ):
            run.fail(
                f"lengths should be {want_lengths.tolist()} (after truncation), but received {lengths.tolist()}.",
                case,
            )
        if not TRUSTED.equal(ids, want_ids):
            hint = (
                " You padded on the left; pad at the end."
                if TRUSTED.equal(ids, left_padded)
                else ""
            )
            run.fail(f"ids should be {want_ids.tolist()}, but received {ids.tolist()}.{hint}", case)
    case = Case("max_len=0", ([[1, 2]], 0, 0), {}, "sequences=[[1, 2]], max_len=0, pad_id=0")
    try:
        run.call(case)
    except AssertionError as exc:
        if "raised ValueError" not in str(exc):
            raise
    else:
        run.fail("max_len=0 should raise a ValueError.", case)
    run.passed()
