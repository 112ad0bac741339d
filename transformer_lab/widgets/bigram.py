"""Bigram explorer: a language model that is one embedding table, watched while it trains.

Row ``i`` of the (V, V) table holds the logits of the character after character ``i``
(:class:`~transformer_lab.lessons.bigram.BigramLM`). The table starts at zero (every next
character has probability 1/V, loss ln V) and is trained with Adam; the sliders pick a training
step and the character to condition on. The bars are the model's next-character probabilities,
the black ticks the text's own pair frequencies (what training converges to).
"""

from __future__ import annotations

from typing import Any

import torch

from transformer_lab.lessons.bigram import BigramLM, uniform_loss
from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["bigram_explorer"]

TOP = 12  # characters shown per row


def _label(c: str) -> str:
    return {" ": "·", "\n": "\\n"}.get(c, c)


def bigram_explorer(
    text: str | None = None, *, steps: int = 100, every: int = 5, lr: float = 0.1
) -> Any:
    """Next-character probabilities read from a bigram's table, as training proceeds.

    Args:
        text: training text (default: the first 200,000 characters of tiny Shakespeare).
        steps: Adam steps on batches of 1,024 random character pairs (10 to 1,000).
        every: keep the table every ``every`` steps (the step slider's resolution).
        lr: Adam's learning rate.
    Returns:
        An :class:`~transformer_lab.widgets._common.Explorer` with controls ``step`` and
        ``after`` (the conditioning character); ``state()`` has ``probs`` (V,), ``counts``
        (V,) the pair frequencies, ``loss`` at that step and ``uniform`` = ln V. Under grading,
        a placeholder.
    """
    if not 10 <= steps <= 1000 or not 1 <= every <= steps:
        raise ValueError(
            f"steps must lie in [10, 1000] and every in [1, steps], but received {steps} and {every}."
        )
    if text is None:
        from transformer_lab.data import load_shakespeare

        text = load_shakespeare()[:200_000]
    if not isinstance(text, str) or len(set(text)) < 2:
        raise ValueError("text must be a str holding at least two different characters.")
    if (placeholder := placeholder_if_grading("bigram_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    chars = sorted(set(text))
    V = len(chars)
    lut = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([lut[c] for c in text])  # (N,)
    pair_counts = torch.zeros(V, V)
    pair_counts.index_put_((ids[:-1], ids[1:]), torch.ones(len(ids) - 1), accumulate=True)
    freqs = pair_counts / pair_counts.sum(dim=1, keepdim=True).clamp_min(1)  # (V, V)

    model = BigramLM(V)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(0)
    tables, losses = {0: model.table.weight.detach().clone()}, []
    with ui.torch_threads(1):
        for step in range(1, steps + 1):
            t = torch.randint(len(ids) - 1, (1024,), generator=g)
            loss = torch.nn.functional.cross_entropy(model(ids[t]), ids[t + 1])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if step % every == 0 or step == steps:
                tables[step] = model.table.weight.detach().clone()

    n_top = min(TOP, V)
    fig, (ax_p, ax_l) = ui.new_figure(2, figsize=(10, 3.0))
    view = ui.FigureView(fig)
    bars = ax_p.bar(range(n_top), [0.0] * n_top, color=ui.BLUE, label="model")
    ticks = ax_p.plot(
        range(n_top), [0.0] * n_top, "_", color="black", ms=18, mew=2, label="pair counts"
    )[0]
    ax_p.set_ylim(0, 1.08)
    ax_p.set_ylabel("P(next | after)")
    ax_p.legend(loc="upper right", frameon=False, fontsize=8)
    ax_l.plot(range(1, steps + 1), losses, color=ui.GREY, lw=1)
    ax_l.axhline(uniform_loss(V), color=ui.RED, ls="--", lw=1, label=f"ln V = ln {V}")
    ax_l.set_xlabel("training step")
    ax_l.set_ylabel("cross-entropy (nats)")
    ax_l.legend(loc="upper right", frameon=False, fontsize=8)
    marker = ax_l.axvline(0, color=ui.BLUE)
    view.animate(list(bars), ticks, marker)

    controls = {
        "step": ui.widgets.IntSlider(
            value=0, min=0, max=steps, step=every, description="training step", style=ui.STYLE
        ),
        "after": ui.widgets.Dropdown(
            options=[(_label(c), c) for c in chars],
            value="t" if "t" in lut else chars[0],
            description="after",
            style=ui.STYLE,
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        step = max(s for s in tables if s <= controls["step"].value)  # nearest kept table
        row = lut[controls["after"].value]
        probs = tables[step][row].softmax(dim=-1)  # (V,)
        top = freqs[row].argsort(descending=True)[:n_top]  # the most frequent successors
        ui.set_bar_heights(bars, probs[top].numpy())
        ticks.set_ydata(freqs[row][top].numpy())
        ax_p.set_xticks(range(n_top), [_label(chars[int(j)]) for j in top])
        ax_p.set_title(f"after {_label(chars[row])!r}: row {row} of the table, softmaxed")
        marker.set_xdata([step, step])
        loss = uniform_loss(V) if step == 0 else losses[step - 1]
        view.invalidate()  # the tick labels changed
        readout = (
            f"step {step}: batch loss {loss:.3f} nats (ln V = {uniform_loss(V):.3f}); "
            f"P({_label(chars[int(top[0])])!r} after {_label(chars[row])!r}) = "
            f"{float(probs[top[0]]):.3f}, pair frequency {float(freqs[row][top[0]]):.3f}"
        )
        state = {
            "step": step,
            "probs": probs.numpy(),
            "counts": freqs[row].numpy(),
            "loss": loss,
            "uniform": uniform_loss(V),
        }
        return state, readout

    return ui.Explorer("A bigram model is one embedding table", controls, view, update)
