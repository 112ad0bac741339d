"""Honest alternatives for notebook 08 (the vision transformer)."""

from __future__ import annotations

from . import Alternative as A

ALTERNATIVES = {
    "patchify_impl": [
        A(
            "Tensor.unfold twice, then permute",
            """\
def patchify(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    if H % P != 0 or W % P != 0:
        raise ValueError(f"H={H} and W={W} must be multiples of patch_size={P}.")
    x = images.unfold(2, P, P).unfold(3, P, P)  # (B, C, H/P, W/P, P, P)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * P * P)
""",
        ),
        A(
            "F.unfold (im2col) with kernel = stride = P",
            """\
def patchify(images, patch_size):
    B, C, H, W = images.shape
    if H % patch_size or W % patch_size:
        raise ValueError(f"image {H}x{W} is not a multiple of patch_size={patch_size}.")
    cols = torch.nn.functional.unfold(images, kernel_size=patch_size, stride=patch_size)
    return cols.transpose(1, 2)  # (B, C*P*P, N) -> (B, N, C*P*P)
""",
        ),
        A(
            "a double loop over the grid, slicing squares",
            """\
def patchify(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    if H % P or W % P:
        raise ValueError(f"expected H and W divisible by {P}, received {H}x{W}.")
    patches = []
    for i in range(H // P):
        for j in range(W // P):
            patches.append(images[:, :, i * P:(i + 1) * P, j * P:(j + 1) * P].reshape(B, -1))
    return torch.stack(patches, dim=1)
""",
        ),
    ],
    "linear_to_conv_impl": [
        A(
            "weights as new Parameters (cloned), conv created with bias=True",
            """\
def linear_to_conv(linear, patch_size, n_channels):
    D = linear.out_features
    conv = nn.Conv2d(n_channels, D, kernel_size=patch_size, stride=patch_size, bias=True)
    conv.weight = nn.Parameter(linear.weight.detach().reshape(D, n_channels, patch_size,
                                                              patch_size).clone())
    conv.bias = nn.Parameter(linear.bias.detach().clone())
    return conv
""",
        ),
        A(
            "load_state_dict",
            """\
def linear_to_conv(linear, patch_size, n_channels):
    P = patch_size
    conv = nn.Conv2d(n_channels, linear.out_features, P, P)
    conv.load_state_dict({
        "weight": linear.weight.detach().reshape(-1, n_channels, P, P).clone(),
        "bias": linear.bias.detach().clone(),
    })
    return conv
""",
        ),
        A(
            "copied through .data",
            """\
def linear_to_conv(linear, patch_size, n_channels):
    conv = nn.Conv2d(in_channels=n_channels, out_channels=linear.out_features,
                     kernel_size=(patch_size, patch_size), stride=(patch_size, patch_size))
    conv.weight.data.copy_(linear.weight.data.reshape(conv.weight.shape))
    conv.bias.data.copy_(linear.bias.data)
    return conv
""",
        ),
    ],
    "vit_embed_impl": [
        A(
            "einsum projection, [CLS] repeated per image",
            """\
def vit_embed(images, patch_size, w_e, b_e, cls_token, pos):
    tokens = torch.einsum("bnk,kd->bnd", patchify(images, patch_size), w_e) + b_e
    cls = cls_token.reshape(1, 1, -1).repeat(images.shape[0], 1, 1)
    return torch.cat((cls, tokens), dim=1) + pos.unsqueeze(0)
""",
        ),
        A(
            "the projection as a convolution (notebook's exercise 2), F.conv2d",
            """\
def vit_embed(images, patch_size, w_e, b_e, cls_token, pos):
    B, C = images.shape[:2]
    P, D = patch_size, w_e.shape[1]
    kernel = w_e.T.reshape(D, C, P, P)  # (D, C*P*P) -> (D, C, P, P)
    patches = torch.nn.functional.conv2d(images, kernel, b_e, stride=P)  # (B, D, H/P, W/P)
    patches = patches.flatten(2).transpose(1, 2)  # (B, N, D)
    return torch.cat([cls_token.expand(B, 1, D), patches], dim=1) + pos
""",
            unspecified="the exercise says 'use your patchify'; this one uses the convolution of "
            "exercise 2 instead (same map)",
        ),
        A(
            "a fresh (B, N + 1, D) tensor filled in place",
            """\
def vit_embed(images, patch_size, w_e, b_e, cls_token, pos):
    patches = patchify(images, patch_size)  # (B, N, C*P*P)
    B, N, _ = patches.shape
    out = torch.empty(B, N + 1, w_e.shape[1], dtype=w_e.dtype)
    out[:, 0] = cls_token
    out[:, 1:] = patches @ w_e + b_e
    out += pos
    return out
""",
        ),
    ],
    "sinusoidal_2d_impl": [
        A(
            "repeat_interleave for the rows, repeat for the columns",
            """\
def sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"d_model={d_model} is not a multiple of 4.")
    half = d_model // 2
    rows = sinusoidal_encoding(grid_h, half, base).repeat_interleave(grid_w, dim=0)  # (N, D/2)
    cols = sinusoidal_encoding(grid_w, half, base).repeat(grid_h, 1)  # (N, D/2)
    return torch.cat([rows, cols], dim=1)
""",
        ),
        A(
            "a loop over the patches, row code then column code",
            """\
def sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4 != 0:
        raise ValueError(f"d_model must be a multiple of 4, got d_model={d_model}.")
    r = sinusoidal_encoding(grid_h, d_model // 2, base)
    c = sinusoidal_encoding(grid_w, d_model // 2, base)
    out = torch.zeros(grid_h * grid_w, d_model)
    for i in range(grid_h):
        for j in range(grid_w):
            out[i * grid_w + j] = torch.cat([r[i], c[j]])
    return out
""",
        ),
        A(
            "its own 1-D formula in float64 instead of the package's encoding",
            """\
def sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0):
    if d_model % 4:
        raise ValueError(f"expected d_model divisible by 4, received {d_model}.")
    half = d_model // 2
    theta = base ** (-torch.arange(0, half, 2, dtype=torch.float64) / half)

    def encode(n):
        a = torch.arange(n, dtype=torch.float64)[:, None] * theta
        return torch.stack([a.sin(), a.cos()], dim=-1).reshape(n, half)

    ii, jj = torch.meshgrid(torch.arange(grid_h), torch.arange(grid_w), indexing="ij")
    pe = torch.cat([encode(grid_h)[ii.reshape(-1)], encode(grid_w)[jj.reshape(-1)]], dim=1)
    return pe.float()
""",
            unspecified="the exercise says to use the package's sinusoidal_encoding; this one "
            "recomputes the same values",
        ),
    ],
    "attention_rollout_impl": [
        A(
            "starts from the identity and multiplies on the left",
            """\
def attention_rollout(attentions):
    B, _, T, _ = attentions[0].shape
    eye = torch.eye(T)
    rollout = eye.expand(B, T, T)
    for w in attentions:
        rollout = (0.5 * w.mean(1) + 0.5 * eye) @ rollout
    return rollout
""",
        ),
        A(
            "functools.reduce over the mixed matrices, einsum",
            """\
def attention_rollout(attentions):
    from functools import reduce

    T = attentions[0].shape[-1]
    mixed = [(w.sum(dim=1) / w.shape[1] + torch.eye(T)) / 2 for w in attentions]
    return reduce(lambda r, a: torch.einsum("bij,bjk->bik", a, r), mixed[1:], mixed[0])
""",
        ),
        A(
            "float64 inside, float32 out",
            """\
def attention_rollout(attentions):
    result = None
    for w in attentions:
        a = 0.5 * w.double().mean(dim=1) + 0.5 * torch.eye(w.shape[-1], dtype=torch.float64)
        result = a if result is None else torch.bmm(a, result)
    return result.to(attentions[0].dtype)
""",
        ),
    ],
}
