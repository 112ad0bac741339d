"""Honest alternatives for notebook 07 (GPT)."""

from __future__ import annotations

from . import Alternative as A

_GPT_FORWARD = """
    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))
        for block in self.blocks:
            x, _ = block(x, is_causal=True)
        return self.lm_head(self.norm_f(x))
"""

ALTERNATIVES = {
    "next_token_batch_impl": [
        A(
            "start positions from torch.rand scaled and floored (uniform on 0 .. N - T - 1)",
            """\
def next_token_batch(data, T, B, generator):
    n_starts = len(data) - T
    starts = (torch.rand(B, generator=generator) * n_starts).long()  # floor of U[0, n_starts)
    x = torch.stack([data[s:s + T] for s in starts.tolist()])
    y = torch.stack([data[s + 1:s + T + 1] for s in starts.tolist()])
    return x, y
""",
        ),
        A(
            "torch.multinomial over equal weights, windows from Tensor.unfold",
            """\
def next_token_batch(data, T, B, generator):
    weights = torch.ones(len(data) - T)
    starts = torch.multinomial(weights, B, replacement=True, generator=generator)
    windows = data.unfold(0, T + 1, 1)[starts]  # (B, T + 1)
    return windows[:, :T].clone(), windows[:, 1:].clone()
""",
        ),
        A(
            "one torch.randint(low, high, (1,)) per row in a loop",
            """\
def next_token_batch(data, T, B, generator):
    xs, ys = [], []
    for _ in range(B):
        s = int(torch.randint(0, len(data) - T, (1,), generator=generator))
        xs.append(data[s:s + T])
        ys.append(data[s + 1:s + T + 1])
    return torch.stack(xs).long(), torch.stack(ys).long()
""",
        ),
    ],
    "causal_lm_loss_impl": [
        A(
            "per-token losses (reduction='none') averaged with the mask as weights",
            """\
def causal_lm_loss(logits, ids, attention_mask=None):
    B, T, V = logits.shape
    losses = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1),
                             reduction="none").view(B, T - 1)
    if attention_mask is None:
        return losses.mean()
    real = attention_mask[:, 1:].to(losses.dtype)
    return (losses * real).sum() / real.sum()
""",
        ),
        A(
            "log_softmax and gather, boolean selection of the real targets",
            """\
def causal_lm_loss(logits, ids, attention_mask=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V)
    nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    if attention_mask is not None:
        nll = nll[attention_mask[:, 1:] == 1]
    return nll.mean()
""",
        ),
        A(
            "targets built with torch.where and ignore_index, logits transposed to (B, V, T)",
            """\
def causal_lm_loss(logits, ids, attention_mask=None):
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = torch.where(attention_mask[:, 1:].bool(), targets, torch.full_like(targets, -100))
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), targets, ignore_index=-100)
""",
        ),
    ],
    "gpt_from_blocks_impl": [
        A(
            "pos_emb created before tok_emb (another random initialisation)",
            '''\
class GPTFromBlocks(nn.Module):
    """GPT-2: token + position embeddings, pre-norm causal blocks, a final norm, a (tied) head."""

    def __init__(self, config):
        super().__init__()
        c = config
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.blocks = nn.ModuleList(
            [Block(c.d_model, c.n_heads, c.d_ff, activation=c.activation, bias=c.bias, eps=c.eps)
             for _ in range(c.n_layers)]
        )
        self.norm_f = LayerNorm(c.d_model, c.eps, c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight
'''
            + _GPT_FORWARD,
        ),
        A(
            "head and final norm (torch's nn.LayerNorm) created before the blocks, blocks appended",
            '''\
class GPTFromBlocks(nn.Module):
    """GPT-2: token + position embeddings, pre-norm causal blocks, a final norm, a (tied) head."""

    def __init__(self, config):
        super().__init__()
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.norm_f = nn.LayerNorm(config.d_model, eps=config.eps, bias=config.bias)
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.max_len, config.d_model)
        self.blocks = nn.ModuleList()
        for _ in range(config.n_layers):
            self.blocks.append(Block(config.d_model, config.n_heads, config.d_ff,
                                     activation=config.activation, bias=config.bias,
                                     eps=config.eps))
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        B, T = idx.shape
        positions = torch.arange(T, device=idx.device).unsqueeze(0)  # (1, T)
        h = self.tok_emb(idx) + self.pos_emb(positions)
        for layer in self.blocks:
            h = layer(h, is_causal=True)[0]
        return self.lm_head(self.norm_f(h))
''',
        ),
        A(
            "explicit causal mask passed to the blocks, pos_emb.weight sliced",
            '''\
class GPTFromBlocks(nn.Module):
    """GPT-2: token + position embeddings, pre-norm causal blocks, a final norm, a (tied) head."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.max_len, config.d_model)
        self.blocks = nn.ModuleList(
            Block(config.d_model, config.n_heads, config.d_ff, activation=config.activation,
                  bias=config.bias, eps=config.eps) for _ in range(config.n_layers))
        self.norm_f = LayerNorm(config.d_model, eps=config.eps, bias=config.bias)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        T = idx.size(1)
        x = self.tok_emb(idx) + self.pos_emb.weight[:T]
        mask = causal_mask(T)
        for block in self.blocks:
            x, _ = block(x, mask=mask)
        return self.lm_head(self.norm_f(x))
''',
        ),
        A(
            "GPT-2's initialisation applied after building: N(0, 0.02) weights, zero biases",
            """\
class GPTFromBlocks(nn.Module):
    \"\"\"GPT-2: token + position embeddings, pre-norm causal blocks, a final norm, a (tied) head.\"\"\"

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
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
"""
            + _GPT_FORWARD,
        ),
    ],
    "filter_logits_impl": [
        A(
            "top-k threshold from a descending sort, torch.where instead of masked_fill",
            """\
def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    neg_inf = torch.full_like(z, float("-inf"))
    if top_k is not None and top_k > 0 and top_k < z.shape[-1]:
        kth = z.sort(dim=-1, descending=True).values[..., top_k - 1:top_k]
        z = torch.where(z < kth, neg_inf, z)
    if top_p is not None and top_p < 1.0:
        sorted_z, order = z.sort(dim=-1, descending=True)
        p = sorted_z.softmax(dim=-1)
        before = torch.cumsum(p, dim=-1) - p
        drop = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before >= top_p)
        z = torch.where(drop, neg_inf, z)
    return z
""",
        ),
        A(
            "Hugging Face's top-p: ascending sort, remove while the cumulative mass <= 1 - top_p",
            """\
def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits / temperature
    if top_k:
        k = min(top_k, z.size(-1))
        threshold = torch.topk(z, k, dim=-1).values[..., -1, None]
        z = z.masked_fill(z < threshold, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_z, idx = torch.sort(z, dim=-1, descending=False)
        cum = sorted_z.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cum <= (1 - top_p)
        remove_sorted[..., -1:] = False  # the most likely token always stays
        remove = remove_sorted.scatter(-1, idx, remove_sorted)
        z = z.masked_fill(remove, float("-inf"))
    return z
""",
        ),
        A(
            "rows flattened to (N, V) and filtered one by one in a loop",
            """\
def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    shape = logits.shape
    rows = (logits / temperature).reshape(-1, shape[-1]).clone()
    for r in range(rows.shape[0]):
        row = rows[r]
        if top_k:
            kth = row.topk(min(top_k, row.numel())).values.min()
            row[row < kth] = float("-inf")
        if top_p is not None and top_p < 1.0:
            probs = torch.softmax(row, dim=0)
            order = torch.argsort(probs, descending=True)
            mass = 0.0
            for i in order.tolist():
                if mass >= top_p:
                    row[i] = float("-inf")
                else:
                    mass += probs[i].item()
    return rows.reshape(shape)
""",
            unspecified="accumulates the top-p mass in float64 (Python floats), so a token exactly "
            "at the boundary may be kept where float32 cumsum drops it",
        ),
    ],
    "generate_greedy_impl": [
        A(
            "new ids collected in a list and concatenated at the end",
            """\
def generate_greedy(model, idx, max_new_tokens):
    caches = [KVCache() for _ in model.blocks]
    T0 = idx.shape[1]
    x = model.tok_emb(idx) + model.pos_emb(T0)
    new = []
    for step in range(max_new_tokens):
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=True, cache=cache)
        logits = model.lm_head(model.norm_f(x[:, -1]))  # (B, V)
        token = torch.argmax(logits, dim=-1)[:, None]  # (B, 1)
        new.append(token)
        x = model.tok_emb(token) + model.pos_emb(1, offset=T0 + step)
    return torch.cat([idx, *new], dim=1)
""",
        ),
        A(
            "Tensor.max(...).indices for the argmax, positions always passed as offset=",
            """\
def generate_greedy(model, idx, max_new_tokens):
    caches = {i: KVCache() for i in range(len(model.blocks))}

    def run(x):
        for i, block in enumerate(model.blocks):
            x, _ = block(x, is_causal=True, cache=caches[i])
        return x

    ids = idx.clone()
    h = run(model.tok_emb(ids) + model.pos_emb(ids.size(1), offset=0))
    for _ in range(max_new_tokens):
        logits = model.lm_head(model.norm_f(h[:, -1, :]))
        best = logits.max(dim=-1).indices.unsqueeze(-1)  # (B, 1)
        position = ids.size(1)
        ids = torch.cat((ids, best), dim=-1)
        h = run(model.tok_emb(best) + model.pos_emb(1, offset=position))
    return ids
""",
        ),
        A(
            "under torch.no_grad, output preallocated and filled in place",
            """\
def generate_greedy(model, idx, max_new_tokens):
    B, T0 = idx.shape
    out = torch.empty(B, T0 + max_new_tokens, dtype=torch.long)
    out[:, :T0] = idx
    caches = [KVCache() for _ in range(len(model.blocks))]
    with torch.no_grad():
        x = model.tok_emb(idx) + model.pos_emb(T0, offset=0)
        for t in range(T0, T0 + max_new_tokens):
            for i, block in enumerate(model.blocks):
                x, _ = block(x, is_causal=True, cache=caches[i])
            out[:, t] = model.lm_head(model.norm_f(x[:, -1])).argmax(dim=-1)
            x = model.tok_emb(out[:, t:t + 1]) + model.pos_emb(1, offset=t)
    return out
""",
        ),
    ],
}
