"""Honest alternatives for notebook 03 (positional encodings)."""

from __future__ import annotations

from . import Alternative as A

ALTERNATIVES = {
    "sinusoidal_impl": [
        A(
            "float32 throughout, frequencies as exp(-log(base) 2i / C) (the Annotated Transformer's way)",
            """\
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}.")
    position = torch.arange(n_positions).float().unsqueeze(1)  # (T, 1)
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(base) / d_model))  # (C/2,)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    return pe
""",
        ),
        A(
            "sin and cos stacked on a new last axis, then flattened (interleaves), float64 inside",
            """\
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2 == 1:
        raise ValueError(f"d_model={d_model} is odd; it must be even.")
    i2 = torch.arange(0, d_model, 2, dtype=torch.float64)
    angles = torch.outer(torch.arange(n_positions, dtype=torch.float64), base ** (-i2 / d_model))
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(n_positions, d_model).float()
""",
        ),
        A(
            "two Python loops with math.sin / math.cos",
            """\
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2 != 0:
        raise ValueError(f"expected an even d_model, received {d_model}.")
    rows = []
    for t in range(n_positions):
        row = []
        for i in range(0, d_model, 2):
            angle = t / base ** (i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(n_positions, d_model)
""",
        ),
    ],
    "shift_matrix_impl": [
        A(
            "torch.block_diag of 2x2 rotation blocks, float64 inside",
            """\
def shift_matrix(k, d_model, base=10000.0):
    blocks = []
    for i in range(0, d_model, 2):
        a = k * base ** (-i / d_model)
        blocks.append(torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]],
                                   dtype=torch.float64))
    return torch.block_diag(*blocks).float()
""",
        ),
        A(
            "float32 angles, filled entry by entry in a loop",
            """\
def shift_matrix(k, d_model, base=10000.0):
    theta = torch.pow(base, -torch.arange(0, d_model, 2) / d_model)  # float32
    m = torch.zeros(d_model, d_model)
    for j, th in enumerate(theta):
        c, s = torch.cos(k * th), torch.sin(k * th)
        m[2 * j, 2 * j], m[2 * j, 2 * j + 1] = c, -s
        m[2 * j + 1, 2 * j], m[2 * j + 1, 2 * j + 1] = s, c
    return m
""",
        ),
        A(
            "diag_embed of the four entries, then interleaved with stack/reshape",
            """\
def shift_matrix(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(k * theta), torch.sin(k * theta)  # (C/2,)
    half = d_model // 2
    blocks = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (C/2, 2, 2)
    m = torch.zeros(half, 2, half, 2, dtype=torch.float64)
    idx = torch.arange(half)
    m[idx, :, idx, :] = blocks
    return m.reshape(d_model, d_model).float()
""",
        ),
    ],
    "offset_impl": [
        A(
            "float32 throughout",
            """\
def offset_dot_product(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2).float() / d_model)  # (C/2,)
    return torch.cos(k.float().unsqueeze(-1) * theta).sum(-1)
""",
        ),
        A(
            "a loop over the frequencies, accumulating in float64",
            """\
def offset_dot_product(k, d_model, base=10000.0):
    total = torch.zeros(k.shape, dtype=torch.float64)
    for i in range(0, d_model, 2):
        total += torch.cos(k.double() * base ** (-i / d_model))
    return total.to(torch.float32)
""",
        ),
        A(
            "the sum as a matrix product with a ones vector",
            """\
def offset_dot_product(k, d_model, base=10000.0):
    theta = torch.tensor([base ** (-2 * i / d_model) for i in range(d_model // 2)],
                         dtype=torch.float64)
    cosines = torch.cos(k.to(torch.float64)[..., None] * theta)  # (..., C/2)
    return (cosines @ torch.ones(d_model // 2, dtype=torch.float64)).float()
""",
        ),
    ],
    "rope_impl": [
        A(
            "complex numbers: pairs as complex, multiplied by exp(i t theta) (LLaMA's way)",
            """\
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, got D={D}.")
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * theta  # (T, D/2)
    rot = torch.polar(torch.ones_like(angles), angles)  # complex128
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
    return torch.view_as_real(pairs * rot).reshape(x.shape).to(x.dtype)
""",
        ),
        A(
            "new pairs stacked on a last axis and flattened, float32 angles",
            """\
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2], x.shape[-1]
    if D % 2 != 0:
        raise ValueError(f"D={D} is odd.")
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2).float() / D))
    angles = torch.arange(T).float()[:, None] * inv_freq[None, :]
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
""",
        ),
        A(
            "one 2x2 rotation matrix per position and pair, applied with einsum",
            """\
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"expected an even D, received D={D}.")
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    a = torch.arange(T, dtype=torch.float64)[:, None] * theta  # (T, D/2)
    # row-vector convention: [x1, x2] @ [[cos, sin], [-sin, cos]]
    r = torch.stack([torch.stack([a.cos(), a.sin()], -1),
                     torch.stack([-a.sin(), a.cos()], -1)], -2).to(x.dtype)  # (T, D/2, 2, 2)
    pairs = x.reshape(*x.shape[:-1], D // 2, 2)  # (..., T, D/2, 2)
    return torch.einsum("...tpi,tpij->...tpj", pairs, r).reshape(x.shape)
""",
        ),
    ],
}
