"""Check for notebook 4, exercise 4: padding and truncating a batch of token ids.

pad_and_truncate(sequences, max_len, pad_id) -> (ids (B, L) long, lengths (B,) long);
    ValueError naming max_len when max_len < 1; the caller's lists are left unchanged
"""

from __future__ import annotations

import torch

from transformer_lab.checks.engine.core import Case, Runner, generator, kind_of
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_pad_and_truncate"]


# ---------------------------------------------------------------------------------------------
# padding and truncating a batch of token ids
def _pad_batches(hidden: bool) -> list[tuple[list[list[int]], int, int]]:
    g = generator(3 if hidden else 0)
    batches = [
        ([[5, 6, 7], [8], [9, 10]], 8, 0),
        ([[1, 2, 3, 4, 5], [6, 7]], 3, 0),
        ([[4], [], [2, 2]], 5, -1),
        ([[3, 3, 3]], 3, 99),
        ([[7, 8], [], [9]], 1, 3),  # max_len = 1 is valid
        ([[0, 4, 0], [6]], 5, 0),  # a real token may equal pad_id
        ([[], [5, 6]], 4, 0),  # an empty first sequence: torch.tensor([]) is float32
    ]
    lengths = torch.randint(0, 12, (6,), generator=g).tolist()
    batches.append(([torch.randint(1, 50, (n,), generator=g).tolist() for n in lengths], 7, 0))
    return batches


def check_pad_and_truncate(pad_and_truncate, hidden: bool = False) -> None:
    """Check ``pad_and_truncate(sequences, max_len, pad_id) -> (ids, lengths)`` against a direct
    construction, and that ``max_len < 1`` raises a ValueError."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message

    def error_hint(exc: BaseException, case: Case) -> str:
        if isinstance(exc, ValueError) and case.args[1] >= 1:
            return (
                f"max_len={case.args[1]} is valid (at least 1): raise the ValueError only when "
                f"max_len < 1"
            )
        return _signature_hint(exc, "pad_and_truncate(sequences, max_len, pad_id)")

    run = Runner("check_pad_and_truncate", pad_and_truncate, (), hidden, error_hint)
    for seqs, max_len, pad_id in _pad_batches(hidden):
        _check_batch(run, seqs, max_len, pad_id)
    for max_len in [-3] + ([0] if hidden else []):
        case = Case(
            f"max_len={max_len}",
            ([[1, 2]], max_len, 0),
            {},
            f"sequences=[[1, 2]], max_len={max_len}",
        )
        run.expect_raises(case, ValueError, f"max_len={max_len}", (str(max_len),))
    _check_batch(run, [[], []], 2, 1)  # nothing but empty sequences: ids is (B, 0)
    run.passed()


def _check_batch(run: Runner, seqs: list[list[int]], max_len: int, pad_id: int) -> None:
    """One batch: ids and lengths compared with the batch padded in plain Python."""
    __tracebackhide__ = True
    kept = [s[:max_len] for s in seqs]
    B, L = len(seqs), max(len(s) for s in kept)
    want_ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long).reshape(
        B, L
    )
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
        empty = (
            " An empty sequence (length 0) gives torch.tensor([]), which is float32: "
            "create every tensor with dtype=torch.long."
            if TRUSTED.is_tensor(ids) and ids.is_floating_point() and any(not s for s in seqs)
            else ""
        )
        run.fail(
            f"ids must be a torch.long tensor, but yours is "
            f"{getattr(ids, 'dtype', None) or kind_of(ids)}.{empty}",
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
        elif (
            tuple(ids.shape)
            == (B, max(len(s[: max_len + 1]) for s in seqs))
            != (
                B,
                max(len(s) for s in seqs),
            )
        ):
            hint = " You keep max_len + 1 tokens (one too many); keep max_len (s[:max_len])."
        elif tuple(ids.shape) == (B, min(len(seqs[0]), max_len)):
            hint = (
                " Every row is cut to the first sequence's length: the lengths of the other "
                "rows were ignored; L is the longest length of any row after truncation."
            )
        elif L == 0:
            hint = (
                " Every sequence is empty, so L = 0 and ids is (B, 0): no column at all (do not "
                "force at least one, e.g. with max(..., 1))."
            )
        elif tuple(ids.shape) == (B, max(len(s) for s in seqs)):
            hint = (
                " You pad to the longest sequence before truncation; L is the longest "
                "length after truncating to max_len."
            )
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
        elif sorted(lengths.tolist()) == sorted(want_lengths.tolist()):
            hint = (
                " The same lengths in another order (the batch sorted by length?): keep the "
                "rows in the order of sequences, row i for sequences[i]."
            )
        elif lengths.tolist() == (want_ids != pad_id).sum(dim=1).tolist():
            hint = (
                f" You counted the entries different from pad_id={pad_id}, but a real token "
                f"may equal pad_id: take the lengths of the truncated sequences."
            )
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
        elif sorted(ids.tolist()) == sorted(want_ids.tolist()):
            hint = (
                " The right rows in another order (the batch sorted?): keep row i for sequences[i]."
            )
        elif TRUSTED.equal(ids, last):
            hint = " You kept the last max_len tokens; keep the first ones, s[:max_len]."
        else:
            padded = want_ids == pad_id  # positions that must hold pad_id
            values = ids[padded].unique() if padded.any() else ids[padded]
            same_elsewhere = TRUSTED.equal(ids[~padded], want_ids[~padded])
            if same_elsewhere and len(values) == 1 and values.item() != pad_id:
                hint = f" The padding holds {values.item()}, not pad_id={pad_id}: pad with pad_id."
        run.fail(
            f"ids should be {want_ids.tolist()}, but received {ids.tolist()}.{hint}",
            case,
            named=bool(hint),
        )


register(
    Exercise(
        "pad_and_truncate",
        "04_masking_and_cross_attention",
        "pad_and_truncate(sequences, max_len, pad_id) -> (ids, lengths)",
        cells=(Cell("pad_and_truncate_tests", "pad_and_truncate", 2),),
        check=check_pad_and_truncate,
        against="the same lists padded in plain Python",
    )
)
