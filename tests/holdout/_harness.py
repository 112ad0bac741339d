"""The one format for mistake catalogues and holdouts: a list of :class:`Mistake`.

Two kinds of module use it, one per notebook (and round):

* **catalogues** (``tests/catalogues/nbNN.py``): wrong implementations written by the checks'
  authors, with the words the verdict must contain, and correct variants in other styles
  (``CORRECT``); the checks are tuned on them, so they must all be named.
* **holdouts** (``tests/holdout/nbNN*.py``): wrong implementations written from the notebook's
  text and solution alone, by someone who had not read the checks, and never used to tune them.
  They measure what the catalogues cannot: how far the diagnoses carry to mistakes their authors
  did not anticipate.

Each module fills ``MISTAKES`` with :func:`collector` (or :func:`from_table`, :func:`from_source`)
and records ``NAMED_AT_LEAST``, the share named when it was last measured. One floor test
(tests/holdout/test_holdout.py) holds every module to it; one command prints the figures:
``python -m tests.holdout report [05 07b ...] [-v]``.

Outcomes (one per mistake):
  named       the check fails and its verdict contains every required word ("a|b" = a or b);
  generic     the check fails with an observation that names no mistake;
  misleading  the check fails naming a mistake, but not this one (worse than no name);
  passed      the check passes a wrong implementation.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from transformer_lab import checks


@dataclass(frozen=True)
class Mistake:
    notebook: str  # "05"
    exercise: str  # key of transformer_lab.checks.EXERCISES
    label: str  # the function's name: what the student did
    fn: Callable
    words: tuple[str, ...]  # what the verdict must contain; "a|b" accepts either; () = correct
    source: str = ""  # the function's source, for catalogues written as source text


def _known(exercise: str) -> str:
    if exercise not in checks.EXERCISES:
        raise KeyError(f"{exercise!r} is not an exercise in transformer_lab.checks.EXERCISES")
    return exercise


def collector(mistakes: list[Mistake], notebook: str):
    """``wrong = collector(MISTAKES, "05")``; then ``@wrong("layer_norm", "variance|var")``.

    With no words (``right = collector(CORRECT, "05")``; ``@right("layer_norm")``) it collects
    correct variants.
    """

    def wrong(exercise: str, *words: str):
        _known(exercise)

        def register(fn: Callable) -> Callable:
            mistakes.append(Mistake(notebook, exercise, fn.__name__, fn, words))
            return fn

        return register

    return wrong


def from_table(notebook: str, rows: Iterable[tuple]) -> list[Mistake]:
    """Mistakes from ``(check or exercise, fn[, phrase])`` rows: the phrase is one required word."""
    found = []
    for row in rows:
        target, fn, *phrase = row
        exercise = _known(target if isinstance(target, str) else target.__name__[len("check_") :])
        label = getattr(fn, "__name__", "impl")
        found.append(Mistake(notebook, exercise, label, fn, tuple(phrase)))
    return found


def from_source(
    exercise: str, words: tuple[str, ...], source: str, namespace: dict, notebook: str = ""
) -> Mistake:
    """A mistake written as source text: the last function ``source`` defines, in a copy of
    ``namespace`` (``notebook`` defaults to the exercise's)."""
    from transformer_lab.checks.registry import REGISTRY

    _known(exercise)
    ns = dict(namespace)
    exec(source, ns)
    name = [line.split("(")[0][4:] for line in source.splitlines() if line.startswith("def ")][-1]
    first = source.strip().splitlines()[0]
    label = first[1:].strip() if first.startswith("#") else first
    return Mistake(notebook or REGISTRY[exercise].number, exercise, label, ns[name], words, source)


_MESSAGES: dict[tuple[int, bool], tuple[str | None, bool | None, BaseException | None]] = {}


def run(mistake: Mistake, hidden: bool = False):
    """(message or None if the check passed, CheckFailed.named, an unexpected error or None),
    computed once per mistake and mode."""
    key = (id(mistake.fn), hidden)
    if key not in _MESSAGES:
        check = checks.EXERCISES[mistake.exercise][0]
        outcome: tuple[str | None, bool | None, BaseException | None] = (None, None, None)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check(mistake.fn, hidden=hidden)
        except AssertionError as exc:
            outcome = (str(exc), getattr(exc, "named", None), None)
        except Exception as exc:  # noqa: BLE001 - a check that crashes misleads the student
            outcome = (None, None, exc)
        _MESSAGES[key] = outcome
    return _MESSAGES[key]


def classify(mistake: Mistake, modes: tuple[bool, ...] = (False, True)) -> tuple[str, str]:
    """(outcome, message) of the exercise's check on ``mistake.fn``, visible cases then hidden
    (``modes=(False,)``: the instant check's visible cases only)."""
    check = checks.EXERCISES[mistake.exercise][0]
    message, named = None, None
    for hidden in modes:
        message, named, error = run(mistake, hidden)
        if error is not None:
            return "misleading", f"the check itself crashed: {error!r}"
        if message is not None:
            break
    if message is None:
        return "passed", ""
    # The words must be in the verdict: not in the check's name in front of it, not in the inputs.
    verdict = message.split(" [case ")[0]
    prefix = f"{check.__name__}: "
    verdict = (verdict[len(prefix) :] if verdict.startswith(prefix) else verdict).lower()
    if all(any(alt.lower() in verdict for alt in w.split("|")) for w in mistake.words):
        return "named", message
    return ("misleading" if named else "generic"), message
