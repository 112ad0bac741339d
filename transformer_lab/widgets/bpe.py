"""BPE explorer: how a sentence splits as the number of merges grows (notebook 0).

The merges are learned once with the package's reference (:func:`transformer_lab.bpe.train_merges`)
on a training text; the slider keeps the first k of them. The top panel draws the sentence cut
into its tokens (one box per token, spaces shown as ``·``); the bottom one the number of tokens
against k, for the sentence and for held-out text, with the vocabulary size 256 + k. With your
``encode``, its tokens are drawn under the reference's, red where they differ, and the check's
diagnosis is shown under the plot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from transformer_lab import bpe
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student

__all__ = ["bpe_explorer"]

SENTENCE = "The transformers are awesome, but unbelievably hungry!"
_COLOURS = ("#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb")


def _shown(token: str) -> str:
    return token.replace(" ", "·").replace("\n", "⏎")


def _student_ids(student: Student, sentence: str, merges: list) -> list[int] | None:
    """The student's encoding as a list of ints, or None with ``student.error`` set."""
    ok, out = student._invoke((sentence, [tuple(p) for p in merges]), {})
    if not ok:
        return None
    if out is None:
        student.error = f"your {student.name} returned None: did you forget `return`?"
        return None
    if not isinstance(out, list) or not all(isinstance(i, int) for i in out):
        student.error = f"your {student.name} returned a {type(out).__name__}, not a list of ints."
        return None
    top = 255 + len(merges)
    if any(not 0 <= i <= top for i in out):
        student.error = f"your {student.name} returned ids outside 0..{top}."
        return None
    return out


def bpe_explorer(
    encode: Any = None,
    *,
    sentence: str = SENTENCE,
    text: str | None = None,
    max_merges: int = 200,
    merges: int = 40,
) -> Any:
    """A slider over the number of merges, showing how ``sentence`` splits into tokens.

    Args:
        encode: optional, your ``encode(text, merges) -> list of ids``; drawn under the reference.
        sentence: the text to split (keep it to one line of about 60 characters).
        text: the text to learn from, its last 10% held out (default: the first 100,000
            characters of tiny Shakespeare, and the next 10,000 held out).
        max_merges: how many merges to learn (the slider's range, 10..2000).
        merges: the slider's first value.
    Returns:
        An Explorer with control ``merges``; ``state()`` has ``merges`` (k), ``vocab_size``,
        ``tokens`` (the reference's token strings), ``n_tokens``, ``chars_per_token``
        (held-out text) and ``new_token`` (merge k's token, None at k = 0); with your
        ``encode`` also ``yours`` (token strings or None), ``differs`` and ``error``.
        Under grading, a placeholder.
    """
    student = Student(encode, "bpe_encode", "encode")
    if not isinstance(sentence, str) or not sentence:
        raise ValueError(f"sentence must be a non-empty str, but received {sentence!r}.")
    if (
        isinstance(max_merges, bool)
        or not isinstance(max_merges, int)
        or not 10 <= max_merges <= 2000
    ):
        raise ValueError(f"max_merges must be an int from 10 to 2000, but received {max_merges!r}.")
    if not isinstance(merges, int) or not 0 <= merges <= max_merges:
        raise ValueError(f"merges must be an int from 0 to max_merges, but received {merges!r}.")
    if (placeholder := placeholder_if_grading("bpe_explorer")) is not None:
        return placeholder

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from transformer_lab.widgets import _common as ui

    if text is None:
        from transformer_lab.data.text import load_shakespeare

        full = load_shakespeare()
        text, held_out = full[:100_000], full[100_000:110_000]
    else:
        cut = len(text) - len(text) // 10
        text, held_out = text[:cut], text[cut:]
    learned = bpe.train_merges(text, max_merges)
    grid = sorted(set(np.linspace(0, len(learned), 31).astype(int).tolist()))
    held_counts = [len(bpe.encode(held_out, learned[:k])) for k in grid]
    sentence_counts = [len(bpe.encode(sentence, learned[:k])) for k in grid]

    fig = Figure(figsize=(10.5, 4.4), dpi=ui.DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax_tokens, ax_curve = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1.2, 1]})
    view = ui.FigureView(fig)
    ax_tokens.set_xlim(0, max(len(sentence), 10) + 1)
    ax_tokens.set_ylim(0, 2.2)
    ax_tokens.axis("off")
    n_chars = len(sentence)
    ax_curve.plot(grid, [len(held_out) / n for n in held_counts], "-", color=ui.BLUE,
                  label="held-out text")  # fmt: skip
    ax_curve.plot(grid, [n_chars / n for n in sentence_counts], "-", color=ui.ORANGE,
                  label="the sentence")  # fmt: skip
    now_line = ax_curve.axvline(merges, color=ui.RED, lw=1.5)
    ax_curve.set_xlim(0, max(len(learned), 1))
    ax_curve.set_xlabel("merges k (vocabulary 256 + k)")
    ax_curve.set_ylabel("characters per token")
    ax_curve.legend(loc="upper left", frameon=False, fontsize=8)
    boxes: list[Any] = []
    view.animate(now_line)

    controls = {
        "merges": ui.widgets.IntSlider(
            value=merges, min=0, max=len(learned), step=1, description="merges k", style=ui.STYLE,
            continuous_update=False,
        )
    }  # fmt: skip

    def draw_row(tokens: list[str], y: float, wrong: list[bool] | None) -> None:
        x = 0.5
        for i, token in enumerate(tokens):
            width = max(len(token), 1)
            colour = _COLOURS[i % 2] if not (wrong and wrong[i]) else "#f4a6a6"
            rect = Rectangle((x, y), width, 0.8, facecolor=colour, edgecolor="white", lw=1.5)
            ax_tokens.add_patch(rect)
            label = ax_tokens.text(x + width / 2, y + 0.4, _shown(token), ha="center",
                                   va="center", family="monospace", fontsize=11)  # fmt: skip
            boxes.extend([rect, label])
            x += width

    def update() -> tuple[dict[str, Any], str]:
        k = controls["merges"].value
        kept = learned[:k]
        ids = bpe.encode(sentence, kept)
        tokens = bpe.token_strings(ids, kept)
        for artist in boxes:
            artist.remove()
        boxes.clear()
        draw_row(tokens, 1.25, None)
        yours_tokens, differs = None, False
        if student:
            yours = _student_ids(student, sentence, kept)
            if yours is not None:
                yours_tokens = bpe.token_strings(yours, kept)
                differs = yours != ids
                wrong = [i >= len(ids) or t != ids[i] for i, t in enumerate(yours)]
                draw_row(yours_tokens, 0.2, wrong)
        now_line.set_xdata([k, k])
        view.invalidate()
        held = len(bpe.encode(held_out, kept))
        new_token = bpe.token_strings([255 + k], kept)[0] if k else None
        readout = (
            f"k = {k} merges, vocabulary {256 + k}: the sentence ({n_chars} characters) is "
            f"{len(ids)} tokens; held-out text {len(held_out) / held:.2f} characters per token."
        )
        if new_token is not None:
            left, right = kept[-1]
            readout += (
                f" Merge {k - 1}: ({left}, {right}) → token {255 + k} = '{_shown(new_token)}'."
            )
        if student:
            if student.error is not None:
                readout += student.status(0, None)
            else:
                n = sum(a != b for a, b in zip(yours_tokens, tokens)) + abs(
                    len(yours_tokens) - len(tokens)
                )
                readout += student.status(n, None, what="tokens", mark="in red (bottom row)")
        state = {
            "merges": k,
            "vocab_size": 256 + k,
            "tokens": tokens,
            "n_tokens": len(ids),
            "chars_per_token": len(held_out) / held,
            "new_token": new_token,
        }
        if student:
            state.update(yours=yours_tokens, differs=differs, error=student.error)
        return state, readout

    return ui.Explorer(
        "Byte-pair encoding: the first k merges", controls, view, update, footer=student.footer()
    )
