"""Honest alternatives for notebook 09 (attention at scale)."""

from __future__ import annotations

from . import Alternative as A

ALTERNATIVES = {
    "merge_softmax_stats_impl": [
        A(
            "scale factors zeroed with torch.where where a side saw no key",
            """\
def merge_softmax_stats(m1, l1, o1, m2, l2, o2):
    m = torch.max(m1, m2)
    a1 = torch.where(torch.isneginf(m1), torch.zeros_like(m1), torch.exp(m1 - m))
    a2 = torch.where(torch.isneginf(m2), torch.zeros_like(m2), torch.exp(m2 - m))
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2
""",
        ),
        A(
            "exp(m_i - m) with its NaN (both -inf) replaced by 0",
            """\
def merge_softmax_stats(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1 = torch.exp(m1 - m).nan_to_num(nan=0.0)
    a2 = torch.exp(m2 - m).nan_to_num(nan=0.0)
    l = l1 * a1 + l2 * a2
    o = o1 * a1 + o2 * a2
    return (m, l, o)
""",
        ),
        A(
            "the larger side kept at scale 1, the other scaled by exp(smaller - larger)",
            """\
def merge_softmax_stats(m1, l1, o1, m2, l2, o2):
    first_bigger = m1 >= m2
    m = torch.where(first_bigger, m1, m2)
    small = torch.where(first_bigger, m2, m1)
    gap = torch.where(torch.isinf(m), torch.zeros_like(m), small - m)  # <= 0, or -inf
    factor = torch.exp(gap)  # scale of the smaller side; 1 when both are -inf (l = o = 0 there)
    a1 = torch.where(first_bigger, torch.ones_like(m), factor)
    a2 = torch.where(first_bigger, factor, torch.ones_like(m))
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2
""",
        ),
    ],
    "tiled_attention_impl": [
        A(
            "the online softmax written inline (no merge helper), running rescale",
            """\
def tiled_attention(q, k, v, block_size, mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full((*q.shape[:-1], 1), float("-inf"))
    l = torch.zeros((*q.shape[:-1], 1))
    o = torch.zeros((*q.shape[:-1], v.shape[-1]))
    for s0 in range(0, k.shape[-2], block_size):
        kb, vb = k[..., s0:s0 + block_size, :], v[..., s0:s0 + block_size, :]
        s = (q @ kb.transpose(-2, -1)) * scale
        if mask is not None:
            s = s.masked_fill(~mask[..., s0:s0 + block_size], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe)
        correction = torch.exp(m - safe)
        l = l * correction + p.sum(dim=-1, keepdim=True)
        o = o * correction + p @ vb
        m = m_new
    return torch.where(l > 0, o / l.clamp_min(1e-30), torch.zeros_like(o))
""",
        ),
        A(
            "two passes over the key blocks: the maxima first, then sums and outputs",
            """\
def tiled_attention(q, k, v, block_size, mask=None):
    S, D = k.shape[-2], q.shape[-1]
    starts = range(0, S, block_size)

    def scores(start):
        s = q @ k[..., start:start + block_size, :].transpose(-1, -2) / math.sqrt(D)
        if mask is not None:
            s = torch.where(mask[..., start:start + block_size], s, float("-inf"))
        return s

    m = torch.full((*q.shape[:-1], 1), float("-inf"))
    for start in starts:
        m = torch.maximum(m, scores(start).amax(-1, keepdim=True))
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    l = torch.zeros_like(m)
    o = torch.zeros(*q.shape[:-1], v.shape[-1])
    for start in starts:
        p = torch.exp(scores(start) - shift)
        l = l + p.sum(-1, keepdim=True)
        o = o + p @ v[..., start:start + block_size, :]
    return o / torch.where(l == 0, torch.ones_like(l), l)
""",
        ),
        A(
            "normalised running output with logsumexp per block (logaddexp to merge)",
            """\
def tiled_attention(q, k, v, block_size, mask=None):
    lse = torch.full((*q.shape[:-1], 1), float("-inf"))
    out = torch.zeros(*q.shape[:-1], v.shape[-1])
    for start in range(0, k.shape[-2], block_size):
        stop = min(start + block_size, k.shape[-2])
        s = q @ k[..., start:stop, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask[..., start:stop], float("-inf"))
        lse_b = torch.logsumexp(s, dim=-1, keepdim=True)  # -inf if the block is all masked
        new = torch.logaddexp(lse, lse_b)
        finite = torch.isfinite(new)
        keep_old = torch.where(finite, torch.exp(lse - new), torch.zeros_like(new))
        p = torch.where(finite, torch.exp(s - torch.where(finite, new, torch.zeros_like(new))),
                        torch.zeros_like(s))
        out = keep_old * out + p @ v[..., start:stop, :]
        lse = new
    return out
""",
        ),
    ],
    "grouped_query_attention_impl": [
        A(
            "k and v expanded on a new group axis, then reshaped to H heads",
            """\
def grouped_query_attention(q, k, v):
    B, H, T, D = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    if H % H_kv:
        raise ValueError(f"H={H} is not a multiple of H_kv={H_kv}.")
    g = H // H_kv
    k = k[:, :, None].expand(B, H_kv, g, S, D).reshape(B, H, S, D)
    v = v[:, :, None].expand(B, H_kv, g, S, v.shape[-1]).reshape(B, H, S, v.shape[-1])
    out, _ = scaled_dot_product_attention(q, k, v)
    return out
""",
        ),
        A(
            "queries grouped as (B, H_kv, g, T, D) and broadcast against (B, H_kv, 1, S, D)",
            """\
def grouped_query_attention(q, k, v):
    B, H, T, D = q.shape
    H_kv = k.shape[1]
    if H % H_kv != 0:
        raise ValueError(f"query heads H={H} must be a multiple of key/value heads H_kv={H_kv}.")
    qg = q.reshape(B, H_kv, H // H_kv, T, D)
    out = scaled_dot_product_attention(qg, k.unsqueeze(2), v.unsqueeze(2))[0]  # (B, H_kv, g, T, D)
    return out.reshape(B, H, T, out.shape[-1])
""",
        ),
        A(
            "a loop over query heads, head h reading key/value head h // group",
            """\
def grouped_query_attention(q, k, v):
    H, H_kv = q.shape[1], k.shape[1]
    if H % H_kv != 0:
        raise ValueError(f"H={H} must be a multiple of H_kv={H_kv}.")
    group = H // H_kv
    heads = [scaled_dot_product_attention(q[:, h], k[:, h // group], v[:, h // group])[0]
             for h in range(H)]
    return torch.stack(heads, dim=1)
""",
        ),
    ],
    "kv_cache_bytes_impl": [
        A(
            "math.prod of the factors",
            """\
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return math.prod([2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_value])
""",
        ),
        A(
            "bytes per token first, then tokens",
            """\
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    per_token = 2 * n_layers * n_kv_heads * d_head * bytes_per_value  # a key and a value
    return per_token * seq_len * batch
""",
        ),
        A(
            "keys and values counted separately, int() around the result",
            """\
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    keys = n_layers * batch * n_kv_heads * seq_len * d_head * bytes_per_value
    values = keys
    return int(keys + values)
""",
        ),
    ],
    "sliding_window_mask_impl": [
        A(
            "tril minus a lower tril shifted by the window",
            """\
def sliding_window_mask(T, window):
    if window < 1:
        raise ValueError(f"window must be >= 1, got window={window}.")
    ones = torch.ones(T, T, dtype=torch.bool)
    return ones.tril() & ~ones.tril(-window)
""",
        ),
        A(
            "the distance t - s between 0 and window - 1",
            """\
def sliding_window_mask(T, window):
    if window < 1:
        raise ValueError(f"received window={window}, expected at least 1.")
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    return (distance >= 0) & (distance < window)
""",
        ),
        A(
            "a loop over the queries",
            """\
def sliding_window_mask(T, window):
    if window < 1:
        raise ValueError(f"window={window} is less than 1.")
    m = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        m[t, max(0, t - window + 1):t + 1] = True
    return m
""",
        ),
    ],
}
