"""Attention-map explorer: one head's weights over a sentence (heads_explorer shares its helpers).

The tokens get seeded random embeddings (a repeated word gets the same vector) and seeded random
projections, so the patterns are not linguistic; they show the mechanics: every query row sums
to one, identical tokens attend identically (no positions yet), a lower temperature or a missing
1/sqrt(D) sharpens the rows, and H heads of width D = C / H each find their own pattern.
Given the student's attention function, its weights get a heatmap of their own beside the
reference, with the cells that differ painted red.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from transformer_lab.attention import SelfAttention
from transformer_lab.attention import scaled_dot_product_attention as reference_attention
from transformer_lab.widgets._inputs import (
    check_embeddings,
    check_positive,
    check_tokens,
    seeded_embeddings,
)
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["attention_explorer"]


def _seeded_(linear: nn.Linear, gen: torch.Generator) -> None:
    """Weights ~ N(0, 1/C_in), bias 0: unit-variance inputs give unit-variance projections,
    so the scores are neither flat nor saturated before the sliders move them."""
    with torch.no_grad():
        linear.weight.copy_(
            torch.randn(linear.weight.shape, generator=gen) / math.sqrt(linear.in_features)
        )
        if linear.bias is not None:
            linear.bias.zero_()


def _inputs(
    tokens: str | Sequence[str] | None, embeddings: Tensor | None, d_model: int, seed: int
) -> tuple[list[str], Tensor]:
    tokens = check_tokens(tokens)
    if embeddings is None:
        check_positive("d_model", d_model)
        return tokens, seeded_embeddings(tokens, d_model, seed)
    return tokens, check_embeddings(embeddings, tokens)


def _heatmap(
    ax: Any, n_rows: int, n_cols: int, row_labels: list[str], col_labels: list[str]
) -> Any:
    """An empty (T, S) weight image with token labels: rows are queries, columns keys."""
    im = ax.imshow(
        np.zeros((n_rows, n_cols)),
        cmap="Blues",
        vmin=0.0,
        vmax=1.0,
        aspect="auto",
        interpolation="nearest",
    )
    ax.set_xticks(range(n_cols), col_labels, rotation=45, ha="right")
    ax.set_yticks(range(n_rows), row_labels)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    return im


def attention_explorer(
    scaled_dot_product_attention: Any = None,
    *,
    self_attention: Any = None,
    tokens: str | Sequence[str] | None = None,
    embeddings: Tensor | None = None,
    attention: SelfAttention | None = None,
    d_model: int = 16,
    seed: int = 0,
) -> Any:
    """A (T, S) attention heatmap, one query's weights and its output, with a score-scale slider.

    Args:
        scaled_dot_product_attention: optional, your ``(q, k, v, mask=None) -> (out, weights)``,
            run on the same q, k, v (the scale folded into q); its weights get a heatmap.
        self_attention: optional instead, your ``self_attention(x, w_q, w_k, w_v) ->
            (out, weights)``, run on the embeddings with the projections' weights.
        tokens: the sequence, a string split on spaces or a list (default "the cat sat on the mat").
        embeddings: optional (T, C) token vectors; default seeded random, one per distinct word.
        attention: optional module with ``q_proj``, ``k_proj``, ``v_proj`` (e.g. a
            :class:`~transformer_lab.SelfAttention`); default seeded random projections.
        d_model: width C of the default embeddings.
        seed: seed of the default embeddings and projections.
    Returns:
        An Explorer with controls ``query`` (index t) and ``scale`` (the factor on q . k:
        1/sqrt(D) is standard, 1 unscaled, 1/D over-scaled); ``state()`` has ``weights`` (T, S),
        ``q``, ``k``, ``v`` (T, D), ``output`` (T, D) and ``factor`` (the scores are
        ``q @ k.T * factor``); with your function also ``yours`` (T, S) or None,
        ``differs`` (T, S) bool, ``max_diff`` and ``error``. Under grading, a placeholder.
    """
    if scaled_dot_product_attention is not None and self_attention is not None:
        raise ValueError(
            "pass either scaled_dot_product_attention or self_attention, but received both."
        )
    if self_attention is not None:
        student = Student(self_attention, "self_attention", "self_attention")
    else:
        student = Student(
            scaled_dot_product_attention,
            "scaled_dot_product_attention",
            "scaled_dot_product_attention",
        )
    tokens, x = _inputs(tokens, embeddings, d_model, seed)
    C = x.shape[1]
    if attention is None:
        attention = SelfAttention(C, bias=False)
        gen = torch.Generator().manual_seed(seed + 1)
        for proj in (attention.q_proj, attention.k_proj, attention.v_proj):
            _seeded_(proj, gen)
    elif not all(hasattr(attention, p) for p in ("q_proj", "k_proj", "v_proj")):
        raise TypeError(
            "attention must have q_proj, k_proj and v_proj (like SelfAttention), but received "
            f"{type(attention).__name__}."
        )
    elif attention.q_proj.in_features != C:
        raise ValueError(
            f"attention must take inputs of width {C} like the embeddings, but its q_proj takes "
            f"{attention.q_proj.in_features}."
        )
    if (placeholder := placeholder_if_grading("attention_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    with torch.no_grad():
        q, k, v = attention.q_proj(x), attention.k_proj(x), attention.v_proj(x)  # (T, D) each
    T, D = q.shape
    positions = list(range(T))

    if student:
        fig, (ax_map, ax_yours, ax_row, ax_out) = ui.new_figure(
            4, figsize=(14, 3.6), width_ratios=[1, 1, 1.1, 1.1]
        )
        im_yours = _heatmap(ax_yours, T, T, tokens, tokens)
        ax_yours.set_ylabel("")
        ax_yours.set_title(f"yours ({student.name}); red X or hatch = differs")
        overlay = ui.diff_overlay(ax_yours, (T, T))
    else:
        fig, (ax_map, ax_row, ax_out) = ui.new_figure(
            3, figsize=(12, 3.6), width_ratios=[1, 1.1, 1.1]
        )
    view = ui.FigureView(fig)
    im = _heatmap(ax_map, T, T, tokens, tokens)
    ax_map.set_title("weights (each row sums to 1)")
    row_box = ui.Rectangle((-0.5, -0.5), T, 1, fill=False, edgecolor=ui.ORANGE, lw=2.5)
    ax_map.add_patch(row_box)
    bars = ax_row.bar(positions, np.zeros(T), color=ui.BLUE)
    ax_row.set_xticks(positions, tokens, rotation=45, ha="right")
    ax_row.set_ylim(0, 1.12)
    ax_row.axhline(1 / T, color=ui.GREY, ls="--", lw=1)
    row_title = ax_row.set_title(" ")
    labels = [ax_row.text(i, 0, "", ha="center", va="bottom", fontsize=8) for i in positions]
    out_bars = ax_out.bar(range(D), np.zeros(D), color=ui.ORANGE)
    bound = 1.1 * float(
        v.abs().max()
    )  # an output is a weighted mean of value rows: it stays inside
    ax_out.set_ylim(-bound, bound)
    ax_out.axhline(0, color="black", lw=0.8)
    ax_out.set_xticks(range(0, D, max(1, D // 8)))
    ax_out.set_xlabel("feature")
    ax_out.set_title("its output: Σ_s weight_s · v_s")
    view.animate(im, row_box, list(bars), labels, row_title, list(out_bars))
    if student:
        your_out = ax_out.scatter(range(D), np.zeros(D), marker="D", s=22, color=ui.GREEN, zorder=5)
        view.animate(im_yours, overlay, your_out)
    w_q, w_k, w_v = (
        p.weight.detach().T for p in (attention.q_proj, attention.k_proj, attention.v_proj)
    )

    controls = {
        "query": ui.widgets.Dropdown(
            options=[(f"{t}: {tok}", t) for t, tok in enumerate(tokens)],
            value=min(1, T - 1),
            description="query",
            style=ui.STYLE,
        ),
        "scale": ui.widgets.SelectionSlider(
            options=_scale_options(D),
            value=1 / math.sqrt(D),
            description="scores × ",
            style=ui.STYLE,
            layout=ui.widgets.Layout(width="420px"),
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        t = controls["query"].value
        factor = controls["scale"].value
        # scaled_dot_product_attention divides by sqrt(D) itself; fold the chosen factor into q.
        out, weights = reference_attention(q * (factor * math.sqrt(D)), k, v)  # (T, D), (T, S)
        w = weights.numpy()
        im.set_data(w)
        row_box.set_y(t - 0.5)
        ui.set_bar_heights(bars, w[t])
        for i, (text, p) in enumerate(zip(labels, w[t])):
            text.set_position((i, p + 0.01))
            text.set_text(f"{p:.2f}")
        row_title.set_text(f"query {t} '{tokens[t]}': its weights")
        ui.set_bar_heights(out_bars, out[t].numpy())
        differs, max_diff, yours = np.zeros((T, T), bool), 0.0, None
        if student:
            boost = factor * math.sqrt(D)  # the same factor, folded into q (or W_q)
            if self_attention is not None:
                yours = student.call_pair(x, w_q * boost, w_k, w_v, shapes=((T, D), (T, T)))
            else:
                yours = student.call_pair(q * boost, k, v, shapes=((T, D), (T, T)))
            if yours is not None:
                differs, max_diff = compare(yours[1], weights)
                out_differs, out_diff = compare(yours[0], out)
                differs = differs | out_differs.any(axis=1)[:, None]
                max_diff = max(max_diff, out_diff)
                im_yours.set_data(yours[1].float().numpy())
                your_out.set_offsets(np.c_[np.arange(D), yours[0][t].float().nan_to_num().numpy()])
                your_out.set_color([ui.RED if d else ui.GREEN for d in out_differs[t]])
            else:
                im_yours.set_data(np.full((T, T), np.nan))
            your_out.set_visible(yours is not None)
            ui.set_diff(overlay, differs)
        best = int(w[t].argmax())
        readout = (
            f"query '{html.escape(tokens[t])}' puts {w[t, best]:.2f} of its weight on "
            f"'{html.escape(tokens[best])}'; scores = q·k × {factor:.3g} "
            f"(standard 1/√D = {1 / math.sqrt(D):.3g}, unscaled 1, over-scaled 1/D = {1 / D:.3g}; D = {D})."
        ) + student.status(int(differs.sum()), max_diff, "cells (weights, or the row's output)")
        state = {
            "query": t,
            "factor": factor,
            "weights": w,
            "q": q.numpy(),
            "k": k.numpy(),
            "v": v.numpy(),
            "output": out.numpy(),
            "tokens": list(tokens),
        }
        if student:
            state.update(
                yours=None if yours is None else yours[1].float().numpy(),
                differs=differs,
                max_diff=max_diff,
                error=student.error,
            )
        return state, readout

    return ui.Explorer(
        "Attention weights over a sentence", controls, view, update, footer=student.footer()
    )


def _scale_options(D: int) -> list[tuple[str, float]]:
    """Score factors from 1/(2D) to 2, two per octave, with 1/D, 1/sqrt(D) and 1 exactly."""
    special = {1 / D: "1/D (over-scaled)", 1 / math.sqrt(D): "1/√D (standard)", 1.0: "1 (unscaled)"}
    grid = [2.0 ** (e / 2) for e in range(math.floor(2 * math.log2(1 / (2 * D))), 3)]
    values = sorted(
        set(special) | {g for g in grid if all(abs(math.log(g / s)) > 0.1 for s in special)}
    )
    return [(special.get(f, f"{f:.3g}"), f) for f in values]
