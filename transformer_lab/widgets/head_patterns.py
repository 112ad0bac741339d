"""Heads explorer: every head's attention pattern as the number of heads H changes.

All values of H share the same W_q, W_k, W_v, W_o (C, C): head h of H uses columns
h*D .. (h+1)*D - 1 with D = C / H, so changing H re-slices the same projections. Given the
student's ``multi_head_attention``, the shown head of theirs gets a heatmap beside the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_lab.heads import MultiHeadAttention
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare
from transformer_lab.widgets.attention_maps import _heatmap, _inputs, _seeded_

__all__ = ["heads_explorer"]


def heads_explorer(
    multi_head_attention: Any = None,
    *,
    tokens: str | Sequence[str] | None = None,
    embeddings: Tensor | None = None,
    d_model: int = 16,
    n_heads: int = 4,
    seed: int = 0,
) -> Any:
    """Every head's (T, S) pattern from ``MultiHeadAttention(need_weights=True)`` as H changes.

    All values of H share the same W_q, W_k, W_v, W_o (C, C): head h of H uses columns
    h*D .. (h+1)*D - 1 with D = C / H, so changing H re-slices the same projections.

    Args:
        multi_head_attention: optional, your ``multi_head_attention(x_q, x_kv, w_q, w_k, w_v,
            w_o, n_heads, mask=None) -> (out, weights)`` (batched or loop), run with the same
            weights; the shown head of yours gets a heatmap beside the reference's.
        tokens: the sequence (default "the cat sat on the mat").
        embeddings: optional (T, C) token vectors; default seeded random.
        d_model: width C of the default embeddings.
        n_heads: initial number of heads H (must divide C).
        seed: seed of the embeddings and projections.
    Returns:
        An Explorer with controls ``n_heads`` and ``head``; ``state()`` has ``weights``
        (H, T, S), ``output`` (T, C) and ``attention`` (the MultiHeadAttention used); with your
        function also ``yours`` (H, T, S) or None, ``differs`` (H, T, S) (a row also counts
        as differing when its output does), ``max_diff`` and ``error``. Under grading, a
        placeholder.
    """
    student = Student(multi_head_attention, "multi_head_attention", "multi_head_attention")
    tokens, x = _inputs(tokens, embeddings, d_model, seed)
    C = x.shape[1]
    divisors = [h for h in range(1, C + 1) if C % h == 0]
    if n_heads not in divisors:
        raise ValueError(
            f"n_heads must divide the width C={C} (one of {divisors}), but received n_heads={n_heads}."
        )
    if (placeholder := placeholder_if_grading("heads_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    base = MultiHeadAttention(C, 1)
    gen = torch.Generator().manual_seed(seed + 1)
    for proj in (base.q_proj, base.k_proj, base.v_proj, base.out_proj):
        _seeded_(proj, gen)
    modules: dict[int, MultiHeadAttention] = {}

    def module_for(H: int) -> MultiHeadAttention:
        if H not in modules:
            modules[H] = MultiHeadAttention(C, H)
            modules[H].load_state_dict(base.state_dict())  # same matrices, sliced into H heads
        return modules[H]

    T = len(tokens)
    if student:
        fig, (ax_head, ax_yours, ax_all) = ui.new_figure(
            3, figsize=(14, 3.6), width_ratios=[1, 1, 2.2]
        )
        im_yours = _heatmap(ax_yours, T, T, tokens, tokens)
        ax_yours.set_ylabel("")
        yours_title = ax_yours.set_title(" ")
        overlay = ui.diff_overlay(ax_yours, (T, T))
    else:
        fig, (ax_head, ax_all) = ui.new_figure(2, figsize=(11, 3.6), width_ratios=[1, 2.2])
    view = ui.FigureView(fig)
    im_head = _heatmap(ax_head, T, T, tokens, tokens)
    head_title = ax_head.set_title(" ")
    cmap = im_head.get_cmap().with_extremes(bad="white")  # NaN columns separate the heads
    # The mosaic always spans x in [0, 1], whatever H, so changing H is still a cheap blit;
    # its head labels are text artists rather than ticks for the same reason.
    im_all = ax_all.imshow(
        np.zeros((T, T)),
        cmap=cmap,
        vmin=0.0,
        vmax=1.0,
        aspect="auto",
        interpolation="nearest",
        extent=(0, 1, T - 0.5, -0.5),
    )
    ax_all.set_xlim(0, 1)
    ax_all.set_xticks([])
    ax_all.set_yticks(range(T), tokens)
    ax_all.set_title("all heads, side by side (keys within each block)")
    box = ui.Rectangle((0, -0.5), 1, T, fill=False, edgecolor=ui.ORANGE, lw=2.5)
    ax_all.add_patch(box)
    head_labels = [
        ax_all.text(
            0, -0.03, "", transform=ax_all.get_xaxis_transform(), ha="center", va="top", fontsize=9
        )
        for _ in range(C)
    ]
    view.animate(im_head, head_title, im_all, box, head_labels)
    if student:
        view.animate(im_yours, overlay, yours_title)

    controls = {
        "n_heads": ui.widgets.SelectionSlider(
            options=divisors, value=n_heads, description="heads H", style=ui.STYLE
        ),
        "head": ui.widgets.IntSlider(
            value=0, min=0, max=n_heads - 1, description="show head", style=ui.STYLE
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        H = controls["n_heads"].value
        controls["head"].max = H - 1  # clamps the head index when H shrinks
        h = controls["head"].value
        mha = module_for(H)
        with torch.no_grad():
            out, weights = mha(x[None], need_weights=True)  # (1, T, C), (1, H, T, S)
        w = weights[0].numpy()  # (H, T, S)
        im_head.set_data(w[h])
        head_title.set_text(f"head {h} of {H} (D = {C}/{H} = {C // H} features)")
        # Mosaic: the H maps in a row with one NaN column between neighbours.
        mosaic = np.full((T, H * (T + 1) - 1), np.nan)
        for i in range(H):
            mosaic[:, i * (T + 1) : i * (T + 1) + T] = w[i]
        im_all.set_data(mosaic)
        col = 1.0 / mosaic.shape[1]  # width of one key column in the mosaic's [0, 1] range
        for i, label in enumerate(head_labels):
            label.set_visible(i < H)
            label.set_x((i * (T + 1) + T / 2) * col)
            label.set_text(f"h{i}")
        box.set_x(h * (T + 1) * col)
        box.set_width(T * col)
        n_params = sum(p.numel() for p in mha.parameters())
        differs, max_diff, yours = np.zeros((H, T, T), bool), 0.0, None
        if student:
            w_q, w_k, w_v, w_o = (
                p.weight.detach().T for p in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj)
            )  # (C, C) each, row-vector convention
            yours = student.call_pair(
                x[None], x[None], w_q, w_k, w_v, w_o, H, shapes=((1, T, C), (1, H, T, T))
            )
            if yours is not None:
                differs, max_diff = compare(yours[1][0], weights[0])
                out_differs, out_diff = compare(yours[0][0], out[0])  # (T, C)
                differs = differs | out_differs.any(axis=1)[None, :, None]
                max_diff = max(max_diff, out_diff)
                im_yours.set_data(yours[1][0, h].float().numpy())
            else:
                im_yours.set_data(np.full((T, T), np.nan))
            ui.set_diff(overlay, differs[h])
            yours_title.set_text(f"yours, head {h}; red X or hatch = differs")
        readout = (
            f"H = {H} heads × D = {C // H} features = C = {C}; parameters: {n_params} for every H "
            f"(4·C² + 4·C). Rows of every head sum to 1."
        ) + student.status(int(differs.sum()), max_diff, "cells over all heads")
        state = {"n_heads": H, "head": h, "weights": w, "output": out[0].numpy(), "attention": mha}
        if student:
            state.update(
                yours=None if yours is None else yours[1][0].float().numpy(),
                differs=differs,
                max_diff=max_diff,
                error=student.error,
            )
        return state, readout

    return ui.Explorer(
        "Multi-head attention patterns", controls, view, update, footer=student.footer()
    )
