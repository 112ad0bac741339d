"""Honest alternative solutions for every exercise, and the harness that grades them (issue 22).

``nb00.py`` ... ``nb09.py`` each hold ``ALTERNATIVES``: for every answer cell (by its nbgrader
``grade_id``), 2-4 :class:`Alternative` sources a good student could write from the notebook's
text. ``harness.py`` runs them through the instant checks in-process and grades them through
``tlab grade``; ``tests/test_grading_honest.py`` is the test.
"""

from __future__ import annotations

from dataclasses import dataclass

NOTEBOOKS = [
    "00_tokens_and_embeddings",
    "01_self_attention",
    "02_multi_head_attention",
    "03_positional_encodings",
    "04_masking_and_cross_attention",
    "05_transformer_block",
    "06_bert",
    "07_gpt",
    "08_vision_transformer",
    "09_attention_at_scale",
]


@dataclass(frozen=True)
class Alternative:
    """One honest answer: the whole source of the answer cell, and how it differs.

    ``unspecified`` is empty for an answer that meets the exercise's stated contract by any
    reading; otherwise it names the unspecified behaviour the answer relies on.
    """

    note: str
    source: str
    unspecified: str = ""


def alternatives(notebook: str) -> dict[str, list[Alternative]]:
    """``{grade_id: [Alternative, ...]}`` of ``notebook`` ("00_tokens_and_embeddings" or "00")."""
    import importlib

    module = importlib.import_module(f".nb{notebook[:2]}", __name__)
    return module.ALTERNATIVES
