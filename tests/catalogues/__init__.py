"""The mistake catalogues, one module per notebook (``nbNN.py``), in the holdout's format
(tests/holdout/_harness.py): ``MISTAKES`` (wrong implementations with the words their check must
say), ``CORRECT`` (other valid styles that must pass) and ``NAMED_AT_LEAST``. The checks are
tuned on them; the holdouts in tests/holdout measure what tuning cannot."""
