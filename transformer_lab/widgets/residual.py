"""The residual explorer: the residual stream through a deep stack of blocks (notebook 5).

residual_explorer     the norm of the residual stream and of each branch's contribution,
                      block by block, for a pre-norm and a post-norm stack at initialisation
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_lab.widgets._inputs import check_positive
from transformer_lab.widgets._placeholder import placeholder_if_grading

__all__ = ["residual_explorer", "stream_norms"]


def _parts(block: Any) -> tuple[Any, Any, Any, Any]:
    """(attention, its norm, MLP, its norm) of a :class:`~transformer_lab.blocks.Block`."""
    return block.self_attn, block.self_attn_norm, block.mlp, block.mlp_norm


@torch.no_grad()
def stream_norms(blocks: Any, x: Tensor, norm_first: bool) -> dict[str, np.ndarray]:
    """Run ``x`` (B, T, C) through ``blocks``; per block, the mean per-token norm of the stream
    after it and of what its attention and its MLP added (their branch outputs)."""
    stream, attn_out, mlp_out = [], [], []
    size = lambda t: float(t.norm(dim=-1).mean())  # noqa: E731  mean L2 norm per token
    for block in blocks:
        attn, n1, mlp, n2 = _parts(block)
        if norm_first:  # x = x + f(norm(x))
            a = attn(n1(x))[0]
            x = x + a
            f = mlp(n2(x))
            x = x + f
        else:  # x = norm(x + f(x))
            a = attn(x)[0]
            x = n1(x + a)
            f = mlp(x)
            x = n2(x + f)
        stream.append(size(x))
        attn_out.append(size(a))
        mlp_out.append(size(f))
    return {"stream": np.array(stream), "attn": np.array(attn_out), "mlp": np.array(mlp_out)}


def _stack(n_layers: int, d_model: int, n_heads: int, norm_first: bool, seed: int) -> list:
    """``n_layers`` seeded reference blocks (the notebook's global RNG is left alone)."""
    from transformer_lab.blocks import Block

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [
            Block(d_model, n_heads, 4 * d_model, norm_first=norm_first).eval()
            for _ in range(n_layers)
        ]


def residual_explorer(
    n_layers: int = 48, d_model: int = 32, n_heads: int = 4, seed: int = 0
) -> Any:
    """The residual stream of a pre-norm and a post-norm stack of blocks at initialisation.

    Args:
        n_layers: the deepest stack the depth slider reaches (2 to 96).
        d_model: width C; n_heads: heads H (must divide C).
        seed: seed of the weights and the input.
    Returns:
        An Explorer with controls ``depth`` and ``branch_scale`` (multiplies the output
        projections of every attention and MLP, i.e. how loud each branch starts);
        ``state()`` has ``pre`` and ``post``, each {"stream", "attn", "mlp"} arrays of length
        ``depth``. Under grading, a placeholder.
    """
    check_positive("n_layers", n_layers)
    check_positive("d_model", d_model)
    check_positive("n_heads", n_heads)
    if not 2 <= n_layers <= 96:
        raise ValueError(f"n_layers must lie between 2 and 96, but received n_layers={n_layers}.")
    if d_model % n_heads:
        raise ValueError(
            f"d_model must be divisible by n_heads, but received d_model={d_model}, n_heads={n_heads}."
        )
    if (placeholder := placeholder_if_grading("residual_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    stacks = {nf: _stack(n_layers, d_model, n_heads, nf, seed) for nf in (True, False)}
    outputs = {}  # the output projections, and their initial weights, scaled by branch_scale
    for stack in stacks.values():
        for block in stack:
            attn, _, mlp, _ = _parts(block)
            last = [m for m in mlp.modules() if isinstance(m, torch.nn.Linear)][-1]
            for lin in (attn.out_proj, last):
                outputs[id(lin)] = (lin, lin.weight.detach().clone())
    x0 = torch.randn(2, 8, d_model, generator=torch.Generator().manual_seed(seed + 1))
    cache: dict[float, dict[str, dict[str, np.ndarray]]] = {}

    def run(scale: float) -> dict[str, dict[str, np.ndarray]]:
        if scale not in cache:
            with torch.no_grad():
                for lin, weight in outputs.values():
                    lin.weight.copy_(weight * scale)
            cache[scale] = {
                "pre": stream_norms(stacks[True], x0, True),
                "post": stream_norms(stacks[False], x0, False),
            }
        return cache[scale]

    fig, (ax_s, ax_b) = ui.new_figure(2, figsize=(11, 3.5))
    view = ui.FigureView(fig)
    layers = np.arange(1, n_layers + 1)
    lines = {}
    for name, color in (("pre", ui.BLUE), ("post", ui.ORANGE)):
        (lines[name, "stream"],) = ax_s.plot(
            layers, layers * 0.0, "-o", ms=3, color=color, label=f"{name}-norm"
        )
        (lines[name, "attn"],) = ax_b.plot(
            layers, layers * 0.0, "-", color=color, label=f"{name}-norm: attention"
        )
        (lines[name, "mlp"],) = ax_b.plot(
            layers, layers * 0.0, "--", color=color, label=f"{name}-norm: MLP"
        )
    ax_s.set(
        title="norm of the residual stream after block l", xlabel="block l", ylabel="mean ‖x_l‖"
    )
    ax_b.set(
        title="what each branch adds, relative to the stream",
        xlabel="block l",
        ylabel="‖branch‖ / ‖stream‖",
    )
    ax_s.axhline(np.sqrt(d_model), color=ui.GREY, ls=":", lw=1)
    ax_s.legend(fontsize=8, loc="upper left")
    ax_b.legend(fontsize=7, loc="upper right")
    view.animate(list(lines.values()))

    controls = {
        "depth": ui.widgets.IntSlider(
            value=min(24, n_layers),
            min=1,
            max=n_layers,
            description="depth (blocks)",
            style=ui.STYLE,
        ),
        "branch_scale": ui.widgets.FloatLogSlider(
            value=1.0, base=10, min=-1, max=1, step=0.1, description="branch scale", style=ui.STYLE
        ),
    }

    def update() -> tuple[dict[str, Any], str]:
        depth = controls["depth"].value
        result = run(round(float(controls["branch_scale"].value), 4))
        state: dict[str, Any] = {}
        top_s, top_b = 1.0, 0.1
        for name in ("pre", "post"):
            r = {k: v[:depth] for k, v in result[name].items()}
            state[name] = r
            lines[name, "stream"].set_data(layers[:depth], r["stream"])
            lines[name, "attn"].set_data(layers[:depth], r["attn"] / r["stream"])
            lines[name, "mlp"].set_data(layers[:depth], r["mlp"] / r["stream"])
            top_s = max(top_s, float(r["stream"].max()))
            top_b = max(
                top_b, float((r["attn"] / r["stream"]).max()), float((r["mlp"] / r["stream"]).max())
            )
        for ax, top in ((ax_s, top_s), (ax_b, top_b)):
            ax.set_xlim(0.5, depth + 0.5)
            ax.set_ylim(0, 1.1 * top)
        pre, post = state["pre"], state["post"]
        readout = (
            f"after {depth} blocks: pre-norm stream norm {pre['stream'][-1]:.1f} (grows: nothing "
            f"renormalises the sum; a final norm follows the stack), post-norm {post['stream'][-1]:.1f} "
            f"(every sum is renormalised, ≈ √C = {np.sqrt(d_model):.1f} times the gains). Last block's "
            f"branches add {pre['mlp'][-1] / pre['stream'][-1]:.0%} (pre) vs "
            f"{post['mlp'][-1] / post['stream'][-1]:.0%} (post) of the stream."
        )
        return state, readout

    return ui.Explorer("The residual stream, block by block", controls, view, update)
