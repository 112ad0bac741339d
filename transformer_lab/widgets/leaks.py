"""Leak explorer: perturb one input token and see which outputs change.

In a causal layer, output t may depend on inputs 0..t only. Change input s and every output
t < s must stay exactly the same; an output before s that moves is a leak from the future.
The influence matrix collects this for every s: entry (t, s) is how much output t moved when
input s changed, and a causal layer has nothing above the diagonal. Some masking mistakes leak
strongly (no mask, a masked score of 0), one only weakly and only through the softmax's
denominator (zeroing the weights after the softmax), which is why a leak test must compare
exactly rather than with a loose tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_lab.utils import LEAK_MODES, attention_layer
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student

__all__ = ["leak_explorer"]

# shown name -> mode of transformer_lab.utils.attention_layer (the layers notebook 4 tests with)
LAYERS = {
    "causal mask (correct)": "causal",
    "no mask": "none",
    "mask after the softmax": "after softmax",
    "masked score 0 instead of -inf": "score zero",
    "mask shifted: sees t + 1": "next token too",
    "one hole: last token to first": "last token to first",
    "a faint leak (weight 1e-5)": "faint leak",
    "strictly past (no self), causal": "strictly past",
    "two causal layers": "two layers",
}


def leak_explorer(
    future_leaks: Any = None, *, seq_len: int = 8, d_model: int = 6, seed: int = 0
) -> Any:
    """Perturb input token s of a (possibly leaky) causal layer; bars show which outputs moved.

    Args:
        future_leaks: optional, your ``future_leaks(attend, T, C, seed=0) -> bool``; its
            verdict on the chosen layer is shown beside the truth.
        seq_len: T (3 to 16); d_model: C (2 to 32).
        seed: seed of the inputs and the layers' projections.
    Returns:
        An Explorer with controls ``layer``, ``token`` (s, the input changed) and ``size`` (of
        the change); ``state()`` has ``moved`` (T,) = max |Δ output t|, ``influence`` (T, T)
        (output t, input s), ``leaks`` (the truth for this layer) and ``leaked`` (T,) bool
        (outputs t < s that moved); with your function also ``yours`` (bool or None),
        ``differs`` (bool), ``max_diff`` and ``error``. Under grading, a placeholder.
    """
    student = Student(future_leaks, "future_leaks", "future_leaks")
    if not 3 <= seq_len <= 16 or not 2 <= d_model <= 32:
        raise ValueError(
            f"seq_len must lie in 3..16 and d_model in 2..32, but received seq_len={seq_len} and "
            f"d_model={d_model}."
        )
    if (placeholder := placeholder_if_grading("leak_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    T, C = seq_len, d_model
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(T, C, generator=gen)
    noise = torch.randn(T, C, generator=gen)
    layers = {kind: attention_layer(T, C, mode, seed) for kind, mode in LAYERS.items()}
    verdicts: dict[str, tuple[bool | None, str | None]] = {}  # the student's, per layer

    def influence(attend: Any, size: float) -> Tensor:
        """(T, S): max |Δ output t| when input s moves by size * noise[s]."""
        base = attend(x)
        cols = []
        for s in range(T):
            moved = x.clone()
            moved[s] += size * noise[s]
            cols.append((attend(moved) - base).abs().amax(dim=-1))  # (T,)
        return torch.stack(cols, dim=1)  # (T, S)

    fig, (ax_bar, ax_mat) = ui.new_figure(2, figsize=(10.5, 3.6), width_ratios=[1.2, 1])
    view = ui.FigureView(fig)
    bars = ax_bar.bar(range(T), np.zeros(T), color=ui.BLUE)
    past = ui.Rectangle(
        (-0.5, 0), 0, 1, color=ui.GREY, alpha=0.25, transform=ax_bar.get_xaxis_transform()
    )
    ax_bar.add_patch(past)
    ax_bar.set_yscale("symlog", linthresh=1e-6)
    ax_bar.set_ylim(0, 10)
    ax_bar.set_xticks(range(T))
    ax_bar.set_xlabel("output position t")
    ax_bar.set_ylabel("max |Δ output t|")
    bar_title = ax_bar.set_title(" ", fontsize=10)
    im = ax_mat.imshow(np.zeros((T, T)), cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
    leak_overlay = ui.diff_overlay(ax_mat, (T, T), aspect="equal")
    column = ui.Rectangle((-0.5, -0.5), 1, T, fill=False, edgecolor=ui.ORANGE, lw=2.5)
    ax_mat.add_patch(column)
    ax_mat.plot([-0.5, T - 0.5], [-0.5, T - 0.5], color="black", lw=0.8)
    ax_mat.set_xlabel("input changed s")
    ax_mat.set_ylabel("output t")
    ax_mat.set_title("influence (red: a future input moved a past output)", fontsize=10)
    view.animate(list(bars), past, bar_title, im, leak_overlay, column)

    controls = {
        "layer": ui.widgets.Dropdown(
            options=list(LAYERS), value="causal mask (correct)", description="layer", style=ui.STYLE
        ),  # fmt: skip
        "token": ui.widgets.IntSlider(
            value=T // 2, min=0, max=T - 1, description="change input s", style=ui.STYLE
        ),  # fmt: skip
        "size": ui.widgets.FloatLogSlider(
            value=1.0, base=10, min=-3, max=1, step=0.25, description="by", style=ui.STYLE
        ),  # fmt: skip
    }
    matrices: dict[tuple[str, float], Tensor] = {}

    def verdict(kind: str) -> tuple[bool | None, str | None]:
        if kind not in verdicts:
            student.error = None
            got: bool | None = None
            try:
                with torch.no_grad():
                    value = student.fn(layers[kind], T, C)
                if isinstance(value, Tensor) and value.numel() == 1:
                    value = bool(value.item())
                if isinstance(value, (bool, np.bool_)):
                    got = bool(value)
                else:
                    student.error = (
                        f"your {student.name} returned {type(value).__name__}, not True or False."
                    )
            except NotImplementedError:
                student.error = f"your {student.name} is not implemented yet."
            except Exception as err:
                first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                student.error = f"your {student.name} raised {type(err).__name__}: {first}"
            verdicts[kind] = (got, student.error)
        return verdicts[kind]

    def update() -> tuple[dict[str, Any], str]:
        kind, s, size = (controls[n].value for n in ("layer", "token", "size"))
        key = (kind, size)
        if key not in matrices:
            with torch.no_grad():
                matrices[key] = influence(layers[kind], size)
        inf = matrices[key]  # (T, S)
        moved = inf[:, s]  # (T,)
        leaked = (torch.arange(T) < s) & (moved > 0)  # exact comparison: any change is a leak
        ui.set_bar_heights(bars, moved.numpy())
        for bar, bad in zip(bars, leaked.tolist()):
            bar.set_color(ui.RED if bad else ui.BLUE)
        past.set_width(s)
        bar_title.set_text(f"change input {s}: outputs 0..{s - 1} (shaded) must not move")
        im.set_data((inf / inf.max().clamp_min(1e-12)).numpy())
        upper = torch.ones(T, T, dtype=torch.bool).triu(1)  # s > t: the future
        ui.set_diff(leak_overlay, (upper & (inf > 0)).numpy())
        column.set_x(s - 0.5)
        truth = bool((upper & (inf > 0)).any())
        readout = (
            f"{kind}: {int(leaked.sum())} past output(s) moved when input {s} changed "
            f"(largest {float(moved[:s].max()) if s else 0.0:.1e}); over all s the layer "
            f"{'LEAKS' if truth else 'does not leak'} the future."
        )
        yours, differs = None, False
        if student:
            yours, error = verdict(kind)
            student.error = error
            if error is not None:
                readout += student.status(0, None)
            else:
                differs = yours != LEAK_MODES[LAYERS[kind]]
                color = ui.RED if differs else "#2a7d2a"
                readout += (
                    f"<br><span style='color:{color}'>your future_leaks says {yours}; "
                    f"{'wrong' if differs else 'right'}: this layer "
                    f"{'leaks' if LEAK_MODES[LAYERS[kind]] else 'does not leak'}.</span>"
                )
        state = {
            "layer": kind,
            "token": s,
            "size": size,
            "moved": moved.numpy(),
            "influence": inf.numpy(),
            "leaks": LEAK_MODES[LAYERS[kind]],
            "leaked": leaked.numpy(),
        }
        if student:
            state.update(yours=yours, differs=differs, max_diff=float(differs), error=student.error)
        return state, readout

    return ui.Explorer(
        "The leak detector: change a future token, watch the past", controls, view, update,
        footer=student.footer(),
    )  # fmt: skip
