"""nbgrader configuration for transformer-lab (nbgrader 0.9.x, metadata schema 3).

The repository root is the course directory:

    solutions/NN_topic/NN_topic.ipynb   nbgrader's *source* directory (instructor notebooks)
    notebooks/NN_topic/NN_topic.ipynb   nbgrader's *release* directory (student notebooks)
    submitted/STUDENT/NN_topic/         collected submissions (not in git)
    autograded/, feedback/, gradebook.db, reports/, .tlab/   grading output (not in git)

Use the `tlab` commands rather than calling nbgrader directly: `tlab release` regenerates
notebooks/ deterministically, `tlab grade NN_topic` wraps autograde + feedback + export with
the guards described in docs/instructor_guide.md.
"""

c = get_config()  # noqa: F821  (injected by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "transformer-lab"

# --- Gradebook --------------------------------------------------------------------------
# SQLite file gradebook.db by default. A class graded by several processes or machines, or
# served by JupyterHub's formgrader, shares one PostgreSQL database instead (psycopg 3,
# `pip install -e ".[postgres]"` in this repository); set the URL in the environment, not in git:
#   export TLAB_GRADEBOOK_URL="postgresql+psycopg://grader@db-host/transformer_lab"
import os  # noqa: E402

if os.environ.get("TLAB_GRADEBOOK_URL"):
    c.CourseDirectory.db_url = os.environ["TLAB_GRADEBOOK_URL"]
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    ".DS_Store",
]

# --- Execution while validating / autograding -------------------------------------------
# Per-cell limit. Graded cells run the course's checks on tiny tensors and training cells run
# in their reduced form under grading (NBGRADER_EXECUTION / TLAB_GRADING), so 30 s is generous;
# a hanging answer costs this much once per test cell that calls it, which is why `tlab grade`
# gives later cells only 3 s once a submission has lost 60 s to interrupted cells (--budget;
# slow cells that finish in time never count; see transformer_lab/grading/run/execute.py).
c.Execute.timeout = 30
c.Execute.interrupt_on_timeout = True
c.Execute.startup_timeout = 60
# (nbgrader's Execute always continues after errors; its allow_errors is not configurable.)

# --- Release ----------------------------------------------------------------------------
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# --- Autograde --------------------------------------------------------------------------
# Only `tlab grade` autogrades: nbgrader's own Autograde (the formgrader's Autograde button,
# `nbgrader autograde`) would run student code in its own process, unsandboxed, and delete
# tlab's autograded notebook first. It is refused before it touches anything, with a message
# saying what to run instead (transformer_lab/grading/channels/formgrader.py).
c.Autograde.exporter_class = "transformer_lab.grading.channels.formgrader.TlabOnlyExporter"
# Edited test cells are restored from the gradebook (nbgrader's default). Deleted graded cells
# are restored by `tlab grade` before nbgrader sees the notebook: nbgrader 0.9.6's own
# `add_missing_cells` raises KeyError when the deleted cell follows a non-graded cell.
c.OverwriteCells.add_missing_cells = False

# --- Feedback ---------------------------------------------------------------------------
# Feedback must not reveal hidden tests: remove their source (ClearHiddenTests) and shorten
# the tracebacks of graded cells to the final error line, which would otherwise quote the
# hidden lines around the failure.
#
# Feedback pages are opened in browsers logged in to Jupyter: nothing a student wrote or a
# kernel printed may run there. SanitizeOutputs keeps only inert output types (SVG becomes an
# image), and SanitizedHTMLExporter passes the page's body through the nh3 sanitizer (no
# script, event handler, javascript: URL, form or frame) under a Content-Security-Policy that
# forbids every script; MathJax goes too, so formulas show as LaTeX source.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "nbgrader.preprocessors.ClearHiddenTests",
    "transformer_lab.grading.channels.feedback.ClearHiddenTracebacks",
    "transformer_lab.grading.channels.feedback.SanitizeOutputs",
]
c.GenerateFeedback.exporter_class = "transformer_lab.grading.channels.feedback.SanitizedHTMLExporter"
