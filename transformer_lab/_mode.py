"""Is this code running under the autograder?"""

from __future__ import annotations

import os

__all__ = ["grading_mode"]


def grading_mode() -> bool:
    """True while nbgrader validates or autogrades (it sets ``NBGRADER_EXECUTION``), or when the
    course's own flag ``TLAB_GRADING=1`` is set. Explorers then build nothing interactive and
    training cells run in a reduced form, so grading never hangs or times out."""
    if os.environ.get("NBGRADER_EXECUTION"):
        return True
    return os.environ.get("TLAB_GRADING", "").strip().lower() in {"1", "true", "yes", "on"}
