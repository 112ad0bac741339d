"""Cost explorer: self-attention's multiply-adds, counted and timed, as T and C grow.

One single-head self-attention (D = C) on T tokens costs

    3 T C^2   for the projections Q = X W_q, K = X W_k, V = X W_v   (linear in T)
    2 T^2 C   for the scores Q K^T and the output A V              (quadratic in T)

multiply-adds. The explorer runs the package's SelfAttention at the chosen (T, C), counts the
multiply-adds of every matrix product PyTorch executes (``utils.MultiplyAddCounter``), and times it.
Every measured point stays on the right-hand plot, so the T^2 growth shows as you move T.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from transformer_lab.attention import SelfAttention
from transformer_lab.utils import MultiplyAddCounter
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student

__all__ = ["cost_explorer"]

T_OPTIONS = [8, 16, 32, 64, 128, 256, 512]
C_OPTIONS = [16, 32, 64, 128, 256]


def cost_explorer(self_attention_macs: Any = None, *, T: int = 128, C: int = 64) -> Any:
    """Counted multiply-adds and measured time of one self-attention, with sliders for T and C.

    Args:
        self_attention_macs: optional, your ``self_attention_macs(T, C, D) -> int``; its count
            is drawn beside the counted one.
        T: initial sequence length (one of 8 .. 512, powers of two).
        C: initial width (one of 16 .. 256, powers of two); the head width is D = C.
    Returns:
        An Explorer with controls ``T`` and ``C``; ``state()`` has ``counted`` (multiply-adds
        seen while the reference ran), ``projections`` = 3TC^2, ``attention`` = 2T^2C,
        ``seconds`` (best of a few runs) and ``measured`` ({(T, C): seconds} so far); with your
        function also ``yours`` (int or None), ``differs`` (bool), ``max_diff`` and ``error``.
        Under grading, a placeholder.
    """
    student = Student(self_attention_macs, "self_attention_macs", "self_attention_macs")
    if T not in T_OPTIONS:
        raise ValueError(f"T must be one of {T_OPTIONS}, but received T={T!r}.")
    if C not in C_OPTIONS:
        raise ValueError(f"C must be one of {C_OPTIONS}, but received C={C!r}.")
    if (placeholder := placeholder_if_grading("cost_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    fig, (ax_count, ax_time) = ui.new_figure(2, figsize=(11, 3.6))
    view = ui.FigureView(fig)
    ts = np.array(T_OPTIONS, dtype=float)
    (proj_line,) = ax_count.plot(ts, ts, "o-", color=ui.BLUE, label="projections 3TC²")
    (attn_line,) = ax_count.plot(ts, ts, "s-", color=ui.ORANGE, label="attention 2T²C")
    (total_line,) = ax_count.plot(ts, ts, "-", color="black", lw=1, label="total")
    counted_dot = ax_count.scatter([1], [1], s=90, facecolor="none", edgecolor="black", lw=2,
                                   zorder=5, label="counted")  # fmt: skip
    yours_dot = ax_count.scatter([1], [1], s=40, marker="D", color=ui.GREEN, zorder=6,
                                 label="yours", visible=bool(student))  # fmt: skip
    ax_count.set_xscale("log", base=2)
    ax_count.set_yscale("log")
    ax_count.set_xlim(6, 700)
    ax_count.set_ylim(1e3, 3e9)
    ax_count.set_xlabel("T (tokens)")
    ax_count.set_ylabel("multiply-adds")
    count_title = ax_count.set_title(" ")
    ax_count.legend(loc="upper left", frameon=False, fontsize=8)
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    seen = ax_time.scatter([], [], s=25, c=[], cmap=cmap, vmin=0, vmax=len(C_OPTIONS) - 1)
    now_dot = ax_time.scatter([1], [1], s=110, facecolor="none", edgecolor=ui.RED, lw=2, zorder=5)
    ax_time.set_xscale("log")
    ax_time.set_yscale("log")
    ax_time.set_xlim(1e3, 3e9)
    ax_time.set_ylim(5e-3, 5e3)
    ax_time.set_xlabel("counted multiply-adds")
    ax_time.set_ylabel("time (ms)")
    ax_time.set_title("every (T, C) measured so far (colour: C)")
    for i, c in enumerate(C_OPTIONS):
        ax_time.scatter([], [], s=25, color=cmap(i / (len(C_OPTIONS) - 1)), label=f"C = {c}")
    ax_time.legend(loc="upper left", frameon=False, fontsize=8)
    view.animate(
        proj_line, attn_line, total_line, counted_dot, yours_dot, count_title, seen, now_dot
    )

    controls = {
        "T": ui.widgets.SelectionSlider(
            options=T_OPTIONS, value=T, description="T", style=ui.STYLE
        ),
        "C": ui.widgets.SelectionSlider(
            options=C_OPTIONS, value=C, description="C", style=ui.STYLE
        ),
    }
    measured: dict[tuple[int, int], tuple[int, float]] = {}  # (T, C) -> (counted, seconds)
    layers: dict[int, SelfAttention] = {}

    def measure(t: int, c: int) -> tuple[int, float]:
        if (t, c) not in measured:
            layer = layers.setdefault(c, SelfAttention(c).eval())
            x = torch.randn(1, t, c, generator=torch.Generator().manual_seed(t * 1000 + c))
            # One thread (the explorer's refresh sets it): steadier timings on a shared machine.
            with torch.no_grad():
                with MultiplyAddCounter() as counter:
                    layer(x)  # counted (and a warm-up)
                best = float("inf")
                for _ in range(2 if t * c * (t + c) > 2e7 else 3):
                    start = time.perf_counter()
                    layer(x)
                    best = min(best, time.perf_counter() - start)
            measured[(t, c)] = (counter.macs, best)
        return measured[(t, c)]

    def update() -> tuple[dict[str, Any], str]:
        t, c = controls["T"].value, controls["C"].value
        counted, seconds = measure(t, c)
        proj, attn = 3 * ts * c * c, 2 * ts * ts * c
        proj_line.set_ydata(proj)
        attn_line.set_ydata(attn)
        total_line.set_ydata(proj + attn)
        counted_dot.set_offsets([[t, counted]])
        count_title.set_text(f"C = D = {c}: attention overtakes the projections at T = 1.5 C")
        keys = list(measured)
        seen.set_offsets(np.array([[measured[k][0], 1e3 * measured[k][1]] for k in keys]))
        seen.set_array(np.array([C_OPTIONS.index(k[1]) for k in keys], dtype=float))
        now_dot.set_offsets([[counted, 1e3 * seconds]])
        yours, differs = None, False
        if student:
            value = _call_int(student, t, c)
            yours = value
            differs = value is not None and value != counted
            if value is not None:
                yours_dot.set_offsets([[t * 1.08, max(value, 1)]])
                yours_dot.set_color(ui.RED if differs else ui.GREEN)
            yours_dot.set_visible(value is not None)
        share = 2 * t * t * c / (3 * t * c * c + 2 * t * t * c)
        readout = (
            f"T = {t}, C = D = {c}: counted {counted:,} multiply-adds (3TC² = {3 * t * c * c:,} + "
            f"2T²C = {2 * t * t * c:,}; attention's share {share:.0%}); measured "
            f"{1e3 * seconds:.2f} ms, {counted / seconds / 1e9:.1f} G multiply-adds/s."
        )
        if student:
            if student.error is not None:
                readout += student.status(0, None)
            elif differs:
                readout += (
                    f"<br><span style='color:{ui.RED}'>your count {yours:,} differs from the "
                    f"counted {counted:,} (by {yours - counted:+,}).</span>"
                )
            else:
                readout += f"<br><span style='color:#2a7d2a'>your count {yours:,} matches.</span>"
        state = {
            "T": t,
            "C": c,
            "counted": counted,
            "projections": 3 * t * c * c,
            "attention": 2 * t * t * c,
            "seconds": seconds,
            "measured": {k: v[1] for k, v in measured.items()},
        }
        if student:
            state.update(
                yours=yours,
                differs=differs,
                max_diff=float(abs(yours - counted)) if yours is not None else 0.0,
                error=student.error,
            )
        return state, readout

    return ui.Explorer(
        "What self-attention costs: counted and measured", controls, view, update,
        footer=student.footer(),
    )  # fmt: skip


def _call_int(student: Student, T: int, C: int) -> int | None:
    """The student's count for (T, C, D=C) as an int, or None with ``student.error`` set."""
    student.error = None
    try:
        value = student.fn(T, C, C)
    except NotImplementedError:
        student.error = f"your {student.name} is not implemented yet."
        return None
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        student.error = f"your {student.name} raised {type(err).__name__}: {first}"
        return None
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        student.error = f"your {student.name} returned {type(value).__name__}, not an int."
        return None
    return int(round(value))
