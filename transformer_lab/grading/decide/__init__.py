"""Step 3, deciding the points: every point decided here, in the grading process.

    judge       a graded cell's checks run here, exactly as the student's instant check, with
                hidden cases from a per-run secret; the verdict is the cell's outcome
    remote      the student's functions in the kernel as local proxies
    calls       one call sent to the kernel and its answer read back
    plain_data  the answers' codec: plain values only, bounded in size

Imports the checks (and so PyTorch); nothing of ``run``, ``scan`` or ``record``.
"""
