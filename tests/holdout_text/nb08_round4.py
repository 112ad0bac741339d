"""Holdout for notebook 08 (fourth round), written from notebooks/08_vision_transformer/08_vision_transformer.ipynb
alone (without reading the checks)."""

import math

import torch
from torch import nn

from tests.holdout._harness import Mistake, collector
from transformer_lab import sinusoidal_encoding

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "08")
right = collector(CORRECT, "08")
# Written after rounds 2 and 3 had tuned the checks, and measured once, never tuned on: the
# forecast for a new class. First shot 29 of 30 named, 1 generic, 0 misleading, 0 passed.
NAMED_AT_LEAST = 0.96


def _patchify(images, patch_size):
    """A correct patchify, for the exercises that are told to use the student's own."""
    B, C, H, W = images.shape
    P = patch_size
    if H % P or W % P:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size P={P}")
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


# ---------------------------------------------------------------- Exercise 1: patchify


@wrong("patchify", "permute|strip|square|pixel row|memory|consecutive")
def patchify_reshape_only(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    if H % P or W % P:
        raise ValueError(f"image size {H}x{W} is not a multiple of P={P}")
    return images.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "channel|order|inside a patch|within a patch")
def patchify_channel_last_inside_patch(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    if H % P or W % P:
        raise ValueError(f"image size {H}x{W} is not a multiple of P={P}")
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)  # (row, col, channel)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "row by row|column|order|numbered|transpos")
def patchify_numbered_column_by_column(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    if H % P or W % P:
        raise ValueError(f"image size {H}x{W} is not a multiple of P={P}")
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 1, 3, 5)  # grid column first
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "ValueError|multiple|divisible|raise")
def patchify_crops_instead_of_raising(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    images = images[:, :, : H // P * P, : W // P * P]  # silently drop the leftover pixels
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "message|name|mention")
def patchify_error_names_no_sizes(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    if H % P or W % P:
        raise ValueError("the image does not split into whole patches")
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "square|width|rectangular|non-square")
def patchify_assumes_square_images(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    if H % P:
        raise ValueError(f"image size {H} is not a multiple of P={P}")
    g = H // P  # the notebook's digits are square
    x = images.reshape(B, C, g, P, g, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, g * g, C * P * P)


# ---------------------------------------------------------------- Exercise 2: linear_to_conv


@wrong("linear_to_conv", "bias")
def linear_to_conv_drops_bias(linear, patch_size, n_channels):
    D = linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=patch_size, stride=patch_size, bias=False)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(D, n_channels, patch_size, patch_size))
    return conv


@wrong("linear_to_conv", "stride")
def linear_to_conv_forgets_stride(linear, patch_size, n_channels):
    D = linear.out_features
    conv = nn.Conv2d(
        n_channels, D, kernel_size=patch_size
    )  # stride defaults to 1: overlapping windows
    with torch.no_grad():
        conv.weight.copy_(linear.weight.view(D, n_channels, patch_size, patch_size))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "order|transpos|reshape|layout|flatten")
def linear_to_conv_reshapes_transposed_weight(linear, patch_size, n_channels):
    D = linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=patch_size, stride=patch_size)
    with torch.no_grad():
        # "patches @ W_E": W_E is (C*P*P, D), so the student reshapes that one
        conv.weight.copy_(linear.weight.T.reshape(D, n_channels, patch_size, patch_size))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "channel|order|layout")
def linear_to_conv_channels_last_kernel(linear, patch_size, n_channels):
    D = linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=patch_size, stride=patch_size)
    with torch.no_grad():
        kernel = linear.weight.view(D, patch_size, patch_size, n_channels).permute(0, 3, 1, 2)
        conv.weight.copy_(kernel)
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "copy|copies|share|storage|clone|unchanged|same tensor")
def linear_to_conv_shares_storage(linear, patch_size, n_channels):
    D = linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=patch_size, stride=patch_size)
    conv.weight = nn.Parameter(
        linear.weight.view(D, n_channels, patch_size, patch_size)
    )  # a view, not a copy
    conv.bias = linear.bias
    return conv


@wrong("linear_to_conv", "unchanged|modif|in place|in-place|linear")
def linear_to_conv_reshapes_linear_in_place(linear, patch_size, n_channels):
    D = linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=patch_size, stride=patch_size)
    with torch.no_grad():
        linear.weight.data = linear.weight.data.view(D, n_channels, patch_size, patch_size)
        conv.weight.copy_(linear.weight)
        conv.bias.copy_(linear.bias)
    return conv


# ---------------------------------------------------------------- Exercise 3: vit_embed


@wrong("vit_embed", "pos|position|row 0")
def vit_embed_cls_without_position(images, patch_size, w_e, b_e, cls_token, pos):
    patches = _patchify(images, patch_size) @ w_e + b_e + pos[1:]
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([cls, patches], dim=1)


@wrong("vit_embed", "front|first|end|last|order|prepend|token 0")
def vit_embed_cls_appended_at_end(images, patch_size, w_e, b_e, cls_token, pos):
    patches = _patchify(images, patch_size) @ w_e + b_e
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([patches, cls], dim=1) + pos


@wrong("vit_embed", "bias|b_e")
def vit_embed_forgets_bias(images, patch_size, w_e, b_e, cls_token, pos):
    patches = _patchify(images, patch_size) @ w_e
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([cls, patches], dim=1) + pos


@wrong("vit_embed", "bias|b_e|[cls]|cls")
def vit_embed_bias_added_to_cls_too(images, patch_size, w_e, b_e, cls_token, pos):
    patches = _patchify(images, patch_size) @ w_e
    cls = cls_token.expand(images.shape[0], 1, -1)
    return torch.cat([cls, patches], dim=1) + b_e + pos


@wrong("vit_embed", "sqrt|scale|multipl|factor")
def vit_embed_scales_by_sqrt_d(images, patch_size, w_e, b_e, cls_token, pos):
    D = w_e.shape[1]
    patches = _patchify(images, patch_size) @ w_e + b_e
    cls = cls_token.expand(images.shape[0], 1, -1)
    return (
        torch.cat([cls, patches], dim=1) * math.sqrt(D) + pos
    )  # notebook 3's token-embedding habit


@wrong("vit_embed", "modif|in place|in-place|argument|cls_token|input")
def vit_embed_adds_position_into_cls_token(images, patch_size, w_e, b_e, cls_token, pos):
    cls = cls_token
    cls += pos[0]  # changes the caller's cls_token
    patches = _patchify(images, patch_size) @ w_e + b_e + pos[1:]
    return torch.cat([cls.expand(images.shape[0], 1, -1), patches], dim=1)


# ---------------------------------------------------------------- Exercise 4: sinusoidal_2d


@wrong("sinusoidal_2d", "half|row|column|first|second|swap")
def sinusoidal_2d_column_code_first(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got d_model={d_model}")
    rows = sinusoidal_encoding(grid_h, d_model // 2, base)
    cols = sinusoidal_encoding(grid_w, d_model // 2, base)
    r = rows.repeat_interleave(grid_w, dim=0)
    c = cols.repeat(grid_h, 1)
    return torch.cat([c, r], dim=1)


@wrong("sinusoidal_2d", "d/2|d_model/2|d_model // 2|half|width|frequenc")
def sinusoidal_2d_full_width_code_sliced(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got d_model={d_model}")
    half = d_model // 2
    rows = sinusoidal_encoding(grid_h, d_model, base)[:, :half]  # computed at width D, then cut
    cols = sinusoidal_encoding(grid_w, d_model, base)[:, :half]
    return torch.cat([rows.repeat_interleave(grid_w, dim=0), cols.repeat(grid_h, 1)], dim=1)


@wrong("sinusoidal_2d", "row by row|order|column|numbered|transpos")
def sinusoidal_2d_patches_column_by_column(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got d_model={d_model}")
    rows = sinusoidal_encoding(grid_h, d_model // 2, base)
    cols = sinusoidal_encoding(grid_w, d_model // 2, base)
    r = rows.repeat(grid_w, 1)  # the row index changes fastest
    c = cols.repeat_interleave(grid_h, dim=0)
    return torch.cat([r, c], dim=1)


@wrong("sinusoidal_2d", "multiple of 4|four|divisible by 4|% 4")
def sinusoidal_2d_checks_only_even(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got d_model={d_model}")
    half = d_model // 2  # 6 -> 3: the package's encoder complains about 3, not about the 6 received
    rows = sinusoidal_encoding(grid_h, half, base)
    cols = sinusoidal_encoding(grid_w, half, base)
    return torch.cat([rows.repeat_interleave(grid_w, dim=0), cols.repeat(grid_h, 1)], dim=1)


@wrong("sinusoidal_2d", "base")
def sinusoidal_2d_ignores_base(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got d_model={d_model}")
    rows = sinusoidal_encoding(grid_h, d_model // 2)
    cols = sinusoidal_encoding(grid_w, d_model // 2)
    return torch.cat([rows.repeat_interleave(grid_w, dim=0), cols.repeat(grid_h, 1)], dim=1)


@wrong("sinusoidal_2d", "grid_w|square|width|column")
def sinusoidal_2d_assumes_square_grid(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4, got d_model={d_model}")
    code = sinusoidal_encoding(grid_h, d_model // 2, base)
    r = code.repeat_interleave(grid_h, dim=0)
    c = code.repeat(grid_h, 1)
    return torch.cat([r, c], dim=1)


# ---------------------------------------------------------------- Exercise 5: attention_rollout


@wrong("attention_rollout", "identity|residual|eye")
def attention_rollout_without_residual(attentions):
    R = None
    for weights in attentions:
        A = weights.mean(dim=1)
        R = A if R is None else A @ R
    return R


@wrong("attention_rollout", "order|left|later|reverse|revers")
def attention_rollout_first_layer_on_left(attentions):
    R = None
    for weights in attentions:
        A = 0.5 * weights.mean(dim=1) + 0.5 * torch.eye(weights.shape[-1])
        R = A if R is None else R @ A
    return R


@wrong("attention_rollout", "mean|average|head")
def attention_rollout_max_over_heads(attentions):
    R = None
    for weights in attentions:
        A = 0.5 * weights.amax(dim=1) + 0.5 * torch.eye(weights.shape[-1])
        R = A if R is None else A @ R
    return R


@wrong("attention_rollout", "0.5|half|½|1/2|sum to one|sums to one|normali|rows sum")
def attention_rollout_adds_identity_without_halving(attentions):
    R = None
    for weights in attentions:
        A = weights.mean(dim=1) + torch.eye(weights.shape[-1])
        R = A if R is None else A @ R
    return R


@wrong("attention_rollout", "modif|in place|in-place|input|argument")
def attention_rollout_adds_identity_in_place(attentions):
    R = None
    for weights in attentions:
        T = weights.shape[-1]
        weights.mul_(0.5)  # halves the caller's attention weights
        A = weights.mean(dim=1) + 0.5 * torch.eye(T)
        R = A if R is None else A @ R
    return R


@wrong("attention_rollout", "head|mean|average|per head|compose")
def attention_rollout_composes_heads_then_averages(attentions):
    R = None
    for weights in attentions:
        A = 0.5 * weights + 0.5 * torch.eye(weights.shape[-1])  # (B, H, T, T), heads kept
        R = A if R is None else A @ R
    return R.mean(dim=1)


# ---------------------------------------------------------------- correct variants


@right("patchify")
def patchify_with_unfold(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    if H % P or W % P:
        raise ValueError(f"H={H} and W={W} must be multiples of the patch size {P}")
    cols = torch.nn.functional.unfold(
        images, kernel_size=P, stride=P
    )  # (B, C*P*P, N), (c, i, j) order
    return cols.transpose(1, 2)


@right("linear_to_conv")
def linear_to_conv_load_state_dict(linear, patch_size, n_channels):
    D = linear.out_features
    conv = nn.Conv2d(
        n_channels, D, kernel_size=(patch_size, patch_size), stride=(patch_size, patch_size)
    )
    with torch.no_grad():
        conv.load_state_dict(
            {
                "weight": linear.weight.detach()
                .clone()
                .reshape(D, n_channels, patch_size, patch_size),
                "bias": linear.bias.detach().clone(),
            }
        )
    return conv


@right("sinusoidal_2d")
def sinusoidal_2d_with_meshgrid(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4 != 0:
        raise ValueError(f"d_model={d_model} is not a multiple of 4")
    rows = sinusoidal_encoding(grid_h, d_model // 2, base)
    cols = sinusoidal_encoding(grid_w, d_model // 2, base)
    r, c = torch.meshgrid(torch.arange(grid_h), torch.arange(grid_w), indexing="ij")
    return torch.cat([rows[r.reshape(-1)], cols[c.reshape(-1)]], dim=1).float()


@right("attention_rollout")
def attention_rollout_reversed_product(attentions):
    T = attentions[0].shape[-1]
    mixes = [0.5 * w.mean(dim=1) + 0.5 * torch.eye(T, dtype=w.dtype) for w in attentions]
    R = mixes[-1]
    for A in reversed(mixes[:-1]):
        R = R @ A
    return R


@right("vit_embed")
def vit_embed_with_einsum(images, patch_size, w_e, b_e, cls_token, pos):
    patches = torch.einsum("bnk,kd->bnd", _patchify(images, patch_size), w_e) + b_e
    cls = cls_token[None, None, :].expand(images.shape[0], 1, cls_token.shape[0])
    return torch.cat((cls, patches), dim=1) + pos[None]
