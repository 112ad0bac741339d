"""Notebook 08, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text (patches, the patch embedding as a convolution, ViT's input, 2-D sinusoidal positions,
attention rollout), written without looking at what the checks detect.
``python -m tests.holdout report 08w``."""

from __future__ import annotations

import torch
from torch import nn

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
# Before the fixes of issue 39: 16/2/0/0 named/generic/misleading/passed; after: 16 of 18 named, 2 generic.
# h16: sin/cos layouts and positions from 1 as combinations, rollout head fusion and residual
# variants, [CLS] added to the patches; 4 entries added: 18/4/0/0 of 22 before, 22 of 22 after.
NAMED_AT_LEAST = 1.0
wrong = collector(MISTAKES, "08")


def _size(H, W, P):
    if H % P or W % P:
        raise ValueError(f"height {H} and width {W} must be multiples of P={P}")


def _patchify(images, P):
    B, C, H, W = images.shape
    _size(H, W, P)
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


@wrong("patchify", "view|contiguous|reshape")
def patchify_view_after_permute(images, P):
    B, C, H, W = images.shape
    _size(H, W, P)
    x = images.view(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.view(B, -1, C * P * P)


@wrong("patchify", "grid|H // P|W // P|height|width")
def patchify_grid_swapped(images, P):
    B, C, H, W = images.shape
    _size(H, W, P)
    x = images.reshape(B, C, W // P, P, H // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, -1, C * P * P)


@wrong("patchify", "channel|(C, P, P)|order")
def patchify_channel_last_in_patch(images, P):
    B, C, H, W = images.shape
    _size(H, W, P)
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, C * P * P)


@wrong("patchify", "column|order|row-major")
def patchify_grid_column_major(images, P):
    B, C, H, W = images.shape
    _size(H, W, P)
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(B, -1, C * P * P)


@wrong("linear_to_conv", "stride|kernel|patch_size")
def conv_kernel_one(linear, P, ch):
    conv = nn.Conv2d(ch, linear.out_features, kernel_size=P, stride=1)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.reshape(linear.out_features, ch, P, P))
        conv.bias.copy_(linear.bias)
    return conv


@wrong("linear_to_conv", "(P, P, C)|channel|order")
def conv_reshape_channels_last(linear, P, ch):
    conv = nn.Conv2d(ch, linear.out_features, kernel_size=P, stride=P)
    with torch.no_grad():
        w = linear.weight.reshape(linear.out_features, P, P, ch).permute(0, 3, 1, 2)
        conv.weight.copy_(w)
        conv.bias.copy_(linear.bias)
    return conv


@wrong("vit_embed", "cls|[CLS]|position")
def embed_pos_before_cls(images, P, w_e, b_e, cls_token, pos):
    x = _patchify(images, P) @ w_e + b_e + pos[:-1]
    cls = cls_token.reshape(1, 1, -1).expand(x.shape[0], 1, -1)
    return torch.cat([cls, x], dim=1)


@wrong("vit_embed", "bias|b_e|cls")
def embed_bias_on_cls(images, P, w_e, b_e, cls_token, pos):
    x = _patchify(images, P) @ w_e
    cls = cls_token.reshape(1, 1, -1).expand(x.shape[0], 1, -1)
    return torch.cat([cls, x], dim=1) + b_e + pos


@wrong("vit_embed", "column|order|patch")
def embed_column_major_patches(images, P, w_e, b_e, cls_token, pos):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 1, 3, 5)
    x = x.reshape(B, -1, C * P * P) @ w_e + b_e
    cls = cls_token.reshape(1, 1, -1).expand(B, 1, -1)
    return torch.cat([cls, x], dim=1) + pos


@wrong("vit_embed", "patchify|(C, P, P)|channel|order")
def embed_unfold_transposed_wrong(images, P, w_e, b_e, cls_token, pos):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    x = x.reshape(B, -1, C * P * P) @ w_e + b_e
    cls = cls_token.reshape(1, 1, -1).expand(B, 1, -1)
    return torch.cat([cls, x], dim=1) + pos


def _enc(n, half, base):
    freqs = base ** (-torch.arange(0, half, 2, dtype=torch.float32) / half)
    a = torch.arange(n, dtype=torch.float32)[:, None] * freqs
    return torch.stack([a.sin(), a.cos()], -1).reshape(n, half)


def _need4(C):
    if C % 4:
        raise ValueError(f"d_model={C} is not a multiple of 4")


@wrong("sinusoidal_2d", "frequenc|C/2|half|width|exponent")
def sin2d_freqs_over_full_width(h, w, C, base=10000.0):
    _need4(C)
    half = C // 2
    freqs = base ** (-torch.arange(0, half, 2, dtype=torch.float32) / C)

    def enc(n):
        a = torch.arange(n, dtype=torch.float32)[:, None] * freqs
        return torch.stack([a.sin(), a.cos()], -1).reshape(n, half)

    return torch.cat([enc(h).repeat_interleave(w, 0), enc(w).repeat(h, 1)], 1)


@wrong("sinusoidal_2d", "position|1|shift|from")
def sin2d_positions_from_one(h, w, C, base=10000.0):
    _need4(C)
    half = C // 2
    r, c = _enc(h + 1, half, base)[1:], _enc(w + 1, half, base)[1:]
    return torch.cat([r.repeat_interleave(w, 0), c.repeat(h, 1)], 1)


@wrong("sinusoidal_2d", "halves|sin|cos|order|concat")
def sin2d_sines_then_cosines(h, w, C, base=10000.0):
    _need4(C)
    half = C // 2
    freqs = base ** (-torch.arange(0, half, 2, dtype=torch.float32) / half)

    def enc(n):
        a = torch.arange(n, dtype=torch.float32)[:, None] * freqs
        return torch.cat([a.sin(), a.cos()], -1)

    return torch.cat([enc(h).repeat_interleave(w, 0), enc(w).repeat(h, 1)], 1)


@wrong("sinusoidal_2d", "sum|add|concat|half")
def sin2d_sum_not_concat(h, w, C, base=10000.0):
    _need4(C)
    r, c = _enc(h, C, base), _enc(w, C, base)
    return r.repeat_interleave(w, 0) + c.repeat(h, 1)


def _mix(a):
    return 0.5 * a.mean(dim=1) + 0.5 * torch.eye(a.shape[-1])


@wrong("attention_rollout", "identity|residual|0.5|normalis")
def rollout_identity_unweighted(attentions):
    out = None
    for a in attentions:
        m = a.mean(dim=1) + torch.eye(a.shape[-1])
        out = m if out is None else m @ out
    return out


@wrong("attention_rollout", "max|mean|heads|average")
def rollout_max_heads(attentions):
    out = None
    for a in attentions:
        m = 0.5 * a.amax(dim=1) + 0.5 * torch.eye(a.shape[-1])
        m = m / m.sum(-1, keepdim=True)
        out = m if out is None else m @ out
    return out


@wrong("attention_rollout", "last|layer|product|every")
def rollout_last_layer_only(attentions):
    return _mix(attentions[-1])


@wrong("attention_rollout", "elementwise|\\*|matrix product|@")
def rollout_elementwise(attentions):
    out = None
    for a in attentions:
        out = _mix(a) if out is None else _mix(a) * out
    return out


@wrong("attention_rollout", "each head|heads of each layer|average")
def rollout_per_head_then_mean(attentions):
    out = None
    for a in attentions:
        m = 0.5 * a + 0.5 * torch.eye(a.shape[-1])
        out = m if out is None else m @ out
    return out.mean(dim=1)


@wrong("attention_rollout", "identity|residual|once|every layer")
def rollout_residual_once(attentions):
    out = None
    for a in attentions:
        m = a.mean(dim=1)
        out = m if out is None else m @ out
    return 0.5 * out + 0.5 * torch.eye(out.shape[-1])


@wrong("sinusoidal_2d", "cosines come first|two blocks|sin in the even")
def sin2d_cosines_then_sines(h, w, C, base=10000.0):
    _need4(C)
    half = C // 2
    freqs = base ** (-torch.arange(0, half, 2, dtype=torch.float32) / half)

    def enc(n):
        a = torch.arange(n, dtype=torch.float32)[:, None] * freqs
        return torch.cat([a.cos(), a.sin()], -1)

    return torch.cat([enc(h).repeat_interleave(w, 0), enc(w).repeat(h, 1)], 1)


@wrong("vit_embed", "added to every patch|prepended|extra token")
def embed_cls_added_to_patches(images, P, w_e, b_e, cls_token, pos):
    x = _patchify(images, P) @ w_e + b_e + cls_token
    cls = cls_token.reshape(1, 1, -1).expand(x.shape[0], 1, -1)
    return torch.cat([cls, x], dim=1) + pos
