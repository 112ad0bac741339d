"""The patches explorer: an image cut into P x P patches, the sequence a ViT reads (notebook 8).

patches_explorer  patch-size and image sliders: the grid on the image, the sequence of patches,
                  N and the attention cost; draws the student's patchify too
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_lab.models.vit import patchify
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._vit_common import compare_tensor, digits, try_call

__all__ = ["patches_explorer"]


def patches_explorer(patchify_fn: Callable | None = None, index: int = 0) -> Any:
    """Cut a digit into P x P patches and lay them out as the sequence a ViT reads.

    Args:
        patchify_fn: optional student ``patchify(images, patch_size)``; its sequence is drawn
            under the reference's, with differing patches outlined in red.
        index: the test image shown first.
    Returns:
        An Explorer with controls ``patch_size`` (1, 2, 4, 8) and ``image``; ``state()`` has
        ``patches`` (N, P*P), ``n_patches``, ``attention_entries`` and, with a student
        function, ``student_patches`` and ``differs`` (N,) bool.
    """
    if patchify_fn is not None and not callable(patchify_fn):
        raise TypeError(
            f"patchify_fn must be your patchify function, but received {type(patchify_fn).__name__}."
        )
    if (placeholder := placeholder_if_grading("patches_explorer")) is not None:
        return placeholder
    from transformer_lab.widgets import _common as ui

    data = digits()
    images = data.unnormalize(data.x_test)  # (N_test, 1, 8, 8) in [0, 1]
    if not 0 <= index < len(images):
        raise ValueError(f"index must lie in 0..{len(images) - 1}, but received index={index}.")
    rows = 3 if patchify_fn is not None else 2
    fig = ui.Figure(figsize=(10, 1.6 * rows + 1.2), dpi=ui.DPI, layout="constrained")
    ui.FigureCanvasAgg(fig)
    grid = fig.add_gridspec(rows, 4)
    ax_img = fig.add_subplot(grid[:, 0])
    ax_seq = fig.add_subplot(grid[0:2, 1:]) if patchify_fn is None else fig.add_subplot(grid[0, 1:])
    ax_student = fig.add_subplot(grid[1:, 1:]) if patchify_fn is not None else None
    view = ui.FigureView(fig)
    img = ax_img.imshow(np.zeros((8, 8)), cmap="gray_r", vmin=0, vmax=1)
    ax_img.set_xticks([])
    ax_img.set_yticks([])
    grid_lines = [ax_img.axhline(0, color=ui.ORANGE, lw=1.5) for _ in range(9)]
    grid_lines += [ax_img.axvline(0, color=ui.ORANGE, lw=1.5) for _ in range(9)]
    strip = ax_seq.imshow(np.zeros((8, 64)), cmap="gray_r", vmin=0, vmax=1, aspect="auto")
    ax_seq.set_yticks([])
    ax_seq.set_title("the sequence: patch 0, 1, ... (row by row), each P x P pixels")
    ax_seq.set_xlabel("patch number n", fontsize=8)
    animated = [img, strip, *grid_lines]
    student_strip, boxes = None, []
    if ax_student is not None:
        student_strip = ax_student.imshow(
            np.zeros((8, 64)), cmap="gray_r", vmin=0, vmax=1, aspect="auto"
        )
        ax_student.set_yticks([])
        ax_student.set_title("your patchify (red: patches that differ)")
        boxes = [
            ax_student.add_patch(
                ui.Rectangle((0, 0), 1, 1, fill=False, ec=ui.RED, lw=2, visible=False)
            )
            for _ in range(64)
        ]
        animated += [student_strip, *boxes]
    view.animate(*animated)

    controls = {
        "patch_size": ui.widgets.SelectionSlider(
            options=[1, 2, 4, 8], value=2, description="patch size P", style=ui.STYLE
        ),
        "image": ui.widgets.IntSlider(
            value=index, min=0, max=len(images) - 1, description="test image", style=ui.STYLE
        ),
    }

    def as_strip(patches: Tensor, P: int) -> np.ndarray:
        """(N, P*P) -> one row of N squares, separated by a blank column."""
        N = patches.shape[0]
        tiles = patches.reshape(N, P, P)  # (N, P, P)
        pad = torch.full((N, P, 1), float("nan"))
        return torch.cat([tiles, pad], dim=2).permute(1, 0, 2).reshape(P, N * (P + 1)).numpy()

    def label_patch_numbers(ax: Any, N: int, P: int) -> None:
        """Ticks under the centre of each patch, labelled with the patch's number n."""
        every = max(1, N // 16)  # at most 16 labels: P = 1 has 64 patches
        numbers = list(range(0, N, every))
        ax.set_xticks([n * (P + 1) + (P - 1) / 2 for n in numbers], [str(n) for n in numbers])
        ax.tick_params(axis="x", labelsize=7, length=2)

    def update() -> tuple[dict[str, Any], str]:
        P, i = controls["patch_size"].value, controls["image"].value
        image = images[i : i + 1]  # (1, 1, 8, 8)
        img.set_data(image[0, 0].numpy())
        for k, line in enumerate(grid_lines[:9]):
            line.set_ydata([k * P - 0.5] * 2)
            line.set_visible(k * P <= 8)
        for k, line in enumerate(grid_lines[9:]):
            line.set_xdata([k * P - 0.5] * 2)
            line.set_visible(k * P <= 8)
        patches = patchify(image, P)[0]  # (N, P*P)
        N = patches.shape[0]
        picture = as_strip(patches, P)
        strip.set_data(picture)
        strip.set_extent((-0.5, picture.shape[1] - 0.5, P - 0.5, -0.5))
        ax_seq.set_xlim(-0.5, picture.shape[1] - 0.5)
        ax_seq.set_ylim(P - 0.5, -0.5)
        label_patch_numbers(ax_seq, N, P)
        state: dict[str, Any] = {
            "patch_size": P,
            "patches": patches.numpy(),
            "n_patches": N,
            "attention_entries": (N + 1) ** 2,
        }
        student_line = ""
        if student_strip is not None and ax_student is not None:
            for box in boxes:
                box.set_visible(False)
            result, error = try_call(patchify_fn, image.clone(), P)
            if error is None:
                differs, verdict = compare_tensor(result, patchify(image, P))
            else:
                differs, verdict = None, "your function raised " + error
            if differs is not None:
                theirs = result.detach()[0].reshape(N, P * P)
                student_picture = as_strip(theirs, P)
                bad = differs[0].any(axis=-1)  # (N,)
                for n in np.flatnonzero(bad)[:64]:
                    boxes[n].set_bounds(n * (P + 1) - 0.5, -0.5, P, P)
                    boxes[n].set_visible(True)
                state.update(student_patches=theirs.numpy(), differs=bad)
            else:
                student_picture = np.full_like(picture, np.nan)
                state.update(student_patches=None, differs=None)
            student_strip.set_data(student_picture)
            student_strip.set_extent((-0.5, picture.shape[1] - 0.5, P - 0.5, -0.5))
            ax_student.set_xlim(-0.5, picture.shape[1] - 0.5)
            ax_student.set_ylim(P - 0.5, -0.5)
            label_patch_numbers(ax_student, N, P)
            student_line = f"<br>Your patchify: {html.escape(verdict)}."
        readout = (
            f"P = {P}: N = (8/{P})² = {N} patch{'' if N == 1 else 'es'} of P·P·C = {P * P} "
            f"numbers; the sequence has "
            f"N + 1 = {N + 1} tokens with [CLS], so each layer's attention has (N+1)² = "
            f"{(N + 1) ** 2} entries per head. Halving P multiplies N by 4 and the attention cost "
            f"by about 16.{student_line}"
        )
        return state, readout

    return ui.Explorer("Images as sequences of patches", controls, view, update)
