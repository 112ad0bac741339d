"""Evidence for notebook 6's input checks (the sentence pair, the embeddings).

Pair: the right tensors in another order, one special id hard-coded, [CLS] / [SEP] out of place,
rows not padded to the longest pair. Embeddings: reruns with one input changed (an x that does
not move means the input is ignored), with the sequences of the batch reordered (an x that
changes means something is indexed by the batch position), and a size error read against T and
max_len.

About 300 lines, kept whole: the two exercises' evidence reads the same BERT inputs and is tried in
one order.
"""

from __future__ import annotations

import itertools
import re

import torch

from transformer_lab.checks.engine.core import Case, Runner, _clone
from transformer_lab.checks.engine.guards import TRUSTED

__all__ = [
    "outside_norm",
    "one_id_fixed",
    "pair_order",
    "segment_values",
    "layout_problem",
    "tuple_order",
    "length_hint",
    "ignored_input",
    "batch_dependence",
    "position_error_hint",
    "position_rows",
    "padding_only",
    "norm_calls",
]


def one_id_fixed(assemble, pairs, ids: tuple[int, int, int], value, index: int) -> str | None:
    """One of cls_id / sep_id / pad_id replaced by a constant reproduces ``value``?"""
    for k, arg in enumerate(("cls_id", "sep_id", "pad_id")):
        for constant in (0, 1, 2, 3, 100, 101, 102, 103):
            if constant == ids[k]:
                continue
            fixed = list(ids)
            fixed[k] = constant
            variant = assemble(pairs, *fixed)[index]
            if variant.shape == value.shape and TRUSTED.equal(variant, value.long()):
                return (
                    f"{arg} is hard-coded as {constant}; use the argument ({arg}={ids[k]} in "
                    f"this case)"
                )
    return None


def pair_order(assemble, pairs, ids: tuple[int, int, int], value, index: int) -> str | None:
    """The pairs read the other way round, (b, a), reproduce ``value``?"""
    if all(list(a) == list(b) for a, b in pairs):
        return None
    variant = assemble([(b, a) for a, b in pairs], *ids)[index]
    if variant.shape == value.shape and TRUSTED.equal(variant, value.long()):
        return (
            "the two sentences are in the wrong order: each pair is (a, b) and the layout is "
            "[CLS] a [SEP] b [SEP], the first sentence first"
        )
    return None


def segment_values(value, want: torch.Tensor) -> str | None:
    """token_type_ids outside {0, 1}: segments numbered from 1, or counted per sentence/row."""
    if value.shape != want.shape:
        return None
    got = value.long()
    extra = sorted(set(got.unique().tolist()) - {0, 1})
    if not extra:
        return None
    shifted = TRUSTED.equal(got[got != 0] - 1, want[got != 0]) if bool((got != 0).any()) else False
    how = "; yours are numbered from 1 (1 and 2)" if shifted else f"; yours has {extra}"
    return (
        "token_type_ids are 0 (for [CLS] a [SEP]) and 1 (for b [SEP]): BERT's segment table has "
        f"two rows{how}"
    )


def layout_problem(ids: torch.Tensor, want: torch.Tensor, cls_id: int, sep_id: int) -> str | None:
    """The first structural problem of input_ids, row by row: [CLS] first, two [SEP], padding
    at the end."""
    for r, (row, ref) in enumerate(zip(ids.tolist(), want.tolist())):
        if row[0] != cls_id:
            where = [i for i, t in enumerate(row) if t == cls_id]
            at = f"yours has it at position {where[0]}" if where else "yours has no [CLS]"
            return f"[CLS] must be the first token (position 0) of every row; in row {r} {at}"
        n_sep, want_sep = row.count(sep_id), ref.count(sep_id)
        if n_sep != want_sep:
            return (
                f"row {r} has {n_sep} [SEP] token(s); [CLS] a [SEP] b [SEP] has {want_sep}: one "
                f"after each sentence"
            )
    return None


def tuple_order(run: Runner, case: Case, result, expected, names) -> None:
    """The right tensors in another order: name the order."""

    def same(a, b) -> bool:
        return TRUSTED.is_tensor(a) and a.shape == b.shape and TRUSTED.equal(a.long(), b)

    if all(same(v, w) for v, w in zip(result, expected)):
        return
    for perm in itertools.permutations(range(len(expected))):
        if list(perm) != list(range(len(expected))) and all(
            same(result[i], expected[j]) for i, j in enumerate(perm)
        ):
            yours = ", ".join(names[j] for j in perm)
            run.fail(
                f"the tuple is in the wrong order: you return ({yours}); return "
                f"({', '.join(names)}).",
                case,
            )


def length_hint(pairs, value, pad_id: int | None = None) -> str | None:
    if not (TRUSTED.is_tensor(value) and value.dim() == 2):
        return None
    longest = max(len(a) + len(b) + 3 for a, b in pairs)
    if pad_id is not None and value.shape[0] == len(pairs):  # input_ids: count each row's tokens
        for r, (row, (a, b)) in enumerate(zip(value.tolist(), pairs)):
            n, want = sum(t != pad_id for t in row), len(a) + len(b) + 3
            if n != min(want, len(row)):  # not the right row cut or padded to a wrong width
                return (
                    f"row {r} has {n} tokens besides padding, but [CLS] a [SEP] b [SEP] has "
                    f"len(a) + len(b) + 3 = {want}: "
                    + ("a token too many" if n > want else "a token missing")
                )
    if value.shape[0] == len(pairs) and value.shape[1] != longest:
        return (
            f"your rows have length {value.shape[1]}, but the longest assembled pair has "
            f"len(a) + len(b) + 3 = {longest} tokens: pad every row to the longest pair of the batch"
        )
    return None


def ignored_input(run: Runner, case: Case, x: torch.Tensor) -> str | None:
    """Rerun with one input changed: an x that does not move while the reference does means the
    input is ignored (or replaced by something fixed)."""
    ids, segs, mask, tok, pos, seg, norm = case.args
    T = ids.shape[1]
    for what, index, changed in (
        ("token_type_ids (the segment embeddings)", 1, 1 - segs),
        ("input_ids (the token embeddings)", 0, (ids + 1) % tok.shape[0]),
    ):
        args = list(_clone(case.args))
        args[index] = changed
        want = norm(tok[args[0]] + pos[:T] + seg[args[1]])
        if run.close(want, case.data["x"], 1e-5, 1e-5):
            continue
        out, error, _ = run.attempt(tuple(args), {})
        if error is None and isinstance(out, tuple) and len(out) == 2:
            new = out[0]
            if (
                TRUSTED.is_tensor(new)
                and new.shape == x.shape
                and run.close(new.detach(), x, 1e-6, 1e-6)
            ):
                return (
                    f"changing {what.split(' ')[0]} does not change your x: {what} are ignored "
                    f"or indexed by something else; use seg_table[token_type_ids] and "
                    f"tok_table[input_ids]"
                )
    return None


def batch_dependence(run: Runner, case: Case, x: torch.Tensor) -> str | None:
    """Reverse the order of the sequences: each sequence's x must move with it, unchanged."""
    ids = case.args[0]
    if ids.shape[0] < 2:
        return None
    args = list(_clone(case.args))
    for i in range(3):
        args[i] = args[i].flip(0)
    out, error, _ = run.attempt(tuple(args), {})
    if error is None and isinstance(out, tuple) and len(out) == 2 and TRUSTED.is_tensor(out[0]):
        new = out[0].detach()
        if new.shape == x.shape and not run.close(new.flip(0), x, 1e-6, 1e-6):
            return (
                "reordering the sequences of the batch changes each sequence's x: something is "
                "indexed by the batch position (positions are the token index t along dim 1, "
                "pos_table[:T], the same for every sequence)"
            )
    return None


def position_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    ids, pos = case.args[0], case.args[4]
    numbers = {int(n) for n in re.findall(r"\d+", text)}
    if "must match the size" in text and {ids.shape[1], pos.shape[0]} <= numbers:
        return (
            f"pos_table has max_len = {pos.shape[0]} rows, one per possible position, but the "
            f"input has T = {ids.shape[1]} tokens: add only the first T rows, pos_table[:T]"
        )
    B, T, C = ids.shape[0], ids.shape[1], pos.shape[1]
    dims = re.findall(r"size of tensor [ab] \((\d+)\)", text)
    if "must match the size" in text and sorted(int(d) for d in dims) == sorted((B, T)):
        if B not in (T, C, pos.shape[0]):
            return (
                f"a tensor with T = {T} rows meets the batch axis (B = {B}): pos_table[:T] is "
                "(T, C) and broadcasts over (B, T, C) as it is (or as pos_table[:T][None]); an "
                "extra axis in the middle, [:, None], or a transpose puts the positions on the "
                "batch axis"
            )
    return ""


def padding_only(case: Case, x: torch.Tensor, want: torch.Tensor) -> str | None:
    """Right at the real tokens, wrong only at padding positions."""
    real = case.args[2].bool()  # (B, T) attention_mask
    if real.all() or real.shape != x.shape[:2]:
        return None
    close = torch.isclose(x, want, atol=1e-5, rtol=1e-5).all(dim=-1)  # (B, T)
    if close[real].all() and not close[~real].all():
        return (
            "x is right at the real tokens but differs at the padding positions: padding gets "
            "the same sum as any token, tok_table[input_ids] + pos_table[t] + "
            "seg_table[token_type_ids] (the mask, not x, hides it)"
        )
    return None


def norm_calls(run: Runner, case: Case) -> str | None:
    """How many times is ``norm`` called? Once, on the sum."""
    norm = case.args[6]
    calls = []
    hook = norm.register_forward_hook(lambda m, i, o: calls.append(1))
    try:
        _, error, _ = run.attempt(_clone(case.args), {})
    finally:
        hook.remove()
    if error is None and len(calls) > 1:
        return f"norm is called {len(calls)} times; apply it once, to the sum tok + pos + seg"
    return None


def position_rows(run: Runner, case: Case) -> str | None:
    """Run with zero token and segment tables, no norm, and position rows that say their index:
    which row of pos_table does each token get?"""
    ids, segs, mask, tok, pos, seg, _ = case.args
    T = ids.shape[1]
    rows = torch.arange(1, pos.shape[0] + 1, dtype=pos.dtype)[:, None].expand_as(pos).clone()
    args = (
        ids.clone(), segs.clone(), mask.clone(), torch.zeros_like(tok), rows, torch.zeros_like(seg),
        torch.nn.Identity(),
    )  # fmt: skip
    out, error, _ = run.attempt(args, {})
    if error is not None or not isinstance(out, tuple) or not TRUSTED.is_tensor(out[0]):
        return None
    x = out[0].detach()
    if x.shape != (*ids.shape, pos.shape[1]) or not TRUSTED.equal(x, x[..., :1].expand_as(x)):
        return None
    used = x[..., 0].round().long() - 1  # (B, T): the row each token got
    if (used < 0).any():
        return None
    if not TRUSTED.equal(used, used[:1].expand_as(used)):
        b = next(b for b in range(1, used.shape[0]) if not TRUSTED.equal(used[b], used[0]))
        return (
            f"the position rows differ between sequences: sequence 0 gets rows "
            f"{used[0].tolist()} of pos_table, sequence {b} gets {used[b].tolist()}; token t "
            f"gets row t in every sequence, padding included: pos_table[:T]"
        )
    used = used[0].tolist()
    if used == list(range(T)):
        return None
    return (
        f"the tokens at positions 0..{T - 1} get the rows {used} of pos_table; token t must get "
        f"row t: pos_table[:T]"
    )


def outside_norm(run: Runner, case: Case) -> str | None:
    """``norm`` called once, on part of the sum, with the rest added to its output: which
    embeddings are added after the norm? Read from the norm's input and output (hooked), the
    same on a second input (the tables rescaled)."""
    found = {_outside_norm(run, case.args, scale) for scale in (1.0, -0.5)}
    return found.pop() if len(found) == 1 else None


def _outside_norm(run: Runner, args: tuple, scale: float) -> str | None:
    ids, segs, mask, tok, pos, seg, norm = args
    tok, pos, seg = tok * scale, pos * (2 * scale), seg * (-scale)
    calls = []
    hook = norm.register_forward_hook(lambda m, i, o: calls.append((i[0].detach(), o.detach())))
    try:
        out, error, _ = run.attempt(_clone((ids, segs, mask, tok, pos, seg, norm)), {})
    finally:
        hook.remove()
    if error is not None or len(calls) != 1 or not isinstance(out, tuple) or not out:
        return None
    x, (n_in, n_out) = out[0], calls[0]
    if not TRUSTED.is_tensor(x) or n_in.shape != x.shape:
        return None
    T = ids.shape[1]
    parts = {"token": tok[ids], "position": pos[:T].expand_as(x), "segment": seg[segs]}
    close = lambda a, b: torch.allclose(a, b, atol=1e-5, rtol=1e-5)  # noqa: E731
    for k in (1, 2):
        for inside in itertools.combinations(parts, k):
            after = [name for name in parts if name not in inside]
            if close(n_in, sum(parts[n] for n in inside)) and close(
                x.detach(), n_out + sum(parts[n] for n in after)
            ):
                return (
                    f"the {' and '.join(after)} embeddings are added after the norm; BERT "
                    "normalises the whole sum: norm(tok + pos + seg)"
                )
    return None
