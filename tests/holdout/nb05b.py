"""Holdout mistakes for notebook 05 (the transformer block), second round.

Written from the notebook's text and solution alone, before reading the checks or the first
round's holdout (nb05.py); never used to tune the checks until measured.

Before tuning (measured on main's checks): 36 mistakes: 33 named, 2 generic, 1 misleading, 0 passed (92%).
After tuning (on the first set: 36/36 named.
Written after tuning (the after_* entries, 15), measured once before any further change: 14 named,
0 generic, 1 misleading (after_mlp_scaled_output, called a wrong activation), 0 passed (93%).