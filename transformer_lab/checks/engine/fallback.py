"""The last word of a check when no specific evidence fits: the engine's generic evidence.

``verdict(message, actual, expected, what, dims)`` keeps a diagnosis found so far; otherwise it
asks :func:`transformer_lab.checks.engine.diagnose.explain` (axes swapped, a constant factor matched
against the sizes in ``dims``, a sign flip, only the first element right, a shift by one), and
says whether the result names a mistake or only describes the difference.
"""

from __future__ import annotations

from typing import Any

from transformer_lab.checks.engine import diagnose as _diagnose

__all__ = ["verdict"]


def verdict(
    message: str | None,
    actual: Any,
    expected: Any,
    what: str = "output",
    dims: dict | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> tuple[str, bool]:
    """(message, named): the diagnosis found so far, else the generic evidence."""
    if message is not None:
        return message, True
    finding = _diagnose.explain(actual, expected, what=what, atol=atol, rtol=rtol, dims=dims)
    if not finding.named and getattr(actual, "dim", lambda: 1)() == 0:
        # two numbers always differ by some factor: for one number, only say what differs
        return _diagnose.observe(actual, expected, what), False
    return finding.message, finding.named
