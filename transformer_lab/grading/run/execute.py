"""nbgrader's Execute preprocessor, made safe and fair for ``tlab grade``.

- **Sandbox.** The kernel runs in a bubblewrap sandbox (:mod:`.sandbox`) unless the instructor
  passed ``--no-sandbox``.
- **Every point decided here, outside the kernel** (:mod:`.judge`). A graded test cell runs in
  the kernel without its hidden block, for the student's feedback only: its errors are kept as
  text and decide nothing. The grader then runs the cell's checks (visible and hidden) in this
  process on the student's functions in the kernel (:mod:`.remote`), and the verdict becomes
  the cell's outcome: an error output (nbgrader scores 0) when a check fails, none when all
  pass. The hidden block and the run's secret never enter the kernel.
- **Per-cell time limit, on the kernel's own clock.** Every cell gets ``Execute.timeout``
  seconds (30 by default) of the kernel's time: wall time less what its threads spent waiting
  for a core (:mod:`.kernel_clock`), never more than three times the limit in wall time. A busy
  machine does not use up a student's limit; a cell ended by that cap instead counts as
  *starved* and the submission is graded once more. Only time lost to *interrupted* cells
  counts against ``hang_budget``: once a submission has lost that much to cells stopped at the
  limit, later cells get ``overtime_timeout`` seconds. Slow honest cells that finish in time
  are never cut.
- **stderr is not failure.** nbgrader scores a graded cell 0 when it wrote anything to stderr;
  a debug print or a warning must not cost points, so stderr output of graded cells is kept
  but marked as stdout (prefixed ``[stderr]``).
- **Output size.** Every output of every type counts against per-cell and per-notebook budgets
  (:mod:`.outputs`); ``max_output_chars`` bounds the text of a cell.
- **Nothing worth reaching.** The kernel of a graded notebook imports a build of the package
  without that notebook's answers (:mod:`.stripped`), bound in place of the real one.
- **Guards.** Before the first cell the kernel imports ``transformer_lab.checks`` and enters
  grading mode (its checks only say that the grader decides; an audit hook notes suspicious
  events, reported as review flags); before each cell it is told whether the cell is student
  code.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from queue import Empty

from nbclient.util import ensure_async, run_sync
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import Execute
from traitlets import Bool, Enum, Float, Integer, Unicode

# The judge runs the package's checks, so it imports the package (and torch) itself.
from transformer_lab.grading.decide import judge as _judge
from transformer_lab.grading.decide import remote as _remote
from transformer_lab.grading.run import sandbox as _sandbox
from transformer_lab.grading.run import stripped as _stripped
from transformer_lab.grading.run.bwrap import SandboxLimits
from transformer_lab.grading.run.kernel_clock import (
    HANG_BUDGET,
    OVERTIME_TIMEOUT,
    KernelClock,
    process_tree,
)
from transformer_lab.grading.run.outputs import bound_outputs

__all__ = ["GuardedExecute", "PRIME_CODE", "RUN"]

PRIME_CODE = """\
try:
    from transformer_lab.checks.engine import grading_hooks as _tlab_guards  # snapshot first
    from transformer_lab.checks.engine import serve as _tlab_serve  # the grader's requests
    _tlab_serve.open_channel(get_ipython().kernel)  # a comm target, before any student code
    _tlab_guards.arm()
    del _tlab_guards, _tlab_serve
    # The package and PyTorch stay loaded: the collector's full passes while the notebook runs
    # need not walk them again (0.15-0.4 s less per notebook, measured on 01, 06 and 07).
    __import__("gc").freeze()
except Exception:
    pass
"""

CONTEXT_CODE = """\
try:
    __import__("sys").modules["transformer_lab.checks.engine.grading_hooks"].context({student})
except Exception:
    pass
"""

CHANNEL = "tlab.grader"  # the kernel's comm target (checks/engine/serve.py's CHANNEL)

# What the last notebook run found, read by the grading driver after nbgrader's autograde:
# {"flags": [...], "hidden_failures": [...], "verdicts": {grade_id: {...}}}.
RUN: dict = {}


class GuardedExecute(Execute):
    """Execute in a sandbox, with hidden tests decided by the grader (see the module doc)."""

    sandbox = Bool(True, help="Run each kernel in a bubblewrap sandbox.").tag(config=True)
    # When the notebook is done its kernel is killed at once: asking it to shut down waits up to
    # 5 s for an answer that a fork bomb's copies or a stuck kernel never give.
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate").tag(config=True)
    hang_budget = Float(
        HANG_BUDGET,
        help="Seconds a submission may lose to cells interrupted at the time limit before "
        "every later cell gets only `overtime_timeout` seconds (0 disables this).",
    ).tag(config=True)
    overtime_timeout = Integer(
        OVERTIME_TIMEOUT, help="Per-cell timeout (seconds) once the hang budget is spent."
    ).tag(config=True)
    max_output_chars = Integer(
        20000, help="Characters of text output kept per cell; the rest is dropped with a note."
    ).tag(config=True)
    hidden_secret = Unicode("", help="This grading run's hidden-test secret.").tag(config=True)
    hidden_reference = Unicode("", help="Unused (kept so older configurations load).").tag(
        config=True
    )
    judge_budget = Float(
        300.0, help="Seconds the grader's checks of one graded cell may take together."
    ).tag(config=True)
    course_root = Unicode("", help="The course folder (kept out of the sandbox).").tag(config=True)
    memory_mb = Integer(4096, help="Sandbox: address space per process (MB).").tag(config=True)
    cpu_seconds = Integer(1200, help="Sandbox: CPU seconds of the kernel.").tag(config=True)
    guard_cells = Bool(True, help="Run the integrity guards.").tag(config=True)
    # nbgrader raises (and grades nothing) when a cell's output stops arriving after its reply,
    # e.g. after a fork bomb's children were killed; carry on with what arrived instead.
    raise_on_iopub_timeout = Bool(False).tag(config=True)
    # A kernel that needs more than nbclient's 60 s to start is on a busy machine (importing
    # PyTorch at a load of 12 on 2 cores took 10-19 s, and a kernel start more): not a death.
    startup_timeout = Integer(300).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.sandbox:
            manager = _sandbox.SandboxKernelManager
            manager.course_root = Path(self.course_root or ".").resolve()
            manager.limits = SandboxLimits(memory_mb=self.memory_mb, cpu_seconds=self.cpu_seconds)
            self.kernel_manager_class = manager

    # -- time ---------------------------------------------------------------------------
    def preprocess(self, nb, resources=None, km=None):
        self._tlab_lost = 0.0
        self._tlab_primed = False
        self._tlab_course = {c.source for c in nb.cells if c.cell_type == "code"}
        self._tlab_name = (resources or {}).get("unique_key", "")
        for key in ("flags", "hidden_failures"):
            RUN.setdefault(key, [])
        RUN.setdefault("verdicts", {})
        if self.sandbox:
            self._graded_package(resources or {})
        try:
            return super().preprocess(nb, resources, km)
        finally:
            if self.sandbox:  # a kernel that died is not always shut down: nothing left behind
                _sandbox.release_leftovers()

    def _graded_package(self, resources: dict) -> None:
        """The kernel of a graded notebook imports the package without that notebook's
        answers (:mod:`.stripped`); a notebook run that is not graded gets the package whole."""
        info = resources.get("nbgrader") or {}
        notebook = str(info.get("assignment") or info.get("notebook") or "")
        course = Path(self.course_root or ".").resolve()
        package = _stripped.build(notebook, course) if self._judging and notebook else None
        _sandbox.SandboxKernelManager.package = package

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        if self.hang_budget and getattr(self, "_tlab_lost", 0.0) >= self.hang_budget:
            return self.overtime_timeout if timeout is None else min(timeout, self.overtime_timeout)
        return timeout  # of the kernel's own time (_async_handle_timeout)

    # -- the kernel's clock -----------------------------------------------------------------
    def _clock(self) -> KernelClock:
        """A clock on this notebook's kernel, started now (see :mod:`.kernel_clock`)."""
        provisioner = getattr(getattr(self, "km", None), "provisioner", None)
        root = getattr(provisioner, "pid", None)
        if root and getattr(self, "_tlab_tree", (None, []))[0] != root:  # a new kernel
            self._tlab_tree = (root, process_tree(root))
        tree = self._tlab_tree[1] if root else []
        return KernelClock(root, tree=tree, busy=_machine_busy).start()

    async def _async_poll_for_reply(self, msg_id, cell, timeout, *tasks):
        """nbclient's wait for a cell's reply, looking at the kernel's clock every tick."""
        if timeout is None:
            return await super()._async_poll_for_reply(msg_id, cell, timeout, *tasks)
        self._tlab_limit, self._tlab_tick = float(timeout), min(float(timeout), TICK)
        self._tlab_cell_clock = self._clock()
        return await super()._async_poll_for_reply(msg_id, cell, self._tlab_tick, *tasks)

    async def _async_handle_timeout(self, timeout, cell=None):
        """Called every tick without a reply: interrupt only when the kernel has used its
        limit (or the wall cap has come)."""
        clock, limit = self._tlab_cell_clock, self._tlab_limit
        if time.monotonic() - getattr(self, "_tlab_last_look", 0.0) < self._tlab_tick / 2:
            await asyncio.sleep(self._tlab_tick / 2)  # one look per tick, whatever else arrives
        self._tlab_last_look = time.monotonic()
        if clock.elapsed() < limit or clock.owed(limit) > 0:
            return None
        if clock.starved(limit):
            RUN["starved"] = RUN.get("starved", 0) + 1
        return await super()._async_handle_timeout(int(round(limit)), cell)

    @property
    def _judging(self) -> bool:
        """Grading a submission (the grader decides the graded cells), not running a notebook."""
        return bool(self.hidden_secret)

    # -- cells --------------------------------------------------------------------------
    def _run_silently(self, code: str, cell) -> None:
        """The grader's own code, run silently with a limit of its own (never the cell's: on a
        busy machine importing PyTorch alone can take longer than a cell may)."""
        run_sync(self._async_run_own)(code, OWN_CODE_TIMEOUT)

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
                self._run_silently(PRIME_CODE, cell)
            student = self._judging and self._is_student_code(cell)
            self._run_silently(CONTEXT_CODE.format(student=student), cell)
        timeout = self._get_timeout(cell)
        graded = utils.is_grade(cell) and self._judging
        full = cell.source
        if graded:
            cell.source = _judge.visible_source(full)  # the hidden block never enters the kernel
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        finally:
            cell.source = full
        stopped = any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", []))
        if stopped:
            self._tlab_lost += timeout or 0
        if graded:
            # A cell stopped at its limit in the kernel has used its time: the grader does not
            # call the (hanging) function again, so the cell costs its limit once, not twice.
            self._decide(cell, full, timeout, budget=0.0 if stopped else self.judge_budget)
        self._after_cell(cell, utils.is_grade(cell))
        return cell, resources

    def _after_cell(self, cell, graded: bool) -> None:
        for output in cell.get("outputs", []):
            if graded and output.get("output_type") == "stream" and output.get("name") == "stderr":
                output["name"] = "stdout"
                output["text"] = "[stderr] " + output.get("text", "")
        bound_outputs(cell, self.nb, text_chars=self.max_output_chars)

    # -- the grader's verdict -------------------------------------------------------------
    def _decide(self, cell, source: str, timeout, budget: float) -> None:
        """Run the cell's checks here on the kernel's functions; their verdict is the cell's."""
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        kernel = _remote.RemoteKernel(self._remote_send, timeout=float(timeout or 30), raw=True)
        verdict = _judge.judge_cell(kernel, source, self.hidden_secret, budget)
        if verdict is None:
            RUN["flags"].append(
                f"{grade_id}: a graded cell without a check; the kernel's own result was used"
            )
            return
        kept = []
        if any(f.startswith("timeout: ") for f in verdict.flags):
            RUN["timeouts"] = RUN.get("timeouts", 0) + 1
        for output in cell.get("outputs", []):
            if output.get("ename") == "CellTimeoutError":
                RUN["timeouts"] = RUN.get("timeouts", 0) + 1
            if output.get("output_type") == "error":  # the kernel's verdict decides nothing
                text = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".strip()
                kept.append(
                    NotebookNode(
                        output_type="stream",
                        name="stdout",
                        text=f"[in your notebook's kernel] {text}\n",
                    )
                )
            else:
                kept.append(output)
        summary = "\n".join(verdict.lines) + "\n"
        kept.append(
            NotebookNode(output_type="stream", name="stdout", text=f"[the grader]\n{summary}")
        )
        if not verdict.passed:
            kept.append(
                NotebookNode(
                    output_type="error",
                    ename="GradedTestFailed",
                    evalue=verdict.failure,
                    traceback=[f"\x1b[0;31mGradedTestFailed\x1b[0m: {verdict.failure}"],
                )
            )
            RUN["hidden_failures"].append(f"{grade_id}: {verdict.failure}")
        cell.outputs = kept
        for flag in verdict.flags:
            flag = f"{grade_id}: {flag}" if not flag.startswith("kernel: ") else flag
            if flag not in RUN["flags"]:
                RUN["flags"].append(flag)
        RUN["verdicts"][grade_id] = {
            "passed": verdict.passed,
            "failure": verdict.failure,
            "seconds": verdict.seconds,
            "requests": verdict.requests,
            "checks": verdict.checks,  # each check decided (channels/insights.py)
        }

    def _remote_send(self, payload: str, timeout: float) -> str:
        return run_sync(self._async_remote_send)(payload, timeout)

    async def _async_remote_send(self, payload: str, timeout: float) -> str:
        """Hand one request to the kernel's comm target; the JSON text of its answer.

        The grader's own clock decides a timeout: the kernel's time, as for a cell (up to
        ``WALL_CAP`` times the limit in wall time), and a request the kernel dropped without an
        answer is sent again once: a slow machine never turns into a failed call."""
        for attempt in range(3):
            text = await self._async_request_once(payload, timeout)
            if text is not None:
                return text
            if not await ensure_async(self.km.is_alive()):
                raise _remote.RemoteError("the kernel died")
            if attempt == 1:  # the channel itself may be gone: open it again, once
                await self._async_reopen(max(timeout, 10.0))
        raise _remote.RemoteError("the kernel answered no request (three times)")

    async def _async_reopen(self, timeout: float) -> None:
        """Register the kernel's comm target again (the grader's own code, run silently)."""
        await self._async_run_own(PRIME_CODE, timeout)

    async def _async_run_own(self, code: str, timeout: float) -> None:
        msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                reply = await ensure_async(self.kc.shell_channel.get_msg(timeout=1.0))
            except Empty:
                if not await ensure_async(self.km.is_alive()):
                    return  # nbclient reports the dead kernel at the next cell
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return

    async def _async_request_once(self, payload: str, timeout: float) -> str | None:
        comm_id = uuid.uuid4().hex
        content = {"comm_id": comm_id, "target_name": CHANNEL, "data": {"r": payload}}
        msg = self.kc.session.msg("comm_open", content)
        self.kc.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        limit = max(timeout, 0.1)
        clock, deadline = self._clock(), time.monotonic() + limit
        interrupted, text = False, None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if interrupted:
                    raise _remote.RemoteError("the kernel did not answer after an interrupt")
                owed = clock.owed(limit)
                if owed > 0:  # the machine, not the student's code, took that time
                    deadline = time.monotonic() + max(owed, 0.05)
                    continue
                if clock.starved(limit):
                    RUN["starved"] = RUN.get("starved", 0) + 1
                interrupted = True
                await ensure_async(self.km.interrupt_kernel())
                deadline = time.monotonic() + 10.0
                continue
            try:
                reply = await ensure_async(
                    self.kc.iopub_channel.get_msg(timeout=min(remaining, 1.0))
                )
            except Empty:
                if not await ensure_async(self.km.is_alive()):  # the process, not a heartbeat
                    raise _remote.RemoteError("the kernel died") from None
                continue
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, body = reply.get("msg_type"), reply.get("content", {})
            if kind == "comm_msg" and body.get("comm_id") == comm_id and text is None:
                data = body.get("data") or {}
                text = data.get("r") if isinstance(data.get("r"), str) else ""
            elif kind == "status" and body.get("execution_state") == "idle":
                if interrupted:  # the grader's clock ran out: the only timeout there is
                    self._tlab_lost += timeout
                    raise _remote.RemoteTimeout(
                        f"your function did not finish within the time limit ({timeout:.0f} s)"
                    )
                return text


TICK = 1.0  # seconds between looks at the kernel's clock while a cell runs past its limit
OWN_CODE_TIMEOUT = 300.0  # seconds the grader's own silent code may take (imports PyTorch)


def _machine_busy() -> bool:
    """Is this machine's load above its number of cores (the grader's own observation)?"""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except OSError:
        return False
