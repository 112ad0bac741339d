"""Second holdout for notebook 07 (GPT): wrong implementations written from the notebook's text and
solution alone, by a second helper who had read neither the checks nor ``nb07.py``, and never used
to tune the checks until measured. Classes the first holdout already reported unnamed (the loss's
real-token denominator, perplexity, label smoothing, padding marked -1; a norm after every block,
the upper-triangle mask, relu, a plain list of blocks; the k-th smallest threshold, a cumulative
sum in vocabulary order, a first-row threshold; blocks only for the prompt, caches reset) are
avoided here.

Figures (named / generic / misleading / passed):
  before tuning, the first 76 mistakes:   66 / 7 / 3 / 0 (87% named)
    next_token_batch 10/12 (a check crash on a short window, randperm generic),
    causal_lm_loss 13/16 (time-major flattening and a softmax over time misnamed as padding,
    padding ignored as token 0 generic), gpt_from_blocks 15/18 (reversed blocks, hidden states
    returned, lm_head bypassed: generic), filter_logits 15/15, generate_greedy 13/15 (one token
    short, sampling instead of argmax: generic).
  (nb07 at the same time: 106 mistakes, 92 / 14 / 0 / 0.)
  after tuning, the same 76:               76 / 0 / 0 / 0 (nb07: 106 / 0 / 0 / 0)
  written after tuning, 25 (5 per exercise), measured once:
                                            19 / 6 / 0 / 0 by the harness (76%), but one of the
    19 (after_greedy_cache_per_call, words then "cache|once|before the loop") was in substance
    misleading: the KV-cache recorder compared cache ids, and Python reused the id of a freed
    cache, so "several blocks were given the same KVCache" was claimed. Honest figure:
    18 named / 6 generic / 1 misleading / 0 passed (72%). The recorder now holds the caches
    (a correctness fix, not tuning) and that entry's words were tightened; it is now named by
    the catalogue's "a new, empty cache each step". The 6 generic are left as measured: a
    per-position average of the loss, the loss's sign flipped, norm_f also applied to the
    embeddings, a second residual around Block, the prompt's keys never cached, and an argmax
    taken over the hidden state instead of the logits.
  module total now: 101 mistakes, 95 / 6 / 0 / 0 (94%).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tests.holdout._harness import collector
from transformer_lab.blocks import Block, LayerNorm
from transformer_lab.heads import KVCache

MISTAKES: list = []
wrong = collector(MISTAKES, "07")
NAMED_AT_LEAST = 0.94


# ------------------------------------------------------------------ Exercise 1: next_token_batch


def _windows(data, starts, T):
    return data[starts[:, None] + torch.arange(T + 1)]  # (B, T + 1)


@wrong("next_token_batch", "start|range|last window|every window")
def batch_never_last_window(data, T, B, generator):
    starts = torch.randint(len(data) - T - 1, (B,), generator=generator)  # "minus one to be safe"
    w = _windows(data, starts, T)
    return w[:, :-1], w[:, 1:]


@wrong("next_token_batch", "start|range|past the end|out of range|index")
def batch_window_past_end(data, T, B, generator):
    starts = torch.randint(len(data) - T + 1, (B,), generator=generator)
    xs = [data[s : s + T] for s in starts.tolist()]
    ys = [data[s + 1 : s + T + 1] for s in starts.tolist()]
    ys = [torch.cat([y, y[-1:]]) if len(y) < T else y for y in ys]  # patched the crash
    return torch.stack(xs), torch.stack(ys)


@wrong("next_token_batch", "generator|seed")
def batch_global_rng(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,))
    w = _windows(data, starts, T)
    return w[:, :-1], w[:, 1:]


@wrong("next_token_batch", "swap|x and y|other way|reversed|shift")
def batch_swapped_pair(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    w = _windows(data, starts, T)
    return w[:, 1:], w[:, :-1]


@wrong("next_token_batch", "shift|same as x|equal to x|identical")
def batch_unshifted_targets(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    w = _windows(data, starts, T)
    return w[:, :-1], w[:, :-1].clone()


@wrong("next_token_batch", "dtype|long|float")
def batch_float_buffers(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x, y = torch.zeros(B, T), torch.zeros(B, T)
    for b, s in enumerate(starts.tolist()):
        x[b] = data[s : s + T]
        y[b] = data[s + 1 : s + T + 1]
    return x, y


@wrong("next_token_batch", "shape|(b, t)|transpos")
def batch_time_major(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    w = data[torch.arange(T + 1)[:, None] + starts]  # (T + 1, B): broadcast the other way
    return w[:-1], w[1:]


@wrong("next_token_batch", "same start|identical|every row|same window|one start")
def batch_one_start(data, T, B, generator):
    s = torch.randint(len(data) - T, (1,), generator=generator).expand(B)
    w = _windows(data, s, T)
    return w[:, :-1], w[:, 1:]


@wrong("next_token_batch", "replacement|randperm|independent|randint")
def batch_randperm(data, T, B, generator):
    starts = torch.randperm(len(data) - T, generator=generator)[:B]  # no repeated windows
    w = _windows(data, starts, T)
    return w[:, :-1], w[:, 1:]


@wrong("next_token_batch", "last|token after the window|y[:, -1]")
def batch_last_target_repeated(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = data[starts[:, None] + torch.arange(T)]  # (B, T): only T tokens read
    return x, torch.cat([x[:, 1:], x[:, -1:]], dim=1)  # the last target repeats the last input


@wrong("next_token_batch", "tuple|two|(x, y)")
def batch_stacked(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    w = _windows(data, starts, T)
    return torch.stack([w[:, :-1], w[:, 1:]])  # (2, B, T)


@wrong("next_token_batch", "shape|(b, t)|every position|window")
def batch_last_target_only(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    w = _windows(data, starts, T)
    return w[:, :-1], w[:, -1]  # the token after the window only


# ------------------------------------------------------------------ Exercise 2: causal_lm_loss


def _targets(ids, attention_mask, fill=-100):
    t = ids[:, 1:]
    if attention_mask is not None:
        t = t.masked_fill(attention_mask[:, 1:] == 0, fill)
    return t


@wrong("causal_lm_loss", "shift")
def loss_no_shift(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = ids if attention_mask is None else ids.masked_fill(attention_mask == 0, -100)
    return F.cross_entropy(logits.reshape(-1, V), t.reshape(-1))


@wrong("causal_lm_loss", "shift|direction|wrong way|previous")
def loss_shift_backwards(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = ids[:, :-1]
    if attention_mask is not None:
        t = t.masked_fill(attention_mask[:, :-1] == 0, -100)
    return F.cross_entropy(logits[:, 1:].reshape(-1, V), t.reshape(-1))


@wrong("causal_lm_loss", "mask|target")
def loss_mask_at_inputs(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = ids[:, 1:]
    if attention_mask is not None:
        t = t.masked_fill(attention_mask[:, :-1] == 0, -100)  # the input's position
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), t.reshape(-1))


@wrong("causal_lm_loss", "mask|padding")
def loss_mask_ignored(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


@wrong("causal_lm_loss", "mask|padding|invert")
def loss_mask_inverted(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = ids[:, 1:]
    if attention_mask is not None:
        t = t.masked_fill(attention_mask[:, 1:] == 1, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), t.reshape(-1))


@wrong("causal_lm_loss", "sum|mean")
def loss_summed(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = _targets(ids, attention_mask)
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, V), t.reshape(-1), ignore_index=-100, reduction="sum"
    )


@wrong("causal_lm_loss", "batch|order|flatten|transpos|pair")
def loss_flatten_time_major(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = _targets(ids, attention_mask)
    z = logits[:, :-1].transpose(0, 1).reshape(-1, V)  # (T - 1) * B rows, time-major
    return F.cross_entropy(z, t.reshape(-1), ignore_index=-100)


@wrong("causal_lm_loss", "softmax|dim|axis|vocabulary")
def loss_log_softmax_time_axis(logits, ids, attention_mask=None):
    logp = torch.log_softmax(logits, dim=1)[:, :-1]  # normalised over positions
    t = ids[:, 1:]
    nll = -logp.gather(-1, t[..., None])[..., 0]  # (B, T - 1)
    keep = torch.ones_like(nll) if attention_mask is None else attention_mask[:, 1:].to(nll.dtype)
    return (nll * keep).sum() / keep.sum()


@wrong("causal_lm_loss", "softmax|log")
def loss_raw_logits(logits, ids, attention_mask=None):
    t = ids[:, 1:]
    nll = -logits[:, :-1].gather(-1, t[..., None])[..., 0]  # forgot the log-softmax
    keep = torch.ones_like(nll) if attention_mask is None else attention_mask[:, 1:].to(nll.dtype)
    return (nll * keep).sum() / keep.sum()


@wrong("causal_lm_loss", "0-dim|scalar|shape|dimension")
def loss_per_position(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = _targets(ids, attention_mask)
    per = F.cross_entropy(logits[:, :-1].reshape(-1, V), t.reshape(-1), reduction="none")
    return per[t.reshape(-1) != -100]


@wrong("causal_lm_loss", "grad")
def loss_item(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = _targets(ids, attention_mask)
    return torch.tensor(F.cross_entropy(logits[:, :-1].reshape(-1, V), t.reshape(-1)).item())


@wrong("causal_lm_loss", "in place|in-place|modif|changed")
def loss_edits_ids(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = ids[:, 1:]
    if attention_mask is not None:
        t[attention_mask[:, 1:] == 0] = -100  # a view: writes into the caller's ids
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), t.reshape(-1))


@wrong("causal_lm_loss", "sequence|average|mean|weight")
def loss_mean_of_sequence_means(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = _targets(ids, attention_mask)
    per = F.cross_entropy(logits[:, :-1].reshape(-1, V), t.reshape(-1), reduction="none")
    per = per.view(t.shape)  # (B, T - 1), 0 where ignored
    counts = (t != -100).sum(1).clamp(min=1)
    return (per.sum(1) / counts).mean()


@wrong("causal_lm_loss", "last position|roll|wrap|shift")
def loss_rolled_targets(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = torch.roll(ids, -1, dims=1)  # the last position "predicts" the first token
    if attention_mask is not None:
        t = t.masked_fill(torch.roll(attention_mask, -1, dims=1) == 0, -100)
    return F.cross_entropy(logits.reshape(-1, V), t.reshape(-1))


@wrong("causal_lm_loss", "token 0|ignore_index|padding|-100")
def loss_pad_as_zero(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = _targets(ids, attention_mask, fill=0)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), t.reshape(-1), ignore_index=0)


@wrong("causal_lm_loss", "mask|row|batch|sequence")
def loss_first_row_mask(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = ids[:, 1:]
    if attention_mask is not None:
        t = t.masked_fill(attention_mask[0, 1:] == 0, -100)  # row 0's padding for every row
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), t.reshape(-1))


# ------------------------------------------------------------------ Exercise 3: gpt_from_blocks


class _GPTBase(nn.Module):
    """The solution, with hooks to break one piece at a time."""

    norm_first = True
    head_bias = False

    def __init__(self, config):
        super().__init__()
        c = self.config = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.blocks = self.make_blocks(c)
        self.norm_f = self.make_norm(c)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=self.head_bias)
        self.tie(c)

    def make_blocks(self, c):
        return nn.ModuleList(
            Block(
                c.d_model,
                c.n_heads,
                c.d_ff,
                activation=c.activation,
                bias=c.bias,
                eps=c.eps,
                norm_first=self.norm_first,
            )  # fmt: skip
            for _ in range(c.n_layers)
        )

    def make_norm(self, c):
        return LayerNorm(c.d_model, c.eps, c.bias)

    def tie(self, c):
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def embed(self, idx):
        return self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1]))

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "causal|future|leak")
class GPTNoCausal(_GPTBase):
    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x, _ = block(x)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "position")
class GPTNoPositions(_GPTBase):
    def embed(self, idx):
        return self.tok_emb(idx)


@wrong("gpt_from_blocks", "position")
class GPTPositionsFromIds(_GPTBase):
    def embed(self, idx):
        return self.tok_emb(idx) + self.pos_emb(idx)  # looked up by token id


@wrong("gpt_from_blocks", "position|offset|off by one")
class GPTOneBasedPositions(_GPTBase):
    def embed(self, idx):
        T = idx.shape[1]
        return self.tok_emb(idx) + self.pos_emb(
            torch.arange(1, T + 1).clamp(max=self.config.max_len - 1)
        )


@wrong("gpt_from_blocks", "norm_f|final norm|final layer norm")
class GPTNoFinalNorm(_GPTBase):
    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(x)


@wrong("gpt_from_blocks", "tie|tied")
class GPTNeverTied(_GPTBase):
    def tie(self, c):
        pass


@wrong("gpt_from_blocks", "tie|tied|same parameter|copy|copied")
class GPTTiedByCopy(_GPTBase):
    def tie(self, c):
        if c.tie_weights:
            with torch.no_grad():
                self.lm_head.weight.copy_(self.tok_emb.weight)


@wrong("gpt_from_blocks", "tie|tied")
class GPTAlwaysTied(_GPTBase):
    def tie(self, c):
        self.lm_head.weight = self.tok_emb.weight


@wrong("gpt_from_blocks", "bias")
class GPTHeadBias(_GPTBase):
    head_bias = True


@wrong("gpt_from_blocks", "eps")
class GPTDefaultEps(_GPTBase):
    def make_norm(self, c):
        return LayerNorm(c.d_model, bias=c.bias)


@wrong("gpt_from_blocks", "d_ff|hidden|mlp|width")
class GPTDefaultDff(_GPTBase):
    def make_blocks(self, c):
        return nn.ModuleList(
            Block(c.d_model, c.n_heads, activation=c.activation, bias=c.bias, eps=c.eps)
            for _ in range(c.n_layers)
        )


@wrong("gpt_from_blocks", "activation|gelu")
class GPTDefaultActivation(_GPTBase):
    def make_blocks(self, c):
        return nn.ModuleList(
            Block(c.d_model, c.n_heads, c.d_ff, bias=c.bias, eps=c.eps) for _ in range(c.n_layers)
        )


@wrong("gpt_from_blocks", "pre-norm|norm_first|post-norm")
class GPTPostNorm(_GPTBase):
    norm_first = False


@wrong("gpt_from_blocks", "n_layers|number of blocks|blocks")
class GPTOneBlockShort(_GPTBase):
    def make_blocks(self, c):
        return nn.ModuleList(
            Block(c.d_model, c.n_heads, c.d_ff, activation=c.activation, bias=c.bias, eps=c.eps)
            for _ in range(c.n_layers - 1 if c.n_layers > 1 else 1)
        )


@wrong("gpt_from_blocks", "order|revers")
class GPTReversedBlocks(_GPTBase):
    def forward(self, idx):
        x = self.embed(idx)
        for block in reversed(self.blocks):
            x, _ = block(x, is_causal=True)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "lm_head|head|vocabulary|d_model")
class GPTReturnsHidden(_GPTBase):
    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.norm_f(x)


@wrong("gpt_from_blocks", "scale|sqrt")
class GPTScaledEmbedding(_GPTBase):
    def embed(self, idx):
        return self.tok_emb(idx) * math.sqrt(self.config.d_model) + self.pos_emb(
            torch.arange(idx.shape[1])
        )


@wrong("gpt_from_blocks", "tie|lm_head|head")
class GPTHeadFromEmbeddingAlways(_GPTBase):
    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.norm_f(x) @ self.tok_emb.weight.T  # ignores lm_head when untied


# ------------------------------------------------------------------ Exercise 4: filter_logits


def _top_p(z, top_p):
    sorted_z, order = torch.sort(z, dim=-1, descending=True)
    probs = torch.softmax(sorted_z, dim=-1)
    before = probs.cumsum(-1) - probs
    rm = before >= top_p
    return z.masked_fill(rm.scatter(-1, order, rm), float("-inf"))


def _top_k(z, top_k):
    kth = torch.topk(z, min(top_k, z.shape[-1]), dim=-1).values[..., -1:]
    return z.masked_fill(z < kth, float("-inf"))


@wrong("filter_logits", "temperature|divide")
def filter_times_temperature(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits * temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "temperature|order|before|first")
def filter_temperature_last(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z / temperature


@wrong("filter_logits", "tie|tied")
def filter_topk_by_indices(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        idx = torch.topk(z, min(top_k, z.shape[-1]), dim=-1).indices
        keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
        z = z.masked_fill(~keep, float("-inf"))
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "top_k|larger|vocabulary|v")
def filter_topk_no_clamp(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]  # fails when top_k > V
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "top_k=0|0|off")
def filter_topk_zero_on(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k is not None:
        k = max(1, min(top_k, z.shape[-1]))  # 0 keeps "at least one"
        z = _top_k(z, k)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "cross|reach|crossing")
def filter_top_p_drops_crossing(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        sorted_z, order = torch.sort(z, dim=-1, descending=True)
        cum = torch.softmax(sorted_z, -1).cumsum(-1)
        rm = cum > top_p
        rm[..., 0] = False
        z = z.masked_fill(rm.scatter(-1, order, rm), float("-inf"))
    return z


@wrong("filter_logits", "renormali|after top-k|top-k")
def filter_top_p_unrenormalised(logits, temperature=1.0, top_k=None, top_p=None):
    z0 = logits / temperature
    z = _top_k(z0, top_k) if top_k else z0
    if top_p is not None and top_p < 1.0:
        probs_all = torch.softmax(z0, -1)  # probabilities before top-k
        sorted_p, order = torch.sort(probs_all, dim=-1, descending=True)
        rm = (sorted_p.cumsum(-1) - sorted_p) >= top_p
        z = z.masked_fill(rm.scatter(-1, order, rm), float("-inf"))
    return z


@wrong("filter_logits", "probabilit|softmax")
def filter_top_p_on_logits(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        sorted_z, order = torch.sort(z, dim=-1, descending=True)
        s = sorted_z.masked_fill(torch.isinf(sorted_z), 0.0)
        rm = (s.cumsum(-1) - s) >= top_p  # cumulative logits, not probabilities
        z = z.masked_fill(rm.scatter(-1, order, rm), float("-inf"))
    return z


@wrong("filter_logits", "in place|in-place|modif|changed")
def filter_in_place(logits, temperature=1.0, top_k=None, top_p=None):
    logits /= temperature
    z = logits
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "-inf|infinity|inf")
def filter_zero_fill(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    keep = torch.ones_like(z, dtype=torch.bool)
    if top_k:
        keep &= torch.isfinite(_top_k(z, top_k))
    if top_p is not None and top_p < 1.0:
        keep &= torch.isfinite(_top_p(z.masked_fill(~keep, float("-inf")), top_p))
    return z * keep  # removed tokens become 0


@wrong("filter_logits", "dim|last dimension|axis")
def filter_topk_dim0(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        kth = torch.topk(z, min(top_k, z.shape[0]), dim=0).values[-1:]
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "logit|probabilit|softmax")
def filter_returns_probs(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return torch.softmax(z, -1)


@wrong("filter_logits", "order|scatter|permut|back|vocabulary order|sorted")
def filter_top_p_gather_back(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        sorted_z, order = torch.sort(z, dim=-1, descending=True)
        probs = torch.softmax(sorted_z, -1)
        rm = (probs.cumsum(-1) - probs) >= top_p
        z = z.masked_fill(rm.gather(-1, order), float("-inf"))  # gather is not the inverse
    return z


@wrong("filter_logits", "top-k|top_k|one too many|k + 1|k+1")
def filter_topk_keeps_k_plus_one(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        s = z.sort(dim=-1, descending=True).values
        kth = s[..., min(top_k, z.shape[-1] - 1) : min(top_k, z.shape[-1] - 1) + 1]  # index k
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "order|before top-p|top-k first|after top-p")
def filter_top_p_then_top_k(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    if top_k:
        z = _top_k(z, top_k)
    return z


# ------------------------------------------------------------------ Exercise 5: generate_greedy


def _decode(model, idx, max_new_tokens, *, step_pos=None, head=None, feed=None, pick=None,
            prompt_causal=True, caches=None, out_fn=None, steps=None):  # fmt: skip
    """The solution with optional replacements of one piece."""
    caches = caches if caches is not None else [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    first = True
    for _ in range(max_new_tokens if steps is None else steps(max_new_tokens)):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=prompt_causal or not first, cache=cache)
        first = False
        logits = head(model, x) if head else model.lm_head(model.norm_f(x[:, -1]))
        next_id = pick(logits) if pick else logits.argmax(dim=-1, keepdim=True)
        out = torch.cat([out, next_id], dim=1)
        tok = feed(out, idx, next_id) if feed else next_id
        pos = step_pos(model, out) if step_pos else model.pos_emb(1, offset=out.shape[1] - 1)
        if out.shape[1] < model.config.max_len or step_pos is None:
            x = model.tok_emb(tok) + (pos if pos is not None else 0)
    return out_fn(out, idx) if out_fn else out


@wrong("generate_greedy", "position|offset")
def greedy_position_zero(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, step_pos=lambda m, out: m.pos_emb(1))


@wrong("generate_greedy", "position|offset")
def greedy_position_one_ahead(model, idx, max_new_tokens):
    def pos(m, out):
        L = min(out.shape[1], m.config.max_len - 1)
        return m.pos_emb(1, offset=L)

    return _decode(model, idx, max_new_tokens, step_pos=pos)


@wrong("generate_greedy", "position")
def greedy_no_position_for_new(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, step_pos=lambda m, out: None)


@wrong("generate_greedy", "norm_f|final norm|final layer norm")
def greedy_no_final_norm(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, head=lambda m, x: m.lm_head(x[:, -1]))


@wrong("generate_greedy", "prompt")
def greedy_new_tokens_only(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, out_fn=lambda out, idx: out[:, idx.shape[1] :])


@wrong("generate_greedy", "last position|last")
def greedy_first_position(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, head=lambda m, x: m.lm_head(m.norm_f(x[:, 0])))


@wrong("generate_greedy", "one cache per block|per block|cache|share")
def greedy_one_cache_for_all(model, idx, max_new_tokens):
    shared = KVCache()
    return _decode(model, idx, max_new_tokens, caches=[shared] * len(model.blocks))


@wrong("generate_greedy", "causal|is_causal|mask")
def greedy_prompt_not_causal(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, prompt_causal=False)


@wrong("generate_greedy", "max_new_tokens|too few|one short|new token")
def greedy_one_token_short(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, steps=lambda n: max(n - 1, 0))


@wrong("generate_greedy", "argmax|sampl|multinomial")
def greedy_samples(model, idx, max_new_tokens):
    g = torch.Generator().manual_seed(0)
    pick = lambda z: torch.multinomial(torch.softmax(z, -1), 1, generator=g)  # noqa: E731
    return _decode(model, idx, max_new_tokens, pick=pick)


@wrong("generate_greedy", "new token|newest|feed|last token|appended")
def greedy_feeds_last_prompt_token(model, idx, max_new_tokens):
    return _decode(model, idx, max_new_tokens, feed=lambda out, idx, nxt: idx[:, -1:])


@wrong("generate_greedy", "cache")
def greedy_new_token_without_cache(model, idx, max_new_tokens):
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    caches = [KVCache() for _ in model.blocks]
    for step in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache if step == 0 else None)
        next_id = model.lm_head(model.norm_f(x[:, -1])).argmax(-1, keepdim=True)
        out = torch.cat([out, next_id], dim=1)
        x = model.tok_emb(next_id) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out


@wrong("generate_greedy", "batch|row|each sequence|first")
def greedy_first_row_for_all(model, idx, max_new_tokens):
    pick = lambda z: z[:1].argmax(-1, keepdim=True).expand(z.shape[0], 1)  # noqa: E731
    return _decode(model, idx, max_new_tokens, pick=pick)


@wrong("generate_greedy", "dtype|long|float")
def greedy_float_output(model, idx, max_new_tokens):
    out = _decode(model, idx, max_new_tokens)
    buf = torch.zeros(out.shape)
    buf[:] = out
    return buf


@wrong("generate_greedy", "only the new|whole|cache|duplicate|again")
def greedy_refeeds_everything(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    for _ in range(max_new_tokens):
        x = model.tok_emb(out) + model.pos_emb(out.shape[1])
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)  # the cache keeps growing with repeats
        next_id = model.lm_head(model.norm_f(x[:, -1])).argmax(-1, keepdim=True)
        out = torch.cat([out, next_id], dim=1)
    return out


# =================================================================================================
# Written after tuning: never used to change the checks (their figure is reported separately).
# =================================================================================================


@wrong("next_token_batch", "start|range|every window|0 ..")
def after_batch_never_start_zero(data, T, B, generator):
    starts = torch.randint(1, len(data) - T, (B,), generator=generator)  # "1-based"
    w = _windows(data, starts, T)
    return w[:, :-1], w[:, 1:]


@wrong("next_token_batch", "same window|same start|one start|shift|same as x|consecutive")
def after_batch_two_draws(data, T, B, generator):
    sx = torch.randint(len(data) - T, (B,), generator=generator)
    sy = torch.randint(len(data) - T, (B,), generator=generator)  # a second draw for y
    return _windows(data, sx, T)[:, :-1], _windows(data, sy, T)[:, 1:]


@wrong("next_token_batch", "dtype|long")
def after_batch_int32(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    w = _windows(data, starts, T)
    return w[:, :-1].int(), w[:, 1:].int()


@wrong("next_token_batch", "(t, b)|transpos|rows")
def after_batch_stacked_on_dim1(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator).tolist()
    xs = torch.stack([data[s : s + T] for s in starts], dim=1)
    ys = torch.stack([data[s + 1 : s + T + 1] for s in starts], dim=1)
    return xs, ys


@wrong("next_token_batch", "shift|token after|window|same window")
def after_batch_ids_plus_one(data, T, B, generator):
    starts = torch.randint(len(data) - T, (B,), generator=generator)
    x = _windows(data, starts, T)[:, :-1]
    return x, x + 1  # "shifted by one"


@wrong("causal_lm_loss", "mask|target")
def after_loss_mask_mixed(logits, ids, attention_mask=None):
    nll = -torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
    if attention_mask is None:
        return nll.mean()
    return (nll * attention_mask[:, :-1]).sum() / attention_mask[:, 1:].sum()


@wrong("causal_lm_loss", "dtype|float32|float64")
def after_loss_double(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = _targets(ids, attention_mask)
    return F.cross_entropy(logits[:, :-1].double().reshape(-1, V), t.reshape(-1))


@wrong("causal_lm_loss", "position|average|mean|weigh")
def after_loss_mean_per_position(logits, ids, attention_mask=None):
    nll = -torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
    keep = torch.ones_like(nll) if attention_mask is None else attention_mask[:, 1:].to(nll.dtype)
    per_position = (nll * keep).sum(0) / keep.sum(0).clamp(min=1)  # (T - 1,)
    return per_position[keep.sum(0) > 0].mean()


@wrong("causal_lm_loss", "sign|minus|negative")
def after_loss_log_likelihood(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    t = _targets(ids, attention_mask)
    return -F.cross_entropy(logits[:, :-1].reshape(-1, V), t.reshape(-1))


@wrong("causal_lm_loss", "padding|-100|ignore|mask")
def after_loss_masks_logits(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    if attention_mask is not None:
        logits = logits.masked_fill(attention_mask[..., None] == 0, -1e9)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


@wrong("gpt_from_blocks", "position|revers|order")
class AfterGPTReversedPositions(_GPTBase):
    def embed(self, idx):
        return self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1]).flip(0))


@wrong("gpt_from_blocks", "norm")
class AfterGPTInputNorm(_GPTBase):
    def embed(self, idx):
        return self.norm_f(super().embed(idx))  # "normalise the embeddings first"


@wrong("gpt_from_blocks", "causal|every block|future|leak")
class AfterGPTCausalFirstOnly(_GPTBase):
    def forward(self, idx):
        x, _ = self.blocks[0](self.embed(idx), is_causal=True)
        for block in self.blocks[1:]:
            x, _ = block(x)
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "residual|twice|already|block(x)")
class AfterGPTDoubleResidual(_GPTBase):
    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            out, _ = block(x, is_causal=True)
            x = x + out  # Block already adds its residual
        return self.lm_head(self.norm_f(x))


@wrong("gpt_from_blocks", "pos_emb|embedding")
class AfterGPTPositionParameter(_GPTBase):
    def __init__(self, config):
        super().__init__(config)
        self.pos_emb = nn.Parameter(torch.zeros(config.max_len, config.d_model))  # nanoGPT-ish

    def embed(self, idx):
        return self.tok_emb(idx) + self.pos_emb[: idx.shape[1]]


@wrong("filter_logits", "top-k|top_k|k + 1|one too many|k-th")
def after_filter_kthvalue_off_by_one(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k and top_k < z.shape[-1]:
        kth = torch.kthvalue(z, z.shape[-1] - top_k, dim=-1, keepdim=True).values
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "cross|reach")
def after_filter_cum_at_least(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        sorted_z, order = torch.sort(z, dim=-1, descending=True)
        cum = torch.softmax(sorted_z, -1).cumsum(-1)
        rm = cum >= top_p
        rm[..., 0] = False
        z = z.masked_fill(rm.scatter(-1, order, rm), float("-inf"))
    return z


@wrong("filter_logits", "temperature")
def after_filter_temperature_elif(logits, temperature=1.0, top_k=None, top_p=None):
    if top_k:
        z = _top_k(logits, top_k)
    elif temperature:
        z = logits / temperature
    else:
        z = logits
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "shape")
def after_filter_flattened(logits, temperature=1.0, top_k=None, top_p=None):
    z = (logits / temperature).reshape(-1, logits.shape[-1])  # (N, V), never reshaped back
    if top_k:
        z = _top_k(z, top_k)
    if top_p is not None and top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("filter_logits", "none|skip|no filtering|off")
def after_filter_top_p_none_unhandled(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        z = _top_k(z, top_k)
    if top_p < 1.0:
        z = _top_p(z, top_p)
    return z


@wrong("generate_greedy", "position|offset")
def after_greedy_offset_from_step(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for step in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        nxt = model.lm_head(model.norm_f(x[:, -1])).argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=step)  # forgot the prompt's length
    return out


@wrong("generate_greedy", "cache|prompt")
def after_greedy_prompt_not_cached(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for block in model.blocks:
        x, _ = block(x, is_causal=True)  # the prompt's keys are never stored
    for _ in range(max_new_tokens):
        nxt = model.lm_head(model.norm_f(x[:, -1])).argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
    return out


@wrong("generate_greedy", "lm_head|head|logits")
def after_greedy_argmax_of_hidden(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for _ in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        nxt = model.norm_f(x[:, -1]).argmax(-1, keepdim=True)  # no head: an index into C
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out


@wrong("generate_greedy", "norm_f|final norm|final layer norm")
def after_greedy_norm_only_first(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for step in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        h = model.norm_f(x[:, -1]) if step == 0 else x[:, -1]
        nxt = model.lm_head(h).argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out


@wrong("generate_greedy", "once|before the loop|empty|new cache")
def after_greedy_cache_per_call(model, idx, max_new_tokens):
    out = idx
    x = model.tok_emb(idx) + model.pos_emb(idx.shape[1])
    for _ in range(max_new_tokens):
        for block in model.blocks:
            x, _ = block(x, is_causal=True, cache=KVCache())  # a new cache at every call
        nxt = model.lm_head(model.norm_f(x[:, -1])).argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
        x = model.tok_emb(nxt) + model.pos_emb(1, offset=out.shape[1] - 1)
    return out
