"""Course pipeline: author notebooks with tags, release them, grade submissions safely.

    authoring   tags -> nbgrader metadata (``tlab author``)
    release     solutions/ -> notebooks/ with nbgrader (``tlab release``)
    autograde   ``tlab grade``: pre-flight, nbgrader autograde/feedback/export, status report
    integrity   pre-flight of submissions: invalid files, deleted graded cells restored
    execute     nbgrader Execute in the sandbox; graded cells decided by the judge
    judge       the graded cells' checks, run in the grading process (every point decided there)
    remote      the student's functions in the kernel as local proxies (checks.engine.serve answers)
    feedback    feedback preprocessors that keep hidden tests hidden
    report      the per-assignment status CSV that never shows "could not grade" as 0
    course      locating the course and running nbgrader in a child process

Nothing here is imported by ``import transformer_lab``; the CLI imports it lazily.
"""
