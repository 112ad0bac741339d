"""Print the outcome of every catalogue and holdout mistake, and the counts per notebook.

Three sets, side by side: the catalogues the checks are tuned on (tests/catalogues), the
project's holdouts (tests/holdout, written without reading the checks but by the project), and
the text-only holdouts (tests/holdout_text, written from the released notebooks alone by a
session that saw nothing else: the closest to mistakes nobody tuned for).

.venv/bin/python -m tests.holdout report              # every catalogue and holdout
.venv/bin/python -m tests.holdout report 05 07b -v    # some notebooks or rounds, every message
.venv/bin/python -m tests.holdout report --holdouts   # only the holdouts (or --catalogues, --text)
PYTHONPATH=/other/checkout python -m tests.holdout report   # another version's checks
"""

from __future__ import annotations

import collections
import importlib
import pkgutil
import sys
from types import ModuleType

import torch

from tests import catalogues, holdout, holdout_text
from tests.holdout._harness import Mistake, classify

SETS = {"catalogue": catalogues, "holdout": holdout, "text": holdout_text}
FLAGS = {"--catalogues": "catalogue", "--holdouts": "holdout", "--text": "text"}


def modules(kinds: tuple[str, ...] = tuple(SETS)) -> list[tuple[str, ModuleType]]:
    """(kind, module) for every ``nb*`` module of the sets named by ``kinds``."""
    found = []
    for kind in kinds:
        package = SETS[kind]
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.name.startswith("nb"):
                found.append((kind, importlib.import_module(f"{package.__name__}.{info.name}")))
    return found


def _wanted(name: str, wanted: list[str]) -> bool:
    """ "07" selects nb07, nb07b, nb07c; "07b" selects nb07b; "01" selects nb01_04 too."""
    stem = name.removeprefix("nb")
    if not wanted:
        return True
    if stem.startswith("01_04"):
        return any(w in ("01", "02", "03", "04") for w in wanted)
    return stem in wanted or stem[:2] in wanted


def load(notebooks: list[str] | None = None, kinds=("catalogue", "holdout")) -> list[Mistake]:
    """Every mistake of the selected modules (used by older scripts; see :func:`modules`)."""
    return [
        m
        for _, module in modules(kinds)
        if _wanted(module.__name__.rsplit(".", 1)[1], notebooks or [])
        for m in module.MISTAKES
    ]


def main(argv: list[str]) -> dict[str, collections.Counter]:
    torch.set_num_threads(1)
    verbose = "-v" in argv
    kinds = tuple(FLAGS[a] for a in argv if a in FLAGS) or tuple(SETS)
    wanted = [a for a in argv if not a.startswith("-")]
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for kind, module in modules(kinds):
        name = module.__name__.rsplit(".", 1)[1]
        if not _wanted(name, wanted):
            continue
        for mistake in module.MISTAKES:
            outcome, message = classify(mistake)
            counts[f"{kind} {name}"][outcome] += 1
            if verbose or outcome != "named":
                print(f"[{outcome}] {kind} {name} {mistake.exercise}.{mistake.label}: "
                      f"{message[:400]}")  # fmt: skip
    print(f"{'module':18} {'total':>5} {'named':>5} {'generic':>7} {'mislead':>7} {'passed':>6}")
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for key in counts:
        c = counts[key]
        totals[key.split()[0]].update(c)
        print(f"{key:18} {sum(c.values()):5} {c['named']:5} {c['generic']:7} "
              f"{c['misleading']:7} {c['passed']:6}")  # fmt: skip
    for kind, c in totals.items():
        print(f"{'all ' + kind + 's':18} {sum(c.values()):5} {c['named']:5} {c['generic']:7} "
              f"{c['misleading']:7} {c['passed']:6}")  # fmt: skip
    return counts


if __name__ == "__main__":
    main(sys.argv[1:])
