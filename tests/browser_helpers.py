"""Helpers for the real-browser test: Chromium's flags, a throwaway JupyterLab, the notebook to open."""

from __future__ import annotations

import ast
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
STUDENT_NOTEBOOK = ROOT / "notebooks" / "01_self_attention" / "01_self_attention.ipynb"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# A cell that builds an explorer: `widgets.softmax_explorer(...)`, `softmax_explorer(...)`, ...
EXPLORER_CALL = re.compile(r"\bwidgets\.\w+\s*\(|\b\w+_explorer\s*\(")


def notebook_to_open() -> Path:
    """``$TLAB_BROWSER_NOTEBOOK`` if set, else the student notebook of lesson 1."""
    if os.environ.get("TLAB_BROWSER_NOTEBOOK"):
        return Path(os.environ["TLAB_BROWSER_NOTEBOOK"])
    return STUDENT_NOTEBOOK


def _is_graded_cell(cell: nbformat.NotebookNode) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("solution") or meta.get("grade"))


def _names(source: str, *, defined: bool) -> set[str]:
    """Names a cell defines (functions, classes, assignments) or uses; IPython magics are blanked."""
    code = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    if defined:
        return {
            node.name if hasattr(node, "name") else node.id
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
            or (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store))
        }
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _only_definitions(source: str) -> bool:
    """True if a cell only defines functions or classes (and imports): running it cannot fail on
    an unanswered exercise, whose body raises only when called."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    allowed = (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Expr)
    return all(isinstance(node, allowed) for node in tree.body)


def explorer_notebook(
    source: Path, dest_dir: Path, explorer: str | None = None
) -> tuple[Path, int, str]:
    """Write a copy of ``source`` holding the cells above one explorer cell that run in an
    unsolved student notebook, and that explorer cell.

    Args:
        source: the notebook.
        dest_dir: where the copy goes.
        explorer: the explorer's name (e.g. ``"equivariance_explorer"``); default the first
            cell that calls any explorer.

    Kept: set-up cells, and answer cells that only define functions (the explorer may take the
    student's function; unsolved, it raises NotImplementedError only when called, which the
    explorer shows as one line). Left out: test cells, other answer cells, and every cell that
    uses a name an answer cell defines (instant checks, demos of the student's function).

    Returns:
        (path of the copy, number of code cells in it, source of the explorer cell).
    """
    nb = nbformat.read(source, as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    pattern = re.compile(rf"\b{re.escape(explorer)}\s*\(") if explorer else EXPLORER_CALL
    found = next((c for c in code_cells if pattern.search(c.source)), None)
    if found is None:
        raise LookupError(
            f"{source} has no cell that calls an explorer (pattern {pattern.pattern})."
        )
    above = code_cells[: code_cells.index(found)]
    answer_cells = [c for c in above if c.metadata.get("nbgrader", {}).get("solution")]
    answers = set().union(*(_names(c.source, defined=True) for c in answer_cells))
    keep = []
    for c in above:
        if c in answer_cells:
            if _only_definitions(c.source):
                keep.append(c)
        elif not _is_graded_cell(c) and not (_names(c.source, defined=False) & answers):
            keep.append(c)
    copy = nbformat.v4.new_notebook()
    copy.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    copy.cells = [nbformat.v4.new_code_cell(c.source) for c in [*keep, found]]
    path = dest_dir / "explorer.ipynb"
    nbformat.write(copy, path)
    return path, len(copy.cells), found.source


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(
    root_dir: Path, work_dir: Path, port: int, token: str, log_path: Path
) -> subprocess.Popen:
    """Start JupyterLab on 127.0.0.1:port, isolated from the user's settings; wait until it answers."""
    settings = work_dir / "lab-settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True, exist_ok=True)
    # No "receive Jupyter news?" toast over the notebook.
    (
        settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    ).write_text('{"fetchNews": "false", "checkForUpdates": false}')
    env = {k: v for k, v in os.environ.items() if k not in ("NBGRADER_EXECUTION", "TLAB_GRADING")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        JUPYTER_RUNTIME_DIR=str(work_dir / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(work_dir / "workspaces"),
    )
    cmd = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser", "--allow-root",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
    ]  # fmt: skip
    log = open(log_path, "w")  # noqa: SIM115 (closed with the process by the caller's fixture)
    proc = subprocess.Popen(cmd, cwd=work_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    proc.log_file = log  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{port}/api/status?token={token}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {proc.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    stop(proc)
    raise TimeoutError(f"JupyterLab did not answer on port {port} within 60 s; see {log_path}")


def stop(proc: subprocess.Popen) -> None:
    """Stop the server (and with it its kernels)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    log = getattr(proc, "log_file", None)
    if log is not None:
        log.close()


def explorers_notebook(source: Path, dest_dir: Path) -> tuple[Path, int]:
    """Write a copy of ``source`` with its set-up cells and every explorer cell (for the audit).

    The same cells are kept as in :func:`explorer_notebook`, plus every cell that calls an
    explorer; an explorer whose inputs the copy lacks shows its error, which the audit also reads.

    Returns:
        (path of the copy, number of code cells in it).
    """
    nb = nbformat.read(source, as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    answer_cells = [c for c in code_cells if c.metadata.get("nbgrader", {}).get("solution")]
    answers = set().union(*(_names(c.source, defined=True) for c in answer_cells))
    keep = []
    for c in code_cells:
        if EXPLORER_CALL.search(c.source) and not _is_graded_cell(c):
            keep.append(c)
        elif c in answer_cells:
            if _only_definitions(c.source):
                keep.append(c)
        elif not _is_graded_cell(c) and not (_names(c.source, defined=False) & answers):
            keep.append(c)
    copy = nbformat.v4.new_notebook()
    copy.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    copy.cells = [nbformat.v4.new_code_cell(c.source) for c in keep]
    path = dest_dir / "explorers.ipynb"
    nbformat.write(copy, path)
    return path, len(copy.cells)


def axe_script() -> Path:
    """The axe-core script shipped by the ``axe-playwright-python`` package (dev extra)."""
    import axe_playwright_python

    return Path(axe_playwright_python.__file__).parent / "axe.min.js"


# Run axe (WCAG 2.0/2.1 A and AA) on the page and attribute every failing node: "course" when
# it sits in a cell's output (not the prompt), a widget view or the feedback page's content,
# else "jupyterlab". Returns one row per (rule, origin) with its impact and node count.
AXE_RUN = """async (courseSelector) => {
  const results = await axe.run(document, {
    runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
    elementRef: true, resultTypes: ['violations'],
  });
  const rows = {};
  for (const v of results.violations) {
    for (const node of v.nodes) {
      const el = node.element;
      const origin = el && el.closest && el.closest(courseSelector) ? 'course' : 'jupyterlab';
      const key = v.id + '|' + origin;
      rows[key] = rows[key] || {rule: v.id, impact: v.impact, origin, nodes: 0, targets: []};
      rows[key].nodes += 1;
      if (rows[key].targets.length < 3) rows[key].targets.push(node.target.join(' '));
    }
  }
  return Object.values(rows);
}"""
COURSE_OUTPUT = ".jp-OutputArea-output, .jupyter-widgets, .tlab-explorer"


def run_axe(page, course_selector: str = COURSE_OUTPUT) -> list[dict]:
    """axe's violations on ``page``, attributed to the course's outputs or to the host page."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(axe_script()))
    return page.evaluate(AXE_RUN, course_selector)


FEEDBACK_FIXTURE = ROOT / "tests" / "fixtures" / "course" / "solutions" / "fx_attention"


def feedback_page(dest_dir: Path) -> Path:
    """One nbgrader feedback page written in-process by the project's exporter
    (``SanitizedHTMLExporter``, nbgrader's ``feedback`` template) from the fixture assignment,
    graded by hand: softmax passes, attention fails with a long message, the mask passes, and a
    printed line and a figure with its text alternative sit among the outputs.

    Returns:
        the path of ``fx_attention.html`` in ``dest_dir``.
    """
    import matplotlib

    matplotlib.use("Agg")
    from nbgrader.server_extensions.formgrader import __file__ as formgrader_file
    from traitlets.config import Config

    from transformer_lab.grading.channels.feedback import SanitizedHTMLExporter
    from transformer_lab.widgets import _common as ui
    from transformer_lab.widgets.a11y import figure_html

    nb = nbformat.read(FEEDBACK_FIXTURE / "fx_attention.ipynb", as_version=4)
    fig, (ax,) = ui.new_figure(figsize=(4, 3))
    ax.bar(range(4), [0.1, 0.2, 0.3, 0.4], color=ui.BLUE)
    ax.set(title="softmax of [0, 1, 2, 3]", xlabel="position", ylabel="weight")
    scores = {"test_softmax": 2, "test_attention": 0, "test_causal": 1}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = 1
        if meta.get("grade_id") == "setup":
            cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text="ready\n"))
        if meta.get("grade_id") == "softmax_impl":
            cell.outputs.append(
                nbformat.v4.new_output(
                    "display_data", data={"text/html": figure_html(fig), "text/plain": "figure"}
                )
            )
        if meta.get("grade_id") == "test_attention":
            message = (
                "scaled_dot_product_attention: the weights of query 0 differ from the reference "
                "by up to 0.31 (did you divide the scores by sqrt(d_k) before the softmax?) " * 3
            )
            cell.outputs.append(
                nbformat.v4.new_output(
                    "error",
                    ename="AssertionError",
                    evalue=message,
                    traceback=[f"\x1b[0;31mAssertionError\x1b[0m: {message}"],
                )
            )
        if meta.get("grade"):
            meta["score"] = scores[meta["grade_id"]]
    config = Config()
    config.HTMLExporter.template_name = "feedback"
    formgrader = Path(formgrader_file).parent  # as nbgrader's GenerateFeedback sets it up
    config.HTMLExporter.extra_template_basedirs = [str(formgrader / "templates")]
    config.HTMLExporter.extra_template_paths = [
        str(formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css")
    ]
    exporter = SanitizedHTMLExporter(config=config)
    resources = {
        "nbgrader": {"notebook": "fx_attention", "score": 3, "max_score": 6, "late_penalty": 0}
    }
    page, _ = exporter.from_notebook_node(nb, resources=resources)
    path = dest_dir / "fx_attention.html"
    path.write_text(page, encoding="utf-8")
    return path
