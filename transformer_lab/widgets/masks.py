"""Mask explorer: causal and padding masks, combined, and the attention weights they leave.

A batch of two sequences padded to the same length S. The padding mask (B, 1, 1, S) hides each
sequence's padding keys; the causal mask (T, S) hides the future; ``combine_masks`` ANDs them
into (B, 1, T, S). Masked scores become -inf before the softmax, so their weights are exactly 0
and every row that can see at least one key still sums to 1; a row that sees nothing is all 0.
Given the student's ``causal_mask`` and/or ``padding_mask``, the mask panels show the student's
combined mask, with the cells that differ from the reference's painted red.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from transformer_lab.attention import scaled_dot_product_attention
from transformer_lab.masks import causal_mask as reference_causal_mask
from transformer_lab.masks import combine_masks, padding_mask_from_lengths
from transformer_lab.widgets._inputs import check_positive
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["mask_explorer"]


def mask_explorer(
    causal_mask: Any = None,
    padding_mask: Any = None,
    *,
    seq_len: int = 8,
    lengths: tuple[int, int] | None = None,
    causal: bool = True,
    d_head: int = 8,
    seed: int = 0,
) -> Any:
    """Masks and attention weights for a padded batch of two sequences.

    Args:
        causal_mask: optional, your ``causal_mask(T) -> (T, T)`` bool mask.
        padding_mask: optional, your ``padding_mask(lengths, S) -> (B, 1, 1, S)`` bool mask.
            With either, the mask panels show your combined mask (the reference stands in for
            the one you do not pass), red where it differs from the reference's.
        seq_len: padded length S = T (2 to 16).
        lengths: initial real lengths of the two sequences, each in 0..seq_len (default: the
            first unpadded, the second about two thirds of ``seq_len``).
        causal: whether the causal mask starts on.
        d_head: width D of the seeded random queries, keys and values.
        seed: seed of the queries, keys and values.
    Returns:
        An Explorer with controls ``causal``, ``length_0`` and ``length_1``; ``state()`` has
        ``mask`` (B, T, S) bool (True = may attend), ``weights`` (B, T, S), ``output`` (B, T, D)
        and ``q``, ``k``, ``v`` (B, T, D); with your functions also ``yours`` (B, T, S) bool
        or None, ``differs`` (B, T, S), ``max_diff`` (1.0 if any cell differs) and ``error``.
        Under grading, a placeholder.
    """
    students = [
        Student(causal_mask, "causal_mask", "causal_mask"),
        Student(padding_mask, "padding_mask", "padding_mask"),
    ]
    any_student = any(students)
    check_positive("seq_len", seq_len)
    check_positive("d_head", d_head)
    if not 2 <= seq_len <= 16:
        raise ValueError(f"seq_len must lie between 2 and 16, but received seq_len={seq_len}.")
    if lengths is None:
        lengths = (seq_len, seq_len - seq_len // 3)
    if len(lengths) != 2 or not all(0 <= n <= seq_len for n in lengths):
        raise ValueError(
            f"lengths must be two lengths in 0..seq_len={seq_len}, but received {tuple(lengths)}."
        )
    if (placeholder := placeholder_if_grading("mask_explorer")) is not None:
        return placeholder

    from matplotlib.colors import ListedColormap

    from transformer_lab.widgets import _common as ui

    B, S = 2, seq_len
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(B, 1, S, d_head, generator=gen) for _ in range(3)
    )  # (B, 1, T, D) each: one head

    fig, axes = ui.new_figure(4, figsize=(12, 3.3))
    view = ui.FigureView(fig)
    mask_cmap = ListedColormap(["#404040", "#f2f2f2"])  # False = blocked (dark), True = may attend
    images, pad_lines = [], []
    for b in range(B):
        ax_mask, ax_w = axes[2 * b], axes[2 * b + 1]
        images.append(
            ax_mask.imshow(np.ones((S, S)), cmap=mask_cmap, vmin=0, vmax=1, interpolation="nearest")
        )
        images.append(
            ax_w.imshow(np.zeros((S, S)), cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        )
        ax_mask.set_title(
            f"sequence {b}: " + ("your mask (red = differs)" if any_student else "mask")
        )
        ax_w.set_title(f"sequence {b}: weights")
        for ax in (ax_mask, ax_w):
            ax.set_xticks(range(S))
            ax.set_yticks(range(S))
            ax.tick_params(labelsize=7)
            ax.set_xlabel("key s")
            # Where the padding starts: the keys to the right of this line are padding.
            pad_lines.append(ax.axvline(S - 0.5, color=ui.ORANGE, lw=2, ls="--"))
        ax_mask.set_ylabel("query t")
    overlays = [ui.diff_overlay(axes[2 * b], (S, S)) for b in range(B)] if any_student else []
    view.animate(images, pad_lines, overlays)

    controls = {
        "causal": ui.widgets.Checkbox(value=causal, description="causal mask", style=ui.STYLE),
        "length_0": ui.widgets.IntSlider(
            value=lengths[0], min=0, max=S, description="length of sequence 0", style=ui.STYLE
        ),
        "length_1": ui.widgets.IntSlider(
            value=lengths[1], min=0, max=S, description="length of sequence 1", style=ui.STYLE
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        is_causal = controls["causal"].value
        lens = [controls["length_0"].value, controls["length_1"].value]
        padding = padding_mask_from_lengths(torch.tensor(lens), S=S)  # (B, 1, 1, S)
        mask = combine_masks(
            reference_causal_mask(S) if is_causal else None, padding
        )  # (B, 1, T, S) or (B, 1, 1, S)
        mask = mask.expand(B, 1, S, S)  # (B, 1, T, S)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, 1, T, D), (B, 1, T, S)
        m, w = mask[:, 0].numpy(), weights[:, 0].numpy()  # (B, T, S) each
        for b in range(B):
            images[2 * b].set_data(m[b].astype(float))
            images[2 * b + 1].set_data(w[b])
            for line in pad_lines[2 * b : 2 * b + 2]:
                line.set_xdata([lens[b] - 0.5] * 2)
        differs, yours, status = np.zeros((B, S, S), bool), None, ""
        if any_student:
            yours, differs = _your_mask(students, is_causal, lens, S, m)
            if yours is not None:
                for b in range(B):
                    images[2 * b].set_data(yours[b].astype(float))
            for b in range(B):
                ui.set_diff(overlays[b], differs[b])
            failed = [st for st in students if st and st.error]
            first = failed[0] if failed else next(st for st in students if st)
            status = first.status(int(differs.sum()), None, "cells")
        empty_rows = int((~m.any(axis=-1)).sum())
        leaked = float(np.abs(w[~m]).max()) if (~m).any() else 0.0
        readout = (
            f"mask = {'causal (T, S) AND ' if is_causal else ''}padding (B, 1, 1, S) → shape "
            f"{tuple(mask.shape)}; largest weight on a masked key: {leaked:.1f}; "
            f"rows with nothing to attend to (all-zero weights, no NaN): {empty_rows}. "
            f"Orange line: padding starts (keys to its right are padding)."
        ) + status
        state = {
            "causal": is_causal,
            "lengths": lens,
            "mask": m,
            "weights": w,
            "output": out[:, 0].numpy(),
            "q": q[:, 0].numpy(),
            "k": k[:, 0].numpy(),
            "v": v[:, 0].numpy(),
        }
        if any_student:
            errors = [st.error for st in students if st and st.error]
            state.update(
                yours=yours,
                differs=differs,
                max_diff=float(differs.any()),
                error=errors[0] if errors else None,
            )
        return state, readout

    footer = "".join(st.footer() for st in students)
    return ui.Explorer("Causal and padding masks", controls, view, update, footer=footer)


def _your_mask(
    students: list[Student], is_causal: bool, lengths: list[int], S: int, reference: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray]:
    """The student's combined (B, T, S) mask (the reference fills in for a missing function)."""
    your_causal, your_padding = students
    B = len(lengths)
    causal = reference_causal_mask(S)
    if your_causal and is_causal:
        causal = your_causal.call(S, shape=(S, S))
    padding = padding_mask_from_lengths(torch.tensor(lengths), S=S)  # (B, 1, 1, S)
    if your_padding:
        padding = your_padding.call(torch.tensor(lengths), S, shape=(B, 1, 1, S))
    if causal is None or padding is None:
        return None, np.zeros(reference.shape, bool)
    if causal.dtype != torch.bool or padding.dtype != torch.bool:
        culprit = your_causal if causal.dtype != torch.bool else your_padding
        culprit.error = (
            f"your {culprit.name} returned dtype {(causal if culprit is your_causal else padding).dtype}; "
            f"a mask must be a bool tensor (True = may attend)."
        )
        return None, np.zeros(reference.shape, bool)
    mask = (causal if is_causal else torch.ones(S, S, dtype=torch.bool)) & padding  # (B, 1, T, S)
    yours = mask.expand(B, 1, S, S)[:, 0].numpy()  # (B, T, S)
    differs, _ = compare(torch.from_numpy(yours), torch.from_numpy(reference))
    return yours, differs
