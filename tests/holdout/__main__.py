"""``python -m tests.holdout report [notebooks] [-v] [--catalogues|--holdouts]``: the one report
of the mistake catalogues and holdouts (see tests/holdout/report.py)."""

import sys

from tests.holdout.report import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "report":
        sys.exit(__doc__)
    main(args[1:])
