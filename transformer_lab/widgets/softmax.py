"""Softmax explorer: how a temperature sharpens or flattens a distribution over keys.

    p_i = exp(s_i / tau) / sum_j exp(s_j / tau)

Small tau approaches a one-hot argmax, large tau the uniform distribution; adding the same
constant to every score changes nothing (it cancels in the ratio). Given the student's
``softmax``, its bars stand beside the reference's, red where they differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from transformer_lab._validate import check_tensor
from transformer_lab.attention import softmax as reference_softmax
from transformer_lab.widgets._inputs import as_float_tensor
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["softmax_explorer"]

DEFAULT_SCORES = (2.0, 1.0, 0.5, 0.1, -1.0)
DEFAULT_LABELS = ("cat", "sat", "mat", "on", "the")


def softmax_explorer(
    softmax: Any = None,
    *,
    scores: Sequence[float] | torch.Tensor | None = None,
    labels: Sequence[str] | None = None,
    temperature: float = 1.0,
) -> Any:
    """Bar charts of scores and of their softmax, with temperature and shift sliders.

    Args:
        softmax: optional, your ``softmax(x, dim=-1)``: drawn beside the reference (it is
            called on a (2, S) batch whose first row is the plotted one).
        scores: (S,) attention scores of one query against S keys, 2 <= S <= 32.
        labels: S names for the keys (default: a few words).
        temperature: initial temperature tau, between 0.05 and 20.
    Returns:
        An :class:`~transformer_lab.widgets._common.Explorer` with controls ``temperature`` and
        ``shift``; ``state()`` has ``scores`` (S,), ``logits`` = scores / tau, ``probs`` (S,)
        and ``entropy`` (nats); with ``softmax`` also ``yours`` (S,) or None, ``differs`` (S,)
        bool, ``max_diff`` and ``error`` (one line, or None). Under grading, a placeholder.
    """
    student = Student(softmax, "softmax", "softmax")
    s = as_float_tensor("scores", DEFAULT_SCORES if scores is None else scores)
    check_tensor("scores", s, dims=1)
    if not 2 <= s.shape[0] <= 32:
        raise ValueError(f"scores must hold 2 to 32 values, but received {s.shape[0]}.")
    if labels is None:
        labels = DEFAULT_LABELS if scores is None else [f"k{i}" for i in range(s.shape[0])]
    labels = [str(x) for x in labels]
    if len(labels) != s.shape[0]:
        raise ValueError(
            f"labels must name every score, but received {len(labels)} labels for {s.shape[0]} scores."
        )
    if not 0.05 <= temperature <= 20:
        raise ValueError(
            f"temperature must lie between 0.05 and 20, but received temperature={temperature}."
        )
    if (placeholder := placeholder_if_grading("softmax_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    S = s.shape[0]
    fig, (ax_s, ax_p) = ui.new_figure(2, figsize=(10, 3.0))
    view = ui.FigureView(fig)
    x = list(range(S))
    score_bars = ax_s.bar(x, s.numpy(), color=ui.GREY)
    ax_s.axhline(0, color="black", lw=0.8)
    bound = float(s.abs().max()) + 5.0 + 1.5  # room for the largest shift and a label
    ax_s.set_ylim(-bound, bound)
    ax_s.set_xticks(x, labels)
    ax_s.set_title("scores s (labels: s / τ, what the softmax sees)")
    logit_text = [ax_s.text(i, 0, "", ha="center", fontsize=8) for i in x]
    xs = [i - 0.2 for i in x] if student else x
    width = 0.4 if student else 0.8
    prob_bars = ax_p.bar(
        xs, torch.full((S,), 1 / S).numpy(), width, color=ui.BLUE, label="reference"
    )
    your_bars = (
        ax_p.bar([i + 0.2 for i in x], torch.zeros(S).numpy(), width, color=ui.GREEN, label="yours")
        if student
        else []
    )
    ax_p.axhline(1 / S, color=ui.GREY, ls="--", lw=1, label=f"uniform 1/{S}")
    ax_p.set_ylim(0, 1.08)
    ax_p.set_xticks(x, labels)
    ax_p.set_title("softmax(s / τ)" + (": reference (blue) and yours" if student else ""))
    ax_p.legend(loc="upper right", frameon=False)
    prob_text = [ax_p.text(i, 0, "", ha="center", va="bottom", fontsize=8) for i in xs]
    view.animate(list(score_bars), list(prob_bars), logit_text, prob_text, list(your_bars))

    controls = {
        "temperature": ui.widgets.FloatLogSlider(
            value=temperature,
            base=10,
            min=math.log10(0.05),
            max=math.log10(20),
            step=0.02,
            description="temperature τ",
            readout_format=".2f",
            style=ui.STYLE,
        ),
        "shift": ui.widgets.FloatSlider(
            value=0.0,
            min=-5.0,
            max=5.0,
            step=0.25,
            description="add to every score",
            style=ui.STYLE,
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        tau = controls["temperature"].value
        shifted = s + controls["shift"].value  # (S,)
        logits = shifted / tau  # (S,)
        probs = reference_softmax(logits)  # (S,)
        entropy = float(-(probs * torch.log(probs.clamp_min(1e-30))).sum())
        ui.set_bar_heights(score_bars, shifted.numpy())
        for i, (t, v, z) in enumerate(zip(logit_text, shifted.tolist(), logits.tolist())):
            t.set_position((i, v + (0.2 if v >= 0 else -0.2)))
            t.set_verticalalignment("bottom" if v >= 0 else "top")
            t.set_text(f"{z:.1f}")
        ui.set_bar_heights(prob_bars, probs.numpy())
        for i, (t, p) in enumerate(zip(prob_text, probs.tolist())):
            t.set_position((i, p + 0.01))
            t.set_text(f"{p:.2f}")
        # The student's softmax on a (2, S) batch (default dim): row 0 is the plotted one.
        yours = student.call(torch.stack([logits, logits.flip(0)]), shape=(2, S))
        yours = None if yours is None else yours[0]
        differs, max_diff = compare(yours, probs)
        if student:
            heights = torch.zeros(S) if yours is None else yours.float().nan_to_num(0.5)
            ui.set_bar_heights(your_bars, heights.clamp(0, 1.05).numpy())
            ui.bar_colors(your_bars, differs)
        readout = (
            f"τ = {tau:.2f}: largest probability {float(probs.max()):.3f}, "
            f"entropy {entropy:.3f} nats (uniform would be log {S} = {math.log(S):.3f})"
        ) + student.status(int(differs.sum()), max_diff, "bars")
        state = {
            "temperature": tau,
            "shift": controls["shift"].value,
            "scores": shifted.numpy(),
            "logits": logits.numpy(),
            "probs": probs.numpy(),
            "entropy": entropy,
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
        "Softmax with a temperature", controls, view, update, footer=student.footer()
    )
