"""Keep nbgrader's own Autograde (the formgrader's button, ``nbgrader autograde``) out of the class.

nbgrader's Autograde runs every student's notebook in the process that called it: inside the
Jupyter server for the formgrader's Autograde button, with the server's rights, no sandbox and no
per-run secret, and with ``--force`` it first deletes the autograded notebook ``tlab grade``
made. The course's ``nbgrader_config.py`` therefore names :class:`TlabOnlyExporter` as
``Autograde.exporter_class``. nbgrader builds its exporter before it touches any file or the
gradebook, so a refusal there leaves everything as it was; the formgrader shows the message.

``tlab grade`` is let through: its grading processes carry a new secret per run in
``GuardedExecute.hidden_secret`` and replace Execute with the sandboxed ``GuardedExecute``.
The formgrader's Generate Feedback button stays available: it executes nothing and uses the
course's sanitising feedback pipeline (see ``nbgrader_config.py``).
"""

from __future__ import annotations

from nbconvert.exporters import NotebookExporter

__all__ = ["TlabOnlyExporter", "REFUSAL"]

REFUSAL = (
    "expected autograding through tlab's sandboxed grader, but nbgrader's own Autograde was "
    "called (the formgrader's Autograde button or `nbgrader autograde`), which would run student "
    "code unsandboxed in this process; nothing was changed: run "
    "`tlab grade ASSIGNMENT --student STUDENT` in a terminal instead."
)


def _run_by_tlab(config) -> bool:
    guarded = config.get("GuardedExecute", {})
    return bool(guarded.get("hidden_secret"))


class TlabOnlyExporter(NotebookExporter):
    """nbgrader's default exporter, refused unless ``tlab grade`` is the caller."""

    def __init__(self, config=None, **kwargs):
        parent = kwargs.get("parent")
        cfg = config if config is not None else getattr(parent, "config", None)
        if cfg is None or not _run_by_tlab(cfg):
            raise RuntimeError(REFUSAL)
        super().__init__(config=config, **kwargs)
