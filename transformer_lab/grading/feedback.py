"""Feedback that does not leak hidden tests.

nbgrader's ``ClearHiddenTests`` removes the hidden region from a test cell's source, but the
traceback of a failing cell still quotes the lines around the failure, hidden ones included.
:class:`ClearHiddenTracebacks` keeps only the final ``ErrorName: message`` line of errors in
graded test cells: the checks' messages name the mistake, which is what a student needs.
"""

from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

__all__ = ["ClearHiddenTracebacks"]


class ClearHiddenTracebacks(NbGraderPreprocessor):
    """Shorten error tracebacks in graded test cells to their last line."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [
                        f"\x1b[0;31m{output.get('ename', 'Error')}\x1b[0m: {output.get('evalue', '')}"
                    ]
        return cell, resources
