"""Child process that runs nbgrader steps in one interpreter (started by ``course.run_driver``).

Reads a JSON job on stdin::

    {"root": "/abs/course", "config": {"Execute.timeout": 10, ...}, "guarded": true,
     "ops": [{"op": "generate_assignment", "assignment": "A", "release_dir": "/abs/tmp"},
             {"op": "autograde", "assignment": "A", "student": "s1", "force": true},
             {"op": "grade_student", "assignment": "A", "student": "s1", "submission": "/abs",
              "staging": "/abs", "release_dir": "/abs/tmp", "feedback": true},
             {"op": "feedback", "assignment": "A", "student": "s1"},
             {"op": "scores", "assignment": "A"},
             {"op": "export", "to": "/abs/grades.csv"}]}

and prints one ``@@tlab {json}`` line per finished operation, so the parent sees progress
and keeps every result even if this process is killed half-way.
"""

from __future__ import annotations

import gc
import io
import json
import logging
import os
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))

# nbformat imports jsonschema, which compiles 38 URI grammars on import (about 0.6 s in every
# driver) when the optional rfc3987_syntax is installed; no nbgrader step validates IRI formats.
sys.modules.setdefault("rfc3987_syntax", None)


def grading_without_torch() -> None:
    """Make ``transformer_lab.grading`` importable here without the package's top level.

    The package's ``__init__`` imports PyTorch (about 2 s); most of what this process does
    (releasing, feedback, exports, the pre-flight and the code scan) needs only nbgrader. So
    ``transformer_lab`` starts as an empty package over its own folder, and its ``__init__`` runs
    the first time a name of the top level is asked for (the judge, which imports the checks).
    The one place the grader loads code by path: this script's own package, once.
    """
    import importlib.machinery
    import types

    if "transformer_lab" in sys.modules:
        return
    folder = os.path.dirname(os.path.dirname(_HERE))  # .../transformer_lab
    init = os.path.join(folder, "__init__.py")
    top = types.ModuleType("transformer_lab")
    top.__file__ = init
    top.__path__ = [folder]
    top.__spec__ = importlib.machinery.ModuleSpec(
        "transformer_lab", None, origin=init, is_package=True
    )
    top.__spec__.submodule_search_locations = [folder]

    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        del top.__dict__["__getattr__"]
        with open(init, encoding="utf-8") as f:
            exec(compile(f.read(), init, "exec"), top.__dict__)
        return getattr(top, name)

    top.__getattr__ = __getattr__
    sys.modules["transformer_lab"] = top
    # Modules that moved still import under their old names (a course's nbgrader_config.py).
    from transformer_lab._renames import install_module_aliases

    install_module_aliases()


def _execute():
    from transformer_lab.grading.run import execute

    return execute


def _guard_gradebook(url: str) -> None:
    from transformer_lab.grading.record.gradebook import guard_gradebook

    guard_gradebook(url)


def _emit(event: dict) -> None:
    sys.stdout.write("@@tlab " + json.dumps(event) + "\n")
    sys.stdout.flush()


def _load_config(root: str, overrides: dict, guarded: bool):
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=root).load_config()
    cfg.CourseDirectory.root = root
    extra = Config()
    for key, value in overrides.items():
        section, trait = key.rsplit(".", 1)
        extra[section][trait] = value
    cfg.merge(extra)
    if guarded:
        from nbconvert.preprocessors import ClearMetadataPreprocessor
        from nbgrader.preprocessors import (
            AssignLatePenalties,
            CheckCellMetadata,
            IgnorePattern,
            LimitOutput,
            SaveAutoGrades,
        )

        GuardedExecute = _execute().GuardedExecute

        # nbgrader's default autograde pipeline with Execute swapped for GuardedExecute.
        cfg.Autograde.autograde_preprocessors = [
            GuardedExecute,
            IgnorePattern,
            ClearMetadataPreprocessor,
            LimitOutput,
            SaveAutoGrades,
            AssignLatePenalties,
            CheckCellMetadata,
        ]
        # GuardedExecute inherits Execute's settings (timeouts) through the class hierarchy.
    return cfg


def _run_app(app) -> dict:
    """Start an nbgrader converter, capturing its log; never raises."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    app.log.addHandler(handler)
    result: dict = {"success": True}
    try:
        app.start()
    except BaseException:  # nbgrader raises NbGraderException and friends; keep going
        result["success"] = False
        result["error"] = traceback.format_exc()
    finally:
        app.log.removeHandler(handler)
    result["log"] = buffer.getvalue()[-20000:]
    # nbgrader logs per-student failures and carries on; surface them as a failure too.
    if "There was an error processing assignment" in result["log"]:
        result["success"] = False
    return result


def _scores(coursedir, assignment: str) -> dict:
    from nbgrader.api import Gradebook, MissingEntry

    out: dict = {}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            assignment_row = gb.find_assignment(assignment)
        except MissingEntry:
            return out
        max_score = assignment_row.max_score
        for submission in assignment_row.submissions:
            cells = {}
            for nb in submission.notebooks:
                for grade in nb.grades:
                    cells[f"{nb.name}:{grade.name}"] = {
                        "score": grade.score,
                        "max_score": grade.max_score,
                        "needs_manual_grade": grade.needs_manual_grade,
                        "auto_score": grade.auto_score,
                    }
            out[submission.student.id] = {
                "score": submission.score,
                "max_score": max_score,
                "needs_manual_grade": submission.needs_manual_grade,
                "timestamp": submission.timestamp.isoformat() if submission.timestamp else None,
                "cells": cells,
            }
    return out


def _count_timeouts(root: str, coursedir, assignment: str, student: str) -> int:
    import glob

    count = 0
    folder = coursedir.format_path(coursedir.autograded_directory, student, assignment)
    for path in glob.glob(os.path.join(folder, "*.ipynb")):
        try:
            nb = json.load(open(path, encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for cell in nb.get("cells", []):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error" and out.get("ename") == "CellTimeoutError":
                    count += 1
    return count


def _grade_student(op: dict, cfg, coursedir) -> dict:
    """Pre-flight, autograde and feedback for one student (never raises)."""
    from pathlib import Path

    import nbformat
    from nbgrader.converters import Autograde, GenerateFeedback

    from transformer_lab.grading.preflight.integrity import preflight

    assignment, student = op["assignment"], op["student"]
    release = Path(op["release_dir"]) / assignment
    released = {
        p.stem: nbformat.read(str(p), as_version=4) for p in sorted(release.glob("*.ipynb"))
    }
    check = preflight(student, Path(op["submission"]), released, Path(op["staging"]))
    result: dict = {
        "preflight": {
            "ok": check.ok,
            "reason": check.reason,
            "notes": check.notes,
            "restored": check.restored,
            "needs_review": check.needs_review,
        }
    }
    if not check.ok:
        result["success"] = False
        return result
    coursedir.student_id = student
    app = Autograde(coursedir=coursedir, config=cfg)
    app.force = True
    app.create_student = True
    execute = _execute()
    execute.RUN.clear()
    started = time.monotonic()
    result["autograde"] = _run_app(app)
    result["autograde_seconds"] = round(time.monotonic() - started, 2)
    result["success"] = result["autograde"]["success"]
    result["timeouts"] = _count_timeouts(coursedir.root, coursedir, assignment, student) + int(
        execute.RUN.get("timeouts", 0)
    )
    result["starved"] = int(execute.RUN.get("starved", 0))  # limits the machine used up
    # Review flags: what the kernels reported, and what the student's code shows: every file
    # of the (sealed) staged submission the kernel could run, read here.
    from transformer_lab.grading.scan.flags import scan_submission as scan

    flags = [f"code: {flag}" for flag in scan(Path(op["staging"]), released)]
    result["flags"] = flags + list(execute.RUN.get("flags", []))
    result["hidden_failures"] = list(execute.RUN.get("hidden_failures", []))
    verdicts = execute.RUN.get("verdicts", {})  # each check decided, per graded cell
    result["verdicts"] = [
        {"grade_id": g, **c} for g, v in verdicts.items() for c in v.get("checks", [])
    ]
    if result["success"] and op.get("feedback", True):
        app = GenerateFeedback(coursedir=coursedir, config=cfg)
        app.force = True
        started = time.monotonic()
        result["feedback_result"] = _run_app(app)
        result["feedback_seconds"] = round(time.monotonic() - started, 2)
    return result


def _job_ops(job: dict):
    """The job's operations, then (with ``"more": true``) one JSON line per operation from
    stdin until the parent closes it: a lane sends its next submission when it is free."""
    yield from job["ops"]
    if job.get("more"):
        for line in sys.stdin:
            if line.strip():
                yield json.loads(line)


def _run_op(op: dict, job: dict, root: str) -> dict:
    """One nbgrader operation; its event (never raises)."""
    from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    started = time.monotonic()
    kind = op["op"]
    event: dict = {"op": kind, **{k: v for k, v in op.items() if k != "op"}}
    try:
        # A fresh config per operation: nbgrader apps mutate the config they are given.
        op_cfg = _load_config(root, job.get("config", {}), job.get("guarded", True))
        if kind == "generate_assignment" and op.get("release_dir"):
            op_cfg.CourseDirectory.release_directory = op["release_dir"]
        coursedir = CourseDirectory(config=op_cfg)
        coursedir.assignment_id = op.get("assignment", "")
        if kind == "generate_assignment":
            app = GenerateAssignment(coursedir=coursedir, config=op_cfg)
            app.force = True
            app.create_assignment = True
            event.update(_run_app(app))
        elif kind == "autograde":
            coursedir.student_id = op["student"]
            app = Autograde(coursedir=coursedir, config=op_cfg)
            app.force = op.get("force", True)
            app.create_student = True
            event.update(_run_app(app))
        elif kind == "grade_student":
            event.update(_grade_student(op, op_cfg, coursedir))
        elif kind == "feedback":
            coursedir.student_id = op["student"]
            app = GenerateFeedback(coursedir=coursedir, config=op_cfg)
            app.force = True
            event.update(_run_app(app))
        elif kind == "scores":
            event.update({"success": True, "scores": _scores(coursedir, op["assignment"])})
        elif kind == "export":
            event.update(_export(coursedir, op_cfg, op["to"]))
        else:
            event.update({"success": False, "error": f"unknown op {kind!r}"})
    except BaseException:
        event.update({"success": False, "error": traceback.format_exc()})
    event["seconds"] = round(time.monotonic() - started, 2)
    return event


def _export(coursedir, cfg, to: str) -> dict:
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    plugin = CsvExportPlugin(config=cfg)
    plugin.to = to
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        plugin.export(gb)
    return {"success": True}


def main() -> None:
    if sys.path and os.path.abspath(sys.path[0]) == _HERE:
        del sys.path[0]  # run as a script: our sibling modules must not shadow top-level names
    grading_without_torch()
    job = json.loads(sys.stdin.readline())
    root = os.path.abspath(job["root"])
    os.chdir(root)

    from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback  # noqa: F401
    from nbgrader.coursedir import CourseDirectory

    # Several grading processes may share the gradebook (--jobs, --shard): see gradebook.py.
    base_cfg = _load_config(root, job.get("config", {}), False)
    _guard_gradebook(CourseDirectory(config=base_cfg).db_url)

    # What is loaded now (nbgrader and its converters) stays loaded: the collector's full passes
    # while students are graded skip it (their time 1.88 -> 0.71 s for four of notebook 01).
    gc.freeze()
    for op in _job_ops(job):
        _emit(_run_op(op, job, root))
    # Everything is reported. Interpreter shutdown would walk the whole heap (nbgrader, torch,
    # the checks) with the cyclic collector once more, for memory the OS takes back anyway:
    # 0.55 s of CPU per grading process (the real course's gradings). Frozen objects are skipped.
    gc.freeze()


if __name__ == "__main__":
    main()
