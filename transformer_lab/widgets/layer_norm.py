"""The layer norm explorer: one token before and after layer norm (notebook 5).

layer_norm_explorer   move one feature of a token (and shift or scale all of them); see the
                      mean, the variance and the normalised vector; optionally the student's
                      own ``layer_norm`` drawn beside ``torch.nn.functional.layer_norm``
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from transformer_lab.widgets._inputs import check_positive
from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["layer_norm_explorer"]


def _student_output(fn: Callable, x: Tensor, gain: Tensor, bias: Tensor, eps: float):
    """(output or None, message): the student's layer norm on this token, or what went wrong."""
    try:
        with torch.no_grad():
            out = fn(x.clone(), gain.clone(), bias.clone(), eps)
    except NotImplementedError:
        return None, "your layer_norm is not implemented yet."
    except Exception as err:  # shown in the readout, not raised: the explorer keeps working
        return None, f"your layer_norm raised {type(err).__name__}: {err}"
    if not torch.is_tensor(out) or tuple(out.shape) != tuple(x.shape):
        got = tuple(out.shape) if torch.is_tensor(out) else type(out).__name__
        return None, f"your layer_norm returned {got}, expected a tensor of shape {tuple(x.shape)}."
    return out.detach().float(), ""


def layer_norm_explorer(
    layer_norm: Callable | None = None, d_model: int = 8, eps: float = 1e-5, seed: int = 0
) -> Any:
    """One token's C features before and after layer norm.

    Args:
        layer_norm: optional ``layer_norm(x, gain, bias, eps)`` of your own; its output is drawn
            as black dots beside the reference bars, and where they differ the check's diagnosis
            is shown under the plot.
        d_model: number of features C (2 to 32).
        eps: added to the variance.
        seed: seed of the token's initial features.
    Returns:
        An Explorer with controls ``feature``, ``value``, ``shift``, ``scale``, ``gain`` and
        ``bias``; ``state()`` has ``x`` (C,), ``mean``, ``var``, ``normalized`` (C,) = (x - mean) /
        sqrt(var + eps), ``output`` (C,) = gain * normalized + bias, and with ``layer_norm``
        also ``student`` (C,) or None and ``max_difference``. Under grading, a placeholder.
    """
    check_positive("d_model", d_model)
    if not 2 <= d_model <= 32:
        raise ValueError(f"d_model must lie between 2 and 32, but received d_model={d_model}.")
    if layer_norm is not None and not callable(layer_norm):
        raise TypeError(
            f"layer_norm must be your function layer_norm(x, gain, bias, eps), but received "
            f"{type(layer_norm).__name__}."
        )
    if not eps > 0:
        raise ValueError(f"eps must be positive, but received eps={eps}.")
    if (placeholder := placeholder_if_grading("layer_norm_explorer")) is not None:
        return placeholder

    from transformer_lab.checks.nb05_transformer_block.blocks import _ln_mistakes
    from transformer_lab.widgets import _common as ui

    C = d_model
    base = torch.randn(C, generator=torch.Generator().manual_seed(seed)) * 1.5 + 0.5  # (C,)
    idx = np.arange(C)
    fig, (ax_in, ax_out) = ui.new_figure(2, figsize=(11, 3.4))
    view = ui.FigureView(fig)
    bars_in = list(ax_in.bar(idx, np.zeros(C), color=ui.BLUE))
    mean_line = ax_in.axhline(0.0, color=ui.ORANGE, lw=2, label="mean")
    band = ax_in.axhspan(-1, 1, color=ui.ORANGE, alpha=0.15, label="mean ± std")
    ax_in.set(title="token x (C features)", xlabel="feature i", ylim=(-12, 12))
    ax_in.legend(loc="upper right", fontsize=8)
    bars_out = list(ax_out.bar(idx, np.zeros(C), color=ui.BLUE, alpha=0.8, label="reference"))
    (dots,) = ax_out.plot(idx, np.zeros(C), "o", color="black", ms=6, label="your layer_norm")
    (wrong,) = ax_out.plot(idx, np.zeros(C), "x", color=ui.RED, ms=11, mew=2.5, label="differs")
    dots.set_visible(layer_norm is not None)
    ax_out.axhline(0.0, color=ui.GREY, lw=0.8)
    ax_out.set(title="gain * (x - mean) / sqrt(var + eps) + bias", xlabel="feature i", ylim=(-5, 5))
    ax_out.legend(loc="upper right", fontsize=8)
    view.animate(bars_in, mean_line, band, bars_out, dots, wrong)

    controls = {
        "feature": ui.widgets.IntSlider(value=0, min=0, max=C - 1, description="feature i"),
        "value": ui.widgets.FloatSlider(
            value=round(float(base[0]), 1), min=-10, max=10, step=0.1, description="x_i"
        ),
        "shift": ui.widgets.FloatSlider(
            value=0.0, min=-5, max=5, step=0.1, description="add to all", style=ui.STYLE
        ),
        "scale": ui.widgets.FloatSlider(
            value=1.0, min=0.01, max=5, step=0.01, description="multiply all", style=ui.STYLE
        ),
        "gain": ui.widgets.FloatSlider(value=1.0, min=0, max=3, step=0.05, description="gain"),
        "bias": ui.widgets.FloatSlider(value=0.0, min=-2, max=2, step=0.05, description="bias"),
    }
    features = base.clone()  # the token; "value" edits one entry of it
    selected = {"i": 0}

    def update() -> tuple[dict[str, Any], str]:
        i = controls["feature"].value
        if i != selected["i"]:  # a new feature: the value slider shows its current value
            selected["i"] = i
            controls["value"].value = round(float(features[i]), 1)
        features[i] = controls["value"].value
        x = features * controls["scale"].value + controls["shift"].value  # (C,)
        gain = torch.full((C,), float(controls["gain"].value))
        bias = torch.full((C,), float(controls["bias"].value))
        mean = x.mean()
        var = ((x - mean) ** 2).mean()  # biased: divide by C
        normalized = (x - mean) / torch.sqrt(var + eps)
        out = F.layer_norm(x, (C,), gain, bias, eps)  # (C,), the reference
        ui.set_bar_heights(bars_in, x.numpy())
        for bar, k in zip(bars_in, range(C)):
            bar.set_color(ui.ORANGE if k == i else ui.BLUE)
        std = float(var.sqrt())
        mean_line.set_ydata([float(mean)] * 2)
        band.set_y(float(mean) - std)
        band.set_height(2 * std)
        ui.set_bar_heights(bars_out, out.numpy())
        state = {
            "x": x.numpy(),
            "mean": float(mean),
            "var": float(var),
            "normalized": normalized.numpy(),
            "output": out.numpy(),
        }
        readout = (
            f"mean {float(mean):.3f}, variance {float(var):.3f} (divide by C = {C}), std {std:.3f}; "
            f"normalised: mean {float(normalized.mean()):.2e}, variance "
            f"{float(normalized.var(unbiased=False)):.3f}. "
            f"Shifting or scaling all features leaves the normalised vector unchanged."
        )
        if layer_norm is not None:
            student, problem = _student_output(layer_norm, x[None], gain, bias, eps)
            state["student"] = None if student is None else student[0].numpy()
            if student is None:
                dots.set_ydata(np.full(C, np.nan))
                wrong.set_ydata(np.full(C, np.nan))
                state["max_difference"] = float("nan")
                readout += f"<br><b>{html.escape(problem)}</b>"
            else:
                diff = (student[0] - out).abs()
                bad = ~torch.isclose(student[0], out, atol=1e-5, rtol=1e-4)
                dots.set_ydata(student[0].numpy())
                wrong.set_ydata(np.where(bad.numpy(), student[0].numpy(), np.nan))
                state["max_difference"] = float(diff.max())
                if bool(bad.any()):
                    found = None
                    for mistake in _ln_mistakes(x[None], gain, bias, eps):
                        try:
                            candidate = mistake.compute()
                        except Exception:
                            continue
                        if torch.allclose(candidate.float(), student, atol=1e-5, rtol=1e-4):
                            found = mistake.message
                            break
                    readout += (
                        f"<br><b style='color:{ui.RED}'>your layer_norm differs by up to "
                        f"{float(diff.max()):.3g}</b>"
                        + (f": {html.escape(found)}" if found else ".")
                    )
                else:
                    readout += "<br>your layer_norm agrees with the reference here."
        return state, readout

    return ui.Explorer("Layer norm on one token", controls, view, update)
