"""Check for notebook 06 (BERT), what goes in: a batch of sentence pairs as BERT's three inputs.

pair_inputs(pairs, cls_id, sep_id, pad_id) -> (input_ids, token_type_ids, attention_mask)
"""

from __future__ import annotations

import torch

from transformer_lab import bert_inputs as _ref
from transformer_lab.checks.engine.core import Case, Runner, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb06_bert.bert import _expect_tuple
from transformer_lab.checks.nb06_bert.bert_evidence import (
    layout_problem,
    length_hint,
    one_id_fixed,
    pair_order,
    segment_values,
    tuple_order,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_pair_inputs"]


_REF_PAIR = _ref.pair_inputs


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
