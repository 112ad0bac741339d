"""Bounded outputs: whatever a kernel prints, the autograded notebook and the feedback stay small.

Every output of every MIME type counts (text, images, HTML, JSON, SVG, custom types, and the
outputs' metadata), measured in UTF-8 bytes of its strings as stored in the notebook:

- **per cell** at most ``CELL_BYTES`` (200 kB), of which text (streams, ``text/*``) at most
  ``text_chars`` characters;
- **per notebook** at most ``NOTEBOOK_BYTES`` (2 MB) over all cells.

What does not fit is dropped, and one note per cell (a stdout stream) says how much was left
out and why. Error outputs are never dropped (nbgrader scores a cell by them): their message
and traceback are shortened instead (at most ``ERROR_BYTES`` each). So an autograded notebook
holds at most its source plus ``NOTEBOOK_BYTES`` plus ~1 kB of notes and ``ERROR_BYTES`` per
cell, and its feedback page that plus nbconvert's template (~300 kB).
"""

from __future__ import annotations

from dataclasses import dataclass

from nbformat import NotebookNode

__all__ = ["bound_outputs", "output_bytes", "CELL_BYTES", "NOTEBOOK_BYTES", "ERROR_BYTES"]

CELL_BYTES = 200_000
NOTEBOOK_BYTES = 2_000_000
ERROR_BYTES = 20_000  # an error output's message and traceback, shortened to fit
TEXT_CHARS = 20_000
META_BYTES = 1_000  # an output's metadata larger than this is dropped


def output_bytes(value) -> int:
    """UTF-8 bytes of every string in ``value`` (an output, its data, its metadata)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, dict):
        return sum(len(str(k)) + output_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(output_bytes(v) for v in value)
    return 8  # numbers, booleans, None


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _cut(text: str, room: int) -> str:
    """At most ``room`` UTF-8 bytes of ``text`` (never half a character)."""
    return text.encode("utf-8", "surrogatepass")[: max(room, 0)].decode("utf-8", "ignore")


def _shorten_error(output) -> None:
    output["evalue"] = _cut(str(output.get("evalue", "")), 2_000)
    lines, room = [], ERROR_BYTES - output_bytes(output["evalue"])
    for line in [str(t) for t in output.get("traceback", [])][-50:]:  # the end says most
        line = _cut(line, min(room, 4_000))
        room -= output_bytes(line)
        lines.append(line)
        if room <= 0:
            break
    output["traceback"] = lines


def bound_outputs(
    cell,
    nb=None,
    *,
    text_chars: int = TEXT_CHARS,
    cell_bytes: int = CELL_BYTES,
    notebook_bytes: int = NOTEBOOK_BYTES,
) -> None:
    """Shorten ``cell``'s outputs in place to the per-cell and per-notebook budgets.

    Args:
        cell: a code cell just executed.
        nb: the notebook it belongs to; its other cells' outputs count against
            ``notebook_bytes`` (None: only the cell budget applies).
        text_chars: characters of text (streams and ``text/*`` data) kept per cell.
        cell_bytes, notebook_bytes: the budgets, in bytes.
    """
    outputs = cell.get("outputs") or []
    if not outputs:
        return
    others = 0
    if nb is not None:
        others = sum(
            output_bytes(o)
            for c in nb.get("cells", [])
            if c is not cell and c.get("cell_type") == "code"
            for o in c.get("outputs", [])
        )
    budget = _Budget(room=max(0, min(cell_bytes, notebook_bytes - others)), text=text_chars)
    kept = [output for output in outputs if _keep(output, budget)]
    if budget.dropped:
        kept.append(
            NotebookNode(
                output_type="stream",
                name="stdout",
                text=f"\n[{budget.dropped} output(s) or part(s) of {budget.dropped_bytes:,} bytes "
                f"not kept by the grader: at most {cell_bytes:,} bytes per cell, {text_chars:,} "
                f"characters of text per cell and {notebook_bytes:,} bytes per notebook]\n",
            )
        )
    cell["outputs"] = kept


@dataclass
class _Budget:
    """What is left of one cell's budgets, and what was dropped so far."""

    room: int  # bytes
    text: int  # characters of text
    dropped: int = 0
    dropped_bytes: int = 0

    def drop(self, nbytes: int) -> None:
        self.dropped += 1
        self.dropped_bytes += nbytes


def _keep(output, budget: _Budget) -> bool:
    """Shorten one output to what ``budget`` has left; False when nothing of it is kept."""
    kind = output.get("output_type")
    if kind == "error":
        _shorten_error(output)
        budget.room -= output_bytes(output)
        return True
    if output_bytes(output.get("metadata", {})) > META_BYTES:
        output["metadata"] = NotebookNode()
    if kind == "stream":
        text = _text(output.get("text", ""))
        keep = _cut(text[: max(budget.text, 0)], budget.room)
        if len(keep) < len(text):
            budget.drop(output_bytes(text) - output_bytes(keep))
        if not keep:
            return False
        output["text"] = keep
        budget.text -= len(keep)
        budget.room -= output_bytes(output)
        return True
    if kind in ("display_data", "execute_result"):
        return _keep_data(output, budget)
    budget.drop(output_bytes(output))  # an output type nbformat does not know
    return False


def _keep_data(output, budget: _Budget) -> bool:
    data = output.get("data", {})
    budget.room -= output_bytes(output.get("metadata", {}))
    # text/plain first: it is what a student most needs, and every output has it.
    for mime in sorted(data, key=lambda m: (m != "text/plain", m)):
        value = data[mime]
        size = output_bytes(value)
        if mime.startswith("text/") and isinstance(value, (str, list)):
            text = _text(value)
            if len(text) > budget.text or size > budget.room:
                del data[mime]
                budget.drop(size)
                continue
            budget.text -= len(text)
        elif size > budget.room:
            del data[mime]
            budget.drop(size)
            continue
        budget.room -= size
    return bool(data)
