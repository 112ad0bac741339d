"""The course mode: is this code running under the autograder, and what does that change?

Under the autograder (nbgrader sets ``NBGRADER_EXECUTION``; the course's own flag is
``TLAB_GRADING=1``) explorers build nothing interactive and training runs in a reduced form
(:func:`grading_caps`), so a notebook's cells finish in seconds and grading never hangs.
"""

from __future__ import annotations

import os
import sys

__all__ = ["grading_mode", "GRADING_MAX_STEPS", "GRADING_MAX_EVAL_ITERS", "grading_caps"]

GRADING_MAX_STEPS = 20
"""Most optimizer steps ``train`` takes under the autograder (the schedule is squeezed to fit)."""
GRADING_MAX_EVAL_ITERS = 2
"""Most batches one evaluation reads under the autograder."""


def grading_mode() -> bool:
    """True while nbgrader validates or autogrades (it sets ``NBGRADER_EXECUTION``), or when the
    course's own flag ``TLAB_GRADING=1`` is set. Explorers then build nothing interactive and
    training cells run in a reduced form, so grading never hangs or times out."""
    if os.environ.get("NBGRADER_EXECUTION"):
        return True
    return os.environ.get("TLAB_GRADING", "").strip().lower() in {"1", "true", "yes", "on"}


def grading_caps(steps: int, eval_iters: int | None) -> tuple[int, int | None]:
    """The training length and evaluation size to use: unchanged normally, capped at
    ``GRADING_MAX_STEPS`` and ``GRADING_MAX_EVAL_ITERS`` in grading mode (saying so on stderr)."""
    if not grading_mode():
        return steps, eval_iters
    if steps > GRADING_MAX_STEPS:
        print(f"[grading mode] training capped at {GRADING_MAX_STEPS} steps.", file=sys.stderr)
    capped_iters = GRADING_MAX_EVAL_ITERS if eval_iters is None else eval_iters
    return min(steps, GRADING_MAX_STEPS), min(capped_iters, GRADING_MAX_EVAL_ITERS)
