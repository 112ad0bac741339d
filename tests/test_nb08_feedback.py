"""Notebook 8's instant checks against its mistake catalogue (tests/feedback_nb08/catalogue.py).

For every realistic wrong implementation the check must fail with a message containing the
catalogued words (named), and "check passes" must imply "the graded cell passes": the graded
cell's code from the solution notebook is executed with the wrong function in its namespace.
Every correct variant must pass both. The share named is printed (pytest -s) and must be >= 95%.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from feedback_nb08.catalogue import CORRECT, WRONG

from transformer_lab import checks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "08_vision_transformer" / "08_vision_transformer.ipynb"
EXERCISES = ["patchify", "linear_to_conv", "vit_embed", "sinusoidal_2d", "attention_rollout"]


def _run_check(entry, hidden: bool = False) -> str | None:
    """None if the check passes, else its message."""
    try:
        getattr(checks, f"check_{entry.exercise}")(entry.fn, hidden=hidden)
    except AssertionError as err:
        return str(err)
    return None


def _graded_cell(exercise: str) -> str:
    nb = json.loads(NOTEBOOK.read_text())
    for cell in nb["cells"]:
        if f"id:{exercise}_tests" in cell.get("metadata", {}).get("tags", []):
            return "".join(cell["source"])
    raise AssertionError(f"no graded cell tagged id:{exercise}_tests in {NOTEBOOK.name}")


def _notebook_namespace() -> dict:
    """The imports cell and every solution cell of the notebook, executed once."""
    nb = json.loads(NOTEBOOK.read_text())
    namespace: dict = {}
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        first_code = cell["cell_type"] == "code" and "from transformer_lab import" in "".join(
            cell["source"]
        )
        if first_code or "solution" in tags:
            source = "".join(
                line
                for line in "".join(cell["source"]).splitlines(True)
                if not line.startswith("%")
            )
            exec(compile(source, "<notebook 8>", "exec"), namespace)
    return namespace


_NAMESPACE: dict = {}


def _graded_cell_passes(entry) -> bool:
    if not _NAMESPACE:
        _NAMESPACE.update(_notebook_namespace())
    namespace = dict(_NAMESPACE)
    namespace[entry.exercise] = entry.fn
    source = (
        _graded_cell(entry.exercise)
        .replace("### BEGIN HIDDEN TESTS", "")
        .replace("### END HIDDEN TESTS", "")
    )
    try:
        exec(compile(source, f"<graded {entry.exercise}>", "exec"), namespace)
    except Exception:
        return False
    return True


def test_catalogue_is_wide():
    counts = Counter(e.exercise for e in WRONG)
    assert set(counts) == set(EXERCISES)
    assert min(counts.values()) >= 8, counts


@pytest.mark.parametrize("entry", CORRECT, ids=[f"{e.exercise}-{e.label}" for e in CORRECT])
def test_correct_variants_pass_check_and_graded_cell(entry, capsys):
    assert _run_check(entry) is None, _run_check(entry)
    assert _run_check(entry, hidden=True) is None
    assert _graded_cell_passes(entry)


def test_mistakes_are_named_and_check_pass_implies_graded_pass(capsys):
    named, generic, passed_wrongly, contract = Counter(), [], [], []
    for entry in WRONG:
        message = _run_check(entry)
        if message is None:
            message = _run_check(entry, hidden=True)
        if message is None:
            passed_wrongly.append(entry.label)
            if not _graded_cell_passes(entry):
                contract.append(entry.label)
            continue
        if all(word in message for word in entry.words):
            named[entry.exercise] += 1
        else:
            generic.append(f"{entry.label}: expected {entry.words} in {message!r}")
    share = sum(named.values()) / len(WRONG)
    with capsys.disabled():
        print(
            f"\nnotebook 8: {sum(named.values())}/{len(WRONG)} mistakes named ({share:.0%}); "
            f"not named: {len(generic)}; passed the check: {len(passed_wrongly)}"
        )
    assert not contract, f"the check passed but the graded cell failed for {contract}"
    assert not passed_wrongly, f"wrong implementations passed the check: {passed_wrongly}"
    assert share >= 0.95, "\n".join(generic)
