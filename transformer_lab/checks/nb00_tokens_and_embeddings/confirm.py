"""A replayed mistake is named only when it explains the student's outputs on every case, not
on one input by chance (on a word like 'aaa', skipping overlaps and keeping one word's count give
the same dict): the checks of count_pairs and encode try confirmed mistakes first.

    confirmed_variant(run, case, cases, variants, got) -> message or None
    first_variant(variants, args, got) -> the first message that gives got on args, or None
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

__all__ = ["confirmed_variant", "first_variant"]


def confirmed_variant(run, case, cases: list, variants: Callable, got: Any) -> str | None:
    """The message of a replayed mistake that gives ``got`` on ``case`` and the student's output
    on every other case too (so not by chance on one input); ``variants(*case.args)`` lists
    (message, () -> output) pairs, a message may come with several."""
    __tracebackhide__ = True

    def gives(message: str, args: tuple, out: Any) -> bool:
        for m, variant in variants(*args):
            try:
                if m == message and variant() == out:
                    return True
            except Exception:  # this mistake would crash on this input
                continue
        return False

    outputs: dict[int, tuple] = {}

    def shown(message: str, other) -> bool:
        if id(other) not in outputs:
            outputs[id(other)] = run.attempt(copy.deepcopy(other.args), dict(other.kwargs))
        out, error, calls = outputs[id(other)]
        return error is None and not calls and gives(message, other.args, out)

    for message in dict.fromkeys(m for m, _ in variants(*case.args)):
        if gives(message, case.args, got) and all(
            shown(message, c) for c in cases if c is not case
        ):
            return message
    return None


def first_variant(variants: Callable, args: tuple, got: Any) -> str | None:
    """The first replayed mistake that gives ``got`` on ``args`` (not confirmed elsewhere)."""
    for message, variant in variants(*args):
        try:
            if variant() == got:
                return message
        except Exception:  # this mistake would crash on this input: not the student's
            continue
    return None
