"""Attention-at-scale explorers: the online softmax step by step, the cost of long sequences,
and how far a sliding window sees through the layers.

    online_softmax_explorer  a slider walks through the key blocks: running max, sum and output
                             (with the student's merge_softmax_stats beside the reference's)
    attention_cost_explorer  T and block-size sliders: memory of the scores, naive vs tiled,
                             and the time measured for both on this machine
    receptive_field_explorer window and layer sliders: which tokens reach the last one
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from transformer_lab.attention import scaled_dot_product_attention
from transformer_lab.masks import sliding_window_mask
from transformer_lab.tiled import merge_softmax_stats, tiled_attention
from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["online_softmax_explorer", "attention_cost_explorer", "receptive_field_explorer"]


def _block_stats(scores: torch.Tensor, values: torch.Tensor):
    m = scores.amax(-1, keepdim=True)  # (1, 1)
    p = torch.exp(scores - m)
    return m, p.sum(-1, keepdim=True), p @ values


def online_softmax_explorer(
    merge_fn: Callable | None = None, n_keys: int = 16, seed: int = 3
) -> Any:
    """One query's scores visited block by block, with the running statistics.

    Args:
        merge_fn: optional student ``merge_softmax_stats(m1, l1, o1, m2, l2, o2)``; its running
            output is drawn beside the reference's.
        n_keys: number of keys S (8 to 32).
        seed: seed of the scores and the 1-D values.
    Returns:
        An Explorer with controls ``block_size`` and ``step`` (blocks visited); ``state()`` has
        ``m``, ``l``, ``output`` (running, after ``step`` blocks), ``final`` (the exact
        softmax-weighted value) and, with a student function, ``student_output``.
    """
    if not 8 <= n_keys <= 32:
        raise ValueError(f"n_keys must lie between 8 and 32, but received n_keys={n_keys}.")
    if merge_fn is not None and not callable(merge_fn):
        raise TypeError(
            f"merge_fn must be your merge_softmax_stats, but received {type(merge_fn).__name__}."
        )
    if (placeholder := placeholder_if_grading("online_softmax_explorer")) is not None:
        return placeholder
    from transformer_lab.widgets import _common as ui

    g = torch.Generator().manual_seed(seed)
    scores = (torch.randn(1, n_keys, generator=g) * 2.0).cumsum(-1) / 2  # drifting: the max moves
    values = torch.randn(n_keys, 1, generator=g)  # one number per key
    final = float(torch.softmax(scores, -1) @ values)

    fig, axes = ui.new_figure(2, figsize=(10, 3.2), width_ratios=[1.6, 1.0])
    view = ui.FigureView(fig)
    ax, ax_out = axes
    bars = list(ax.bar(range(n_keys), scores[0].numpy(), color=ui.GREY))
    max_line = ax.axhline(0.0, color=ui.RED, lw=1.5, ls="--")
    ax.set(
        xlabel="key s", ylabel="score", title="scores; visited blocks in colour, running max dashed"
    )
    out_bars = list(ax_out.bar([0, 1, 2], [0.0, 0.0, final], color=[ui.BLUE, ui.ORANGE, ui.GREY]))
    lim = max(1.0, 1.2 * float(values.abs().max()))
    ax_out.set(ylim=(-lim, lim), xticks=[0, 1, 2], xticklabels=["running o / l", "yours", "exact"],
               title="output so far")  # fmt: skip
    view.animate(bars, max_line, out_bars)
    controls = {
        "block_size": ui.widgets.IntSlider(value=4, min=1, max=n_keys, description="block size", style=ui.STYLE),
        "step": ui.widgets.IntSlider(value=1, min=0, max=n_keys, description="blocks visited", style=ui.STYLE),
    }  # fmt: skip

    def run(merge: Callable, block: int, steps: int):
        m = torch.full((1, 1), float("-inf"))
        l, o = torch.zeros(1, 1), torch.zeros(1, 1)  # noqa: E741
        for start in range(0, min(steps * block, n_keys), block):
            stats = _block_stats(scores[:, start : start + block], values[start : start + block])
            m, l, o = merge(m, l, o, *stats)  # noqa: E741
        return m, l, o

    def update() -> tuple[dict[str, Any], str]:
        block = controls["block_size"].value
        n_blocks = math.ceil(n_keys / block)
        controls["step"].max = n_blocks
        steps = min(controls["step"].value, n_blocks)
        m, l, o = run(merge_softmax_stats, block, steps)  # noqa: E741
        seen = min(steps * block, n_keys)
        for s, bar in enumerate(bars):
            bar.set_color(
                (ui.BLUE if (s // block) % 2 == 0 else ui.ORANGE) if s < seen else ui.GREY
            )
        running = float(o / l) if steps else 0.0
        max_line.set_ydata([float(m)] * 2 if steps else [float("nan")] * 2)
        out_bars[0].set_height(running)
        state: dict[str, Any] = {
            "m": float(m),
            "l": float(l),
            "output": running,
            "final": final,
            "steps": steps,
        }
        extra = ""
        if merge_fn is not None:
            try:
                sm, sl, so = run(merge_fn, block, steps)
                theirs = float(so / sl) if steps else 0.0
                verdict = (
                    "matches"
                    if abs(theirs - running) <= 1e-5
                    else f"differs by {abs(theirs - running):.3g}"
                )
            except Exception as err:  # the student's bug goes in the readout, never a traceback
                theirs, verdict = float("nan"), f"raised {type(err).__name__}: {str(err)[:120]}"
            out_bars[1].set_height(0.0 if math.isnan(theirs) else theirs)
            state["student_output"] = theirs
            extra = f"<br>Your merge_softmax_stats: {html.escape(verdict)}."
        readout = (
            f"After {steps} of {n_blocks} blocks ({seen} of {n_keys} keys): running max m = {float(m):.3f}, "
            f"running sum l = {float(l):.3f}, output o / l = {running:.4f}; the exact answer is {final:.4f}. "
            f"When a block raises the maximum, l and o are multiplied by exp(m_old - m_new) < 1.{extra}"
        )
        return state, readout

    return ui.Explorer("The online softmax, one block at a time", controls, view, update)


def attention_cost_explorer(d_head: int = 64, max_len: int = 2048) -> Any:
    """Memory and time of one attention head as the sequence grows: naive vs tiled.

    The memory curves are counted (float32 scores: 4 T^2 bytes naive, 4 T x block tiled); the
    times are measured on this machine when the explorer is built, for T = 128 .. ``max_len``.

    Returns:
        An Explorer with controls ``T`` and ``block_size``; ``state()`` has ``naive_bytes``,
        ``tiled_bytes``, ``naive_seconds`` and ``tiled_seconds`` (for the measured T nearest).
    """
    if (placeholder := placeholder_if_grading("attention_cost_explorer")) is not None:
        return placeholder
    from transformer_lab.widgets import _common as ui

    lengths = [2**i for i in range(7, int(math.log2(max_len)) + 1)]
    g = torch.Generator().manual_seed(0)
    measured: dict[tuple[str, int], float] = {}
    with torch.no_grad():
        for T in lengths:
            q, k, v = (torch.randn(T, d_head, generator=g) for _ in range(3))
            for name, fn in (("naive", lambda: scaled_dot_product_attention(q, k, v)),
                             ("tiled", lambda: tiled_attention(q, k, v, block_size=128))):  # fmt: skip
                start = time.perf_counter()
                fn()
                measured[name, T] = time.perf_counter() - start

    axis_T = np.logspace(7, 16, 60, base=2)
    fig, axes = ui.new_figure(2, figsize=(10, 3.3))
    view = ui.FigureView(fig)
    ax_mem, ax_time = axes
    ax_mem.loglog(axis_T, 4 * axis_T**2 / 2**20, color=ui.RED, label="naive: 4 T² bytes")
    (tiled_line,) = ax_mem.loglog(
        axis_T, 4 * axis_T * 128 / 2**20, color=ui.BLUE, label="tiled: 4 T·block"
    )
    (marker,) = ax_mem.plot([1024], [4.0], "ko")
    ax_mem.set(
        xlabel="sequence length T", ylabel="MiB of scores (one head)", title="memory (counted)"
    )
    ax_mem.legend(fontsize=8)
    for name, color in (("naive", ui.RED), ("tiled", ui.BLUE)):
        ax_time.loglog(
            lengths, [measured[name, T] * 1e3 for T in lengths], "o-", color=color, label=name
        )
    (time_marker,) = ax_time.plot([lengths[0]], [measured["naive", lengths[0]] * 1e3], "ks")
    ax_time.set(xlabel="T", ylabel="ms", title=f"time measured here (D={d_head})")
    ax_time.legend(fontsize=8)
    view.animate(tiled_line, marker, time_marker)
    controls = {
        "T": ui.widgets.SelectionSlider(options=[2**i for i in range(7, 17)], value=1024,
                                        description="sequence length T", style=ui.STYLE),
        "block_size": ui.widgets.SelectionSlider(options=[16, 32, 64, 128, 256, 512], value=128,
                                                 description="key block", style=ui.STYLE),
    }  # fmt: skip

    def update() -> tuple[dict[str, Any], str]:
        T, block = controls["T"].value, controls["block_size"].value
        naive, tiled = 4 * T * T, 4 * T * min(block, T)
        tiled_line.set_ydata(4 * axis_T * block / 2**20)
        marker.set_data([T], [naive / 2**20])
        nearest = min(lengths, key=lambda n: abs(math.log2(n) - math.log2(T)))
        time_marker.set_data([nearest], [measured["naive", nearest] * 1e3])
        state = {
            "T": T,
            "naive_bytes": naive,
            "tiled_bytes": tiled,
            "naive_seconds": measured["naive", nearest],
            "tiled_seconds": measured["tiled", nearest],
        }
        readout = (
            f"T = {T:,}: the naive scores take {naive / 2**20:,.1f} MiB per head and layer, tiled "
            f"blocks {tiled / 2**20:,.2f} MiB ({naive / tiled:,.0f}x less). The work is the same "
            f"O(T² D) either way: tiling saves memory, not arithmetic. Measured at T = {nearest}: naive "
            f"{measured['naive', nearest] * 1e3:.1f} ms, tiled {measured['tiled', nearest] * 1e3:.1f} ms."
        )
        return state, readout

    return ui.Explorer("The cost of long sequences", controls, view, update)


def receptive_field_explorer(T: int = 32) -> Any:
    """How far information travels through stacked sliding-window layers.

    Returns:
        An Explorer with controls ``window`` and ``layers``; ``state()`` has ``reach`` (T, T)
        bool (output t depends on input s after that many layers) and ``field`` (how many
        inputs the last token depends on).
    """
    if not 4 <= T <= 64:
        raise ValueError(f"T must lie between 4 and 64, but received T={T}.")
    if (placeholder := placeholder_if_grading("receptive_field_explorer")) is not None:
        return placeholder
    from transformer_lab.widgets import _common as ui

    fig, axes = ui.new_figure(2, figsize=(10, 3.6), width_ratios=[1.0, 1.3])
    view = ui.FigureView(fig)
    image = axes[0].imshow(np.zeros((T, T)), cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
    axes[0].set(
        xlabel="input position s", ylabel="output position t", title="output t depends on input s"
    )
    bars = list(axes[1].bar(range(T), np.zeros(T), color=ui.BLUE))
    axes[1].set(ylim=(0, 1.05), xlabel="input position s", ylabel="reaches the last token",
                title=f"the last token (t = {T - 1})")  # fmt: skip
    view.animate(image, bars)
    controls = {
        "window": ui.widgets.IntSlider(value=4, min=1, max=T, description="window", style=ui.STYLE),
        "layers": ui.widgets.IntSlider(
            value=1, min=1, max=12, description="layers", style=ui.STYLE
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        w, L = controls["window"].value, controls["layers"].value
        one = sliding_window_mask(T, w).to(torch.int64)  # (T, T)
        reach = torch.eye(T, dtype=torch.int64)
        for _ in range(L):
            reach = ((one @ reach) > 0).to(torch.int64)  # paths of length L through the windows
        reach_np = reach.bool().numpy()
        image.set_data(reach_np.astype(float))
        for s, bar in enumerate(bars):
            bar.set_height(float(reach_np[T - 1, s]))
        field = int(reach_np[T - 1].sum())
        formula = min(T, L * (w - 1) + 1)
        readout = (
            f"window {w}, {L} layer(s): the last token depends on {field} inputs = min(T, L (w - 1) + 1) "
            f"= {formula}. Each layer costs T·w scores instead of T²/2, yet depth grows the view linearly."
        )
        return {"reach": reach_np, "field": field}, readout

    return ui.Explorer("Sliding windows through the layers", controls, view, update)
