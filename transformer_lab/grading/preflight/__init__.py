"""Step 1, pre-flight: a submission made safe to run, or refused with a reason.

    integrity  the pre-flight of one submission: invalid files, renamed notebooks, deleted or
               edited graded cells (the verdict: ``Preflight``)
    repair     restoring graded cells from the release; matching notebooks by content
    nofollow   copying and reading files without following any link

Imports only the standard library and nbformat (it runs in the grading process before PyTorch).
"""
