"""Holdout for notebook 07 (second round), written from notebooks/07_gpt/07_gpt.ipynb alone (without
reading the checks)."""

import torch
import torch.nn.functional as F
from torch import nn

from tests.holdout._harness import Mistake, collector
from transformer_lab.blocks import Block, LayerNorm
from transformer_lab.heads import KVCache
from transformer_lab.masks import causal_mask

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "07")
right = collector(CORRECT, "07")
# First shot, written without reading the checks: 45 of 47 named, 1 generic, 1 misleading,
# 0 passed; 47 of 47 named after the round's check work (29 November).
NAMED_AT_LEAST = 1.0


# ---------------------------------------------------------------------------------------------
# Exercise 1 - next_token_batch: B random windows, y = x shifted by one
# ---------------------------------------------------------------------------------------------


def _windows(data, starts, T):
    x = torch.stack([data[s : s + T] for s in starts.tolist()])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts.tolist()])
    return x, y


@wrong("next_token_batch", "shift|next|target|offset")
def targets_not_shifted(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x, _ = _windows(data, starts, T)
    return x, x.clone()


@wrong("next_token_batch", "start|range|last|uniform|every window|len(data)|off by one|off-by-one")
def last_window_never_drawn(data, T, B, generator):
    starts = torch.randint(len(data) - T - 1, (B,), generator=generator)  # one "- 1" too many
    return _windows(data, starts, T)


@wrong("next_token_batch", "generator|seed|reproduc")
def draws_without_the_generator(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,))
    return _windows(data, starts, T)


@wrong("next_token_batch", "start|independent|same|distinct|random|differ")
def one_start_for_the_whole_batch(data, T, B, generator):
    s = torch.randint(len(data) - T, (1,), generator=generator)
    return _windows(data, s.expand(B), T)


@wrong("next_token_batch", "shape|(B, T)|transpos|order|dim")
def returns_time_major(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x, y = _windows(data, starts, T)
    return x.T.contiguous(), y.T.contiguous()  # (T, B)


@wrong("next_token_batch", "dtype|long|float|integer")
def fills_a_float_buffer(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x, y = torch.zeros(B, T), torch.zeros(B, T)  # float32 by default
    for b, s in enumerate(starts.tolist()):
        x[b] = data[s : s + T]
        y[b] = data[s + 1 : s + T + 1]
    return x, y


@wrong("next_token_batch", "start|every window|uniform|multiple|position|overlap|chunk")
def starts_only_on_multiples_of_t(data, T, B, generator):
    chunk = torch.randint((len(data) - 1) // T, (B,), generator=generator)  # non-overlapping chunks
    return _windows(data, chunk * T, T)


@wrong("next_token_batch", "data|stream|next token|target|shift|following")
def targets_are_ids_plus_one(data, T, B, generator):
    # passes the notebook's arange stream, where the next token is always id + 1
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x, _ = _windows(data, starts, T)
    return x, x + 1


@right("next_token_batch")
def next_token_batch_by_index_arithmetic(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    window = data[starts[:, None] + torch.arange(T + 1)]  # (B, T + 1)
    return window[:, :-1], window[:, 1:]


@right("next_token_batch")
def next_token_batch_with_unfold(data, T, B, generator):
    starts = torch.randint(0, len(data) - T, (B,), generator=generator)
    all_windows = data.unfold(0, T + 1, 1)  # (len - T, T + 1), every window that fits
    chosen = all_windows[starts]
    return chosen[:, :T].clone(), chosen[:, 1:].clone()


# ---------------------------------------------------------------------------------------------
# Exercise 2 - causal_lm_loss: logits[:, t] against ids[:, t + 1], real targets only
# ---------------------------------------------------------------------------------------------


@wrong("causal_lm_loss", "shift|t + 1|t+1|next|offset")
def no_shift(logits, ids, attention_mask=None):
    targets = ids if attention_mask is None else ids.masked_fill(attention_mask == 0, -100)
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


@wrong("causal_lm_loss", "target|t + 1|t+1|shift", "mask|padding|pad")
def mask_read_at_the_input_positions(logits, ids, attention_mask=None):
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, :-1] == 0, -100)
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten())


@wrong("causal_lm_loss", "mask|padding|pad")
def ignores_the_attention_mask(logits, ids, attention_mask=None):
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


@wrong("causal_lm_loss", "mean|average|divide|count|number|real")
def divides_by_every_target(logits, ids, attention_mask=None):
    losses = F.cross_entropy(
        logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none"
    )  # (B, T-1)
    if attention_mask is not None:
        losses = losses * attention_mask[:, 1:]
    return losses.mean()  # padding counted in the denominator


@wrong("causal_lm_loss", "mask|padding|pad", "invert|real|1 = real|opposite")
def mask_inverted(logits, ids, attention_mask=None):
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 1, -100)  # drops the real targets
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten())


@wrong("causal_lm_loss", "attention_mask|mask|padding|pad")
def token_zero_taken_for_padding(logits, ids, attention_mask=None):
    targets = ids[:, 1:].masked_fill(ids[:, 1:] == 0, -100)  # id 0 is a real token too
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten())


@wrong("causal_lm_loss", "mean|average|per sequence|per row|weight|each sequence")
def mean_of_per_sequence_means(logits, ids, attention_mask=None):
    mask = torch.ones_like(ids) if attention_mask is None else attention_mask
    per_row = []
    for z, y, m in zip(logits, ids, mask):
        real = m[1:] == 1
        if real.any():
            per_row.append(F.cross_entropy(z[:-1][real], y[1:][real]))
    return torch.stack(per_row).mean()


@wrong("causal_lm_loss", "sign|negative|minus|negat")
def log_likelihood_not_negated(logits, ids, attention_mask=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None])[
        ..., 0
    ]  # (B, T-1)
    mask = torch.ones_like(logp) if attention_mask is None else attention_mask[:, 1:].to(logp.dtype)
    return (logp * mask).sum() / mask.sum()


@wrong("causal_lm_loss", "in place|in-place|modif|mutat|clone|copy|unchanged|changed")
def writes_minus_100_into_the_callers_ids(logits, ids, attention_mask=None):
    targets = ids[:, 1:]  # a view of ids
    if attention_mask is not None:
        targets[attention_mask[:, 1:] == 0] = -100  # ... so this edits the caller's ids
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), targets.reshape(-1))


@right("causal_lm_loss")
def causal_lm_loss_log_softmax_gather(logits, ids, attention_mask=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V)
    nll = -logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # (B, T-1)
    if attention_mask is None:
        return nll.mean()
    real = attention_mask[:, 1:].bool()
    return nll[real].mean()


@right("causal_lm_loss")
def causal_lm_loss_class_dim_one(logits, ids, attention_mask=None):
    targets = ids[:, 1:].clone()
    if attention_mask is not None:
        targets[attention_mask[:, 1:] == 0] = -100
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), targets)  # (B, V, T-1) against (B, T-1)


# ---------------------------------------------------------------------------------------------
# Exercise 3 - GPTFromBlocks(config): embeddings, pre-norm causal blocks, final norm, tied head
# ---------------------------------------------------------------------------------------------


class _GPTSkeleton(nn.Module):
    """A correct GPT whose pieces the mistakes below override one at a time."""

    def __init__(self, config):
        super().__init__()
        c = self.config = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.blocks = nn.ModuleList(self.make_block(c) for _ in range(c.n_layers))
        self.norm_f = LayerNorm(c.d_model, eps=c.eps, bias=c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def make_block(self, c):
        return Block(c.d_model, c.n_heads, c.d_ff, activation=c.activation, bias=c.bias, eps=c.eps)

    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "causal|future|leak|mask")
class BlocksWithoutTheCausalMask(_GPTSkeleton):
    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x, _ = block(x)  # every position sees the whole sequence
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "norm_f|final|norm")
class NoFinalNorm(_GPTSkeleton):
    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(x)


@wrong(
    "gpt_from_blocks",
    "tied|tying|tie_weights|share|copy|same tensor|same object|same parameter|identity",
)
class HeadTiedByCopying(_GPTSkeleton):
    def __init__(self, config):
        super().__init__(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            with torch.no_grad():
                self.lm_head.weight.copy_(self.tok_emb.weight)  # equal today, apart after one step


@wrong("gpt_from_blocks", "tied|tying|tie_weights|untied|share")
class TiesEvenWhenTheConfigSaysNo(_GPTSkeleton):
    def __init__(self, config):
        super().__init__(config)
        self.lm_head.weight = self.tok_emb.weight


@wrong("gpt_from_blocks", "position|pos_emb|order")
class NoPositionEmbedding(_GPTSkeleton):
    def forward(self, idx):
        x = self.tok_emb(idx)
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "activation|gelu")
class BlockActivationLeftAtDefault(_GPTSkeleton):
    def make_block(self, c):
        return Block(c.d_model, c.n_heads, c.d_ff, bias=c.bias, eps=c.eps)


@wrong("gpt_from_blocks", "d_ff|hidden|mlp|feed|width")
class MlpWidthLeftAtFourC(_GPTSkeleton):
    def make_block(self, c):
        return Block(c.d_model, c.n_heads, activation=c.activation, bias=c.bias, eps=c.eps)


@wrong("gpt_from_blocks", "pre-norm|post-norm|norm_first|prenorm|postnorm|pre norm|post norm")
class PostNormBlocks(_GPTSkeleton):
    def make_block(self, c):
        return Block(
            c.d_model,
            c.n_heads,
            c.d_ff,
            activation=c.activation,
            norm_first=False,
            bias=c.bias,
            eps=c.eps,
        )


@wrong("gpt_from_blocks", "share|same block|independent|distinct|copies|n_layers|layers|parameters")
class OneBlockRepeated(_GPTSkeleton):
    def __init__(self, config):
        super().__init__(config)
        block = self.make_block(config)
        self.blocks = nn.ModuleList([block] * config.n_layers)  # n_layers references to one block


@wrong("gpt_from_blocks", "ModuleList|register|parameters|state_dict|submodule")
class BlocksInAPlainList(_GPTSkeleton):
    def __init__(self, config):
        super().__init__(config)
        del self.blocks
        self.blocks = [
            self.make_block(config) for _ in range(config.n_layers)
        ]  # invisible to .parameters()


@right("gpt_from_blocks")
class GPTFromBlocksWithAnExplicitMask(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.max_len, config.d_model)
        self.blocks = nn.ModuleList()
        for _ in range(config.n_layers):
            self.blocks.append(
                Block(
                    config.d_model,
                    config.n_heads,
                    d_ff=config.d_ff,
                    activation=config.activation,
                    norm_first=True,
                    bias=config.bias,
                    eps=config.eps,
                )
            )
        self.norm_f = LayerNorm(config.d_model, config.eps, config.bias)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        B, T = idx.shape
        x = self.tok_emb(idx) + self.pos_emb.weight[:T]  # (B, T, C)
        mask = causal_mask(T, device=idx.device)  # (T, T), True = may attend
        for block in self.blocks:
            x = block(x, mask=mask)[0]
        return F.linear(self.norm_f(x), self.lm_head.weight)


# ---------------------------------------------------------------------------------------------
# Exercise 4 - filter_logits: temperature, then top-k (ties kept), then top-p (crossing token kept)
# ---------------------------------------------------------------------------------------------

_NEG_INF = float("-inf")


def _top_k(z, top_k):
    if not top_k or top_k >= z.shape[-1]:
        return z
    kth = z.topk(top_k, dim=-1).values[..., -1:]
    return z.masked_fill(z < kth, _NEG_INF)


def _top_p(z, top_p):
    if top_p is None or top_p >= 1.0:
        return z
    probs, order = torch.softmax(z, dim=-1).sort(dim=-1, descending=True)
    above = probs.cumsum(dim=-1) - probs  # mass of the tokens ahead of each one
    drop_sorted = above >= top_p
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return z.masked_fill(drop, _NEG_INF)


@wrong("filter_logits", "temperature|divid")
def multiplies_by_the_temperature(logits, temperature=1.0, top_k=None, top_p=None):
    return _top_p(_top_k(logits * temperature, top_k), top_p)


@wrong("filter_logits", "temperature", "logits|softmax|probabilit|before")
def temperature_applied_to_probabilities(logits, temperature=1.0, top_k=None, top_p=None):
    probs = torch.softmax(logits, dim=-1) / temperature  # the normalisation cancels it later
    return _top_p(_top_k(torch.log(probs), top_k), top_p)


@wrong("filter_logits", "ties|tied|a tie|tie with")
def top_k_keeps_exactly_k_indices(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k and top_k < z.shape[-1]:
        keep = torch.zeros_like(z, dtype=torch.bool).scatter(
            -1, z.topk(top_k, dim=-1).indices, True
        )
        z = z.masked_fill(~keep, _NEG_INF)
    return _top_p(z, top_p)


@wrong("filter_logits", "vocab|larger than|greater than|exceed|clamp|more than|bigger")
def top_k_larger_than_the_vocabulary_crashes(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = z.topk(top_k, dim=-1).values[..., -1:]  # RuntimeError when top_k > V
        z = z.masked_fill(z < kth, _NEG_INF)
    return _top_p(z, top_p)


@wrong("filter_logits", "zero|top_k=0|top_k = 0|off|disable")
def top_k_zero_not_treated_as_off(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k is not None:
        kth = z.topk(min(top_k, z.shape[-1]), dim=-1).values[..., -1:]  # empty when top_k == 0
        z = z.masked_fill(z < kth, _NEG_INF)
    return _top_p(z, top_p)


@wrong("filter_logits", "cross|reach|inclusive|exclusive|strictly|include|boundary|keeps the token")
def top_p_drops_the_crossing_token(logits, temperature=1.0, top_k=None, top_p=None):
    z = _top_k(logits / temperature, top_k)
    if top_p is not None and top_p < 1.0:
        probs, order = torch.softmax(z, dim=-1).sort(dim=-1, descending=True)
        drop_sorted = probs.cumsum(dim=-1) > top_p  # the token that reaches p goes too
        drop_sorted[..., 0] = False
        z = z.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), _NEG_INF)
    return z


@wrong("filter_logits", "order|renormali|before|after|first")
def top_p_before_top_k(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    return _top_k(_top_p(z, top_p), top_k)


@wrong("filter_logits", "in place|in-place|modif|mutat|clone|copy|unchanged|changed")
def divides_the_callers_logits_in_place(logits, temperature=1.0, top_k=None, top_p=None):
    logits /= temperature
    return _top_p(_top_k(logits, top_k), top_p)


@wrong("filter_logits", "-inf|infinity")
def removed_tokens_set_to_zero(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    removed = torch.isinf(_top_p(_top_k(z, top_k), top_p))
    return z.masked_fill(removed, 0.0)


@wrong("filter_logits", "batch|rows|each row|axis|dim=0|dim 0|last dim|along")
def top_p_cumsum_over_the_batch(logits, temperature=1.0, top_k=None, top_p=None):
    z = _top_k(logits / temperature, top_k)
    if top_p is not None and top_p < 1.0:
        probs, order = torch.softmax(z, dim=-1).sort(dim=-1, descending=True)
        above = probs.cumsum(dim=0) - probs  # dim=0: right for a single (V,) row only
        drop_sorted = above >= top_p
        z = z.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), _NEG_INF)
    return z


@wrong("filter_logits", "1.0|off|disable|no filtering|unchanged")
def top_p_one_still_filters(logits, temperature=1.0, top_k=None, top_p=None):
    z = _top_k(logits / temperature, top_k)
    if (
        top_p is not None
    ):  # 1.0 is meant as "off", but rounding lets the cumulative mass reach it early
        probs, order = torch.softmax(z, dim=-1).sort(dim=-1, descending=True)
        drop_sorted = (probs.cumsum(dim=-1) - probs) >= top_p
        z = z.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), _NEG_INF)
    return z


@right("filter_logits")
def filter_logits_like_hugging_face(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    V = z.shape[-1]
    if top_k is not None and 0 < top_k < V:
        z = torch.where(
            z < torch.topk(z, top_k).values[..., -1, None], torch.full_like(z, _NEG_INF), z
        )
    if top_p is not None and top_p < 1.0:
        sorted_z, order = torch.sort(z, descending=False)
        cumulative = sorted_z.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= 1 - top_p
        remove[..., -1] = False  # the most likely token always stays
        z = z.masked_fill(remove.scatter(-1, order, remove), _NEG_INF)
    return z


@right("filter_logits")
def filter_logits_by_mass_strictly_above(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits.clone() / temperature
    if top_k:
        k = min(top_k, z.shape[-1])
        kth = z.sort(dim=-1, descending=True).values[..., k - 1 : k]
        z[z < kth] = _NEG_INF
    if top_p is not None and top_p != 1.0:
        p = torch.softmax(z, dim=-1)  # (..., V)
        above = (p.unsqueeze(-2) * (p.unsqueeze(-2) > p.unsqueeze(-1))).sum(
            -1
        )  # mass strictly more likely
        z[above >= top_p] = _NEG_INF
    return z


# ---------------------------------------------------------------------------------------------
# Exercise 5 - generate_greedy: a KVCache per block, the newest token only, at its own position
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def _decode(
    model,
    idx,
    max_new_tokens,
    *,
    position=lambda n: n,
    fresh_caches=False,
    shared_cache=False,
    prompt_causal=True,
    refeed_all=False,
    first_row_only=False,
    steps=None,
):
    """Greedy decoding with a cache; each keyword switches on one of the mistakes below.

    ``position(n)`` is the position given to the token at index n of the sequence.
    """
    blocks = list(model.blocks)

    def new_caches():
        if shared_cache:
            one = KVCache()
            return [one] * len(blocks)
        return [KVCache() for _ in blocks]

    def run(x, caches, causal):
        for block, cache in zip(blocks, caches):
            x, _ = block(x, is_causal=causal, cache=cache)
        return x

    def next_token(x):
        logits = model.lm_head(model.norm_f(x[:, -1]))  # (B, V)
        if first_row_only:
            return logits[0].argmax().expand(idx.shape[0], 1)
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)

    caches = new_caches()
    T0 = idx.shape[1]
    x = run(model.tok_emb(idx) + model.pos_emb.weight[:T0], caches, prompt_causal)
    out = idx
    steps = max_new_tokens if steps is None else steps
    for step in range(steps):
        nxt = next_token(x)
        out = torch.cat([out, nxt], dim=1)
        if step == steps - 1:
            break
        if fresh_caches:
            caches = new_caches()
        if refeed_all:
            x = run(model.tok_emb(out) + model.pos_emb.weight[: out.shape[1]], caches, True)
            continue
        n = out.shape[1] - 1  # index of the newest token
        p = position(n)
        x = run(model.tok_emb(nxt) + model.pos_emb.weight[p : p + 1], caches, True)
    return out


@wrong("generate_greedy", "position|offset")
def new_tokens_all_at_position_zero(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, position=lambda n: 0)


@wrong("generate_greedy", "position|offset|off by one|off-by-one")
def new_token_one_position_ahead(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, position=lambda n: n + 1)


@wrong("generate_greedy", "cache|reuse|kvcache|earlier|context")
def fresh_caches_every_step(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, fresh_caches=True)


@wrong("generate_greedy", "cache|kvcache", "block|layer|share|separate|its own")
def one_cache_shared_by_every_block(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, shared_cache=True)


@wrong("generate_greedy", "causal|is_causal|mask|prompt|future")
def prompt_pass_without_the_causal_mask(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, prompt_causal=False)


@wrong("generate_greedy", "only|newest|new token|once|again|twice|duplicat|whole|recompute")
def refeeds_the_whole_sequence_into_the_caches(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, refeed_all=True)


@wrong("generate_greedy", "batch|rows|each row|every row|sequence")
def first_row_decides_for_the_batch(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, first_row_only=True)


@wrong("generate_greedy", "prompt|shape|length|T0")
def returns_only_the_new_tokens(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens)[:, idx.shape[1] :]


@wrong("generate_greedy", "max_new_tokens|number|count|length|shape|too few|fewer|short")
def one_token_short(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, steps=max_new_tokens - 1)


@right("generate_greedy")
def generate_greedy_into_a_buffer(model, idx, max_new_tokens):
    B, T0 = idx.shape
    out = torch.empty(B, T0 + max_new_tokens, dtype=torch.long, device=idx.device)
    out[:, :T0] = idx
    caches = [KVCache() for _ in model.blocks]
    with torch.no_grad():
        x = model.tok_emb(idx) + model.pos_emb.weight[0:T0]
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        for t in range(T0, T0 + max_new_tokens):
            out[:, t] = model.lm_head(model.norm_f(x[:, -1])).argmax(dim=-1)
            if t + 1 == T0 + max_new_tokens:
                break
            x = model.tok_emb(out[:, t : t + 1]) + model.pos_emb.weight[t : t + 1]
            for block, cache in zip(model.blocks, caches):
                x, _ = block(x, is_causal=True, cache=cache)
    return out


@right("generate_greedy")
def generate_greedy_feeding_every_appended_token(model, idx, max_new_tokens):
    # feeds every appended token, the last one too (wasted work, harmless, unless the position table is
    # full); a single new token may see every cached key, so it runs without is_causal
    caches = [KVCache() for _ in model.blocks]
    with torch.no_grad():
        x = model.tok_emb(idx) + model.pos_emb.weight[: idx.shape[1]]
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        for _ in range(max_new_tokens):
            nxt = model.lm_head(model.norm_f(x[:, -1])).argmax(-1)[:, None]
            idx = torch.cat([idx, nxt], dim=1)
            if idx.shape[1] >= model.config.max_len:
                break
            x = model.tok_emb(nxt) + model.pos_emb.weight[idx.shape[1] - 1 : idx.shape[1]]
            for block, cache in zip(model.blocks, caches):
                x, _ = block(x, cache=cache)
    return idx
