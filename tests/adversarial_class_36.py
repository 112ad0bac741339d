"""Notebook-01 attacks written after issue 36: the kernel's claims, and answers reached elsewhere.

Each attack pairs a trick with *wrong* answers (``adversarial_class.WRONG``) for every exercise
it does not aim at, so any point it earns comes from the trick. The tricks:

- a shim on the grader's channel (a notebook global shadowing ``__import__``, the comm target
  registered again) answering from the package's own functions, dropping the forbidden list,
  reporting no calls and no findings, claiming timeouts and error types;
- other package functions that compute an answer: tiled attention with an identity V, the
  attention without input checks, ``SelfAttention`` with identity weights;
- hidden imports: ``importlib`` with names built at run time, ``getattr`` with joined strings,
  ``exec`` of base64-decoded code, a pickle that evaluates code;
- a forged ``KeyboardInterrupt`` (a claimed timeout), answers over the stated size and depth;
- escape sequences and spreadsheet formulas in comments, exception messages and file names.

``EXPECTED`` holds each student's allowed statuses, highest score and whether a flag is
required; the honest variants of ``adversarial_class`` keep full marks without a flag.
Graded by ``tests/test_grading_adversarial_36.py``; run as a script to print a table::

    python tests/adversarial_class_36.py ROOT [tlab grade options...]
"""

from __future__ import annotations

import base64
import pickle
import shutil
import sys
from pathlib import Path

import adversarial_class as base
import nbformat
from shipped_course import copy_course

A = base.A
ESC = "\x1b[2J\x1b[31m"
FORMULA = '=HYPERLINK("http://example.invalid","x")'

# A comm handler that answers every call in the grader's place (registered again after the
# grader's own): ``{answer}`` is the body computing the reply's JSON text from ``request``.
_SHIM = """\
import base64 as _b64, json as _json, pickle as _pickle

def _tlab_shim(comm, message):
    request = _pickle.loads(_b64.b64decode(message["content"]["data"]["r"]))
{answer}
    comm.send({{"r": reply}})
    comm.close()

get_ipython().kernel.comm_manager.register_target("tlab.grader", _tlab_shim)
"""
_FROM_PACKAGE = """\
    import math, torch, transformer_lab.tiled as _t
    try:
        x = request["args"][0]
        n = x.shape[-1]
        y = _t.tiled_attention(x * math.sqrt(n), torch.eye(n), torch.eye(n))[0]
        out = {"tensor": "float32", "shape": list(y.shape),
               "data": _b64.b64encode(y.float().contiguous().numpy().tobytes()).decode()}
        reply = _json.dumps({"out": out, "calls": [], "mutated": {}, "synced": {}})
    except BaseException as exc:
        reply = _json.dumps({"error": {"type": "KeyError", "message": str(exc)}, "calls": []})
    if request["op"] == "findings":
        reply = _json.dumps({"out": []})
"""
_CLAIM_TIMEOUT = """\
    reply = _json.dumps({"error": {"type": "KeyboardInterrupt", "message": ""}, "calls": []})
    if request["op"] in ("reset", "findings"):
        reply = _json.dumps({"out": None if request["op"] == "reset" else []})
"""
_OVERSIZED = """\
    reply = _json.dumps({"out": "x" * (65 << 20)})
    if request["op"] in ("reset", "findings"):
        reply = _json.dumps({"out": None if request["op"] == "reset" else []})
"""
_DEEP = """\
    deep = 0
    for _ in range(200):
        deep = {"seq": "list", "items": [deep]}
    reply = _json.dumps({"out": deep})
    if request["op"] in ("reset", "findings"):
        reply = _json.dumps({"out": None if request["op"] == "reset" else []})
"""

IMPORT_SHIM = """\
import builtins as _bi, types as _types, transformer_lab.attention as _ref

class _Serve:
    @staticmethod
    def serve(payload):
        import json
        return json.dumps({"out": None, "calls": []})

def __import__(name, *args, **kwargs):
    if name == "transformer_lab.checks.engine.serve":
        return _Serve
    return _bi.__import__(name, *args, **kwargs)

def softmax(x, dim=-1):
    return _ref.softmax(x, dim)
"""
TILED_IDENTITY = """\
import math
from transformer_lab.tiled import tiled_attention

def softmax(x, dim=-1):
    x = x.movedim(dim, -1)
    n = x.shape[-1]
    eye = torch.eye(n, dtype=x.dtype)
    return tiled_attention(x * math.sqrt(n), eye, eye)[0].movedim(-1, dim)
"""
ATTEND_UNCHECKED = """\
from transformer_lab.attention import attend

def scaled_dot_product_attention(q, k, v, mask=None):
    return attend(q, k, v, mask)
"""
LAYER_IDENTITY = """\
from transformer_lab import SelfAttention

def self_attention(x, w_q, w_k, w_v):
    layer = SelfAttention(w_q.shape[0], w_q.shape[1])
    with torch.no_grad():
        layer.q_proj.weight.copy_(w_q.T)
        layer.k_proj.weight.copy_(w_k.T)
        layer.v_proj.weight.copy_(w_v.T)
    return layer(x)
"""
IMPORTLIB_BUILT = """\
import importlib

_mod = importlib.import_module("transformer_lab." + "atten" + "tion")
softmax = getattr(_mod, "soft" + "max")
"""
GETATTR_JOINED = """\
def softmax(x, dim=-1):
    fn = getattr(torch, "".join(["soft", "max"]))
    return getattr(torch, "nan_to_" + "num")(fn(x, dim), 0.0)
"""
_B64_SOURCE = b"def softmax(x, dim=-1):\n    return torch.nan_to_num(torch.softmax(x, dim), 0.0)\n"
EXEC_BASE64 = f"""\
import base64
exec(base64.b64decode({base64.b64encode(_B64_SOURCE)!r}).decode())
"""


class _Eval:
    def __reduce__(self):
        source = "__import__('transformer_lab.attention', fromlist=['softmax']).softmax"
        return (eval, (source,))


PICKLED_CODE = f"""\
import pickle
softmax = pickle.loads({pickle.dumps(_Eval(), protocol=2)!r})
"""
FORGED_KEYBOARD = """\
def softmax(x, dim=-1):
    raise KeyboardInterrupt("the grader's time limit")
"""
ESCAPES = f"""\
# {ESC} {FORMULA}
def softmax(x, dim=-1):
    raise ValueError({(ESC + FORMULA)!r})
"""

# student -> {grade_id: trick}; the other answers are wrong
ATTACKS: dict[str, dict[str, str]] = {
    "import_shim": {"softmax_impl": IMPORT_SHIM},
    "comm_shim": {"softmax_impl": _SHIM.format(answer=_FROM_PACKAGE)},
    "tiled_identity": {"softmax_impl": TILED_IDENTITY},
    "attend_unchecked": {"sdpa_impl": ATTEND_UNCHECKED},
    "layer_identity": {"self_attention_impl": LAYER_IDENTITY},
    "importlib_built": {"softmax_impl": IMPORTLIB_BUILT},
    "getattr_joined": {"softmax_impl": GETATTR_JOINED},
    "exec_base64": {"softmax_impl": EXEC_BASE64},
    "pickled_code": {"softmax_impl": PICKLED_CODE},
    "forged_keyboard": {"softmax_impl": FORGED_KEYBOARD},
    "claimed_timeout": {"softmax_impl": _SHIM.format(answer=_CLAIM_TIMEOUT)},
    "oversized_answer": {"softmax_impl": _SHIM.format(answer=_OVERSIZED)},
    "deep_answer": {"softmax_impl": _SHIM.format(answer=_DEEP)},
    "escapes": {"softmax_impl": ESCAPES},
}
# Files beside the notebook, per student (a name a spreadsheet or a terminal would act on).
EXTRA_FILES = {"escapes": {"=SUM(1,2).py": f"# {ESC}\n", "\x1b[2Jnote.txt": "x\n"}}
HONEST = ("honest_full", "honest_stderr", "honest_stripped")
UNTOUCHED = base.UNTOUCHED
TORCH_SOFTMAX = 2  # the points of a softmax computed by PyTorch's own: kept, but flagged

# student -> (statuses allowed, highest score allowed, must be flagged)
EXPECTED: dict[str, tuple[set[str], float, bool]] = {
    **{s: ({"needs_review"}, 0, True) for s in ATTACKS},
    # the package's answers are absent from the graded kernel: no points, flag or not
    "tiled_identity": ({"graded", "needs_review"}, 0, False),
    "attend_unchecked": ({"graded", "needs_review"}, 0, False),
    "layer_identity": ({"graded", "needs_review"}, 0, False),
    # PyTorch's own softmax reached in hiding: its points stay, a person looks
    "getattr_joined": ({"needs_review"}, TORCH_SOFTMAX, True),
    "exec_base64": ({"needs_review"}, TORCH_SOFTMAX, True),
    # an error of the student's function: no timeout, no points
    "forged_keyboard": ({"graded", "needs_review"}, 0, False),
    "escapes": ({"graded", "needs_review"}, 0, False),
    **{s: ({"graded"}, 10, False) for s in HONEST},
    UNTOUCHED: ({"graded"}, 0, False),
}


def notebook_for(root: Path, student: str):
    if student not in ATTACKS:
        return base.notebook_for(root, student)
    nb = base._released(root)
    sources = dict(base.WRONG)
    for grade_id, trick in ATTACKS[student].items():
        replaces = any(f"def {name}(" in trick for name in ("softmax", "self_attention"))
        replaces = replaces or "scaled_dot_product_attention(" in trick or "softmax =" in trick
        sources[grade_id] = trick if replaces else trick + "\n" + sources[grade_id]
    base._answers(nb, sources)
    return nb


def submit(root: Path, student: str, nb) -> None:
    base.submit(root, student, nb)
    for name, text in EXTRA_FILES.get(student, {}).items():
        (root / "submitted" / student / A / name).write_text(text, encoding="utf-8")


def build(root: Path, students=None) -> list[str]:
    """Make the course in ``root`` and submit the class; returns the students submitted."""
    if (root / "solutions").exists():
        shutil.rmtree(root / "solutions")
    copy_course(root, A)
    names = list(students or [*ATTACKS, *HONEST, UNTOUCHED])
    for student in names:
        submit(root, student, notebook_for(root, student))
    return names


if __name__ == "__main__":
    import subprocess
    import time

    target = Path(sys.argv[1])
    build(target)
    started = time.monotonic()
    command = [sys.executable, "-m", "transformer_lab.cli", "--root", str(target), "grade", A]
    subprocess.run([*command, *sys.argv[2:]], check=False)
    print(f"graded in {time.monotonic() - started:.1f} s")
    assert nbformat  # the notebooks are nbformat's
