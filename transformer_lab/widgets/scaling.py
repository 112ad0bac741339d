"""Scaling explorer: why attention divides the scores by sqrt(d_k).

For q, k with d_k independent unit-variance entries, q . k = sum_i q_i k_i is a sum of d_k terms
of variance 1, so Var(q . k) = d_k: the scores spread out like sqrt(d_k). Fed to a softmax
unscaled, a few large scores take almost all the weight (the softmax saturates and its gradient
vanishes); divided by sqrt(d_k) the scores keep unit variance at every width. Given the
student's ``scaled_dot_product_attention``, its weights are drawn as diamonds over the scaled
bars, red where they differ from the reference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from transformer_lab.attention import softmax
from transformer_lab.widgets._inputs import check_positive
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare, pick_item

__all__ = ["scaling_explorer"]

_BINS = 40


def scaling_explorer(
    scaled_dot_product_attention: Any = None,
    *,
    max_d_k: int = 512,
    n_queries: int = 256,
    n_keys: int = 16,
    d_k: int = 64,
    seed: int = 0,
) -> Any:
    """Histograms of raw and scaled dot products, and the softmax they produce, as d_k grows.

    Args:
        scaled_dot_product_attention: optional, your ``(q, k, v, mask=None) -> (out, weights)``;
            its weights on the same queries and keys are drawn over the scaled bars.
        max_d_k: largest head width on the slider (a power of two, at most 4096).
        n_queries: number of random queries; each has its own ``n_keys`` random keys.
        n_keys: keys per query S (the softmax runs over them).
        d_k: initial head width (a power of two up to ``max_d_k``).
        seed: seed of the random queries and keys.
    Returns:
        An Explorer with control ``d_k``; ``state()`` has ``unscaled`` and ``scaled`` (all
        n_queries * n_keys dot products), their standard deviations ``std_unscaled`` /
        ``std_scaled``, ``sorted_weights_unscaled`` / ``sorted_weights_scaled`` (S,) (softmax
        weights sorted in decreasing order, averaged over queries) and ``max_weight_unscaled`` /
        ``max_weight_scaled``; with your function also ``yours`` (S,) (your sorted mean
        weights, or None), ``differs`` (S,), ``max_diff`` (over all weights) and ``error``.
        Under grading, a placeholder.
    """
    student = Student(
        scaled_dot_product_attention, "scaled_dot_product_attention", "scaled_dot_product_attention"
    )
    for name, value in (
        ("max_d_k", max_d_k),
        ("n_queries", n_queries),
        ("n_keys", n_keys),
        ("d_k", d_k),
    ):
        check_positive(name, value)
    if max_d_k & (max_d_k - 1) or max_d_k > 4096:
        raise ValueError(
            f"max_d_k must be a power of two up to 4096, but received max_d_k={max_d_k}."
        )
    if d_k & (d_k - 1) or d_k > max_d_k:
        raise ValueError(
            f"d_k must be a power of two up to max_d_k={max_d_k}, but received d_k={d_k}."
        )
    if n_keys < 2:
        raise ValueError(
            f"n_keys must be at least 2 for a softmax to choose between keys, but received n_keys={n_keys}."
        )
    if (placeholder := placeholder_if_grading("scaling_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, max_d_k, generator=gen)  # (Q, d_max)
    k = torch.randn(n_queries, n_keys, max_d_k, generator=gen)  # (Q, S, d_max)

    fig, (ax_raw, ax_scaled, ax_w) = ui.new_figure(3, figsize=(11, 3.1))
    view = ui.FigureView(fig)
    # Fixed axes (so frames are cheap blits): the unscaled panel spans the widest d_k on the
    # slider, and both histograms are drawn relative to their peak, so only their width changes.
    wide = 4.5 * math.sqrt(max_d_k)
    grid = np.linspace(-4.5, 4.5, 200)
    bell = np.exp(-(grid**2) / 2)  # the normal density relative to its peak
    raw_hist = ax_raw.stairs(
        np.zeros(_BINS), np.linspace(-1, 1, _BINS + 1), fill=True, color=ui.ORANGE, alpha=0.7
    )
    (raw_pdf,) = ax_raw.plot(grid, bell, color="black", lw=1, label="N(0, d_k)")
    ax_raw.set_xlim(-wide, wide)
    ax_raw.set_ylim(0, 1.25)
    ax_raw.set_title("q·k (unscaled)")
    ax_raw.set_yticks([])
    ax_raw.legend(loc="upper right", frameon=False, fontsize=8)
    scaled_hist = ax_scaled.stairs(
        np.zeros(_BINS), np.linspace(-1, 1, _BINS + 1), fill=True, color=ui.BLUE, alpha=0.7
    )
    ax_scaled.plot(grid, bell, color="black", lw=1, label="N(0, 1)")
    ax_scaled.set_xlim(-4.5, 4.5)
    ax_scaled.set_ylim(0, 1.25)
    ax_scaled.set_title("q·k / √d_k (scaled)")
    ax_scaled.set_yticks([])
    ax_scaled.legend(loc="upper right", frameon=False, fontsize=8)
    ranks = np.arange(1, n_keys + 1)
    width = 0.4
    raw_bars = ax_w.bar(
        ranks - width / 2, np.zeros(n_keys), width, color=ui.ORANGE, label="softmax(q·k)"
    )
    scaled_bars = ax_w.bar(
        ranks + width / 2, np.zeros(n_keys), width, color=ui.BLUE, label="softmax(q·k / √d_k)"
    )
    ax_w.set_ylim(0, 1.05)
    ax_w.set_xticks(ranks[:: max(1, n_keys // 8)])
    ax_w.set_xlabel("keys, most weighted first")
    ax_w.set_title(f"mean softmax weights over {n_keys} keys")
    ax_w.legend(loc="upper right", frameon=False, fontsize=8)
    yours_dots = ax_w.scatter(
        ranks + width / 2, np.zeros(n_keys), marker="D", s=28, color=ui.GREEN, zorder=5,
        label="yours" if student else None, visible=bool(student),
    )  # fmt: skip
    if student:
        ax_w.legend(loc="upper right", frameon=False, fontsize=8)
    view.animate(raw_hist, raw_pdf, scaled_hist, list(raw_bars), list(scaled_bars), yours_dots)

    options = [2**i for i in range(int(math.log2(max_d_k)) + 1)]
    controls = {
        "d_k": ui.widgets.SelectionSlider(
            options=options, value=d_k, description="d_k (head width)", style=ui.STYLE
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        d = controls["d_k"].value
        unscaled = torch.einsum("qd,qsd->qs", q[:, :d], k[:, :, :d])  # (Q, S)
        scaled = unscaled / math.sqrt(d)  # (Q, S)
        w_raw = softmax(unscaled).sort(dim=-1, descending=True).values.mean(dim=0)  # (S,)
        w_scaled = softmax(scaled).sort(dim=-1, descending=True).values.mean(dim=0)  # (S,)

        spread = 4.5 * math.sqrt(d)
        counts, edges = np.histogram(unscaled.numpy().ravel(), bins=_BINS, range=(-spread, spread))
        raw_hist.set_data(counts / counts.max(), edges)
        raw_pdf.set_data(grid * math.sqrt(d), bell)  # N(0, d_k), relative to its peak
        counts, edges = np.histogram(scaled.numpy().ravel(), bins=_BINS, range=(-4.5, 4.5))
        scaled_hist.set_data(counts / counts.max(), edges)
        ui.set_bar_heights(raw_bars, w_raw.numpy())
        ui.set_bar_heights(scaled_bars, w_scaled.numpy())

        differs, max_diff, sorted_yours = np.zeros(n_keys, bool), 0.0, None
        if student:
            # Your attention on the same queries (Q, 1, d) and keys (Q, S, d); weights (Q, 1, S).
            qs, ks = q[:, None, :d], k[:, :, :d]
            yours = student.call(
                qs, ks, ks[..., :1], shape=(len(q), 1, n_keys),
                pick=pick_item(1, 2, "(out, weights)"),
            )  # fmt: skip
            all_differ, max_diff = compare(yours, softmax(scaled)[:, None, :])
            if yours is not None:
                sorted_yours = yours[:, 0].float().sort(dim=-1, descending=True).values.mean(0)
                differs, _ = compare(sorted_yours, w_scaled)
                differs |= all_differ.any(axis=(0, 1))
                heights = sorted_yours.nan_to_num(1.02).clamp(0, 1.02).numpy()
                yours_dots.set_offsets(np.c_[ranks + width / 2, heights])
                yours_dots.set_color([ui.RED if d else ui.GREEN for d in differs])
            yours_dots.set_visible(yours is not None)
        std_raw, std_scaled = float(unscaled.std()), float(scaled.std())
        readout = (
            f"d_k = {d}: std of q·k = {std_raw:.2f} (theory √d_k = {math.sqrt(d):.2f}); "
            f"scaled std = {std_scaled:.2f} (theory 1). Mean largest softmax weight: "
            f"<b>{float(w_raw[0]):.2f}</b> unscaled vs <b>{float(w_scaled[0]):.2f}</b> scaled "
            f"(uniform would be {1 / n_keys:.2f})."
        ) + student.status(int(differs.sum()), max_diff, "ranks")
        state = {
            "d_k": d,
            "unscaled": unscaled.numpy().ravel(),
            "scaled": scaled.numpy().ravel(),
            "std_unscaled": std_raw,
            "std_scaled": std_scaled,
            "sorted_weights_unscaled": w_raw.numpy(),
            "sorted_weights_scaled": w_scaled.numpy(),
            "max_weight_unscaled": float(w_raw[0]),
            "max_weight_scaled": float(w_scaled[0]),
        }
        if student:
            state.update(
                yours=None if sorted_yours is None else sorted_yours.numpy(),
                differs=differs,
                max_diff=max_diff,
                error=student.error,
            )
        return state, readout

    return ui.Explorer("Why divide by √d_k?", controls, view, update, footer=student.footer())
