"""Notebook 07, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text (next-token batches, the causal LM loss, top-k/top-p filtering, greedy generation with a KV
cache), written without looking at what the checks detect. ``python -m tests.holdout report 07w``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector
from transformer_lab.heads import KVCache

MISTAKES: list[Mistake] = []
# Before the fixes of issue 39: 17/1/0/0 named/generic/misleading/passed; after: 17 of 18 named, 1 generic.
# With the 5 entries of h17 (top-p over dim 0, greedy over the whole batch, ...): 19/3/1/0 of
# 23 before its evidence, 23 of 23 named after.
NAMED_AT_LEAST = 1.0
wrong = collector(MISTAKES, "07")
NEG_INF = float("-inf")


@wrong("next_token_batch", "shift|y|x[:, t + 1]|next")
def batch_y_two_ahead(data, T, B, generator):
    starts = torch.randint(len(data) - T - 1, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts])
    y = torch.stack([data[s + 2 : s + T + 2] for s in starts])
    return x, y


@wrong("next_token_batch", "shape|(B, T)|transpos")
def batch_time_major(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts], dim=1)
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts], dim=1)
    return x, y


@wrong("next_token_batch", "generator|random|seed")
def batch_manual_seed(data, T, B, generator):
    g = torch.Generator().manual_seed(0)
    starts = torch.randint(len(data) - T, (B,), generator=g)
    x = torch.stack([data[s : s + T] for s in starts])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts])
    return x, y


@wrong("next_token_batch", "same|one start|start|row")
def batch_same_row(data, T, B, generator):
    s = int(torch.randint(len(data) - T, (1,), generator=generator))
    x = data[s : s + T].repeat(B, 1)
    y = data[s + 1 : s + T + 1].repeat(B, 1)
    return x, y


@wrong("causal_lm_loss", "shift|last|first|unshifted|x[:, t + 1]")
def loss_logits_first_dropped(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, -100)
    return F.cross_entropy(logits[:, 1:].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


@wrong("causal_lm_loss", "ignore_index|-100|0|pad|mask")
def loss_ignore_zero(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, 0)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


@wrong("causal_lm_loss", "mask|attention_mask|:-1|input")
def loss_mask_unshifted(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, :-1] == 0, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


@wrong("causal_lm_loss", "mean|average|sequence|token")
def loss_mean_of_sequences(logits, ids, attention_mask=None):
    logp = logits[:, :-1].log_softmax(-1)
    nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)
    keep = torch.ones_like(nll) if attention_mask is None else attention_mask[:, 1:].float()
    return ((nll * keep).sum(1) / keep.sum(1).clamp(min=1)).mean()


def _top_k(z, k):
    if not k:
        return z
    kth = torch.topk(z, min(k, z.shape[-1]), dim=-1).values[..., -1:]
    return z.masked_fill(z < kth, NEG_INF)


def _top_p(z, p, crossing=True):
    if p is None or p >= 1:
        return z
    s, order = torch.sort(z, -1, descending=True)
    pr = torch.softmax(s, -1)
    c = pr.cumsum(-1)
    remove = (c - pr) >= p if crossing else c > p
    return z.masked_fill(remove.scatter(-1, order, remove), NEG_INF)


@wrong("filter_logits", "temperature|multipl")
def filter_temperature_multiplied(logits, temperature=1.0, top_k=None, top_p=None):
    return _top_p(_top_k(logits * temperature, top_k), top_p)


@wrong("filter_logits", "temperature|after|order")
def filter_temperature_last(logits, temperature=1.0, top_k=None, top_p=None):
    return _top_p(_top_k(logits, top_k), top_p) / temperature


@wrong("filter_logits", "top_k|k + 1|one too many|k")
def filter_top_k_plus_one(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = torch.topk(z, min(top_k + 1, z.shape[-1]), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, NEG_INF)
    return _top_p(z, top_p)


@wrong("filter_logits", "crossing|top_p|cross|threshold")
def filter_top_p_excludes_crossing(logits, temperature=1.0, top_k=None, top_p=None):
    return _top_p(_top_k(logits / temperature, top_k), top_p, crossing=False)


@wrong("filter_logits", "0|-inf|zero")
def filter_zeros(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = torch.topk(z, min(top_k, z.shape[-1]), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, 0.0)
    return _top_p(z, top_p)


@wrong("filter_logits", "probab|softmax|logits")
def filter_returns_probs(logits, temperature=1.0, top_k=None, top_p=None):
    return torch.softmax(_top_p(_top_k(logits / temperature, top_k), top_p), -1)


@wrong("filter_logits", "top_k|dim|axis|row")
def filter_top_k_global(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = torch.topk(z.flatten(), min(top_k, z.numel())).values[-1]
        z = z.masked_fill(z < kth, NEG_INF)
    return _top_p(z, top_p)


@wrong("generate_greedy", "sample|argmax|greedy|random")
def gen_samples(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    g = torch.Generator().manual_seed(0)
    for _ in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        p = torch.softmax(model.lm_head(model.norm_f(x[:, -1])), -1)
        nxt = torch.multinomial(p, 1, generator=g)
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out


@wrong("generate_greedy", "offset|position")
def gen_offset_by_new_count(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for step in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        nxt = model.lm_head(model.norm_f(x[:, -1])).argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=step + 1)
    return out


@wrong("generate_greedy", "softmax|argmax|dim|batch")
def gen_argmax_all(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for _ in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        logits = model.lm_head(model.norm_f(x[:, -1]))
        nxt = logits.argmax().reshape(1, 1).expand(idx.shape[0], 1) % logits.shape[-1]
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out


# Added with issue 39's last generic classes (h17): top-p normalised along the batch, greedy
# tokens chosen once for the whole batch, and neighbours of both.
def _top_p_axis(z, p, softmax_first):
    if p is None or p >= 1:
        return z
    if softmax_first:  # probabilities over dim 0, then sorted per row
        s, order = torch.sort(torch.softmax(z, 0), -1, descending=True)
        pr = s
    else:  # sorted per row, then the softmax over dim 0
        s, order = torch.sort(z, -1, descending=True)
        pr = torch.softmax(s, 0)
    c = pr.cumsum(-1)
    remove = (c - pr) >= p
    return z.masked_fill(remove.scatter(-1, order, remove), NEG_INF)


@wrong("filter_logits", "dim 0|softmax over dim")
def filter_top_p_sorted_softmax_dim0(logits, temperature=1.0, top_k=None, top_p=None):
    return _top_p_axis(_top_k(logits / temperature, top_k), top_p, softmax_first=False)


@wrong("filter_logits", "dim 0|softmax over dim")
def filter_top_p_softmax_dim0_then_sorted(logits, temperature=1.0, top_k=None, top_p=None):
    return _top_p_axis(_top_k(logits / temperature, top_k), top_p, softmax_first=True)


def _greedy(model, idx, max_new_tokens, pick):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for _ in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        nxt = pick(model.lm_head(model.norm_f(x[:, -1])))  # (B, 1)
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out


@wrong("generate_greedy", "whole batch|flattened|per sequence")
def gen_argmax_unravelled(model, idx, max_new_tokens):
    def pick(z):
        token = torch.argmax(z) % z.shape[-1]  # the flat index's column
        return token.repeat(z.shape[0], 1)

    return _greedy(model, idx, max_new_tokens, pick)


@wrong("generate_greedy", "own|each row|per sequence|sequence 0")
def gen_row0_for_all(model, idx, max_new_tokens):
    return _greedy(
        model, idx, max_new_tokens, lambda z: z[0].argmax().reshape(1, 1).expand(z.shape[0], 1)
    )


@wrong("generate_greedy", "hidden|logits|lm_head|head")
def gen_argmax_of_hidden(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for _ in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        nxt = model.norm_f(x[:, -1]).argmax(-1, keepdim=True) % model.tok_emb.num_embeddings
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out
