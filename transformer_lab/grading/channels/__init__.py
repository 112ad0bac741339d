"""What people see, derived from the record: every channel shows the decided grade.

    publish        ``settle``: the decided grades written to the gradebook, the feedback pages,
                   the history and the report CSV, whenever a grade or a decision changes
    feedback       the student's feedback page: hidden tests hidden, outputs sanitized
    page_style     the feedback page readable for everyone (WCAG 2.1 AA)
    formgrader     the formgrader's Autograde refused, pointing to ``tlab grade``
    review         ``tlab review``: resolving flagged submissions
    roster         the LMS class list (``tlab roster import``)
    export         Canvas and Moodle grade files checked against the roster (``tlab export``)
    insights       what the class got wrong: verdicts counted per exercise and mistake
    insights_page  its self-contained HTML page and CSV (``tlab insights``)

May import ``record`` and ``transformer_lab.grading.course``; nothing of the other steps.
"""
