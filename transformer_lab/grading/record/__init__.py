"""Step 4, the instructor's record: the one grade record, in the gradebook.

    gradebook      nbgrader's gradebook (SQLite or PostgreSQL) shared safely by several processes
    tables         tlab's own tables beside nbgrader's: grade history, test versions, due dates,
                   extensions, roster extras
    decisions      the instructor's review decisions: where a decision is stored
    ledger         each submission's decided grade (autograded score, decision, late policy) and
                   the history of every change
    late           due dates, extensions and the late policy
    test_versions  the version of each graded cell's tests a submission was graded under
    outcome        a submission's event -> its report row; failure reasons; backups
    report         the per-assignment status report that keeps "not graded" apart from 0

May import ``transformer_lab.grading.course``; nothing of the other steps, nor of ``channels``
(which is derived from the record, never the other way round).
"""
