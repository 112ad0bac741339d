"""Print the outcome of every mistake of the text-only holdouts (tests/holdout_text), and the counts.

.venv/bin/python -m tests.holdout_text.report            # every module, the non-named ones listed
.venv/bin/python -m tests.holdout_text.report 05 07 -v   # some notebooks, every message

It reuses tests/holdout's harness (classify) so the outcomes mean the same as in its report.
"""

from __future__ import annotations

import collections
import importlib
import pkgutil
import sys
from types import ModuleType

import torch

from tests import holdout_text
from tests.holdout._harness import classify


def modules(wanted: list[str] | None = None) -> list[ModuleType]:
    """The ``nbNN`` modules of tests/holdout_text, optionally only the notebooks in ``wanted``."""
    found = []
    for info in sorted(pkgutil.iter_modules(holdout_text.__path__), key=lambda i: i.name):
        if info.name.startswith("nb") and (not wanted or info.name[2:4] in wanted):
            found.append(importlib.import_module(f"{holdout_text.__name__}.{info.name}"))
    return found


def main(argv: list[str]) -> dict[str, collections.Counter]:
    torch.set_num_threads(1)
    verbose = "-v" in argv
    wanted = [a for a in argv if not a.startswith("-")]
    counts: dict[str, collections.Counter] = {}
    for module in modules(wanted):
        name = module.__name__.rsplit(".", 1)[1]
        c = counts.setdefault(name, collections.Counter())
        for mistake in module.MISTAKES:
            outcome, message = classify(mistake)
            c[outcome] += 1
            if verbose or outcome != "named":
                print(f"[{outcome}] {name} {mistake.exercise}.{mistake.label} "
                      f"(wanted {'/'.join(mistake.words)}): {message[:300]}")  # fmt: skip
        for correct in module.CORRECT:
            outcome, message = classify(correct)
            if outcome != "passed":
                c["correct failed"] += 1
                print(
                    f"[correct failed] {name} {correct.exercise}.{correct.label}: {message[:300]}"
                )
    print(f"{'module':8} {'total':>5} {'named':>5} {'generic':>7} {'mislead':>7} {'passed':>6} "
          f"{'share':>6} {'correct failed':>14}")  # fmt: skip
    total: collections.Counter = collections.Counter()
    for name, c in counts.items():
        total.update(c)
        n = c["named"] + c["generic"] + c["misleading"] + c["passed"]
        print(f"{name:8} {n:5} {c['named']:5} {c['generic']:7} {c['misleading']:7} {c['passed']:6} "
              f"{c['named'] / max(n, 1):6.2f} {c['correct failed']:14}")  # fmt: skip
    n = total["named"] + total["generic"] + total["misleading"] + total["passed"]
    print(f"{'all':8} {n:5} {total['named']:5} {total['generic']:7} {total['misleading']:7} "
          f"{total['passed']:6} {total['named'] / max(n, 1):6.2f} {total['correct failed']:14}")  # fmt: skip
    return counts


if __name__ == "__main__":
    main(sys.argv[1:])
