"""Position-kinds explorer: sinusoidal vs learned position tables, added vs concatenated.

Three tables of T position vectors: the sinusoidal formula; the learned table of the shipped
tiny GPT (trained on Shakespeare); and a learned table at initialisation (random). The second
panel shows how similar positions are (cosine of p_t and p_s): a smooth band around the diagonal
for the formula and, learned from data, for the trained GPT; nothing but the diagonal at init.

Tokens z_t = x_t + a p_t (added, as in the transformer) or z_t = [x_t, a p_t] (concatenated,
twice as wide). Their dot products split into

    z_t . z_s = x_t . x_s + a^2 p_t . p_s + a (x_t . p_s + p_t . x_s)     (added)
    z_t . z_s = x_t . x_s + a^2 p_t . p_s                                 (concatenated)

so adding mixes content and position in cross terms, which concatenation keeps apart at the
price of width. Repeated words are identical without positions and drift apart as a grows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_lab.positional import sinusoidal_encoding as reference_encoding
from transformer_lab.widgets._inputs import check_tokens, seeded_embeddings
from transformer_lab.widgets._placeholder import placeholder_if_grading
from transformer_lab.widgets._student import Student, compare

__all__ = ["position_kinds_explorer"]

KINDS = ("sinusoidal", "learned (trained GPT)", "learned (at init)")
WIDTH = 128  # the shipped GPT's width, so all three tables have the same shape


def _trained_table(T: int, seed: int) -> Tensor:
    """The first T rows of the shipped tiny GPT's learned position table (random if unavailable)."""
    try:
        from transformer_lab.checkpoints import checkpoint_path

        state = torch.load(checkpoint_path("tiny_gpt"), map_location="cpu", weights_only=False)
        table = next(
            v
            for k, v in state["model"].items()
            if "pos" in k and getattr(v, "dim", lambda: 0)() == 2
        )
        if table.shape[0] >= T and table.shape[1] == WIDTH:
            return table[:T].float()
    except (OSError, KeyError, StopIteration, RuntimeError, ValueError):
        pass
    return torch.randn(T, WIDTH, generator=torch.Generator().manual_seed(seed + 7))


def _cosine(a: Tensor) -> Tensor:
    a = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return a @ a.T  # (T, T)


def _rescaled(table: Tensor) -> Tensor:
    """Scale a table so its rows have the size of unit-variance token vectors (norm sqrt(C))."""
    return table * (math.sqrt(table.shape[1]) / table.norm(dim=-1).mean().clamp_min(1e-12))


def position_kinds_explorer(
    sinusoidal_encoding: Any = None,
    *,
    tokens: str | Sequence[str] | None = "the cat saw the dog and the dog saw the cat",
    seed: int = 0,
) -> Any:
    """Position tables, their similarity, and token similarity after adding or concatenating.

    Args:
        sinusoidal_encoding: optional, your ``sinusoidal_encoding(n_positions, d_model,
            base=10000.0)``; used for the sinusoidal table (drawn against the reference).
        tokens: the sentence (2 to 16 tokens); repeated words show the effect of positions.
        seed: seed of the token embeddings and of the untrained table.
    Returns:
        An Explorer with controls ``kind``, ``combine`` ("add" / "concatenate") and
        ``strength`` (a); ``state()`` has ``table`` (T, C) (rescaled), ``position_similarity``
        (T, T), ``token_similarity`` (T, T) and ``parts`` (content, position, cross: the
        share of each term in sum |z_t . z_s|); with your function also ``yours`` (T, C) or
        None, ``differs``, ``max_diff`` and ``error``. Under grading, a placeholder.
    """
    student = Student(sinusoidal_encoding, "sinusoidal_encoding", "sinusoidal_encoding")
    tokens = check_tokens(tokens, max_len=16)
    if len(tokens) < 2:
        raise ValueError(f"tokens must hold at least 2 tokens, but received {tokens}.")
    if (placeholder := placeholder_if_grading("position_kinds_explorer")) is not None:
        return placeholder

    from transformer_lab.widgets import _common as ui

    T, C = len(tokens), WIDTH
    x = seeded_embeddings(tokens, C, seed)  # (T, C), unit variance: rows of norm ~ sqrt(C)
    reference = reference_encoding(T, C)
    scale = math.sqrt(C) / float(reference.norm(dim=-1).mean())
    tables = {
        KINDS[0]: reference * scale,
        KINDS[1]: _rescaled(_trained_table(T, seed)),
        KINDS[2]: _rescaled(torch.randn(T, C, generator=torch.Generator().manual_seed(seed + 3))),
    }

    fig, (ax_tab, ax_pos, ax_tok, ax_parts) = ui.new_figure(
        4, figsize=(14, 3.6), width_ratios=[1.2, 1, 1, 0.8]
    )
    view = ui.FigureView(fig)
    im_tab = ax_tab.imshow(np.zeros((T, C)), cmap="RdBu_r", vmin=-3, vmax=3, aspect="auto",
                           interpolation="nearest")  # fmt: skip
    overlay = ui.diff_overlay(ax_tab, (T, C), "black")
    ax_tab.set_xlabel("channel")
    ax_tab.set_ylabel("position t")
    tab_title = ax_tab.set_title(" ", fontsize=10)
    im_pos = ax_pos.imshow(np.eye(T), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax_pos.set_title("position similarity cos(p_t, p_s)", fontsize=10)
    ax_pos.set_xlabel("position s")
    im_tok = ax_tok.imshow(np.eye(T), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax_tok.set_xticks(range(T), tokens, rotation=60, fontsize=8)
    ax_tok.set_yticks(range(T), tokens, fontsize=8)
    tok_title = ax_tok.set_title(" ", fontsize=10)
    part_bars = ax_parts.bar(range(3), np.zeros(3), color=[ui.GREY, ui.BLUE, ui.RED])
    ax_parts.set_xticks(range(3), ["x·x", "p·p", "x·p cross"])
    ax_parts.set_ylim(0, 1.05)
    ax_parts.set_title("share of Σ|z_t·z_s|", fontsize=10)
    # The table, its similarity and the titles change with the table kind and the combination
    # only: a cached middle layer, redrawn when those change; the strength moves the rest.
    view.animate(im_tok, list(part_bars))
    view.animate(im_tab, overlay, tab_title, im_pos, tok_title, slow=True)
    shown: list[Any] = [None]

    controls = {
        "kind": ui.widgets.ToggleButtons(
            options=list(KINDS), value=KINDS[0], description="table", style=ui.STYLE
        ),  # fmt: skip
        "combine": ui.widgets.ToggleButtons(
            options=["add", "concatenate"], value="add", description="combine", style=ui.STYLE
        ),  # fmt: skip
        "strength": ui.widgets.FloatSlider(
            value=1.0, min=0.0, max=3.0, step=0.1, description="position strength a", style=ui.STYLE
        ),  # fmt: skip
    }
    your_table: list[Any] = [None, None]  # computed once: (table or None, differs)

    def update() -> tuple[dict[str, Any], str]:
        kind, combine, a = (controls[n].value for n in ("kind", "combine", "strength"))
        table = tables[kind]
        differs, max_diff = np.zeros((T, C), bool), 0.0
        if student and kind == KINDS[0]:
            if your_table[0] is None and student.error is None:
                yours = student.call(T, C, shape=(T, C))
                if yours is not None:
                    your_table[0] = yours.float()
                    your_table[1] = compare(yours, reference)
            if your_table[0] is not None:
                table = your_table[0] * scale
                differs, max_diff = your_table[1]
        p = a * table  # (T, C)
        if combine == "add":
            z = x + p  # (T, C)
            cross = (x @ p.T + p @ x.T).abs().sum()
        else:
            z = torch.cat([x, p], dim=-1)  # (T, 2C)
            cross = torch.zeros(())
        content, positional = (x @ x.T).abs().sum(), (p @ p.T).abs().sum()
        total = float(content + positional + cross)
        parts = np.array([float(content), float(positional), float(cross)]) / total
        if shown[0] != (kind, combine):
            shown[0] = (kind, combine)
            view.invalidate_slow()
        im_tab.set_data(table.numpy())
        ui.set_diff(overlay, differs)
        tab_title.set_text(
            f"{kind} table (T, C={C})" + (" — yours" if kind == KINDS[0] and student else "")
        )
        pos_sim = _cosine(table)
        tok_sim = _cosine(z)
        im_pos.set_data(pos_sim.numpy())
        im_tok.set_data(tok_sim.numpy())
        tok_title.set_text(f"token similarity, {combine}ed (width {z.shape[1]})")
        ui.set_bar_heights(part_bars, parts)
        repeats = [i for i, t in enumerate(tokens) if tokens.count(t) > 1]
        pairs = [(i, j) for i in repeats for j in repeats if i < j and tokens[i] == tokens[j]]
        same = min((float(tok_sim[i, j]) for i, j in pairs), default=float("nan"))
        readout = (
            f"{kind}, {combine}ed with a = {a:.1f}: cross terms are {parts[2]:.0%} of Σ|z_t·z_s|; "
            f"the least similar pair of repeated words has cosine {same:.2f} "
            f"(1.00 without positions)."
        )
        if student:
            readout += student.status(int(differs.sum()), max_diff, mark="dark")
        state = {
            "kind": kind,
            "combine": combine,
            "strength": a,
            "table": table.numpy(),
            "position_similarity": pos_sim.numpy(),
            "token_similarity": tok_sim.numpy(),
            "parts": parts,
        }
        if student:
            state.update(
                yours=None if your_table[0] is None else your_table[0].numpy(),
                differs=differs,
                max_diff=max_diff,
                error=student.error,
            )
        return state, readout

    return ui.Explorer(
        "Positions: sinusoidal or learned, added or concatenated", controls, view, update,
        footer=student.footer(),
    )  # fmt: skip
