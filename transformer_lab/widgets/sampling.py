"""Sampling explorer: temperature, top-k and top-p (nucleus) on a next-token distribution.

Applied in this order, as in GPT-2 style generation:
    1. divide the logits by the temperature tau;
    2. top-k: keep the k most likely tokens;
    3. top-p: keep the smallest set of most likely tokens whose probability reaches p;
then renormalise what is left with a softmax and sample from it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_lab._validate import check_tensor
from transformer_lab.attention import softmax
from transformer_lab.models.gpt import filter_logits
from transformer_lab.widgets._inputs import as_float_tensor
from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["sampling_explorer"]

DEFAULT_TOKENS = (
    "mat",
    "floor",
    "sofa",
    "bed",
    "chair",
    "rug",
    "roof",
    "table",
    "box",
    "lap",
    "grass",
    "moon",
    "piano",
    "idea",
    "cloud",
    "tax",
)


def _default_logits(seed: int) -> Tensor:
    """Plausible-looking next-token logits: decreasing with rank, plus a little seeded noise."""
    gen = torch.Generator().manual_seed(seed)
    V = len(DEFAULT_TOKENS)
    return 3.0 - 0.45 * torch.arange(V, dtype=torch.float32) + 0.3 * torch.randn(V, generator=gen)


def sampling_explorer(
    logits: Sequence[float] | Tensor | None = None,
    tokens: Sequence[str] | None = None,
    seed: int = 0,
    filter_fn: Callable[..., Tensor] | None = None,
) -> Any:
    """Bars of the next-token distribution before and after temperature, top-k and top-p.

    Args:
        logits: (V,) next-token logits, 2 <= V <= 40 (e.g. a model's last row of logits);
            default: made-up logits for "the cat sat on the ...".
        tokens: V labels for the bars (default: words for the made-up logits, else ids).
        seed: seed of the default logits.
        filter_fn: your ``filter_logits(logits, temperature, top_k, top_p)`` (notebook 7); its
            distribution is drawn beside the reference's, and the readout says where they differ.
    Returns:
        An Explorer with controls ``temperature``, ``top_k`` (0 = off) and ``top_p`` (1 = off);
        ``state()`` has ``probs`` (V,) = softmax(logits), ``tempered`` = softmax(logits / tau),
        ``final`` (V,) (the distribution sampled from) and ``kept`` (V,) bool; with ``filter_fn``
        also ``yours`` (V,) (None if it raised). Under grading, a placeholder.
    """
    z = _default_logits(seed) if logits is None else as_float_tensor("logits", logits)
    check_tensor("logits", z, dims=1)
    V = z.shape[0]
    if not 2 <= V <= 40:
        raise ValueError(f"logits must hold 2 to 40 values (one per bar), but received {V}.")
    if tokens is None:
        tokens = DEFAULT_TOKENS if logits is None else [str(i) for i in range(V)]
    tokens = [str(t) for t in tokens]
    if filter_fn is not None and not callable(filter_fn):
        raise TypeError(f"filter_fn must be a function, but received {type(filter_fn).__name__}.")
    if len(tokens) != V:
        raise ValueError(
            f"tokens must label every logit, but received {len(tokens)} tokens for {V} logits."
        )
    if (placeholder := placeholder_if_grading("sampling_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    probs = softmax(z)  # (V,)
    fig, (ax,) = ui.new_figure(1, figsize=(10, 3.2))
    view = ui.FigureView(fig)
    x = np.arange(V)
    ax.bar(x - 0.2, probs.numpy(), 0.4, color=ui.GREY, label="softmax(logits), τ = 1")
    w = 0.27 if filter_fn is not None else 0.4
    final_bars = ax.bar(
        x + (0.0 if filter_fn is not None else 0.2),
        np.zeros(V),
        w,
        color=ui.BLUE,
        label="after τ, top-k, top-p (renormalised)",
    )
    your_bars = []
    if filter_fn is not None:
        your_bars = list(ax.bar(x + w, np.zeros(V), w, color=ui.ORANGE, label="your filter_logits"))
    (tempered_marks,) = ax.plot(
        x + (0.0 if filter_fn is not None else 0.2),
        np.zeros(V),
        "_",
        ms=11,
        mew=2,
        color="black",
        label="softmax(logits / τ) before filtering",
    )
    ax.set_xticks(x, tokens, rotation=45, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("probability")
    ax.legend(loc="upper right", frameon=False)
    view.animate(list(final_bars), tempered_marks, your_bars)

    controls = {
        **filter_controls(ui, V),
    }

    def update() -> tuple[dict[str, Any], str]:
        tau, top_k, top_p = (
            controls["temperature"].value,
            controls["top_k"].value,
            controls["top_p"].value,
        )
        tempered = softmax(z / tau)  # (V,)
        filtered = filter_logits(z / tau, top_k, top_p)  # (V,)
        final = softmax(filtered)  # (V,)
        kept = torch.isfinite(filtered)
        ui.set_bar_heights(final_bars, final.numpy())
        tempered_marks.set_ydata(tempered.numpy())
        entropy = float(-(final[kept] * final[kept].log()).sum())
        readout = (
            f"{int(kept.sum())} of {V} tokens can be sampled; most likely '{tokens[int(final.argmax())]}' "
            f"with p = {float(final.max()):.2f}; entropy {entropy:.2f} nats (at most log {V} = {math.log(V):.2f})."
        )
        yours = None
        if filter_fn is not None:
            try:
                out = torch.as_tensor(filter_fn(z.clone(), tau, top_k, top_p)).float()
                if out.shape != z.shape:
                    raise ValueError(f"returned shape {tuple(out.shape)}, expected {(V,)}")
                yours = softmax(out)  # (V,)
            except Exception as err:  # shown in the readout, never raised into the UI
                readout += (
                    f"<br><span style='color:{ui.RED}'>your filter_logits raised "
                    f"{html.escape(type(err).__name__)}: {html.escape(str(err))}</span>"
                )
            if yours is not None:
                same = bool(torch.allclose(yours, final, atol=1e-5))
                readout += "<br>your filter_logits " + (
                    "gives the same distribution."
                    if same
                    else f"<span style='color:{ui.RED}'>gives a different distribution.</span>"
                )
            ui.set_bar_heights(your_bars, (yours if yours is not None else torch.zeros(V)).numpy())
        state = {
            "yours": None if yours is None else yours.numpy(),
            "temperature": tau,
            "top_k": top_k,
            "top_p": top_p,
            "logits": z.numpy(),
            "probs": probs.numpy(),
            "tempered": tempered.numpy(),
            "final": final.numpy(),
            "kept": kept.numpy(),
        }
        return state, readout

    return ui.Explorer("Sampling the next token", controls, view, update)


def filter_controls(ui, V: int) -> dict:
    """The temperature, top-k and top-p sliders (off at their defaults) for a vocabulary of V."""
    return {
        "temperature": ui.widgets.FloatLogSlider(
            value=1.0,
            base=10,
            min=-1,
            max=1,
            step=0.02,
            description="temperature τ",
            readout_format=".2f",
            style=ui.STYLE,
        ),
        "top_k": ui.widgets.IntSlider(
            value=0, min=0, max=V, description="top-k (0 = off)", style=ui.STYLE
        ),
        "top_p": ui.widgets.FloatSlider(
            value=1.0, min=0.05, max=1.0, step=0.05, description="top-p (1 = off)", style=ui.STYLE
        ),
    }
