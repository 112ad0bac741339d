"""Holdouts written from the released notebooks' text alone, without reading the checks, their
catalogues or the earlier holdouts: one module per notebook (see tests/holdout/_harness.py)."""
