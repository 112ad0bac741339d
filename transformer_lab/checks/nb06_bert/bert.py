"""Check for notebook 06 (BERT): the embeddings of a sentence pair, and the hints every
BERT check shares (``_hint``, ``_signature_hint``, ``_expect_tuple``). The pair's ids are checked in
pair_inputs.py.

Student-facing signature:

    bert_embeddings(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm)
        -> (x (B, T, C), mask (B, 1, 1, T) bool)

The MLM loss and the [CLS] classifier are checked in :mod:`transformer_lab.checks.nb06_bert.bert_heads`,
the masked-language-model corruption (statistically) in :mod:`transformer_lab.checks.nb06_bert.bert_masking`.
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_lab import masks as _masks
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.fallback import verdict
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb06_bert.bert_evidence import (
    batch_dependence,
    ignored_input,
    norm_calls,
    outside_norm,
    padding_only,
    position_error_hint,
    position_rows,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_bert_embeddings"]


def _hint(signature: str, out_of_range: str = ""):
    """Error hint: the signature for a TypeError, ``out_of_range`` for an index out of bounds."""

    def hint(exc: BaseException, case: Case) -> str:
        if out_of_range and "out of bounds" in str(exc):
            return out_of_range
        return _signature_hint(exc, signature)

    return hint


def _expect_tuple(run: Runner, value, case: Case, n: int, names: str):
    if value is None:
        run.fail(f"your function returned None: return the tuple {names}.", case)
    if not isinstance(value, tuple) or len(value) != n:
        got = (
            f"a tuple of length {len(value)}" if isinstance(value, tuple) else type(value).__name__
        )
        run.fail(f"return the tuple {names}, but your function returned {got}.", case)
    return value


# ---------------------------------------------------------------------------------------------
# Exercise 2: token + position + segment embeddings, then layer norm; the padding mask
def _embedding_cases(hidden: bool) -> list[Case]:
    g = generator(6202 if hidden else 602)
    shapes = [(2, 7, 8, 30, 16), (3, 5, 12, 25, 9), (1, 4, 8, 12, 6)] + (
        [(1, 11, 16, 40, 11), (4, 3, 8, 20, 6)] if hidden else []
    )
    cases = []
    for B, T, C, V, max_len in shapes:
        tok = torch.randn(V, C, generator=g)
        pos = torch.randn(max_len, C, generator=g)
        seg = torch.randn(2, C, generator=g)
        norm = nn.LayerNorm(C)
        with torch.no_grad():
            norm.weight.copy_(1 + 0.5 * torch.randn(C, generator=g))
            norm.bias.copy_(0.5 * torch.randn(C, generator=g))
        norm.requires_grad_(False)
        lengths = torch.randint(2, T + 1, (B,), generator=g)
        lengths[0] = T  # one sequence without padding
        mask = (torch.arange(T)[None, :] < lengths[:, None]).long()  # (B, T)
        pad_id = 1 if len(cases) == 1 else 0  # padding need not be id 0
        ids = torch.randint(5, V, (B, T), generator=g) * mask + pad_id * (1 - mask)
        split = torch.clamp(lengths // 2, min=1)
        segs = ((torch.arange(T)[None, :] >= split[:, None]) & mask.bool()).long()
        case = Case(
            f"B={B}, T={T}, C={C}",
            (ids, segs, mask, tok, pos, seg, norm),
            {},
            describe_args(input_ids=ids, tok_table=tok, pos_table=pos, seg_table=seg),
        )
        x = norm(tok[ids] + pos[:T] + seg[segs])  # (B, T, C)
        case.data.update(
            x=x,
            mask=_masks.padding_mask_from_attention_mask(mask),
            parts=(ids, segs, tok, pos, seg, norm, T),
        )
        cases.append(case)
    return cases


def _embedding_mistakes(ids, segs, tok, pos, seg, norm, T) -> list[Mistake]:
    C = tok.shape[1]
    return [
        Mistake(
            "the position embeddings are missing: add pos_table[:T] (one row per position)",
            lambda: norm(tok[ids] + seg[segs]),
        ),
        Mistake(
            "the segment embeddings are missing: add seg_table[token_type_ids]",
            lambda: norm(tok[ids] + pos[:T]),
        ),
        Mistake(
            "the layer norm is missing: BERT normalises the sum, norm(tok + pos + seg)",
            lambda: tok[ids] + pos[:T] + seg[segs],
        ),
        Mistake(
            "the layer norm is applied to the token embeddings only, before adding positions "
            "and segments: normalise the sum",
            lambda: norm(tok[ids]) + pos[:T] + seg[segs],
        ),
        Mistake(
            "the position table is indexed by the token ids: positions are 0..T-1, pos_table[:T]",
            lambda: norm(tok[ids] + pos[ids] + seg[segs]),
        ),
        Mistake(
            "positions start at 1: the first token uses pos_table[0]",
            lambda: norm(tok[ids] + pos[1 : T + 1] + seg[segs]),
        ),
        Mistake(
            "the segment table is indexed by the positions: use seg_table[token_type_ids]",
            lambda: norm(tok[ids] + pos[:T] + seg[torch.arange(T).clamp(max=1)]),
        ),
        Mistake(
            "the token embeddings are scaled by sqrt(C): BERT adds the three embeddings unscaled",
            lambda: norm(tok[ids] * C**0.5 + pos[:T] + seg[segs]),
        ),
        *_by_hand_norm_mistakes(tok[ids] + pos[:T] + seg[segs], norm),
    ]


def _by_hand_norm_mistakes(x, norm) -> list[Mistake]:
    """Layer norm written by hand: without the module's learned weight (gain) and bias, with the
    unbiased variance, or over the wrong axis."""
    w, b, eps = norm.weight, norm.bias, norm.eps

    def standardise(dim: int = -1, unbiased: bool = False):
        mean = x.mean(dim, keepdim=True)
        return (x - mean) / torch.sqrt(x.var(dim, keepdim=True, unbiased=unbiased) + eps)

    use = "call the module, norm(tok + pos + seg), which applies them after normalising"
    return [
        Mistake(
            "the sum is normalised without the LayerNorm's learned weight (gain) and bias: " + use,
            lambda: standardise(),
        ),
        Mistake(
            "the sum is normalised and shifted by the bias, but not scaled by the LayerNorm's "
            "learned weight (gain): " + use,
            lambda: standardise() + b,
        ),
        Mistake(
            "the sum is normalised and scaled by the LayerNorm's weight, but its bias is not "
            "added: " + use,
            lambda: standardise() * w,
        ),
        Mistake(
            "the variance is the unbiased one (divided by C - 1): LayerNorm divides by C, "
            "unbiased=False; simplest, call the module norm(tok + pos + seg)",
            lambda: standardise(unbiased=True) * w + b,
        ),
        Mistake(
            "the normalisation uses the unbiased variance (divided by C - 1) and leaves out the "
            "LayerNorm's learned weight (gain) and bias: " + use,
            lambda: standardise(unbiased=True),
        ),
        Mistake(
            "the sum is normalised over the positions (dim 1), not over each vector's C "
            "features (the last dim): " + use,
            lambda: standardise(dim=1) * w + b,
        ),
    ]


def check_bert_embeddings(bert_embeddings, hidden: bool = False) -> None:
    """Check ``bert_embeddings(input_ids, token_type_ids, attention_mask, tok_table, pos_table,
    seg_table, norm) -> (x, mask)``: x = norm(tok + pos + seg), mask (B, 1, 1, T) bool."""
    __tracebackhide__ = True
    base_hint = _hint(
        "bert_embeddings(input_ids, token_type_ids, attention_mask, tok_table, pos_table, "
        "seg_table, norm)",
        "is the position table indexed by the token ids? pos_table holds max_len rows, one "
        "per position: take pos_table[:T]; seg_table is indexed by token_type_ids",
    )
    run = Runner(
        "check_bert_embeddings",
        bert_embeddings,
        (),
        hidden,
        lambda e, c: position_error_hint(e, c) or base_hint(e, c),
    )
    for case in _embedding_cases(hidden):
        want_x, want_mask = case.data["x"], case.data["mask"]
        B, T, C = want_x.shape
        result = _expect_tuple(run, run.call(case), case, 2, "(x, mask)")
        first, second = result
        if (
            TRUSTED.is_tensor(first)
            and TRUSTED.is_tensor(second)
            and tuple(first.shape) == tuple(want_mask.shape)
            and tuple(second.shape) == tuple(want_x.shape)
        ):
            run.fail(
                "the tuple is in the wrong order: you return (mask, x); return (x, mask).", case
            )

        def x_hint(got, T=T, C=C):
            if got[-1] in (2 * C, 3 * C):
                return "add the embeddings; concatenating them widens the vectors"
            return None

        x = run.expect_tensor(
            result[0], case, want_x.shape, torch.float32, what="x", shape_hint=x_hint
        )

        def mask_hint(got, B=B, T=T):
            if got == (B, T):
                return (
                    "that is the attention_mask itself; turn it into the (B, 1, 1, T) boolean mask "
                    "with masks.padding_mask_from_attention_mask(attention_mask)"
                )
            if got in ((B, 1, T), (B, T, 1)):
                return "padding masks are (B, 1, 1, T), so they broadcast over heads and queries"
            return None

        value = result[1]
        if (
            TRUSTED.is_tensor(value)
            and value.dtype != torch.bool
            and value.numel() == want_mask.numel()
        ):
            run.fail(
                f"mask should be boolean (True = may attend), but yours has dtype {value.dtype}: "
                "use masks.padding_mask_from_attention_mask(attention_mask)",
                case,
            )
        mask = run.expect_tensor(
            value, case, want_mask.shape, torch.bool, what="mask", shape_hint=mask_hint
        )
        if not run.close(x, want_x, atol=1e-5, rtol=1e-5):
            message = run.diagnose(x, _embedding_mistakes(*case.data["parts"]), 1e-5, 1e-5)
            message = message or ignored_input(run, case, x) or batch_dependence(run, case, x)
            message = message or padding_only(case, x, want_x) or position_rows(run, case)
            message = message or norm_calls(run, case) or outside_norm(run, case)
            message, named = verdict(message, x, want_x, "x", {"C": C})
            run.fail(message, case, named=named)
        if not TRUSTED.equal(mask, want_mask):
            if TRUSTED.equal(mask, ~want_mask):
                run.fail(
                    "mask: the polarity is reversed: True marks the real tokens (attention_mask 1)",
                    case,
                )
            ids = case.args[0]
            for pad in range(5):
                if TRUSTED.equal(mask, (ids != pad)[:, None, None, :]):
                    run.fail(
                        f"mask: yours marks the tokens whose id is not {pad}, built from input_ids; "
                        "build it from attention_mask (1 = real token), whatever the padding id is",
                        case,
                    )
            run.fail(run.mismatch(mask, want_mask, "mask"), case, named=False)
    run.passed()


register(
    Exercise(
        "bert_embeddings",
        "06_bert",
        "bert_embeddings(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm)"
        " -> (x, mask)",
        cells=(Cell("bert_embeddings_tests", "bert_embeddings", 2),),
        check=check_bert_embeddings,
        against="transformer_lab.models.BERT's embeddings",
    )
)
