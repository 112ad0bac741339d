"""Running notebooks 08 and 09's catalogues (tests/catalogues/nb08.py, nb09.py) in the graded
cells: the instant check, the graded cell tagged ``id:<exercise>_tests`` in the solution notebook
with ``fn`` in place of the student's function (in a namespace holding the notebook's imports and
its other solutions), and the share named. Entries are :class:`tests.holdout._harness.Mistake`s,
the one catalogue format; the floor of every catalogue is tests/holdout/test_holdout.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab import checks

ROOT = Path(__file__).resolve().parents[1]


def run_check(entry, hidden: bool = False) -> str | None:
    """None if the check passes, else its message."""
    try:
        getattr(checks, f"check_{entry.exercise}")(entry.fn, hidden=hidden)
    except AssertionError as err:
        return str(err)
    return None


@dataclass
class Notebook:
    path: Path
    _namespace: dict = field(default_factory=dict)

    @property
    def cells(self) -> list[dict]:
        return json.loads(self.path.read_text())["cells"]

    def namespace(self) -> dict:
        """The imports cell and every solution cell of the notebook, executed once."""
        if not self._namespace:
            for cell in self.cells:
                source = "".join(cell["source"])
                tags = cell.get("metadata", {}).get("tags", [])
                imports = cell["cell_type"] == "code" and "from transformer_lab import" in source
                if imports or "solution" in tags:
                    code = "".join(
                        line for line in source.splitlines(True) if not line.startswith("%")
                    )
                    exec(compile(code, str(self.path.name), "exec"), self._namespace)
        return dict(self._namespace)

    def graded_cell(self, exercise: str) -> str:
        for cell in self.cells:
            if f"id:{exercise}_tests" in cell.get("metadata", {}).get("tags", []):
                return "".join(cell["source"])
        raise AssertionError(f"no graded cell tagged id:{exercise}_tests in {self.path.name}")

    def graded_cell_passes(self, entry) -> bool:
        namespace = self.namespace()
        namespace[entry.exercise] = entry.fn
        source = self.graded_cell(entry.exercise)
        try:
            exec(compile(source, f"<graded {entry.exercise}>", "exec"), namespace)
        except Exception:
            return False
        return True


def score(notebook: Notebook, wrong: list) -> dict:
    """Named / not named / passed wrongly, and contract violations (check passed, grade failed)."""
    result = {"named": 0, "generic": [], "passed_wrongly": [], "contract": []}
    for entry in wrong:
        message = run_check(entry) or run_check(entry, hidden=True)
        if message is None:
            result["passed_wrongly"].append(entry.label)
            if not notebook.graded_cell_passes(entry):
                result["contract"].append(entry.label)
        elif all(word in message for word in entry.words):
            result["named"] += 1
        else:
            result["generic"].append(f"{entry.label}: expected {entry.words} in {message!r}")
    return result
