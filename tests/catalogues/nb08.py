"""Notebook 8's mistake catalogue: realistic wrong implementations of each exercise, the words
the instant check's message must contain for each, and correct variants in other styles.

Each entry is written the way a student might write it; the words are what a student needs to
read to find the bug. ``CORRECT`` variants must pass the check and the graded cell.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.holdout._harness import Mistake, collector
from transformer_lab import sinusoidal_encoding

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
NAMED_AT_LEAST = 1.0  # 54 of 54 when converted to this format
wrong = collector(MISTAKES, "08")
correct = collector(CORRECT, "08")


def _check_size(H, W, P):
    if H % P or W % P:
        raise ValueError(f"height {H} and width {W} must be multiples of P={P}")


def _grid(images, P):
    B, C, H, W = images.shape
    _check_size(H, W, P)
    return images.reshape(B, C, H // P, P, W // P, P), (B, C, H // P, W // P)


# ---------------------------------------------------------------------------------------------
# patchify(images, patch_size)
@wrong("patchify", "(row, column, channel)")
def patchify_hwc_inside(images, P):
    x, (B, C, gh, gw) = _grid(images, P)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(B, gh * gw, C * P * P)


@wrong("patchify", "without permuting")
def patchify_reshape_only(images, P):
    B, C, H, W = images.shape
    _check_size(H, W, P)
    return images.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "column by column")
def patchify_column_major(images, P):
    x, (B, C, gh, gw) = _grid(images, P)
    return x.permute(0, 4, 2, 1, 3, 5).reshape(B, gh * gw, C * P * P)


@wrong("patchify", "transposed")
def patchify_transposed_patch(images, P):
    x, (B, C, gh, gw) = _grid(images, P)
    return x.permute(0, 2, 4, 1, 5, 3).reshape(B, gh * gw, C * P * P)


@wrong("patchify", "strided")
def patchify_strided(images, P):
    B, C, H, W = images.shape
    _check_size(H, W, P)
    x = images.reshape(B, C, P, H // P, P, W // P)
    return x.permute(0, 3, 5, 1, 2, 4).reshape(B, -1, C * P * P)


@wrong("patchify", "transpose")
def patchify_unfold_untransposed(images, P):
    _check_size(images.shape[2], images.shape[3], P)
    return F.unfold(images, kernel_size=P, stride=P)  # (B, C*P*P, N)


@wrong("patchify", "overlap")
def patchify_unfold_stride_one(images, P):
    _check_size(images.shape[2], images.shape[3], P)
    return F.unfold(images, kernel_size=P).transpose(1, 2)


@wrong("patchify", "ValueError")
def patchify_no_size_check(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "should name")
def patchify_vague_error(images, P):
    B, C, H, W = images.shape
    if H % P or W % P:
        raise ValueError("the image cannot be cut into patches")
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "torch.Tensor")
def patchify_numpy(images, P):
    x, (B, C, gh, gw) = _grid(images, P)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, C * P * P).numpy()


@wrong("patchify", "reshape")
def patchify_square_grid_assumed(images, P):
    B, C, H, W = images.shape
    _check_size(H, W, P)
    x = images.reshape(B, C, H // P, P, H // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, -1, C * P * P)


@correct("patchify")
def patchify_unfold(images, P):
    _check_size(images.shape[2], images.shape[3], P)
    return F.unfold(images, kernel_size=P, stride=P).transpose(1, 2)


@correct("patchify")
def patchify_loops(images, P):
    B, C, H, W = images.shape
    _check_size(H, W, P)
    rows = []
    for i in range(0, H, P):
        for j in range(0, W, P):
            rows.append(images[:, :, i : i + P, j : j + P].reshape(B, -1))
    return torch.stack(rows, dim=1)


# ---------------------------------------------------------------------------------------------
# linear_to_conv(linear, patch_size, n_channels)
def _conv(linear, P, ch, **kwargs):
    return nn.Conv2d(ch, linear.out_features, **{"kernel_size": P, "stride": P, **kwargs})


@wrong("linear_to_conv", "stride")
def conv_stride_one(linear, P, ch):
    conv = _conv(linear, P, ch, stride=1)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(conv.weight.shape))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "(C, P, P, channels)")
def conv_channels_last(linear, P, ch):
    conv = _conv(linear, P, ch)
    C = linear.out_features
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(C, P, P, ch).permute(0, 3, 1, 2))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "no bias")
def conv_without_bias(linear, P, ch):
    conv = _conv(linear, P, ch, bias=False)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(conv.weight.shape))
    return conv


@wrong("linear_to_conv", "bias is not the Linear")
def conv_bias_not_copied(linear, P, ch):
    conv = _conv(linear, P, ch)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(conv.weight.shape))
    return conv


@wrong("linear_to_conv", "weight is not the Linear")
def conv_weight_not_copied(linear, P, ch):
    conv = _conv(linear, P, ch)
    with torch.no_grad():
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "kernel")
def conv_kernel_p_squared(linear, P, ch):
    return nn.Conv2d(ch, linear.out_features, kernel_size=P * P, stride=P)


@wrong("linear_to_conv", "maps")
def conv_channels_swapped(linear, P, ch):
    return nn.Conv2d(linear.out_features, ch, kernel_size=P, stride=P)


@wrong("linear_to_conv", "transposed")
def conv_kernel_transposed(linear, P, ch):
    conv = _conv(linear, P, ch)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(conv.weight.shape).transpose(2, 3))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "(out, in)")
def conv_weight_transposed_first(linear, P, ch):
    conv = _conv(linear, P, ch)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.T.reshape(conv.weight.shape))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "nn.Conv2d")
def conv_returns_linear(linear, P, ch):
    return linear


@wrong("linear_to_conv", "changed the Linear")
def conv_moves_weights(linear, P, ch):
    conv = _conv(linear, P, ch)
    with torch.no_grad():
        linear.weight.mul_(1.0)  # a harmless-looking in-place op ...
        linear.weight.add_(0.0 * linear.weight + 1e-3)  # ... then an accidental edit
        conv.weight.copy_(linear.weight.view(conv.weight.shape))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "padding")
def conv_padded(linear, P, ch):
    conv = _conv(linear, P, ch, padding=1)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(conv.weight.shape))
        conv.bias.copy_(linear.bias)
    return conv


@correct("linear_to_conv")
def conv_by_data(linear, P, ch):
    conv = nn.Conv2d(ch, linear.out_features, P, P)
    conv.weight.data = linear.weight.data.reshape(linear.out_features, ch, P, P).clone()
    conv.bias.data = linear.bias.data.clone()
    return conv


@correct("linear_to_conv")
def conv_load_state_dict(linear, P, ch):
    conv = nn.Conv2d(ch, linear.out_features, kernel_size=(P, P), stride=(P, P))
    weight = linear.weight.detach().unflatten(1, (ch, P, P))
    conv.load_state_dict({"weight": weight, "bias": linear.bias.detach()})
    return conv


# ---------------------------------------------------------------------------------------------
# vit_embed(images, patch_size, w_e, b_e, cls_token, pos)
def _patches(images, P):
    x, (B, C, gh, gw) = _grid(images, P)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, C * P * P)


@wrong("vit_embed", "end")
def embed_cls_last(images, P, w_e, b_e, cls_token, pos):
    x = _patches(images, P) @ w_e + b_e
    return torch.cat([x, cls_token.expand(x.shape[0], 1, -1)], dim=1) + pos


@wrong("vit_embed", "no position")
def embed_cls_without_position(images, P, w_e, b_e, cls_token, pos):
    x = _patches(images, P) @ w_e + b_e + pos[1:]
    return torch.cat([cls_token.expand(x.shape[0], 1, -1), x], dim=1)


@wrong("vit_embed", "row 0")
def embed_positions_shifted(images, P, w_e, b_e, cls_token, pos):
    x = _patches(images, P) @ w_e + b_e + pos[:-1]
    cls = cls_token.expand(x.shape[0], 1, -1) + pos[-1]
    return torch.cat([cls, x], dim=1)


@wrong("vit_embed", "bias")
def embed_no_bias(images, P, w_e, b_e, cls_token, pos):
    x = _patches(images, P) @ w_e
    return torch.cat([cls_token.expand(x.shape[0], 1, -1), x], dim=1) + pos


@wrong("vit_embed", "position embeddings are missing")
def embed_no_positions(images, P, w_e, b_e, cls_token, pos):
    x = _patches(images, P) @ w_e + b_e
    return torch.cat([cls_token.expand(x.shape[0], 1, -1), x], dim=1)


@wrong("vit_embed", "(row, column, channel)")
def embed_hwc_patches(images, P, w_e, b_e, cls_token, pos):
    x, (B, C, gh, gw) = _grid(images, P)
    x = x.permute(0, 2, 4, 3, 5, 1).reshape(B, gh * gw, C * P * P) @ w_e + b_e
    return torch.cat([cls_token.expand(B, 1, -1), x], dim=1) + pos


@wrong("vit_embed", "expand")
def embed_cls_not_expanded(images, P, w_e, b_e, cls_token, pos):
    x = _patches(images, P) @ w_e + b_e
    return torch.cat([cls_token[None, None, :], x], dim=1) + pos


@wrong("vit_embed", "patches @ w_e")
def embed_weight_transposed(images, P, w_e, b_e, cls_token, pos):
    x = _patches(images, P) @ w_e.T + b_e
    return torch.cat([cls_token.expand(x.shape[0], 1, -1), x], dim=1) + pos


@wrong("vit_embed", "prepend")
def embed_cls_added_to_patches(images, P, w_e, b_e, cls_token, pos):
    return _patches(images, P) @ w_e + b_e + cls_token + pos[1:]


@wrong("vit_embed", "patches get no position")
def embed_position_on_cls_only(images, P, w_e, b_e, cls_token, pos):
    x = _patches(images, P) @ w_e + b_e
    return torch.cat([cls_token.expand(x.shape[0], 1, -1) + pos[0], x], dim=1)


@correct("vit_embed")
def embed_linear_functional(images, P, w_e, b_e, cls_token, pos):
    x = F.linear(F.unfold(images, P, stride=P).transpose(1, 2), w_e.T, b_e)
    cls = cls_token.reshape(1, 1, -1).repeat(images.shape[0], 1, 1)
    return torch.cat((cls, x), 1) + pos.unsqueeze(0)


@correct("vit_embed")
def embed_einsum(images, P, w_e, b_e, cls_token, pos):
    x = torch.einsum("bnk,kc->bnc", _patches(images, P), w_e) + b_e
    out = torch.empty(x.shape[0], x.shape[1] + 1, x.shape[2], dtype=x.dtype)
    out[:, 0] = cls_token
    out[:, 1:] = x
    return out + pos


# ---------------------------------------------------------------------------------------------
# sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0)
def _halves(h, w, C, base, width=None):
    width = width or C // 2
    rows = sinusoidal_encoding(h, width, base)[:, : C // 2]
    cols = sinusoidal_encoding(w, width, base)[:, : C // 2]
    return rows[:, None, :].expand(h, w, C // 2), cols[None, :, :].expand(h, w, C // 2)


def _need4(C):
    if C % 4:
        raise ValueError(f"d_model must be divisible by 4, but received d_model={C}")


@wrong("sinusoidal_2d", "swapped")
def sin2d_halves_swapped(h, w, C, base=10000.0):
    _need4(C)
    rows, cols = _halves(h, w, C, base)
    return torch.cat([cols, rows], dim=-1).reshape(h * w, C)


@wrong("sinusoidal_2d", "column-major")
def sin2d_column_major(h, w, C, base=10000.0):
    _need4(C)
    rows, cols = _halves(h, w, C, base)
    return torch.cat([rows, cols], dim=-1).transpose(0, 1).reshape(h * w, C)


@wrong("sinusoidal_2d", "1-D")
def sin2d_flat_index(h, w, C, base=10000.0):
    _need4(C)
    return sinusoidal_encoding(h * w, C, base)


@wrong("sinusoidal_2d", "half the channels")
def sin2d_full_width_added(h, w, C, base=10000.0):
    _need4(C)
    rows, cols = sinusoidal_encoding(h, C, base), sinusoidal_encoding(w, C, base)
    return (rows[:, None, :] + cols[None, :, :]).reshape(h * w, C)


@wrong("sinusoidal_2d", "interleaved")
def sin2d_interleaved(h, w, C, base=10000.0):
    _need4(C)
    rows, cols = _halves(h, w, C, base)
    return torch.stack([rows, cols], dim=-1).reshape(h * w, C)


@wrong("sinusoidal_2d", "swapped")
def sin2d_axes_swapped(h, w, C, base=10000.0):
    _need4(C)
    rows, cols = _halves(w, h, C, base)
    return torch.cat([rows, cols], dim=-1).reshape(h * w, C)


@wrong("sinusoidal_2d", "base")
def sin2d_base_ignored(h, w, C, base=10000.0):
    _need4(C)
    rows, cols = _halves(h, w, C, 10000.0)
    return torch.cat([rows, cols], dim=-1).reshape(h * w, C)


@wrong("sinusoidal_2d", "ValueError")
def sin2d_no_width_check(h, w, C, base=10000.0):
    half = C // 2
    rows = sinusoidal_encoding(h, half + half % 2, base)[:, :half]
    cols = sinusoidal_encoding(w, half + half % 2, base)[:, :half]
    grid = torch.cat([rows[:, None].expand(h, w, half), cols[None].expand(h, w, half)], -1)
    return grid.reshape(h * w, 2 * half)


@wrong("sinusoidal_2d", "dtype")
def sin2d_float64(h, w, C, base=10000.0):
    _need4(C)
    rows, cols = _halves(h, w, C, base)
    return torch.cat([rows, cols], dim=-1).reshape(h * w, C).double()


@wrong("sinusoidal_2d", "full width C")
def sin2d_frequencies_of_full_width(h, w, C, base=10000.0):
    _need4(C)
    rows, cols = _halves(h, w, C, base, width=C)
    return torch.cat([rows, cols], dim=-1).reshape(h * w, C)


@correct("sinusoidal_2d")
def sin2d_from_scratch(h, w, C, base=10000.0):
    if C % 4 != 0:
        raise ValueError(f"d_model={C} is not a multiple of 4")
    half = C // 2
    freqs = base ** (-torch.arange(0, half, 2, dtype=torch.float32) / half)  # (C/4,)

    def enc(n):
        angles = torch.arange(n, dtype=torch.float32)[:, None] * freqs  # (n, C/4)
        return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(n, half)

    r, c = enc(h), enc(w)
    return torch.cat([r.repeat_interleave(w, 0), c.repeat(h, 1)], dim=1)


@correct("sinusoidal_2d")
def sin2d_loops(h, w, C, base=10000.0):
    _need4(C)
    rows, cols = sinusoidal_encoding(h, C // 2, base), sinusoidal_encoding(w, C // 2, base)
    out = [torch.cat([rows[i], cols[j]]) for i in range(h) for j in range(w)]
    return torch.stack(out)


# ---------------------------------------------------------------------------------------------
# attention_rollout(attentions)
def _mix(a):
    return 0.5 * a.mean(dim=1) + 0.5 * torch.eye(a.shape[-1])


@wrong("attention_rollout", "wrong order")
def rollout_wrong_order(attentions):
    out = _mix(attentions[0])
    for a in attentions[1:]:
        out = out @ _mix(a)
    return out


@wrong("attention_rollout", "residual")
def rollout_no_residual(attentions):
    out = attentions[0].mean(dim=1)
    for a in attentions[1:]:
        out = a.mean(dim=1) @ out
    return out


@wrong("attention_rollout", "sum to 2")
def rollout_not_renormalised(attentions):
    out = None
    for a in attentions:
        m = a.mean(dim=1) + torch.eye(a.shape[-1])
        out = m if out is None else m @ out
    return out


@wrong("attention_rollout", "max")
def rollout_max_heads(attentions):
    out = None
    for a in attentions:
        m = 0.5 * a.max(dim=1).values + 0.5 * torch.eye(a.shape[-1])
        out = m if out is None else m @ out
    return out


@wrong("attention_rollout", "only the last layer")
def rollout_last_layer(attentions):
    return _mix(attentions[-1])


@wrong("attention_rollout", "summed")
def rollout_summed(attentions):
    return sum(_mix(a) for a in attentions)


@wrong("attention_rollout", "first layer")
def rollout_skips_first(attentions):
    out = torch.eye(attentions[0].shape[-1]).expand(attentions[0].shape[0], -1, -1)
    for a in attentions[1:]:
        out = _mix(a) @ out
    return out


@wrong("attention_rollout", "changed its input")
def rollout_in_place(attentions):
    out = None
    for a in attentions:
        a.mul_(0.5).add_(0.5 * torch.eye(a.shape[-1]) / a.shape[1])
        m = a.sum(dim=1)
        out = m if out is None else m @ out
    return out


@wrong("attention_rollout", "one row")
def rollout_cls_row_only(attentions):
    out = None
    for a in attentions:
        out = _mix(a) if out is None else _mix(a) @ out
    return out[:, 0]


@wrong("attention_rollout", "heads")
def rollout_heads_kept(attentions):
    out = None
    for a in attentions:
        m = 0.5 * a + 0.5 * torch.eye(a.shape[-1])
        out = m if out is None else m @ out
    return out


@wrong("attention_rollout", "one (B, T, T) tensor")
def rollout_every_layer(attentions):
    outs, out = [], None
    for a in attentions:
        out = _mix(a) if out is None else _mix(a) @ out
        outs.append(out)
    return outs


@correct("attention_rollout")
def rollout_renormalised(attentions):
    T = attentions[0].shape[-1]
    result = torch.eye(T)
    for a in attentions:
        m = a.mean(1) + torch.eye(T)
        m = m / m.sum(-1, keepdim=True)
        result = torch.bmm(m, result.expand_as(m))
    return result


@correct("attention_rollout")
def rollout_einsum(attentions):
    out = None
    for a in attentions:
        m = (torch.einsum("bhts->bts", a) / a.shape[1] + torch.eye(a.shape[-1])) / 2
        out = m if out is None else torch.einsum("bij,bjk->bik", m, out)
    return out
