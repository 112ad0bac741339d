"""RoPE explorer: rotary encodings rotate channel pairs, and the score depends on the offset only.

Rotary position embedding rotates pair i = (2i, 2i+1) of a query or key at position t by the
angle t * theta_i, theta_i = base^(-2i / D). A rotated query at t and a rotated key at s give

    (R_t q) . (R_s k) = q . R_(s - t) k,

so the score depends on the content and on the offset s - t only: moving both positions by the
same amount leaves it unchanged, and the (T, S) score matrix is constant along its diagonals.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from transformer_lab.positional import RotaryEmbedding
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["rope_explorer"]

N_POSITIONS, MAX_OFFSET, OTHER_T = 64, 16, 16


def rope_explorer(
    apply_rope: Any = None, *, d_head: int = 16, base: float = 100.0, seed: int = 0
) -> Any:
    """One query and one key, rotated to positions t and s = t + offset; scores against offset.

    Args:
        apply_rope: optional, your ``apply_rope(x, base=10000.0)``: (..., T, D) -> rotated; run
            on the same query and key, drawn beside the reference.
        d_head: D (even, 2 to 64).
        base: the wavelength base (a small base makes the slow pairs visible on 64 positions).
        seed: seed of q and k.
    Returns:
        An Explorer with controls ``t``, ``offset`` and ``pair``; ``state()`` has
        ``scores`` (T, T) = rotated q_t . rotated k_s, ``curve`` (offsets,) at the current t
        (NaN where s is outside 0..T-1), ``other_curve`` (the same at t = 16), ``q_pair`` and
        ``k_pair`` (the rotated 2-D pair i); with your function also ``yours`` (T, T) or None,
        ``differs`` (T, T), ``max_diff`` and ``error``. Under grading, a placeholder.
    """
    student = Student(apply_rope, "apply_rope", "apply_rope")
    if (
        isinstance(d_head, bool)
        or not isinstance(d_head, int)
        or d_head % 2
        or not 2 <= d_head <= 64
    ):
        raise ValueError(
            f"d_head must be an even integer from 2 to 64, but received d_head={d_head!r}."
        )
    if not 2 <= base <= 1e5:
        raise ValueError(f"base must lie between 2 and 100000, but received base={base}.")
    if (placeholder := placeholder_if_grading("rope_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    T, D = N_POSITIONS, d_head
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(D, generator=gen), torch.randn(D, generator=gen)
    rope = RotaryEmbedding(D, base)
    rq, rk = rope(q.expand(T, D)), rope(k.expand(T, D))  # (T, D) each: q and k at every position
    scores = rq @ rk.T  # (T, S): constant along diagonals
    yours_q = yours_k = yours_scores = None
    differs, max_diff, n_rows_differ = np.zeros((T, T), bool), 0.0, 0
    if student:
        yours_q = student.call(q.expand(T, D), base=base, shape=(T, D))
        if yours_q is not None:
            yours_k = student.call(k.expand(T, D), base=base, shape=(T, D))
        if yours_k is not None:
            yours_scores = yours_q.float() @ yours_k.float().T  # (T, S)
            differs, max_diff = compare(yours_scores, scores, atol=1e-3)
            rows_differ, row_diff = compare(torch.cat([yours_q, yours_k]), torch.cat([rq, rk]))
            max_diff = max(max_diff, row_diff)
            n_rows_differ = int(rows_differ.sum())
    offsets = np.arange(-MAX_OFFSET, MAX_OFFSET + 1)

    def curve(matrix: torch.Tensor | None, t: int) -> np.ndarray:
        s = t + offsets
        valid = (s >= 0) & (s < T)
        out = np.full(len(offsets), np.nan)
        if matrix is not None:
            out[valid] = matrix[t, s[valid]].numpy()
        return out

    n_panels = 3
    fig, (ax_pair, ax_curve, ax_mat) = ui.new_figure(
        n_panels, figsize=(13, 3.8), width_ratios=[0.9, 1.3, 1]
    )
    view = ui.FigureView(fig)
    radius = 1.15 * float(torch.stack([q, k]).view(2, -1, 2).norm(dim=-1).max())
    circle = np.linspace(0, 2 * math.pi, 100)
    ax_pair.plot(radius * np.cos(circle), radius * np.sin(circle), color=ui.GREY, lw=0.8)
    arrow = dict(marker="o", markevery=[1], lw=2.5)
    (q0_line,) = ax_pair.plot([0, 0], [0, 0], color=ui.BLUE, lw=1, ls=":", label="q (t = 0)")
    (q_line,) = ax_pair.plot([0, 0], [0, 0], color=ui.BLUE, label="q at t", **arrow)
    (k_line,) = ax_pair.plot([0, 0], [0, 0], color=ui.ORANGE, label="k at s", **arrow)
    (yq_line,) = ax_pair.plot([0, 0], [0, 0], color=ui.GREEN, lw=1.2, ls="--", label="yours")
    (yk_line,) = ax_pair.plot([0, 0], [0, 0], color=ui.GREEN, lw=1.2, ls="--")
    for line in (yq_line, yk_line):
        line.set_visible(bool(student))
    ax_pair.set_xlim(-radius, radius)
    ax_pair.set_ylim(-radius, radius)
    ax_pair.set_aspect("equal")
    ax_pair.set_xticks([])
    ax_pair.set_yticks([])
    ax_pair.legend(loc="lower left", fontsize=7, frameon=False, ncol=2)
    pair_title = ax_pair.set_title(" ", fontsize=10)

    bound = 1.1 * float(scores.abs().max())
    (other_line,) = ax_curve.plot(offsets, curve(scores, OTHER_T), color=ui.GREY, lw=5, alpha=0.5,
                                  label=f"at t = {OTHER_T}")  # fmt: skip
    (now_line,) = ax_curve.plot(offsets, curve(scores, 0), color=ui.BLUE, lw=1.8, label="at t")
    yours_dots = ax_curve.scatter(offsets, np.zeros(len(offsets)), s=14, color=ui.GREEN, zorder=5,
                                  label="yours at t", visible=bool(student))  # fmt: skip
    mark = ax_curve.axvline(0, color=ui.ORANGE, lw=1.5)
    ax_curve.set_xlim(-MAX_OFFSET - 0.5, MAX_OFFSET + 0.5)
    ax_curve.set_ylim(-bound, bound)
    ax_curve.axhline(0, color=ui.GREY, lw=0.8)
    ax_curve.set_xlabel("offset s − t")
    ax_curve.set_ylabel("score (R_t q)·(R_s k)")
    ax_curve.legend(loc="upper right", fontsize=8, frameon=False)
    curve_title = ax_curve.set_title(" ", fontsize=10)

    shown = yours_scores if yours_scores is not None else scores
    ax_mat.imshow(shown.numpy(), cmap="RdBu_r", vmin=-bound, vmax=bound, interpolation="nearest")
    if student:
        ui.set_diff(ui.diff_overlay(ax_mat, (T, T), "black", aspect="equal"), differs)
    ax_mat.set_xlabel("key position s")
    ax_mat.set_ylabel("query position t")
    ax_mat.set_title(("your" if yours_scores is not None else "all") + " scores: constant along diagonals",
                     fontsize=10)  # fmt: skip
    cell = ui.Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor="black", lw=2)
    ax_mat.add_patch(cell)
    view.animate(q0_line, q_line, k_line, yq_line, yk_line, pair_title, now_line, yours_dots, mark,
                 curve_title, cell)  # fmt: skip
    view.animate(other_line, slow=True)

    controls = {
        "t": ui.widgets.IntSlider(
            value=5, min=0, max=T - MAX_OFFSET - 1, description="query position t", style=ui.STYLE
        ),  # fmt: skip
        "offset": ui.widgets.IntSlider(
            value=3, min=-MAX_OFFSET, max=MAX_OFFSET, description="offset s − t", style=ui.STYLE
        ),  # fmt: skip
        "pair": ui.widgets.IntSlider(
            value=0, min=0, max=D // 2 - 1, description="pair i", style=ui.STYLE
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        t, off, i = (controls[n].value for n in ("t", "offset", "pair"))
        s = t + off
        valid = 0 <= s < T
        sv = min(max(s, 0), T - 1)
        q_pair, k_pair = rq[t, 2 * i : 2 * i + 2].numpy(), rk[sv, 2 * i : 2 * i + 2].numpy()
        q0_line.set_data([0, q[2 * i]], [0, q[2 * i + 1]])
        q_line.set_data([0, q_pair[0]], [0, q_pair[1]])
        k_line.set_data([0, k_pair[0]], [0, k_pair[1]])
        k_line.set_visible(valid)
        theta = base ** (-2 * i / D)
        pair_title.set_text(f"pair {i}: θ = {theta:.3g}; q turned by tθ, k by sθ")
        now_line.set_ydata(curve(scores, t))
        mark.set_xdata([off, off])
        cell.set_xy((sv - 0.5, t - 0.5))
        cell.set_visible(valid)
        score = float(scores[t, sv]) if valid else float("nan")
        other = float(scores[OTHER_T, OTHER_T + off])
        curve_title.set_text(
            f"t = {t}: score at offset {off} = {score:.3f} (at t = {OTHER_T}: {other:.3f})"
        )
        if yours_scores is not None:
            yc = curve(yours_scores, t)
            dots_differ = np.zeros(len(offsets), bool)
            ok = ~np.isnan(yc)
            rows = t + offsets
            dots_differ[ok] = differs[t, rows[ok]]
            yours_dots.set_offsets(
                np.c_[offsets, np.nan_to_num(np.clip(yc, -bound, bound), nan=-2 * bound)]
            )
            yours_dots.set_color([ui.RED if d else ui.GREEN for d in dots_differ])
            yq_line.set_data([0, yours_q[t, 2 * i]], [0, yours_q[t, 2 * i + 1]])
            yk_line.set_data([0, yours_k[sv, 2 * i]], [0, yours_k[sv, 2 * i + 1]])
        readout = (
            f"q at t = {t}, k at s = {s}: score {score:.4f}; the same offset {off} at t = {OTHER_T} "
            f"gives {other:.4f} (difference {abs(score - other):.1e}): only s − t matters."
        ) + student.status(
            int(differs.sum()) + n_rows_differ, max_diff, "scores or rotated entries", "dark/red"
        )
        state = {
            "t": t,
            "offset": off,
            "pair": i,
            "scores": scores.numpy(),
            "curve": curve(scores, t),
            "other_curve": curve(scores, OTHER_T),
            "q_pair": q_pair,
            "k_pair": k_pair,
        }
        if student:
            state.update(
                yours=None if yours_scores is None else yours_scores.numpy(),
                differs=differs,
                max_diff=max_diff,
                error=student.error,
            )
        return state, readout

    return ui.Explorer(
        "Rotary position embedding (RoPE)", controls, view, update, footer=student.footer()
    )
