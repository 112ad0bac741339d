"""Holdout mistakes for notebook 08 (second round), written from the notebook alone.

Before tuning (report 08b): 25 mistakes, 24 named, 0 generic, 1 misleading (patchify_batch_mixed:
"axes transposed"), 0 passed. After tuning: 25/25 named. Correction: sin2d_positions_from_one
was "named" only because its words held a bare "1" (found in any numeric message); its words
were tightened after the measurement, so it is really generic: before 23/25, after 24/25.
Written after tuning, measured once: 9 mistakes, 6 named, 3 generic (vit_embed cls_token added
to the patches; rollout with the residual in the first layer only; rollout per head, then the
mean), 0 misleading, 0 passed. Not tuned on afterwards. Whole module: 30/34 = 0.88.
"""

from __future__ import annotations

import torch
from torch import nn

from tests.holdout._harness import collector
from transformer_lab.models.patches import patchify as ref_patchify
from transformer_lab.positional import sinusoidal_encoding

MISTAKES: list = []
wrong = collector(MISTAKES, "08")
NAMED_AT_LEAST = 0.88


# ---------------------------------------------------------------- patchify
@wrong("patchify", "column|order|transpos")
def patchify_grid_column_major(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 1, 3, 5)  # columns first
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "channel|order")
def patchify_channel_last(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)  # (row, col, C)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "unfold|overlap|stride")
def patchify_unfold_stride1(images, patch_size):
    P = patch_size
    cols = torch.nn.functional.unfold(images, kernel_size=P, stride=1)  # overlapping
    return cols.transpose(1, 2)


@wrong("patchify", "ValueError|multiple")
def patchify_no_check_crops(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    images = images[:, :, : H // P * P, : W // P * P]
    H, W = images.shape[-2:]
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "batch|image")
def patchify_batch_mixed(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(2, 4, 0, 1, 3, 5)  # batch inside
    return x.reshape(B, (H // P) * (W // P), C * P * P)


# ---------------------------------------------------------------- linear_to_conv
@wrong("linear_to_conv", "transpos|order|channel")
def conv_weight_channel_last(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=P)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(D, P, P, n_channels).permute(0, 3, 1, 2))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "stride")
def conv_stride_one(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=1)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(D, n_channels, P, P))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "bias")
def conv_bias_zero(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=P)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(D, n_channels, P, P))
        conv.bias.zero_()
    return conv


@wrong("linear_to_conv", "share|cop|view|alias|linear")
def conv_shares_storage(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=P)
    conv.weight = nn.Parameter(linear.weight.data.view(D, n_channels, P, P))  # shares storage
    conv.bias = linear.bias
    return conv


@wrong("linear_to_conv", "transpos|row|column")
def conv_weight_patch_transposed(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=P)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(D, n_channels, P, P).transpose(2, 3))
        conv.bias.copy_(linear.bias)
    return conv


# ---------------------------------------------------------------- vit_embed
@wrong("vit_embed", "cls|[cls]|first|end|last")
def vit_cls_at_end(images, patch_size, w_e, b_e, cls_token, pos):
    patches = ref_patchify(images, patch_size) @ w_e + b_e
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([patches, cls], dim=1) + pos


@wrong("vit_embed", "bias")
def vit_no_bias(images, patch_size, w_e, b_e, cls_token, pos):
    patches = ref_patchify(images, patch_size) @ w_e
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([cls, patches], dim=1) + pos


@wrong("vit_embed", "position|pos")
def vit_pos_on_patches_only(images, patch_size, w_e, b_e, cls_token, pos):
    patches = ref_patchify(images, patch_size) @ w_e + b_e + pos[1:]
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([cls, patches], dim=1)


@wrong("vit_embed", "bias|cls|[cls]")
def vit_bias_on_cls_too(images, patch_size, w_e, b_e, cls_token, pos):
    patches = ref_patchify(images, patch_size) @ w_e
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([cls, patches], dim=1) + b_e + pos


@wrong("vit_embed", "position|pos|shift|offset")
def vit_pos_shifted(images, patch_size, w_e, b_e, cls_token, pos):
    patches = ref_patchify(images, patch_size) @ w_e + b_e
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([cls, patches], dim=1) + torch.roll(pos, 1, dims=0)


# ---------------------------------------------------------------- sinusoidal_2d
@wrong("sinusoidal_2d", "row|column|half")
def sin2d_halves_swapped(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got {d_model}")
    half = d_model // 2
    rows, cols = sinusoidal_encoding(grid_h, half, base), sinusoidal_encoding(grid_w, half, base)
    grid = torch.cat(
        [cols[None].expand(grid_h, grid_w, half), rows[:, None].expand(grid_h, grid_w, half)], -1
    )
    return grid.reshape(-1, d_model)


@wrong("sinusoidal_2d", "full|width|d_model|half")
def sin2d_full_width_summed(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got {d_model}")
    rows, cols = (
        sinusoidal_encoding(grid_h, d_model, base),
        sinusoidal_encoding(grid_w, d_model, base),
    )
    return (rows[:, None] + cols[None]).reshape(-1, d_model)


@wrong("sinusoidal_2d", "ValueError|multiple|4")
def sin2d_checks_even_only(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    half = d_model // 2
    rows, cols = sinusoidal_encoding(grid_h, half, base), sinusoidal_encoding(grid_w, half, base)
    grid = torch.cat(
        [rows[:, None].expand(grid_h, grid_w, half), cols[None].expand(grid_h, grid_w, half)], -1
    )
    return grid.reshape(-1, d_model)


@wrong("sinusoidal_2d", "base")
def sin2d_ignores_base(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got {d_model}")
    half = d_model // 2
    rows, cols = sinusoidal_encoding(grid_h, half), sinusoidal_encoding(grid_w, half)
    grid = torch.cat(
        [rows[:, None].expand(grid_h, grid_w, half), cols[None].expand(grid_h, grid_w, half)], -1
    )
    return grid.reshape(-1, d_model)


@wrong("sinusoidal_2d", "offset|start|from 1|shift|position 0")
def sin2d_positions_from_one(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got {d_model}")
    half = d_model // 2
    rows = sinusoidal_encoding(grid_h + 1, half, base)[1:]
    cols = sinusoidal_encoding(grid_w + 1, half, base)[1:]
    grid = torch.cat(
        [rows[:, None].expand(grid_h, grid_w, half), cols[None].expand(grid_h, grid_w, half)], -1
    )
    return grid.reshape(-1, d_model)


# ---------------------------------------------------------------- attention_rollout
@wrong("attention_rollout", "order|left|right|later")
def rollout_wrong_order(attentions):
    rollout = None
    for w in attentions:
        mixed = 0.5 * w.mean(1) + 0.5 * torch.eye(w.shape[-1])
        rollout = mixed if rollout is None else rollout @ mixed
    return rollout


@wrong("attention_rollout", "residual|identity|0.5|I")
def rollout_no_residual(attentions):
    rollout = None
    for w in attentions:
        mixed = w.mean(1)
        rollout = mixed if rollout is None else mixed @ rollout
    return rollout


@wrong("attention_rollout", "heads|sum|mean")
def rollout_sum_heads(attentions):
    rollout = None
    for w in attentions:
        mixed = 0.5 * w.sum(1) + 0.5 * torch.eye(w.shape[-1])
        rollout = mixed if rollout is None else mixed @ rollout
    return rollout


@wrong("attention_rollout", "renormal|rows sum|normal|residual|identity")
def rollout_full_identity(attentions):
    rollout = None
    for w in attentions:
        mixed = w.mean(1) + torch.eye(w.shape[-1])  # forgot the halves: rows sum to 2
        rollout = mixed if rollout is None else mixed @ rollout
    return rollout


@wrong("attention_rollout", "layer|last|first|all")
def rollout_last_layer_only(attentions):
    w = attentions[-1]
    return 0.5 * w.mean(1) + 0.5 * torch.eye(w.shape[-1])


# ============================================================================ written after tuning
# Measured once, not tuned on (see the module docstring).
@wrong("patchify", "permut|order|channel")
def post_patchify_unfold_no_permute(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.unfold(2, P, P).unfold(3, P, P)  # (B, C, H/P, W/P, P, P)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "H/P|W/P|height|width|square")
def post_patchify_square_count(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) ** 2, C * P * P)


@wrong("linear_to_conv", "transpos|order")
def post_conv_weight_t(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=P)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.t().reshape(D, n_channels, P, P))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "bias")
def post_conv_no_bias(linear, patch_size, n_channels):
    P, D = patch_size, linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=P, stride=P, bias=False)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(D, n_channels, P, P))
    return conv


@wrong("vit_embed", "cls_token")
def post_embed_cls_on_patches(images, patch_size, w_e, b_e, cls_token, pos):
    patches = ref_patchify(images, patch_size) @ w_e + b_e + cls_token
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([cls, patches], dim=1) + pos


@wrong("sinusoidal_2d", "grid_h|grid_w|row")
def post_s2d_row_index_by_grid_h(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got {d_model}")
    half = d_model // 2
    n = torch.arange(grid_h * grid_w)
    rows = sinusoidal_encoding(grid_h * grid_w, half, base)[n // grid_h]
    cols = sinusoidal_encoding(grid_w, half, base)[n % grid_w]
    return torch.cat([rows, cols], -1)


@wrong("sinusoidal_2d", "float32|dtype")
def post_s2d_float64(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got {d_model}")
    half = d_model // 2
    rows, cols = sinusoidal_encoding(grid_h, half, base), sinusoidal_encoding(grid_w, half, base)
    grid = torch.cat(
        [rows[:, None].expand(grid_h, grid_w, half), cols[None].expand(grid_h, grid_w, half)], -1
    )
    return grid.reshape(-1, d_model).double()


@wrong("attention_rollout", "residual|identity|every layer|first")
def post_rollout_residual_once(attentions):
    rollout = None
    for w in attentions:
        if rollout is None:
            rollout = 0.5 * w.mean(1) + 0.5 * torch.eye(w.shape[-1])
        else:
            rollout = w.mean(1) @ rollout
    return rollout


@wrong("attention_rollout", "head|mean|average")
def post_rollout_per_head_then_mean(attentions):
    rollout = None
    for w in attentions:
        mixed = 0.5 * w + 0.5 * torch.eye(w.shape[-1])  # (B, H, T, T), heads kept
        rollout = mixed if rollout is None else mixed @ rollout
    return rollout.mean(1)
