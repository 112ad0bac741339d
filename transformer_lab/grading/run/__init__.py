"""Step 2, running a submission: the sandbox, the kernel, and the processes that grade.

    driver     the grading process: nbgrader steps in one interpreter, one event per step
    lanes      several grading processes at once, and their events
    parallel   shards, per-run summaries, the shared store of finished work
    execute    nbgrader's Execute in the sandbox; each graded cell handed to the judge
    sandbox    one bubblewrap sandbox per kernel (its command line: bwrap; its CPU: cpushare)
    outputs    bounded outputs (text, images) kept in the graded notebook

May import ``preflight``, ``decide`` and ``scan``; nothing of ``record`` but the gradebook guard.
"""
