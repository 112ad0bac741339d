"""Step 4, the instructor's record: what was decided, and every channel derived from it.

    gradebook   nbgrader's gradebook (SQLite or PostgreSQL) shared safely by several processes
    outcome     a submission's event -> its report row; failure reasons; backups
    report      the per-assignment status CSV that keeps "not graded" apart from 0
    feedback    the student's feedback page: hidden tests hidden, outputs sanitized
    decisions   the instructor's review decisions, stored in the gradebook
    review      ``tlab review``: resolving flagged submissions
    roster      the LMS class list (``tlab roster import``)
    export      Canvas and Moodle grade files checked against the roster (``tlab export``)
    formgrader  the formgrader's Autograde refused, pointing to ``tlab grade``

May import ``transformer_lab.grading.course``; nothing of the other steps.
"""
