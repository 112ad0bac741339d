"""Notebook 03, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text (sinusoidal encodings, the shift matrix, offsets' dot products, RoPE), written without
looking at what the checks detect. ``python -m tests.holdout report 03w``."""

from tests.catalogues._source import wrong

# Before the fixes of issue 39: 16/0/0/0 named/generic/misleading/passed; after: 16 of 16 named, 0 generic.
# h16 added abs(k) (the sign of a negative offset lost): misleading ("the transpose of M_k") before, named after.
NAMED_AT_LEAST = 1.0

MISTAKES = [
    wrong(
        "sinusoidal_encoding",
        "interleav|halves",
        """
# sines in the first half, cosines in the second
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=-1)
""",
    ),
    wrong(
        "sinusoidal_encoding",
        "sin|cos|swapped",
        """
# cosines on even channels, sines on odd
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.cos(pos * freq)
    pe[:, 1::2] = torch.sin(pos * freq)
    return pe
""",
    ),
    wrong(
        "sinusoidal_encoding",
        "position|shift|1",
        """
# positions counted from 1
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    pos = torch.arange(1, n_positions + 1, dtype=torch.float32)[:, None]
    freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe
""",
    ),
    wrong(
        "sinusoidal_encoding",
        "frequenc|base|divide|multipl",
        """
# multiplies by base^(2i/C) instead of dividing
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    freq = base ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe
""",
    ),
    wrong(
        "sinusoidal_encoding",
        "transpos|shape",
        """
# returns (C, T)
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe.T
""",
    ),
    wrong(
        "shift_matrix",
        "frequenc|theta|angle",
        """
# rotates every pair by k, not k * theta_i
def shift_matrix(k, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    M = torch.zeros(d_model, d_model)
    c, s = math.cos(k), math.sin(k)
    for i in range(d_model // 2):
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, -s
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = s, c
    return M
""",
    ),
    wrong(
        "shift_matrix",
        "base",
        """
# base fixed at 10000
def shift_matrix(k, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    M = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        th = k * 10000.0 ** (-2 * i / d_model)
        c, s = math.cos(th), math.sin(th)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, -s
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = s, c
    return M
""",
    ),
    wrong(
        "shift_matrix",
        "exponent|frequenc",
        """
# exponent i/C for pair i
def shift_matrix(k, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    M = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        th = k * base ** (-i / d_model)
        c, s = math.cos(th), math.sin(th)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, -s
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = s, c
    return M
""",
    ),
    wrong(
        "offset_dot_product",
        "position|p_0|t",
        """
# p_1 . p_(1+k) computed from a table (same thing) but with positions from 1 and k wrapped
def offset_dot_product(k, d_model, base=10000.0):
    k = torch.as_tensor(k, dtype=torch.float32)
    freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    return torch.cos((k[..., None] + 1) * freq).sum(-1)
""",
    ),
    wrong(
        "offset_dot_product",
        "exponent|frequenc",
        """
# frequencies with exponent 2i/C over every channel
def offset_dot_product(k, d_model, base=10000.0):
    k = torch.as_tensor(k, dtype=torch.float32)
    freq = base ** (-torch.arange(0, d_model, 1, dtype=torch.float32)[: d_model // 2] / d_model)
    return torch.cos(k[..., None] * freq).sum(-1)
""",
    ),
    wrong(
        "offset_dot_product",
        "squared|cos",
        """
# cos^2
def offset_dot_product(k, d_model, base=10000.0):
    k = torch.as_tensor(k, dtype=torch.float32)
    freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    return (torch.cos(k[..., None] * freq) ** 2).sum(-1)
""",
    ),
    wrong(
        "apply_rope",
        "direction|sign|backward|-",
        """
# rotates the other way
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2], x.shape[-1]
    if D % 2:
        raise ValueError(f"D={D} must be even")
    freq = base ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * freq
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * c + x2 * s
    out[..., 1::2] = -x1 * s + x2 * c
    return out
""",
    ),
    wrong(
        "apply_rope",
        "halves|pairs|interleav",
        """
# rotates halves (x_i, x_(i + D/2)) instead of neighbours
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2], x.shape[-1]
    if D % 2:
        raise ValueError(f"D={D} must be even")
    freq = base ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * freq
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)
""",
    ),
    wrong(
        "apply_rope",
        "position|1|shift",
        """
# positions from 1
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2], x.shape[-1]
    if D % 2:
        raise ValueError(f"D={D} must be even")
    freq = base ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)
    ang = torch.arange(1, T + 1, dtype=torch.float32)[:, None] * freq
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * c - x2 * s
    out[..., 1::2] = x1 * s + x2 * c
    return out
""",
    ),
    wrong(
        "apply_rope",
        "in place",
        """
# writes the rotation into x
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2], x.shape[-1]
    if D % 2:
        raise ValueError(f"D={D} must be even")
    freq = base ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * freq
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., 0::2].clone(), x[..., 1::2].clone()
    x[..., 0::2] = x1 * c - x2 * s
    x[..., 1::2] = x1 * s + x2 * c
    return x
""",
    ),
    wrong(
        "apply_rope",
        "position|axis|dim|T",
        """
# positions along the first axis
def apply_rope(x, base=10000.0):
    T, D = x.shape[0], x.shape[-1]
    if D % 2:
        raise ValueError(f"D={D} must be even")
    freq = base ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)
    ang = torch.arange(T, dtype=torch.float32).reshape(T, *[1] * (x.dim() - 1)) * freq
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * c - x2 * s
    out[..., 1::2] = x1 * s + x2 * c
    return out
""",
    ),
    wrong(
        "shift_matrix",
        "sign|negative",
        """
# the offset as a count of steps: abs(k)
def shift_matrix(k, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    steps = abs(k)
    M = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        th = steps * base ** (-2 * i / d_model)
        c, s = math.cos(th), math.sin(th)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, -s
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = s, c
    return M
""",
    ),
]
