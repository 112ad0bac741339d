"""The instant checks: references pass, a catalogue of typical student bugs is caught WITH the
right diagnosis, broken submissions get clear messages, and the integrity guards hold.

Each buggy implementation below is written the way a student would write it; the test asserts
on the words of the diagnosis, so a check that fails for the wrong reason fails this test.
"""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import transformer_lab
from transformer_lab import attention, blocks, checks, heads, masks, positional


# ---------------------------------------------------------------------------------------------
# Correct student implementations (written from scratch, not the package's code).
def good_softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    shifted = x - torch.where(torch.isinf(m), torch.zeros_like(m), m)  # all -inf slice: zeros
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True).clamp_min(1e-30)


def good_sdpa(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = good_softmax(scores)
    return w @ v, w


def good_split(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}")
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)


def good_merge(x):
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)


def good_mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (
        good_split(x_q @ w_q, n_heads),
        good_split(x_kv @ w_k, n_heads),
        good_split(x_kv @ w_v, n_heads),
    )
    out, w = good_sdpa(q, k, v, mask)
    return good_merge(out) @ w_o, w


def good_pe(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} is odd")
    t = torch.arange(n_positions, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angles = t / base ** (two_i / d_model)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


def good_causal(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))


def good_padding(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, None, :]


def good_layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def good_self_attention(x, w_q, w_k, w_v):
    return good_sdpa(x @ w_q, x @ w_k, x @ w_v)


def good_cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return good_sdpa(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)


def good_macs(T, C, D):
    return 3 * T * C * D + 2 * T * T * D


def good_to_torch_mha(w_q, w_k, w_v, w_o, n_heads):
    module = torch.nn.MultiheadAttention(w_q.shape[0], n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T], dim=0))
        module.out_proj.weight.copy_(w_o.T)
    return module.eval()


def _theta(d, base):
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def good_shift_matrix(k, d_model, base=10000.0):
    angle = k * _theta(d_model, base)
    m = torch.zeros(d_model, d_model)
    for i, a in enumerate(angle.tolist()):
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
        )
    return m


def good_offset_dot_product(k, d_model, base=10000.0):
    return torch.cos(k.double().unsqueeze(-1) * _theta(d_model, base)).sum(-1).float()


def good_apply_rope(x, base=10000.0, _positions=None, _theta_fn=_theta, _sign=1.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D={D} is odd")
    t = torch.arange(T, dtype=torch.float64) if _positions is None else _positions(T)
    angles = _sign * t[:, None] * _theta_fn(D, base)[None, :]  # (T, D/2)
    cos, sin = angles.cos().float(), angles.sin().float()
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).reshape(x.shape)


def good_future_leaks(attend, T, C, seed=0, _equal=torch.equal):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    with torch.no_grad():
        reference = attend(x)
        for j in range(1, T):
            changed = x.clone()
            changed[j] = torch.randn(C, generator=g)
            if not _equal(attend(changed)[:j], reference[:j]):
                return True
    return False


def good_pad_and_truncate(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, but received max_len={max_len}.")
    kept = [s[:max_len] for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long).reshape(
        len(kept), L
    )
    return ids, torch.tensor([len(s) for s in kept], dtype=torch.long)


GOOD = [
    (checks.check_softmax, good_softmax),
    (
        checks.check_softmax,
        attention.softmax,
    ),  # the package's reference passes its own check... see below
    (checks.check_scaled_dot_product_attention, good_sdpa),
    (checks.check_self_attention, good_self_attention),
    (checks.check_cross_attention, good_cross_attention),
    (checks.check_split_heads, good_split),
    (checks.check_merge_heads, good_merge),
    (checks.check_multi_head_attention, good_mha),
    (checks.check_sinusoidal_encoding, good_pe),
    (checks.check_causal_mask, good_causal),
    (checks.check_padding_mask, good_padding),
    (checks.check_layer_norm, good_layer_norm),
    (checks.check_self_attention_macs, good_macs),
    (checks.check_to_torch_mha, good_to_torch_mha),
    (checks.check_shift_matrix, good_shift_matrix),
    (checks.check_offset_dot_product, good_offset_dot_product),
    (checks.check_apply_rope, good_apply_rope),
    (checks.check_future_leaks, good_future_leaks),
    (checks.check_pad_and_truncate, good_pad_and_truncate),
]


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize(
    "check,impl", GOOD[:1] + GOOD[2:], ids=lambda v: getattr(v, "__name__", "impl")
)
def test_correct_implementations_pass(check, impl, hidden, capsys):
    check(impl, hidden=hidden)
    line = capsys.readouterr().out.strip()
    assert line.startswith("✓ ") and "passed" in line and "\n" not in line


def test_package_reference_itself_is_refused():
    # Passing the reference is exactly what a graded test must not accept.
    with pytest.raises(AssertionError, match="reference softmax"):
        checks.check_softmax(attention.softmax)


# ---------------------------------------------------------------------------------------------
# The catalogue of typical mistakes. Each entry: (check, buggy implementation, words the
# diagnosis must contain).
def bug_softmax_dim0(x, dim=-1):
    e = torch.exp(x - x.amax(dim=0, keepdim=True))
    return e / e.sum(dim=0, keepdim=True)


def bug_softmax_ignores_dim(x, dim=-1):
    return good_softmax(x, -1)


def bug_softmax_no_max(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def bug_softmax_global_max(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)


def bug_softmax_no_keepdim(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim)


def bug_sdpa_no_scale(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = good_softmax(s)
    return w @ v, w


def bug_sdpa_scale_by_d(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = good_softmax(s)
    return w @ v, w


def bug_sdpa_mask_after_softmax(q, k, v, mask=None):
    w = good_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
    if mask is not None:
        w = w.masked_fill(~mask, 0.0)
    return w @ v, w


def bug_sdpa_mask_reversed(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def bug_sdpa_mask_zero(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, 0.0)
    w = good_softmax(s)
    return w @ v, w


def bug_sdpa_no_transpose(q, k, v, mask=None):
    s = q @ k / math.sqrt(q.shape[-1])
    w = good_softmax(s)
    return w @ v, w


def bug_sdpa_k_T(q, k, v, mask=None):
    s = q @ k.transpose(0, 1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = good_softmax(s)
    return w @ v, w


def bug_sdpa_transpose_12(q, k, v, mask=None):
    kt = k.t() if k.dim() == 2 else k.transpose(1, 2)  # right for 2-D and 3-D, wrong for 4-D
    s = q @ kt / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = good_softmax(s)
    return w @ v, w


def bug_sdpa_softmax_dim(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = good_softmax(s, dim=-2)
    return w @ v, w


def bug_sdpa_naive_softmax(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = bug_softmax_no_max(s)
    return w @ v, w


def bug_sdpa_only_out(q, k, v, mask=None):
    return good_sdpa(q, k, v, mask)[0]


def bug_causal_reversed(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def bug_causal_no_diag(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)


def bug_causal_one_future(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def bug_causal_float(T):
    return torch.tril(torch.ones(T, T))


def bug_causal_additive(T):
    return torch.triu(torch.full((T, T), float("-inf")), diagonal=1)


def bug_causal_transposed(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool))


def bug_pad_reversed(lengths, S):
    return (torch.arange(S)[None, :] >= lengths[:, None])[:, None, None, :]


def bug_pad_off_by_one(lengths, S):
    return (torch.arange(S)[None, :] <= lengths[:, None])[:, None, None, :]


def bug_pad_2d(lengths, S):
    return torch.arange(S)[None, :] < lengths[:, None]


def bug_pe_swapped(n, d, base=10000.0):
    pe = good_pe(n, d, base)
    return torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).reshape(n, d)


def bug_pe_halves(n, d, base=10000.0):
    pe = good_pe(n, d, base)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=-1)


def bug_pe_exponent_half(n, d, base=10000.0):
    t = torch.arange(n, dtype=torch.float32)[:, None]
    i = torch.arange(d // 2, dtype=torch.float32)
    angles = t / base ** (i / d)  # forgot the 2 in 2i/d
    pe = torch.zeros(n, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


def bug_pe_exponent_double(n, d, base=10000.0):
    t = torch.arange(n, dtype=torch.float32)[:, None]
    j = torch.arange(0, d, 2, dtype=torch.float32)  # already 2i ...
    angles = t / base ** (2 * j / d)  # ... and doubled again
    pe = torch.zeros(n, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


def bug_pe_column_index(n, d, base=10000.0):
    t = torch.arange(n, dtype=torch.float32)[:, None]
    j = torch.arange(d, dtype=torch.float32)
    angles = t / base ** (j / d)
    pe = torch.where(torch.arange(d) % 2 == 0, torch.sin(angles), torch.cos(angles))
    return pe


def bug_pe_ignores_base(n, d, base=10000.0):
    return good_pe(n, d)


def bug_pe_from_one(n, d, base=10000.0):
    return good_pe(n + 1, d, base)[1:]


def bug_pe_transposed(n, d, base=10000.0):
    return good_pe(n, d, base).T


def bug_pe_float64(n, d, base=10000.0):
    return good_pe(n, d, base).double()


def bug_ln_unbiased(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)  # torch's default is the unbiased estimator
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def bug_ln_dim0(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=0, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def bug_ln_eps_outside(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    std = ((x - mean) ** 2).mean(dim=-1, keepdim=True).sqrt()
    return (x - mean) / (std + eps) * weight + bias


def bug_ln_swapped(x, weight, bias, eps=1e-5):
    return good_layer_norm(x, bias, weight, eps)


def bug_split_reshape(x, n_heads):
    B, T, C = x.shape
    return x.reshape(B, n_heads, T, C // n_heads)


def bug_split_interleaved(x, n_heads):
    B, T, C = x.shape
    return x.view(B, T, C // n_heads, n_heads).permute(0, 3, 1, 2)


def bug_split_no_transpose(x, n_heads):
    B, T, C = x.shape
    return x.view(B, T, n_heads, C // n_heads)


def bug_merge_reshape(x):
    B, H, T, D = x.shape
    return x.reshape(B, T, H * D)


def _with_weights(bug):
    """The old mistakes returned only `out`; the exercise returns (out, weights)."""

    def fn(*args, **kwargs):
        out = bug(*args, **kwargs)
        return (out, good_mha(*args, **kwargs)[1]) if torch.is_tensor(out) else out

    fn.__name__ = bug.__name__
    return fn


def bug_mha_no_out_proj(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (
        good_split(x_q @ w_q, n_heads),
        good_split(x_kv @ w_k, n_heads),
        good_split(x_kv @ w_v, n_heads),
    )
    return good_merge(good_sdpa(q, k, v, mask)[0])


def bug_mha_split_reshape(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (
        bug_split_reshape(x_q @ w_q, n_heads),
        bug_split_reshape(x_kv @ w_k, n_heads),
        bug_split_reshape(x_kv @ w_v, n_heads),
    )
    return good_merge(good_sdpa(q, k, v, mask)[0]) @ w_o


def bug_mha_scale_C(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (
        good_split(x_q @ w_q, n_heads),
        good_split(x_kv @ w_k, n_heads),
        good_split(x_kv @ w_v, n_heads),
    )
    s = q @ k.transpose(-2, -1) / math.sqrt(x_q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return good_merge(good_softmax(s) @ v) @ w_o


def bug_mha_kv_from_q(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return good_mha(x_q, x_q, w_q, w_k, w_v, w_o, n_heads, None)[0]


def bug_mha_column_vectors(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return good_mha(x_q, x_kv, w_q.T, w_k.T, w_v.T, w_o.T, n_heads, mask)[0]


def bug_self_attention_no_scale(x, w_q, w_k, w_v):
    return bug_sdpa_no_scale(x @ w_q, x @ w_k, x @ w_v)


def bug_self_attention_scale_C(x, w_q, w_k, w_v):
    s = (x @ w_q) @ (x @ w_k).transpose(-2, -1) / math.sqrt(x.shape[-1])
    w = good_softmax(s)
    return w @ (x @ w_v), w


def bug_cross_kv_from_q(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return good_sdpa(x_q @ w_q, x_q @ w_k, x_q @ w_v)


def bug_macs_projections_only(T, C, D):
    return 3 * T * C * D


def bug_macs_one_product(T, C, D):
    return 3 * T * C * D + T * T * D


def bug_macs_no_projections(T, C, D):
    return 2 * T * T * D


def bug_macs_flops(T, C, D):
    return 2 * (3 * T * C * D + 2 * T * T * D)


def bug_macs_tensor(T, C, D):
    return torch.tensor(3 * T * C * D + 2 * T * T * D)


def bug_to_torch_untransposed(w_q, w_k, w_v, w_o, n_heads):
    return good_to_torch_mha(w_q.T, w_k.T, w_v.T, w_o.T, n_heads)


def bug_to_torch_out_untransposed(w_q, w_k, w_v, w_o, n_heads):
    return good_to_torch_mha(w_q, w_k, w_v, w_o.T, n_heads)


def bug_to_torch_order(w_q, w_k, w_v, w_o, n_heads):
    return good_to_torch_mha(w_k, w_q, w_v, w_o, n_heads)


def bug_to_torch_training(w_q, w_k, w_v, w_o, n_heads):
    return good_to_torch_mha(w_q, w_k, w_v, w_o, n_heads).train()


def bug_shift_transposed(k, d_model, base=10000.0):
    return good_shift_matrix(k, d_model, base).T


def bug_shift_wrong_shape(k, d_model, base=10000.0):
    return good_shift_matrix(k, d_model, base)[: d_model // 2]


def bug_offset_all_columns(k, d_model, base=10000.0):
    # sums over all C columns (each frequency counted twice)
    return 2 * good_offset_dot_product(k, d_model, base)


def bug_offset_scalar(k, d_model, base=10000.0):
    return good_offset_dot_product(k, d_model, base).sum()


def bug_rope_wrong_way(x, base=10000.0):
    return good_apply_rope(x, base, _sign=-1.0)


def bug_rope_from_one(x, base=10000.0):
    return good_apply_rope(
        x, base, _positions=lambda T: torch.arange(1, T + 1, dtype=torch.float64)
    )


def bug_rope_exponent(x, base=10000.0):
    return good_apply_rope(
        x, base, _theta_fn=lambda d, b: b ** (-torch.arange(0, d, 2, dtype=torch.float64) / 2 / d)
    )


def bug_rope_halves(x, base=10000.0):
    D = x.shape[-1]
    perm = torch.cat(
        [torch.arange(0, D // 2)[:, None], torch.arange(D // 2, D)[:, None]], dim=1
    ).flatten()
    # pairs channel i with i + D/2: interleave the halves, rotate as pairs, undo the interleaving
    return good_apply_rope(x[..., perm], base)[..., perm.argsort()]


def bug_leaks_loose_tolerance(attend, T, C, seed=0):
    # "small changes are noise": the denominator leak moves the outputs by less than 0.3 here
    return good_future_leaks(attend, T, C, seed, _equal=lambda a, b: torch.allclose(a, b, atol=0.3))


def bug_leaks_only_last_token(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    changed = x.clone()
    changed[T - 1] = torch.randn(
        C, generator=g
    )  # only the last token, compared with the row before it
    return (
        not torch.equal(attend(changed)[T - 2 : T - 1], attend(x)[T - 2 : T - 1])
        if T > 1
        else False
    )


def bug_leaks_diagonal_counts(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    for j in range(T):  # also compares position j itself, which may legitimately change
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[: j + 1], attend(x)[: j + 1]):
            return True
    return False


def bug_leaks_tensor(attend, T, C, seed=0):
    return torch.tensor(good_future_leaks(attend, T, C, seed))


def bug_pad_to_max_len(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError("max_len must be at least 1.")
    kept = [s[:max_len] for s in sequences]
    ids = torch.tensor([s + [pad_id] * (max_len - len(s)) for s in kept], dtype=torch.long)
    return ids, torch.tensor([len(s) for s in kept], dtype=torch.long)


def bug_pad_left(sequences, max_len, pad_id):
    ids, lengths = good_pad_and_truncate(sequences, max_len, pad_id)
    L = ids.shape[1]
    left = [[pad_id] * (L - len(s[:max_len])) + s[:max_len] for s in sequences]
    return torch.tensor(left, dtype=torch.long).reshape(ids.shape), lengths


def bug_pad_lengths_before_truncation(sequences, max_len, pad_id):
    ids, _ = good_pad_and_truncate(sequences, max_len, pad_id)
    return ids, torch.tensor([len(s) for s in sequences], dtype=torch.long)


def bug_pad_float_ids(sequences, max_len, pad_id):
    ids, lengths = good_pad_and_truncate(sequences, max_len, pad_id)
    return ids.float(), lengths


def bug_pad_no_validation(sequences, max_len, pad_id):
    kept = [s[:max_len] for s in sequences]
    L = max(len(s) for s in kept)
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept], dtype=torch.long).reshape(
        len(kept), L
    )
    return ids, torch.tensor([len(s) for s in kept], dtype=torch.long)


CATALOGUE = [
    (checks.check_softmax, bug_softmax_dim0, "dimension 0"),
    (checks.check_softmax, bug_softmax_ignores_dim, "ignores the `dim`"),
    (checks.check_softmax, bug_softmax_no_max, "overflow"),
    (checks.check_softmax, bug_softmax_global_max, "maximum of each slice"),
    (checks.check_softmax, bug_softmax_no_keepdim, "keepdim"),
    (checks.check_scaled_dot_product_attention, bug_sdpa_no_scale, "scaling is missing"),
    (
        checks.check_scaled_dot_product_attention,
        bug_sdpa_scale_by_d,
        "divided by D instead of sqrt(D)",
    ),
    (checks.check_scaled_dot_product_attention, bug_sdpa_mask_after_softmax, "after the softmax"),
    (checks.check_scaled_dot_product_attention, bug_sdpa_mask_reversed, "polarity is reversed"),
    (checks.check_scaled_dot_product_attention, bug_sdpa_mask_zero, "instead of -inf"),
    (checks.check_scaled_dot_product_attention, bug_sdpa_no_transpose, "k.transpose(-2, -1)"),
    (checks.check_scaled_dot_product_attention, bug_sdpa_k_T, "transpose"),
    (checks.check_scaled_dot_product_attention, bug_sdpa_transpose_12, "last two dimensions"),
    (checks.check_scaled_dot_product_attention, bug_sdpa_softmax_dim, "over the queries"),
    (checks.check_scaled_dot_product_attention, bug_sdpa_naive_softmax, "overflow"),
    (checks.check_scaled_dot_product_attention, bug_sdpa_only_out, "tuple (out, weights)"),
    (checks.check_self_attention, bug_self_attention_no_scale, "scaling is missing"),
    (checks.check_self_attention, bug_self_attention_scale_C, "instead of sqrt(D)"),
    (checks.check_cross_attention, bug_cross_kv_from_q, "x_kv"),
    (checks.check_causal_mask, bug_causal_reversed, "polarity is reversed"),
    (checks.check_causal_mask, bug_causal_no_diag, "diagonal is excluded"),
    (checks.check_causal_mask, bug_causal_one_future, "next token"),
    (checks.check_causal_mask, bug_causal_float, "boolean"),
    (checks.check_causal_mask, bug_causal_additive, "0/-inf"),
    (checks.check_causal_mask, bug_causal_transposed, "transposed"),
    (checks.check_padding_mask, bug_pad_reversed, "polarity is reversed"),
    (checks.check_padding_mask, bug_pad_off_by_one, "off by one"),
    (checks.check_padding_mask, bug_pad_2d, "mask[:, None, None, :]"),
    (checks.check_sinusoidal_encoding, bug_pe_swapped, "sin and cos are swapped"),
    (checks.check_sinusoidal_encoding, bug_pe_halves, "interleaving is wrong"),
    (checks.check_sinusoidal_encoding, bug_pe_exponent_half, "factor of 2"),
    (checks.check_sinusoidal_encoding, bug_pe_exponent_double, "factor of 2"),
    (checks.check_sinusoidal_encoding, bug_pe_column_index, "column index"),
    (checks.check_sinusoidal_encoding, bug_pe_ignores_base, "`base` argument is ignored"),
    (checks.check_sinusoidal_encoding, bug_pe_from_one, "start at 1"),
    (checks.check_sinusoidal_encoding, bug_pe_transposed, "(d_model, n_positions)"),
    (checks.check_sinusoidal_encoding, bug_pe_float64, "dtype torch.float32"),
    (checks.check_layer_norm, bug_ln_unbiased, "unbiased"),
    (checks.check_layer_norm, bug_ln_dim0, "over dimension 0"),
    (checks.check_layer_norm, bug_ln_eps_outside, "standard deviation"),
    (checks.check_layer_norm, bug_ln_swapped, "swapped"),
    (checks.check_split_heads, bug_split_reshape, "reshape but no transpose"),
    (checks.check_split_heads, bug_split_interleaved, "contiguous slice"),
    (checks.check_split_heads, bug_split_no_transpose, "transpose(1, 2)"),
    (checks.check_merge_heads, bug_merge_reshape, "reshape but no transpose"),
    (
        checks.check_multi_head_attention,
        _with_weights(bug_mha_no_out_proj),
        "output projection is missing",
    ),
    (
        checks.check_multi_head_attention,
        _with_weights(bug_mha_split_reshape),
        "split with a reshape but no transpose",
    ),
    (checks.check_multi_head_attention, _with_weights(bug_mha_scale_C), "instead of sqrt(D)"),
    (checks.check_multi_head_attention, _with_weights(bug_mha_kv_from_q), "x_kv"),
    (checks.check_multi_head_attention, _with_weights(bug_mha_column_vectors), "row vectors"),
    (checks.check_self_attention_macs, bug_macs_projections_only, "counted the projections only"),
    (checks.check_self_attention_macs, bug_macs_one_product, "Only one of the two T x T products"),
    (checks.check_self_attention_macs, bug_macs_no_projections, "three projections X W"),
    (checks.check_self_attention_macs, bug_macs_flops, "That is FLOPs"),
    (checks.check_self_attention_macs, bug_macs_tensor, "return a Python int"),
    (checks.check_to_torch_mha, bug_to_torch_untransposed, "in_proj_weight holds W_q untransposed"),
    (
        checks.check_to_torch_mha,
        bug_to_torch_out_untransposed,
        "out_proj.weight holds W_o untransposed",
    ),
    (checks.check_to_torch_mha, bug_to_torch_order, "queries, then keys, then values"),
    (checks.check_to_torch_mha, bug_to_torch_training, ".eval()"),
    (checks.check_shift_matrix, bug_shift_transposed, "is the transpose"),
    (checks.check_shift_matrix, bug_shift_wrong_shape, "should have shape (16, 16)"),
    (checks.check_offset_dot_product, bug_offset_all_columns, "twice the dot product"),
    (checks.check_offset_dot_product, bug_offset_scalar, "one value per offset"),
    (checks.check_apply_rope, bug_rope_wrong_way, "rotated the wrong way"),
    (checks.check_apply_rope, bug_rope_from_one, "positions start at 1"),
    (checks.check_apply_rope, bug_rope_exponent, "not i/D"),
    (checks.check_apply_rope, bug_rope_halves, "not (i, i + D/2)"),
    (checks.check_future_leaks, bug_leaks_loose_tolerance, "compare exactly"),
    (checks.check_future_leaks, bug_leaks_only_last_token, "LAST token to the FIRST query"),
    (
        checks.check_future_leaks,
        bug_leaks_diagonal_counts,
        "does not leak, yet your detector said True",
    ),
    (checks.check_future_leaks, bug_leaks_tensor, "return True or False"),
    (checks.check_pad_and_truncate, bug_pad_to_max_len, "not to max_len"),
    (checks.check_pad_and_truncate, bug_pad_left, "padded on the left"),
    (checks.check_pad_and_truncate, bug_pad_lengths_before_truncation, "(after truncation)"),
    (checks.check_pad_and_truncate, bug_pad_float_ids, "ids must be a torch.long tensor"),
    (checks.check_pad_and_truncate, bug_pad_no_validation, "should raise ValueError"),
]


@pytest.mark.parametrize("check,impl,diagnosis", CATALOGUE, ids=[c[1].__name__ for c in CATALOGUE])
def test_catalogue_of_mistakes_is_diagnosed(check, impl, diagnosis):
    with pytest.raises(AssertionError) as info:
        check(impl)
    message = str(info.value)
    assert diagnosis in message, message
    assert message.startswith(check.__name__ + ":")


# ---------------------------------------------------------------------------------------------
# Broken submissions get clear messages.
def _untouched(*args, **kwargs):
    # YOUR CODE HERE
    raise NotImplementedError()


def _returns_none(x, dim=-1):
    torch.exp(x)


def _raises(x, dim=-1):
    return x / 0 if False else x.reshape(-1, 7)


def _returns_numpy(x, dim=-1):
    return good_softmax(x, dim).numpy()


def _wrong_shape(x, dim=-1):
    return torch.exp(x).sum(dim=dim)


def _in_place(x, dim=-1):
    x -= x.amax(dim=dim, keepdim=True)
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)


def _float64(x, dim=-1):
    return good_softmax(x.double(), dim)


def _wrong_signature(x, axis=-1):
    return good_softmax(x, axis)


@pytest.mark.parametrize(
    "impl,words",
    [
        (_untouched, "not implemented yet"),
        (_returns_none, "returned None"),
        (_raises, "raised RuntimeError"),
        (_returns_numpy, "must be a torch.Tensor"),
        (_wrong_shape, "should have shape"),
        (_in_place, "in place"),
        (_float64, "should have dtype torch.float32"),
        (_wrong_signature, "keep the signature `softmax(x, dim=-1)`"),
        ("softmax", "pass the function itself"),
    ],
    ids=[
        "untouched",
        "none",
        "raises",
        "numpy",
        "shape",
        "in-place",
        "dtype",
        "signature",
        "not-callable",
    ],
)
def test_broken_submissions_get_clear_messages(impl, words):
    with pytest.raises(AssertionError, match="check_softmax") as info:
        checks.check_softmax(impl)
    assert words in str(info.value), str(info.value)


def test_untouched_release_of_every_check_says_not_implemented():
    for name in checks.__all__:
        if name.startswith("check_"):
            with pytest.raises(AssertionError, match="not implemented yet"):
                getattr(checks, name)(_untouched)


# ---------------------------------------------------------------------------------------------
# Integrity (a): the reference for the graded thing cannot be used, under any name.
from transformer_lab.attention import softmax as bound_before  # noqa: E402  (a student's alias)

_copied_reference = types.FunctionType(
    attention.softmax.__code__, attention.softmax.__globals__, "my_softmax"
)


@pytest.mark.parametrize(
    "impl,words",
    [
        (lambda x, dim=-1: bound_before(x, dim), "reference softmax"),
        (lambda x, dim=-1: transformer_lab.softmax(x, dim=dim), "reference softmax"),
        (lambda x, dim=-1: _copied_reference(x, dim), "reference softmax"),
        (lambda x, dim=-1: torch.softmax(x, dim), "built-in softmax"),
        (lambda x, dim=-1: F.softmax(x, dim=dim), "built-in softmax"),
        (lambda x, dim=-1: x.softmax(dim), "built-in softmax"),
        (lambda x, dim=-1: torch.nn.Softmax(dim=dim)(x), "built-in softmax"),
    ],
    ids=[
        "alias",
        "package-attr",
        "copied-code",
        "torch.softmax",
        "F.softmax",
        "Tensor.softmax",
        "nn.Softmax",
    ],
)
def test_softmax_reference_is_disabled(impl, words):
    with pytest.raises(AssertionError, match=words):
        checks.check_softmax(impl)
    # ... and the reference works again afterwards.
    x = torch.randn(3, 4)
    torch.testing.assert_close(attention.softmax(x), torch.softmax(x, -1))


def test_swallowing_the_refusal_does_not_help():
    def sneaky(x, dim=-1):
        try:
            return bound_before(x, dim)
        except BaseException:
            return good_softmax(x, dim)

    with pytest.raises(AssertionError, match="reference softmax"):
        checks.check_softmax(sneaky)


def test_switching_off_the_call_monitor_is_detected():
    def sneaky(x, dim=-1):
        sys.setprofile(None)
        return torch.softmax(x, dim)

    with pytest.raises(AssertionError, match="call monitor"):
        checks.check_softmax(sneaky)


def _rope_cos_sin(x, base):
    angles = (
        torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * _theta(x.shape[-1], base)[None, :]
    )
    return angles.cos().float(), angles.sin().float()


def _offset_via_encodings(k, d, base):
    pe = positional.sinusoidal_encoding(100, d, base)
    return (pe[40][None, :] * pe[40 + k]).sum(-1)


def _macs_via_module(T, C, D):
    attention.SelfAttention(C, D)(torch.randn(T, C))  # measuring instead of counting
    return good_macs(T, C, D)


@pytest.mark.parametrize(
    "check,impl",
    [
        (
            checks.check_scaled_dot_product_attention,
            lambda q, k, v, mask=None: attention.scaled_dot_product_attention(q, k, v, mask),
        ),
        (
            checks.check_scaled_dot_product_attention,
            lambda q, k, v, mask=None: (
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                None,
            ),
        ),
        (checks.check_causal_mask, lambda T: masks.causal_mask(T)),
        (checks.check_padding_mask, lambda lengths, S: masks.padding_mask_from_lengths(lengths, S)),
        (
            checks.check_sinusoidal_encoding,
            lambda n, d, base=10000.0: positional.sinusoidal_encoding(n, d, base),
        ),
        (checks.check_layer_norm, lambda x, w, b, eps=1e-5: blocks.layer_norm(x, w, b, eps)),
        (
            checks.check_layer_norm,
            lambda x, w, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], w, b, eps),
        ),
        (checks.check_split_heads, lambda x, h: heads.split_heads(x, h)),
        (checks.check_merge_heads, lambda x: heads.merge_heads(x)),
        (
            checks.check_shift_matrix,
            lambda k, d, base=10000.0: positional.sinusoidal_shift_matrix(k, d, base),
        ),
        (
            checks.check_apply_rope,
            lambda x, base=10000.0: positional.RotaryEmbedding(x.shape[-1], base)(x),
        ),
        (
            checks.check_apply_rope,
            lambda x, base=10000.0: positional.apply_rotary(x, *_rope_cos_sin(x, base)),
        ),
        (
            checks.check_offset_dot_product,
            lambda k, d, base=10000.0: _offset_via_encodings(k, d, base),
        ),
        (checks.check_self_attention_macs, lambda T, C, D: _macs_via_module(T, C, D)),
    ],
    ids=[
        "sdpa",
        "torch-sdpa",
        "causal",
        "padding",
        "sinusoidal",
        "layer_norm",
        "F.layer_norm",
        "split",
        "merge",
        "shift-matrix",
        "RotaryEmbedding",
        "apply_rotary",
        "offset-via-encodings",
        "macs-via-module",
    ],
)
def test_every_reference_is_disabled(check, impl):
    with pytest.raises(AssertionError, match="disable"):
        check(impl)


def test_multi_head_attention_reference_is_disabled():
    def via_module(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
        m = heads.MultiHeadAttention(x_q.shape[-1], n_heads, bias=False)
        with torch.no_grad():
            for lin, w in ((m.q_proj, w_q), (m.k_proj, w_k), (m.v_proj, w_v), (m.out_proj, w_o)):
                lin.weight.copy_(w.T)
        return m(x_q, x_kv, mask=mask)

    def via_torch(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
        m = torch.nn.MultiheadAttention(x_q.shape[-1], n_heads, bias=False, batch_first=True)
        with torch.no_grad():
            m.in_proj_weight.copy_(torch.cat([w_q.T, w_k.T, w_v.T]))
            m.out_proj.weight.copy_(w_o.T)
        return m(x_q, x_kv, x_kv, attn_mask=None if mask is None else ~mask, need_weights=False)[0]

    for impl, words in ((via_module, "MultiHeadAttention"), (via_torch, "nn.MultiheadAttention")):
        with pytest.raises(AssertionError, match=words):
            checks.check_multi_head_attention(impl)


# Integrity (b): patched comparisons or checks are detected.
@pytest.mark.parametrize(
    "owner,name,label",
    [
        (torch, "allclose", "torch.allclose"),
        (torch, "equal", "torch.equal"),
        (torch.testing, "assert_close", "torch.testing.assert_close"),
        (np, "allclose", "numpy.allclose"),
        (np.testing, "assert_allclose", "numpy.testing.assert_allclose"),
        (torch.Tensor, "__eq__", "torch.Tensor.__eq__"),
        (attention, "softmax", "transformer_lab.attention.softmax"),
    ],
)
def test_patched_comparisons_are_detected(owner, name, label):
    had_own = name in vars(owner)  # Tensor.__eq__ is inherited from TensorBase
    original = vars(owner).get(name)
    setattr(owner, name, lambda *a, **k: True)
    try:
        with pytest.raises(AssertionError, match="grading integrity") as info:
            checks.check_softmax(good_softmax)
        assert label in str(info.value)
    finally:
        if had_own:
            setattr(owner, name, original)
        else:
            delattr(owner, name)
    checks.check_softmax(good_softmax)  # back to normal


def test_swapped_reference_code_is_detected():
    original = attention.softmax.__code__
    attention.softmax.__code__ = good_softmax.__code__
    try:
        with pytest.raises(AssertionError, match=r"transformer_lab.attention.softmax.__code__"):
            checks.check_scaled_dot_product_attention(good_sdpa)
    finally:
        attention.softmax.__code__ = original


def test_checks_module_is_read_only():
    with pytest.raises(AttributeError, match="read-only"):
        checks.check_softmax = lambda f, hidden=False: None
    with pytest.raises(AttributeError, match="read-only"):
        del checks.check_causal_mask
    with pytest.raises(AttributeError, match="read-only"):
        checks.engine.core.Runner = None


def test_checks_dict_edits_are_ignored_and_detected():
    namespace = object.__getattribute__(checks, "__dict__")
    original = namespace["check_softmax"]
    namespace["check_softmax"] = lambda f, hidden=False: None
    try:
        assert checks.check_softmax is original  # served from the sealed registry
        with pytest.raises(AssertionError, match="transformer_lab.checks.check_softmax"):
            checks.check_softmax(good_softmax)
    finally:
        namespace["check_softmax"] = original
    checks.check_softmax(good_softmax)


def test_importing_common_libraries_does_not_look_like_tampering():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import sklearn.datasets  # noqa: F401
    import transformers  # noqa: F401

    torch.manual_seed(0)
    checks.verify_integrity()


def test_pytorch_rewrapping_manual_seed_is_not_tampering_but_a_student_wrapper_is():
    """torch._dynamo (loaded by torch.compile, the FLOP counter, transformers) re-wraps
    torch.manual_seed after the checks' snapshot; that must not fail every check."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import functools, torch
        from transformer_lab.checks.engine import guards as _integrity
        import torch._dynamo  # noqa: F401  (re-wraps torch.manual_seed)
        assert _integrity.tampered() == [], _integrity.tampered()
        original = torch.manual_seed
        torch.manual_seed = functools.wraps(original)(lambda *a, **k: original(*a, **k))
        assert _integrity.tampered() == ["torch.manual_seed"], _integrity.tampered()
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.stdout.strip() == "ok", result.stderr
