"""Print named / generic / misleading / passed counts per notebook for the catalogues.

.venv/bin/python -m tests.mistakes.report            # this checkout's checks
PYTHONPATH=/path/to/other/checkout python -m tests.mistakes.report   # another version
"""

from __future__ import annotations

import collections
import sys

from tests.mistakes import catalogue_01, catalogue_02, catalogue_03, catalogue_04, holdout
from tests.mistakes._harness import run_check
from transformer_lab import checks


def main(verbose: bool = False, holdout_only: bool = False) -> dict:
    counts: dict = collections.defaultdict(collections.Counter)
    cats = (holdout,) if holdout_only else (catalogue_01, catalogue_02, catalogue_03, catalogue_04)
    for cat in cats:
        for entry in cat.WRONG:
            try:
                outcome, message, _ = run_check(entry, checks)
            except Exception as exc:  # a check that crashes is a misleading result
                outcome, message = "misleading", f"check crashed: {exc!r}"
            counts[entry.notebook][outcome] += 1
            if verbose and outcome != "named":
                print(f"[{outcome}] {entry.exercise}: {entry.label} -> {message[:300]}")
    print(f"{'notebook':8} {'total':>5} {'named':>5} {'generic':>7} {'mislead':>7} {'passed':>6}")
    total = collections.Counter()
    for nb in sorted(counts):
        c = counts[nb]
        total.update(c)
        print(
            f"{nb:8} {sum(c.values()):5} {c['named']:5} {c['generic']:7} {c['misleading']:7} {c['passed']:6}"
        )
    print(
        f"{'all':8} {sum(total.values()):5} {total['named']:5} {total['generic']:7} "
        f"{total['misleading']:7} {total['passed']:6}"
    )
    return counts


if __name__ == "__main__":
    main(verbose="-v" in sys.argv, holdout_only="--holdout" in sys.argv)
