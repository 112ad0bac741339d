"""Head-layout explorer: split_heads and merge_heads drawn as coloured blocks, then W_o mixing.

A (B, T, C) tensor is split for H heads of width D = C / H as

    (B, T, C) --view--> (B, T, H, D) --transpose(1, 2)--> (B, H, T, D),

so head h owns channels h*D .. h*D + D - 1 of every token. Each cell is coloured by the head its
channel belongs to (hue) and by its token (lighter = later), so a correct split shows H blocks of
one hue each, and a split without the transpose mixes hues and tokens inside a block. Merging is
the inverse; then W_o (C, C) mixes the heads: rows h*D .. h*D + D - 1 of W_o carry head h into
every output channel.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from transformer_lab.heads import merge_heads as reference_merge
from transformer_lab.heads import split_heads as reference_split
from transformer_lab.widgets._inputs import check_positive
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["head_layout_explorer"]

_HUES = np.array(
    [
        (0.12, 0.47, 0.71), (1.00, 0.50, 0.05), (0.17, 0.63, 0.17), (0.84, 0.15, 0.16),
        (0.58, 0.40, 0.74), (0.55, 0.34, 0.29), (0.89, 0.47, 0.76), (0.50, 0.50, 0.50),
        (0.74, 0.74, 0.13), (0.09, 0.75, 0.81), (0.35, 0.35, 0.95), (0.95, 0.75, 0.10),
    ]
)  # fmt: skip


def _colours(ids: np.ndarray, T: int, C: int, H: int) -> np.ndarray:
    """RGBA for cells holding the ids t * C + c: hue = head of channel c, lightness = token t."""
    rgba = np.zeros((*ids.shape, 4))
    valid = np.isfinite(ids) & (np.abs(ids - np.round(ids)) < 1e-3) & (ids >= 0) & (ids < T * C)
    idx = np.where(valid, np.round(ids), 0).astype(int)
    t, c = idx // C, idx % C
    head = c // (C // H)
    light = 0.55 * t / max(T - 1, 1)  # later tokens are paler
    rgb = _HUES[head % len(_HUES)] * (1 - light[..., None]) + light[..., None]
    rgba[..., :3] = np.where(valid[..., None], rgb, 0.3)  # grey: a value no input cell holds
    rgba[..., 3] = np.where(np.isnan(ids), 0.0, 1.0)  # NaN: the gap between head blocks
    return rgba


def _blocks(split: np.ndarray) -> np.ndarray:
    """(H, T, D) -> (T, H * (D + 1) - 1): the heads side by side, one NaN column between them."""
    H, T, D = split.shape
    mosaic = np.full((T, H * (D + 1) - 1), np.nan)
    for h in range(H):
        mosaic[:, h * (D + 1) : h * (D + 1) + D] = split[h]
    return mosaic


def head_layout_explorer(
    split_heads: Any = None,
    merge_heads: Any = None,
    *,
    n_tokens: int = 4,
    d_model: int = 12,
    n_heads: int = 3,
    seed: int = 0,
) -> Any:
    """The channels of a (T, C) input, split into H head blocks, merged back, and mixed by W_o.

    Args:
        split_heads: optional, your ``split_heads(x, n_heads)``: (B, T, C) -> (B, H, T, D).
        merge_heads: optional, your ``merge_heads(x)``: (B, H, T, D) -> (B, T, C) (given the
            reference's split, so each exercise is judged on its own).
        n_tokens: T (2 to 8); d_model: C (2 to 24); n_heads: initial H (must divide C).
        seed: seed of W_o.
    Returns:
        An Explorer with controls ``n_heads`` and ``head``; ``state()`` has ``x`` (T, C) (cell
        ids t * C + c), ``split`` (H, T, D), ``merged`` (T, C) and ``w_o`` (C, C); with your
        functions also ``yours_split`` / ``yours_merged`` (or None), ``differs`` (the split's
        blocks, (H, T, D)), ``differs_merged`` (T, C), ``max_diff`` and ``error``. Under
        grading, a placeholder.
    """
    students = [
        Student(split_heads, "split_heads", "split_heads"),
        Student(merge_heads, "merge_heads", "merge_heads"),
    ]
    check_positive("n_tokens", n_tokens)
    check_positive("d_model", d_model)
    if not 2 <= n_tokens <= 8 or not 2 <= d_model <= 24:
        raise ValueError(
            f"n_tokens must lie in 2..8 and d_model in 2..24, but received n_tokens={n_tokens} "
            f"and d_model={d_model}."
        )
    divisors = [h for h in range(1, d_model + 1) if d_model % h == 0]
    if n_heads not in divisors:
        raise ValueError(
            f"n_heads must divide d_model={d_model} (one of {divisors}), but received n_heads={n_heads}."
        )
    if (placeholder := placeholder_if_grading("head_layout_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    T, C = n_tokens, d_model
    x = torch.arange(T * C, dtype=torch.float32).view(1, T, C)  # (1, T, C), entry = t * C + c
    w_o = torch.randn(C, C, generator=torch.Generator().manual_seed(seed)) / math.sqrt(C)

    your_split, your_merge = students
    n_panels = 4 + bool(your_split)
    fig, axes = ui.new_figure(n_panels, figsize=(3.2 * n_panels, 3.2))
    view = ui.FigureView(fig)
    wide = C + C - 1  # widest mosaic (H = C): fixed extent so every H redraws cheaply
    panels: dict[str, Any] = {}

    def block_axes(ax: Any, title: str, ncols: int) -> Any:
        im = ax.imshow(np.zeros((T, ncols, 4)), interpolation="nearest", aspect="auto",
                       extent=(0, 1, T - 0.5, -0.5))  # fmt: skip
        ax.set_xlim(0, 1)
        ax.set_xticks([])
        ax.set_yticks(range(T), [f"t{t}" for t in range(T)])
        ax.set_title(title, fontsize=10)
        return im

    panels["x"] = block_axes(axes[0], "x (T, C): channel colour = its head", C)
    panels["split"] = block_axes(axes[1], "split_heads → (H, T, D)", wide)
    i = 2
    if your_split:
        panels["yours"] = block_axes(axes[2], "your split; dark = differs", wide)
        panels["overlay"] = ui.diff_overlay(
            axes[2], (T, wide), "black", extent=(0, 1, T - 0.5, -0.5)
        )
        i = 3
    merged_title = "merge_heads(split) → (T, C)"
    panels["merged"] = block_axes(
        axes[i], "your " + merged_title if your_merge else merged_title, C
    )
    if your_merge:
        panels["merged_overlay"] = ui.diff_overlay(
            axes[i], (T, C), "black", extent=(0, 1, T - 0.5, -0.5)
        )
    ax_wo = axes[i + 1]
    ax_wo.imshow(w_o.numpy(), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax_wo.set_xlabel("output channel")
    ax_wo.set_ylabel("concatenated channel (head blocks)")
    ax_wo.set_title("W_o (C, C) mixes the heads", fontsize=10)
    band = ui.Rectangle((-0.5, -0.5), C, 1, fill=False, edgecolor="black", lw=2.5)
    ax_wo.add_patch(band)
    boxes = [
        ui.Rectangle((0, -0.5), 0, T, fill=False, edgecolor="black", lw=2.5)
        for _ in range(2 + bool(your_split))
    ]
    for ax, box in zip(axes, boxes):
        ax.add_patch(box)
    view.animate(list(panels.values()), band, boxes)

    controls = {
        "n_heads": ui.widgets.SelectionSlider(
            options=divisors, value=n_heads, description="heads H", style=ui.STYLE
        ),
        "head": ui.widgets.IntSlider(
            value=0, min=0, max=n_heads - 1, description="outline head", style=ui.STYLE
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        H = controls["n_heads"].value
        controls["head"].max = H - 1
        h = controls["head"].value
        D = C // H
        split = reference_split(x, H)  # (1, H, T, D)
        merged = reference_merge(split)  # (1, T, C)
        ncols = H * (D + 1) - 1
        panels["x"].set_data(_colours(x[0].numpy(), T, C, H))
        panels["split"].set_data(_colours(_blocks(split[0].numpy()), T, C, H))
        panels["split"].set_extent((0, ncols / wide, T - 0.5, -0.5))
        boxes[0].set_x(h * D / C)  # x spans [0, 1] over its C channels
        boxes[0].set_width(D / C)
        for box in boxes[1:]:  # a mosaic column is 1 / wide wide; block h starts at h * (D + 1)
            box.set_x(h * (D + 1) / wide)
            box.set_width(D / wide)
        band.set_y(h * D - 0.5)
        band.set_height(D)

        differs = np.zeros((H, T, D), bool)
        differs_merged = np.zeros((T, C), bool)
        max_diff, yours_split, yours_merged = 0.0, None, None
        if your_split:
            yours_split = your_split.call(x, H, shape=(1, H, T, D))
            differs, max_diff = compare(yours_split, split)
            differs = differs[0]  # (H, T, D)
            shown = np.full((H, T, D), np.nan) if yours_split is None else yours_split[0].numpy()
            panels["yours"].set_data(_colours(_blocks(shown), T, C, H))
            panels["yours"].set_extent((0, ncols / wide, T - 0.5, -0.5))
            mark = np.zeros((T, wide), bool)
            mark[:, :ncols] = ~np.isnan(_blocks(np.where(differs, 1.0, np.nan)))
            ui.set_diff(panels["overlay"], mark)
        if your_merge:
            yours_merged = your_merge.call(split, shape=(1, T, C))
            d, m = compare(yours_merged, merged)
            differs_merged = d[0]  # (T, C)
            max_diff = max(max_diff, m)
            shown = np.full((T, C), np.nan) if yours_merged is None else yours_merged[0].numpy()
            panels["merged"].set_data(_colours(shown, T, C, H))
            ui.set_diff(panels["merged_overlay"], differs_merged)
        else:
            panels["merged"].set_data(_colours(merged[0].numpy(), T, C, H))

        readout = (
            f"H = {H} heads of D = {C}/{H} = {D} channels: head {h} owns channels "
            f"{h * D}..{h * D + D - 1} of every token; W_o rows {h * D}..{h * D + D - 1} carry it "
            f"into all {C} output channels."
        )
        for st, n in ((your_split, int(differs.sum())), (your_merge, int(differs_merged.sum()))):
            if st:
                readout += st.status(n, max_diff, "cells", "dark")
        state = {
            "n_heads": H,
            "head": h,
            "x": x[0].numpy(),
            "split": split[0].numpy(),
            "merged": merged[0].numpy(),
            "w_o": w_o.numpy(),
        }
        if any(students):
            errors = [st.error for st in students if st and st.error]
            state.update(
                yours_split=None if yours_split is None else yours_split[0].numpy(),
                yours_merged=None if yours_merged is None else yours_merged[0].numpy(),
                differs=differs,
                differs_merged=differs_merged,
                max_diff=max_diff,
                error=errors[0] if errors else None,
            )
        return state, readout

    footer = "".join(st.footer() for st in students)
    return ui.Explorer("Heads as blocks of channels", controls, view, update, footer=footer)
