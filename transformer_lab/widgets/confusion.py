"""The confusion explorer: what a trained digits classifier gets wrong (notebook 8).

confusion_explorer  the test set's confusion matrix and a slider over the mistakes
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._vit_common import digits, load_vit

__all__ = ["confusion_explorer"]


def confusion_explorer(model: nn.Module | None = None) -> Any:
    """The test set's confusion matrix, and a slider over the misclassified digits.

    Args:
        model: a trained digits classifier (ViT or any module mapping (B, 1, 8, 8) images to
            logits or an output with ``.logits``); default the shipped ``vit_digits``.
    Returns:
        An Explorer with control ``mistake`` (which misclassified image); ``state()`` has
        ``confusion`` (10, 10) counts (rows: true digit, columns: predicted), ``accuracy``,
        ``n_mistakes`` and ``shown`` (true, predicted) of the current mistake.
    """
    if (placeholder := placeholder_if_grading("confusion_explorer")) is not None:
        return placeholder
    from transformer_lab.widgets import _common as ui

    model = load_vit(model)
    data = digits()
    with torch.no_grad():
        out = model(data.x_test)
    logits = getattr(out, "logits", out)
    probs = torch.softmax(logits, dim=-1)
    pred = probs.argmax(-1)
    truth = data.y_test
    confusion = torch.zeros(10, 10, dtype=torch.long)
    confusion.index_put_((truth, pred), torch.ones_like(truth), accumulate=True)
    wrong = torch.nonzero(pred != truth).flatten()
    accuracy = float((pred == truth).float().mean())
    images = data.unnormalize(data.x_test)

    fig, axes = ui.new_figure(3, figsize=(11, 3.6), width_ratios=[1.3, 0.8, 1.1])
    view = ui.FigureView(fig)
    shown = np.log1p(confusion.numpy().astype(float))
    axes[0].imshow(shown, cmap="Blues")
    for t in range(10):
        for p in range(10):
            if confusion[t, p]:
                color = "white" if t == p else "black"
                axes[0].text(
                    p, t, int(confusion[t, p]), ha="center", va="center", fontsize=7, color=color
                )
    axes[0].set(xlabel="predicted", ylabel="true digit", xticks=range(10), yticks=range(10))
    axes[0].set_title(f"test accuracy {accuracy:.2%} ({len(wrong)} mistakes)")
    box = axes[0].add_patch(ui.Rectangle((-0.5, -0.5), 1, 1, fill=False, ec=ui.RED, lw=2.5))
    img = axes[1].imshow(np.zeros((8, 8)), cmap="gray_r", vmin=0, vmax=1)
    axes[1].set_xticks([])
    axes[1].set_yticks([])
    title = axes[1].set_title("")
    bars = list(axes[2].bar(range(10), np.zeros(10), color=ui.GREY))
    axes[2].set(ylim=(0, 1), xticks=range(10), xlabel="digit", ylabel="probability")
    view.animate(box, img, title, bars)
    controls = {
        "mistake": ui.widgets.IntSlider(
            value=0, min=0, max=max(len(wrong) - 1, 0), description="mistake #", style=ui.STYLE
        )
    }

    def update() -> tuple[dict[str, Any], str]:
        state: dict[str, Any] = {
            "confusion": confusion.numpy(),
            "accuracy": accuracy,
            "n_mistakes": len(wrong),
        }
        if len(wrong) == 0:
            box.set_visible(False)
            state["shown"] = None
            return state, "No test image is misclassified."
        i = int(wrong[controls["mistake"].value])
        t, p = int(truth[i]), int(pred[i])
        box.set_bounds(p - 0.5, t - 0.5, 1, 1)
        img.set_data(images[i, 0].numpy())
        title.set_text(f"true {t}, predicted {p}")
        for d, bar in enumerate(bars):
            bar.set_height(float(probs[i, d]))
            bar.set_color(ui.RED if d == p else ui.BLUE if d == t else ui.GREY)
        state["shown"] = (t, p)
        readout = (
            f"Test image {i}: a {t} read as a {p} with probability {float(probs[i, p]):.2f} "
            f"(the true digit got {float(probs[i, t]):.2f}). Red box: its cell in the matrix."
        )
        return state, readout

    return ui.Explorer("What the model gets wrong", controls, view, update)
