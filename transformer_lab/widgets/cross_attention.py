"""Cross-attention explorer: queries from one sequence, keys and values from another.

A toy translation: the English target words (queries, T of them) attend over the French source
words (keys and values, S of them). Words with the same meaning share a seeded vector plus a
little noise, so each English query finds its French counterpart even where the word order
differs ("black cat" / "chat noir"). The weights are (T, S), not square; the source's padding is
masked with a (B, 1, S) mask, and a sharpness factor scales the scores.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import torch

from transformer_lab.attention import scaled_dot_product_attention as reference_attention
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["cross_attention_explorer"]

SOURCE = ("le", "chat", "noir", "dort", "sur", "le", "tapis")
TARGET = ("the", "black", "cat", "sleeps", "on", "the", "mat")
MEANING = {
    "le": "the",
    "chat": "cat",
    "noir": "black",
    "dort": "sleeps",
    "sur": "on",
    "tapis": "mat",
}


def cross_attention_explorer(
    cross_attention: Any = None, *, n_queries: int = 4, d_model: int = 32, seed: int = 0
) -> Any:
    """English queries over French keys: the (T, S) weights, one query's row, padding masked.

    Args:
        cross_attention: optional, your ``cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None)
            -> (out, weights)``; run on the same inputs, its weights drawn beside the reference.
        n_queries: how many target words ask (T, 1 to 7); the source has S = 7 words.
        d_model: width C of the word vectors (identity projections, D = C).
        seed: seed of the word vectors.
    Returns:
        An Explorer with controls ``query``, ``source_length`` (real source words; the rest is
        padding) and ``sharpness`` (factor on the scores); ``state()`` has ``weights`` (T, S),
        ``output`` (T, C) and ``mask`` (S,); with your function also ``yours`` (T, S) or None,
        ``differs`` (T, S), ``max_diff`` and ``error``. Under grading, a placeholder.
    """
    student = Student(cross_attention, "cross_attention", "cross_attention")
    if isinstance(n_queries, bool) or not isinstance(n_queries, int) or not 1 <= n_queries <= 7:
        raise ValueError(
            f"n_queries must be an integer from 1 to 7, but received n_queries={n_queries!r}."
        )
    if isinstance(d_model, bool) or not isinstance(d_model, int) or not 4 <= d_model <= 256:
        raise ValueError(
            f"d_model must be an integer from 4 to 256, but received d_model={d_model!r}."
        )
    if (placeholder := placeholder_if_grading("cross_attention_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    T, S, C = n_queries, len(SOURCE), d_model
    target = list(TARGET[:T])
    gen = torch.Generator().manual_seed(seed)
    meanings = {m: torch.randn(C, generator=gen) for m in sorted(set(MEANING.values()))}
    x_src = torch.stack(
        [meanings[MEANING[w]] + 0.3 * torch.randn(C, generator=gen) for w in SOURCE]
    )
    x_tgt = torch.stack([meanings[w] + 0.3 * torch.randn(C, generator=gen) for w in target])
    eye = torch.eye(C)

    n_panels = 3 if student else 2
    fig, axes = ui.new_figure(n_panels, figsize=(4.2 * n_panels, 3.6))
    view = ui.FigureView(fig)

    def heatmap(ax: Any, title: str) -> Any:
        im = ax.imshow(np.zeros((T, S)), cmap="Blues", vmin=0, vmax=1, interpolation="nearest",
                       aspect="auto")  # fmt: skip
        ax.set_xticks(range(S), SOURCE, rotation=45)
        ax.set_yticks(range(T), target)
        ax.set_xlabel("source (keys, values)")
        ax.set_title(title, fontsize=10)
        return im

    im = heatmap(axes[0], "weights (T, S): target asks, source answers")
    axes[0].set_ylabel("target (queries)")
    pad_shade = ui.Rectangle((S - 0.5, -0.5), 0, T, color=ui.GREY, alpha=0.6, hatch="//")
    axes[0].add_patch(pad_shade)
    row_box = ui.Rectangle((-0.5, -0.5), S, 1, fill=False, edgecolor=ui.ORANGE, lw=2.5)
    axes[0].add_patch(row_box)
    bars = axes[1].bar(range(S), np.zeros(S), color=ui.BLUE)
    axes[1].set_xticks(range(S), SOURCE, rotation=45)
    axes[1].set_ylim(0, 1.05)
    row_title = axes[1].set_title(" ", fontsize=10)
    view.animate(im, pad_shade, row_box, list(bars), row_title)
    if student:
        im_yours = heatmap(axes[2], "yours; red X or hatch = differs")
        overlay = ui.diff_overlay(axes[2], (T, S))
        view.animate(im_yours, overlay)

    controls = {
        "query": ui.widgets.Dropdown(
            options=[(f"{t}: {w}", t) for t, w in enumerate(target)],
            value=min(1, T - 1),
            description="query",
            style=ui.STYLE,
        ),  # fmt: skip
        "source_length": ui.widgets.IntSlider(
            value=S, min=1, max=S, description="real source words", style=ui.STYLE
        ),  # fmt: skip
        "sharpness": ui.widgets.FloatLogSlider(
            value=1.0, base=2, min=-2, max=2, step=0.25, description="scores ×", style=ui.STYLE
        ),  # fmt: skip
    }

    def update() -> tuple[dict[str, Any], str]:
        t, n_real, sharp = (controls[n].value for n in ("query", "source_length", "sharpness"))
        mask = torch.arange(S) < n_real  # (S,), True = a real source word
        w_q = eye * sharp  # the factor folded into W_q
        out, weights = reference_attention(
            x_tgt @ w_q, x_src, x_src, mask[None, :]
        )  # (T, C), (T, S)
        w = weights.numpy()
        im.set_data(w)
        pad_shade.set_x(n_real - 0.5)
        pad_shade.set_width(S - n_real)
        row_box.set_y(t - 0.5)
        ui.set_bar_heights(bars, w[t])
        for bar, real in zip(bars, mask.tolist()):
            bar.set_color(ui.BLUE if real else ui.GREY)
        best = int(w[t].argmax())
        row_title.set_text(f"'{target[t]}' looks at '{SOURCE[best]}' ({w[t, best]:.2f})")
        differs, max_diff, yours = np.zeros((T, S), bool), 0.0, None
        if student:
            pair = student.call_pair(
                x_tgt[None], x_src[None], w_q, eye, eye, mask[None, None, :],
                shapes=((1, T, C), (1, T, S)),
            )  # fmt: skip
            if pair is not None:
                yours = pair[1][0]
                differs, max_diff = compare(yours, weights)
                out_differs, out_diff = compare(pair[0][0], out)
                differs = differs | out_differs.any(axis=1)[:, None]
                max_diff = max(max_diff, out_diff)
            im_yours.set_data(np.full((T, S), np.nan) if yours is None else yours.float().numpy())
            ui.set_diff(overlay, differs)
        readout = (
            f"query '{html.escape(target[t])}' (row {t} of T = {T}) over S = {S} source words, "
            f"{S - n_real} of them padding (weight {float(w[:, n_real:].sum()):.1f} on padding); "
            f"scores = q·k / √{C} × {sharp:.2f}."
        ) + student.status(int(differs.sum()), max_diff, "cells (weights, or the row's output)")
        state = {
            "query": t,
            "source_length": n_real,
            "sharpness": sharp,
            "weights": w,
            "output": out.numpy(),
            "mask": mask.numpy(),
        }
        if student:
            state.update(
                yours=None if yours is None else yours.float().numpy(),
                differs=differs,
                max_diff=max_diff,
                error=student.error,
            )
        return state, readout

    return ui.Explorer(
        "Cross-attention: target queries over source keys", controls, view, update,
        footer=student.footer(),
    )  # fmt: skip
