"""Notebook 04: causal mask, leak detector, padding mask, pad and truncate, cross-attention."""

from tests.catalogues._source import right, wrong

NAMED_AT_LEAST = 1.0  # every entry named (the floor since the feedback work; see _source.py)

_LEAK = """
def future_leaks(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    with torch.no_grad():
        base = attend(x)
        for j in range({start}, T):
            changed = {copy}
            changed[j] = torch.randn(C, generator=g)
            if not {compare}:
                return {leak}
    return {no_leak}
"""


def _leak(
    comment,
    start="1",
    copy="x.clone()",
    compare="torch.equal(attend(changed)[:j], base[:j])",
    leak="True",
    no_leak="False",
):
    return f"# {comment}" + _LEAK.format(
        start=start, copy=copy, compare=compare, leak=leak, no_leak=no_leak
    )


_PAT = """
def pad_and_truncate(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got max_len={max_len}")
"""

_CROSS = """
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
"""

MISTAKES = [
    # ---------------------------------------------------------------- causal_mask
    wrong(
        "causal_mask",
        "polarity",
        """
# reversed polarity
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1)
""",
    ),
    wrong(
        "causal_mask",
        "off by one & diagonal",
        """
# diagonal excluded
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril(-1)
""",
    ),
    wrong(
        "causal_mask",
        "off by one & next token",
        """
# one future token allowed
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril(1)
""",
    ),
    wrong(
        "causal_mask",
        "transposed",
        """
# upper triangle
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).triu()
""",
    ),
    wrong(
        "causal_mask",
        "boolean",
        """
# float ones
def causal_mask(T):
    return torch.tril(torch.ones(T, T))
""",
    ),
    wrong(
        "causal_mask",
        "additive",
        """
# additive 0/-inf mask
def causal_mask(T):
    return torch.full((T, T), float("-inf")).triu(1)
""",
    ),
    wrong(
        "causal_mask",
        "numpy array",
        """
# numpy
def causal_mask(T):
    return np.tril(np.ones((T, T), dtype=bool))
""",
    ),
    wrong(
        "causal_mask",
        "(t, t)",
        """
# with broadcast dims
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril()[None, None]
""",
    ),
    wrong(
        "causal_mask",
        "nothing is masked",
        """
# all True
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool)
""",
    ),
    # ---------------------------------------------------------------- future_leaks
    wrong(
        "future_leaks",
        "[:j]",
        _leak("compares the later outputs", compare="torch.equal(attend(changed)[j:], base[j:])"),
    ),
    wrong(
        "future_leaks",
        "[:j]",
        _leak("compares every output", compare="torch.equal(attend(changed), base)"),
    ),
    wrong("future_leaks", "clone", _leak("forgets to clone", copy="x")),
    wrong(
        "future_leaks",
        "exactly",
        _leak(
            "loose tolerance", compare="torch.allclose(attend(changed)[:j], base[:j], atol=1e-3)"
        ),
    ),
    wrong("future_leaks", "every", _leak("changes the last token only", start="T - 1")),
    wrong(
        "future_leaks",
        "inverted",
        _leak("answers the opposite question", leak="False", no_leak="True"),
    ),
    wrong(
        "future_leaks",
        "true or false",
        _leak(
            "returns a tensor",
            compare="torch.equal(attend(changed)[:j], base[:j])",
            leak="torch.tensor(True)",
            no_leak="torch.tensor(False)",
        ),
    ),
    wrong(
        "future_leaks",
        "never changed",
        """
# "changes" token j to itself
def future_leaks(attend, T, C, seed=0):
    x = torch.randn(T, C, generator=torch.Generator().manual_seed(seed))
    base = attend(x)
    for j in range(1, T):
        changed = x.clone()
        changed[j] = x[j]
        if not torch.equal(attend(changed)[:j], base[:j]):
            return True
    return False
""",
    ),
    wrong(
        "future_leaks",
        "[:j]",
        _leak(
            "changes an earlier token", compare="torch.equal(attend(changed)[:j], base[:j])"
        ).replace("changed[j] =", "changed[j - 1] ="),
    ),
    # ---------------------------------------------------------------- padding_mask
    wrong(
        "padding_mask",
        "polarity",
        """
# reversed polarity
def padding_mask(lengths, S):
    return (torch.arange(S)[None, :] >= lengths[:, None])[:, None, None, :]
""",
    ),
    wrong(
        "padding_mask",
        "off by one",
        """
# <= length
def padding_mask(lengths, S):
    return (torch.arange(S)[None, :] <= lengths[:, None])[:, None, None, :]
""",
    ),
    wrong(
        "padding_mask",
        "off by one",
        """
# < length - 1
def padding_mask(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None] - 1)[:, None, None, :]
""",
    ),
    wrong(
        "padding_mask",
        "mask[:, none, none, :]",
        """
# (B, S)
def padding_mask(lengths, S):
    return torch.arange(S)[None, :] < lengths[:, None]
""",
    ),
    wrong(
        "padding_mask",
        "(b, 1, 1, s)",
        """
# (B, 1, S)
def padding_mask(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, :]
""",
    ),
    wrong(
        "padding_mask",
        "boolean",
        """
# float mask
def padding_mask(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None]).float()[:, None, None, :]
""",
    ),
    wrong(
        "padding_mask",
        "`s`",
        """
# width from the longest length
def padding_mask(lengths, S):
    L = int(lengths.max())
    return (torch.arange(L)[None, :] < lengths[:, None])[:, None, None, :]
""",
    ),
    wrong(
        "padding_mask",
        "(b, 1, 1, s)",
        """
# (B, S, 1, 1)
def padding_mask(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None])[:, :, None, None]
""",
    ),
    wrong(
        "padding_mask",
        "end",
        """
# real tokens at the end (left padding)
def padding_mask(lengths, S):
    return (torch.arange(S)[None, :] >= S - lengths[:, None])[:, None, None, :]
""",
    ),
    # ---------------------------------------------------------------- pad_and_truncate
    wrong(
        "pad_and_truncate",
        "last",
        "# keeps the last tokens"
        + _PAT
        + """
    kept = [list(s)[-max_len:] if len(s) > max_len else list(s) for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long).reshape(len(kept), L)
    return ids, torch.tensor([len(s) for s in kept])
""",
    ),
    wrong(
        "pad_and_truncate",
        "longest",
        "# pads to max_len"
        + _PAT
        + """
    kept = [list(s)[:max_len] for s in sequences]
    ids = torch.tensor([s + [pad_id] * (max_len - len(s)) for s in kept], dtype=torch.long)
    return ids, torch.tensor([len(s) for s in kept])
""",
    ),
    wrong(
        "pad_and_truncate",
        "left",
        "# pads on the left"
        + _PAT
        + """
    kept = [list(s)[:max_len] for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.tensor([[pad_id] * (L - len(s)) + s for s in kept], dtype=torch.long).reshape(len(kept), L)
    return ids, torch.tensor([len(s) for s in kept])
""",
    ),
    wrong(
        "pad_and_truncate",
        "after truncation",
        "# lengths before truncation"
        + _PAT
        + """
    kept = [list(s)[:max_len] for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long).reshape(len(kept), L)
    return ids, torch.tensor([len(s) for s in sequences])
""",
    ),
    wrong(
        "pad_and_truncate",
        "valueerror",
        """
# no ValueError
def pad_and_truncate(sequences, max_len, pad_id):
    kept = [list(s)[:max_len] for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long).reshape(len(kept), L)
    return ids, torch.tensor([len(s) for s in kept])
""",
    ),
    wrong(
        "pad_and_truncate",
        "in place",
        "# pads the caller's lists"
        + _PAT
        + """
    for s in sequences:
        del s[max_len:]
    L = max(len(s) for s in sequences)
    lengths = torch.tensor([len(s) for s in sequences])
    for s in sequences:
        s.extend([pad_id] * (L - len(s)))
    return torch.tensor(sequences, dtype=torch.long).reshape(len(sequences), L), lengths
""",
    ),
    wrong(
        "pad_and_truncate",
        "torch.long",
        "# float ids"
        + _PAT
        + """
    kept = [list(s)[:max_len] for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.full((len(kept), L), pad_id)
    for b, s in enumerate(kept):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.float)
    return ids.float(), torch.tensor([len(s) for s in kept])
""",
    ),
    wrong(
        "pad_and_truncate",
        "lengths & tensor",
        "# lengths as a list"
        + _PAT
        + """
    kept = [list(s)[:max_len] for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long).reshape(len(kept), L)
    return ids, [len(s) for s in kept]
""",
    ),
    wrong(
        "pad_and_truncate",
        "order",
        "# returns (lengths, ids)"
        + _PAT
        + """
    kept = [list(s)[:max_len] for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long).reshape(len(kept), L)
    return torch.tensor([len(s) for s in kept]), ids
""",
    ),
    wrong(
        "pad_and_truncate",
        "max_len - 1",
        "# truncates one too many"
        + _PAT
        + """
    kept = [list(s)[: max_len - 1] if len(s) >= max_len else list(s) for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long).reshape(len(kept), L)
    return ids, torch.tensor([len(s) for s in kept])
""",
    ),
    # ---------------------------------------------------------------- cross_attention
    wrong(
        "cross_attention",
        "x_kv",
        "# keys and values from x_q"
        + _CROSS
        + """
    return scaled_dot_product_attention(x_q @ w_q, x_q @ w_k, x_q @ w_v, mask)
""",
    ),
    wrong(
        "cross_attention",
        "scaling is missing",
        "# no scaling"
        + _CROSS
        + """
    s = (x_q @ w_q) @ (x_kv @ w_k).transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = softmax(s)
    return w @ (x_kv @ w_v), w
""",
    ),
    wrong(
        "cross_attention",
        "ignore & mask",
        "# mask ignored"
        + _CROSS
        + """
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v)
""",
    ),
    wrong(
        "cross_attention",
        "polarity",
        "# mask reversed, zero-safe softmax"
        + _CROSS
        + """
    s = (x_q @ w_q) @ (x_kv @ w_k).transpose(-2, -1) / math.sqrt(w_q.shape[1])
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    w = softmax(s)
    return w @ (x_kv @ w_v), w
""",
    ),
    wrong(
        "cross_attention",
        "after the softmax",
        "# mask after the softmax"
        + _CROSS
        + """
    w = softmax((x_q @ w_q) @ (x_kv @ w_k).transpose(-2, -1) / math.sqrt(w_q.shape[1]))
    if mask is not None:
        w = w * mask
    return w @ (x_kv @ w_v), w
""",
    ),
    wrong(
        "cross_attention",
        "tuple",
        "# returns only out"
        + _CROSS
        + """
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)[0]
""",
    ),
    wrong(
        "cross_attention",
        "wrong order",
        "# returns (weights, out)"
        + _CROSS
        + """
    out, w = scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)
    return w, out
""",
    ),
    wrong(
        "cross_attention",
        "-1e9",
        "# -1e9 mask"
        + _CROSS
        + """
    s = (x_q @ w_q) @ (x_kv @ w_k).transpose(-2, -1) / math.sqrt(w_q.shape[1])
    if mask is not None:
        s = s.masked_fill(~mask, -1e9)
    w = softmax(s)
    return w @ (x_kv @ w_v), w
""",
    ),
    wrong(
        "cross_attention",
        "over the queries",
        "# softmax over the queries"
        + _CROSS
        + """
    s = (x_q @ w_q) @ (x_kv @ w_k).transpose(-2, -1) / math.sqrt(w_q.shape[1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = softmax(s, dim=-2)
    return w @ (x_kv @ w_v), w
""",
    ),
    wrong(
        "cross_attention",
        "sqrt",
        "# scaled by the query width"
        + _CROSS
        + """
    s = (x_q @ w_q) @ (x_kv @ w_k).transpose(-2, -1) / math.sqrt(x_q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = softmax(s)
    return w @ (x_kv @ w_v), w
""",
    ),
]

CORRECT = [
    right(
        "causal_mask",
        """
# triu == 0
def causal_mask(T):
    return torch.triu(torch.ones(T, T), diagonal=1) == 0
""",
    ),
    right(
        "causal_mask",
        """
# loops
def causal_mask(T):
    m = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        m[t, : t + 1] = True
    return m
""",
    ),
    right(
        "future_leaks",
        """
# exact comparison with ==, no no_grad
def future_leaks(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    out = attend(x)
    for j in range(T):
        y = x.clone()
        y[j] = y[j] + 1.0
        if (attend(y)[:j] != out[:j]).any():
            return True
    return False
""",
    ),
    right(
        "padding_mask",
        """
# python loop
def padding_mask(lengths, S):
    rows = [[s < int(n) for s in range(S)] for n in lengths]
    return torch.tensor(rows, dtype=torch.bool).reshape(len(rows), 1, 1, S)
""",
    ),
    right(
        "padding_mask",
        """
# arange from 1
def padding_mask(lengths, S):
    return (torch.arange(1, S + 1) <= lengths.unsqueeze(-1)).view(-1, 1, 1, S)
""",
    ),
    right(
        "pad_and_truncate",
        """
# torch.full and slices
def pad_and_truncate(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len={max_len} must be positive")
    kept = [s[:max_len] for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.full((len(kept), L), pad_id, dtype=torch.long)
    for b, s in enumerate(kept):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor([len(s) for s in kept], dtype=torch.long)
""",
    ),
    right(
        "cross_attention",
        """
# einsum, NaN allowed on rows with nothing to attend to
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    s = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.einsum("bts,bsd->btd", w, v), w
""",
    ),
    right(
        "cross_attention",
        """
# calls the student's own attention
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)
""",
    ),
]
