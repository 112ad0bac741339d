"""Holdout mistakes: wrong implementations written from the notebook's text and solution alone,
by someone who had not read the checks, and never used to tune them.

They measure what the catalogues cannot: how far the checks' diagnoses carry to mistakes their
authors did not anticipate. Each notebook module (``nb05.py`` ...) fills a list with
:func:`collector`; ``python -m tests.holdout.report`` prints the outcome of every entry.

Outcomes (one per mistake):
  named       the check fails and its verdict contains every required word ("a|b" = a or b);
  generic     the check fails with an observation that names no mistake;
  misleading  the check fails naming a mistake, but not this one (worse than no name);
  passed      the check passes a wrong implementation.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass

from transformer_lab import checks


@dataclass(frozen=True)
class Mistake:
    notebook: str  # "05"
    exercise: str  # key of transformer_lab.checks.EXERCISES
    label: str  # the function's name: what the student did
    fn: Callable
    words: tuple[str, ...]  # what the verdict must contain; "a|b" accepts either


def collector(mistakes: list[Mistake], notebook: str):
    """``wrong = collector(MISTAKES, "05")``; then ``@wrong("layer_norm", "variance|var")``."""

    def wrong(exercise: str, *words: str):
        if exercise not in checks.EXERCISES:
            raise KeyError(f"{exercise!r} is not an exercise in transformer_lab.checks.EXERCISES")

        def register(fn: Callable) -> Callable:
            mistakes.append(Mistake(notebook, exercise, fn.__name__, fn, words))
            return fn

        return register

    return wrong


def classify(mistake: Mistake) -> tuple[str, str]:
    """(outcome, message) of the exercise's check on ``mistake.fn``, visible cases then hidden."""
    check = checks.EXERCISES[mistake.exercise][0]
    message, named = None, None
    for hidden in (False, True):
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check(mistake.fn, hidden=hidden)
        except AssertionError as exc:
            message, named = str(exc), getattr(exc, "named", None)
            break
        except Exception as exc:  # noqa: BLE001 - a check that crashes misleads the student
            return "misleading", f"the check itself crashed: {exc!r}"
    if message is None:
        return "passed", ""
    # The words must be in the verdict: not in the check's name in front of it, not in the inputs.
    verdict = message.split(" [case ")[0]
    prefix = f"{check.__name__}: "
    verdict = (verdict[len(prefix) :] if verdict.startswith(prefix) else verdict).lower()
    if all(any(alt.lower() in verdict for alt in w.split("|")) for w in mistake.words):
        return "named", message
    return ("misleading" if named else "generic"), message
