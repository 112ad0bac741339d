"""Step 4, the instructor's record: what was decided, and every channel derived from it.

    gradebook   nbgrader's gradebook (SQLite or PostgreSQL) shared safely by several processes
    tables      tlab's own tables beside nbgrader's: grade history, test versions, due dates,
                extensions, roster extras
    ledger      the grade record: each submission's decided grade, written to every channel
    outcome     a submission's event -> its report row; failure reasons; backups
    report      the per-assignment status CSV that keeps "not graded" apart from 0
    feedback    the student's feedback page: hidden tests hidden, outputs sanitized
    feedback_record  the decided grade, flags and causes on that page
    decisions   the instructor's review decisions, stored in the gradebook
    late        due dates, extensions and the late policy (``tlab due``, ``tlab extend``)
    test_versions  the version of each graded cell's tests a submission was graded under
    review      ``tlab review``: resolving flagged submissions
    roster      the LMS class list (``tlab roster import``)
    export      Canvas and Moodle grade files checked against the roster (``tlab export``)
    formgrader  the formgrader's Autograde refused, pointing to ``tlab grade``

May import ``transformer_lab.grading.course``; nothing of the other steps.
"""
