"""The ViT attention explorer: where a trained ViT's [CLS] looks (notebook 8).

vit_attention_explorer  image, layer and head sliders over a trained ViT: [CLS]'s attention on
                        the patch grid, or attention rollout (the student's, if given)
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from transformer_lab.interpret import attention_rollout
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._vit_common import compare_tensor, digits, load_vit, try_call

__all__ = ["vit_attention_explorer"]


def vit_attention_explorer(
    model: nn.Module | None = None, rollout: Callable | None = None, index: int = 0
) -> Any:
    """Where a trained ViT's [CLS] token looks, per layer and head, or composed by rollout.

    Args:
        model: a trained :class:`~transformer_lab.models.ViT` for the 8x8 digits (default: the
            shipped ``vit_digits`` checkpoint).
        rollout: optional student ``attention_rollout(attentions)``; with "rollout" ticked its
            map is drawn beside the reference's.
        index: the test image shown first.
    Returns:
        An Explorer with controls ``image``, ``layer``, ``head`` (-1 = mean of the heads) and
        ``rollout``; ``state()`` has ``map`` (grid_h, grid_w) of the [CLS] weights shown,
        ``prediction`` and, with a student function, ``student_map`` and ``student_verdict``.
    """
    if rollout is not None and not callable(rollout):
        raise TypeError(
            f"rollout must be your attention_rollout function, but received {type(rollout).__name__}."
        )
    if (placeholder := placeholder_if_grading("vit_attention_explorer")) is not None:
        return placeholder
    from transformer_lab.widgets import _common as ui

    model = load_vit(model)
    config = model.config
    gh, gw = config.grid
    data = digits()
    if not 0 <= index < len(data.x_test):
        raise ValueError(
            f"index must lie in 0..{len(data.x_test) - 1}, but received index={index}."
        )
    with torch.no_grad():
        out = model(data.x_test, output_attentions=True)
    attentions = [a.detach() for a in out.attentions]  # L x (N_test, H, N + 1, N + 1)
    predictions = out.logits.argmax(-1)
    images = data.unnormalize(data.x_test)

    fig, axes = ui.new_figure(3, figsize=(10, 3.4))
    view = ui.FigureView(fig)
    img = axes[0].imshow(np.zeros((8, 8)), cmap="gray_r", vmin=0, vmax=1)

    def map_panel(ax: Any) -> tuple[Any, Any]:
        """A [CLS] map with the digit faintly on top: both map panels are drawn this way."""
        heat = ax.imshow(  # NaN (no map yet) is transparent
            np.full((8, 8), np.nan), cmap="magma", vmin=0, vmax=1, extent=(-0.5, 7.5, 7.5, -0.5)
        )
        digit = ax.imshow(np.zeros((8, 8)), cmap="gray_r", vmin=0, vmax=1, alpha=0.25)
        return heat, digit

    overlay, under = map_panel(axes[1])
    student, student_under = map_panel(axes[2])
    fig.colorbar(overlay, ax=list(axes[1:]), shrink=0.85, label="weight / largest weight")
    for ax in axes[1:]:  # one colour bar for both maps (ui.add_colour_bars adds none)
        ax.tlab_has_colour_bar = True
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    titles = [axes[0].set_title(""), axes[1].set_title(""), axes[2].set_title("")]
    view.animate(img, overlay, under, student, student_under, *titles)

    n_layers, n_heads = len(attentions), attentions[0].shape[1]
    slider = ui.widgets.IntSlider
    controls = {
        "image": slider(index, 0, len(images) - 1, description="test image", style=ui.STYLE),
        "layer": slider(n_layers - 1, 0, n_layers - 1, description="layer", style=ui.STYLE),
        "head": slider(-1, -1, n_heads - 1, description="head (-1 = mean)", style=ui.STYLE),
        "rollout": ui.widgets.Checkbox(
            value=False, description="rollout (all layers up to this one)", style=ui.STYLE
        ),
    }

    def to_grid(row: Tensor) -> np.ndarray:
        """(N,) weights of [CLS] on the patches -> the image-sized picture, scaled to max 1."""
        grid = row.reshape(gh, gw)
        grid = grid / grid.max().clamp_min(1e-12)
        P = config.patch_size
        return grid.repeat_interleave(P, 0).repeat_interleave(P, 1).numpy()

    def update() -> tuple[dict[str, Any], str]:
        i, layer = controls["image"].value, controls["layer"].value
        head, use_rollout = controls["head"].value, controls["rollout"].value
        img.set_data(images[i, 0].numpy())
        under.set_data(images[i, 0].numpy())
        student_under.set_data(images[i, 0].numpy())
        titles[0].set_text(f"label {int(data.y_test[i])}, predicted {int(predictions[i])}")
        layers = [a[i : i + 1] for a in attentions[: layer + 1]]  # (1, H, T, T) each
        if head >= 0:
            layers = [a[:, head : head + 1] for a in layers]
        if use_rollout:
            row = attention_rollout(layers)[0, 0, 1:]  # [CLS]'s row, patches only
            what = f"rollout through layers 0..{layer}"
        else:
            row = layers[-1][0].mean(0)[0, 1:]  # (N,)
            what = f"layer {layer}, " + ("mean of heads" if head < 0 else f"head {head}")
        picture = to_grid(row)
        overlay.set_data(picture)
        titles[1].set_text(what)
        state: dict[str, Any] = {
            "map": picture,
            "prediction": int(predictions[i]),
            "cls_weights": row.numpy(),
        }
        line = (
            f"[CLS] of test image {i} ({what}), over the digit; brighter = more weight, each map "
            "scaled so its largest patch weight is 1. Rows sum to one over all N + 1 tokens."
        )
        blank = np.full_like(picture, np.nan)
        if rollout is None:
            student.set_data(blank)
            titles[2].set_text("(pass your attention_rollout)")
        else:
            if use_rollout:
                result, error = try_call(rollout, [a.clone() for a in layers])
                expected = attention_rollout(layers)
                if error is None:
                    differs, verdict = compare_tensor(result, expected)
                else:
                    differs, verdict = None, "raised " + error
                student_map = (
                    None if differs is None else to_grid(result.detach()[0, 0, 1:].float())
                )
                student.set_data(blank if student_map is None else student_map)
                titles[2].set_text(f"your rollout through layers 0..{layer}")
                state.update(student_map=student_map, student_verdict=verdict)
                line += f"<br>Your attention_rollout {html.escape(verdict)}."
            else:
                student.set_data(blank)
                titles[2].set_text("your rollout: tick 'rollout'")
                line += "<br>Tick 'rollout' to compare your attention_rollout."
        return state, line

    return ui.Explorer("Where [CLS] looks", controls, view, update)
