"""Honest alternatives for notebook 04 (masking and cross-attention)."""

from __future__ import annotations

from . import Alternative as A

ALTERNATIVES = {
    "causal_mask_impl": [
        A(
            "torch.ones(...).tril()",
            """\
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril()
""",
        ),
        A(
            "complement of the strict upper triangle",
            """\
def causal_mask(T):
    return ~torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
""",
        ),
        A(
            "a loop filling each query's row",
            """\
def causal_mask(T):
    m = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        m[t, : t + 1] = True
    return m
""",
        ),
        A(
            "float tril then .bool()",
            """\
def causal_mask(T):
    return torch.tril(torch.ones(T, T)).bool()
""",
        ),
    ],
    "future_leaks_impl": [
        A(
            "allclose(atol=1e-7, rtol=0) as the notebook allows, generator drawn for each change",
            """\
def future_leaks(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    with torch.no_grad():
        y = attend(x)
        for j in range(1, T):
            x2 = x.clone()
            x2[j] = torch.randn(C, generator=g)
            if not torch.allclose(attend(x2)[:j], y[:j], atol=1e-7, rtol=0):
                return True
    return False
""",
        ),
        A(
            "changes every token from j on at once, walking j backwards",
            """\
def future_leaks(attend, T, C, seed=0):
    gen = torch.Generator()
    gen.manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    base = attend(x).detach()
    for j in range(T - 1, 0, -1):
        changed = x.clone()
        changed[j:] = torch.randn(T - j, C, generator=gen)
        if not torch.equal(attend(changed).detach()[:j], base[:j]):
            return True
    return False
""",
        ),
        A(
            "collects the verdicts of all j and returns bool(any(...))",
            """\
def future_leaks(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    with torch.no_grad():
        base = attend(x)
        leaks = []
        for j in range(1, T):
            changed = torch.cat([x[:j], torch.randn(1, C, generator=g), x[j + 1:]])
            leaks.append(bool((attend(changed)[:j] != base[:j]).any()))
    return bool(any(leaks))
""",
        ),
    ],
    "padding_mask_impl": [
        A(
            "expand the positions to (B, S), compare, view",
            """\
def padding_mask(lengths, S):
    B = lengths.shape[0]
    m = torch.arange(S).expand(B, S) < lengths.unsqueeze(1)
    return m.view(B, 1, 1, S)
""",
        ),
        A(
            "a loop over the batch",
            """\
def padding_mask(lengths, S):
    m = torch.zeros(len(lengths), 1, 1, S, dtype=torch.bool)
    for b, n in enumerate(lengths.tolist()):
        m[b, 0, 0, :n] = True
    return m
""",
        ),
        A(
            "lengths broadcast as (B, 1, 1, 1) against arange(S)",
            """\
def padding_mask(lengths, S):
    return lengths[:, None, None, None] > torch.arange(S)
""",
        ),
    ],
    "pad_and_truncate_impl": [
        A(
            "pure Python padding, one torch.tensor at the end",
            """\
def pad_and_truncate(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}.")
    cut = [list(s[:max_len]) for s in sequences]
    L = max(map(len, cut))
    rows = [s + [pad_id] * (L - len(s)) for s in cut]
    return (torch.tensor(rows, dtype=torch.long).reshape(len(rows), L),
            torch.tensor([len(s) for s in cut], dtype=torch.long))
""",
        ),
        A(
            "torch.nn.utils.rnn.pad_sequence",
            """\
def pad_and_truncate(sequences, max_len, pad_id):
    from torch.nn.utils.rnn import pad_sequence

    if max_len < 1:
        raise ValueError(f"max_len={max_len} is less than 1.")
    tensors = [torch.tensor(list(s)[:max_len], dtype=torch.long) for s in sequences]
    lengths = torch.tensor([t.numel() for t in tensors], dtype=torch.long)
    ids = pad_sequence(tensors, batch_first=True, padding_value=pad_id).long()
    return ids, lengths
""",
        ),
        A(
            "lengths first with min(len, max_len), then fills a full tensor row by row",
            """\
def pad_and_truncate(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, but got max_len={max_len}.")
    lengths = torch.tensor([min(len(s), max_len) for s in sequences], dtype=torch.long)
    ids = torch.full((len(sequences), int(lengths.max())), pad_id, dtype=torch.long)
    for row, (s, n) in enumerate(zip(sequences, lengths.tolist())):
        for col in range(n):
            ids[row, col] = s[col]
    return ids, lengths
""",
        ),
    ],
    "cross_attention_impl": [
        A(
            "einsum projections, the reference attention",
            """\
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q = torch.einsum("btc,cd->btd", x_q, w_q)
    k = torch.einsum("bsc,cd->bsd", x_kv, w_k)
    v = torch.einsum("bsc,cd->bsd", x_kv, w_v)
    return scaled_dot_product_attention(q, k, v, mask=mask)
""",
        ),
        A(
            "written out: scores, -inf added where masked, softmax, nan -> 0",
            """\
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])  # (B, T, S)
    if mask is not None:
        scores = scores + torch.where(mask, 0.0, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return weights @ v, weights
""",
        ),
        A(
            "keys and values projected first, torch.matmul",
            """\
def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    k = torch.matmul(x_kv, w_k)
    v = torch.matmul(x_kv, w_v)
    q = torch.matmul(x_q, w_q)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    return out, weights
""",
        ),
    ],
}
