"""Notebook 02, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text (splitting and merging heads, multi-head attention, the nn.MultiheadAttention copy), written
without looking at what the checks detect. ``python -m tests.holdout report 02w``."""

from tests.catalogues._source import wrong

# Before the fixes of issue 39: 16/1/1/0 named/generic/misleading/passed; after: 17 of 18 named, 1 generic.
# h16: merge_heads averaging (or summing) the heads named: 18 of 18.
NAMED_AT_LEAST = 1.0

_MHA = """
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q = split_heads(x_q @ w_q, n_heads)
    k = split_heads(x_kv @ w_k, n_heads)
    v = split_heads(x_kv @ w_v, n_heads)
    {body}
"""


def _mha(label, body):
    return f"# {label}\n" + _MHA.format(body=body)


MISTAKES = [
    wrong(
        "split_heads",
        "transpos|order|(B, H, T, D)|axes",
        """
# heads and features moved last: (B, H, D, T)
def split_heads(x, n_heads):
    B, T, C = x.shape
    return x.view(B, T, n_heads, C // n_heads).permute(0, 2, 3, 1)
""",
    ),
    wrong(
        "split_heads",
        "int|//|float",
        """
# C / n_heads (a float)
def split_heads(x, n_heads):
    B, T, C = x.shape
    return x.view(B, T, n_heads, C / n_heads).transpose(1, 2)
""",
    ),
    wrong(
        "merge_heads",
        "interleav|order",
        """
# features ordered (D, H): permute(0, 2, 3, 1)
def merge_heads(x):
    B, H, T, D = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, H * D)
""",
    ),
    wrong(
        "merge_heads",
        "interleav|order",
        """
# heads stacked on the last axis
def merge_heads(x):
    B, H, T, D = x.shape
    return torch.stack([x[:, h] for h in range(H)], dim=-1).reshape(B, T, H * D)
""",
    ),
    wrong(
        "merge_heads",
        "transpos|order|positions",
        """
# transposes T and D
def merge_heads(x):
    B, H, T, D = x.shape
    return x.transpose(2, 3).reshape(B, T, H * D)
""",
    ),
    wrong(
        "merge_heads",
        "average|concatenat",
        """
# averages the heads
def merge_heads(x):
    B, H, T, D = x.shape
    return x.mean(dim=1).repeat(1, 1, H)
""",
    ),
    wrong(
        "multi_head_attention",
        "merge|transpose|order",
        _mha(
            "merged without transposing",
            """
    out, w = scaled_dot_product_attention(q, k, v, mask)
    B, H, T, D = out.shape
    return out.reshape(B, T, H * D) @ w_o, w""",
        ),
    ),
    wrong(
        "multi_head_attention",
        "average|heads|shape",
        _mha(
            "weights averaged over heads",
            """
    out, w = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(out) @ w_o, w.mean(dim=1)""",
        ),
    ),
    wrong(
        "multi_head_attention",
        "head 0|first head|shape",
        _mha(
            "weights of head 0 only",
            """
    out, w = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(out) @ w_o, w[:, 0]""",
        ),
    ),
    wrong(
        "multi_head_attention",
        "over the heads|heads|dim",
        _mha(
            "softmax over the heads",
            """
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=1)
    return merge_heads(w @ v) @ w_o, w""",
        ),
    ),
    wrong(
        "multi_head_attention",
        "mask",
        _mha(
            "mask polarity inverted",
            """
    out, w = scaled_dot_product_attention(q, k, v, None if mask is None else ~mask)
    return merge_heads(out) @ w_o, w""",
        ),
    ),
    wrong(
        "multi_head_attention",
        "sqrt|scale",
        _mha(
            "scaled by sqrt(n_heads)",
            """
    s = q @ k.transpose(-2, -1) / math.sqrt(n_heads)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = softmax(s, dim=-1)
    return merge_heads(w @ v) @ w_o, w""",
        ),
    ),
    wrong(
        "multi_head_attention",
        "w_o|output projection|transpos",
        _mha(
            "w_o transposed",
            """
    out, w = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(out) @ w_o.T, w""",
        ),
    ),
    wrong(
        "to_torch_mha",
        "bias",
        """
# biases left at their initial values
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    C = w_q.shape[0]
    mha = nn.MultiheadAttention(C, n_heads, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
        mha.out_proj.weight.copy_(w_o.T)
    return mha.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "order|w_v|w_k|keys|values",
        """
# (q, v, k) order
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    C = w_q.shape[0]
    mha = nn.MultiheadAttention(C, n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([w_q.T, w_v.T, w_k.T]))
        mha.out_proj.weight.copy_(w_o.T)
    return mha.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "dropout",
        """
# dropout left on, module in training mode
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    C = w_q.shape[0]
    mha = nn.MultiheadAttention(C, n_heads, dropout=0.5, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
        mha.out_proj.weight.copy_(w_o.T)
    return mha
""",
    ),
    wrong(
        "to_torch_mha",
        "heads|n_heads",
        """
# n_heads ignored: one head
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    C = w_q.shape[0]
    mha = nn.MultiheadAttention(C, 1, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
        mha.out_proj.weight.copy_(w_o.T)
    return mha.eval()
""",
    ),
    wrong(
        "to_torch_mha",
        "transpos|(out, in)|untransposed",
        """
# in_proj copied untransposed
def to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    C = w_q.shape[0]
    mha = nn.MultiheadAttention(C, n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        mha.out_proj.weight.copy_(w_o.T)
    return mha.eval()
""",
    ),
]
