"""Honest alternatives for notebook 02 (multi-head attention)."""

from __future__ import annotations

from . import Alternative as A

ALTERNATIVES = {
    "split_heads_impl": [
        A(
            "reshape then permute(0, 2, 1, 3)",
            """\
def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"n_heads={n_heads} must divide C={C}.")
    return x.reshape(B, T, n_heads, C // n_heads).permute(0, 2, 1, 3)
""",
        ),
        A(
            "a loop over heads, slicing channels and stacking",
            """\
def split_heads(x, n_heads):
    C = x.shape[-1]
    if C % n_heads != 0:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}.")
    D = C // n_heads
    return torch.stack([x[:, :, h * D:(h + 1) * D] for h in range(n_heads)], dim=1)
""",
        ),
        A(
            "unflatten the last axis, then transpose",
            """\
def split_heads(x, n_heads):
    if x.shape[-1] % n_heads != 0:
        raise ValueError(f"expected C divisible by n_heads, got C={x.shape[-1]}, n_heads={n_heads}.")
    return x.unflatten(-1, (n_heads, -1)).transpose(1, 2)
""",
        ),
    ],
    "merge_heads_impl": [
        A(
            "permute then flatten the last two axes",
            """\
def merge_heads(x):
    return x.permute(0, 2, 1, 3).flatten(2)
""",
        ),
        A(
            "concatenate the heads along channels",
            """\
def merge_heads(x):
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)
""",
        ),
        A(
            "transpose, contiguous, view",
            """\
def merge_heads(x):
    B, H, T, D = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, H * D)
""",
        ),
    ],
    "mha_loop_impl": [
        A(
            "slices the weight columns per head, sums head_h @ W_o rows instead of concatenating",
            """\
def multi_head_attention_loop(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, T, C = x_q.shape
    S = x_kv.shape[1]
    D = C // n_heads
    out = 0
    weights = []
    for h in range(n_heads):
        cols = slice(h * D, (h + 1) * D)
        m = None if mask is None else torch.broadcast_to(mask, (B, n_heads, T, S))[:, h]
        o, w = scaled_dot_product_attention(x_q @ w_q[:, cols], x_kv @ w_k[:, cols],
                                            x_kv @ w_v[:, cols], m)
        out = out + o @ w_o[cols, :]
        weights.append(w)
    return out, torch.stack(weights, dim=1)
""",
        ),
        A(
            "fresh output tensors filled in place, head by head",
            """\
def multi_head_attention_loop(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    B, T, C = q.shape
    S = k.shape[1]
    D = C // n_heads
    concat = torch.empty(B, T, C)
    weights = torch.empty(B, n_heads, T, S)
    full = None if mask is None else mask.expand(B, n_heads, T, S)
    for h in range(n_heads):
        lo, hi = h * D, (h + 1) * D
        o, w = scaled_dot_product_attention(q[..., lo:hi], k[..., lo:hi], v[..., lo:hi],
                                            None if full is None else full[:, h])
        concat[..., lo:hi] = o
        weights[:, h] = w
    return concat @ w_o, weights
""",
        ),
        A(
            "its own masked softmax per head (masked_fill, softmax, nan -> 0)",
            """\
def multi_head_attention_loop(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    B, T, C = q.shape
    S = k.shape[1]
    D = C // n_heads
    heads, weights = [], []
    for h in range(n_heads):
        qh, kh, vh = (t[..., h * D:(h + 1) * D] for t in (q, k, v))
        scores = qh @ kh.transpose(1, 2) / math.sqrt(D)  # (B, T, S)
        if mask is not None:
            scores = scores.masked_fill(~mask.expand(B, n_heads, T, S)[:, h], float("-inf"))
        w = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # fully masked rows: zeros
        heads.append(w @ vh)
        weights.append(w)
    return torch.cat(heads, dim=-1) @ w_o, torch.stack(weights, 1)
""",
        ),
    ],
    "mha_impl": [
        A(
            "reshape/transpose inline, einsum scores, own masked softmax",
            """\
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, T, C = x_q.shape
    S = x_kv.shape[1]
    D = C // n_heads
    q = (x_q @ w_q).view(B, T, n_heads, D).transpose(1, 2)
    k = (x_kv @ w_k).view(B, S, n_heads, D).transpose(1, 2)
    v = (x_kv @ w_v).view(B, S, n_heads, D).transpose(1, 2)
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(D)
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.where(torch.isnan(weights), torch.zeros_like(weights), weights)
    out = (weights @ v).transpose(1, 2).reshape(B, T, C)
    return out @ w_o, weights
""",
        ),
        A(
            "heads folded into the batch axis (B*H, T, D)",
            """\
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, T, C = x_q.shape
    S = x_kv.shape[1]
    H, D = n_heads, C // n_heads
    q = split_heads(x_q @ w_q, H).reshape(B * H, T, D)
    k = split_heads(x_kv @ w_k, H).reshape(B * H, S, D)
    v = split_heads(x_kv @ w_v, H).reshape(B * H, S, D)
    m = None if mask is None else torch.broadcast_to(mask, (B, H, T, S)).reshape(B * H, T, S)
    out, weights = scaled_dot_product_attention(q, k, v, m)
    out = merge_heads(out.reshape(B, H, T, D))
    return out @ w_o, weights.reshape(B, H, T, S)
""",
        ),
        A(
            "einsum projections, then split_heads / merge_heads",
            """\
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(torch.einsum("btc,cd->btd", x_q, w_q), n_heads)
    k = split_heads(torch.einsum("bsc,cd->bsd", x_kv, w_k), n_heads)
    v = split_heads(torch.einsum("bsc,cd->bsd", x_kv, w_v), n_heads)
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    return torch.einsum("btc,cd->btd", merge_heads(out), w_o), weights
""",
        ),
    ],
    "torch_mha_impl": [
        A(
            "load_state_dict with the two weights",
            """\
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    C = w_q.shape[0]
    module = nn.MultiheadAttention(embed_dim=C, num_heads=n_heads, bias=False, batch_first=True)
    module.load_state_dict({
        "in_proj_weight": torch.cat([w_q, w_k, w_v], dim=1).T.clone(),
        "out_proj.weight": w_o.T.clone(),
    })
    module.eval()
    return module
""",
        ),
        A(
            "copies W_q^T, W_k^T, W_v^T into the three row blocks one by one",
            """\
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    C = w_q.shape[0]
    mha = nn.MultiheadAttention(C, n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        for i, w in enumerate((w_q, w_k, w_v)):
            mha.in_proj_weight[i * C:(i + 1) * C] = w.t()
        mha.out_proj.weight[:] = w_o.t()
    return mha.eval()
""",
        ),
        A(
            "new Parameters assigned, built with torch.stack",
            """\
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    C = w_q.shape[0]
    module = nn.MultiheadAttention(C, n_heads, bias=False, batch_first=True).eval()
    stacked = torch.stack([w_q, w_k, w_v]).transpose(1, 2).reshape(3 * C, C)
    module.in_proj_weight = nn.Parameter(stacked.detach().clone())
    module.out_proj.weight = nn.Parameter(w_o.detach().T.contiguous())
    return module
""",
        ),
    ],
}
