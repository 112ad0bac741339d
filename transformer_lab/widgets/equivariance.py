"""Permutation-equivariance explorer: shuffle the tokens and the outputs move with them.

With Q = X W_q, K = X W_k, V = X W_v and a permutation matrix P,

    SelfAttention(P X) = P SelfAttention(X),

so shuffling the input rows shuffles the output rows the same way and changes nothing else:
self-attention sees a set, not a sequence. Adding positional encodings after the shuffle (each
slot gets its own vector) breaks this, which is the point of notebook 3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from transformer_lab.attention import scaled_dot_product_attention as reference_attention
from transformer_lab.positional import sinusoidal_encoding
from transformer_lab.widgets._inputs import check_positive, check_tokens, seeded_embeddings
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["equivariance_explorer"]

_SHUFFLES = 12  # the slider offers the identity and this many seeded permutations


def equivariance_explorer(
    self_attention: Any = None,
    *,
    tokens: str | Sequence[str] | None = "the dog bit the man",
    d_model: int = 8,
    d_head: int = 4,
    seed: int = 0,
) -> Any:
    """Outputs of self-attention for a sentence and for a shuffled copy, side by side.

    Args:
        self_attention: optional, your ``self_attention(x, w_q, w_k, w_v) -> (out, weights)``;
            run on the shuffled tokens beside the reference.
        tokens: the sentence (2 to 12 tokens).
        d_model: width C of the seeded embeddings; d_head: width D of the outputs.
        seed: seed of the embeddings and projections.
    Returns:
        An Explorer with controls ``shuffle`` (0 = no shuffle) and ``positions`` (add sinusoidal
        positions after shuffling); ``state()`` has ``perm`` (T,), ``out`` (T, D) for the
        original order, ``out_shuffled`` (T, D), ``gap`` (T,) = max |out_shuffled - out[perm]|
        per row; with your function also ``yours`` (T, D) or None, ``differs``, ``max_diff``
        and ``error``. Under grading, a placeholder.
    """
    student = Student(self_attention, "self_attention", "self_attention")
    tokens = check_tokens(tokens, max_len=12)
    if len(tokens) < 2:
        raise ValueError(f"tokens must hold at least 2 tokens to shuffle, but received {tokens}.")
    check_positive("d_model", d_model)
    check_positive("d_head", d_head)
    if d_model % 2:
        raise ValueError(
            f"d_model must be even (for the positions), but received d_model={d_model}."
        )
    if (placeholder := placeholder_if_grading("equivariance_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    T, C, D = len(tokens), d_model, d_head
    x = seeded_embeddings(tokens, C, seed)  # (T, C)
    gen = torch.Generator().manual_seed(seed + 1)
    w_q, w_k, w_v = (torch.randn(C, D, generator=gen) / math.sqrt(C) for _ in range(3))
    pe = sinusoidal_encoding(T, C)  # (T, C), one vector per slot
    perms = [torch.arange(T)] + [
        torch.randperm(T, generator=torch.Generator().manual_seed(seed + 100 + i))
        for i in range(_SHUFFLES)
    ]

    def attend(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return reference_attention(inputs @ w_q, inputs @ w_k, inputs @ w_v)  # (T, D), (T, T)

    n_panels = 4 if student else 3
    fig, axes = ui.new_figure(n_panels, figsize=(3.4 * n_panels, 3.4))
    view = ui.FigureView(fig)
    bound = 1.5
    heat = dict(cmap="RdBu_r", vmin=-bound, vmax=bound, aspect="auto", interpolation="nearest")
    im_out = axes[0].imshow(np.zeros((T, D)), **heat)
    axes[0].set_yticks(range(T), tokens)
    axes[0].set_title("out = SA(x), original order")
    im_shuf = axes[1].imshow(np.zeros((T, D)), **heat)
    # Row labels follow the permutation; text artists (tick labels would be reset on a full draw).
    axes[1].set_yticks(range(T), tokens)  # reserves the room; hidden below
    axes[1].tick_params(axis="y", labelleft=False)
    shuf_labels = _row_labels(axes[1], T)
    axes[1].set_title("SA(x[perm]), shuffled input")
    for ax in axes[:2]:
        ax.set_xlabel("output feature")
    if student:
        ax_y = axes[2]
        im_yours = ax_y.imshow(np.zeros((T, D)), **heat)
        overlay = ui.diff_overlay(ax_y, (T, D), "black")
        ax_y.set_yticks(range(T), tokens)
        ax_y.tick_params(axis="y", labelleft=False)
        your_labels = _row_labels(ax_y, T)
        ax_y.set_xlabel("output feature")
        ax_y.set_title("yours on x[perm]; dark = differs")
    ax_gap = axes[-1]
    gap_bars = ax_gap.bar(range(T), np.zeros(T), color=ui.BLUE)
    ax_gap.set_ylim(0, 2.0)
    ax_gap.set_xticks(range(T), tokens)
    ax_gap.tick_params(axis="x", labelbottom=False)
    gap_labels = [
        ax_gap.text(i, -0.03, "", transform=ax_gap.get_xaxis_transform(), ha="center", va="top")
        for i in range(T)
    ]
    ax_gap.set_title("|SA(x[perm]) − SA(x)[perm]| per row")
    view.animate(im_out, im_shuf, list(gap_bars))
    if student:
        view.animate(im_yours, overlay)
    # Tick labels follow the permutation: they live in the slow layer, redrawn when it changes.
    view.animate(shuf_labels, gap_labels, *([your_labels] if student else []), slow=True)

    controls = {
        "shuffle": ui.widgets.IntSlider(
            value=1, min=0, max=_SHUFFLES, description="shuffle (0 = none)", style=ui.STYLE
        ),
        "positions": ui.widgets.Checkbox(
            value=False, description="add positions after shuffling", style=ui.STYLE
        ),
    }
    shown: list[Any] = [None]

    def update() -> tuple[dict[str, Any], str]:
        perm = perms[controls["shuffle"].value]
        with_positions = controls["positions"].value
        shuffled = x[perm] + (pe if with_positions else 0)  # (T, C)
        original = x + (pe if with_positions else 0)
        out, _ = attend(original)  # (T, D)
        out_shuffled, _ = attend(shuffled)  # (T, D)
        gap = (out_shuffled - out[perm]).abs().amax(dim=-1)  # (T,)
        im_out.set_data(out.numpy())
        im_shuf.set_data(out_shuffled.numpy())
        ui.set_bar_heights(gap_bars, gap.clamp(max=2.0).numpy())
        for bar, g in zip(gap_bars, gap.tolist()):
            bar.set_color(ui.RED if g > 1e-5 else ui.BLUE)
        names = [tokens[i] for i in perm.tolist()]
        if shown[0] != names:
            for labels in (shuf_labels, gap_labels, *([your_labels] if student else [])):
                for label, name in zip(labels, names):
                    label.set_text(name)
            shown[0] = names
            view.invalidate_slow()
        differs, max_diff, yours = np.zeros((T, D), bool), 0.0, None
        if student:
            pair = student.call_pair(shuffled, w_q, w_k, w_v, shapes=((T, D), (T, T)))
            yours = None if pair is None else pair[0]
            differs, max_diff = compare(yours, out_shuffled)
            im_yours.set_data(np.full((T, D), np.nan) if yours is None else yours.float().numpy())
            ui.set_diff(overlay, differs)
        moved = int((perm != torch.arange(T)).sum())
        verdict = (
            "the rows moved with the tokens and nothing else changed"
            if float(gap.max()) < 1e-5
            else "the outputs changed beyond the shuffle: positions make order visible"
        )
        readout = (
            f"perm = {perm.tolist()} ({moved} of {T} tokens moved); largest |SA(x[perm]) − "
            f"SA(x)[perm]| = {float(gap.max()):.2e}: {verdict}."
        ) + student.status(int(differs.sum()), max_diff, "entries", "dark")
        state = {
            "perm": perm.numpy(),
            "positions": with_positions,
            "out": out.numpy(),
            "out_shuffled": out_shuffled.numpy(),
            "gap": gap.numpy(),
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
        "Shuffle the tokens: self-attention's outputs move with them",
        controls,
        view,
        update,
        footer=student.footer(),
    )


def _row_labels(ax: Any, T: int) -> list[Any]:
    """One text artist per row, left of the axes, where tick labels would be."""
    transform = ax.get_yaxis_transform()
    return [ax.text(-0.03, t, "", transform=transform, ha="right", va="center") for t in range(T)]
