"""Holdout for notebook 07, written from notebooks/07_gpt/07_gpt.ipynb alone (without reading the
checks)."""

import torch
import torch.nn.functional as F
from torch import nn

from tests.holdout._harness import Mistake, collector
from transformer_lab.blocks import Block, LayerNorm
from transformer_lab.heads import KVCache

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "07")
right = collector(CORRECT, "07")
NAMED_AT_LEAST = 1.0  # measured: 54 of 54 named


# ---------------------------------------------------------------- next_token_batch
def _windows(data, starts, T, shift=1):
    x = torch.stack([data[s : s + T] for s in starts.tolist()])
    y = torch.stack([data[s + shift : s + shift + T] for s in starts.tolist()])
    return x, y


@wrong("next_token_batch", "window|last|range|start|off-by-one|off by one|every")
def batch_misses_last_window(data, T, B, generator):
    return _windows(data, torch.randint(len(data) - T - 1, (B,), generator=generator), T)


@wrong("next_token_batch", "shift|target|next|offset")
def batch_targets_not_shifted(data, T, B, generator):
    return _windows(data, torch.randint(len(data) - T, (B,), generator=generator), T, shift=0)


@wrong("next_token_batch", "swap|shift|direction|previous")
def batch_inputs_and_targets_swapped(data, T, B, generator):
    x, y = _windows(data, torch.randint(len(data) - T, (B,), generator=generator), T)
    return y, x


@wrong("next_token_batch", "generator|seed|reproduc|same")
def batch_ignores_generator(data, T, B, generator):
    return _windows(data, torch.randint(len(data) - T, (B,)), T)


@wrong("next_token_batch", "range|start|out of|window|bound|fit|at the end|the end")
def batch_start_range_too_wide(data, T, B, generator):
    starts = torch.randint(len(data) - T + 1, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts.tolist()])
    y = torch.stack(
        [
            F.pad(data[s + 1 : s + T + 1], (0, T - len(data[s + 1 : s + T + 1])))
            for s in starts.tolist()
        ]
    )
    return x, y


@wrong("next_token_batch", "start|each row|random|independent|same window")
def batch_one_start_for_all_rows(data, T, B, generator):
    s = torch.randint(len(data) - T, (1,), generator=generator).expand(B)
    return _windows(data, s, T)


@wrong("next_token_batch", "long|dtype|int64|float")
def batch_float_tensors(data, T, B, generator):
    x, y = _windows(data, torch.randint(len(data) - T, (B,), generator=generator), T)
    return x.float(), y.float()


@wrong("next_token_batch", "shape|transpose|(b, t)")
def batch_time_major(data, T, B, generator):
    x, y = _windows(data, torch.randint(len(data) - T, (B,), generator=generator), T)
    return x.T.contiguous(), y.T.contiguous()


@wrong("next_token_batch", "random|start|generator|uniform|consecutive")
def batch_consecutive_windows(data, T, B, generator):
    starts = (torch.arange(B) * T) % (len(data) - T)
    return _windows(data, starts, T)


@right("next_token_batch")
def batch_with_unfold(data, T, B, generator):
    starts = torch.randint(0, data.numel() - T, (B,), generator=generator)
    offsets = torch.arange(T + 1)
    windows = data[starts[:, None] + offsets]  # (B, T + 1)
    return windows[:, :-1].long(), windows[:, 1:].long()


# ---------------------------------------------------------------- causal_lm_loss
def _lm(logits, ids, attention_mask=None, target_mask=True, reduction="mean"):
    z, y = logits[:, :-1], ids[:, 1:]
    if attention_mask is not None:
        m = attention_mask[:, 1:] if target_mask else attention_mask[:, :-1]
        y = y.masked_fill(m == 0, -100)
    return F.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1), reduction=reduction)


@wrong("causal_lm_loss", "shift|next|target|t + 1|t+1|offset")
def lm_loss_without_shift(logits, ids, attention_mask=None):
    y = ids if attention_mask is None else ids.masked_fill(attention_mask == 0, -100)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


@wrong("causal_lm_loss", "shift|direction|next|previous|offset")
def lm_loss_shift_reversed(logits, ids, attention_mask=None):
    z, y = logits[:, 1:], ids[:, :-1]
    if attention_mask is not None:
        y = y.masked_fill(attention_mask[:, :-1] == 0, -100)
    return F.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1))


@wrong("causal_lm_loss", "mask|target|padding|input|t + 1|position")
def lm_loss_masks_inputs_not_targets(logits, ids, attention_mask=None):
    return _lm(logits, ids, attention_mask, target_mask=False)


@wrong("causal_lm_loss", "mask|padding|attention_mask")
def lm_loss_ignores_padding(logits, ids, attention_mask=None):
    return _lm(logits, ids, None)


@wrong("causal_lm_loss", "mean|sum|average")
def lm_loss_summed(logits, ids, attention_mask=None):
    return _lm(logits, ids, attention_mask, reduction="sum")


@wrong("causal_lm_loss", "mean|padding|divide|real|number|count")
def lm_loss_divides_by_all_positions(logits, ids, attention_mask=None):
    z, y = logits[:, :-1], ids[:, 1:]
    per = F.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1), reduction="none")
    if attention_mask is not None:
        per = per * attention_mask[:, 1:].reshape(-1)
    return per.mean()


@wrong("causal_lm_loss", "tensor|grad|float|item|0-dim|differentiable")
def lm_loss_as_float(logits, ids, attention_mask=None):
    return _lm(logits, ids, attention_mask).item()


@wrong("causal_lm_loss", "mask|invert|padding|polarity|1 = real")
def lm_loss_mask_inverted(logits, ids, attention_mask=None):
    return _lm(logits, ids, None if attention_mask is None else 1 - attention_mask)


@wrong(
    "causal_lm_loss",
    "log_softmax|softmax|logits|log-prob|log prob|log-softmax|log softmax|logarithm|cross-entropy|cross entropy",
)
def lm_loss_nll_on_raw_logits(logits, ids, attention_mask=None):
    z, y = logits[:, :-1], ids[:, 1:]
    if attention_mask is not None:
        y = y.masked_fill(attention_mask[:, 1:] == 0, -100)
    return F.nll_loss(z.reshape(-1, z.shape[-1]), y.reshape(-1))


@wrong("causal_lm_loss", "last|roll|wrap|shift|drop")
def lm_loss_rolls_targets(logits, ids, attention_mask=None):
    y = ids.roll(-1, dims=1)
    if attention_mask is not None:
        y = y.masked_fill(attention_mask.roll(-1, dims=1) == 0, -100)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


@wrong("causal_lm_loss", "mean|per sequence|real target|average|weight")
def lm_loss_mean_of_sequence_means(logits, ids, attention_mask=None):
    losses = []
    for b in range(ids.shape[0]):
        m = None if attention_mask is None else attention_mask[b : b + 1]
        if m is not None and m[0, 1:].sum() == 0:
            continue
        losses.append(_lm(logits[b : b + 1], ids[b : b + 1], m))
    return torch.stack(losses).mean()


@right("causal_lm_loss")
def lm_loss_log_softmax_gather(logits, ids, attention_mask=None):
    logp = logits[:, :-1].log_softmax(dim=-1)  # (B, T-1, V)
    picked = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    keep = (
        torch.ones_like(picked)
        if attention_mask is None
        else attention_mask[:, 1:].to(picked.dtype)
    )
    return -(picked * keep).sum() / keep.sum()


# ---------------------------------------------------------------- gpt_from_blocks
class _GPT(nn.Module):
    causal, final_norm, positions, norm_first, head_bias = True, True, True, True, False
    always_tie, share_blocks, pos_offset, copy_tie, honour_norm_cfg, honour_mlp_cfg, last_only = (
        False,
    ) * 7

    def __init__(self, config):
        super().__init__()
        c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        kw = {"activation": c.activation, "bias": c.bias, "eps": c.eps}
        if self.honour_mlp_cfg:
            kw = {"bias": c.bias, "eps": c.eps}
        d_ff = None if self.honour_mlp_cfg else c.d_ff
        if self.share_blocks:
            one = Block(c.d_model, c.n_heads, d_ff, norm_first=self.norm_first, **kw)
            self.blocks = nn.ModuleList([one] * c.n_layers)
        else:
            self.blocks = nn.ModuleList(
                Block(c.d_model, c.n_heads, d_ff, norm_first=self.norm_first, **kw)
                for _ in range(c.n_layers)
            )
        if self.honour_norm_cfg:
            self.norm_f = LayerNorm(c.d_model)
        else:
            self.norm_f = LayerNorm(c.d_model, c.eps, c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=self.head_bias)
        if c.tie_weights or self.always_tie:
            if self.copy_tie:
                with torch.no_grad():
                    self.lm_head.weight.copy_(self.tok_emb.weight)
            else:
                self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok_emb(idx)
        if self.positions:
            start = 1 if self.pos_offset else 0
            x = x + self.pos_emb(torch.arange(start, start + T, device=idx.device))
        for block in self.blocks:
            x, _ = block(x, is_causal=self.causal)
        if self.final_norm:
            x = self.norm_f(x)
        logits = self.lm_head(x)
        return logits[:, -1] if self.last_only else logits


@wrong("gpt_from_blocks", "tie|tied|share|same|parameter|copy")
class GPTCopiesTiedWeights(_GPT):
    copy_tie = True


@wrong("gpt_from_blocks", "tie|tie_weights|untied")
class GPTAlwaysTies(_GPT):
    always_tie = True


@wrong("gpt_from_blocks", "causal|mask|future|is_causal")
class GPTWithoutCausalMask(_GPT):
    causal = False


@wrong("gpt_from_blocks", "norm_f|final norm|norm|layer norm")
class GPTWithoutFinalNorm(_GPT):
    final_norm = False


@wrong("gpt_from_blocks", "position|pos_emb")
class GPTWithoutPositions(_GPT):
    positions = False


@wrong("gpt_from_blocks", "pre-norm|post-norm|norm_first|placement")
class GPTPostNormBlocks(_GPT):
    norm_first = False


@wrong("gpt_from_blocks", "bias|lm_head|head")
class GPTHeadWithBias(_GPT):
    head_bias = True


@wrong("gpt_from_blocks", "position|offset|index|max_len|off-by-one|start")
class GPTPositionsFromOne(_GPT):
    pos_offset = True


@wrong("gpt_from_blocks", "eps|bias|norm|config")
class GPTDefaultFinalNorm(_GPT):
    honour_norm_cfg = True


@wrong("gpt_from_blocks", "d_ff|activation|mlp|config|hidden")
class GPTDefaultMlp(_GPT):
    honour_mlp_cfg = True


@wrong("gpt_from_blocks", "shared|same block|layers|independent|n_layers|parameters")
class GPTOneBlockRepeated(_GPT):
    share_blocks = True


@wrong("gpt_from_blocks", "shape|last|(b, t, v)|every position|all positions")
class GPTLastPositionOnly(_GPT):
    last_only = True


@right("gpt_from_blocks")
class GPTWritten(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.max_len, config.d_model)
        self.blocks = nn.ModuleList(
            [
                Block(
                    config.d_model,
                    config.n_heads,
                    config.d_ff,
                    activation=config.activation,
                    bias=config.bias,
                    eps=config.eps,
                )  # fmt: skip
                for _ in range(config.n_layers)
            ]
        )
        self.norm_f = LayerNorm(config.d_model, eps=config.eps, bias=config.bias)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        positions = torch.arange(idx.shape[1], device=idx.device)
        h = self.tok_emb(idx) + self.pos_emb(positions)[None]  # (B, T, C)
        for block in self.blocks:
            h = block(h, is_causal=True)[0]
        return self.lm_head(self.norm_f(h))  # (B, T, V)


# ---------------------------------------------------------------- filter_logits
def _topk(z, k, ties=True):
    if not k:
        return z
    k = min(k, z.shape[-1])
    if ties:
        kth = z.topk(k, dim=-1).values[..., -1:]
        return z.masked_fill(z < kth, float("-inf"))
    idx = z.topk(k, dim=-1).indices
    keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
    return z.masked_fill(~keep, float("-inf"))


def _topp(z, p, include_crossing=True, sort=True, probs_from=None, fill=float("-inf")):
    if p is None or p >= 1.0:
        return z
    src = z if probs_from is None else probs_from
    if sort:
        sorted_z, order = src.sort(dim=-1, descending=True)
    else:
        sorted_z, order = src, torch.arange(src.shape[-1]).expand(src.shape)
    probs = sorted_z.softmax(dim=-1)
    cum = probs.cumsum(dim=-1)
    remove_sorted = (cum - probs >= p) if include_crossing else (cum >= p)
    remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
    return z.masked_fill(remove, fill)


@wrong("filter_logits", "temperature|divide|multipl")
def filter_multiplies_by_temperature(logits, temperature=1.0, top_k=None, top_p=None):
    return _topp(_topk(logits * temperature, top_k), top_p)


@wrong("filter_logits", "temperature|logits|after|probabilit|softmax")
def filter_temperature_on_probabilities(logits, temperature=1.0, top_k=None, top_p=None):
    z = _topp(_topk(logits.clone(), top_k), top_p)
    p = z.softmax(-1) / temperature
    return torch.log(p / p.sum(-1, keepdim=True))


@wrong("filter_logits", "order|temperature|top-p|top_p|before|after")
def filter_temperature_last(logits, temperature=1.0, top_k=None, top_p=None):
    return _topp(_topk(logits, top_k), top_p) / temperature


@wrong("filter_logits", "tie|equal|k-th")
def filter_top_k_drops_ties(logits, temperature=1.0, top_k=None, top_p=None):
    return _topp(_topk(logits / temperature, top_k, ties=False), top_p)


@wrong("filter_logits", "top_k > v|larger|vocab|top_k|range")
def filter_top_k_larger_than_vocab_crashes(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = z.topk(top_k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    return _topp(z, top_p)


@wrong("filter_logits", "off-by-one|off by one|offset|top_k|none|disable")
def filter_top_k_zero_not_off(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k is not None:
        if top_k == 0:
            z = torch.full_like(z, float("-inf"))
        else:
            z = _topk(z, top_k)
    return _topp(z, top_p)


@wrong("filter_logits", "cross|reach|nucleus|include|most likely|keep")
def filter_top_p_drops_crossing_token(logits, temperature=1.0, top_k=None, top_p=None):
    return _topp(_topk(logits / temperature, top_k), top_p, include_crossing=False)


@wrong("filter_logits", "renormali|temperature|top-k|top_k|order|before")
def filter_top_p_on_original_logits(logits, temperature=1.0, top_k=None, top_p=None):
    z = _topk(logits / temperature, top_k)
    return _topp(z, top_p, probs_from=logits)


@wrong("filter_logits", "in place|in-place|modif|input|mutat")
def filter_in_place(logits, temperature=1.0, top_k=None, top_p=None):
    logits.div_(temperature)
    z = _topp(_topk(logits, top_k), top_p)
    logits.copy_(z)
    return logits


@wrong("filter_logits", "sort|order|most likely|descending")
def filter_top_p_unsorted(logits, temperature=1.0, top_k=None, top_p=None):
    return _topp(_topk(logits / temperature, top_k), top_p, sort=False)


@wrong("filter_logits", "-inf|infinit|zero|removed")
def filter_removed_set_to_zero(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        k = min(top_k, z.shape[-1])
        kth = z.topk(k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, 0.0)
    return _topp(z, top_p, fill=0.0)


@wrong("filter_logits", "dim|last|axis|batch")
def filter_top_k_along_first_dim(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k and z.dim() > 1:
        k = min(top_k, z.shape[0])
        kth = z.topk(k, dim=0).values[-1:]
        z = z.masked_fill(z < kth, float("-inf"))
    elif top_k:
        z = _topk(z, top_k)
    return _topp(z, top_p)


@right("filter_logits")
def filter_hf_style(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k is not None and top_k > 0 and top_k < z.size(-1):
        threshold = torch.topk(z, top_k).values[..., -1, None]
        z = torch.where(z < threshold, torch.full_like(z, -float("inf")), z)
    if top_p is not None and top_p < 1.0:
        ascending, order = torch.sort(z, descending=False)
        cum = ascending.softmax(-1).cumsum(-1)
        drop = cum <= 1 - top_p
        drop[..., -1] = False  # the most likely token always stays
        z = z.masked_fill(drop.scatter(-1, order, drop), -float("inf"))
    return z


# ---------------------------------------------------------------- generate_greedy
def _greedy(model, idx, n, pos_shift=0, first_causal=True, keep_cache=True, step_causal=False,
            final_norm=True, argmax_dim=-1, new_only=False, sample=False, resend=False,
            read=-1, steps=None, fixed_pos=False):  # fmt: skip
    T0 = idx.shape[1]
    caches = [KVCache() for _ in model.blocks]
    x = model.tok_emb(idx) + model.pos_emb.weight[:T0]
    for block, cache in zip(model.blocks, caches):
        x, _ = block(x, is_causal=first_causal, cache=cache)
    out = idx
    for _ in range(n if steps is None else steps):
        h = model.norm_f(x[:, read]) if final_norm else x[:, read]
        logits = model.lm_head(h)  # (B, V)
        if sample:
            nxt = torch.multinomial(logits.softmax(-1), 1)
        elif argmax_dim == -1:
            nxt = logits.argmax(dim=-1, keepdim=True)
        else:
            nxt = (
                logits.argmax(dim=0, keepdim=True)
                .T[: idx.shape[0], :1]
                .clamp(max=logits.shape[-1] - 1)
            )
        out = torch.cat([out, nxt], dim=1)
        L = out.shape[1] - 1
        if resend:
            caches = caches if keep_cache else [KVCache() for _ in model.blocks]
            x = model.tok_emb(out) + model.pos_emb.weight[: L + 1]
            for block, cache in zip(model.blocks, caches):
                x, _ = block(x, is_causal=True, cache=cache)
            continue
        p = 0 if fixed_pos else L + pos_shift
        x = model.tok_emb(nxt) + model.pos_emb.weight[p : p + 1]
        if not keep_cache:
            caches = [KVCache() for _ in model.blocks]
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=step_causal, cache=cache)
    return out[:, T0:] if new_only else out


def _nograd(fn):
    def wrapped(model, idx, max_new_tokens):
        with torch.no_grad():
            return fn(model, idx, max_new_tokens)

    wrapped.__name__ = fn.__name__
    return wrapped


@wrong("generate_greedy", "position|offset")
@_nograd
def greedy_new_token_at_position_zero(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, fixed_pos=True)


@wrong("generate_greedy", "position|offset|off-by-one|off by one")
@_nograd
def greedy_position_one_too_far(model, idx, max_new_tokens):
    if idx.shape[1] + max_new_tokens >= model.pos_emb.weight.shape[0]:
        return _greedy(model, idx, max_new_tokens, pos_shift=-1)
    return _greedy(model, idx, max_new_tokens, pos_shift=1)


@wrong("generate_greedy", "causal|prompt|mask|first pass|is_causal")
@_nograd
def greedy_prompt_without_causal_mask(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, first_causal=False)


@wrong("generate_greedy", "cache|context|reuse|kv")
@_nograd
def greedy_fresh_caches_each_step(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, keep_cache=False)


@wrong("generate_greedy", "norm_f|norm|final")
@_nograd
def greedy_without_final_norm(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, final_norm=False)


@wrong("generate_greedy", "prompt|shape|return|prefix")
@_nograd
def greedy_returns_only_new_tokens(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, new_only=True)


@wrong("generate_greedy", "greedy|argmax|sample|determin")
@_nograd
def greedy_samples(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, sample=True)


@wrong("generate_greedy", "cache|only|new token|duplicate|twice|whole")
@_nograd
def greedy_resends_whole_sequence_with_cache(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, resend=True)


@wrong("generate_greedy", "last position|position|last|first")
@_nograd
def greedy_reads_first_position(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, read=0)


@wrong("generate_greedy", "max_new_tokens|number|count|length|shape")
@_nograd
def greedy_one_token_short(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, steps=max(max_new_tokens - 1, 0))


@right("generate_greedy")
@_nograd
def greedy_written(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    tokens = idx
    x = model.tok_emb(idx) + model.pos_emb.weight[: idx.shape[1]]
    first = True
    for _ in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=first, cache=cache)
        first = False
        nxt = model.lm_head(model.norm_f(x[:, -1])).argmax(-1)[:, None]  # (B, 1)
        pos = tokens.shape[1]
        tokens = torch.cat([tokens, nxt], dim=1)
        if pos < model.pos_emb.weight.shape[0]:
            x = model.tok_emb(nxt) + model.pos_emb.weight[pos : pos + 1]
    return tokens
