"""Notebook 04, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text (masks, the leak test, padding, cross-attention), written without looking at what the
checks detect. ``python -m tests.holdout report 04w``."""

from tests.catalogues._source import wrong

# Before the fixes of issue 39: 15/1/0/0 named/generic/misleading/passed; after: 15 of 16 named, 1 generic.
# With 5 more entries (h16: seed ignored, output 0 only, token 0 only, rows cut to the first length,
# queries from x_kv): 16/2/1/2 of 21 before, 21 of 21 named after.
NAMED_AT_LEAST = 1.0

MISTAKES = [
    wrong(
        "causal_mask",
        "shape|(T, T)",
        """
# (1, T, T)
def causal_mask(T):
    return torch.ones(T, T).tril().bool()[None]
""",
    ),
    wrong(
        "causal_mask",
        "dtype|bool",
        """
# int 0/1
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.long).tril()
""",
    ),
    wrong(
        "causal_mask",
        "polarity|reversed|True",
        """
# True where masked out
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1)
""",
    ),
    wrong(
        "future_leaks",
        "first|later|position|leak",
        """
# changes only the first token and compares the rest
def future_leaks(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    y = x.clone()
    y[0] += 1.0
    return not torch.allclose(attend(y)[1:], base[1:])
""",
    ),
    wrong(
        "future_leaks",
        "last|position|leak|every",
        """
# changes only the last token
def future_leaks(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    y = x.clone()
    y[-1] += 1.0
    return not torch.allclose(attend(y)[:-1], base[:-1])
""",
    ),
    wrong(
        "future_leaks",
        "toleran|small|atol|leak",
        """
# a loose tolerance
def future_leaks(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(1, T):
        y = x.clone()
        y[j:] = torch.randn(T - j, C, generator=g)
        if not torch.allclose(attend(y)[:j], base[:j], atol=0.5):
            return True
    return False
""",
    ),
    wrong(
        "padding_mask",
        "shape|(B, 1, 1, S)",
        """
# (B, 1, S, 1)
def padding_mask(lengths, S):
    lengths = torch.as_tensor(lengths)
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, :, None]
""",
    ),
    wrong(
        "padding_mask",
        "dtype|bool",
        """
# float 0/1
def padding_mask(lengths, S):
    lengths = torch.as_tensor(lengths)
    return (torch.arange(S)[None, :] < lengths[:, None]).float()[:, None, None, :]
""",
    ),
    wrong(
        "padding_mask",
        "lengths|first",
        """
# every row uses the first length
def padding_mask(lengths, S):
    lengths = torch.as_tensor(lengths)
    m = torch.arange(S) < lengths[0]
    return m.expand(len(lengths), S)[:, None, None, :]
""",
    ),
    wrong(
        "pad_and_truncate",
        "pad_id|0",
        """
# pads with 0
def pad_and_truncate(sequences, max_len, pad_id):
    kept = [list(s)[:max_len] for s in sequences]
    ids = torch.zeros(len(kept), max(len(s) for s in kept), dtype=torch.long)
    for i, s in enumerate(kept):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor([len(s) for s in kept])
""",
    ),
    wrong(
        "pad_and_truncate",
        "tensor|list",
        """
# ids as a list of lists
def pad_and_truncate(sequences, max_len, pad_id):
    ids, lengths = [], []
    for s in sequences:
        s = list(s)[:max_len]
        ids.append(s + [pad_id] * (max_len - len(s)))
        lengths.append(len(s))
    return ids, torch.tensor(lengths)
""",
    ),
    wrong(
        "pad_and_truncate",
        "order|sorted",
        """
# sorts the batch by length
def pad_and_truncate(sequences, max_len, pad_id):
    cut = sorted((list(s)[:max_len] for s in sequences), key=len, reverse=True)
    L = max(len(s) for s in cut)
    ids = torch.full((len(cut), L), pad_id, dtype=torch.long)
    for i, s in enumerate(cut):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor([len(s) for s in cut])
""",
    ),
    wrong(
        "cross_attention",
        "values|x_kv",
        """
# values from x_q
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_q @ w_v, mask)
""",
    ),
    wrong(
        "cross_attention",
        "queries|x_q|swapped",
        """
# queries from x_kv, keys and values from x_q
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_kv @ w_q, x_q @ w_k, x_q @ w_v, mask)
""",
    ),
    wrong(
        "cross_attention",
        "transpos",
        """
# weights returned transposed
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    out, w = scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)
    return out, w.transpose(-2, -1)
""",
    ),
    wrong(
        "cross_attention",
        "mask|0",
        """
# masked scores set to 0
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, 0.0)
    w = softmax(s, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "future_leaks",
        "generator|reproduc|seed",
        """
# draws its random inputs from the global generator, not from seed
def future_leaks(attend, T, C, seed=0):
    x = torch.randn(T, C)
    base = attend(x)
    for j in range(1, T):
        y = x.clone()
        y[j:] = torch.randn(T - j, C)
        if not torch.equal(attend(y)[:j], base[:j]):
            return True
    return False
""",
    ),
    wrong(
        "future_leaks",
        "position 0|output 0|first output|every earlier",
        """
# compares only output position 0
def future_leaks(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(1, T):
        y = x.clone()
        y[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(y)[0], base[0]):
            return True
    return False
""",
    ),
    wrong(
        "future_leaks",
        "j >= 1|token 0|later token",
        """
# perturbs only the first token, looks for a change anywhere
def future_leaks(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    y = x.clone()
    y[0] = torch.randn(C, generator=g)
    return not torch.equal(attend(y)[0], base[0])
""",
    ),
    wrong(
        "pad_and_truncate",
        "first|length|other",
        """
# every row cut to the first sequence's length
def pad_and_truncate(sequences, max_len, pad_id):
    L = min(len(sequences[0]), max_len)
    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long)
    for i, s in enumerate(sequences):
        s = list(s)[:L]
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor([min(len(s), L) for s in sequences])
""",
    ),
    wrong(
        "cross_attention",
        "queries|keys|x_kv|source",
        """
# queries and keys both from the source sequence
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_kv @ w_q, x_kv @ w_k, x_kv @ w_v, mask)
""",
    ),
]
