"""The one floor test of the mistake catalogues (tests/catalogues) and holdouts (tests/holdout):
no check may pass a wrong implementation or name the wrong mistake, and each module keeps at
least the share named that it records in ``NAMED_AT_LEAST`` (measured when it was last changed).
A catalogue also has at least eight mistakes and one correct variant per exercise of its
notebook (each notebook's test file runs the correct variants and the graded cells)."""

from __future__ import annotations

import pytest

from tests.holdout._harness import classify
from tests.holdout.report import SETS, modules
from transformer_lab.checks.registry import REGISTRY

# The text-only holdouts have their own floor test (tests/holdout_text/test_holdout_text.py,
# with the wrong implementations the course accepts on purpose); the report prints them all.
MODULES = modules(tuple(k for k in SETS if k != "text"))
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _name(kind_module) -> str:
    kind, module = kind_module
    return f"{kind}-{module.__name__.rsplit('.', 1)[1]}"


@pytest.mark.parametrize("kind_module", MODULES, ids=[_name(m) for m in MODULES])
def test_floor(kind_module):
    kind, module = kind_module
    outcomes = [(m, *classify(m)) for m in module.MISTAKES]
    wrong = [f"[{o}] {m.exercise}.{m.label}: {msg[:300]}" for m, o, msg in outcomes
             if o in ("passed", "misleading")]  # fmt: skip
    assert not wrong, "\n".join(wrong)
    named = sum(o == "named" for _, o, _ in outcomes) / len(outcomes)
    assert named >= module.NAMED_AT_LEAST, (
        f"{_name(kind_module)}: {named:.0%} of {len(outcomes)} mistakes named, "
        f"below the recorded {module.NAMED_AT_LEAST:.0%}"
    )
    if kind == "catalogue":
        notebook = module.__name__[-2:]
        for exercise in (e.name for e in REGISTRY.values() if e.number == notebook):
            n = sum(m.exercise == exercise for m in module.MISTAKES)
            assert n >= 8, f"{exercise}: {n} wrong implementations in the catalogue"
            assert any(c.exercise == exercise for c in module.CORRECT), exercise
