"""The grader's code scan (grading/scan/flags.py) and structural similarity (grading/scan/similarity.py).

Pure Python, no kernel: every attack of issue 22 written several ways (full-width Unicode, a
helpers.py, runpy with blank lines, inspect.stack, sys._getframe(1).f_locals, gc, input
transformers, the package's reference called or copied) must raise a flag that names it with
its file, cell and line; honest submissions (the solutions, helper cells with loops, einsum,
numpy, %timeit, a helpers.py of plain functions) must raise none.

Run as a script to print the similarity calibration table::

    python tests/test_grading_review.py
"""

from __future__ import annotations

import ast
import io
import json
import keyword
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import adversarial_class as klass
import nbformat
import pytest

from transformer_lab.grading.scan import _cells as _review_cells
from transformer_lab.grading.scan import flags as review
from transformer_lab.grading.scan import forbidden, similarity, winnowing

REPO = Path(__file__).resolve().parents[1]
NB01 = "01_self_attention"


# --------------------------------------------------------------------------------------------
# Building submissions


def released(name: str):
    return nbformat.read(REPO / "notebooks" / name / f"{name}.ipynb", as_version=4)


def solution_answers(name: str) -> dict[str, str]:
    nb = nbformat.read(REPO / "solutions" / name / f"{name}.ipynb", as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: "\n".join(
            ln for ln in c.source.splitlines() if "SOLUTION" not in ln
        )
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def submission(
    tmp_path: Path,
    name: str = NB01,
    answers: dict[str, str] | None = None,
    added: list[tuple[str, str]] = (),
    files: dict[str, str] | None = None,
) -> Path:
    """A submission folder: the released notebook with ``answers`` (default: the solution's),
    cells ``added`` after the answer cell named (grade_id, source), and ``files`` beside it."""
    nb = released(name)
    sources = {**solution_answers(name), **(answers or {})}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in sources:
            cell.source = sources[gid]
    for after, source in reversed(list(added)):
        at = next(
            i
            for i, c in enumerate(nb.cells)
            if c.metadata.get("nbgrader", {}).get("grade_id") == after
        )
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(source))
    folder = tmp_path / "sub"
    folder.mkdir(exist_ok=True)
    nbformat.write(nb, folder / f"{name}.ipynb")
    for rel, text in (files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


def scan(folder: Path, name: str = NB01) -> list[str]:
    return review.scan_submission(folder, {name: released(name)})


def fullwidth(source: str) -> str:
    """Every identifier in full-width letters (Python reads them NFKC-normalised: same code)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        text = tok.string
        if tok.type == tokenize.NAME and not keyword.iskeyword(text):
            text = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() and c.isascii() else c for c in text)
        out.append((tok.type, text))
    return tokenize.untokenize(out)


# --------------------------------------------------------------------------------------------
# Attacks on notebook 01: each must be flagged, naming the file or cell and what it does.

STACK_ORACLE = """\
import inspect

def softmax(x, dim=-1):
    for info in inspect.stack():
        if "expected" in info.frame.f_locals:
            return info.frame.f_locals["expected"]
    return x
"""
STACK_ALIASED = """\
from inspect import stack as _where_am_i

def softmax(x, dim=-1):
    return next(f.frame for f in _where_am_i() if "expected" in f.frame.f_locals)
"""
GETFRAME = """\
import sys

def softmax(x, dim=-1):
    return sys._getframe(1).f_locals["expected"]
"""
GETFRAME_GETATTR = """\
import sys as _s

def softmax(x, dim=-1):
    return getattr(_s, "_getframe")(1).f_back.f_locals["expected"]
"""
CURRENTFRAME = """\
import inspect as _i

def softmax(x, dim=-1):
    frame = _i.currentframe()
    return frame.f_back.f_back.f_locals["expected"]
"""
GC_SCAN = """\
import gc

def softmax(x, dim=-1):
    for obj in gc.get_objects():
        if isinstance(obj, dict) and "expected" in obj:
            return obj["expected"]
"""
GC_REFERRERS = """\
from gc import get_referrers as _r

def softmax(x, dim=-1):
    return [d for d in _r(x) if isinstance(d, dict)][0].get("expected")
"""
INPUT_TRANSFORMER = """\
def _drop_asserts(lines):
    return [ln for ln in lines if not ln.lstrip().startswith("assert")]

get_ipython().input_transformers_cleanup.append(_drop_asserts)
"""
INPUT_TRANSFORMER_POST = """\
_ip = get_ipython()
_ip.input_transformers_post.append(lambda lines: [l.replace("assert", "pass #") for l in lines])
"""
AST_TRANSFORMER = """\
import ast

class _NoAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):
        return None

get_ipython().ast_transformers.append(_NoAsserts())
"""
EVENTS = """\
get_ipython().events.register("pre_run_cell", lambda info: None)
"""
RUNPY_BLANK_LINES = """\
import runpy
import transformer_lab.attention as _a
import tempfile, os

_src = "\\n" * 7 + open(_a.__file__).read()
_tmp = os.path.join(tempfile.mkdtemp(), "copy.py")
open(_tmp, "w").write(_src)
softmax = runpy.run_path(_tmp)["softmax"]
"""
COMPILE_EXEC = """\
import transformer_lab
from pathlib import Path

_ns = {}
_text = Path(transformer_lab.__file__).with_name("attention.py").read_text()
exec(compile("\\n\\n\\n" + _text, "attention.py", "exec"), _ns)
softmax = _ns["softmax"]
"""
GETSOURCE_EXEC = """\
import inspect, transformer_lab

_ns = {}
exec(inspect.getsource(transformer_lab.attention), _ns)
softmax = _ns["softmax"]
"""
FUNCTION_TYPE = """\
import types
import transformer_lab

softmax = types.FunctionType(transformer_lab.softmax.__code__.replace(co_firstlineno=1), globals())
"""
IMPORTLIB_RESOURCES = """\
import importlib.resources

_text = importlib.resources.files("transformer_lab").joinpath("attention.py").read_text()
"""
SPEC_FROM_FILE = """\
import importlib.util

_spec = importlib.util.spec_from_file_location("mine", "/usr/lib/python3/site-packages/transformer_lab/attention.py")
"""
DUNDER_IMPORT = """\
_i = __import__("inspect")

def softmax(x, dim=-1):
    return _i.stack()[1].frame.f_locals["expected"]
"""
SETTRACE = """\
import sys
sys.settrace(lambda frame, event, arg: None)
"""
AUDITHOOK = """\
import sys, atexit
sys.addaudithook(lambda event, args: None)
atexit.register(print, "bye")
"""
GUARDS = """\
from transformer_lab.checks.engine import grading_hooks as _guards
_guards._STATE["student"] = False
"""
CHECKS_PRIVATE = """\
import transformer_lab.checks as c
c._guards._STATE["secret"] = None
"""
TRACEBACK_FRAME = """\
def softmax(x, dim=-1):
    try:
        raise ValueError
    except ValueError as e:
        return e.__traceback__.tb_frame.f_back.f_locals["expected"]
"""
REFERENCE_CALLED = "def softmax(x, dim=-1):\n    return transformer_lab.softmax(x, dim)\n"
REFERENCE_IMPORTED = (
    "from transformer_lab.attention import softmax as _sm\n\n"
    "def softmax(x, dim=-1):\n    return _sm(x, dim)\n"
)
TORCH_SOFTMAX = "def softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n"
TENSOR_SOFTMAX = "def softmax(x, dim=-1):\n    return x.softmax(dim)\n"
F_SOFTMAX = "def softmax(x, dim=-1):\n    return F.softmax(x, dim=dim)\n"
NN_SOFTMAX = "def softmax(x, dim=-1):\n    return nn.Softmax(dim)(x)\n"
SDPA_REFERENCE = (
    "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    return transformer_lab.attention.scaled_dot_product_attention(q, k, v, mask)\n"
)
SDPA_TORCH = (
    "def scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
    "    return out, None\n"
)
# Calls the instructor's helper, which builds SelfAttention: reached, and flagged.
MACS_MEASURED = "def self_attention_macs(T, C, D):\n    return measured_macs(T, C, D)\n"

# name -> (answers, added cells, files, words every one of which must appear in one flag)
ATTACKS: dict[str, tuple[dict, list, dict, list[str]]] = {
    "stack_oracle": ({"softmax_impl": STACK_ORACLE}, [], {}, ["cell 7", "line 4", "inspect.stack"]),
    "stack_aliased": ({"softmax_impl": STACK_ALIASED}, [], {}, ["inspect.stack", "line 4"]),
    "stack_fullwidth": (
        {"softmax_impl": fullwidth(STACK_ORACLE)},
        [],
        {},
        ["inspect.stack", "line 4"],
    ),
    "stack_fullwidth_names": (
        {"softmax_impl": fullwidth(STACK_ORACLE)},
        [],
        {},
        ["look-alike Unicode", "is read as `inspect`"],
    ),
    "stack_in_helpers_py": (
        {"softmax_impl": "from helpers import softmax\n"},
        [],
        {"helpers.py": STACK_ORACLE},
        ["helpers.py line 4", "inspect.stack"],
    ),
    "fullwidth_helpers_py": (
        {"softmax_impl": "from helpers import softmax\n"},
        [],
        {"helpers.py": fullwidth(GETFRAME)},
        ["helpers.py line 4", "sys._getframe"],
    ),
    "helpers_in_subfolder": (
        {"softmax_impl": "import sys\nsys.path.append('lib')\nfrom deep import softmax\n"},
        [],
        {"lib/deep.py": GC_SCAN},
        ["lib/deep.py line 4", "gc"],
    ),
    "getframe": ({"softmax_impl": GETFRAME}, [], {}, ["sys._getframe", "f_locals", "line 4"]),
    "getframe_getattr": ({"softmax_impl": GETFRAME_GETATTR}, [], {}, ["sys._getframe", "f_back"]),
    "currentframe": ({"softmax_impl": CURRENTFRAME}, [], {}, ["inspect.currentframe"]),
    "dunder_import_stack": ({"softmax_impl": DUNDER_IMPORT}, [], {}, ["__import__"]),
    "gc_objects": ({"softmax_impl": GC_SCAN}, [], {}, ["gc.get_objects", "line 4"]),
    "gc_referrers": ({"softmax_impl": GC_REFERRERS}, [], {}, ["gc.get_referrers"]),
    "input_transformer_added_cell": (
        {},
        [("softmax_impl", INPUT_TRANSFORMER)],
        {},
        ["added by the student", "input_transformers_cleanup"],
    ),
    "input_transformer_post": (
        {"softmax_impl": INPUT_TRANSFORMER_POST},
        [],
        {},
        ["input_transformers_post"],
    ),
    "ast_transformer": ({"sdpa_impl": AST_TRANSFORMER}, [], {}, ["ast_transformers", "sdpa_impl"]),
    "ipython_events": ({}, [("sdpa_impl", EVENTS)], {}, [".events.register"]),
    "runpy_blank_lines": (
        {"softmax_impl": RUNPY_BLANK_LINES},
        [],
        {},
        ["runpy.run_path", "line 8"],
    ),
    "runpy_reads_file": ({"softmax_impl": RUNPY_BLANK_LINES}, [], {}, ["__file__", "line 5"]),
    "compile_exec": ({"softmax_impl": COMPILE_EXEC}, [], {}, ["compile", "exec", "line 6"]),
    "compile_reads_file": ({"softmax_impl": COMPILE_EXEC}, [], {}, ["__file__", "line 5"]),
    "getsource_exec": ({"softmax_impl": GETSOURCE_EXEC}, [], {}, ["inspect.getsource"]),
    "function_type": ({"softmax_impl": FUNCTION_TYPE}, [], {}, ["types.FunctionType"]),
    "function_type_code": ({"softmax_impl": FUNCTION_TYPE}, [], {}, ["__code__"]),
    "importlib_resources": ({"softmax_impl": IMPORTLIB_RESOURCES}, [], {}, ["importlib.resources"]),
    "spec_from_file": ({"softmax_impl": SPEC_FROM_FILE}, [], {}, ["site-packages"]),
    "settrace": ({}, [("softmax_impl", SETTRACE)], {}, ["sys.settrace"]),
    "audithook": ({}, [("softmax_impl", AUDITHOOK)], {}, ["sys.addaudithook"]),
    "atexit": ({}, [("softmax_impl", AUDITHOOK)], {}, ["atexit"]),
    "guards": ({}, [("softmax_impl", GUARDS)], {}, ["_guards"]),
    "checks_private": ({}, [("softmax_impl", CHECKS_PRIVATE)], {}, ["_STATE"]),
    "reference_called": (
        {"softmax_impl": REFERENCE_CALLED},
        [],
        {},
        ["reference softmax", "`softmax`"],
    ),
    "reference_imported": ({"softmax_impl": REFERENCE_IMPORTED}, [], {}, ["reference softmax"]),
    "reference_in_added_cell": (
        {"softmax_impl": "def softmax(x, dim=-1):\n    return _mine(x, dim)\n"},
        [
            (
                "sdpa_impl",
                "def _mine(x, d):\n    return _ref(x, d)\n\n_ref = transformer_lab.softmax\n",
            )
        ],
        {},
        ["reference softmax", "reached from the answer"],
    ),
    "reference_in_helpers_py": (
        {
            "softmax_impl": "import helpers\n\ndef softmax(x, dim=-1):\n    return helpers.fast(x, dim)\n"
        },
        [],
        {
            "helpers.py": "import torch\n\ndef fast(x, dim):\n    return torch.nn.functional.softmax(x, dim)\n"
        },
        ["built-in softmax", "helpers.py line 4"],
    ),
    "torch_softmax": ({"softmax_impl": TORCH_SOFTMAX}, [], {}, ["built-in softmax", "line 2"]),
    "tensor_softmax": ({"softmax_impl": TENSOR_SOFTMAX}, [], {}, ["built-in softmax"]),
    "f_softmax": ({"softmax_impl": F_SOFTMAX}, [], {}, ["built-in softmax"]),
    "nn_softmax": ({"softmax_impl": NN_SOFTMAX}, [], {}, ["built-in softmax"]),
    "fullwidth_torch_softmax": (
        {"softmax_impl": fullwidth(TORCH_SOFTMAX)},
        [],
        {},
        ["built-in softmax"],
    ),
    "sdpa_reference": (
        {"sdpa_impl": SDPA_REFERENCE},
        [],
        {},
        ["reference scaled_dot_product_attention"],
    ),
    "sdpa_torch": ({"sdpa_impl": SDPA_TORCH}, [], {}, ["built-in attention"]),
    "macs_measured": (
        {"macs_impl": MACS_MEASURED},
        [],
        {},
        ["SelfAttention", "self_attention_macs"],
    ),
    "pth_file": (
        {},
        [],
        {"evil.pth": "import os; exec(open('x').read())\n"},
        ["evil.pth line 1", "exec"],
    ),
    "json_payload": (
        {},
        [],
        {"payload.json": '{"code": "__import__(\\"gc\\").get_objects()"}'},
        ["payload.json"],
    ),
    "compiled_beside": (
        {},
        [],
        {"helpers.pyc": "not really bytecode"},
        ["helpers.pyc", "compiled"],
    ),
    "second_notebook": (
        {},
        [],
        {
            "extra.ipynb": nbformat.writes(
                nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(GETFRAME)])
            )
        },
        ["extra.ipynb cell 0", "sys._getframe"],
    ),
    "getattr_computed": (
        {
            "softmax_impl": 'import inspect\n\ndef softmax(x, dim=-1):\n    return getattr(inspect, "st" + "ack")()\n'
        },
        [],
        {},
        ["computed name", "line 4"],
    ),
    "attrgetter_text": (
        {
            "softmax_impl": 'from operator import attrgetter\n_up = attrgetter("f_back", "f_locals")\n'
        },
        [],
        {},
        ["'f_back'", "line 2"],
    ),
    "getframe_as_text": (
        {"softmax_impl": 'import sys\n_f = getattr(sys, "_get" "frame")(1)\n'},
        [],
        {},
        ["sys._getframe"],
    ),
    "unparsable_cell": (  # the text patterns still read NFKC-normalised code
        {"softmax_impl": "def softmax(x, dim=-1:\n    return ｉｎｓｐｅｃｔ.ｓｔａｃｋ()[1]\n"},
        [],
        {},
        ["line 2", "inspect.stack"],
    ),
    "builtins_exec": (
        {
            "softmax_impl": '_run = __builtins__["exec"] if isinstance(__builtins__, dict) else __builtins__.exec\n'
        },
        [],
        {},
        ["__builtins__", "line 1"],
    ),
    "traceback_frame": (
        {"softmax_impl": TRACEBACK_FRAME},
        [],
        {},
        ["__traceback__", "tb_frame", "line 5"],
    ),
    "pdb_frames": ({}, [("softmax_impl", "import pdb\n_p = pdb.Pdb()\n")], {}, ["pdb"]),
    "shadow_package": (
        {},
        [],
        {"transformer_lab/checks/__init__.py": "def check_softmax(f, hidden=False):\n    pass\n"},
        ["transformer_lab: named like the module", "instead of the installed one"],
    ),
    "shadow_numpy_file": ({}, [], {"torch.py": "from math import *\n"}, ["torch.py: named like"]),
    "sitecustomize": (
        {},
        [],
        {"sitecustomize.py": "import os\n"},
        ["sitecustomize.py: named like"],
    ),
    "checks_private_module": (
        {},
        [
            (
                "softmax_impl",
                "from transformer_lab.checks.engine import diagnose as d\nd.same = lambda *a: True\n",
            )
        ],
        {},
        ["transformer_lab.checks.engine.diagnose", "line 1"],
    ),
    "run_magic": ({}, [("softmax_impl", "%run helpers.py\n")], {}, ["magic", "%run"]),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_every_attack_is_flagged_with_its_evidence(tmp_path, attack):
    answers, added, files, words = ATTACKS[attack]
    flags = scan(submission(tmp_path, answers=answers, added=added, files=files))
    assert any(all(w in f for w in words) for f in flags), (words, flags)


def test_copies_beside_the_notebook_or_in_added_cells_are_flagged(tmp_path):
    sdpa = reference_source("transformer_lab/attention.py", "scaled_dot_product_attention")
    loss = reference_source(
        "transformer_lab/checks/nb07_gpt/lm_loss_catalogue.py", "reference_lm_loss"
    )
    folder = submission(
        tmp_path,
        answers={"sdpa_impl": "from helpers import attend as scaled_dot_product_attention\n"},
        added=[("softmax_impl", _renamed(loss))],
        files={"helpers.py": "\n\n" + fullwidth(_renamed(sdpa).replace("q0_", "attend", 1))},
    )
    flags = [f for f in scan(folder) if "matches the package's reference source" in f]
    assert any(
        f.startswith("`attend` (helpers.py line 3)") and "attention.py line 46" in f for f in flags
    ), flags
    assert any("added by the student" in f and "reference_lm_loss" in f for f in flags), flags


def test_copies_of_the_reference_are_flagged_as_copies(tmp_path):
    for variant, make in COPY_VARIANTS.items():
        source = make(reference_source("transformer_lab/attention.py", "softmax"))
        flags = scan(submission(tmp_path, answers={"softmax_impl": source}))
        if "stripped" in variant:  # 0.93 of its fingerprints: below the threshold, but the
            assert any("look-alike Unicode" in f for f in flags), flags  # disguise is named
            continue
        copies = [f for f in flags if "matches the package's reference source" in f]
        assert copies and "transformer_lab/attention.py line 24" in copies[0], (variant, flags)
        line = len(source) - len(source.lstrip("\n")) + 1  # the reflowed copy starts lower
        assert f"cell 7 (softmax_impl) line {line})" in copies[0], copies


# --------------------------------------------------------------------------------------------
# Honest submissions: no flag at all.

HONEST_HELPERS = """\
import numpy as np

def row_max(x, dim):
    # the largest score of each slice, kept for broadcasting
    return x.max(dim=dim, keepdim=True).values

def numpy_softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
"""
HONEST_SOFTMAX_LOOP = '''\
def softmax(x, dim=-1):
    """Softmax that never calls torch.softmax or F.softmax (they are forbidden here)."""
    x = x.movedim(dim, -1)
    out = torch.empty_like(x)
    flat, res = x.reshape(-1, x.shape[-1]), out.view(-1, x.shape[-1])
    for i in range(flat.shape[0]):
        row = flat[i]
        top = row.max()
        if torch.isinf(top) and top < 0:
            res[i] = 0.0
            continue
        e = torch.exp(row - top)
        res[i] = e / e.sum()
    return out.movedim(-1, dim)
'''
HONEST_SDPA_EINSUM = """\
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask == False, -float("inf"))
    weights = torch.softmax(scores, dim=-1)  # allowed here: only sdpa itself is forbidden
    weights = torch.nan_to_num(weights)
    return torch.einsum("...ts,...sd->...td", weights, v), weights
"""
HONEST_DEBUG = """\
import sys
print("debug: shapes", tuple(torch.randn(2, 3).shape), file=sys.stderr)
"""
SOFTMAX_WITH_HELPER = """\
def softmax(x, dim=-1):
    e = torch.exp(x - row_max(x, dim))
    return e / e.sum(dim, keepdim=True)
"""
SOFTMAX_COMMENTED = """\
def softmax(x, dim=-1):
    # no exec, no inspect.stack(), no torch.softmax here
    m = x.amax(dim, keepdim=True).clamp_min(-1e30)
    e = (x - m).exp()
    return e / e.sum(dim, keepdim=True).clamp_min(1e-30)
"""
HONEST_TIMEIT = "x = torch.randn(64, 64)\n%timeit softmax(x)\n"

HONEST: dict[str, tuple[dict, list, dict]] = {
    "solution": ({}, [], {}),
    "helper_cells": (
        {"softmax_impl": SOFTMAX_WITH_HELPER},
        [("softmax_impl", HONEST_HELPERS)],
        {},
    ),
    "helpers_py": (
        {"softmax_impl": "from helpers import row_max\n\n" + SOFTMAX_WITH_HELPER},
        [],
        {
            "helpers.py": HONEST_HELPERS,
            "notes.txt": "I tried torch.softmax first to compare.\n",
            "data.json": "[1, 2, 3]",
        },
    ),
    "loop_softmax": ({"softmax_impl": HONEST_SOFTMAX_LOOP}, [], {}),
    "einsum_sdpa": ({"sdpa_impl": HONEST_SDPA_EINSUM}, [], {}),
    "debug_print_and_timeit": (
        {},
        [("softmax_impl", HONEST_DEBUG), ("sdpa_impl", HONEST_TIMEIT)],
        {},
    ),
    "display_and_matplotlib": (
        {},
        [
            (
                "softmax_impl",
                "%matplotlib inline\nfrom IPython.display import display\ndisplay(softmax(torch.randn(3)))\n",
            )
        ],
        {},
    ),
    "comments_name_the_tricks": (
        {"softmax_impl": SOFTMAX_COMMENTED},
        [],
        {},
    ),
}


HONEST["reruns_the_instant_check"] = (
    {},
    [
        (
            "softmax_impl",
            'checks.check_softmax(softmax)\nprint(checks.diagnose("softmax", softmax))\n',
        )
    ],
    {},
)
HONEST["compares_with_the_reference_outside_the_answer"] = (
    {},
    [
        (
            "softmax_impl",
            "x = torch.randn(4, 5)\nprint(torch.allclose(softmax(x), transformer_lab.softmax(x)))\n",
        )
    ],
    {},
)
HONEST["stderr_inside_the_answer"] = (
    {
        "softmax_impl": klass.solution_source(REPO, "softmax_impl").replace(
            '    """\n',
            '    """\n    import sys\n    print("debug", tuple(x.shape), file=sys.stderr)\n',
            1,
        )
    },
    [],
    {},
)
HONEST["slow_answers"] = (
    {g: "time.sleep(6)\n" + klass.solution_source(REPO, g) for g in klass.ANSWERS[:3]},
    [("softmax_impl", 'print("x" * 100_000_000)')],
    {},
)
HONEST["old_attempt_in_checkpoints"] = (
    {},
    [],
    {
        ".ipynb_checkpoints/01_self_attention-checkpoint.ipynb": nbformat.writes(
            nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(TORCH_SOFTMAX)])
        )
    },
)


@pytest.mark.parametrize("case", sorted(HONEST))
def test_honest_submissions_raise_no_flag(tmp_path, case):
    answers, added, files = HONEST[case]
    assert scan(submission(tmp_path, answers=answers, added=added, files=files)) == []


NOTEBOOKS = sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir())


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_solution_notebook_raises_no_flag(tmp_path, name):
    assert scan(submission(tmp_path, name=name), name) == []


NB07_HELPERS = """\
def random_starts(n_tokens, T, B, generator):
    # one start per window, drawn with the generator the exercise passes in
    return torch.randint(0, n_tokens - T, (B,), generator=generator)
"""
NB09_EXPLORE = """\
sizes = [64, 128, 256]
for T in sizes:
    q = torch.randn(1, T, 32)
    out = tiled_attention(q, q, q, block_size=32)
    print(T, out.shape)
%timeit tiled_attention(q, q, q, block_size=64)
"""


@pytest.mark.parametrize(
    "name, added",
    [
        ("07_gpt", [("next_token_batch_impl", NB07_HELPERS)]),
        ("09_attention_at_scale", [("tiled_attention_impl", NB09_EXPLORE)]),
    ],
)
def test_honest_helper_cells_in_later_notebooks_raise_no_flag(tmp_path, name, added):
    assert scan(submission(tmp_path, name=name, added=added), name) == []


@pytest.mark.parametrize("student", sorted(set(klass.ATTACKS) - {"memory_hog"}))
def test_the_sandbox_test_class_attacks_are_flagged_by_the_scan(tmp_path, student):
    nb = klass.notebook_for(REPO, student)
    folder = tmp_path / "sub"
    folder.mkdir()
    nbformat.write(nb, folder / f"{NB01}.ipynb")
    for name, text in klass.EXTRA_FILES.get(student, {}).items():
        (folder / name).write_text(text, encoding="utf-8")  # e.g. helpers.py beside it
    assert scan(folder), student


def test_the_grader_runs_the_scan_without_torch(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "helpers.py").write_text(GETFRAME)
    code = (
        "import runpy, sys, json\n"
        "runpy.run_path(sys.argv[1], run_name='tlab_driver')['grading_without_torch']()\n"
        "from transformer_lab.grading.scan.flags import scan_source, scan_submission\n"
        "flags = scan_source('import gc\\nx = gc.get_objects()')\n"
        "flags += scan_submission(sys.argv[2], {})\n"
        "top = vars(sys.modules['transformer_lab'])\n"
        "print(json.dumps([flags, 'torch' in sys.modules, 'softmax' in top]))\n"
    )
    path = REPO / "transformer_lab" / "grading" / "run" / "driver.py"
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), str(folder)],
        capture_output=True,
        text=True,
        cwd="/",
        check=True,
    )
    flags, torch_loaded, top_level_ran = __import__("json").loads(out.stdout)
    assert "gc.get_objects" in flags[1] and "helpers.py line 4" in flags[-1], flags
    assert not torch_loaded and not top_level_ran


def test_an_untouched_notebook_raises_no_flag(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    nbformat.write(released(NB01), folder / f"{NB01}.ipynb")
    assert scan(folder) == []


def test_code_too_deep_for_the_parser_is_read_as_text(tmp_path):
    deep = "x = " + "a." * 5000 + "b\nimport gc\n"  # the parser gives up (RecursionError)
    folder = submission(
        tmp_path, files={"helpers.py": deep, "big.json": "[" + "1," * 1_100_000 + "1]"}
    )
    flags = scan(folder)
    assert any(f.startswith("helpers.py line 2: runs generated") for f in flags), flags
    assert not any("big.json" in f for f in flags)  # data too large to read is skipped silently
    (folder / "huge.py").write_text("#" * (review.MAX_FILE_BYTES + 1))
    assert any(f.startswith("huge.py: not scanned") for f in scan(folder))


def test_a_cell_the_student_marked_locked_is_still_read(tmp_path):
    folder = submission(tmp_path, added=[("softmax_impl", GETFRAME)])
    nb = nbformat.read(folder / f"{NB01}.ipynb", as_version=4)
    nb.cells[8].metadata["nbgrader"] = {"locked": True, "grade": True, "grade_id": "mine"}
    nbformat.write(nb, folder / f"{NB01}.ipynb")
    assert any("cell 8 (mine) line 4" in f and "sys._getframe" in f for f in scan(folder))


def test_malformed_notebooks_never_stop_the_scan(tmp_path):
    cells = [5, {"cell_type": "code", "source": 7, "metadata": []}]
    cells.append({"cell_type": "code", "source": ["import gc"], "metadata": {"nbgrader": 3}})
    (tmp_path / "odd.ipynb").write_text(json.dumps({"cells": cells}))
    (tmp_path / "broken.ipynb").write_text('{"cells": [ import inspect; inspect.stack()')
    flags = review.scan_submission(tmp_path, {})
    assert any(f.startswith("odd.ipynb cell") and "(gc)" in f for f in flags), flags
    assert any(f.startswith("broken.ipynb line 1") and "inspect.stack" in f for f in flags), flags
    assert review.scan_submission(tmp_path / "missing", {}) == []


def test_symlinks_are_never_followed(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text(STACK_ORACLE)
    folder = submission(tmp_path)
    (folder / "link.py").symlink_to(outside)
    (folder / "linked_dir").symlink_to(tmp_path)
    assert scan(folder) == []


def test_scan_notebook_keeps_working():
    nb = released(NB01)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "softmax_impl":
            cell.source = fullwidth(GETFRAME)
    flags = review.scan_notebook(nb, released(NB01))
    assert any("sys._getframe" in f and "cell 7" in f for f in flags), flags
    assert review.scan_notebook(released(NB01), released(NB01)) == []


def test_the_forbidden_table_follows_the_checks():
    table = forbidden.forbidden_table()
    paths = {e: {p for r in rules for p in r.paths} for e, rules in table.items()}
    assert "transformer_lab.attention.softmax" in paths["softmax"]
    assert "torch.nn.functional.softmax" in paths["softmax"]
    assert "softmax" in {b for r in table["softmax"] for b in r.builtin_names}
    # check_cross_attention allows the package's scaled_dot_product_attention (a filter on labels)
    assert "transformer_lab.attention.scaled_dot_product_attention" not in paths["cross_attention"]
    assert "transformer_lab.attention.scaled_dot_product_attention" in paths["tiled_attention"]
    # every Forbidden(...) the checks declare is resolved to something the scan can look for
    assert all(r.paths or r.builtin_names for rules in table.values() for r in rules)
    declared = sum(
        1
        for path in forbidden.checks_dir().rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Forbidden"
    )
    assert declared >= 50 and len(table) >= 35


# --------------------------------------------------------------------------------------------
# Similarity: calibration of copies vs honest alternatives vs the solutions.


def reference_source(file: str, qualname: str) -> str:
    text = (REPO / file).read_text()
    tree = ast.parse(text)
    for node, name in similarity._definitions(tree):
        if name == qualname:
            return ast.get_source_segment(text, node)
    raise KeyError(qualname)


def _renamed(source: str) -> str:
    names: dict[str, str] = {}
    out, prev = [], None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        text = tok.string
        if (
            tok.type == tokenize.NAME
            and not keyword.iskeyword(text)
            and prev != "."
            and text not in winnowing._KEPT_NAMES
        ):
            text = names.setdefault(text, f"q{len(names)}_")
        out.append((tok.type, text))
        prev = tok.string
    return tokenize.untokenize(out)


def _reformatted(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(getattr(body[0], "value", None), ast.Constant):
                node.body = body[1:] or [ast.Pass()]
    return "\n\n\n" + ast.unparse(tree)


def _stripped(source: str) -> str:
    """Validation removed: check_*(...) calls and `if ...: raise` blocks (a student's copy)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            node.body = [
                s
                for s in body
                if not (
                    isinstance(s, ast.Expr)
                    and isinstance(s.value, ast.Call)
                    and getattr(s.value.func, "id", "").startswith("check_")
                )
                and not (isinstance(s, ast.If) and all(isinstance(b, ast.Raise) for b in s.body))
            ] or [ast.Pass()]
    return _reformatted(ast.unparse(tree))


COPY_VARIANTS = {
    "verbatim": lambda s: s,
    "renamed": _renamed,
    "reformatted": _reformatted,
    "fullwidth": fullwidth,
    "stripped+renamed+fullwidth": lambda s: fullwidth(_renamed(_stripped(s))),
}
REFERENCES = {  # exercise -> (file, qualified name) of the package's reference
    "softmax": ("transformer_lab/attention.py", "softmax"),
    "scaled_dot_product_attention": (
        "transformer_lab/attention.py",
        "scaled_dot_product_attention",
    ),
    "split_heads": ("transformer_lab/heads.py", "split_heads"),
    "merge_heads": ("transformer_lab/heads.py", "merge_heads"),
    "multi_head_attention": ("transformer_lab/heads.py", "MultiHeadAttention.forward"),
    "sinusoidal_encoding": ("transformer_lab/positional.py", "sinusoidal_encoding"),
    "shift_matrix": ("transformer_lab/positional.py", "sinusoidal_shift_matrix"),
    "apply_rope": ("transformer_lab/positional.py", "apply_rotary"),
    "sinusoidal_2d": ("transformer_lab/positional.py", "sinusoidal_encoding_2d"),
    "causal_mask": ("transformer_lab/masks.py", "causal_mask"),
    "padding_mask": ("transformer_lab/masks.py", "padding_mask_from_lengths"),
    "sliding_window_mask": ("transformer_lab/masks.py", "sliding_window_mask"),
    "layer_norm": ("transformer_lab/blocks.py", "layer_norm"),
    "mlp": ("transformer_lab/blocks.py", "FeedForward.forward"),
    "pair_inputs": ("transformer_lab/bert_inputs.py", "pair_inputs"),
    "mlm_corrupt": ("transformer_lab/bert_inputs.py", "mlm_corrupt"),
    "masked_lm_loss": ("transformer_lab/bert_inputs.py", "masked_lm_loss"),
    "filter_logits": ("transformer_lab/models/sampling.py", "filter_logits"),
    "gpt_from_blocks": ("transformer_lab/models/gpt.py", "GPT.forward"),
    "patchify": ("transformer_lab/models/patches.py", "patchify"),
    "attention_rollout": ("transformer_lab/interpret.py", "attention_rollout"),
    "merge_softmax_stats": ("transformer_lab/tiled.py", "merge_softmax_stats"),
    "tiled_attention": ("transformer_lab/tiled.py", "tiled_attention"),
    "grouped_query_attention": ("transformer_lab/gqa.py", "grouped_query_attention"),
    "kv_cache_bytes": ("transformer_lab/gqa.py", "kv_cache_bytes"),
}

HONEST_ALTERNATIVES = {  # exercise answers written without reading the package's reference
    "softmax (loop)": HONEST_SOFTMAX_LOOP,
    "softmax (logsumexp)": """\
def softmax(x, dim=-1):
    lse = torch.logsumexp(x, dim=dim, keepdim=True)
    out = torch.exp(x - lse)
    return torch.where(torch.isnan(out), torch.zeros_like(out), out)
""",
    "scaled_dot_product_attention (einsum)": HONEST_SDPA_EINSUM,
    "split_heads (view/permute)": """\
def split_heads(x, n_heads):
    B, T, C = x.shape
    return x.view(B, T, n_heads, C // n_heads).permute(0, 2, 1, 3)
""",
    "merge_heads (loop)": """\
def merge_heads(x):
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)
""",
    "sinusoidal_encoding (loops)": """\
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    pe = torch.zeros(n_positions, d_model)
    for pos in range(n_positions):
        for i in range(0, d_model, 2):
            angle = pos / base ** (i / d_model)
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe
""",
    "causal_mask (loops)": """\
def causal_mask(T):
    m = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        for s in range(t + 1):
            m[t, s] = True
    return m
""",
    "layer_norm (by hand)": """\
def layer_norm(x, gain, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    centred = x - mu
    var = (centred * centred).mean(-1, keepdim=True)
    return centred / torch.sqrt(var + eps) * gain + bias
""",
    "patchify (loops)": """\
def patchify(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    rows = []
    for i in range(0, H, P):
        for j in range(0, W, P):
            rows.append(images[:, :, i : i + P, j : j + P].reshape(B, -1))
    return torch.stack(rows, dim=1)
""",
    "attention_rollout (loop)": """\
def attention_rollout(attentions):
    result = None
    for layer in attentions:
        a = layer.mean(dim=1)
        a = 0.5 * a + 0.5 * torch.eye(a.shape[-1])
        a = a / a.sum(-1, keepdim=True)
        result = a if result is None else a @ result
    return result
""",
    "grouped_query_attention (repeat_interleave)": """\
def grouped_query_attention(q, k, v):
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v
""",
    "kv_cache_bytes (formula)": """\
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    per_token = 2 * n_layers * n_kv_heads * d_head * bytes_per_value
    return per_token * seq_len * batch
""",
    "sliding_window_mask (loops)": """\
def sliding_window_mask(T, window):
    m = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        m[t, max(0, t - window + 1) : t + 1] = True
    return m
""",
    "merge_softmax_stats (own names)": """\
def merge_softmax_stats(m1, l1, o1, m2, l2, o2):
    big = torch.maximum(m1, m2)
    a, b = torch.exp(m1 - big), torch.exp(m2 - big)
    total = a * l1 + b * l2
    out = (a * l1 * o1 + b * l2 * o2) / total
    return big, total, out
""",
    "filter_logits (sort)": """\
def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.shape[-1])).values[..., -1:]
        z = torch.where(z < kth, torch.full_like(z, -float("inf")), z)
    if top_p is not None:
        s, order = torch.sort(z, descending=True)
        cum = torch.softmax(s, -1).cumsum(-1)
        drop = cum - torch.softmax(s, -1) > top_p
        s = s.masked_fill(drop, -float("inf"))
        z = torch.empty_like(z).scatter_(-1, order, s)
    return z
""",
    "tiled_attention (loops)": """\
def tiled_attention(q, k, v, block_size, mask=None):
    T, S = q.shape[-2], k.shape[-2]
    m = torch.full(q.shape[:-1] + (1,), -float("inf"))
    l = torch.zeros_like(m)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],))
    for start in range(0, S, block_size):
        kb, vb = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        s = q @ kb.transpose(-1, -2) / q.shape[-1] ** 0.5
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + block_size], -float("inf"))
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(new_m), torch.zeros_like(new_m), new_m)
        p = torch.exp(s - safe)
        scale = torch.exp(m - safe)
        l = l * scale + p.sum(-1, keepdim=True)
        o = o * scale + p @ vb
        m = new_m
    return o / torch.where(l > 0, l, torch.ones_like(l))
""",
}


def calibration() -> list[tuple[str, str, int, float, float, str]]:
    """(group, answer, fingerprints, containment, Jaccard, best-matching package unit)."""
    rows = []

    def add(group: str, label: str, source: str) -> None:
        units = similarity.units_of(source, label)
        unit = max(units, key=lambda u: u.size)
        m = similarity.best_match(unit)
        rows.append(
            (
                group,
                label,
                unit.size,
                m.containment if m else 0.0,
                m.jaccard if m else 0.0,
                f"{m.reference.name} ({m.reference.where})" if m else "-",
            )
        )

    for exercise, (file, qualname) in REFERENCES.items():
        source = reference_source(file, qualname)
        if qualname.endswith(".forward"):
            source = source.replace("\n    ", "\n")[4:] if source.startswith("    ") else source
        for variant, make in COPY_VARIANTS.items():
            add(f"copy: {variant}", exercise, make(source))
    for label, source in HONEST_ALTERNATIVES.items():
        add("honest alternative", label, source)
    # tests/holdout: ~1,200 students' mistakes written from the notebooks alone (honest, wrong)
    for path in sorted((REPO / "tests" / "holdout").glob("nb*.py")):
        for unit in similarity.units_of(path.read_text(), path.name):
            if "." not in unit.name and unit.size >= review.MIN_FLAG_FINGERPRINTS:
                m = similarity.best_match(unit)
                rows.append(
                    ("holdout mistake", f"{path.stem} {unit.name}", unit.size,
                     m.containment if m else 0.0, m.jaccard if m else 0.0,
                     f"{m.reference.name} ({m.reference.where})" if m else "-")
                )  # fmt: skip
    for name in NOTEBOOKS:
        for gid, source in solution_answers(name).items():
            for unit in similarity.units_of(source, gid):
                if "." not in unit.name:
                    add(
                        "solution",
                        f"{name[:2]} {unit.name}",
                        ast.get_source_segment(source, _node(source, unit.name)),
                    )
    return rows


def _node(source: str, name: str) -> ast.AST:
    return next(n for n, q in similarity._definitions(ast.parse(source)) if q == name)


def test_similarity_separates_copies_from_honest_answers_and_the_solutions():
    rows = calibration()
    big = [r for r in rows if r[2] >= review.MIN_FLAG_FINGERPRINTS]
    # Unedited copies (verbatim, renamed, reformatted, full-width) are all caught; a copy with
    # its validation cut out as well is caught only where little was cut (measured: 12 of 25).
    copies = [r for r in big if r[0].startswith("copy") and "stripped" not in r[0]]
    others = [r for r in big if not r[0].startswith("copy")]
    assert len(copies) >= 4 * (len(REFERENCES) - 1) and len(others) >= 1000  # mlp: too short
    low_copies = [r for r in copies if r[3] < review.SIMILARITY_THRESHOLD]
    assert not low_copies, low_copies
    assert min(r[3] for r in copies) == 1.0
    edited = [r for r in big if "stripped" in r[0]]
    assert sum(r[3] >= review.SIMILARITY_THRESHOLD for r in edited) >= 10, edited
    high_others = [r for r in others if r[3] >= review.SIMILARITY_THRESHOLD]
    assert not high_others, high_others


def test_winnowing_guarantee_and_normalisation():
    base = (
        "def f(a, b):\n    c = a @ b.transpose(-2, -1)\n    return torch.softmax(c, dim=-1) @ b\n"
    )
    renamed = "def g(xx, yy):\n    zz = xx @ yy.transpose(-2, -1)\n    return torch.softmax(zz, dim=-1) @ yy\n"
    wide = fullwidth(base)
    kinds = [k for k, _ in similarity.token_kinds(base)]
    assert kinds == [k for k, _ in similarity.token_kinds(renamed)]
    assert kinds == [k for k, _ in similarity.token_kinds(wide)]
    assert "transpose" in kinds and "softmax" in kinds and "V" in kinds
    # documentation and comments are not code
    documented = base.replace("):\n", '):\n    """Docs."""  # note\n', 1)
    assert (
        similarity.token_kinds(documented)[3:] != []
        and [k for k, _ in similarity.token_kinds(documented)] == kinds
    )
    # any shared run of K + W - 1 tokens shares a fingerprint
    words = [(f"t{i % 17}", i) for i in range(200)]
    a = similarity.fingerprints(words)
    b = similarity.fingerprints(words[50 : 50 + similarity.K + similarity.W - 1])
    assert set(a) & set(b)


if __name__ == "__main__":
    import statistics

    rows = calibration()
    print(f"{'group':28s} {'answer':44s} {'fp':>4s} {'cont':>5s} {'jacc':>5s}  best match")
    shown = [r for r in rows if r[0] != "holdout mistake"]
    shown += sorted((r for r in rows if r[0] == "holdout mistake"), key=lambda r: -r[3])[:10]
    for group, label, size, cont, jac, match in shown:
        print(f"{group:28s} {label[:44]:44s} {size:4d} {cont:5.2f} {jac:5.2f}  {match}")
    print(
        f"\ncontainment of units with >= {review.MIN_FLAG_FINGERPRINTS} fingerprints "
        f"(flagged at >= {review.SIMILARITY_THRESHOLD}):"
    )
    for group in dict.fromkeys(r[0] for r in rows):
        scores = [r[3] for r in rows if r[0] == group and r[2] >= review.MIN_FLAG_FINGERPRINTS]
        print(f"  {group:28s} n={len(scores):4d}  min {min(scores):.2f}  median "
              f"{statistics.median(scores):.2f}  max {max(scores):.2f}  flagged "
              f"{sum(c >= review.SIMILARITY_THRESHOLD for c in scores)}")  # fmt: skip


def _answer_cells() -> dict[str, tuple[str, str, list[str]]]:
    """{function or class an answer defines: (notebook, grade_id, exercises its tests check)}."""
    out = {}
    for name in NOTEBOOKS:
        nb = released(name)
        exercises = _review_cells.answer_exercises(nb)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution"):
                for fn in re.findall(r"^(?:def|class)\s+(\w+)", cell.source, re.MULTILINE):
                    out[fn] = (name, meta["grade_id"], exercises.get(meta["grade_id"], []))
    return out


ANSWER_CELLS = _answer_cells()
FORBIDDEN_CASES = [
    (fn, exercise, rule.label, path)
    for fn, (_, _, exercises) in sorted(ANSWER_CELLS.items())
    for exercise in exercises
    for rule in forbidden.forbidden_table().get(exercise, ())
    for path in (rule.paths or [f"torch.{b}" for b in rule.builtin_names])[:1]
]


@pytest.mark.parametrize("fn, exercise, label, path", FORBIDDEN_CASES)
def test_every_forbidden_reference_of_every_exercise_is_flagged(
    tmp_path, fn, exercise, label, path
):
    name, grade_id, _ = ANSWER_CELLS[fn]
    source = f"import {path.split('.')[0]}\n\ndef {fn}(*args, **kwargs):\n    return {path}(*args, **kwargs)\n"
    flags = scan(submission(tmp_path, name=name, answers={grade_id: source}), name)
    assert any(label in f and f"the exercise `{exercise}` forbids" in f for f in flags), flags


def test_the_forbidden_cases_cover_every_notebook():
    assert len(FORBIDDEN_CASES) >= 60
    assert {ANSWER_CELLS[fn][0] for fn, *_ in FORBIDDEN_CASES} == set(NOTEBOOKS)


@pytest.mark.parametrize("label", sorted(HONEST_ALTERNATIVES))
def test_honest_alternatives_as_answers_raise_no_flag(tmp_path, label):
    fn = label.split(" ")[0]
    name, grade_id, _ = ANSWER_CELLS[fn]
    folder = submission(tmp_path, name=name, answers={grade_id: HONEST_ALTERNATIVES[label]})
    assert scan(folder, name) == []
