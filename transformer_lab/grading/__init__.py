"""Course pipeline: author notebooks with tags, release them, grade submissions safely.

    authoring   tags -> nbgrader metadata (``tlab author``; what each tag means: cell_tags)
    release     solutions/ -> notebooks/ with nbgrader (``tlab release``)
    autograde   ``tlab grade``: pre-flight, nbgrader autograde/feedback/export, status report
    integrity   pre-flight of submissions: invalid files, deleted graded cells restored
                (the repairs: notebook_repair)
    execute     nbgrader Execute in the sandbox; graded cells decided by the judge
    sandbox     one bubblewrap sandbox per kernel (its command line: bwrap)
    judge       the graded cells' checks, run in the grading process (every point decided there)
    remote      the student's functions in the kernel as local proxies (checks.engine.serve answers;
                one call: remote_calls; the answers' codec: plain_data)
    feedback    feedback preprocessors that keep hidden tests hidden
    report      the per-assignment status CSV that never shows "could not grade" as 0
    course      locating the course and running nbgrader in a child process

Nothing here is imported by ``import transformer_lab``; the CLI imports it lazily.
"""
