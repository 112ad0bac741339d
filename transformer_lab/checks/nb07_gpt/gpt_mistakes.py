"""The usual mistakes of "GPT from the package's blocks" (notebook 7), as variants of the
reference GPT's forward pass: what the logits look like when one thing is wrong (positions, the
mask, the final norm, pre/post-norm, activation, eps, scaling, the blocks' chaining, the head).

Used by :mod:`~transformer_lab.checks.nb07_gpt.gpt_model`, which compares a student's logits with each.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor, nn

from transformer_lab.blocks import ACTIVATIONS, Block
from transformer_lab.checks.engine.core import Mistake
from transformer_lab.masks import causal_mask

__all__ = ["gpt_mistakes"]


def _block_like(ref_block: nn.Module, **changes) -> Block:
    """A Block with the reference block's weights and one constructor argument changed."""
    attn = ref_block.self_attn
    args = dict(
        d_model=attn.d_model,
        n_heads=attn.n_heads,
        d_ff=ref_block.mlp.fc1.out_features,
        activation=changes.pop("activation_", None) or ref_block._tlab_activation,
        norm_first=True,
        bias=ref_block.mlp.fc1.bias is not None,
        eps=ref_block.mlp_norm.eps,
    )
    args.update(changes)
    block = Block(**args).eval()
    block.load_state_dict(ref_block.state_dict())
    return block


def _gpt_variant(
    ref,
    idx,
    positions="arange",
    mask="causal",
    final_norm=True,
    blocks=None,
    scale=False,
    norm_eps=None,
    chain="all",
    head="logits",
    norm_input=False,
) -> Tensor:
    """The reference GPT's forward pass with one known mistake."""
    T, C = idx.shape[1], ref.config.d_model
    x = ref.tok_emb(idx) * (math.sqrt(C) if scale else 1.0)  # (B, T, C)
    table = ref.pos_emb.weight  # (max_len, C)
    if positions == "arange":
        x = x + table[:T]
    elif positions == "from1":
        x = x + table[1 : T + 1]
    elif positions == "ids":
        x = x + table[idx]
    masks = {
        "causal": causal_mask(T),
        "none": None,
        "strict": torch.ones(T, T, dtype=torch.bool).tril(-1),
        "upper": torch.ones(T, T, dtype=torch.bool).triu(),
    }
    if norm_input:  # norm_f also applied to the embeddings, before the first block
        x = nn.functional.layer_norm(x, (C,), ref.norm_f.weight, ref.norm_f.bias, ref.config.eps)
    blocks = list(blocks if blocks is not None else ref.blocks)
    if chain == "none":  # the blocks' outputs never reach x
        blocks = []
    elif chain == "first":
        blocks = blocks[:1]
    h = x
    for block in blocks:
        out, _ = block(x, mask=masks[mask])
        if chain == "each_from_embedding":  # every block reads the embeddings; the last one wins
            h = out
        elif chain == "double_residual":  # x + block(x): the block's own residual added again
            x = h = x + out
        else:
            x = h = out
        if chain == "norm_each":  # norm_f after every block
            x = h = nn.functional.layer_norm(
                x, (C,), ref.norm_f.weight, ref.norm_f.bias, ref.config.eps
            )
    x = h
    if final_norm:
        x = nn.functional.layer_norm(
            x, (C,), ref.norm_f.weight, ref.norm_f.bias, norm_eps or ref.config.eps
        )
    logits = x @ ref.tok_emb.weight.T if head == "embedding" else ref.lm_head(x)
    if head == "probs":
        return torch.softmax(logits, dim=-1)
    if head == "log_probs":
        return torch.log_softmax(logits, dim=-1)
    return logits


def _block_orders(ref, idx) -> list[Mistake]:
    """The blocks run in another order (reversed, or any permutation of up to 4)."""
    n = len(ref.blocks)
    if n < 2 or n > 4:
        return []
    return [
        Mistake(
            "the blocks run in another order than self.blocks holds them: loop over "
            "self.blocks in order (blocks[0] first), each taking the previous one's output",
            lambda order=order: _gpt_variant(ref, idx, blocks=[ref.blocks[i] for i in order]),
        )
        for order in itertools.permutations(range(n))
        if list(order) != list(range(n))
    ]


def gpt_mistakes(ref, idx, activation: str) -> list[Mistake]:
    others = [a for a in ACTIVATIONS if a != activation]
    eps = ref.config.eps
    return [
        *(
            Mistake(
                f"the blocks use the activation '{other}': pass activation=config.activation "
                f"('{activation}')",
                lambda other=other: _gpt_variant(
                    ref, idx, blocks=[_block_like(b, activation_=other) for b in ref.blocks]
                ),
            )
            for other in others
        ),
        Mistake(
            "the mask is upside down: True above the diagonal lets each token attend to the "
            "FUTURE (keys s >= t); the causal mask is lower-triangular, True where s <= t "
            "(torch.ones(T, T).tril(), or is_causal=True)",
            lambda: _gpt_variant(ref, idx, mask="upper"),
        ),
        Mistake(
            "norm_f is applied after every block: the pre-norm blocks normalise their own "
            "inputs; apply norm_f once, after the last block, before the head",
            lambda: _gpt_variant(ref, idx, chain="norm_each", final_norm=False),
        ),
        Mistake(
            "norm_f is applied after every block: the pre-norm blocks normalise their own "
            "inputs; apply norm_f once, after the last block, before the head",
            lambda: _gpt_variant(ref, idx, chain="norm_each"),
        ),
        Mistake(
            "the logits are computed with tok_emb.weight although config.tie_weights is False: "
            "use the head, self.lm_head(norm_f(x)) (it has its own matrix when untied)",
            lambda: (
                _gpt_variant(ref, idx, head="embedding") if not ref.config.tie_weights else None
            ),
        ),
        *_block_orders(ref, idx),
        *(
            Mistake(
                f"the blocks have {h} heads, but config.n_heads is {ref.config.n_heads}: pass "
                "n_heads=config.n_heads to Block (the weights' shapes do not show the heads)",
                lambda h=h: _gpt_variant(
                    ref, idx, blocks=[_block_like(b, n_heads=h) for b in ref.blocks]
                ),
            )
            for h in (1, 2, 3, 4, 6, 8, 12, 16)
            if h != ref.config.n_heads and ref.config.d_model % h == 0
        ),
        Mistake(
            "the position embeddings are missing: x = tok_emb(idx) + pos_emb(positions 0..T-1)",
            lambda: _gpt_variant(ref, idx, positions="none"),
        ),
        Mistake(
            "the positions start at 1: the first token sits at position 0 (torch.arange(T))",
            lambda: _gpt_variant(ref, idx, positions="from1"),
        ),
        Mistake(
            "the position table is indexed with the token ids: index it with the positions "
            "torch.arange(T)",
            lambda: _gpt_variant(ref, idx, positions="ids"),
        ),
        Mistake(
            "no causal mask: every position sees the future; pass the causal mask (or "
            "is_causal=True) to every block",
            lambda: _gpt_variant(ref, idx, mask="none"),
        ),
        Mistake(
            "the mask excludes the diagonal ('r_ij = -inf for j >= i'): in the course's "
            "convention each token attends to itself too (s <= t)",
            lambda: _gpt_variant(ref, idx, mask="strict"),
        ),
        *(
            Mistake(
                "norm_f is applied to the embeddings, before the first block: the pre-norm "
                "blocks normalise their own inputs; apply norm_f once, after the last block, "
                "before the head",
                lambda final=final: _gpt_variant(ref, idx, norm_input=True, final_norm=final),
            )
            for final in (True, False)
        ),
        Mistake(
            "the residual is added twice: Block already returns x + attention + MLP, so "
            "x = x + block(x)[0] counts x again; write x, _ = block(x, is_causal=True)",
            lambda: _gpt_variant(ref, idx, chain="double_residual"),
        ),
        Mistake(
            "the final layer norm is missing: GPT-2 applies norm_f to the last block's output "
            "before the head",
            lambda: _gpt_variant(ref, idx, final_norm=False),
        ),
        Mistake(
            "the blocks are post-norm: GPT-2 is pre-norm, Block(..., norm_first=True)",
            lambda: _gpt_variant(
                ref, idx, blocks=[_block_like(b, norm_first=False) for b in ref.blocks]
            ),
        ),
        Mistake(
            "the blocks use the default eps: pass eps=config.eps",
            lambda: _gpt_variant(ref, idx, blocks=[_block_like(b, eps=1e-5) for b in ref.blocks]),
        ),
        Mistake(
            "the final norm uses the default eps: pass eps=config.eps",
            lambda: _gpt_variant(ref, idx, norm_eps=1e-5 if eps != 1e-5 else None),
        ),
        Mistake(
            "the embeddings are multiplied by sqrt(C), as in the original Transformer; GPT-2 "
            "does not scale them",
            lambda: _gpt_variant(ref, idx, scale=True),
        ),
        Mistake(
            "forward returns probabilities (a softmax over the vocabulary): return the logits, "
            "lm_head(norm_f(x)); the loss and the sampler apply the softmax themselves",
            lambda: _gpt_variant(ref, idx, head="probs"),
        ),
        Mistake(
            "forward returns log-probabilities (log_softmax): return the raw logits, "
            "lm_head(norm_f(x))",
            lambda: _gpt_variant(ref, idx, head="log_probs"),
        ),
        Mistake(
            "the blocks' outputs are never used: the logits come straight from the embeddings. "
            "Reassign x in the loop, x, _ = block(x, is_causal=True)",
            lambda: _gpt_variant(ref, idx, chain="none"),
        ),
        Mistake(
            "only the first block runs: loop over every block in self.blocks, each taking the "
            "previous one's output",
            lambda: _gpt_variant(ref, idx, chain="first") if len(ref.blocks) > 1 else None,
        ),
        Mistake(
            "each block reads the embeddings instead of the previous block's output, so only "
            "the last block counts: chain them, x, _ = block(x, is_causal=True)",
            lambda: (
                _gpt_variant(ref, idx, chain="each_from_embedding") if len(ref.blocks) > 1 else None
            ),
        ),
    ]
