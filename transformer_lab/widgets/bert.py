"""The masked-language-model explorer: a sentence corrupted at a chosen masking rate, which
tokens are chosen, what they become, their labels and the loss they add (notebook 6). The MiniLM
explorers live in :mod:`transformer_lab.widgets.minilm`.
"""

from __future__ import annotations

import contextlib
import html
import io
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from transformer_lab import bert_inputs
from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["mlm_explorer"]

DEFAULT_LINE = "now is the winter of our discontent made glorious summer by this sun of york"
COLOURS = {"not chosen": "#f2f2f2", "[MASK]": "#ff7f0e", "random": "#d62728", "kept": "#2ca02c"}


@lru_cache(maxsize=1)
def _word_task() -> tuple[Any, np.ndarray]:
    """The word-order task's tokenizer and its unigram log-probabilities (training lines)."""
    from transformer_lab.data import WordOrderTask

    task = WordOrderTask()
    tok = task.tokenizer
    counts = torch.bincount(task.mlm_tensors("train").input_ids.flatten(), minlength=tok.vocab_size)
    counts = counts.double() + 1.0  # add-one smoothing
    counts[list(tok.special_ids)] = 0.0
    return tok, (counts / counts.sum()).log().numpy()


def _call_student(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, str | None]:
    """Run the student's function; never let it break the explorer."""
    try:
        return fn(*args, **kwargs), None
    except Exception as err:  # shown in the readout instead
        return None, f"{type(err).__name__}: {err}"


def _categories(ids: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor, mask_id: int):
    chosen = labels != bert_inputs.IGNORE_INDEX
    cat = np.full(ids.shape, "not chosen", dtype=object)
    cat[(chosen & (inputs == mask_id)).numpy()] = "[MASK]"
    cat[(chosen & (inputs != mask_id) & (inputs != ids)).numpy()] = "random"
    cat[(chosen & (inputs == ids)).numpy()] = "kept"
    return cat


def mlm_explorer(
    sentence: str | None = None, corrupt: Callable | None = None, seed: int = 0
) -> Any:
    """BERT's corruption of one sentence, with a masking-rate slider.

    Args:
        sentence: text to corrupt (word-level tokens of the word-order task, at most 24).
        corrupt: optional, your ``mlm_corrupt(input_ids, mask_id, vocab_size, special_ids, p=...,
            generator=...)``; its corruption of the same sentence is drawn below the reference's.
        seed: initial seed of the corruption.
    Returns:
        An Explorer with controls ``rate`` and ``seed``; ``state()`` has ``tokens``, ``inputs``,
        ``labels``, ``categories``, ``losses`` (per position, 0 where the label is -100), ``loss``
        (their mean over the labelled positions, nats) and, with ``corrupt``, the same under
        ``your_`` plus ``error``. Under grading, a placeholder.
    """
    sentence = DEFAULT_LINE if sentence is None else sentence
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"sentence must be a non-empty string, but received {sentence!r}.")
    if corrupt is not None and not callable(corrupt):
        raise TypeError(f"corrupt must be your function, but received {type(corrupt).__name__}.")
    if (placeholder := placeholder_if_grading("mlm_explorer")) is not None:
        return placeholder
    from transformer_lab.widgets import _common as ui

    tok, log_p = _word_task()
    ids = torch.tensor([tok.encode(sentence)])  # (1, T): [CLS] ... [SEP]
    T = ids.shape[1]
    if T > 26:
        raise ValueError(f"sentence must have at most 24 words, but it has {T - 2} tokens.")
    words = [tok.itos[i] for i in ids[0].tolist()]
    rows = ["reference"] + (["yours"] if corrupt is not None else [])
    fig, (first,) = ui.new_figure(1, figsize=(12, 2.2 + 1.6 * len(rows)))
    first.remove()  # the panels are stacked vertically instead
    grid = fig.add_gridspec(len(rows) + 1, 1, height_ratios=[1.2] * len(rows) + [1.4])
    view = ui.FigureView(fig)
    tables, bars_list = [], []
    for r, row in enumerate(rows):
        ax = fig.add_subplot(grid[r])
        ax.set(xlim=(-0.5, T - 0.5), ylim=(2.5, -0.5), title=f"{row}: original / input / label")
        ax.set_xticks([])
        ax.set_yticks([0, 1, 2], ["original", "input", "label"])
        cells, texts = [], []
        for t in range(T):
            for k in range(3):
                rect = ui.Rectangle((t - 0.48, k - 0.45), 0.96, 0.9, color=COLOURS["not chosen"])
                ax.add_patch(rect)
                cells.append(rect)
                texts.append(ax.text(t, k, "", ha="center", va="center", fontsize=8))
        view.animate(cells, texts)
        tables.append((cells, texts))
    ax_loss = fig.add_subplot(grid[len(rows)])
    width = 0.8 / len(rows)
    for r, row in enumerate(rows):
        bars = ax_loss.bar(
            np.arange(T) + (r - (len(rows) - 1) / 2) * width,
            np.zeros(T),
            width,
            color=[ui.BLUE, ui.ORANGE][r],
            label=row,
        )
        bars_list.append(list(bars))
        view.animate(bars_list[-1])
    mean_lines = [
        ax_loss.axhline(0, color=c, ls="--", lw=1) for c in (ui.BLUE, ui.ORANGE)[: len(rows)]
    ]
    view.animate(mean_lines)
    ax_loss.set(
        xlim=(-0.5, T - 0.5),
        ylim=(0, float(-log_p[log_p > -np.inf].min()) + 1),
        ylabel="-log p(label)",
        title="loss at each labelled position (unigram model); dashed: the mean = the loss",
    )
    ax_loss.set_xticks(range(T), words, rotation=45, ha="right", fontsize=8)
    ax_loss.legend(fontsize=8, loc="upper right")

    verdict = _verdict(corrupt) if corrupt is not None else ""
    controls = {
        "rate": ui.widgets.FloatSlider(
            value=0.15, min=0.05, max=0.6, step=0.05, description="masking rate p", style=ui.STYLE
        ),
        "seed": ui.widgets.IntSlider(value=seed, min=0, max=99, description="seed", style=ui.STYLE),
    }

    def draw(r: int, inputs: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
        cells, texts = tables[r]
        cat = _categories(ids, inputs, labels, tok.mask_id)[0]
        lab = labels[0].tolist()
        losses = np.array([-log_p[y] if y != bert_inputs.IGNORE_INDEX else 0.0 for y in lab])
        for t in range(T):
            shown = [
                words[t],
                tok.itos[int(inputs[0, t])],
                tok.itos[lab[t]] if lab[t] >= 0 else "-100",
            ]
            for k in range(3):
                cells[3 * t + k].set_color(COLOURS[cat[t]] if k else COLOURS["not chosen"])
                texts[3 * t + k].set_text(shown[k])
        top = ax_loss.get_ylim()[1]  # a special token as label has probability 0: clip its bar
        ui.set_bar_heights(bars_list[r], np.minimum(losses, top))
        n = int((labels != bert_inputs.IGNORE_INDEX).sum())
        loss = float(losses.sum() / n) if n else float("nan")
        mean_lines[r].set_ydata([0 if n == 0 else min(loss, top)] * 2)
        return {
            "inputs": inputs[0].numpy(),
            "labels": labels[0].numpy(),
            "categories": cat,
            "losses": losses,
            "loss": loss,
            "n_labelled": n,
        }

    def update() -> tuple[dict[str, Any], str]:
        p, s = controls["rate"].value, controls["seed"].value
        args = (ids, tok.mask_id, tok.vocab_size, list(tok.special_ids))
        inputs, labels = bert_inputs.mlm_corrupt(
            *args, p=p, generator=torch.Generator().manual_seed(s)
        )
        state = {"tokens": words, **draw(0, inputs, labels)}
        n_ok = T - 2
        readout = (
            f"reference: {state['n_labelled']} of {n_ok} words chosen; loss = mean over the labelled "
            f"positions = {state['loss']:.2f} nats (positions labelled -100 add nothing). "
            + " ".join(
                f"<span style='background:{c}'>&nbsp;{html.escape(k)}&nbsp;</span>"
                for k, c in COLOURS.items()
            )
        )
        if corrupt is not None:
            out, error = _call_student(
                corrupt, ids.clone(), *args[1:], p=p, generator=torch.Generator().manual_seed(s)
            )
            if error is None and not (
                isinstance(out, tuple)
                and len(out) == 2
                and all(torch.is_tensor(o) and o.shape == ids.shape for o in out)
            ):
                error = (
                    "your function must return (inputs, labels), two tensors of the input's shape"
                )
            if error is None:
                yours = draw(1, out[0].long(), out[1].long())
                state.update({f"your_{k}": v for k, v in yours.items()}, error=None)
                readout += (
                    f"<br>yours: {yours['n_labelled']} chosen, loss {yours['loss']:.2f} nats."
                )
            else:
                state["error"] = error
                readout += (
                    f"<br><span style='color:{ui.RED}'>your function: {html.escape(error)}</span>"
                )
            readout += f"<br>{html.escape(verdict)}"
            state["verdict"] = verdict
        return state, readout

    return ui.Explorer("Masked-LM corruption", controls, view, update)


def _verdict(corrupt: Callable) -> str:
    """The instant check's one-line verdict on the student's function (never raises)."""
    from transformer_lab import checks

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            checks.check_mlm_corrupt(corrupt)
    except AssertionError as err:
        return f"instant check: {str(err).split(' [case')[0]}"
    except Exception as err:  # an explorer must survive any student code
        return f"instant check could not run: {type(err).__name__}: {err}"
    return "instant check: ✓ your mlm_corrupt passes (statistics over many seeds included)."
