"""Holdout for notebook 08, written from notebooks/08_vision_transformer/08_vision_transformer.ipynb
alone (without reading the checks)."""

import torch
import torch.nn.functional as F
from torch import nn

from tests.holdout._harness import Mistake, collector
from transformer_lab import sinusoidal_encoding

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "08")
right = collector(CORRECT, "08")
NAMED_AT_LEAST = 1.0  # measured: 45 of 45 named


def _check_size(images, P):
    H, W = images.shape[-2:]
    if H % P or W % P:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {P}")


def _patchify(images, P):
    _check_size(images, P)
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(B, (H // P) * (W // P), C * P * P)


# ---------------------------------------------------------------- patchify
@wrong("patchify", "reshape|square|row|permute|patch|pixel")
def patchify_bare_reshape(images, patch_size):
    _check_size(images, patch_size)
    B, C, H, W = images.shape
    N = (H // patch_size) * (W // patch_size)
    return images.reshape(B, N, C * patch_size * patch_size)


@wrong("patchify", "row by row|order|column|numbering|grid")
def patchify_column_by_column(images, patch_size):
    _check_size(images, patch_size)
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    return x.permute(0, 4, 2, 1, 3, 5).reshape(B, -1, C * P * P)


@wrong("patchify", "channel|order|inside|(channel, row, column)|flatten")
def patchify_channels_last_inside(images, patch_size):
    _check_size(images, patch_size)
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(B, -1, C * P * P)


@wrong("patchify", "valueerror|multiple|divisib|raise")
def patchify_without_size_check(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    images = images[..., : H // P * P, : W // P * P]
    return _patchify(images, P)


@wrong("patchify", "message|size|name|both")
def patchify_error_without_sizes(images, patch_size):
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError("the image cannot be cut into patches")
    return _patchify(images, patch_size)


@wrong("patchify", "shape|transpose|(b, n, c·p·p)|(b, n|dim")
def patchify_features_first(images, patch_size):
    return _patchify(images, patch_size).transpose(1, 2)


@wrong("patchify", "square|width|height|shape")
def patchify_assumes_square(images, patch_size):
    _check_size(images, patch_size)
    B, C, H, W = images.shape
    P = patch_size
    x = images[..., :H, :H] if W >= H else images
    return _patchify(x, P)


@wrong("patchify", "reshape|patch|square|grid|order")
def patchify_grid_and_patch_axes_swapped(images, patch_size):
    _check_size(images, patch_size)
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, P, H // P, P, W // P)
    return x.permute(0, 3, 5, 1, 2, 4).reshape(B, -1, C * P * P)


@right("patchify")
def patchify_with_unfold(images, patch_size):
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError(f"H={H}, W={W} must be multiples of P={patch_size}")
    cols = F.unfold(images, kernel_size=patch_size, stride=patch_size)  # (B, C*P*P, N)
    return cols.transpose(1, 2)


@right("patchify")
def patchify_with_tensor_unfold(images, patch_size):
    H, W = images.shape[-2:]
    if H % patch_size != 0 or W % patch_size != 0:
        raise ValueError(f"image {H}x{W} is not divisible into {patch_size}x{patch_size} patches")
    P = patch_size
    t = images.unfold(2, P, P).unfold(3, P, P)  # (B, C, H/P, W/P, P, P)
    return t.permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2)


# ---------------------------------------------------------------- linear_to_conv
def _conv(linear, P, C, weight, bias=True, stride=None):
    D = linear.out_features
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P if stride is None else stride, bias=bias)
    with torch.no_grad():
        conv.weight.copy_(weight)
        if bias:
            conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "order|channel|kernel|(d, c, p, p)|view|layout")
def conv_channels_last_kernel(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    w = linear.weight.view(D, P, P, n_channels).permute(0, 3, 1, 2)
    return _conv(linear, P, n_channels, w)


@wrong("linear_to_conv", "transpose|row|column|kernel")
def conv_kernel_transposed(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    w = linear.weight.view(D, n_channels, P, P).transpose(-2, -1)
    return _conv(linear, P, n_channels, w)


@wrong("linear_to_conv", "bias")
def conv_bias_not_copied(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=P)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(D, n_channels, P, P))
    return conv


@wrong("linear_to_conv", "stride|overlap")
def conv_stride_one(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    return _conv(linear, P, n_channels, linear.weight.view(D, n_channels, P, P), stride=1)


@wrong("linear_to_conv", "copy|share|storage|same tensor|copied|unchanged")
def conv_shares_linear_weight(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=P)
    conv.weight = nn.Parameter(linear.weight.view(D, n_channels, P, P))  # the same storage
    conv.bias = linear.bias
    return conv


@wrong("linear_to_conv", "no_grad|grad|in-place|in place")
def conv_copies_with_grad(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=P)
    conv.weight.copy_(linear.weight.view(D, n_channels, P, P))
    conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "bias")
def conv_without_bias(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    return _conv(linear, P, n_channels, linear.weight.view(D, n_channels, P, P), bias=False)


@wrong("linear_to_conv", "transpose|shape|(out, in)|weight")
def conv_from_transposed_weight(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    w = linear.weight.T.reshape(D, n_channels, P, P)
    return _conv(linear, P, n_channels, w)


@wrong("linear_to_conv", "in place|in-place|modif|linear|unchanged")
def conv_scales_linear_in_place(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    with torch.no_grad():
        linear.weight.mul_(1.0).add_(0.0)
        linear.bias.zero_()
    return _conv(linear, P, n_channels, linear.weight.view(D, n_channels, P, P))


@right("linear_to_conv")
def conv_with_load_state_dict(linear, patch_size, n_channels):
    D = linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=patch_size, stride=patch_size)
    conv.load_state_dict(
        {
            "weight": linear.weight.detach().reshape(D, n_channels, patch_size, patch_size).clone(),
            "bias": linear.bias.detach().clone(),
        }
    )
    return conv


# ---------------------------------------------------------------- vit_embed
def _embed(images, P, w_e, b_e, cls, pos):
    x = _patchify(images, P) @ w_e + b_e  # (B, N, D)
    c = cls.expand(x.shape[0], 1, -1)
    return torch.cat([c, x], dim=1) + pos


@wrong("vit_embed", "cls|token|n + 1|shape")
def embed_without_cls(images, patch_size, w_e, b_e, cls_token, pos):
    return _patchify(images, patch_size) @ w_e + b_e + pos[1:]


@wrong("vit_embed", "cls|first|front|position 0|at the end|the end|last")
def embed_cls_at_the_end(images, patch_size, w_e, b_e, cls_token, pos):
    x = _patchify(images, patch_size) @ w_e + b_e
    return torch.cat([x, cls_token.expand(x.shape[0], 1, -1)], dim=1) + pos


@wrong("vit_embed", "position|cls|pos[0]|row 0")
def embed_cls_without_position(images, patch_size, w_e, b_e, cls_token, pos):
    x = _patchify(images, patch_size) @ w_e + b_e + pos[1:]
    return torch.cat([cls_token.expand(x.shape[0], 1, -1), x], dim=1)


@wrong("vit_embed", "bias|b_e")
def embed_without_bias(images, patch_size, w_e, b_e, cls_token, pos):
    return _embed(images, patch_size, w_e, torch.zeros_like(b_e), cls_token, pos)


@wrong("vit_embed", "position|row 0|offset|align|pos_emb|pos[")
def embed_positions_misaligned(images, patch_size, w_e, b_e, cls_token, pos):
    x = _patchify(images, patch_size) @ w_e + b_e + pos[:-1]
    c = (cls_token + pos[-1]).expand(x.shape[0], 1, -1)
    return torch.cat([c, x], dim=1)


@wrong("vit_embed", "transpose|shape|w_e")
def embed_linear_convention(images, patch_size, w_e, b_e, cls_token, pos):
    x = _patchify(images, patch_size) @ w_e.T + b_e
    return torch.cat([cls_token.expand(x.shape[0], 1, -1), x], dim=1) + pos


@wrong("vit_embed", "patch|reshape|square|patchify")
def embed_with_bare_reshape(images, patch_size, w_e, b_e, cls_token, pos):
    B, C, H, W = images.shape
    x = images.reshape(B, -1, C * patch_size * patch_size) @ w_e + b_e
    return torch.cat([cls_token.expand(B, 1, -1), x], dim=1) + pos


@wrong("vit_embed", "position|pos_emb|pos[")
def embed_without_positions(images, patch_size, w_e, b_e, cls_token, pos):
    return _embed(images, patch_size, w_e, b_e, cls_token, torch.zeros_like(pos))


@wrong("vit_embed", "bias|cls|b_e")
def embed_bias_on_cls_too(images, patch_size, w_e, b_e, cls_token, pos):
    return _embed(images, patch_size, w_e, b_e, cls_token + b_e, pos)


@right("vit_embed")
def embed_with_expand(images, patch_size, w_e, b_e, cls_token, pos):
    tokens = torch.addmm(b_e, _patchify(images, patch_size).flatten(0, 1), w_e)
    tokens = tokens.view(images.shape[0], -1, w_e.shape[1])  # (B, N, D)
    cls = cls_token.view(1, 1, -1).expand(images.shape[0], -1, -1)
    return torch.cat((cls, tokens), dim=1) + pos.unsqueeze(0)


# ---------------------------------------------------------------- sinusoidal_2d
def _check4(d):
    if d % 4:
        raise ValueError(f"d_model must be a multiple of 4, got {d}")


def _two_d(gh, gw, d, base=10000.0, swap=False, width=None, col_major=False, dtype=torch.float32):
    half = d // 2
    w = half if width is None else width
    rows = sinusoidal_encoding(gh, w, base)[:, :half]
    cols = sinusoidal_encoding(gw, w, base)[:, :half]
    r = torch.arange(gh).repeat_interleave(gw)
    q = torch.arange(gw).repeat(gh)
    if col_major:
        r = torch.arange(gh).repeat(gw)
        q = torch.arange(gw).repeat_interleave(gh)
    a, b = rows[r], cols[q]
    out = torch.cat([b, a] if swap else [a, b], dim=-1)
    return out.to(dtype)


@wrong("sinusoidal_2d", "row|column|half|swap|first|second")
def pe2d_halves_swapped(grid_h, grid_w, d_model, base=10000.0):
    _check4(d_model)
    return _two_d(grid_h, grid_w, d_model, base, swap=True)


@wrong("sinusoidal_2d", "width|d/2|half|frequenc|d_model")
def pe2d_full_width_codes_cut(grid_h, grid_w, d_model, base=10000.0):
    _check4(d_model)
    return _two_d(grid_h, grid_w, d_model, base, width=d_model)


@wrong("sinusoidal_2d", "concat|added|adding|half|sum")
def pe2d_row_plus_column(grid_h, grid_w, d_model, base=10000.0):
    _check4(d_model)
    rows = sinusoidal_encoding(grid_h, d_model, base)
    cols = sinusoidal_encoding(grid_w, d_model, base)
    return (rows[:, None, :] + cols[None, :, :]).reshape(grid_h * grid_w, d_model)


@wrong("sinusoidal_2d", "multiple of 4|valueerror|raise")
def pe2d_without_check(grid_h, grid_w, d_model, base=10000.0):
    d = d_model + (-d_model) % 4
    return _two_d(grid_h, grid_w, d, base)[:, :d_model]


@wrong("sinusoidal_2d", "multiple|d_model|width")
def pe2d_checks_only_even(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    return _two_d(grid_h, grid_w, d_model, base)  # the 1-D helper raises for an odd half


@wrong("sinusoidal_2d", "row by row|order|column|grid")
def pe2d_column_major(grid_h, grid_w, d_model, base=10000.0):
    _check4(d_model)
    return _two_d(grid_h, grid_w, d_model, base, col_major=True)


@wrong("sinusoidal_2d", "float32|dtype|float64|double")
def pe2d_float64(grid_h, grid_w, d_model, base=10000.0):
    _check4(d_model)
    return _two_d(grid_h, grid_w, d_model, base, dtype=torch.float64)


@wrong("sinusoidal_2d", "base")
def pe2d_ignores_base(grid_h, grid_w, d_model, base=10000.0):
    _check4(d_model)
    return _two_d(grid_h, grid_w, d_model)


@wrong("sinusoidal_2d", "grid|row|column|swap")
def pe2d_grid_sizes_swapped(grid_h, grid_w, d_model, base=10000.0):
    _check4(d_model)
    return _two_d(grid_w, grid_h, d_model, base)


@wrong("sinusoidal_2d", "message|name|d_model|value")
def pe2d_error_without_value(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError("the width must be a multiple of four")
    return _two_d(grid_h, grid_w, d_model, base)


@right("sinusoidal_2d")
def pe2d_meshgrid(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4 != 0:
        raise ValueError(f"d_model={d_model} is not a multiple of 4")
    rows = sinusoidal_encoding(grid_h, d_model // 2, base)  # (gh, D/2)
    cols = sinusoidal_encoding(grid_w, d_model // 2, base)  # (gw, D/2)
    r, q = torch.meshgrid(torch.arange(grid_h), torch.arange(grid_w), indexing="ij")
    return torch.cat([rows[r.flatten()], cols[q.flatten()]], dim=1).float()


# ---------------------------------------------------------------- attention_rollout
def _mix(w, ident=0.5, reduce="mean"):
    heads = (
        w.mean(dim=1) if reduce == "mean" else (w.amax(dim=1) if reduce == "max" else w.sum(dim=1))
    )
    eye = torch.eye(w.shape[-1], dtype=w.dtype)
    return (1 - ident) * heads + ident * eye if ident != "plain" else heads + eye


@wrong("attention_rollout", "order|left|right|later|first")
def rollout_wrong_order(attentions):
    r = None
    for w in attentions:
        a = _mix(w)
        r = a if r is None else r @ a
    return r


@wrong("attention_rollout", "identity|residual|0.5")
def rollout_without_identity(attentions):
    r = None
    for w in attentions:
        a = w.mean(dim=1)
        r = a if r is None else a @ r
    return r


@wrong("attention_rollout", "mean|heads|average|max")
def rollout_max_over_heads(attentions):
    r = None
    for w in attentions:
        a = _mix(w, reduce="max")
        r = a if r is None else a @ r
    return r


@wrong("attention_rollout", "0.5|half|normali|sum|rows")
def rollout_identity_added_unweighted(attentions):
    r = None
    for w in attentions:
        a = w.mean(dim=1) + torch.eye(w.shape[-1])
        r = a if r is None else a @ r
    return r


@wrong("attention_rollout", "layer|every|each|compose|product")
def rollout_last_layer_only(attentions):
    return _mix(attentions[-1])


@wrong("attention_rollout", "in place|in-place|modif|given|input")
def rollout_edits_inputs(attentions):
    r = None
    for w in attentions:
        w.mul_(0.5)
        a = w.mean(dim=1) + 0.5 * torch.eye(w.shape[-1])
        r = a if r is None else a @ r
    return r


@wrong("attention_rollout", "mean|heads|average|sum")
def rollout_sums_heads(attentions):
    r = None
    for w in attentions:
        a = _mix(w, reduce="sum")
        r = a if r is None else a @ r
    return r


@wrong("attention_rollout", "matrix product|matmul|elementwise|multiply")
def rollout_elementwise_product(attentions):
    r = None
    for w in attentions:
        a = _mix(w)
        r = a if r is None else a * r
    return r


@wrong("attention_rollout", "transpose|row|column")
def rollout_transposed_layers(attentions):
    r = None
    for w in attentions:
        a = _mix(w).transpose(-2, -1)
        r = a if r is None else a @ r
    return r


@right("attention_rollout")
def rollout_reduce(attentions):
    B, _, T, _ = attentions[0].shape
    r = torch.eye(T, dtype=attentions[0].dtype).expand(B, T, T)
    for w in attentions:
        a = 0.5 * w.mean(1) + 0.5 * torch.eye(T, dtype=w.dtype)
        r = torch.bmm(a, r)
    return r
