"""What an explorer returns while a notebook is being graded."""

from __future__ import annotations

import html
from typing import Any

from transformer_lab._mode import grading_mode

__all__ = ["GradingPlaceholder", "placeholder_if_grading"]


class GradingPlaceholder:
    """A one-line stand-in for an explorer: no widgets, no figure, nothing that can hang.

    It keeps the explorer's reading interface (``controls`` is empty, ``figure`` is ``None``,
    ``state()`` is ``{}``) so a notebook that touches them still runs under the autograder.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.controls: dict[str, Any] = {}
        self.figure = None

    def state(self) -> dict[str, Any]:
        """Nothing is plotted under grading."""
        return {}

    def __repr__(self) -> str:
        return (
            f"{self.name}: explorers are switched off while grading "
            f"(NBGRADER_EXECUTION or TLAB_GRADING is set)."
        )

    def _repr_html_(self) -> str:
        return f"<i>{html.escape(repr(self))}</i>"


def placeholder_if_grading(name: str) -> GradingPlaceholder | None:
    """A placeholder for explorer ``name`` under grading, else ``None`` (build the real one)."""
    return GradingPlaceholder(name) if grading_mode() else None
