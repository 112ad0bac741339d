"""Masked-row explorer: a query with nothing to attend to, and the NaN it spreads.

Left padding combined with the causal mask leaves the first queries with no visible key: their
score rows are all -inf. A naive softmax computes exp(-inf - (-inf)) = NaN there; in the next
layer that NaN row is a *value* for every other token, and a weight of exactly 0 still gives
0 * NaN = NaN, so after two layers the whole sequence (and the loss) is NaN. A safe softmax
returns zeros for an all -inf row: the row's output is 0 and nothing spreads.

Each layer here is x <- x + attention(x) with its own seeded projections and the same mask.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_lab.attention import softmax as safe_softmax
from transformer_lab.masks import causal_mask
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["masked_row_explorer"]

N_LAYERS = 6


def masked_row_explorer(
    softmax: Any = None, *, seq_len: int = 6, d_model: int = 8, seed: int = 0
) -> Any:
    """Which tokens are NaN after each layer, with a naive, a safe (or your) softmax.

    Args:
        softmax: optional, your ``softmax(x, dim=-1)``; adds the choice "yours", compared with
            the safe softmax layer by layer.
        seq_len: T (3 to 12); d_model: C (2 to 64).
        seed: seed of the inputs and of every layer's projections.
    Returns:
        An Explorer with controls ``softmax`` ("naive" / "safe" / "yours"), ``padding`` (left
        padding: that many keys hidden, so that many queries see nothing) and ``layer`` (whose
        weights are shown); ``state()`` has ``nan`` (layers, T) bool, ``size`` (layers, T) =
        max |x|, ``weights`` (T, T) of the shown layer and ``mask`` (T, T); with your function
        also ``differs`` (layers, T), ``max_diff`` and ``error``. Under grading, a placeholder.
    """
    student = Student(softmax, "softmax", "softmax")
    if not 3 <= seq_len <= 12 or not 2 <= d_model <= 64:
        raise ValueError(
            f"seq_len must lie in 3..12 and d_model in 2..64, but received seq_len={seq_len} and "
            f"d_model={d_model}."
        )
    if (placeholder := placeholder_if_grading("masked_row_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    T, C = seq_len, d_model
    gen = torch.Generator().manual_seed(seed)
    x0 = torch.randn(T, C, generator=gen)
    weights_of = [
        tuple(torch.randn(C, C, generator=gen) / math.sqrt(C) for _ in range(3))
        for _ in range(N_LAYERS)
    ]

    def naive(scores: Tensor) -> Tensor:
        e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))  # NaN on an all -inf row
        return e / e.sum(dim=-1, keepdim=True)

    def run(kind: str, mask: Tensor) -> tuple[list[Tensor], list[Tensor]] | None:
        """Hidden states after each layer and each layer's weights, or None (student error)."""
        x, states, weights = x0, [], []
        for w_q, w_k, w_v in weights_of:
            q, k, v = x @ w_q, x @ w_k, x @ w_v  # (T, C) each
            scores = (q @ k.T / math.sqrt(C)).masked_fill(~mask, float("-inf"))  # (T, T)
            if kind == "naive":
                w = naive(scores)
            elif kind == "safe":
                w = safe_softmax(scores)
            else:
                w = student.call(scores, shape=(T, T))
                if w is None:
                    return None
                w = w.float()
            x = x + w @ v
            states.append(x)
            weights.append(w)
        return states, weights

    fig, (ax_grid, ax_w) = ui.new_figure(2, figsize=(10, 3.6), width_ratios=[1.3, 1])
    view = ui.FigureView(fig)
    from matplotlib import colormaps

    cmap = colormaps["Blues"].with_extremes(bad=ui.RED)
    im_grid = ax_grid.imshow(np.zeros((N_LAYERS, T)), cmap=cmap, vmin=0, vmax=6, aspect="auto",
                             interpolation="nearest")  # fmt: skip
    grid_overlay = ui.diff_overlay(ax_grid, (N_LAYERS, T), "black")
    ax_grid.set_xticks(range(T))
    ax_grid.set_yticks(range(N_LAYERS), [f"layer {i + 1}" for i in range(N_LAYERS)])
    ax_grid.set_xlabel("token")
    ax_grid.set_title("max |x| after each layer (red = NaN)", fontsize=10)
    layer_box = ui.Rectangle((-0.5, -0.5), T, 1, fill=False, edgecolor=ui.ORANGE, lw=2.5)
    ax_grid.add_patch(layer_box)
    im_w = ax_w.imshow(np.zeros((T, T)), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    w_overlay = ui.diff_overlay(ax_w, (T, T), "black", aspect="equal")
    ax_w.set_xlabel("key")
    ax_w.set_ylabel("query")
    w_title = ax_w.set_title(" ", fontsize=10)
    view.animate(im_grid, layer_box, im_w, w_title)
    if student:  # the marks of the student's differences (always empty otherwise)
        view.animate(grid_overlay, w_overlay)
    else:
        grid_overlay.set_visible(False)
        w_overlay.set_visible(False)

    options = ["naive", "safe"] + (["yours"] if student else [])
    controls = {
        "softmax": ui.widgets.ToggleButtons(
            options=options, value="naive", description="softmax", style=ui.STYLE
        ),  # fmt: skip
        "padding": ui.widgets.IntSlider(
            value=1, min=0, max=T - 2, description="left padding", style=ui.STYLE
        ),  # fmt: skip
        "layer": ui.widgets.IntSlider(
            value=1, min=1, max=N_LAYERS, description="show layer", style=ui.STYLE
        ),  # fmt: skip
    }

    def update() -> tuple[dict[str, Any], str]:
        kind, pad, shown = (controls[n].value for n in ("softmax", "padding", "layer"))
        mask = causal_mask(T) & (torch.arange(T) >= pad)  # (T, T); rows 0..pad-1 see nothing
        result = run(kind, mask)
        if result is None:  # the student's softmax failed: show the error, keep the picture empty
            states = [torch.full((T, C), float("nan"))] * N_LAYERS
            weights = [torch.full((T, T), float("nan"))] * N_LAYERS
        else:
            states, weights = result
        size = torch.stack([s.abs().amax(dim=-1) for s in states])  # (layers, T), NaN stays NaN
        nan = torch.stack([torch.isnan(s).any(dim=-1) for s in states])  # (layers, T)
        im_grid.set_data(np.where(nan.numpy(), np.nan, size.numpy()))
        layer_box.set_y(shown - 1.5)
        im_w.set_data(weights[shown - 1].numpy())
        w_title.set_text(f"layer {shown} weights ({kind} softmax)")
        differs, w_differs, max_diff = np.zeros((N_LAYERS, T), bool), np.zeros((T, T), bool), 0.0
        if kind == "yours" and result is not None:
            safe_states, safe_weights = run("safe", mask)
            for i, (mine, ref) in enumerate(zip(states, safe_states)):
                d, m = compare(mine, ref)
                differs[i] = d.any(axis=-1)
                max_diff = max(max_diff, m)
            w_differs, _ = compare(weights[shown - 1], safe_weights[shown - 1])
        ui.set_diff(grid_overlay, differs)
        ui.set_diff(w_overlay, w_differs)
        n_nan = int(nan[-1].sum())
        first = next((i + 1 for i in range(N_LAYERS) if nan[i].all()), None)
        readout = f"{pad} padding key(s) + causal mask: {pad} query row(s) see nothing. " + (
            f"{kind} softmax: NaN in {n_nan} of {T} tokens after {N_LAYERS} layers"
            + (f"; every token is NaN from layer {first} on." if first else ".")
        )
        if kind == "yours":
            readout += student.status(
                int(differs.sum()), max_diff, "token states (vs the safe softmax)", "dark"
            )
        state = {
            "softmax": kind,
            "padding": pad,
            "layer": shown,
            "nan": nan.numpy(),
            "size": size.numpy(),
            "weights": weights[shown - 1].numpy(),
            "mask": mask.numpy(),
        }
        if student:
            state.update(differs=differs, max_diff=max_diff, error=student.error)
        return state, readout

    return ui.Explorer(
        "A fully masked row: NaN spreading through the layers", controls, view, update,
        footer=student.footer(),
    )  # fmt: skip
