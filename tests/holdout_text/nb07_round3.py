"""Holdout for notebook 07 (third round), written from notebooks/07_gpt/07_gpt.ipynb alone (without
reading the checks)."""

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
# First shot, written without reading the checks: 40 of 40 named, 0 generic, 0 misleading,
# 0 passed; 40 of 40 named after the round's check work (29 November).
NAMED_AT_LEAST = 1.0


# ---------------------------------------------------------------------------------------------
# Exercise 1: next_token_batch(data, T, B, generator) -> (x, y), (B, T) long each
# ---------------------------------------------------------------------------------------------


def _windows(data, starts, T):
    x = torch.stack([data[s : s + T] for s in starts.tolist()])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts.tolist()])
    return x, y


@wrong("next_token_batch", "shift|next|t + 1|offset|by one")
def targets_not_shifted(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x, _ = _windows(data, starts, T)
    return x, x.clone()


@wrong("next_token_batch", "last|range|every window|never drawn|len(data)|uniform")
def last_window_never_drawn(data, T, B, generator):
    starts = torch.randint(len(data) - T - 1, (B,), generator=generator)  # one start too few
    return _windows(data, starts, T)


@wrong("next_token_batch", "range|past the end|bound|beyond|len(data)|out of|too far")
def start_can_run_past_the_end(data, T, B, generator):
    # one start too many: at the last one, y is a token short
    starts = torch.randint(len(data) - T + 1, (B,), generator=generator)
    return _windows(data, starts, T)


@wrong("next_token_batch", "generator|seed|reproduc")
def ignores_the_generator(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,))
    return _windows(data, starts, T)


@wrong("next_token_batch", "same|identical|independent|distinct|every row|each row|one start")
def one_start_for_the_whole_batch(data, T, B, generator):
    s = int(torch.randint(len(data) - T, (1,), generator=generator))
    return _windows(data, torch.full((B,), s), T)


@wrong("next_token_batch", "dtype|long|float|integer")
def float_batch_buffers(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x, y = torch.zeros(B, T), torch.zeros(B, T)  # float32
    for b, s in enumerate(starts.tolist()):
        x[b] = data[s : s + T]
        y[b] = data[s + 1 : s + T + 1]
    return x, y


@wrong("next_token_batch", "shape|transpos|(B, T)|dimension|axis")
def returns_time_major(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts.tolist()], dim=1)  # (T, B)
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts.tolist()], dim=1)
    return x, y


@right("next_token_batch")
def next_token_batch_gather(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    index = starts[:, None] + torch.arange(T)  # (B, T)
    return data[index], data[index + 1]


# ---------------------------------------------------------------------------------------------
# Exercise 2: causal_lm_loss(logits, ids, attention_mask=None) -> 0-dim tensor
# ---------------------------------------------------------------------------------------------


def _flat(logits):
    return logits.reshape(-1, logits.shape[-1])


@wrong("causal_lm_loss", "shift|next|t + 1|offset|by one")
def no_shift(logits, ids, attention_mask=None):
    targets = ids if attention_mask is None else ids.masked_fill(attention_mask == 0, -100)
    return F.cross_entropy(_flat(logits), targets.reshape(-1))


@wrong("causal_lm_loss", "shift|direction|previous|revers|t + 1|t - 1")
def shifted_the_wrong_way(logits, ids, attention_mask=None):
    targets = ids[:, :-1]  # logits at 1..T-1 against ids at 0..T-2
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, :-1] == 0, -100)
    return F.cross_entropy(_flat(logits[:, 1:]), targets.reshape(-1))


@wrong("causal_lm_loss", "targets'|target's|t + 1|t+1|input position|1:]")
def mask_read_at_input_positions(logits, ids, attention_mask=None):
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, :-1] == 0, -100)  # the mask of the inputs
    return F.cross_entropy(_flat(logits[:, :-1]), targets.reshape(-1))


@wrong("causal_lm_loss", "attention_mask|ignor|padding")
def attention_mask_ignored(logits, ids, attention_mask=None):
    return F.cross_entropy(_flat(logits[:, :-1]), ids[:, 1:].reshape(-1))


@wrong("causal_lm_loss", "attention_mask|id 0|token 0|zero|pad id|padding id")
def padding_found_by_id_zero(logits, ids, attention_mask=None):
    targets = ids[:, 1:].masked_fill(ids[:, 1:] == 0, -100)  # id 0 is a real token too
    return F.cross_entropy(_flat(logits[:, :-1]), targets.reshape(-1))


@wrong("causal_lm_loss", "divid|denominator|count|number of|all positions|every position")
def averaged_over_padding_too(logits, ids, attention_mask=None):
    per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    if attention_mask is not None:
        per_token = per_token * attention_mask[:, 1:]
    return per_token.mean()


@wrong("causal_lm_loss", "per sequence|per-sequence|each sequence|sequence mean|weight|longer")
def mean_of_sequence_means(logits, ids, attention_mask=None):
    per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    real = (
        torch.ones_like(per_token)
        if attention_mask is None
        else attention_mask[:, 1:].to(per_token.dtype)
    )
    per_sequence = (per_token * real).sum(dim=1) / real.sum(dim=1)
    return per_sequence.mean()


@wrong("causal_lm_loss", "-100|ignore|token 0|zero")
def padding_targets_set_to_zero(logits, ids, attention_mask=None):
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, 0)  # token 0, not "ignore"
    return F.cross_entropy(_flat(logits[:, :-1]), targets.reshape(-1))


@right("causal_lm_loss")
def causal_lm_loss_class_dim(logits, ids, attention_mask=None):
    targets = ids[:, 1:].clone()
    if attention_mask is not None:
        targets[attention_mask[:, 1:] == 0] = -100
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), targets)  # (B, V, T-1) against (B, T-1)


@right("causal_lm_loss")
def causal_lm_loss_weighted_log_probs(logits, ids, attention_mask=None):
    log_probs = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V)
    picked = log_probs.gather(-1, ids[:, 1:, None])[..., 0]  # (B, T-1)
    if attention_mask is None:
        return -picked.mean()
    real = attention_mask[:, 1:].to(picked.dtype)
    return -(picked * real).sum() / real.sum()


# ---------------------------------------------------------------------------------------------
# Exercise 3: GPTFromBlocks(config), forward(idx) -> (B, T, V) logits
# ---------------------------------------------------------------------------------------------


class _GPT(nn.Module):
    """A correct GPTFromBlocks; each wrong class below changes one thing in it."""

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

    def embed(self, idx):
        return self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "position|pos_emb|order")
class GPTWithoutPositions(_GPT):
    def embed(self, idx):
        return self.tok_emb(idx)


@wrong("gpt_from_blocks", "causal|future|is_causal|leak")
class GPTWithoutCausalMask(_GPT):
    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x, _ = block(x)  # every position sees the whole sequence
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "norm_f|final|layer norm|LayerNorm")
class GPTWithoutFinalNorm(_GPT):
    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(x)


@wrong("gpt_from_blocks", "tie|tied|same Parameter|same parameter|is tok_emb|copy|copied|shared")
class GPTHeadCopiedNotTied(_GPT):
    def __init__(self, config):
        super().__init__(config)
        if config.tie_weights:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
            with torch.no_grad():
                self.lm_head.weight.copy_(self.tok_emb.weight)  # equal today, apart after one step


@wrong("gpt_from_blocks", "tie|tied|tie_weights|untied|shared")
class GPTAlwaysTied(_GPT):
    def __init__(self, config):
        super().__init__(config)
        self.lm_head.weight = self.tok_emb.weight  # also when tie_weights=False


@wrong("gpt_from_blocks", "activation|gelu|tanh|config")
class GPTBlocksWithDefaultActivation(_GPT):
    def make_block(self, c):
        # no activation=: Block's default "gelu", not the config's (GPT-2's "gelu_tanh")
        return Block(c.d_model, c.n_heads, c.d_ff, bias=c.bias, eps=c.eps)


@wrong("gpt_from_blocks", "share|same block|independent|separate|copies|distinct|one block")
class GPTOneBlockRepeated(_GPT):
    def __init__(self, config):
        super().__init__(config)
        block = self.make_block(config)
        self.blocks = nn.ModuleList([block] * config.n_layers)


@wrong("gpt_from_blocks", "pre-norm|post-norm|prenorm|postnorm|norm_first|before")
class GPTPostNormBlocks(_GPT):
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


@right("gpt_from_blocks")
class GPTFromBlocksWithMask(nn.Module):
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
                    config.d_ff,
                    activation=config.activation,
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
        mask = torch.ones(
            T, T, dtype=torch.bool, device=idx.device
        ).tril()  # query t sees keys s <= t
        x = self.tok_emb(idx) + self.pos_emb.weight[:T]
        for block in self.blocks:
            x = block(x, mask=mask)[0]
        return self.lm_head(self.norm_f(x))


# ---------------------------------------------------------------------------------------------
# Exercise 4: filter_logits(logits, temperature=1.0, top_k=None, top_p=None)
# ---------------------------------------------------------------------------------------------


def _top_k(z, k, fill=float("-inf")):
    kth = torch.topk(z, min(k, z.shape[-1]), dim=-1).values[..., -1:]
    return z.masked_fill(z < kth, fill)


def _top_p(z, p, fill=float("-inf")):
    probs = torch.softmax(z, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the tokens more likely than each
    remove = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before >= p)
    return z.masked_fill(remove, fill)


@wrong("filter_logits", "temperature|divid|τ")
def temperature_multiplies(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits * temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "order|first|before|applied last")
def temperature_applied_last(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)  # the nucleus of the untempered distribution
    return z / temperature


@wrong("filter_logits", "tie|tied|equal")
def top_k_drops_ties(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        values, index = torch.topk(z, min(top_k, z.shape[-1]), dim=-1)
        # exactly k survive: a token tied with the k-th is cut
        z = torch.full_like(z, float("-inf")).scatter(-1, index, values)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "larger|greater|exceed|more than|vocab|> V|everything")
def top_k_larger_than_vocab_crashes(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]  # fails when top_k > V
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "top_k=0|top_k = 0|0 = off|zero|disabled|switch")
def top_k_zero_not_treated_as_off(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k is not None:  # top_k=0 reaches topk(z, 0)
        kth = torch.topk(z, min(top_k, z.shape[-1]), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "cross|reach|boundary|smallest set")
def top_p_drops_the_crossing_token(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        sorted_probs, order = torch.softmax(z, dim=-1).sort(dim=-1, descending=True)
        remove_sorted = sorted_probs.cumsum(dim=-1) > top_p  # the token that crosses p goes too
        remove_sorted[..., 0] = False
        remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
        z = z.masked_fill(remove, float("-inf"))
    return z


@wrong("filter_logits", "renormal|after top-k|order|top-k first")
def top_p_on_probabilities_before_top_k(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    keep = torch.ones_like(z, dtype=torch.bool)
    if top_k:
        keep &= torch.isfinite(_top_k(z, top_k))
    if top_p is not None and top_p < 1.0:
        # the mass is measured over all V tokens, not renormalised over the top-k survivors
        keep &= torch.isfinite(_top_p(z, top_p))
    return z.masked_fill(~keep, float("-inf"))


@wrong("filter_logits", "-inf|inf|infinity")
def removed_tokens_set_to_zero(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k, fill=0.0)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p, fill=0.0)
    return z


@wrong("filter_logits", "in place|in-place|modif|argument|copy|clone")
def edits_logits_in_place(logits, temperature=1.0, top_k=None, top_p=None):
    logits /= temperature
    if top_k:
        logits.masked_fill_(~torch.isfinite(_top_k(logits, top_k)), float("-inf"))
    if top_p is not None and top_p < 1.0:
        logits.masked_fill_(~torch.isfinite(_top_p(logits, top_p)), float("-inf"))
    return logits


@right("filter_logits")
def filter_logits_ascending_like_hf(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    V = z.shape[-1]
    if top_k and top_k < V:
        kth = z.sort(dim=-1, descending=True).values[..., top_k - 1 : top_k]
        z = torch.where(z < kth, torch.full_like(z, float("-inf")), z)
    if top_p is not None and top_p < 1.0:
        ascending, order = z.sort(dim=-1)
        cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cumulative <= 1 - top_p  # the mass above this token already reaches p
        remove_sorted[..., -1] = False  # the most likely token always stays
        remove = remove_sorted.scatter(-1, order, remove_sorted)
        z = z.masked_fill(remove, float("-inf"))
    return z


# ---------------------------------------------------------------------------------------------
# Exercise 5: generate_greedy(model, idx, max_new_tokens) with one KVCache per block
# ---------------------------------------------------------------------------------------------


def _prompt_pass(model, idx, caches, is_causal=True):
    x = model.tok_emb(idx) + model.pos_emb.weight[: idx.shape[1]]
    for block, cache in zip(model.blocks, caches):
        x, _ = block(x, is_causal=is_causal, cache=cache)
    return x


def _step(model, token, position, caches):
    x = model.tok_emb(token) + model.pos_emb.weight[position : position + 1]
    for block, cache in zip(model.blocks, caches):
        x, _ = block(x, cache=cache)
    return x


def _next_token(model, x):
    return model.lm_head(model.norm_f(x[:, -1])).argmax(dim=-1, keepdim=True)  # (B, 1)


@wrong("generate_greedy", "position|offset|pos_emb")
def new_tokens_at_position_zero(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    x = _prompt_pass(model, idx, caches)
    out = idx
    for _ in range(max_new_tokens):
        token = _next_token(model, x)
        out = torch.cat([out, token], dim=1)
        x = _step(model, token, 0, caches)  # every new token gets P[0]
    return out


@wrong("generate_greedy", "position|offset|off by one|pos_emb")
def new_token_one_position_too_far(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    x = _prompt_pass(model, idx, caches)
    out = idx
    for step in range(max_new_tokens):
        token = _next_token(model, x)
        out = torch.cat([out, token], dim=1)
        if step < max_new_tokens - 1:
            x = _step(model, token, out.shape[1], caches)  # the length, not the token's index
    return out


@wrong("generate_greedy", "cache|recompute|only the new|newest|once|whole sequence")
def recomputes_everything_without_cache(model, idx, max_new_tokens):
    out = idx
    for _ in range(max_new_tokens):
        x = model.tok_emb(out) + model.pos_emb.weight[: out.shape[1]]
        for block in model.blocks:
            x, _ = block(x, is_causal=True)
        out = torch.cat([out, _next_token(model, x)], dim=1)
    return out


@wrong("generate_greedy", "cache|only the new|newest|once|twice|duplicate|whole sequence")
def refeeds_the_whole_sequence_into_the_caches(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    for _ in range(max_new_tokens):
        x = _prompt_pass(model, out, caches)  # the caches grow by the whole text at every step
        out = torch.cat([out, _next_token(model, x)], dim=1)
    return out


@wrong("generate_greedy", "norm|norm_f|final")
def skips_the_final_norm(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    x = _prompt_pass(model, idx, caches)
    out = idx
    for _ in range(max_new_tokens):
        token = model.lm_head(x[:, -1]).argmax(dim=-1, keepdim=True)
        out = torch.cat([out, token], dim=1)
        x = _step(model, token, out.shape[1] - 1, caches)
    return out


@wrong("generate_greedy", "causal|is_causal|future")
def prompt_pass_without_causal_mask(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    x = _prompt_pass(model, idx, caches, is_causal=False)  # prompt tokens see later prompt tokens
    out = idx
    for _ in range(max_new_tokens):
        token = _next_token(model, x)
        out = torch.cat([out, token], dim=1)
        x = _step(model, token, out.shape[1] - 1, caches)
    return out


@wrong("generate_greedy", "cache|per block|each block|one KVCache|shared|layer")
def one_cache_shared_by_all_blocks(model, idx, max_new_tokens):
    cache = KVCache()
    caches = [cache] * len(model.blocks)  # every block appends its keys to the same cache
    x = _prompt_pass(model, idx, caches)
    out = idx
    for _ in range(max_new_tokens):
        token = _next_token(model, x)
        out = torch.cat([out, token], dim=1)
        x = _step(model, token, out.shape[1] - 1, caches)
    return out


@wrong("generate_greedy", "batch|each sequence|every sequence|first row|row 0")
def first_row_decides_for_every_row(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    x = _prompt_pass(model, idx, caches)
    out = idx
    for _ in range(max_new_tokens):
        logits = model.lm_head(model.norm_f(x[0, -1]))  # (V,): written for a batch of one
        token = logits.argmax().expand(idx.shape[0], 1)
        out = torch.cat([out, token], dim=1)
        x = _step(model, token, out.shape[1] - 1, caches)
    return out


@right("generate_greedy")
@torch.no_grad()
def generate_greedy_cached_loop(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out, tokens, offset = [idx], idx, 0
    for _ in range(max_new_tokens):
        T = tokens.shape[1]
        x = model.tok_emb(tokens) + model.pos_emb.weight[offset : offset + T]
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)  # a single new query sees every cached key
        offset += T
        tokens = model.lm_head(model.norm_f(x[:, -1])).argmax(dim=-1, keepdim=True)  # (B, 1)
        out.append(tokens)
    return torch.cat(out, dim=1)
