"""Instant checks for the course's exercises, shared by the notebooks and the test suite.

Usage in a notebook::

    from transformer_lab import checks

    def softmax(x, dim=-1):
        ...

    checks.check_softmax(softmax)               # instant feedback
    checks.check_softmax(softmax, hidden=True)  # in a graded cell's hidden part: other seeds/shapes

Each ``check_<exercise>(student_fn, hidden=False)`` runs the student's function on several
seeded cases and edge cases, compares it with the package's reference computed in the same
process on the same inputs, and either prints one line (``✓ check_softmax passed: 9 cases.``)
or raises :class:`CheckFailed` (an ``AssertionError``) with one short message that names the
most likely mistake (softmax over the wrong dimension, missing sqrt(d) scaling, mask applied
after the softmax, ...). IPython shows the student's line and that message, without the checks'
frames. A function that raises, returns None (untouched ``raise NotImplementedError``), the
wrong tuple, shape, dtype or device, or changes its inputs gets a clear message too.

The diagnosis combines each exercise's catalogue of known mistakes with generic evidence that
holds for any tensor exercise (transposed axes, a constant factor such as sqrt(D), an ignored
argument, right for the first batch element only, wrong only on fully masked rows, shifted by
one, ...): see :mod:`transformer_lab.checks.engine.diagnose`.

For explorers and tools, the verdict as data (never raises for the student's code)::

    checks.diagnose(exercise, student_fn, case=None) -> checks.Diagnosis | None
        exercise: a key of checks.EXERCISES ("softmax", "scaled_dot_product_attention", ...)
        case: None (run the instant check), or the inputs of one call: a tuple of positional
              arguments or {"args": (...), "kwargs": {...}}
        Diagnosis(message, named, case, student, reference): the check's verdict, whether it
              names a mistake, and the outputs of the failing case (or of `case`).

While the student's function runs, the reference for the graded thing is disabled (a call,
even under another name, fails the check), and every check first verifies that nothing it
relies on (``torch.allclose``, numpy's comparisons, the references, these checks) was
replaced by notebook code. See :mod:`transformer_lab.checks.engine.forbid` and
:mod:`transformer_lab.checks.engine.guards`.

The package reads like the course::

    checks/
      __init__.py, __main__.py   this namespace; ``python -m transformer_lab.checks``
      registry.py, exercises.json  every exercise declared once, and the same facts as plain data
      engine/                    what every exercise shares: running cases (core, expect),
                                 evidence and diagnosis (evidence, diagnose, fallback, the
                                 attention core's attention_evidence and attention_mistakes),
                                 messages, what the checks trust and forbid (guards, forbid),
                                 grading (grading_hooks; serve: the grader's requests) and
                                 api (``checks.diagnose``)
      nb00_tokens_and_embeddings/ ... nb09_attention_at_scale/
                                 one subpackage per notebook (named after its folder in
                                 solutions/): one module per exercise's check, beside it the
                                 catalogues of mistakes and evidence it uses (``*_catalogue``,
                                 ``*_mistakes``, ``*_evidence``, ``*_probes``); e.g. notebook
                                 07's ``causal_lm_loss`` is checked in ``nb07_gpt/lm_loss.py``

Every exercise is declared once, beside its check, with
:func:`transformer_lab.checks.registry.register`: its notebook, signature, graded cells and
points, the check and the reference it is compared with. This module imports every module of the
package and its subpackages (each registers its exercises: a new module needs no listing),
publishes ``check_<name>`` for each, and seals them all.
The list of exercises and signatures is docs/api.md's "Exercises" table, generated from the
registry; ``transformer_lab/checks/exercises.json`` holds the same facts as plain data.
"""

import importlib
import pkgutil
import sys

from transformer_lab.checks.engine import grading_hooks as _hooks
from transformer_lab.checks.engine import guards as _guards
from transformer_lab.checks.engine.api import EXERCISES, diagnose
from transformer_lab.checks.engine.core import CheckFailed
from transformer_lab.checks.engine.diagnose import Diagnosis
from transformer_lab.checks.nb05_transformer_block.sublayers import Sublayers, sublayers_of
from transformer_lab.checks.registry import REGISTRY

# Every module of this package, imported once: each registers the exercises its checks serve.
for _info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
    if not _info.name.endswith(".__main__"):  # the command that regenerates the docs' tables
        importlib.import_module(_info.name)


def verify_integrity() -> None:
    """Raise AssertionError if notebook code replaced anything the checks rely on."""
    _guards.verify("verify_integrity")


# checks.check_<name> for every exercise; under grading, a hidden check sends its results to
# the grader (see engine.grading_hooks.hidden_entry). checks.EXERCISES keeps the unwrapped checks.
for _exercise in REGISTRY.values():
    globals()[_exercise.check.__name__] = _hooks.hidden_entry(_exercise.check)

__all__ = [e.check.__name__ for e in REGISTRY.values()] + [
    "Sublayers",
    "sublayers_of",
    "verify_integrity",
    "diagnose",
    "Diagnosis",
    "CheckFailed",
    "EXERCISES",
]

del _info, _exercise

# Snapshot what the checks trust, then make every module of this package read-only.
_guards.take_snapshot()
for _name in sorted(name for name in sys.modules if name.startswith(f"{__name__}.")):
    _guards.seal(_name)
del _name
_guards.seal(__name__)
