"""Positional-encoding explorer: the sinusoidal table, similarity against offset, and the clocks.

    PE[t, 2i] = sin(t * theta_i),  PE[t, 2i+1] = cos(t * theta_i),  theta_i = base^(-2i / C)

Each pair of columns (2i, 2i+1) is a clock hand at angle t * theta_i: the first pairs spin fast,
the last ones barely move, so together they tell positions apart like the hands of a clock. The
dot product p_t . p_s = sum_i cos((t - s) theta_i) depends only on the offset t - s. Given the
student's ``sinusoidal_encoding``, its table is drawn beside the reference, differing entries red.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from transformer_lab.positional import sinusoidal_encoding as reference_encoding
from transformer_lab.widgets._inputs import check_positive
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["positional_explorer"]

_CLOCKS = (2, 4)  # rows, columns of the clock panel: at most 8 clock hands shown
_MAX_WIDTH = 256


def _short(x: float) -> str:
    """A wavelength in at most four characters: 6.28, 63, 1990, 35k, 2M."""
    if x < 100:
        return f"{x:.3g}"
    if x < 1e4:
        return f"{x:.0f}"
    return f"{x / 1e3:.0f}k" if x < 1e6 else f"{x / 1e6:.0f}M"


def positional_explorer(
    sinusoidal_encoding: Any = None,
    *,
    n_positions: int = 64,
    d_model: int = 32,
    base: float = 10000.0,
    position: int = 5,
) -> Any:
    """Heatmap of sinusoidal encodings, similarity of position t to every other, and its clocks.

    Args:
        sinusoidal_encoding: optional, your ``sinusoidal_encoding(n_positions, d_model,
            base=10000.0)``; its (T, C) table is drawn beside the reference's.
        n_positions: number of positions T shown (2 to 512).
        d_model: initial width C (even, at most 256).
        base: initial wavelength base (10 to 100000; the paper uses 10000).
        position: initial position t whose similarity and clocks are shown.
    Returns:
        An Explorer with controls ``d_model``, ``base`` and ``position``; ``state()`` has ``pe``
        (T, C), ``similarity`` (T,) = PE @ p_t / (C / 2), ``pairs`` (the clock indices i shown)
        and ``hands`` (n_clocks, 2) = (sin, cos) of t * theta_i; with your function also
        ``yours`` (T, C) or None, ``differs`` (T, C), ``max_diff`` and ``error``. Under grading,
        a placeholder.
    """
    student = Student(sinusoidal_encoding, "sinusoidal_encoding", "sinusoidal_encoding")
    check_positive("n_positions", n_positions)
    if not 2 <= n_positions <= 512:
        raise ValueError(
            f"n_positions must lie between 2 and 512, but received n_positions={n_positions}."
        )
    if (
        isinstance(d_model, bool)
        or not isinstance(d_model, int)
        or d_model % 2
        or not 2 <= d_model <= _MAX_WIDTH
    ):
        raise ValueError(
            f"d_model must be an even integer from 2 to {_MAX_WIDTH}, but received d_model={d_model!r}."
        )
    if not 10 <= base <= 100000:
        raise ValueError(f"base must lie between 10 and 100000, but received base={base}.")
    if not 0 <= position < n_positions:
        raise ValueError(
            f"position must lie in 0..{n_positions - 1}, but received position={position}."
        )
    if (placeholder := placeholder_if_grading("positional_explorer")) is not None:
        return placeholder

    from matplotlib.collections import LineCollection
    from matplotlib.patches import Circle

    from transformer_lab.widgets import _common as ui

    T = n_positions
    if student:
        fig, (ax_pe, ax_yours, ax_sim, ax_clk) = ui.new_figure(
            4, figsize=(15, 3.6), width_ratios=[1.1, 1.1, 1.1, 1.4]
        )
    else:
        fig, (ax_pe, ax_sim, ax_clk) = ui.new_figure(
            3, figsize=(12, 3.6), width_ratios=[1.1, 1.1, 1.4]
        )
    view = ui.FigureView(fig)
    # The table always fills a fixed box (columns stretched to the width), so changing C redraws cheaply.
    im = ax_pe.imshow(
        np.zeros((T, 2)),
        cmap="RdBu_r",
        vmin=-1,
        vmax=1,
        aspect="auto",
        interpolation="nearest",
        extent=(0, 1, T - 0.5, -0.5),
    )
    ax_pe.set_xlim(0, 1)
    ax_pe.set_xticks([0, 1], ["0", "C"])
    ax_pe.set_xlabel("dimension (sin, cos, sin, cos, ...)")
    ax_pe.set_ylabel("position t")
    ax_pe.set_title("PE[t, :]")
    row_line = ax_pe.axhline(position, color="black", lw=1.2)
    if student:
        im_yours = ax_yours.imshow(
            np.zeros((T, 2)), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
            interpolation="nearest", extent=(0, 1, T - 0.5, -0.5),
        )  # fmt: skip
        overlay = ui.diff_overlay(ax_yours, (T, 2), "black", extent=(0, 1, T - 0.5, -0.5))
        ax_yours.set_xlim(0, 1)
        ax_yours.set_xticks([0, 1], ["0", "C"])
        ax_yours.set_title(f"yours ({student.name}); dark = differs")
        view.animate(im_yours, overlay)

    (sim_line,) = ax_sim.plot(np.arange(T), np.zeros(T), color=ui.BLUE)
    sim_mark = ax_sim.axvline(position, color=ui.ORANGE, lw=1.5)
    ax_sim.set_xlim(0, T - 1)
    ax_sim.set_ylim(-1.05, 1.05)
    ax_sim.axhline(0, color=ui.GREY, lw=0.8)
    ax_sim.set_xlabel("position s")
    ax_sim.set_title("p_t · p_s / (C/2)")

    rows, cols = _CLOCKS
    centres = [(c, -r) for r in range(rows) for c in range(cols)]  # (x, y) of each clock face
    faces = [Circle(xy, 0.42, fill=False, color=ui.GREY, lw=1) for xy in centres]
    for face in faces:
        ax_clk.add_patch(face)
    hands = LineCollection([], colors=ui.RED, linewidths=2)
    ax_clk.add_collection(hands)
    clock_text = [
        ax_clk.text(x, y - 0.47, "", ha="center", va="top", fontsize=8) for x, y in centres
    ]
    ax_clk.set_xlim(-0.6, cols - 0.4)
    ax_clk.set_ylim(-(rows - 1) - 0.8, 0.5)
    ax_clk.set_aspect("equal")
    ax_clk.axis("off")
    ax_clk.set_title("clocks: hand i = (PE[t, 2i], PE[t, 2i+1])")
    # Redrawn per frame: what the position moves. The clock faces and labels change with C and
    # the base only, so they sit in the cached slow layer.
    view.animate(im, row_line, sim_line, sim_mark, hands)
    view.animate(faces, clock_text, slow=True)

    controls = {
        "d_model": ui.widgets.IntSlider(
            value=d_model, min=2, max=_MAX_WIDTH, step=2, description="width C", style=ui.STYLE
        ),
        "base": ui.widgets.FloatLogSlider(
            value=base,
            base=10,
            min=1,
            max=5,
            step=0.1,
            description="base",
            readout_format=".0f",
            style=ui.STYLE,
        ),
        "position": ui.widgets.IntSlider(
            value=position, min=0, max=T - 1, description="position t", style=ui.STYLE
        ),
    }

    shown: list[Any] = [None, None]  # the (C, base) the clock faces and labels show

    def update() -> tuple[dict[str, Any], str]:
        C, b, t = controls["d_model"].value, controls["base"].value, controls["position"].value
        reference = reference_encoding(T, C, b)  # (T, C)
        pe = reference.numpy()
        sim = pe @ pe[t] / (C / 2)  # (T,), 1 at s = t
        im.set_data(pe)
        row_line.set_ydata([t, t])
        sim_line.set_ydata(sim)
        sim_mark.set_xdata([t, t])

        n_pairs = C // 2
        pairs = np.unique(
            np.linspace(0, n_pairs - 1, min(n_pairs, rows * cols)).round().astype(int)
        )
        hand_xy = pe[t, 2 * pairs], pe[t, 2 * pairs + 1]  # (sin, cos): x and y of each hand
        if shown != [C, b]:
            for j, (face, text) in enumerate(zip(faces, clock_text)):
                face.set_visible(j < len(pairs))
                text.set_visible(j < len(pairs))
                if j < len(pairs):
                    wavelength = 2 * math.pi * b ** (2 * pairs[j] / C)
                    text.set_text(f"i={pairs[j]}, λ={_short(wavelength)}")
            shown[:] = [C, b]
            view.invalidate_slow()
        # Each hand starts at 12 o'clock (sin 0, cos 0) = (0, 1) and turns clockwise as t grows.
        segments = [
            [(x0, y0), (x0 + 0.38 * hx, y0 + 0.38 * hy)]
            for (x0, y0), hx, hy in zip(centres, hand_xy[0], hand_xy[1])
        ]
        hands.set_segments(segments)
        differs, max_diff, yours = np.zeros((T, C), bool), 0.0, None
        if student:
            yours = student.call(T, C, b, shape=(T, C))
            differs, max_diff = compare(yours, reference)
            im_yours.set_data(np.full((T, C), np.nan) if yours is None else yours.float().numpy())
            ui.set_diff(overlay, differs)
        readout = (
            f"t = {t}, C = {C}, base = {b:.0f}: the fastest hand turns 1 rad per position, the slowest "
            f"{b ** (-(C - 2) / C):.2e} rad; longest wavelength 2π·base^((C-2)/C) = "
            f"{2 * math.pi * b ** ((C - 2) / C):.3g} positions."
        ) + student.status(int(differs.sum()), max_diff, mark="dark")
        state = {
            "d_model": C,
            "base": b,
            "position": t,
            "pe": pe,
            "similarity": sim,
            "pairs": pairs,
            "hands": np.stack(hand_xy, axis=1),  # (n_clocks, 2)
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
        "Sinusoidal positional encodings", controls, view, update, footer=student.footer()
    )
