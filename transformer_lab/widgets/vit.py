"""ViT explorers: an image cut into patches, where [CLS] looks, and what the model gets wrong.

patches_explorer        patch-size and image sliders: the grid on the image, the sequence of
                        patches, N and the attention cost; draws the student's patchify too
vit_attention_explorer  image, layer and head sliders over a trained ViT: [CLS]'s attention
                        on the patch grid, or attention rollout (the student's, if given)
confusion_explorer      the test set's confusion matrix and a slider over the mistakes
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from transformer_lab.interpret import attention_rollout
from transformer_lab.models.vit import patchify
from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["patches_explorer", "vit_attention_explorer", "confusion_explorer"]


def _digits():
    from transformer_lab.data import load_digits_data

    return load_digits_data(seed=0, normalize=True)  # the split every notebook uses


def _try(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    """Call a student's function; return (result, None) or (None, one-line error)."""
    try:
        return fn(*args), None
    except Exception as err:  # a student's bug is shown in the widget, never as a traceback
        text = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return None, f"{type(err).__name__}: {text}"[:200]


def _compare(student: Any, expected: Tensor) -> tuple[np.ndarray | None, str]:
    """(where the student's tensor differs, a readout) for a result that may be anything."""
    if not isinstance(student, Tensor):
        return None, f"your function returned {type(student).__name__}, not a tensor"
    if tuple(student.shape) != tuple(expected.shape):
        return None, f"your shape {tuple(student.shape)} vs expected {tuple(expected.shape)}"
    diff = (student.detach().double() - expected.double()).abs()
    diff = torch.nan_to_num(diff, nan=float("inf"))
    worst = float(diff.max()) if diff.numel() else 0.0
    verdict = "matches the reference" if worst <= 1e-5 else f"differs: max |difference| {worst:.3g}"
    return (diff > 1e-5).numpy(), verdict


# ---------------------------------------------------------------------------------------------
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

    data = _digits()
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
            result, error = _try(patchify_fn, image.clone(), P)
            if error is None:
                differs, verdict = _compare(result, patchify(image, P))
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


# ---------------------------------------------------------------------------------------------
def _load_model(model: nn.Module | None) -> nn.Module:
    if model is None:
        from transformer_lab.checkpoints import load_pretrained

        model, _ = load_pretrained("vit_digits")
    return model.eval()


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

    model = _load_model(model)
    config = model.config
    gh, gw = config.grid
    data = _digits()
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
                result, error = _try(rollout, [a.clone() for a in layers])
                expected = attention_rollout(layers)
                if error is None:
                    differs, verdict = _compare(result, expected)
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


# ---------------------------------------------------------------------------------------------
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

    model = _load_model(model)
    data = _digits()
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
