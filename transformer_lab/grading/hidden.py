"""Hidden tests decided by the grader, not by the student's kernel.

In a graded test cell, ``checks.check_X(fn, hidden=True)`` runs the student's function in the
kernel on cases seeded from a secret made for this grading run (never stored in the package),
and publishes what the function returned as plain data (dtype, shape and bytes of tensors,
numbers) in a display output of type :data:`HIDDEN_MIME`. The grader (this module, in the
nbgrader process, which never runs student code) takes those outputs out of the notebook and
compares them with the outputs of the instructor's solution on the same cases, which it
computed beforehand by running the solution notebook with the same secret. A missing, extra or
different result fails the cell; what the kernel reported as suspicious becomes a review flag.

The comparison needs only numpy: nothing the student's kernel sends is unpickled or executed.
"""

from __future__ import annotations

import base64
import re

import numpy as np

__all__ = [
    "HIDDEN_MIME",
    "expected_hidden_checks",
    "take_records",
    "compare_records",
]

HIDDEN_MIME = "application/vnd.tlab.hidden+json"  # same string as checks._guards.HIDDEN_MIME
_CALL = re.compile(r"\b(check_\w+)\s*\(.*\bhidden\s*=\s*True")
ATOL, RTOL = 1e-4, 1e-3  # looser than the checks' own: the kernel's check is the strict one


def expected_hidden_checks(source: str) -> list[str]:
    """Names of the hidden checks a test cell calls (between the HIDDEN TESTS markers)."""
    names, inside = [], False
    for line in source.splitlines():
        if "BEGIN HIDDEN TESTS" in line:
            inside = True
        elif "END HIDDEN TESTS" in line:
            inside = False
        elif inside:
            names += _CALL.findall(line)
    return names


def take_records(cell) -> list[dict]:
    """Remove the hidden-check outputs from ``cell`` and return their payloads, in order."""
    records, kept = [], []
    for output in cell.get("outputs", []):
        data = output.get("data", {}) if output.get("output_type") == "display_data" else {}
        if HIDDEN_MIME in data:
            payload = data[HIDDEN_MIME]
            records.append(payload if isinstance(payload, dict) else {"invalid": True})
        else:
            kept.append(output)
    cell["outputs"] = kept
    return records


def _decode(item):
    if isinstance(item, dict) and "tensor" in item:
        try:
            dtype = np.dtype(item["tensor"])
            array = np.frombuffer(base64.b64decode(item["data"]), dtype=dtype)
            return ("tensor", item["tensor"], tuple(item["shape"]), array.reshape(item["shape"]))
        except (TypeError, ValueError, KeyError):
            return ("invalid",)
    if isinstance(item, dict) and "float" in item:
        try:
            return ("float", float.fromhex(item["float"]))
        except (TypeError, ValueError):
            return ("invalid",)
    return None


def _same(ours, theirs) -> bool:
    """Is the student's value ``theirs`` the solution's value ``ours``?"""
    a, b = _decode(ours), _decode(theirs)
    if a is not None or b is not None:
        if a is None or b is None or a[0] != b[0] or a[0] == "invalid":
            return False
        if a[0] == "float":
            return bool(np.isclose(a[1], b[1], atol=ATOL, rtol=RTOL, equal_nan=True))
        _, dtype_a, shape_a, x = a
        _, dtype_b, shape_b, y = b
        if dtype_a != dtype_b or shape_a != shape_b:
            return False
        if x.dtype.kind in "fc":
            return bool(np.allclose(y, x, atol=ATOL, rtol=RTOL, equal_nan=True))
        return bool(np.array_equal(x, y))
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if ours.keys() != theirs.keys():
            return False
        if "seq" in ours:
            items_a, items_b = ours.get("items", []), theirs.get("items", [])
            return (
                ours["seq"] == theirs["seq"]
                and isinstance(items_b, list)
                and len(items_a) == len(items_b)
                and all(_same(x, y) for x, y in zip(items_a, items_b))
            )
        return all(_same(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, bool) or isinstance(theirs, bool):
        return type(ours) is type(theirs) and ours == theirs
    return type(ours) is type(theirs) and ours == theirs


def compare_records(expected: list[str], reference: list[dict], student: list[dict]) -> str | None:
    """Why the student's hidden results fail (None when they match the solution's).

    The message names the check and how many hidden cases differ, never their inputs.
    """
    if len(student) != len(expected):
        return (
            f"the hidden tests expected results from {len(expected)} check(s) but received "
            f"{len(student)}: the checks were stopped or replaced"
        )
    for name, ours, theirs in zip(expected, reference, student):
        if theirs.get("check") != name:
            return f"the hidden tests expected results from {name}, but received another check's"
        calls_a, calls_b = ours.get("calls", []), theirs.get("calls", [])
        if not isinstance(calls_b, list) or len(calls_b) != len(calls_a):
            return (
                f"{name}: your function ran on {len(calls_b) if isinstance(calls_b, list) else 0}"
                f" of the {len(calls_a)} hidden cases"
            )
        wrong = sum(
            1
            for a, b in zip(calls_a, calls_b)
            if not isinstance(b, dict)
            or a.get("case") != b.get("case")
            or not _same(a["out"], b.get("out"))
        )
        if wrong:
            return (
                f"{name}: your function's results differ from the solution's on {wrong} of "
                f"{len(calls_a)} hidden cases"
            )
    return None
