"""Print the outcome of every holdout mistake, and the counts per notebook.

.venv/bin/python -m tests.holdout.report          # all notebooks
.venv/bin/python -m tests.holdout.report 05 07 -v # some notebooks, with every message
"""

from __future__ import annotations

import collections
import importlib
import pkgutil
import sys

import torch

from tests import holdout
from tests.holdout._harness import Mistake, classify


def load(notebooks: list[str] | None = None) -> list[Mistake]:
    """Every mistake of the holdout modules ``nbNN``/``nbNNb`` (those named: "07" is both, "07b" one)."""
    found = []
    for info in pkgutil.iter_modules(holdout.__path__):
        if info.name.startswith("nb") and (
            not notebooks or {info.name[2:], info.name[2:4]} & set(notebooks)
        ):
            found += importlib.import_module(f"tests.holdout.{info.name}").MISTAKES
    return found


def main(argv: list[str]) -> dict[str, collections.Counter]:
    torch.set_num_threads(1)
    verbose = "-v" in argv
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for mistake in load([a for a in argv if not a.startswith("-")]):
        outcome, message = classify(mistake)
        counts[mistake.notebook][outcome] += 1
        if verbose or outcome != "named":
            print(f"[{outcome}] {mistake.notebook} {mistake.exercise}.{mistake.label}: "
                  f"{message[:400]}")  # fmt: skip
    print(f"{'notebook':8} {'total':>5} {'named':>5} {'generic':>7} {'mislead':>7} {'passed':>6}")
    total: collections.Counter = collections.Counter()
    for nb in sorted(counts):
        c = counts[nb]
        total.update(c)
        print(f"{nb:8} {sum(c.values()):5} {c['named']:5} {c['generic']:7} {c['misleading']:7} "
              f"{c['passed']:6}")  # fmt: skip
    print(f"{'all':8} {sum(total.values()):5} {total['named']:5} {total['generic']:7} "
          f"{total['misleading']:7} {total['passed']:6}")  # fmt: skip
    return counts


if __name__ == "__main__":
    main(sys.argv[1:])
