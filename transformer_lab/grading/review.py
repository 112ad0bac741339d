"""Review flags from reading the student's code (in the grader, where the student cannot reach).

The kernel reports what it saw (``checks._guards.findings``), but a student who controls the
kernel can silence it. What the student *wrote* cannot be hidden from the grader: every code
cell that is not exactly a cell of the released notebook is scanned for the tools that tricks
need (replacing modules or their ``__dict__``, function modes, ``__torch_function__``,
subclasses of ``int``/``Tensor``, threads, frames, files, processes, the network, ``exec``).
A match is a flag for a person to look at, never a lost point: honest code rarely needs any of
these in an exercise, and a flagged submission keeps its score until someone has looked.
"""

from __future__ import annotations

import re

__all__ = ["PATTERNS", "scan_source", "student_cells", "scan_notebook"]

# (regular expression, what the flag says)
PATTERNS: list[tuple[str, str]] = [
    (r"\bsys\s*\.\s*modules\b", "edits sys.modules"),
    (
        r"^\s*(torch|np|numpy|F|nn|checks|transformer_lab)(\s*\.\s*\w+)+\s*=[^=]",
        "replaces a library function",
    ),
    (r"^\s*(torch|np|numpy|F|nn|checks|transformer_lab)\s*=[^=]", "rebinds a library's name"),
    (
        r"(?<![.\w])vars\s*\(|__dict__|(?<![.\w])globals\s*\(\s*\)\s*\[",
        "edits a module's namespace",
    ),
    (
        r"TorchFunctionMode|TorchDispatchMode|__torch_function__|__torch_dispatch__",
        "overrides PyTorch's function dispatch",
    ),
    (
        r"class\s+\w+\s*\(\s*(int|float|bool|str|tuple|list|(torch\.)?Tensor)\s*\)",
        "subclasses a built-in type or Tensor",
    ),
    (
        r"def\s+__(eq|ne|bool|lt|le|gt|ge|float|int|index|hash)__",
        "overrides a comparison or conversion",
    ),
    (
        r"\bthreading\b|\b_thread\b|\bmultiprocessing\b|concurrent\.futures",
        "starts threads or processes",
    ),
    (
        r"setprofile|settrace|_getframe|currentframe|f_back|f_locals|tb_frame",
        "inspects or hooks the call stack",
    ),
    (r"__code__|__globals__|__closure__|__kwdefaults__|__defaults__", "rewrites functions"),
    (r"\bgc\s*\.|\bctypes\b|\bimportlib\b|__import__|\bbuiltins\b", "reaches into the interpreter"),
    (r"(?<![.\w])(exec|eval|compile)\s*\(", "runs generated code"),
    (
        r"(?<![.\w])open\s*\(|\bpathlib\b|\bPath\s*\(|\bshutil\b|\bos\s*\.\s*(remove|rename|listdir|scandir|walk|chdir|unlink)",
        "reads or writes files",
    ),
    (r"\bsubprocess\b|\bos\s*\.\s*(system|popen|exec\w*|spawn\w*|fork|kill)", "runs programs"),
    (r"\bsocket\b|\burllib\b|\brequests\b|\bhttp\.client\b", "uses the network"),
    (r"\benviron\b|\bgetenv\b", "reads environment variables"),
    (r"^\s*[!%]", "runs a shell command or magic"),
    (
        r"_guards|_integrity|_tlab|transformer_lab\.checks\.\w|application/vnd\.tlab",
        "touches the grader's internals",
    ),
    (r"publish_display_data|get_ipython|IPython", "talks to the notebook machinery"),
    (r"gradebook|solutions/|\bsubmitted\b|autograded|feedback/", "names the course's files"),
    (
        r"(?<![.\w])(setattr|delattr)\s*\(|(?<![.\w])getattr\s*\(\s*\w+\s*,\s*[^'\"]",
        "changes attributes by name",
    ),
]
_COMPILED = [(re.compile(p, re.MULTILINE), why) for p, why in PATTERNS]


def scan_source(source: str) -> list[str]:
    """The flags one cell's source raises (each with the line that raised it)."""
    flags = []
    for pattern, why in _COMPILED:
        match = pattern.search(source)
        if match:
            start = source.rfind("\n", 0, match.start()) + 1
            end = source.find("\n", match.end())
            line = source[start : end if end != -1 else len(source)].strip()
            flags.append(f"{why}: `{line[:80]}`")
    return flags


def student_cells(nb, released) -> list:
    """Code cells written or changed by the student (not exactly a released cell's source)."""
    course = {c.source for c in released.cells if c.cell_type == "code"}
    out = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("locked") or (meta.get("grade") and not meta.get("solution")):
            continue  # test and read-only cells: nbgrader puts the instructor's source back
        if cell.cell_type == "code" and cell.source not in course:
            out.append(cell)
    return out


def scan_notebook(nb, released) -> list[str]:
    """Flags for every student-written cell of ``nb`` (``released``: the student version)."""
    flags: list[str] = []
    for cell in student_cells(nb, released):
        for flag in scan_source(cell.source):
            if flag not in flags:
                flags.append(flag)
    return flags
