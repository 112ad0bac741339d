"""Notebook 02: split and merge heads, multi-head attention (loop and batched), PyTorch's module."""

from tests.catalogues._source import right, wrong

NAMED_AT_LEAST = 1.0  # every entry named (the floor since the feedback work; see _source.py)

_MHA = """
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q, n_heads)
    k = split_heads(x_kv @ w_k, n_heads)
    v = split_heads(x_kv @ w_v, n_heads)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(out) @ w_o, weights
"""

MISTAKES = [
    # ---------------------------------------------------------------- split_heads
    wrong(
        "split_heads",
        "no transpose",
        """
# reshape without transpose
def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}")
    return x.reshape(B, n_heads, T, C // n_heads)
""",
    ),
    wrong(
        "split_heads",
        "contiguous slice",
        """
# interleaved features
def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}")
    return x.view(B, T, C // n_heads, n_heads).permute(0, 3, 1, 2)
""",
    ),
    wrong(
        "split_heads",
        "transpose(1, 2)",
        """
# forgets the transpose
def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}")
    return x.view(B, T, n_heads, C // n_heads)
""",
    ),
    wrong(
        "split_heads",
        "valueerror",
        """
# no ValueError
def split_heads(x, n_heads):
    B, T, C = x.shape
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)
""",
    ),
    wrong(
        "split_heads",
        "valueerror",
        """
# assert instead of ValueError
def split_heads(x, n_heads):
    B, T, C = x.shape
    assert C % n_heads == 0, "C must be divisible by n_heads"
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)
""",
    ),
    wrong(
        "split_heads",
        "should name",
        """
# ValueError without the numbers
def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError("C must be divisible by the number of heads")
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)
""",
    ),
    wrong(
        "split_heads",
        "swapped",
        """
# heads stacked on dim 0
def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}")
    return torch.stack(x.chunk(n_heads, dim=-1), dim=0)
""",
    ),
    wrong(
        "split_heads",
        "n_heads",
        """
# two heads hard-coded
def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}")
    return x.view(B, T, 2, C // 2).transpose(1, 2)
""",
    ),
    wrong(
        "split_heads",
        "swapped",
        """
# positions and features swapped as well
def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}")
    return x.view(B, T, n_heads, C // n_heads).permute(0, 2, 3, 1)
""",
    ),
    # ---------------------------------------------------------------- merge_heads
    wrong(
        "merge_heads",
        "no transpose",
        """
# reshape without transpose
def merge_heads(x):
    B, H, T, D = x.shape
    return x.reshape(B, T, H * D)
""",
    ),
    wrong(
        "merge_heads",
        "interleaved",
        """
# interleaved features
def merge_heads(x):
    B, H, T, D = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, H * D)
""",
    ),
    wrong(
        "merge_heads",
        "last dim",
        """
# concatenated along the positions
def merge_heads(x):
    return torch.cat(x.unbind(1), dim=1)
""",
    ),
    wrong(
        "merge_heads",
        "reshape",
        """
# transpose without reshape
def merge_heads(x):
    return x.transpose(1, 2)
""",
    ),
    wrong(
        "merge_heads",
        "contiguous",
        """
# view after transpose
def merge_heads(x):
    B, H, T, D = x.shape
    return x.transpose(1, 2).view(B, T, H * D)
""",
    ),
    wrong(
        "merge_heads",
        "summed",
        """
# sums the heads
def merge_heads(x):
    return x.sum(dim=1)
""",
    ),
    wrong(
        "merge_heads",
        "reverse",
        """
# heads in reverse order
def merge_heads(x):
    return torch.cat(list(reversed(x.unbind(1))), dim=-1)
""",
    ),
    wrong(
        "merge_heads",
        "no transpose",
        """
# reshape with -1
def merge_heads(x):
    return x.reshape(x.shape[0], x.shape[2], -1)
""",
    ),
    # ---------------------------------------------------------------- multi-head attention
    wrong(
        "multi_head_attention",
        "w_o",
        """
# no output projection
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (split_heads(t, n_heads) for t in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(out), weights
""",
    ),
    wrong(
        "multi_head_attention",
        "split with a reshape",
        """
# split by reshape
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    def sp(t):
        B, L, C = t.shape
        return t.reshape(B, n_heads, L, C // n_heads)
    out, weights = scaled_dot_product_attention(sp(x_q @ w_q), sp(x_kv @ w_k), sp(x_kv @ w_v), mask)
    return merge_heads(out) @ w_o, weights
""",
    ),
    wrong(
        "multi_head_attention",
        "merged with a reshape",
        """
# merge by reshape
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (split_heads(t, n_heads) for t in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    B, H, T, D = out.shape
    return out.reshape(B, T, H * D) @ w_o, weights
""",
    ),
    wrong(
        "multi_head_attention",
        "sqrt(c)",
        """
# scaled by the model width (loop version)
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    B, T, C = q.shape
    D = C // n_heads
    outs, ws = [], []
    for h in range(n_heads):
        c = slice(h * D, (h + 1) * D)
        s = q[..., c] @ k[..., c].transpose(-2, -1) / math.sqrt(C)
        if mask is not None:
            s = s.masked_fill(~mask.expand(B, n_heads, T, k.shape[1])[:, h], float("-inf"))
        w = softmax(s)
        outs.append(w @ v[..., c])
        ws.append(w)
    return torch.cat(outs, -1) @ w_o, torch.stack(ws, 1)
""",
    ),
    wrong(
        "multi_head_attention",
        "row vectors",
        """
# column-vector weights
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (split_heads(t, n_heads) for t in (x_q @ w_q.T, x_kv @ w_k.T, x_kv @ w_v.T))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(out) @ w_o.T, weights
""",
    ),
    wrong(
        "multi_head_attention",
        "x_kv",
        """
# keys and values from x_q
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (split_heads(t, n_heads) for t in (x_q @ w_q, x_q @ w_k, x_q @ w_v))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(out) @ w_o, weights
""",
    ),
    wrong(
        "multi_head_attention",
        "ignore & mask",
        """
# mask ignored
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (split_heads(t, n_heads) for t in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    out, weights = scaled_dot_product_attention(q, k, v)
    return merge_heads(out) @ w_o, weights
""",
    ),
    wrong(
        "multi_head_attention",
        "tuple",
        """
# returns only out
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (split_heads(t, n_heads) for t in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(out) @ w_o
""",
    ),
    wrong(
        "multi_head_attention",
        "swapped",
        """
# loop, weights stacked on dim 0
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    B, T, C = q.shape
    D = C // n_heads
    outs, ws = [], []
    for h in range(n_heads):
        c = slice(h * D, (h + 1) * D)
        m = None if mask is None else mask.expand(B, n_heads, T, k.shape[1])[:, h]
        o, w = scaled_dot_product_attention(q[..., c], k[..., c], v[..., c], m)
        outs.append(o)
        ws.append(w)
    return torch.cat(outs, -1) @ w_o, torch.stack(ws, 0)
""",
    ),
    wrong(
        "multi_head_attention",
        "per head",
        """
# a per-head W_o (block diagonal)
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    B, T, C = q.shape
    D = C // n_heads
    outs, ws = [], []
    for h in range(n_heads):
        c = slice(h * D, (h + 1) * D)
        m = None if mask is None else mask.expand(B, n_heads, T, k.shape[1])[:, h]
        o, w = scaled_dot_product_attention(q[..., c], k[..., c], v[..., c], m)
        outs.append(o @ w_o[c, c])
        ws.append(w)
    return torch.cat(outs, -1), torch.stack(ws, 1)
""",
    ),
    wrong(
        "multi_head_attention",
        "first head",
        """
# loop that slices head 0 every time
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    B, T, C = q.shape
    D = C // n_heads
    outs, ws = [], []
    for h in range(n_heads):
        c = slice(0, D)
        m = None if mask is None else mask.expand(B, n_heads, T, k.shape[1])[:, h]
        o, w = scaled_dot_product_attention(q[..., c], k[..., c], v[..., c], m)
        outs.append(o)
        ws.append(w)
    return torch.cat(outs, -1) @ w_o, torch.stack(ws, 1)
""",
    ),
    wrong(
        "multi_head_attention",
        "wrong order",
        """
# returns (weights, out)
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (split_heads(t, n_heads) for t in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    return weights, merge_heads(out) @ w_o
""",
    ),
    # ---------------------------------------------------------------- to_torch_mha
    wrong(
        "to_torch_mha",
        "w_q.t",
        """
# weights copied untransposed
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v], 0))
        m.out_proj.weight.copy_(w_o.T)
    return m.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "w_o.t",
        """
# W_o untransposed
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T], 0))
        m.out_proj.weight.copy_(w_o)
    return m.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "queries, then keys",
        """
# keys first
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_k.T, w_q.T, w_v.T], 0))
        m.out_proj.weight.copy_(w_o.T)
    return m.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "eval",
        """
# not in eval mode
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T], 0))
        m.out_proj.weight.copy_(w_o.T)
    return m
""",
    ),
    wrong(
        "to_torch_mha",
        "batch_first",
        """
# batch_first missing
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T], 0))
        m.out_proj.weight.copy_(w_o.T)
    return m.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "num_heads",
        """
# one head
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], 1, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T], 0))
        m.out_proj.weight.copy_(w_o.T)
    return m.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "no_grad",
        """
# copies without no_grad
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T], 0))
    m.out_proj.weight.copy_(w_o.T)
    return m.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "out_proj.weight & w_o",
        """
# W_o never copied
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T], 0))
    return m.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "w_q & three times",
        """
# W_q copied three times
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q.T, w_q.T, w_q.T], 0))
        m.out_proj.weight.copy_(w_o.T)
    return m.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "return",
        """
# forgets to return
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T], 0))
        m.out_proj.weight.copy_(w_o.T)
    m.eval()
""",
    ),
]

CORRECT = [
    right(
        "split_heads",
        """
# chunk and stack
def split_heads(x, n_heads):
    if x.shape[-1] % n_heads != 0:
        raise ValueError(f"d_model {x.shape[-1]} is not divisible by {n_heads} heads")
    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)
""",
    ),
    right(
        "split_heads",
        """
# reshape and permute
def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads != 0:
        raise ValueError(f"C={C}, n_heads={n_heads}: C must be a multiple of n_heads")
    return x.reshape(B, T, n_heads, -1).permute(0, 2, 1, 3).contiguous()
""",
    ),
    right(
        "merge_heads",
        """
# permute and reshape
def merge_heads(x):
    B, H, T, D = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, -1)
""",
    ),
    right(
        "merge_heads",
        """
# concatenate the heads
def merge_heads(x):
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)
""",
    ),
    right("multi_head_attention", _MHA),
    right(
        "multi_head_attention",
        """
# loop over heads with a list
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    B, T, C = q.shape
    D = C // n_heads
    outs, ws = [], []
    for h in range(n_heads):
        c = slice(h * D, (h + 1) * D)
        m = None if mask is None else mask.expand(B, n_heads, T, k.shape[1])[:, h]
        o, w = scaled_dot_product_attention(q[..., c], k[..., c], v[..., c], m)
        outs.append(o)
        ws.append(w)
    return torch.cat(outs, dim=-1) @ w_o, torch.stack(ws, dim=1)
""",
    ),
    right(
        "multi_head_attention",
        """
# einsum throughout
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, T, C = x_q.shape
    S, H = x_kv.shape[1], n_heads
    q = torch.einsum("btc,cd->btd", x_q, w_q).view(B, T, H, C // H)
    k = torch.einsum("bsc,cd->bsd", x_kv, w_k).view(B, S, H, C // H)
    v = torch.einsum("bsc,cd->bsd", x_kv, w_v).view(B, S, H, C // H)
    scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(C // H)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhts,bshd->bthd", w, v).reshape(B, T, C)
    return out @ w_o, w
""",
    ),
    right(
        "to_torch_mha",
        """
# parameters assigned
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    C = w_q.shape[0]
    m = nn.MultiheadAttention(embed_dim=C, num_heads=n_heads, bias=False, batch_first=True)
    m.in_proj_weight = nn.Parameter(torch.cat([w_q, w_k, w_v], dim=1).T.contiguous())
    m.out_proj.weight = nn.Parameter(w_o.T.contiguous())
    m.eval()
    return m
""",
    ),
]
