"""Notebook 07's mistake catalogue (the checks are tuned on it): correct implementations in
several styles (``GOOD``) and realistic wrong ones with the words their check's message must
contain (``CATALOGUE``), as ``CORRECT`` and ``MISTAKES`` in the holdout's format.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tests.holdout._harness import from_table
from transformer_lab import checks
from transformer_lab.blocks import Block, LayerNorm
from transformer_lab.heads import KVCache
from transformer_lab.masks import causal_mask

NEG_INF = float("-inf")


# =============================================================================================
# Exercise 1: next-token batches
def good_batch(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts])
    return x, y


def good_batch_unfold(data, T, B, generator):
    windows = data.unfold(0, T + 1, 1)  # (N - T, T + 1)
    rows = windows[torch.randint(windows.shape[0], (B,), generator=generator)]
    return rows[:, :-1], rows[:, 1:]


def good_batch_index(data, T, B, generator):
    starts = torch.randint(0, len(data) - T, (B,), generator=generator)
    offsets = torch.arange(T + 1)
    window = data[starts[:, None] + offsets]  # (B, T + 1)
    return window[:, :T].clone(), window[:, 1:].clone()


def bug_batch_unshifted(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts])
    return x, x.clone()


def bug_batch_wrong_way(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([data[s + 1 : s + T + 1] for s in starts])
    y = torch.stack([data[s : s + T] for s in starts])
    return x, y


def bug_batch_roll(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts])
    return x, torch.roll(x, -1, dims=1)


def bug_batch_start_too_far(data, T, B, generator):
    starts = torch.randint(len(data) - T + 1, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts])
    return x, y


def bug_batch_last_window_never(data, T, B, generator):
    starts = torch.randint(len(data) - T - 1, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts])
    return x, y


def bug_batch_global_rng(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,))
    x = torch.stack([data[s : s + T] for s in starts])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts])
    return x, y


def bug_batch_two_draws(data, T, B, generator):
    xs = torch.randint(len(data) - T, (B,), generator=generator)
    ys = torch.randint(len(data) - T, (B,), generator=generator)
    return torch.stack([data[s : s + T] for s in xs]), torch.stack(
        [data[s + 1 : s + T + 1] for s in ys]
    )


def bug_batch_float(data, T, B, generator):
    x, y = good_batch(data, T, B, generator)
    return x.float(), y.float()


def bug_batch_window(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    w = torch.stack([data[s : s + T + 1] for s in starts])
    return w, w[:, 1:]


def bug_batch_one_start(data, T, B, generator):
    s = torch.randint(len(data) - T, (1,), generator=generator).item()
    x = data[s : s + T].repeat(B, 1)
    return x, data[s + 1 : s + T + 1].repeat(B, 1)


def bug_batch_transposed(data, T, B, generator):
    x, y = good_batch(data, T, B, generator)
    return x.T, y.T


def bug_batch_last_target(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts])
    y = torch.cat([x[:, 1:], x[:, -1:]], dim=1)  # repeats the last input as its target
    return x, y


# =============================================================================================
# Exercise 2: the causal LM loss
def good_loss(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


def good_loss_by_hand(logits, ids, attention_mask=None):
    logp = logits[:, :-1].log_softmax(dim=-1)  # (B, T-1, V)
    nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    keep = (
        torch.ones_like(nll, dtype=torch.bool)
        if attention_mask is None
        else attention_mask[:, 1:].bool()
    )
    return nll[keep].mean()


def good_loss_weighted(logits, ids, attention_mask=None):
    mask = torch.ones_like(ids) if attention_mask is None else attention_mask
    w = mask[:, 1:].float()
    ce = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")  # (B, T-1)
    return (ce * w).sum() / w.sum()


def bug_loss_unshifted(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids if attention_mask is None else ids.masked_fill(attention_mask == 0, -100)
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-100)


def bug_loss_wrong_way(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids[:, :-1]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, :-1] == 0, -100)
    return F.cross_entropy(logits[:, 1:].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


def bug_loss_roll(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = torch.roll(ids, -1, dims=1)
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def bug_loss_pads_counted(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


def bug_loss_mask_at_inputs(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, :-1] == 0, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


def bug_loss_per_sequence(logits, ids, attention_mask=None):
    mask = torch.ones_like(ids) if attention_mask is None else attention_mask
    ce = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    w = mask[:, 1:].float()
    return ((ce * w).sum(1) / w.sum(1)).mean()


def bug_loss_sum(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, -100)
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100, reduction="sum"
    )


def bug_loss_item(logits, ids, attention_mask=None):
    return good_loss(logits, ids, attention_mask).item()


def bug_loss_log_softmax_dim1(logits, ids, attention_mask=None):
    logp = torch.log_softmax(logits[:, :-1], dim=1)
    nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)
    keep = (
        torch.ones_like(nll, dtype=torch.bool)
        if attention_mask is None
        else attention_mask[:, 1:] == 1
    )
    return nll[keep].mean()


def bug_loss_double_softmax(logits, ids, attention_mask=None):
    return good_loss(torch.softmax(logits, dim=-1), ids, attention_mask)


def bug_loss_probability(logits, ids, attention_mask=None):
    p = torch.softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    keep = (
        torch.ones_like(p, dtype=torch.bool)
        if attention_mask is None
        else attention_mask[:, 1:] == 1
    )
    return -p[keep].mean()


def bug_loss_unflattened(logits, ids, attention_mask=None):
    return F.cross_entropy(logits[:, :-1], ids[:, 1:])


def bug_loss_mask_not_none_safe(logits, ids, attention_mask=None):
    targets = ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, -100)
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


def bug_loss_detached(logits, ids, attention_mask=None):
    return torch.tensor(good_loss(logits, ids, attention_mask).item())


def bug_loss_keepdim(logits, ids, attention_mask=None):
    return good_loss(logits, ids, attention_mask).reshape(1)


def bug_loss_flatten_then_shift(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids.reshape(-1)[1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask.reshape(-1)[1:] == 0, -100)
    return F.cross_entropy(logits.reshape(-1, V)[:-1], targets, ignore_index=-100)


def bug_loss_zeroed_pads_averaged(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="none")
    mask = torch.ones_like(ids) if attention_mask is None else attention_mask
    return (ce * mask[:, 1:].reshape(-1)).mean()


def bug_generate_argmax_dim0(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for _ in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        nxt = model.lm_head(model.norm_f(x[:, -1])).argmax(0, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out


# =============================================================================================
# Exercise 3: GPT from the package's blocks
class GoodGPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.blocks = nn.ModuleList(
            Block(c.d_model, c.n_heads, c.d_ff, activation=c.activation, bias=c.bias, eps=c.eps)
            for _ in range(c.n_layers)
        )
        self.norm_f = LayerNorm(c.d_model, c.eps, c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))
        for block in self.blocks:
            x, _ = block(x, mask=causal_mask(T))
        return self.lm_head(self.norm_f(x))


class GoodGPTTorchStyle(nn.Module):
    """nn.LayerNorm, is_causal=True, a positions table from the package, the head as a matmul."""

    def __init__(self, config):
        super().__init__()
        from transformer_lab.positional import LearnedPositionalEmbedding

        c = self.config = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = LearnedPositionalEmbedding(c.max_len, c.d_model)
        blocks = [
            Block(c.d_model, c.n_heads, c.d_ff, 0.0, c.activation, True, False, c.bias, c.eps)
            for _ in range(c.n_layers)
        ]
        self.blocks = nn.ModuleList(blocks)
        self.norm_f = nn.LayerNorm(c.d_model, eps=c.eps, bias=c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb(idx.shape[1])
        for block in self.blocks:
            x = block(x, is_causal=True)[0]
        return self.norm_f(x) @ self.lm_head.weight.T


def _variant_gpt(**flags):
    """A GoodGPT with one student mistake switched on (each a line a student really writes)."""

    class Buggy(GoodGPT):
        def __init__(self, config):
            c = config
            if flags.get("post_norm") or flags.get("activation") or flags.get("eps"):
                super().__init__(config)
                self.blocks = nn.ModuleList(
                    Block(
                        c.d_model,
                        c.n_heads,
                        c.d_ff,
                        activation="gelu" if flags.get("activation") else c.activation,
                        norm_first=not flags.get("post_norm"),
                        bias=c.bias,
                        eps=c.eps if not flags.get("eps") else 1e-5,
                    )
                    for _ in range(c.n_layers)
                )
                return
            super().__init__(config)
            if flags.get("untied"):
                self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
            if flags.get("copied_tie"):
                self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
                with torch.no_grad():
                    self.lm_head.weight.copy_(self.tok_emb.weight)
            if flags.get("head_bias"):
                self.lm_head = nn.Linear(c.d_model, c.vocab_size)
                if c.tie_weights:
                    self.lm_head.weight = self.tok_emb.weight
            if flags.get("pos_vocab"):
                self.pos_emb = nn.Embedding(c.vocab_size, c.d_model)
            if flags.get("one_block"):
                self.blocks = nn.ModuleList([self.blocks[0]])
            if flags.get("no_bias_blocks"):
                self.blocks = nn.ModuleList(
                    Block(
                        c.d_model,
                        c.n_heads,
                        c.d_ff,
                        activation=c.activation,
                        bias=not c.bias,
                        eps=c.eps,
                    )
                    for _ in range(c.n_layers)
                )

        def forward(self, idx):
            T = idx.shape[1]
            x = self.tok_emb(idx)
            if flags.get("scale"):
                x = x * math.sqrt(x.shape[-1])
            if flags.get("positions_from_ids"):
                x = x + self.pos_emb(idx)
            elif flags.get("positions_from_1"):
                x = x + self.pos_emb(torch.arange(1, T + 1))
            elif not flags.get("no_positions"):
                x = x + self.pos_emb(torch.arange(T))
            mask = causal_mask(T)
            if flags.get("no_mask"):
                mask = None
            if flags.get("strict_mask"):
                mask = torch.ones(T, T, dtype=torch.bool).tril(-1)
            for block in self.blocks:
                if flags.get("tuple"):
                    x = block(x, mask=mask)
                else:
                    x, _ = block(x, mask=mask)
            if not flags.get("no_final_norm"):
                x = self.norm_f(x)
            out = self.lm_head(x)
            if flags.get("return_tuple"):
                return out, None
            return out

    Buggy.__name__ = "bug_gpt_" + "_".join(flags)
    return Buggy


# =============================================================================================
# Exercise 4: temperature, top-k, top-p
def good_filter(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = torch.topk(z, min(top_k, z.shape[-1]), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, NEG_INF)
    if top_p is not None and top_p < 1:
        s, order = torch.sort(z, -1, descending=True)
        p = torch.softmax(s, -1)
        remove = (p.cumsum(-1) - p) >= top_p
        z = z.masked_fill(remove.scatter(-1, order, remove), NEG_INF)
    return z


def good_filter_hf_style(logits, temperature=1.0, top_k=None, top_p=None):
    """Hugging Face's formulation: ascending sort, remove while the tail mass <= 1 - p."""
    scores = logits / temperature
    if top_k is not None and top_k > 0:
        k = min(top_k, scores.size(-1))
        scores = scores.masked_fill(scores < torch.topk(scores, k)[0][..., -1, None], NEG_INF)
    if top_p is not None and top_p < 1.0:
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cumulative <= (1 - top_p)
        remove_sorted[..., -1:] = False
        remove = remove_sorted.scatter(-1, sorted_indices, remove_sorted)
        scores = scores.masked_fill(remove, NEG_INF)
    return scores


def good_filter_log_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """Returns log-probabilities of the filtered distribution (logits up to a constant)."""
    return torch.log_softmax(good_filter(logits, temperature, top_k, top_p), dim=-1)


def _filter_bug(top_k_fn=None, top_p_fn=None, temp="divide", order="kp", probs=False, fill=NEG_INF):
    def top_k_default(z, k):
        if not k:
            return z
        kth = torch.topk(z, min(k, z.shape[-1]), dim=-1).values[..., -1:]
        return z.masked_fill(z < kth, fill)

    def top_p_default(z, p):
        if p is None or p >= 1:
            return z
        s, order_ = torch.sort(z, -1, descending=True)
        pr = torch.softmax(s, -1)
        remove = (pr.cumsum(-1) - pr) >= p
        return z.masked_fill(remove.scatter(-1, order_, remove), fill)

    tk, tp = top_k_fn or top_k_default, top_p_fn or top_p_default

    def f(logits, temperature=1.0, top_k=None, top_p=None):
        if temp == "divide":
            z = logits / temperature
        elif temp == "multiply":
            z = logits * temperature
        else:
            z = logits
        z = tp(tk(z, top_k), top_p) if order == "kp" else tk(tp(z, top_p), top_k)
        if temp == "after":
            pr = torch.softmax(z, -1) / temperature
            return torch.log(pr / pr.sum(-1, keepdim=True))
        if probs:
            return torch.softmax(z, -1)
        return z

    return f


def _top_k_exactly_k(z, k):
    if not k:
        return z
    idx = torch.topk(z, min(k, z.shape[-1]), dim=-1).indices
    keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
    return z.masked_fill(~keep, NEG_INF)


def _top_k_le(z, k):
    if not k:
        return z
    kth = torch.topk(z, min(k, z.shape[-1]), dim=-1).values[..., -1:]
    return z.masked_fill(z <= kth, NEG_INF)


def _top_k_none_unsafe(z, k):
    kth = torch.topk(z, k, dim=-1).values[..., -1:]
    return z.masked_fill(z < kth, NEG_INF)


def _top_p_cumsum_le(z, p):
    if p is None or p >= 1:
        return z
    s, order = torch.sort(z, -1, descending=True)
    cum = torch.softmax(s, -1).cumsum(-1)
    remove = cum > p
    remove[..., 0] = False
    return z.masked_fill(remove.scatter(-1, order, remove), NEG_INF)


def _top_p_no_scatter(z, p):
    if p is None or p >= 1:
        return z
    s, order = torch.sort(z, -1, descending=True)
    pr = torch.softmax(s, -1)
    remove = (pr.cumsum(-1) - pr) >= p
    return z.masked_fill(remove, NEG_INF)


def _top_p_always(z, p):
    if p is None:
        return z
    s, order = torch.sort(z, -1, descending=True)
    cum = torch.softmax(s, -1).cumsum(-1)
    remove = torch.cat([torch.zeros_like(cum[..., :1], dtype=torch.bool), cum[..., :-1] >= p], -1)
    return z.masked_fill(remove.scatter(-1, order, remove), NEG_INF)


def bug_filter_untempered_nucleus(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = torch.topk(z, min(top_k, z.shape[-1]), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, NEG_INF)
    if top_p is not None and top_p < 1:
        base = logits.masked_fill(torch.isinf(z), NEG_INF)  # nucleus from the raw logits
        s, order = torch.sort(base, -1, descending=True)
        p = torch.softmax(s, -1)
        remove = (p.cumsum(-1) - p) >= top_p
        z = z.masked_fill(remove.scatter(-1, order, remove), NEG_INF)
    return z


def bug_filter_in_place(logits, temperature=1.0, top_k=None, top_p=None):
    logits /= temperature
    return good_filter(logits, 1.0, top_k, top_p)


def bug_filter_minus_big(logits, temperature=1.0, top_k=None, top_p=None):
    z = good_filter(logits, temperature, top_k, top_p)
    return z.masked_fill(torch.isinf(z), -1e9)


def bug_filter_topk_overflow(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, NEG_INF)
    return good_filter(z, 1.0, None, top_p)


# =============================================================================================
# Exercise 5: greedy decoding with a KV cache
def good_generate(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for _ in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        nxt = model.lm_head(model.norm_f(x[:, -1])).argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out


def good_generate_explicit(model, idx, max_new_tokens):
    """Prompt with an explicit mask, then one token at a time, positions from the table."""
    caches = [KVCache() for _ in model.blocks]
    tokens = idx.tolist()
    new = idx
    pos = 0
    for _ in range(max_new_tokens):
        T = new.shape[1]
        x = model.tok_emb(new) + model.pos_emb.weight[pos : pos + T]
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, mask=causal_mask(T, pos + T) if T > 1 else None, cache=cache)
        pos += T
        nxt = model.lm_head(model.norm_f(x))[:, -1].argmax(dim=-1)  # (B,)
        for row, t in zip(tokens, nxt.tolist()):
            row.append(t)
        new = nxt[:, None]
    return torch.tensor(tokens, dtype=torch.long)


def _gen_bug(
    offset="right",
    prompt_mask=True,
    first=False,
    fresh=False,
    norm=True,
    feed_all=False,
    no_cache=False,
    new_only=False,
    extra=False,
    recompute_fresh=False,
):
    def f(model, idx, max_new_tokens):
        caches = [KVCache() for _ in model.blocks]
        out = idx
        x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
        steps = max_new_tokens + (1 if extra else 0)
        for step in range(steps):
            if recompute_fresh:
                caches = [KVCache() for _ in model.blocks]
                x = model.tok_emb(out) + model.pos_emb(out.shape[1])
            for block, cache in zip(model.blocks, caches):
                use = None if no_cache else cache
                causal = prompt_mask or step > 0 or no_cache
                x, _ = block(x, is_causal=causal, cache=use)
            h = x[:, 0] if (first and step == 0) else x[:, -1]
            nxt = model.lm_head(model.norm_f(h) if norm else h).argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], dim=1)
            L = out.shape[1]
            if fresh:
                caches = [KVCache() for _ in model.blocks]
            if no_cache:
                x = model.tok_emb(out) + model.pos_emb(L)
            elif feed_all:
                x = model.tok_emb(out) + model.pos_emb(L)
            else:
                start = {"right": L - 1, "zero": 0, "plus1": L}[offset]
                if start + 1 > model.config.max_len:
                    start = L - 1
                x = model.tok_emb(nxt) + model.pos_emb.weight[start : start + 1]
        return out[:, idx.shape[1] :] if new_only else out

    return f


# =============================================================================================
GOOD = [
    (checks.check_next_token_batch, good_batch),
    (checks.check_next_token_batch, good_batch_unfold),
    (checks.check_next_token_batch, good_batch_index),
    (checks.check_causal_lm_loss, good_loss),
    (checks.check_causal_lm_loss, good_loss_by_hand),
    (checks.check_causal_lm_loss, good_loss_weighted),
    (checks.check_gpt_from_blocks, GoodGPT),
    (checks.check_gpt_from_blocks, GoodGPTTorchStyle),
    (checks.check_filter_logits, good_filter),
    (checks.check_filter_logits, good_filter_hf_style),
    (checks.check_filter_logits, good_filter_log_probs),
    (checks.check_generate_greedy, good_generate),
    (checks.check_generate_greedy, good_generate_explicit),
]

CATALOGUE = [
    # --- next_token_batch
    (checks.check_next_token_batch, bug_batch_unshifted, "the targets equal the inputs"),
    (checks.check_next_token_batch, bug_batch_wrong_way, "shifted the wrong way"),
    (checks.check_next_token_batch, bug_batch_roll, "wraps around"),
    (checks.check_next_token_batch, bug_batch_start_too_far, "must be smaller than len(data) - T"),
    (checks.check_next_token_batch, bug_batch_last_window_never, "exactly one window"),
    (checks.check_next_token_batch, bug_batch_global_rng, "not the global RNG"),
    (checks.check_next_token_batch, bug_batch_two_draws, "same window"),
    (checks.check_next_token_batch, bug_batch_float, "torch.long"),
    (checks.check_next_token_batch, bug_batch_window, "whole window of T + 1"),
    (checks.check_next_token_batch, bug_batch_one_start, "same window: draw B independent"),
    (checks.check_next_token_batch, bug_batch_transposed, "(T, B)"),
    (checks.check_next_token_batch, bug_batch_last_target, "the last target is wrong"),
    # --- causal_lm_loss
    (checks.check_causal_lm_loss, bug_loss_unshifted, "not shifted"),
    (checks.check_causal_lm_loss, bug_loss_wrong_way, "shifted the wrong way"),
    (checks.check_causal_lm_loss, bug_loss_roll, "wraps around"),
    (checks.check_causal_lm_loss, bug_loss_pads_counted, "padding targets are counted"),
    (checks.check_causal_lm_loss, bug_loss_mask_at_inputs, "inputs' positions"),
    (checks.check_causal_lm_loss, bug_loss_per_sequence, "per sequence"),
    (checks.check_causal_lm_loss, bug_loss_sum, "summed"),
    (checks.check_causal_lm_loss, bug_loss_item, "without .item()"),
    (checks.check_causal_lm_loss, bug_loss_log_softmax_dim1, "over the positions"),
    (checks.check_causal_lm_loss, bug_loss_double_softmax, "softmax applied twice"),
    (checks.check_causal_lm_loss, bug_loss_probability, "-log p"),
    (checks.check_causal_lm_loss, bug_loss_unflattened, "flatten"),
    (checks.check_causal_lm_loss, bug_loss_mask_not_none_safe, "attention_mask=None"),
    (checks.check_causal_lm_loss, bug_loss_detached, "no gradient"),
    (checks.check_causal_lm_loss, bug_loss_keepdim, "0-dimensional"),
    (checks.check_causal_lm_loss, bug_loss_flatten_then_shift, "the shift crosses sequences"),
    (checks.check_causal_lm_loss, bug_loss_zeroed_pads_averaged, "number of real targets"),
    # --- GPT from blocks
    (
        checks.check_gpt_from_blocks,
        _variant_gpt(no_positions=True),
        "position embeddings are missing",
    ),
    (checks.check_gpt_from_blocks, _variant_gpt(positions_from_1=True), "positions start at 1"),
    (checks.check_gpt_from_blocks, _variant_gpt(positions_from_ids=True), "not with token ids"),
    (checks.check_gpt_from_blocks, _variant_gpt(no_mask=True), "no causal mask"),
    (checks.check_gpt_from_blocks, _variant_gpt(strict_mask=True), "excludes the diagonal"),
    (
        checks.check_gpt_from_blocks,
        _variant_gpt(no_final_norm=True),
        "final layer norm is missing",
    ),
    (checks.check_gpt_from_blocks, _variant_gpt(post_norm=True), "post-norm"),
    (checks.check_gpt_from_blocks, _variant_gpt(activation=True), "activation=config.activation"),
    (checks.check_gpt_from_blocks, _variant_gpt(scale=True), "sqrt(C)"),
    (checks.check_gpt_from_blocks, _variant_gpt(untied=True), "tie the head"),
    (
        checks.check_gpt_from_blocks,
        _variant_gpt(copied_tie=True),
        "copying the values is not tying",
    ),
    (checks.check_gpt_from_blocks, _variant_gpt(head_bias=True), "no bias"),
    (checks.check_gpt_from_blocks, _variant_gpt(pos_vocab=True), "one per position"),
    (checks.check_gpt_from_blocks, _variant_gpt(one_block=True), "config.n_layers"),
    (checks.check_gpt_from_blocks, _variant_gpt(tuple=True), "x, _ = block(x"),
    (
        checks.check_gpt_from_blocks,
        _variant_gpt(return_tuple=True),
        "logits tensor (B, T, V) itself",
    ),
    # --- filter_logits
    (checks.check_filter_logits, _filter_bug(temp="multiply"), "multiplies the logits"),
    (checks.check_filter_logits, _filter_bug(temp="after"), "temperature has no effect"),
    (checks.check_filter_logits, _filter_bug(temp="ignored"), "temperature has no effect"),
    (checks.check_filter_logits, _filter_bug(top_k_fn=_top_k_exactly_k), "tied with the k-th"),
    (checks.check_filter_logits, _filter_bug(top_k_fn=_top_k_le), "k - 1 tokens"),
    (checks.check_filter_logits, _filter_bug(top_k_fn=_top_k_none_unsafe), "top_k=None"),
    (
        checks.check_filter_logits,
        _filter_bug(top_p_fn=_top_p_cumsum_le),
        "drops the token that crosses p",
    ),
    (checks.check_filter_logits, _filter_bug(top_p_fn=_top_p_no_scatter), "scatter it"),
    (checks.check_filter_logits, _filter_bug(top_p_fn=_top_p_always), "top_p = 1"),
    (checks.check_filter_logits, _filter_bug(order="pk"), "before top-k"),
    (checks.check_filter_logits, _filter_bug(probs=True), "returned probabilities"),
    (checks.check_filter_logits, _filter_bug(fill=0.0), "leaves them a probability"),
    (checks.check_filter_logits, bug_filter_minus_big, "exactly float('-inf')"),
    (checks.check_filter_logits, bug_filter_untempered_nucleus, "before the temperature"),
    (checks.check_filter_logits, bug_filter_in_place, "in place"),
    (checks.check_filter_logits, bug_filter_topk_overflow, "min(top_k, V)"),
    # --- generate_greedy
    (checks.check_generate_greedy, _gen_bug(offset="zero"), "not offset"),
    (checks.check_generate_greedy, _gen_bug(offset="plus1"), "off by one"),
    (checks.check_generate_greedy, _gen_bug(prompt_mask=False), "without the causal mask"),
    (checks.check_generate_greedy, _gen_bug(first=True), "LAST position"),
    (checks.check_generate_greedy, _gen_bug(fresh=True), "new, empty cache each step"),
    (checks.check_generate_greedy, _gen_bug(norm=False), "final layer norm"),
    (checks.check_generate_greedy, _gen_bug(feed_all=True), "appended twice"),
    (checks.check_generate_greedy, _gen_bug(no_cache=True), "no KV cache was used"),
    (checks.check_generate_greedy, _gen_bug(new_only=True), "prompt followed by the new tokens"),
    (checks.check_generate_greedy, _gen_bug(extra=True), "should have shape"),
    (checks.check_generate_greedy, _gen_bug(recompute_fresh=True), "caches start empty"),
    (checks.check_generate_greedy, bug_generate_argmax_dim0, "argmax(dim=-1, keepdim=True)"),
]


MISTAKES = from_table("07", CATALOGUE)
CORRECT = from_table("07", GOOD)
NAMED_AT_LEAST = 1.0  # every entry named when converted to this format
