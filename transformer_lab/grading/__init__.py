"""The course's grader around nbgrader (the ``tlab`` command), laid out like its steps.

    authoring/  the instructor's notebooks: tags -> nbgrader metadata, release (``tlab author``,
                ``tlab release``)
    autograde   ``tlab grade``: orders the run, step by step (below), and writes the report
    course      locating the course; nbgrader in a child process (``run/driver.py``)
    preflight/  1. a submission made safe to run: copied without links, repaired, or refused
    run/        2. the submission run in a bubblewrap sandbox by lanes of grading processes
    decide/     3. every point decided here, outside the kernel: the judge and its calls
    scan/       the code scan: where a flag for a person is raised (never a lost point)
    record/     4. the instructor's record: the gradebook, decisions, the decided grade and
                its history, due dates, the report
    channels/   what people see, derived from the record: feedback pages, the formgrader,
                ``tlab review``, roster and LMS exports, class insights
    inert       text from a submission made inert for the terminal and for CSV files

Imports run one way: ``autograde`` may import any step; ``channels`` imports ``record``;
``run`` imports ``preflight``, ``decide`` and ``scan``; ``decide`` imports the checks (and so PyTorch);
``preflight`` and ``scan`` import only the standard library and nbformat. Nothing here is
imported by ``import transformer_lab``; the CLI imports it lazily.
"""
