"""Checks for notebook 6 (BERT), what goes in: the sentence pair and its embeddings.

Student-facing signatures:

    pair_inputs(pairs, cls_id, sep_id, pad_id) -> (input_ids, token_type_ids, attention_mask)
    bert_embeddings(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm)
        -> (x (B, T, C), mask (B, 1, 1, T) bool)

The MLM loss and the [CLS] classifier are checked in :mod:`transformer_lab.checks.nb06_bert.bert_heads`,
the masked-language-model corruption (statistically) in :mod:`transformer_lab.checks.nb06_bert.bert_masking`.
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_lab import bert_inputs as _ref
from transformer_lab import masks as _masks
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.fallback import verdict
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb06_bert.bert_evidence import (
    batch_dependence,
    ignored_input,
    layout_problem,
    length_hint,
    norm_calls,
    one_id_fixed,
    outside_norm,
    padding_only,
    pair_order,
    position_error_hint,
    position_rows,
    segment_values,
    tuple_order,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_pair_inputs", "check_bert_embeddings"]

_REF_PAIR = _ref.pair_inputs


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
# Exercise 1: [CLS] a [SEP] b [SEP]
def _assemble(pairs, cls_id, sep_id, pad_id, bug: str = ""):
    """The reference assembly with one named bug switched on (``bug=""``: correct)."""
    rows = []
    for a, b in pairs:
        a, b = list(a), list(b)
        ids = [cls_id, *a, sep_id, *b, sep_id]
        seg = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        if bug == "no final sep":
            ids, seg = ids[:-1], seg[:-1]
        elif bug == "no cls":
            ids, seg = ids[1:], seg[1:]
        elif bug == "no middle sep":
            ids = [cls_id, *a, *b, sep_id]
            seg = [0] * (len(a) + 1) + [1] * (len(b) + 1)
        elif bug == "sep in segment 1":
            seg = [0] * (len(a) + 1) + [1] * (len(b) + 2)
        elif bug == "last sep in segment 0":
            seg = seg[:-1] + [0]
        elif bug == "segments swapped":
            seg = [1 - s for s in seg]
        elif bug == "all segment 0":
            seg = [0] * len(seg)
        rows.append((ids, seg))
    L = max(len(ids) for ids, _ in rows)
    out_ids, out_seg, out_mask = [], [], []
    for ids, seg in rows:
        pad = L - len(ids)
        fill = 1 if bug == "padding in segment 1" else 0
        if bug == "left padding":
            out_ids.append([pad_id] * pad + ids)
            out_seg.append([0] * pad + seg)
            out_mask.append([0] * pad + [1] * len(ids))
        else:
            out_ids.append(ids + [pad_id] * pad)
            out_seg.append(seg + [fill] * pad)
            out_mask.append([1] * len(ids) + [0] * pad)
    t = lambda rows: torch.tensor(rows, dtype=torch.long)  # noqa: E731
    mask = t(out_mask)
    if bug == "mask reversed":
        mask = 1 - mask
    elif bug == "mask all ones":
        mask = torch.ones_like(mask)
    return t(out_ids), t(out_seg), mask


_PAIR_BUGS = {
    "no final sep": "the final [SEP] is missing: the layout is [CLS] a [SEP] b [SEP], a [SEP] after each sentence",
    "no cls": "[CLS] is missing: every input starts with [CLS] (its output vector feeds the classifier)",
    "no middle sep": "the [SEP] between the two sentences is missing: [CLS] a [SEP] b [SEP]",
    "left padding": "you padded on the left; pad at the end (right), as BERT does",
    "sep in segment 1": "the [SEP] after sentence a belongs to segment 0 (token_type_ids are 0 on "
    "[CLS] a [SEP] and 1 on b [SEP]); yours starts segment 1 one token early",
    "last sep in segment 0": "the final [SEP] belongs to segment 1 (it closes sentence b)",
    "segments swapped": "the segments are swapped: sentence a (with [CLS] and its [SEP]) is segment 0, b is 1",
    "all segment 0": "every token_type_id is 0: sentence b and its [SEP] are segment 1",
    "padding in segment 1": "padding gets token_type_id 0 (as in Hugging Face), not 1",
    "mask reversed": "the attention_mask is reversed: 1 marks real tokens, 0 padding",
    "mask all ones": "the attention_mask is all ones: padding positions must be 0",
}


def _pair_cases(hidden: bool) -> list[Case]:
    g = generator(6106 if hidden else 606)
    specs = [
        ([([5, 6], [7, 8, 9]), ([10], [11])], 1, 2, 0),
        ([([12, 13, 14], [15])], 1, 2, 0),
    ]
    n_batches = 3 if hidden else 2
    for i in range(n_batches):
        cls_id, sep_id, pad_id = (101, 102, 0) if i % 2 == 0 else (3, 4, 9)
        B = int(torch.randint(2, 6, (1,), generator=g))
        pairs = []
        for _ in range(B):
            la, lb = (int(n) for n in torch.randint(1, 7, (2,), generator=g))
            a = torch.randint(10, 90, (la,), generator=g).tolist()
            b = torch.randint(10, 90, (lb,), generator=g).tolist()
            pairs.append((a, b))
        specs.append((pairs, cls_id, sep_id, pad_id))
    cases = []
    for pairs, cls_id, sep_id, pad_id in specs:
        desc = f"{len(pairs)} pair(s), cls_id={cls_id}, sep_id={sep_id}, pad_id={pad_id}"
        case = Case(desc, ([(list(a), list(b)) for a, b in pairs], cls_id, sep_id, pad_id), {}, "")
        case.data.update(
            expected=_REF_PAIR(pairs, cls_id, sep_id, pad_id), spec=(pairs, cls_id, sep_id, pad_id)
        )
        cases.append(case)
    return cases


def check_pair_inputs(pair_inputs, hidden: bool = False) -> None:
    """Check ``pair_inputs(pairs, cls_id, sep_id, pad_id) -> (input_ids, token_type_ids, attention_mask)``."""
    __tracebackhide__ = True
    run = Runner(
        "check_pair_inputs",
        pair_inputs,
        [Forbidden("transformer_lab.bert_inputs.pair_inputs", function=_REF_PAIR)],
        hidden,
        lambda e, c: _signature_hint(e, "pair_inputs(pairs, cls_id, sep_id, pad_id)"),
    )
    names = ("input_ids", "token_type_ids", "attention_mask")
    for case in _pair_cases(hidden):
        expected = case.data["expected"]
        result = _expect_tuple(
            run, run.call(case), case, 3, "(input_ids, token_type_ids, attention_mask)"
        )
        pairs, cls_id, sep_id, pad_id = case.data["spec"]
        tuple_order(run, case, result, expected, names)
        for index, (name, value, want) in enumerate(zip(names, result, expected)):
            if TRUSTED.is_tensor(value) and value.dtype == torch.bool and name == "attention_mask":
                run.fail(
                    "attention_mask should be a torch.long tensor of 1 (real token) and 0 "
                    "(padding), as Hugging Face returns it; convert with .long()",
                    case,
                )
            if TRUSTED.is_tensor(value) and not (
                value.shape == want.shape and TRUSTED.equal(value.long(), want)
            ):
                for bug, message in _PAIR_BUGS.items():  # a known layout mistake, any shape
                    variant = _assemble(pairs, cls_id, sep_id, pad_id, bug)[index]
                    if variant.shape == value.shape and TRUSTED.equal(variant, value.long()):
                        run.fail(f"{name}: {message}.", case)
                for fixed in ((101, 102, 0), (2, 3, 0), (1, 2, 0)):  # BERT's, the course's ids
                    variant = _assemble(pairs, *fixed)[index]
                    if fixed != (cls_id, sep_id, pad_id) and TRUSTED.equal(variant, value.long()):
                        run.fail(
                            f"{name}: the special ids are hard-coded ({fixed[0]}, {fixed[1]}, "
                            f"{fixed[2]}); use the arguments cls_id={cls_id}, sep_id={sep_id} "
                            f"and pad_id={pad_id}.",
                            case,
                        )
                found = one_id_fixed(_assemble, pairs, (cls_id, sep_id, pad_id), value, index)
                found = found or pair_order(
                    _assemble, pairs, (cls_id, sep_id, pad_id), value, index
                )
                if index == 1:
                    found = found or segment_values(value, want)
                if found:
                    run.fail(f"{name}: {found}.", case)
            got = run.expect_tensor(
                value,
                case,
                want.shape,
                torch.long,
                what=name,
                shape_hint=lambda shape, v=value, i=index: length_hint(
                    pairs, v, pad_id if i == 0 else None
                ),
            )
            if not TRUSTED.equal(got, want):
                found = layout_problem(got, want, cls_id, sep_id) if index == 0 else None
                if found:
                    run.fail(f"{name}: {found}.", case)
                run.fail(
                    f"{name} should be {want.tolist()}, but yours is {got.tolist()}.",
                    case,
                    named=False,
                )
    run.passed()


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
        "pair_inputs",
        "06_bert",
        "pair_inputs(pairs, cls_id, sep_id, pad_id) -> (input_ids, token_type_ids, attention_mask)",
        cells=(Cell("pair_inputs_tests", "pair_inputs", 2),),
        check=check_pair_inputs,
        against="transformer_lab.bert_inputs.pair_inputs",
    )
)


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
