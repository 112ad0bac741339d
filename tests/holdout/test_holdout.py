"""The holdout mistakes (written without reading the checks): no check may pass a wrong
implementation or name the wrong mistake, and each notebook keeps at least the share named that
its module records in ``NAMED_AT_LEAST`` (measured when the module was last changed)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from tests import holdout
from tests.holdout._harness import classify

MODULES = sorted(i.name for i in pkgutil.iter_modules(holdout.__path__) if i.name.startswith("nb"))


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.parametrize("name", MODULES)
def test_holdout(name):
    module = importlib.import_module(f"tests.holdout.{name}")
    outcomes = [(m, *classify(m)) for m in module.MISTAKES]
    wrong = [f"[{o}] {m.exercise}.{m.label}: {msg[:300]}" for m, o, msg in outcomes
             if o in ("passed", "misleading")]  # fmt: skip
    assert not wrong, "\n".join(wrong)
    named = sum(o == "named" for _, o, _ in outcomes) / len(outcomes)
    assert named >= module.NAMED_AT_LEAST, (
        f"{name}: {named:.0%} of {len(outcomes)} holdout mistakes named, "
        f"below the recorded {module.NAMED_AT_LEAST:.0%}"
    )
