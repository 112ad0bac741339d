"""Holdout for notebook 02, written from notebooks/02_multi_head_attention/02_multi_head_attention.ipynb
alone (without reading the checks)."""

import math

import torch
from torch import nn

from tests.holdout._harness import Mistake, collector
from transformer_lab import scaled_dot_product_attention

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "02")
right = collector(CORRECT, "02")
NAMED_AT_LEAST = 1.0  # measured: 39 of 39 named


def _split(x, h):
    b, t, c = x.shape
    if c % h:
        raise ValueError(f"C={c} is not divisible by n_heads={h}")
    return x.view(b, t, h, c // h).transpose(1, 2)  # (B, H, T, D)


def _merge(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)  # (B, T, C)


# ---------------------------------------------------------------- split_heads
@wrong("split_heads", "transpose|reshape|token|channel|slice")
def split_bare_reshape(x, n_heads):
    b, t, c = x.shape
    if c % n_heads:
        raise ValueError(f"C={c} is not divisible by {n_heads} heads")
    return x.reshape(b, n_heads, t, c // n_heads)


@wrong("split_heads", "transpose|shape|order|dim")
def split_view_without_transpose(x, n_heads):
    b, t, c = x.shape
    if c % n_heads:
        raise ValueError(f"C={c} is not divisible by {n_heads} heads")
    return x.view(b, t, n_heads, c // n_heads)


@wrong("split_heads", "interleav|stride|channel|slice|contiguous|consecutive")
def split_interleaved_channels(x, n_heads):
    b, t, c = x.shape
    if c % n_heads:
        raise ValueError(f"C={c} is not divisible by {n_heads} heads")
    return x.view(b, t, c // n_heads, n_heads).permute(0, 3, 1, 2)


@wrong("split_heads", "valueerror|divisib|raise|divide")
def split_without_divisibility_check(x, n_heads):
    b, t, c = x.shape
    d = c // n_heads
    return x[..., : n_heads * d].reshape(b, t, n_heads, d).transpose(1, 2)


@wrong("split_heads", "valueerror|raise|error|exception")
def split_asserts_instead_of_raising(x, n_heads):
    b, t, c = x.shape
    assert c % n_heads == 0, f"C={c} is not divisible by {n_heads}"
    return x.view(b, t, n_heads, c // n_heads).transpose(1, 2)


@wrong("split_heads", "message|number|name|both")
def split_error_without_numbers(x, n_heads):
    b, t, c = x.shape
    if c % n_heads:
        raise ValueError("the width is not divisible by the number of heads")
    return x.view(b, t, n_heads, c // n_heads).transpose(1, 2)


@wrong("split_heads", "n_heads|head|width")
def split_n_heads_as_head_width(x, n_heads):
    b, t, c = x.shape
    if c % n_heads:
        raise ValueError(f"C={c} is not divisible by {n_heads}")
    return x.view(b, t, c // n_heads, n_heads).transpose(1, 2)


@wrong("split_heads", "transpose|reshape|order|token|channel")
def split_transpose_then_reshape(x, n_heads):
    b, t, c = x.shape
    if c % n_heads:
        raise ValueError(f"C={c} is not divisible by {n_heads}")
    return x.transpose(1, 2).reshape(b, n_heads, t, c // n_heads)


@right("split_heads")
def split_with_unflatten(x, n_heads):
    c = x.shape[-1]
    if c % n_heads != 0:
        raise ValueError(f"the width {c} cannot be split into {n_heads} heads")
    return x.unflatten(-1, (n_heads, c // n_heads)).permute(0, 2, 1, 3)


@right("split_heads")
def split_with_chunks(x, n_heads):
    c = x.shape[-1]
    if c % n_heads:
        raise ValueError(f"C = {c} is not a multiple of n_heads = {n_heads}")
    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)


# ---------------------------------------------------------------- merge_heads
@wrong("merge_heads", "transpose|reshape|order|token")
def merge_bare_reshape(x):
    b, h, t, d = x.shape
    return x.reshape(b, t, h * d)


@wrong("merge_heads", "contiguous|view|reshape")
def merge_view_after_transpose(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).view(b, t, h * d)


@wrong("merge_heads", "interleav|order|channel|head|stride")
def merge_channels_interleaved(x):
    b, h, t, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, t, h * d)


@wrong("merge_heads", "sum|concat|shape|added|adding")
def merge_by_summing(x):
    return x.sum(dim=1)


@wrong("merge_heads", "mean|average|concat|shape")
def merge_by_averaging(x):
    return x.mean(dim=1)


@wrong("merge_heads", "shape|reshape|flatten")
def merge_without_reshape(x):
    return x.transpose(1, 2).contiguous()


@wrong("merge_heads", "shape|order")
def merge_unpacks_wrong_order(x):
    b, t, h, d = x.shape  # the axes are (B, H, T, D)
    return x.transpose(1, 2).reshape(b, t, h * d)


@wrong("merge_heads", "order|revers|head")
def merge_heads_reversed(x):
    return _merge(x.flip(1))


@right("merge_heads")
def merge_with_cat(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


@right("merge_heads")
def merge_with_flatten(x):
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)


# ---------------------------------------------------------------- multi_head_attention
def _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None, split=_split, scale=None):
    q, k, v = split(x_q @ w_q, n_heads), split(x_kv @ w_k, n_heads), split(x_kv @ w_v, n_heads)
    if scale is None:
        out, w = scaled_dot_product_attention(q, k, v, mask)
    else:
        s = q @ k.transpose(-2, -1) / scale
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, dim=-1)
        out = w @ v
    return _merge(out) @ w_o, w


@wrong("multi_head_attention", "sqrt|scale|head width|d_model")
def mha_scaled_by_model_width(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, scale=math.sqrt(x_q.shape[-1]))


@wrong("multi_head_attention", "w_o|output projection|out_proj")
def mha_without_output_projection(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    out, w = _mha(x_q, x_kv, w_q, w_k, w_v, torch.eye(w_o.shape[0]), n_heads, mask)
    return out, w


@wrong("multi_head_attention", "x_kv|key|cross|x_q|self")
def mha_keys_from_queries(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return _mha(x_q, x_q, w_q, w_k, w_v, w_o, n_heads, mask)


@wrong("multi_head_attention", "transpose|reshape|split|head")
def mha_bare_reshape_split(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    def split(x, h):
        b, t, c = x.shape
        return x.reshape(b, h, t, c // h)

    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask, split=split)


@wrong("multi_head_attention", "weights|shape|head|average|per head")
def mha_weights_averaged(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    out, w = _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask)
    return out, w.mean(dim=1)


@wrong("multi_head_attention", "mask")
def mha_ignores_mask(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads)


@wrong("multi_head_attention", "mask|polarity|invert|true|false")
def mha_mask_inverted(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, None if mask is None else ~mask)


@wrong("multi_head_attention", "head|slice|column|same")
def mha_loop_same_slice_for_every_head(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, t, c = x_q.shape
    d = c // n_heads
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    m = None if mask is None else mask.expand(b, n_heads, t, x_kv.shape[1])
    outs, ws = [], []
    for h in range(n_heads):
        o, w = scaled_dot_product_attention(
            q[..., :d], k[..., :d], v[..., h * d : (h + 1) * d], None if m is None else m[:, h]
        )
        outs.append(o)
        ws.append(w)
    return torch.cat(outs, dim=-1) @ w_o, torch.stack(ws, dim=1)


@wrong("multi_head_attention", "w_o|transpose|output")
def mha_output_projection_transposed(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return _mha(x_q, x_kv, w_q, w_k, w_v, w_o.T, n_heads, mask)


@wrong("multi_head_attention", "w_k|key")
def mha_keys_projected_with_w_q(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return _mha(x_q, x_kv, w_q, w_q, w_v, w_o, n_heads, mask)


@wrong("multi_head_attention", "weights|shape|dim|stack|head")
def mha_loop_stacks_weights_first(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, t, c = x_q.shape
    d = c // n_heads
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    m = None if mask is None else mask.expand(b, n_heads, t, x_kv.shape[1])
    outs, ws = [], []
    for h in range(n_heads):
        cols = slice(h * d, (h + 1) * d)
        o, w = scaled_dot_product_attention(
            q[..., cols], k[..., cols], v[..., cols], None if m is None else m[:, h]
        )
        outs.append(o)
        ws.append(w)
    return torch.cat(outs, dim=-1) @ w_o, torch.stack(ws, dim=0)


@wrong("multi_head_attention", "mask|broadcast|expand|head")
def mha_loop_mask_not_expanded(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    c = x_q.shape[-1]
    d = c // n_heads
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    outs, ws = [], []
    for h in range(n_heads):
        cols = slice(h * d, (h + 1) * d)
        o, w = scaled_dot_product_attention(
            q[..., cols], k[..., cols], v[..., cols], None if mask is None else mask[:, h]
        )
        outs.append(o)
        ws.append(w)
    return torch.cat(outs, dim=-1) @ w_o, torch.stack(ws, dim=1)


@wrong("multi_head_attention", "order|revers|head|concat")
def mha_loop_heads_concatenated_reversed(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, t, c = x_q.shape
    q, k, v = (_split(z, n_heads) for z in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    out, w = scaled_dot_product_attention(q, k, v, mask)
    return torch.cat(out.unbind(1)[::-1], dim=-1) @ w_o, w


@right("multi_head_attention")
def mha_loop_reference(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, t, c = x_q.shape
    s, d = x_kv.shape[1], c // n_heads
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    m = None if mask is None else mask.expand(b, n_heads, t, s)
    outs, ws = [], []
    for h in range(n_heads):
        cols = slice(h * d, (h + 1) * d)
        o, w = scaled_dot_product_attention(
            q[..., cols], k[..., cols], v[..., cols], None if m is None else m[:, h]
        )
        outs.append(o)
        ws.append(w)
    return torch.cat(outs, dim=-1) @ w_o, torch.stack(ws, dim=1)


@right("multi_head_attention")
def mha_einsum_per_head_blocks(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    c = x_q.shape[-1]
    d = c // n_heads
    wq = w_q.view(c, n_heads, d)  # (C, H, D)
    wk = w_k.view(c, n_heads, d)
    wv = w_v.view(c, n_heads, d)
    q = torch.einsum("btc,chd->bhtd", x_q, wq)
    k = torch.einsum("bsc,chd->bhsd", x_kv, wk)
    v = torch.einsum("bsc,chd->bhsd", x_kv, wv)
    out, w = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, D)
    wo = w_o.view(n_heads, d, c)  # row blocks W_O^h
    return torch.einsum("bhtd,hdc->btc", out, wo), w


# ---------------------------------------------------------------- to_torch_mha
def _torch_mha(c, n_heads, in_proj, out_proj, eval_mode=True, **kw):
    options = {"bias": False, "batch_first": True, **kw}
    m = nn.MultiheadAttention(c, n_heads, **options)
    with torch.no_grad():
        m.in_proj_weight.copy_(in_proj)
        m.out_proj.weight.copy_(out_proj)
    return m.eval() if eval_mode else m


@wrong("to_torch_mha", "transpose|(out, in)|stored|w.t|orient")
def torch_mha_not_transposed(w_q, w_k, w_v, w_o, n_heads):
    return _torch_mha(w_q.shape[0], n_heads, torch.cat([w_q, w_k, w_v]), w_o.T)


@wrong("to_torch_mha", "order|query|key|in_proj")
def torch_mha_keys_first(w_q, w_k, w_v, w_o, n_heads):
    return _torch_mha(w_q.shape[0], n_heads, torch.cat([w_k.T, w_q.T, w_v.T]), w_o.T)


@wrong("to_torch_mha", "w_o|out_proj|transpose|output")
def torch_mha_out_proj_not_transposed(w_q, w_k, w_v, w_o, n_heads):
    return _torch_mha(w_q.shape[0], n_heads, torch.cat([w_q.T, w_k.T, w_v.T]), w_o)


@wrong("to_torch_mha", "eval|train|mode")
def torch_mha_left_in_train_mode(w_q, w_k, w_v, w_o, n_heads):
    in_proj = torch.cat([w_q.T, w_k.T, w_v.T])
    return _torch_mha(w_q.shape[0], n_heads, in_proj, w_o.T, eval_mode=False)


@wrong("to_torch_mha", "batch_first|batch|layout|sequence first")
def torch_mha_sequence_first(w_q, w_k, w_v, w_o, n_heads):
    in_proj = torch.cat([w_q.T, w_k.T, w_v.T])
    return _torch_mha(w_q.shape[0], n_heads, in_proj, w_o.T, batch_first=False)


@wrong("to_torch_mha", "w_o|out_proj|output|copy")
def torch_mha_out_proj_not_copied(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
    return m.eval()


@wrong("to_torch_mha", "bias")
def torch_mha_with_biases(w_q, w_k, w_v, w_o, n_heads):
    in_proj = torch.cat([w_q.T, w_k.T, w_v.T])
    return _torch_mha(w_q.shape[0], n_heads, in_proj, w_o.T, bias=True)


@wrong("to_torch_mha", "shape|3c|dim|stack|concat|row")
def torch_mha_concatenated_columns(w_q, w_k, w_v, w_o, n_heads):
    return _torch_mha(w_q.shape[0], n_heads, torch.cat([w_q.T, w_k.T, w_v.T], dim=1), w_o.T)


@wrong("to_torch_mha", "no_grad|grad|in-place|in place")
def torch_mha_copy_with_grad(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
    m.out_proj.weight.copy_(w_o.T)
    return m.eval()


@wrong("to_torch_mha", "head|n_heads|num_heads")
def torch_mha_one_head(w_q, w_k, w_v, w_o, n_heads):
    return _torch_mha(w_q.shape[0], 1, torch.cat([w_q.T, w_k.T, w_v.T]), w_o.T)


@right("to_torch_mha")
def torch_mha_by_slices(w_q, w_k, w_v, w_o, n_heads):
    c = w_q.shape[0]
    m = nn.MultiheadAttention(c, n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        for i, w in enumerate((w_q, w_k, w_v)):
            m.in_proj_weight[i * c : (i + 1) * c].copy_(w.t())
        m.out_proj.weight.copy_(w_o.t())
    m.eval()
    return m


@right("to_torch_mha")
def torch_mha_stacked(w_q, w_k, w_v, w_o, n_heads):
    m = nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True).eval()
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.stack([w_q, w_k, w_v]).transpose(1, 2).flatten(0, 1))
        m.out_proj.weight.copy_(w_o.transpose(0, 1))
    return m
