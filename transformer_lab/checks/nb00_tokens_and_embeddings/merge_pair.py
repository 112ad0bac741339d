"""Check for notebook 00, exercise 2: merging one pair of ids.

    merge_pair(ids, pair, new_id) -> list of ids      left to right, no overlap, a new list

Wrong answers are compared with a catalogue of realistic mistakes computed on the same inputs (a
merge that does not skip, right to left, the first occurrence only, ...).
"""

from __future__ import annotations

from collections.abc import Callable

from transformer_lab import bpe as _bpe
from transformer_lab import bpe as _ref
from transformer_lab.checks.engine.core import Case, generator, kind_of
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb00_tokens_and_embeddings.bpe import is_int_list
from transformer_lab.checks.nb00_tokens_and_embeddings.merge_mistakes import (
    STRING_MERGE,
    string_merge,
)
from transformer_lab.checks.nb00_tokens_and_embeddings.runner import WatchedRunner
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_merge_pair"]


_MERGE_PAIR = _ref.merge_pair
ONE_SIDE = (
    "a match needs both tokens of the pair: ids[i] == pair[0] and ids[i + 1] == pair[1]; "
    "yours tests only one of them"
)


# ---------------------------------------------------------------------------------------------
# merge_pair
def _merge_variants(ids: list, pair: tuple, new_id: int) -> list[tuple[str, Callable[[], list]]]:
    a, b = pair

    def no_skip() -> list:
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(new_id)
                if i + 2 < len(ids) and ids[i + 1] == ids[i + 2] == b:
                    i += 1  # the second token is used again
                else:
                    i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    def overlap_both() -> list:  # every position that matches becomes new_id, tokens doubled
        out = []
        for i in range(len(ids)):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(new_id)
            elif i > 0 and (ids[i - 1], ids[i]) == pair:
                continue
            else:
                out.append(ids[i])
        return out

    def right_to_left() -> list:
        return _MERGE_PAIR(ids[::-1], (b, a), new_id)[::-1]

    def first_only() -> list:
        for i in range(len(ids) - 1):
            if (ids[i], ids[i + 1]) == pair:
                return ids[:i] + [new_id] + ids[i + 2 :]
        return list(ids)

    def last_lost() -> list:
        out = _MERGE_PAIR(ids, pair, new_id)
        ends_in_pair = len(ids) >= 2 and (ids[-2], ids[-1]) == pair and out[-1] == new_id
        return out if ends_in_pair else out[:-1]

    def either_order() -> list:
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) in (pair, (b, a)):
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    def kept_both() -> list:
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out += [new_id, ids[i + 1]]
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    def one_side(side: int) -> list:  # a match tested on one token of the pair only
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and ids[i + side] == pair[side]:
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    overlap = (
        "overlapping occurrences: in 'a a a' only the first (a, a) is merged, giving "
        "[aa, a]; go left to right and skip both tokens of a merged pair (i += 2)"
    )
    return [
        (overlap, no_skip),
        (overlap, overlap_both),
        (
            "you merge from right to left: 'a a a' must become [aa, a] (the leftmost pair "
            "first), not [a, aa]",
            right_to_left,
        ),
        ("only the first occurrence is merged: replace every occurrence of the pair", first_only),
        ("the last token is lost when it is not part of a merged pair", last_lost),
        (
            "you also merge the pair in the other order (right, left): only (left, right) "
            "in this order is replaced",
            either_order,
        ),
        (
            "after a match, skip both tokens of the pair (i += 2): your output keeps the "
            "pair's second token after new_id",
            kept_both,
        ),
        (ONE_SIDE, lambda: one_side(0)),
        (ONE_SIDE, lambda: one_side(1)),
        (STRING_MERGE, lambda: string_merge(ids, pair, new_id)),
        (STRING_MERGE, lambda: string_merge(ids, pair, new_id, padded=True)),
    ]


def _merge_cases(hidden: bool) -> list[Case]:
    g = generator(7400 if hidden else 400)
    specs = [
        # ids whose digits overlap ('1 2' inside '11 2' and '1 22') and a pair repeated at once
        ("ids 1, 11, 2, 22", [1, 2, 1, 2, 5, 11, 2, 1, 22, 1, 2], (1, 2), 256),
        ("two occurrences", [1, 2, 3, 1, 2], (1, 2), 256),
        ("the pair in the other order", [2, 1], (1, 2), 256),
        ("overlapping 'aaa'", [97, 97, 97], (97, 97), 256),
        ("overlapping 'aaaa'", [97, 97, 97, 97, 98], (97, 97), 300),
        ("pair absent", [5, 6, 7], (6, 5), 256),
        ("pair at the end, order matters", [2, 1, 4, 1, 2], (1, 2), 257),
        ("one token", [9], (9, 9), 256),
        ("empty", [], (1, 2), 256),
        ("merged ids", [256, 101, 101, 101, 256, 101], (256, 101), 258),
    ]
    import torch

    n = 14 if hidden else 12
    ids = torch.randint(3, (n,), generator=g).add(97).tolist()
    specs.append(
        ("random ids", ids, (ids[0], ids[1]), 256 + int(torch.randint(9, (1,), generator=g)))
    )
    if hidden:
        ids = torch.randint(2, (17,), generator=g).add(100).tolist()
        specs.append(("random ids 2", ids, (ids[1], ids[2]), 270))
    return [
        Case(name, (list(ids), pair, new_id), {}, f"ids={ids}, pair={pair}, new_id={new_id}")
        for name, ids, pair, new_id in specs
    ]


def _merge_error_hint(exc: BaseException, case: Case) -> str:
    if isinstance(exc, IndexError):
        return (
            "ids[i + 1] does not exist at the last position: look for the pair only while "
            "i + 1 < len(ids), and keep the last token as it is"
        )
    return _signature_hint(exc, "merge_pair(ids, pair, new_id)")


def check_merge_pair(merge_pair, hidden: bool = False) -> None:
    """Check ``merge_pair(ids, pair, new_id) -> list`` against the reference."""
    __tracebackhide__ = True
    run = WatchedRunner(
        "check_merge_pair",
        merge_pair,
        [Forbidden("transformer_lab.bpe.merge_pair", function=_MERGE_PAIR)],
        hidden,
        _merge_error_hint,
        function="merge_pair",
        fresh=(0,),
    )
    for case in _merge_cases(hidden):
        ids, pair, new_id = case.args
        want = _MERGE_PAIR(ids, pair, new_id)
        got = run.call(case)
        if got is None:
            run.fail("your function returned None: return the new list of ids.", case)
        if not is_int_list(got):
            if isinstance(got, list) and any(tuple(pair) == t for t in got if type(t) is tuple):
                run.fail(
                    "your list holds the pair itself, a tuple, where the merged token goes: "
                    "append the new id, new_id, in its place.",
                    case,
                )
            if isinstance(got, (tuple, list)) or hasattr(got, "tolist"):
                run.fail(f"return a list of Python ints, but yours is {kind_of(got)}.", case)
            run.fail(f"return a list of ids, but yours is {kind_of(got)}.", case)
        if got == want:
            continue
        for message, variant in _merge_variants(ids, pair, new_id):
            if variant() == got and variant() != want:
                run.fail(message + ".", case)
        run.fail(f"expected {want}, but received {got}.", case, named=False)
    # The caller's list must stay as it was (the runner passes copies, so probe it here).
    probe = [1, 2, 3, 1, 2]
    out, error, _ = run.attempt((probe, (1, 2), 256), {})
    if error is None and probe != [1, 2, 3, 1, 2]:
        run.fail(
            "your function changed its input `ids` in place; build and return a new list so "
            "the caller's ids stay intact."
        )
    run.passed()


register(
    Exercise(
        "merge_pair",
        "00_tokens_and_embeddings",
        "merge_pair(ids, pair, new_id) -> list of ids",
        cells=(Cell("merge_pair_tests", "merge_pair", 2),),
        check=check_merge_pair,
        reference=_bpe.merge_pair,
    )
)
