"""Issue 36, item 4: text from a submission reaches the instructor inert, with a test per writer."""

from __future__ import annotations

import csv
import io

import pytest

from transformer_lab.grading.inert import InertStream, csv_cell, csv_dict_writer, csv_writer, shown

ATTACKS = [
    "\x1b]52;c;cm0gLXJmIH4K\x07",  # OSC 52: write the instructor's clipboard
    "\x1b[2K\x1b[1A\rall good",  # erase the line, move the cursor up
    "name\u202etxt.py",  # right-to-left override (Trojan Source)
]


@pytest.mark.parametrize("text", ATTACKS)
def test_control_characters_are_shown_escaped(text):
    out = shown(text)
    assert not any(ch in out for ch in "\x1b\x07\r\u202e")
    assert "\\x1b" in out or "\\u202e" in out


def test_newlines_and_tabs_stay_and_ordinary_text_is_unchanged():
    assert shown("a\tb\nc ✓ é") == "a\tb\nc ✓ é"


def test_the_tlab_stream_escapes_whatever_is_printed():
    raw = io.StringIO()
    print("flag: " + ATTACKS[0], file=InertStream(raw))
    assert "\x1b" not in raw.getvalue() and raw.getvalue().endswith("\\x07\n")


@pytest.mark.parametrize(
    "cell, kept",
    [("=HYPERLINK(\"http://x\",\"y\")", False), ("+1+1", False), ("@SUM(A1)", False),
     ("-2+3", False), ("\t=1", False), ("\r=1", False), ("-", True), ("-3.5", True),
     ("7", True), ("", True), ("ada", True)],
)  # fmt: skip
def test_formula_cells_are_neutralised_and_numbers_kept(cell, kept):
    out = csv_cell(cell)
    assert (out == cell) is kept
    if not kept:
        assert out.startswith("'")


def test_both_writers_neutralise_every_cell():
    fh = io.StringIO()
    csv_writer(fh).writerows([["ada", "=1+2", 3.0]])
    w = csv_dict_writer(fh, ["id", "reason"])
    w.writeheader()
    w.writerow({"id": "@x", "reason": "-"})
    rows = list(csv.reader(io.StringIO(fh.getvalue())))
    assert rows == [["ada", "'=1+2", "3.0"], ["id", "reason"], ["'@x", "-"]]
