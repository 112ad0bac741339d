"""Text from a submission made inert before it reaches the instructor's terminal or a CSV file.

A student controls much of what ``tlab`` prints and writes: comments in a flagged line, exception
messages, file names, answers from the kernel. Two rules, applied where text leaves the grader:

    shown(text)       every control and format character (escape sequences, carriage returns,
                      bidirectional overrides, ...) written as a visible escape; newlines and tabs
                      stay. ``InertStream`` applies it to everything ``tlab`` prints.
    csv_cell(value)   a text cell that a spreadsheet would read as a formula (OWASP: it starts
                      with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets a leading
                      ``'``; numbers, empty cells and Moodle's lone ``-`` stay as they are.
                      ``csv_writer`` and ``csv_dict_writer`` apply it to every cell they write.

Standard library only (the grading process imports it before PyTorch).
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterable
from typing import IO, Any

__all__ = ["shown", "InertStream", "csv_cell", "csv_writer", "csv_dict_writer"]

_KEEP = {"\n", "\t"}
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object) -> str:
    """``text`` with every control or format character written as ``\\xNN`` / ``\\uNNNN``."""
    text = str(text)
    return "".join(
        _escape(ch) if ch not in _KEEP and unicodedata.category(ch) in ("Cc", "Cf") else ch
        for ch in text
    )


class InertStream:
    """A text stream that writes everything through :func:`shown` (``tlab``'s stdout/stderr)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(shown(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, ...
        return getattr(self._stream, name)


def csv_cell(value: Any) -> Any:
    """``value`` safe for a spreadsheet: formula-like text gets a leading ``'``."""
    if not isinstance(value, str) or value in ("", "-") or _NUMBER.match(value):
        return value
    value = shown(value) if value[:1] not in ("\t", "\r") else value
    return "'" + value if value.startswith(_FORMULA_START) else value


class _InertWriter:
    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([csv_cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


class _InertDictWriter(_InertWriter):
    def writeheader(self) -> Any:
        return self._writer.writeheader()

    def writerow(self, row: dict[str, Any]) -> Any:
        return self._writer.writerow({k: csv_cell(v) for k, v in row.items()})


def csv_writer(fh: IO[str], **kwargs: Any) -> _InertWriter:
    """``csv.writer(fh)`` whose every cell goes through :func:`csv_cell`."""
    return _InertWriter(csv.writer(fh, **kwargs))


def csv_dict_writer(fh: IO[str], fieldnames: list[str], **kwargs: Any) -> _InertDictWriter:
    """``csv.DictWriter(fh, fieldnames)`` whose every cell goes through :func:`csv_cell`."""
    return _InertDictWriter(csv.DictWriter(fh, fieldnames=fieldnames, **kwargs))
