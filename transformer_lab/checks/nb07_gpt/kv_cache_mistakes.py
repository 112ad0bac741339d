"""The known mistakes of notebook 07's greedy decoding with a KV cache, as decoders: the package's
GPT decoded with the cache and one mistake (positions restarted at 0 or one too far, the prompt
without its causal mask, a fresh cache every step, the final norm skipped, ...).
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.heads import KVCache

__all__ = []


def _decode_variant(
    model, idx, n, offset="right", prompt_mask=True, logits_at=-1, fresh=False, final_norm=True
) -> Tensor:
    """Greedy decoding with the cache and one known mistake."""
    caches = [KVCache() for _ in model.blocks]
    out = idx
    table = model.pos_emb.weight  # (max_len, C)
    for step in range(n):
        if step == 0:
            tokens, start = idx, 0
        else:
            tokens = out[:, -1:]  # (B, 1)
            start = {"right": out.shape[1] - 1, "zero": 0, "plus1": out.shape[1]}[offset]
            if fresh:
                caches = [KVCache() for _ in model.blocks]
        T = tokens.shape[1]
        x = model.tok_emb(tokens) + table[start : start + T]  # (B, T, C)
        if x.shape[1] != T:
            raise IndexError("past the position table")
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=prompt_mask or step > 0, cache=cache)
        h = x[:, logits_at if step == 0 else -1]  # (B, C)
        logits = model.lm_head(model.norm_f(h) if final_norm else h)  # (B, V)
        out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=1)
    return out


_DECODE_MISTAKES = [
    (
        dict(offset="zero"),
        "the new tokens' positions are not offset: the token at index L of the sequence sits "
        "at position L, so add row L of the table, pos_emb.weight[L : L + 1], not position 0",
    ),
    (
        dict(offset="plus1"),
        "the positions are off by one: the newest token, at index L - 1 of a sequence of "
        "length L, sits at position L - 1 (the prompt fills 0 .. T0 - 1)",
    ),
    (
        dict(prompt_mask=False),
        "the prompt runs without the causal mask: the first pass over the T0 prompt tokens "
        "needs it (is_causal=True), or early prompt tokens see later ones",
    ),
    (
        dict(logits_at=0),
        "after the prompt, the next token comes from the LAST position's logits (x[:, -1]), "
        "not the first",
    ),
    (
        dict(fresh=True),
        "a new, empty cache each step forgets the context: make one KVCache per block once, "
        "before the loop, and keep passing the same ones",
    ),
    (
        dict(final_norm=False),
        "the final layer norm is missing: logits = lm_head(norm_f(x[:, -1]))",
    ),
]
