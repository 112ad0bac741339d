"""nbgrader's Execute preprocessor with a per-submission time budget and integrity guards.

Used by ``tlab grade`` in place of ``nbgrader.preprocessors.Execute`` during autograding:

- **Budget.** nbgrader interrupts a hanging cell after ``Execute.timeout`` seconds, but a
  ``while True: pass`` answer hangs once *per test cell* that calls it. Once a submission has
  used ``submission_budget`` seconds, every further cell gets only ``overtime_timeout``
  seconds, so one runaway notebook cannot stall a whole class.
- **Guards.** Before the first code cell, ``transformer_lab.checks`` is imported so that its
  snapshot of trusted functions predates any student code. Before each graded test cell, the
  name ``checks`` is re-bound to the real module, undoing a student's ``checks = Fake()``.
  Both run silently in the kernel and leave nothing in the notebook.
"""

from __future__ import annotations

import math
import time

from nbgrader import utils
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Integer

__all__ = ["GuardedExecute", "PRIME_CODE", "GUARD_CODE"]

PRIME_CODE = """\
try:
    import transformer_lab.checks as _tlab_checks  # trusted snapshot before any student code
    del _tlab_checks
except Exception:
    pass
"""

GUARD_CODE = """\
import sys as _tlab_sys
_tlab_mod = _tlab_sys.modules.get("transformer_lab.checks")
if _tlab_mod is not None and "checks" in globals():
    checks = _tlab_mod  # a graded cell always talks to the real checks module
del _tlab_sys, _tlab_mod
"""


class GuardedExecute(Execute):
    """Execute with a per-submission time budget and silent integrity guards."""

    submission_budget = Float(
        120.0,
        help="Seconds of cell execution a submission may use before every later cell gets "
        "only `overtime_timeout` seconds (0 disables the budget).",
    ).tag(config=True)

    overtime_timeout = Integer(
        3, help="Per-cell timeout (seconds) once the submission budget is spent."
    ).tag(config=True)

    guard_cells = Bool(True, help="Run the integrity guards before graded cells.").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._tlab_started = time.monotonic()
        self._tlab_primed = False
        return super().preprocess(nb, resources, km)

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        started = getattr(self, "_tlab_started", None)
        if not self.submission_budget or started is None:
            return timeout
        remaining = self.submission_budget - (time.monotonic() - started)
        budgeted = max(self.overtime_timeout, math.ceil(remaining))
        return budgeted if timeout is None else min(timeout, budgeted)

    def _run_silently(self, code: str, cell) -> None:
        msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        self.wait_for_reply(msg_id, cell)

    def preprocess_cell(self, cell, resources, index):
        if self.guard_cells and cell.cell_type == "code" and cell.source.strip():
            if not self._tlab_primed:
                self._tlab_primed = True
                self._run_silently(PRIME_CODE, cell)
            if utils.is_grade(cell):
                self._run_silently(GUARD_CODE, cell)
        return super().preprocess_cell(cell, resources, index)
