"""The GPT attention explorer: a trained GPT's attention over a prompt (notebook 7).

gpt_attention_explorer  one head's causal attention weights over the characters of a prompt,
                        layer and head on sliders
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from transformer_lab.threads import torch_threads
from transformer_lab.widgets._gpt_common import char_label, encode_prompt, load_gpt
from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["gpt_attention_explorer"]


def gpt_attention_explorer(
    model=None, tokenizer=None, prompt: str = "ROMEO:\nBut soft, what light through"
) -> Any:
    """One head's attention weights over the characters of a prompt.

    Args:
        model: a :class:`~transformer_lab.models.GPT` (default: the shipped tiny Shakespeare GPT).
        tokenizer: its tokenizer (default: the shipped one).
        prompt: the text to read (at most the model's max_len characters are used).
    Returns:
        An Explorer with controls ``prompt``, ``layer`` and ``head``; ``state()`` has
        ``weights`` (T, T), the chosen head's causal attention (rows: queries), and ``tokens``.
        Under grading, a placeholder.
    """
    if (placeholder := placeholder_if_grading("gpt_attention_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    model, tokenizer = load_gpt(model, tokenizer)
    encode_prompt(tokenizer, prompt, model.config.max_len)
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    memo: dict[str, tuple[list[str], np.ndarray]] = {}

    def attentions(text: str) -> tuple[list[str], np.ndarray]:
        if text not in memo:
            idx = encode_prompt(tokenizer, text, model.config.max_len)
            with torch.no_grad(), torch_threads(1):
                maps = model(idx, output_attentions=True).attentions  # per layer (1, H, T, T)
            chars = [char_label(tokenizer.itos[int(i)]) for i in idx[0]]
            memo.clear()
            memo[text] = (chars, torch.stack([m[0] for m in maps]).numpy())  # (L, H, T, T)
        return memo[text]

    # 4.2 inches at 80 dpi: the figure, sliders and readout fit on a laptop screen together
    fig, (ax,) = ui.new_figure(1, figsize=(7.0, 4.2))
    view = ui.FigureView(fig)
    im = ax.imshow(
        np.zeros((2, 2)), cmap="Blues", vmin=0, vmax=1, interpolation="nearest", aspect="auto"
    )
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (reading)")
    fig.colorbar(im, ax=ax, fraction=0.046)
    view.animate(im)
    shown = {"prompt": None}

    controls = {
        "prompt": ui.widgets.Text(
            value=prompt, description="prompt", continuous_update=False, style=ui.STYLE
        ),
        "layer": ui.widgets.IntSlider(
            value=0, min=0, max=n_layers - 1, description="layer", style=ui.STYLE
        ),
        "head": ui.widgets.IntSlider(
            value=0, min=0, max=n_heads - 1, description="head", style=ui.STYLE
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        text, layer, head = (controls[n].value for n in ("prompt", "layer", "head"))
        chars, maps = attentions(text)
        w = maps[layer, head]  # (T, T)
        T = len(chars)
        im.set_data(w)
        if shown["prompt"] != text:  # new axes ticks: redraw the background once
            im.set_extent((-0.5, T - 0.5, T - 0.5, -0.5))
            ax.set_xticks(range(T), chars, fontsize=7)
            ax.set_yticks(range(T), chars, fontsize=7)
            shown["prompt"] = text
            view.invalidate()
        ax.set_title(f"layer {layer}, head {head}")
        view.invalidate()
        last = w[-1]
        top = np.argsort(-last)[:3]
        readout = (
            f"The last character '{chars[-1]}' attends most to "
            + ", ".join(f"'{chars[j]}' (position {j}, {last[j]:.2f})" for j in top)
            + ". Everything above the diagonal is 0: no character reads a later one."
        )
        return {
            "prompt": text,
            "layer": layer,
            "head": head,
            "weights": w.copy(),
            "tokens": chars,
        }, readout

    return ui.Explorer("Attention of the trained GPT over a prompt", controls, view, update)
