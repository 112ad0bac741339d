"""Probes of a wrong GPT assembled from blocks (notebook 07): a block built with other settings
than the config's, the wrong layer-norm eps, a position that sees the future, a part whose
removal changes nothing. The check is in gpt_model.py.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from transformer_lab.checks.engine.core import Case, Runner
from transformer_lab.checks.engine.guards import TRUSTED

__all__ = []


def _block_field_mismatch(mine: nn.Module, theirs: nn.Module, config) -> str | None:
    """Which config field a block ignores, read from its parameters: d_ff or bias."""
    ours, ref = dict(mine.named_parameters()), dict(theirs.named_parameters())
    d_ff = config.d_ff or 4 * config.d_model
    biases = [n for n in ours if n.endswith("bias")]
    if not config.bias and biases and set(ours) - set(ref) == set(biases):
        return (
            f"it has biases ({biases[0]}, ...) although config.bias is False: pass "
            "bias=config.bias to Block."
        )
    if config.bias and not biases and set(ref) - set(ours):
        return "it has no biases although config.bias is True: pass bias=config.bias to Block."
    if set(ours) == set(ref):
        widths = {p.shape for n, p in ours.items() if n.endswith("weight") and p.dim() == 2}
        hidden = {w for shape in widths for w in shape if w != config.d_model}
        if hidden and d_ff not in hidden:
            return (
                f"its MLP is {sorted(hidden)[0]} wide, but config.d_ff is "
                + (f"None (so 4 * d_model = {d_ff})" if config.d_ff is None else f"{d_ff}")
                + ": pass d_ff=config.d_ff to Block."
            )
    return None


def _check_eps(run: Runner, case: Case, model, blocks, eps: float) -> None:
    """The norms' eps must be config.eps (a wrong eps changes the logits by less than the
    tolerance, so it is read off the modules that store it)."""
    __tracebackhide__ = True
    norms = [("norm_f", model.norm_f)] + [
        (f"blocks[{i}].{name}", getattr(b, name, None))
        for i, b in enumerate(blocks)
        for name in ("self_attn_norm", "mlp_norm")
    ]
    for where, norm in norms:
        got = getattr(norm, "eps", None)
        if isinstance(got, float) and abs(got - eps) > 1e-12:
            run.fail(
                f"{where} uses eps={got:g}, but config.eps is {eps:g}: pass eps=config.eps.",
                case,
            )


def _leak_probe(forward: Runner, idx, out, V: int) -> str | None:
    """Change token j and rerun: if an output row t < j moves, the future leaks into it."""
    T = idx.shape[1]
    for j in range(1, T):
        changed = idx.clone()
        changed[:, j] = (idx[:, j] + 1) % V
        with torch.no_grad():
            value, error, calls = forward.attempt((changed,), {})
        if error is not None or calls or not TRUSTED.is_tensor(value) or value.shape != out.shape:
            return None
        if not TRUSTED.allclose(value[:, :j], out[:, :j], atol=1e-5, rtol=1e-4):
            return (
                f"the future leaks: changing token {j} changes the logits at earlier positions "
                f"(< {j}). Position t may only see tokens 0..t: pass is_causal=True to every "
                "block (or a lower-triangular mask, True = may attend)."
            )
    return None


def _ablation_probe(forward: Runner, model, ref, idx) -> tuple[str, bool] | None:
    """Localise the difference by switching parts off in both models: with the position tables
    zeroed, agreement means the positions alone are used wrongly; with every block made an
    identity (the projections that write into the residual stream zeroed), agreement means the
    difference lies in how the blocks are run."""
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    twin = copy.deepcopy(ref)
    try:
        with torch.no_grad():

            def agree() -> bool | None:
                value, error, calls = forward.attempt((idx,), {})
                want = twin(idx).logits
                if error is not None or calls or not TRUSTED.is_tensor(value):
                    return None
                if value.shape != want.shape:
                    return None
                return bool(TRUSTED.allclose(value, want, atol=1e-5, rtol=1e-4))

            table, twin_table = model.pos_emb.weight.detach().clone(), twin.pos_emb.weight.clone()
            model.pos_emb.weight.zero_()
            twin.pos_emb.weight.zero_()
            if agree():
                return (
                    "the position embeddings are used wrongly: with the position table zeroed "
                    "your logits match the reference. Add the rows of positions 0..T-1, "
                    "pos_emb(torch.arange(T)), to the token embeddings once, before the blocks.",
                    True,
                )
            model.pos_emb.weight.copy_(table)
            twin.pos_emb.weight.copy_(twin_table)
            for block in [*model.blocks, *twin.blocks]:
                for proj in (block.self_attn.out_proj, block.mlp.fc2):
                    proj.weight.zero_()
                    if proj.bias is not None:
                        proj.bias.zero_()
            if agree():
                return (
                    "with every block made an identity (attention and MLP outputs zeroed) your "
                    "logits match the reference: look at how the blocks are run (mask, order, "
                    "arguments, chaining: x, _ = block(x, is_causal=True), once per block).",
                    False,
                )
    except Exception:  # noqa: BLE001 - a probe that cannot run proves nothing
        return None
    finally:
        model.load_state_dict(saved)
    return None
