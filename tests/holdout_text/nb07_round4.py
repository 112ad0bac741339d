"""Holdout for notebook 07 (fourth round), written from notebooks/07_gpt/07_gpt.ipynb alone (without
reading the checks)."""

import math

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
# Written after rounds 2 and 3 had tuned the checks, and measured once, never tuned on: the
# forecast for a new class. First shot 36 of 36 named, 0 generic, 0 misleading, 0 passed.
NAMED_AT_LEAST = 1.0


# --------------------------------------------------------------------------- Exercise 1: next_token_batch


@wrong("next_token_batch", "last|range|start|uniform|every window|len")
def next_token_batch_never_draws_the_last_window(data, T, B, generator):
    starts = torch.randint(len(data) - T - 1, (B,), generator=generator)  # one window too few
    x = torch.stack([data[s : s + T] for s in starts.tolist()])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts.tolist()])
    return x, y


@wrong("next_token_batch", "generator|seed|reproduc")
def next_token_batch_global_generator(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,))
    x = torch.stack([data[s : s + T] for s in starts.tolist()])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts.tolist()])
    return x, y


@wrong("next_token_batch", "shift|target|swap|next")
def next_token_batch_x_and_y_swapped(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([data[s + 1 : s + T + 1] for s in starts.tolist()])
    y = torch.stack([data[s : s + T] for s in starts.tolist()])
    return x, y


@wrong("next_token_batch", "start|same|each|random|row|independent")
def next_token_batch_one_start_for_all_rows(data, T, B, generator):
    s = int(torch.randint(len(data) - T, (1,), generator=generator))
    x = data[s : s + T].expand(B, T).clone()
    y = data[s + 1 : s + T + 1].expand(B, T).clone()
    return x, y


@wrong("next_token_batch", "shape|transpos|(B, T)|dim")
def next_token_batch_time_major(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts.tolist()], dim=1)  # (T, B)
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts.tolist()], dim=1)
    return x, y


@wrong("next_token_batch", "window|consecutive|overlap|chunk|start")
def next_token_batch_aligned_chunks(data, T, B, generator):
    n_chunks = (len(data) - 1) // T  # only starts at multiples of T
    starts = torch.randint(n_chunks, (B,), generator=generator) * T
    x = torch.stack([data[s : s + T] for s in starts.tolist()])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts.tolist()])
    return x, y


@right("next_token_batch")
def next_token_batch_gather(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    index = starts[:, None] + torch.arange(T + 1)  # (B, T + 1)
    window = data[index]
    return window[:, :-1], window[:, 1:]


# --------------------------------------------------------------------------- Exercise 2: causal_lm_loss


@wrong("causal_lm_loss", "shift|next|t + 1|t+1|off by one|offset")
def causal_lm_loss_without_shift(logits, ids, attention_mask=None):
    targets = ids if attention_mask is None else ids.masked_fill(attention_mask == 0, -100)
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


@wrong("causal_lm_loss", "shift|direction|previous|t + 1|t+1|offset")
def causal_lm_loss_shifted_the_wrong_way(logits, ids, attention_mask=None):
    targets = ids[:, :-1]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, :-1] == 0, -100)
    return F.cross_entropy(logits[:, 1:].flatten(0, 1), targets.flatten())


@wrong("causal_lm_loss", "target|padding|mask|input")
def causal_lm_loss_masks_the_inputs(logits, ids, attention_mask=None):
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(
            attention_mask[:, :-1] == 0, -100
        )  # the input's mask, not the target's
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten())


@wrong("causal_lm_loss", "padding|mask|attention_mask")
def causal_lm_loss_ignores_the_mask(logits, ids, attention_mask=None):
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


@wrong("causal_lm_loss", "mean|average|per sequence|weight|each sequence|real targets")
def causal_lm_loss_mean_of_sequence_means(logits, ids, attention_mask=None):
    if attention_mask is None:
        attention_mask = torch.ones_like(ids)
    per_token = F.cross_entropy(
        logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none"
    )  # (B, T-1)
    real = attention_mask[:, 1:].to(per_token.dtype)
    return ((per_token * real).sum(1) / real.sum(1)).mean()


@wrong("causal_lm_loss", "padding|-100|ignore|class 0|token 0")
def causal_lm_loss_padding_as_token_zero(logits, ids, attention_mask=None):
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets * attention_mask[:, 1:]  # padding targets become id 0, still counted
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten())


@right("causal_lm_loss")
def causal_lm_loss_weighted_log_softmax(logits, ids, attention_mask=None):
    log_p = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V)
    nll = -log_p.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    if attention_mask is None:
        return nll.mean()
    real = attention_mask[:, 1:].to(nll.dtype)
    return (nll * real).sum() / real.sum()


# --------------------------------------------------------------------------- Exercise 3: gpt_from_blocks


class _GPTBase(nn.Module):
    """The parts every student version shares; each subclass changes one thing."""

    def __init__(self, config, *, tie=True, final_norm=True, norm_first=True, use_activation=True):
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        extra = dict(activation=c.activation) if use_activation else {}
        self.blocks = nn.ModuleList(
            Block(
                c.d_model, c.n_heads, c.d_ff, norm_first=norm_first, bias=c.bias, eps=c.eps, **extra
            )
            for _ in range(c.n_layers)
        )
        self.norm_f = LayerNorm(c.d_model, c.eps, c.bias) if final_norm else nn.Identity()
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if tie and c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "tie|tied|share|same|Parameter|copy|copied")
class GPTCopiesTheTokenTable(_GPTBase):
    def __init__(self, config):
        super().__init__(config, tie=False)
        if config.tie_weights:
            with torch.no_grad():
                self.lm_head.weight.copy_(self.tok_emb.weight)  # equal now, separate afterwards


@wrong("gpt_from_blocks", "tie|tied|tie_weights")
class GPTAlwaysTies(_GPTBase):
    def __init__(self, config):
        super().__init__(config, tie=False)
        self.lm_head.weight = self.tok_emb.weight  # whatever config.tie_weights says


@wrong("gpt_from_blocks", "causal|future|mask")
class GPTWithoutCausalMask(_GPTBase):
    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x, _ = block(x)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "norm_f|final|layer norm|LayerNorm")
class GPTCreatesButSkipsFinalNorm(_GPTBase):
    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(x)


@wrong("gpt_from_blocks", "position|pos_emb")
class GPTWithoutPositions(_GPTBase):
    def forward(self, idx):
        x = self.tok_emb(idx)
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "pre-norm|post-norm|norm_first|prenorm|postnorm")
class GPTPostNormBlocks(_GPTBase):
    def __init__(self, config):
        super().__init__(config, norm_first=False)  # BERT's blocks, notebook 6


@wrong("gpt_from_blocks", "position|max_len|length|T|shorter")
class GPTAddsTheWholePositionTable(_GPTBase):
    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb.weight  # (max_len, C): only fits when T == max_len
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "activation|gelu|tanh")
class GPTDefaultActivation(_GPTBase):
    def __init__(self, config):
        super().__init__(config, use_activation=False)  # Block's default GELU, not the config's


@right("gpt_from_blocks")
class GPTWithCausalMaskTensor(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.blocks = nn.ModuleList(
            [
                Block(c.d_model, c.n_heads, c.d_ff, activation=c.activation, bias=c.bias, eps=c.eps)
                for _ in range(c.n_layers)
            ]
        )
        self.norm_f = nn.LayerNorm(c.d_model, eps=c.eps, bias=c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        T = idx.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()  # True = may attend
        x = self.tok_emb(idx) + self.pos_emb.weight[:T]
        for block in self.blocks:
            x, _ = block(x, mask=mask)
        return self.lm_head(self.norm_f(x))


# --------------------------------------------------------------------------- Exercise 4: generate_greedy


def _greedy(
    model,
    idx,
    max_new_tokens,
    *,
    new_position=lambda length: length,
    causal_prompt=True,
    final_norm=True,
    fresh_caches=False,
    read=-1,
):
    """A cached greedy decoder with one knob per mistake (the defaults are correct)."""
    caches = [KVCache() for _ in model.blocks]
    T0 = idx.shape[1]
    x = model.tok_emb(idx) + model.pos_emb.weight[:T0]
    for block, cache in zip(model.blocks, caches):
        x, _ = block(x, is_causal=causal_prompt, cache=cache)
    out = idx
    for _ in range(max_new_tokens):
        h = x[:, read]
        logits = model.lm_head(model.norm_f(h) if final_norm else h)
        nxt = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        out = torch.cat([out, nxt], dim=1)
        if fresh_caches:
            caches = [KVCache() for _ in model.blocks]
        pos = new_position(out.shape[1] - 1)
        x = model.tok_emb(nxt) + model.pos_emb.weight[pos : pos + 1]
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, cache=cache)
    return out


@wrong("generate_greedy", "position|offset")
def generate_greedy_new_tokens_at_position_0(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, new_position=lambda length: 0)


@wrong("generate_greedy", "position|offset|off by one")
def generate_greedy_position_one_too_far(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, new_position=lambda length: length + 1)


@wrong("generate_greedy", "causal|mask|prompt|is_causal")
def generate_greedy_prompt_without_causal_mask(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, causal_prompt=False)


@wrong("generate_greedy", "norm_f|norm|final")
def generate_greedy_skips_final_norm(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, final_norm=False)


@wrong("generate_greedy", "cache|reuse|same caches|keys")
def generate_greedy_new_caches_every_step(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, fresh_caches=True)


@wrong("generate_greedy", "last|position|x[:, -1]|first")
def generate_greedy_reads_first_position(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens, read=0)


@wrong("generate_greedy", "cache|once|only|new token|whole|twice|duplicate")
def generate_greedy_feeds_everything_through_the_cache(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    for _ in range(max_new_tokens + 1):
        T = out.shape[1]
        x = (
            model.tok_emb(out) + model.pos_emb.weight[:T]
        )  # the whole text again, on top of the cache
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        if out.shape[1] == idx.shape[1] + max_new_tokens:
            break
        nxt = model.lm_head(model.norm_f(x[:, -1])).argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
    return out


@wrong("generate_greedy", "prompt|shape|length|T0")
def generate_greedy_returns_only_new_tokens(model, idx, max_new_tokens):
    return _greedy(model, idx, max_new_tokens)[:, idx.shape[1] :]


@right("generate_greedy")
def generate_greedy_preallocated(model, idx, max_new_tokens):
    B, T0 = idx.shape
    out = torch.empty(B, T0 + max_new_tokens, dtype=torch.long, device=idx.device)
    out[:, :T0] = idx
    caches = [KVCache() for _ in model.blocks]
    x = model.tok_emb(idx) + model.pos_emb.weight[0:T0]
    for block, cache in zip(model.blocks, caches):
        x, _ = block(x, is_causal=True, cache=cache)
    for t in range(T0, T0 + max_new_tokens):
        out[:, t] = model.lm_head(model.norm_f(x[:, -1])).argmax(-1)
        x = model.tok_emb(out[:, t : t + 1]) + model.pos_emb.weight[t : t + 1]
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, cache=cache)
    return out


# --------------------------------------------------------------------------- Exercise 5: filter_logits


def _top_p_mask(z, top_p):
    """True at the tokens top-p removes: those whose strictly-more-likely mass already reaches top_p."""
    probs = torch.softmax(z, dim=-1)
    sorted_p, order = probs.sort(dim=-1, descending=True)
    before = sorted_p.cumsum(dim=-1) - sorted_p
    remove_sorted = before >= top_p
    return remove_sorted.scatter(-1, order, remove_sorted)


def _top_k(z, k):
    if k >= z.shape[-1]:
        return z
    kth = z.topk(k, dim=-1).values[..., -1:]
    return z.masked_fill(z < kth, float("-inf"))


@wrong("filter_logits", "temperature|divid")
def filter_logits_multiplies_by_temperature(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits * temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        z = z.masked_fill(_top_p_mask(z, top_p), float("-inf"))
    return z


@wrong("filter_logits", "temperature|order|before|first")
def filter_logits_temperature_last(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits.clone()
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        z = z.masked_fill(
            _top_p_mask(z, top_p), float("-inf")
        )  # nucleus of the untempered distribution
    return z / temperature


@wrong("filter_logits", "tie|ties|tied")
def filter_logits_top_k_drops_ties(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k and top_k < z.shape[-1]:
        keep = torch.zeros_like(z, dtype=torch.bool).scatter(
            -1, z.topk(top_k, dim=-1).indices, True
        )
        z = z.masked_fill(~keep, float("-inf"))  # exactly k survive, ties broken arbitrarily
    if top_p is not None and top_p < 1.0:
        z = z.masked_fill(_top_p_mask(z, top_p), float("-inf"))
    return z


@wrong("filter_logits", "cross|reach|include|stays|crosses|exceed")
def filter_logits_top_p_drops_the_crossing_token(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        probs = torch.softmax(z, dim=-1)
        sorted_p, order = probs.sort(dim=-1, descending=True)
        remove_sorted = sorted_p.cumsum(dim=-1) > top_p  # the token that crosses p is removed
        remove_sorted[..., 0] = False
        z = z.masked_fill(remove_sorted.scatter(-1, order, remove_sorted), float("-inf"))
    return z


@wrong("filter_logits", "renormal|top-k|top_k|after|order")
def filter_logits_top_p_on_unfiltered_probs(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    remove = torch.zeros_like(z, dtype=torch.bool)
    if top_p is not None and top_p < 1.0:
        remove |= _top_p_mask(z, top_p)  # probabilities before top-k removed anything
    if top_k:
        remove |= torch.isinf(_top_k(z, top_k))
    return z.masked_fill(remove, float("-inf"))


@wrong("filter_logits", "in place|in-place|modif|copy|clone|argument")
def filter_logits_edits_logits_in_place(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits.div_(temperature)
    if top_k and top_k < z.shape[-1]:
        kth = z.topk(top_k, dim=-1).values[..., -1:]
        z[z < kth] = float("-inf")
    if top_p is not None and top_p < 1.0:
        z[_top_p_mask(z, top_p)] = float("-inf")
    return z


@wrong("filter_logits", "top_k|larger|exceed|V|vocab")
def filter_logits_top_k_larger_than_vocab_fails(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = z.topk(top_k, dim=-1).values[..., -1:]  # raises when top_k > V
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        z = z.masked_fill(_top_p_mask(z, top_p), float("-inf"))
    return z


@wrong("filter_logits", "last dim|dimension|batch|row|dim=-1|axis")
def filter_logits_sorts_along_dim_0(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        probs = torch.softmax(z, dim=0)  # fine for one (V,) vector, wrong for a batch
        sorted_p, order = probs.sort(dim=0, descending=True)
        remove_sorted = (sorted_p.cumsum(dim=0) - sorted_p) >= top_p
        z = z.masked_fill(remove_sorted.scatter(0, order, remove_sorted), float("-inf"))
    return z


@right("filter_logits")
def filter_logits_threshold_style(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    V = z.shape[-1]
    if top_k and top_k < V:
        threshold = z.sort(dim=-1, descending=True).values[..., top_k - 1 : top_k]
        z = torch.where(z >= threshold, z, torch.full_like(z, -math.inf))
    if top_p is not None and top_p < 1.0:
        probs = z.softmax(dim=-1)
        # the mass of the tokens strictly more likely than each token, exactly as the text defines it
        above = (probs[..., None, :] > probs[..., :, None]).to(probs.dtype) @ probs[..., :, None]
        z = torch.where(above[..., 0] < top_p, z, torch.full_like(z, -math.inf))
    return z
