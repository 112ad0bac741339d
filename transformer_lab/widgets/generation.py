"""The generation explorer: a trained GPT writing, one step at a time (notebook 7).

generation_explorer  a prompt box and temperature / top-k / top-p sliders; the model writes a
                     continuation, and the next-token distribution of any step is drawn (before
                     and after filtering), optionally beside what the student's own
                     filter_logits makes of it
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_lab.threads import torch_threads
from transformer_lab.widgets._gpt_common import char_label, encode_prompt, load_gpt
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets.sampling import filter_controls

__all__ = ["generation_explorer"]

FilterFn = Callable[..., Tensor]


def _reference_filter(logits: Tensor, temperature: float, top_k, top_p) -> Tensor:
    from transformer_lab.models.gpt import filter_logits

    return filter_logits(logits / temperature, top_k or None, top_p)


def generation_explorer(
    model=None,
    tokenizer=None,
    prompt: str = "To be, or not to ",  # an uncertain next letter: top-k and top-p matter
    filter_fn: FilterFn | None = None,
    max_new_tokens: int = 30,
    n_bars: int = 16,
) -> Any:
    """Sample a continuation and show the next-token distribution at every step.

    Args:
        model: a :class:`~transformer_lab.models.GPT` (default: the shipped tiny Shakespeare GPT).
        tokenizer: its :class:`~transformer_lab.data.CharTokenizer` (default: the shipped one).
        prompt: the starting text.
        filter_fn: your ``filter_logits(logits, temperature, top_k, top_p)``; when given, it
            drives the sampling and its distribution is drawn beside the reference's.
        max_new_tokens: characters to generate (1 to 200).
        n_bars: how many of the most likely characters to draw.
    Returns:
        An Explorer with controls ``prompt``, ``temperature``, ``top_k`` (0 = off), ``top_p``
        (1 = off), ``seed`` and ``step``; ``state()`` has ``text`` (the continuation),
        ``probs`` (V,) the model's softmax at the chosen step, ``final`` (V,) the reference
        filter's distribution, ``yours`` (V,) or None, ``chosen`` (the sampled id).
        Under grading, a placeholder.
    """
    if not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= 200:
        raise ValueError(
            f"max_new_tokens must be an integer from 1 to 200, but received {max_new_tokens!r}."
        )
    if filter_fn is not None and not callable(filter_fn):
        raise TypeError(f"filter_fn must be a function, but received {type(filter_fn).__name__}.")
    if (placeholder := placeholder_if_grading("generation_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    model, tokenizer = load_gpt(model, tokenizer)
    encode_prompt(tokenizer, prompt, model.config.max_len)  # fail early on a bad prompt
    V = tokenizer.vocab_size
    n_bars = max(2, min(n_bars, V))
    cache: dict[tuple, dict[str, Any]] = {}

    def run(prompt: str, tau: float, k: int, p: float, seed: int) -> dict[str, Any]:
        key = (prompt, tau, k, p, seed)
        if key in cache:
            return cache[key]
        idx = encode_prompt(tokenizer, prompt, model.config.max_len)
        gen = torch.Generator().manual_seed(seed)
        steps = []
        with torch.no_grad(), torch_threads(1):
            for _ in range(max_new_tokens):
                logits = model(idx[:, -model.config.max_len :]).logits[0, -1]  # (V,)
                ref = _reference_filter(logits, tau, k, p)
                yours, error = None, None
                if filter_fn is not None:
                    try:
                        yours = torch.as_tensor(filter_fn(logits.clone(), tau, k, p)).float()
                        if yours.shape != logits.shape:
                            raise ValueError(
                                f"returned shape {tuple(yours.shape)}, expected {(V,)}"
                            )
                    except Exception as err:  # shown in the readout, never raised into the UI
                        yours, error = None, f"{type(err).__name__}: {err}"
                used = yours if yours is not None else ref
                probs_used = torch.softmax(used, -1)
                if not bool(torch.isfinite(probs_used).all()) or float(probs_used.sum()) <= 0:
                    probs_used, error = torch.softmax(ref, -1), error or "no token left to sample"
                chosen = int(torch.multinomial(probs_used, 1, generator=gen))
                steps.append(
                    {
                        "probs": torch.softmax(logits, -1).numpy(),
                        "final": torch.softmax(ref, -1).numpy(),
                        "yours": None if yours is None else torch.softmax(yours, -1).numpy(),
                        "error": error,
                        "chosen": chosen,
                    }
                )
                idx = torch.cat([idx, torch.tensor([[chosen]])], dim=1)
        result = {"steps": steps, "text": tokenizer.decode([s["chosen"] for s in steps])}
        if len(cache) > 64:
            cache.clear()
        cache[key] = result
        return result

    fig, (ax,) = ui.new_figure(1, figsize=(10, 3.2))
    view = ui.FigureView(fig)
    x = np.arange(n_bars)
    width = 0.27 if filter_fn is not None else 0.4
    bars_probs = ax.bar(x - width, np.zeros(n_bars), width, color=ui.GREY, label="model, τ = 1")
    bars_final = ax.bar(x, np.zeros(n_bars), width, color=ui.BLUE, label="after τ, top-k, top-p")
    bars_yours = None
    if filter_fn is not None:
        bars_yours = ax.bar(
            x + width, np.zeros(n_bars), width, color=ui.ORANGE, label="your filter_logits"
        )
    ax.set_xticks(x, [""] * n_bars)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("probability")
    ax.legend(loc="upper right", frameon=False)
    view.animate(list(bars_probs), list(bars_final), *([list(bars_yours)] if bars_yours else []))

    controls = {
        "prompt": ui.widgets.Text(
            value=prompt, description="prompt", continuous_update=False, style=ui.STYLE
        ),
        **filter_controls(ui, V),
        "seed": ui.widgets.IntSlider(value=0, min=0, max=20, description="seed", style=ui.STYLE),
        "step": ui.widgets.IntSlider(
            value=0, min=0, max=max_new_tokens - 1, description="step shown", style=ui.STYLE
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        c = {name: w.value for name, w in controls.items()}
        result = run(c["prompt"], c["temperature"], c["top_k"], c["top_p"], c["seed"])
        step = result["steps"][c["step"]]
        order = np.argsort(-step["probs"], kind="stable")[:n_bars]
        if step["chosen"] not in order:  # always show the sampled character
            order[-1] = step["chosen"]
        ui.set_bar_heights(bars_probs, step["probs"][order])
        ui.set_bar_heights(bars_final, step["final"][order])
        if bars_yours is not None:
            heights = step["yours"][order] if step["yours"] is not None else np.zeros(n_bars)
            ui.set_bar_heights(bars_yours, heights)
        labels = [char_label(tokenizer.itos[int(i)]) for i in order]
        ax.set_xticks(x, labels)
        for tick, i in zip(ax.get_xticklabels(), order):
            tick.set_color(ui.RED if int(i) == step["chosen"] else "black")
            tick.set_fontweight("bold" if int(i) == step["chosen"] else "normal")
        view.invalidate()  # the tick labels are part of the background
        text = result["text"]
        s = c["step"]
        shown = (
            f"<b>{html.escape(c['prompt'])}</b>{html.escape(text[:s])}"
            f"<mark>{html.escape(text[s])}</mark>{html.escape(text[s + 1 :])}"
        ).replace("\n", "⏎<br>")
        kept = int((step["final"] > 0).sum())
        readout = f"step {s}: sampled '{char_label(text[s])}' from {kept} of {V} characters.<br><code>{shown}</code>"
        if filter_fn is not None:
            if step["error"]:
                readout += f"<br><span style='color:{ui.RED}'>your filter_logits: {html.escape(step['error'])}</span>"
            elif step["yours"] is not None:
                same = np.allclose(step["yours"], step["final"], atol=1e-5)
                readout += "<br>your filter_logits " + (
                    "agrees with the reference here."
                    if same
                    else f"<span style='color:{ui.RED}'>differs from the reference here.</span>"
                )
        state = {
            **c,
            "text": text,
            "probs": step["probs"],
            "final": step["final"],
            "yours": step["yours"],
            "chosen": step["chosen"],
            "shown_ids": order.copy(),
        }
        return state, readout

    return ui.Explorer(
        "Generating with a trained GPT, one character at a time", controls, view, update
    )
