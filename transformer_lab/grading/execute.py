"""nbgrader's Execute preprocessor, made safe and fair for ``tlab grade``.

- **Sandbox.** The kernel runs in a bubblewrap sandbox (:mod:`.sandbox`) unless the instructor
  passed ``--no-sandbox``.
- **Per-cell time limit, as documented.** Every cell gets ``Execute.timeout`` seconds (30 by
  default). Only time lost to *interrupted* cells counts against ``hang_budget``: once a
  submission has lost that much to cells stopped at the limit (a ``while True`` answer called
  by every test cell), later cells get ``overtime_timeout`` seconds. Slow honest cells that
  finish in time are never cut.
- **Hidden tests decided here** (:mod:`.hidden`): the hidden checks' results are taken out of
  each graded cell and compared with the solution's; a difference or a missing result adds an
  error to the cell, which nbgrader scores 0. Kernel findings become review flags.
- **stderr is not failure.** nbgrader scores a graded cell 0 when it wrote anything to stderr;
  a debug print or a warning must not cost points, so stderr output of graded cells is kept
  but marked as stdout (prefixed ``[stderr]``).
- **Output size.** Each cell keeps at most ``max_output_chars`` characters of text output
  (the autograded notebook and the feedback are built from it); the rest is dropped with a note.
- **Guards.** Before the first cell the kernel imports ``transformer_lab.checks`` (its snapshot
  of trusted functions predates student code) and is given this run's hidden-test secret;
  before each cell it is told whether the cell is student code (for its audit findings); before
  each graded cell the name ``checks`` is re-bound to the real module.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Integer, Unicode


def _sibling(name: str):
    """A module of this folder, loaded by path (importing the package would import torch)."""
    key = f"_tlab_grading_{name}"
    if key not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


_hidden = _sibling("hidden")
compare_records, expected_hidden_checks, take_records = (
    _hidden.compare_records,
    _hidden.expected_hidden_checks,
    _hidden.take_records,
)

__all__ = ["GuardedExecute", "PRIME_CODE", "GUARD_CODE", "RUN"]

PRIME_CODE = """\
try:
    from transformer_lab.checks import _guards as _tlab_guards  # snapshot before student code
    _tlab_guards.arm({secret})
    del _tlab_guards
except Exception:
    pass
"""

CONTEXT_CODE = """\
try:
    __import__("sys").modules["transformer_lab.checks._guards"].context({student})
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

# What the last notebook run found, read by the grading driver after nbgrader's autograde:
# {"flags": [...], "hidden_failures": [...], "reference": {grade_id: [records]}}.
RUN: dict = {}


class GuardedExecute(Execute):
    """Execute in a sandbox, with hidden tests decided by the grader (see the module doc)."""

    sandbox = Bool(True, help="Run each kernel in a bubblewrap sandbox.").tag(config=True)
    hang_budget = Float(
        60.0,
        help="Seconds a submission may lose to cells interrupted at the time limit before "
        "every later cell gets only `overtime_timeout` seconds (0 disables this).",
    ).tag(config=True)
    overtime_timeout = Integer(
        3, help="Per-cell timeout (seconds) once the hang budget is spent."
    ).tag(config=True)
    max_output_chars = Integer(
        20000, help="Characters of text output kept per cell; the rest is dropped with a note."
    ).tag(config=True)
    hidden_secret = Unicode("", help="This grading run's hidden-test secret.").tag(config=True)
    hidden_reference = Unicode(
        "", help="JSON file with the solution's hidden-test results (empty: reference mode)."
    ).tag(config=True)
    course_root = Unicode("", help="The course folder (kept out of the sandbox).").tag(config=True)
    memory_mb = Integer(4096, help="Sandbox: address space per process (MB).").tag(config=True)
    cpu_seconds = Integer(1200, help="Sandbox: CPU seconds of the kernel.").tag(config=True)
    guard_cells = Bool(True, help="Run the integrity guards.").tag(config=True)
    # nbgrader raises (and grades nothing) when a cell's output stops arriving after its reply,
    # e.g. after a fork bomb's children were killed; carry on with what arrived instead.
    raise_on_iopub_timeout = Bool(False).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.sandbox:
            sandbox = _sibling("sandbox")
            SandboxKernelManager, SandboxLimits = (
                sandbox.SandboxKernelManager,
                sandbox.SandboxLimits,
            )
            SandboxKernelManager.course_root = Path(self.course_root or ".").resolve()
            SandboxKernelManager.limits = SandboxLimits(
                memory_mb=self.memory_mb, cpu_seconds=self.cpu_seconds
            )
            self.kernel_manager_class = SandboxKernelManager

    # -- time ---------------------------------------------------------------------------
    def preprocess(self, nb, resources=None, km=None):
        self._tlab_lost = 0.0
        self._tlab_primed = False
        self._tlab_course = {c.source for c in nb.cells if c.cell_type == "code"}
        self._tlab_name = (resources or {}).get("unique_key", "")
        self._tlab_reference = self._load_reference()
        for key in ("flags", "hidden_failures"):
            RUN.setdefault(key, [])
        RUN.setdefault("reference", {})
        return super().preprocess(nb, resources, km)

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        if self.hang_budget and getattr(self, "_tlab_lost", 0.0) >= self.hang_budget:
            return self.overtime_timeout if timeout is None else min(timeout, self.overtime_timeout)
        return timeout

    def _load_reference(self) -> dict | None:
        if not self.hidden_reference:
            return None  # reference mode: we are running the solution
        path = Path(self.hidden_reference)
        if not path.is_file():
            return {}  # the assignment has no hidden checks
        data = json.loads(path.read_text(encoding="utf-8"))
        return data.get(self._tlab_name, {})

    # -- cells --------------------------------------------------------------------------
    def _run_silently(self, code: str, cell) -> None:
        msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        self.wait_for_reply(msg_id, cell)

    def _is_student_code(self, cell) -> bool:
        if utils.is_grade(cell) or utils.is_solution(cell):
            return True  # answer cells, and test cells that call the student's functions
        return cell.source not in getattr(self, "_course_sources", self._tlab_course)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return super().preprocess_cell(cell, resources, index)
        if self.guard_cells:
            if not self._tlab_primed:
                self._tlab_primed = True
                self._run_silently(PRIME_CODE.format(secret=repr(self.hidden_secret)), cell)
            reference_mode = self._tlab_reference is None
            student = not reference_mode and self._is_student_code(cell)
            self._run_silently(CONTEXT_CODE.format(student=student), cell)
            if utils.is_grade(cell):
                self._run_silently(GUARD_CODE, cell)
        timeout = self._get_timeout(cell)
        cell, resources = super().preprocess_cell(cell, resources, index)
        if any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", [])):
            self._tlab_lost += timeout or 0
        self._after_cell(cell)
        return cell, resources

    def _after_cell(self, cell) -> None:
        records = take_records(cell)
        graded = utils.is_grade(cell)
        if graded:
            self._decide_hidden(cell, records)
        elif records and self._tlab_reference is not None:
            RUN["flags"].append("hidden-test results published outside a graded cell (forged?)")
        for output in cell.get("outputs", []):
            if graded and output.get("output_type") == "stream" and output.get("name") == "stderr":
                output["name"] = "stdout"
                output["text"] = "[stderr] " + output.get("text", "")
        _sibling("outputs").bound_outputs(cell, self.nb, text_chars=self.max_output_chars)

    def _decide_hidden(self, cell, records: list[dict]) -> None:
        expected = expected_hidden_checks(cell.source)
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if self._tlab_reference is None:  # reference mode: keep the solution's results
            RUN["reference"][grade_id] = records
            bad = [r.get("check") for r in records if r.get("raised")]
            if len(records) != len(expected) or bad:
                RUN["hidden_failures"].append(
                    f"{grade_id}: the solution's hidden checks did not all pass ({bad or records})"
                )
            return
        for record in records:
            for flag in record.get("flags", []) if isinstance(record.get("flags"), list) else []:
                flag = f"kernel: {str(flag)[:200]}"
                if flag not in RUN["flags"]:
                    RUN["flags"].append(flag)
        if not expected:
            if records:
                RUN["flags"].append(
                    f"{grade_id}: hidden-test results from a cell without hidden tests"
                )
            return
        failed = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
        reason = compare_records(expected, self._tlab_reference.get(grade_id, []), records)
        if reason is None:
            return
        if failed:
            return  # the cell fails anyway (scored 0): the kernel's message says why
        RUN["hidden_failures"].append(f"{grade_id}: {reason}")
        if len(records) != len(expected):
            RUN["flags"].append(f"{grade_id}: {reason}")
        if True:  # the kernel said nothing went wrong, the grader disagrees
            cell.outputs.append(
                NotebookNode(
                    output_type="error",
                    ename="HiddenTestsFailed",
                    evalue=reason,
                    traceback=[f"\x1b[0;31mHiddenTestsFailed\x1b[0m: {reason}"],
                )
            )
