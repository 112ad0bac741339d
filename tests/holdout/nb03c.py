"""Third-round holdout for notebook 03 (positional encodings), written from the notebook alone.

Figures (tests.holdout.report 03c):
- before tuning (main at ba17de5): 25 mistakes: 24 named, 1 generic (T read from x.shape[0]: raw
  broadcasting error), 0 misleading, 0 passed.
- after tuning (transformer_lab/checks changed, main merged): the first set 25 of 25 named, 0
  misleading, 0 passed.
- written after tuning, measured once before any change for them: 4 mistakes: 4 named.
- all now: 29 of 29 named, 0 misleading, 0 passed.
"""

from __future__ import annotations

import torch

from tests.holdout._harness import collector

MISTAKES: list = []
wrong = collector(MISTAKES, "03")
NAMED_AT_LEAST = 1.0


def _theta(d_model, base=10000.0):
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (C/2,)


def _interleave(a, b):
    return torch.stack([a, b], dim=-1).flatten(-2)  # (..., C/2) x 2 -> (..., C)


# ---------------------------------------------------------------- sinusoidal_encoding
@wrong("sinusoidal_encoding", "float32|dtype")
def pe_float64(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, received d_model={d_model}")
    a = torch.arange(n_positions, dtype=torch.float64)[:, None] * _theta(d_model, base)
    return _interleave(a.sin(), a.cos())  # float64 left as is


@wrong("sinusoidal_encoding", "ValueError|even|odd")
def pe_no_odd_check(n_positions, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    a = torch.arange(n_positions, dtype=torch.float64)[:, None] * theta
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = a.sin()
    pe[:, 1::2] = a.cos()[:, : d_model // 2]
    return pe.float()


@wrong("sinusoidal_encoding", "2i|frequenc|exponent|wavelength")
def pe_forgets_the_two(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, received d_model={d_model}")
    theta = base ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)  # i/C, not 2i/C
    a = torch.arange(n_positions, dtype=torch.float64)[:, None] * theta
    return _interleave(a.sin(), a.cos()).float()


@wrong("sinusoidal_encoding", "position 0|start|offset|shift|first")
def pe_positions_from_one(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, received d_model={d_model}")
    a = torch.arange(1, n_positions + 1, dtype=torch.float64)[:, None] * _theta(d_model, base)
    return _interleave(a.sin(), a.cos()).float()


@wrong("sinusoidal_encoding", "interleav|halves|half|even|odd")
def pe_sin_then_cos_halves(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, received d_model={d_model}")
    a = torch.arange(n_positions, dtype=torch.float64)[:, None] * _theta(d_model, base)
    return torch.cat([a.sin(), a.cos()], dim=-1).float()


@wrong("sinusoidal_encoding", "base")
def pe_hard_coded_base(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, received d_model={d_model}")
    a = torch.arange(n_positions, dtype=torch.float64)[:, None] * _theta(d_model, 10000.0)
    return _interleave(a.sin(), a.cos()).float()


# ---------------------------------------------------------------- shift_matrix
def _blocks(c, s, d_model):
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(c)
    m[0::2, 1::2] = torch.diag(-s)
    m[1::2, 0::2] = torch.diag(s)
    m[1::2, 1::2] = torch.diag(c)
    return m


@wrong("shift_matrix", "transpose|sign|direction|-k|opposite|inverse")
def shift_rotates_backwards(k, d_model, base=10000.0):
    t = _theta(d_model, base)
    return _blocks(torch.cos(k * t), -torch.sin(k * t), d_model).float()


@wrong("shift_matrix", "frequenc|2i|exponent")
def shift_forgets_the_two(k, d_model, base=10000.0):
    t = base ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    return _blocks(torch.cos(k * t), torch.sin(k * t), d_model).float()


@wrong("shift_matrix", "float32|dtype")
def shift_float64(k, d_model, base=10000.0):
    t = _theta(d_model, base)
    return _blocks(torch.cos(k * t), torch.sin(k * t), d_model)


@wrong("shift_matrix", "base")
def shift_hard_coded_base(k, d_model, base=10000.0):
    t = _theta(d_model, 10000.0)
    return _blocks(torch.cos(k * t), torch.sin(k * t), d_model).float()


@wrong("shift_matrix", "pair|interleav|halves|half")
def shift_blocks_in_halves(k, d_model, base=10000.0):
    t = _theta(d_model, base)
    c, s = torch.diag(torch.cos(k * t)), torch.diag(torch.sin(k * t))
    return torch.cat([torch.cat([c, -s], 1), torch.cat([s, c], 1)], 0).float()


@wrong("shift_matrix", "negative|sign|-k|direction")
def shift_abs_offset(k, d_model, base=10000.0):
    t = _theta(d_model, base)
    k = abs(k)
    return _blocks(torch.cos(k * t), torch.sin(k * t), d_model).float()


# ---------------------------------------------------------------- offset_dot_product
@wrong("offset_dot_product", "float32|dtype")
def offset_float64(k, d_model, base=10000.0):
    return torch.cos(k.double()[..., None] * _theta(d_model, base)).sum(-1)


@wrong("offset_dot_product", "mean|sum|C/2")
def offset_mean(k, d_model, base=10000.0):
    return torch.cos(k.double()[..., None] * _theta(d_model, base)).mean(-1).float()


@wrong("offset_dot_product", "shape")
def offset_flattens(k, d_model, base=10000.0):
    return torch.cos(k.double().flatten()[:, None] * _theta(d_model, base)).sum(-1).float()


@wrong("offset_dot_product", "cos")
def offset_uses_sin(k, d_model, base=10000.0):
    return torch.sin(k.double()[..., None] * _theta(d_model, base)).sum(-1).float()


@wrong("offset_dot_product", "C/2|twice|double|factor")
def offset_counts_channels_not_pairs(k, d_model, base=10000.0):
    return 2 * torch.cos(k.double()[..., None] * _theta(d_model, base)).sum(-1).float()


@wrong("offset_dot_product", "base")
def offset_hard_coded_base(k, d_model, base=10000.0):
    return torch.cos(k.double()[..., None] * _theta(d_model)).sum(-1).float()


# ---------------------------------------------------------------- apply_rope
def _angles(T, D, base=10000.0, start=0):
    return torch.arange(start, start + T, dtype=torch.float64)[:, None] * _theta(D, base)


@wrong("apply_rope", "modif|in place|in-place|input")
def rope_in_place(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, received D={D}")
    a = _angles(T, D, base)
    cos, sin = a.cos().to(x.dtype), a.sin().to(x.dtype)
    even, odd = x[..., 0::2].clone(), x[..., 1::2].clone()
    x[..., 0::2] = even * cos - odd * sin
    x[..., 1::2] = even * sin + odd * cos
    return x


@wrong("apply_rope", "position 0|start|offset|first")
def rope_positions_from_one(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, received D={D}")
    a = _angles(T, D, base, start=1)
    cos, sin = a.cos().to(x.dtype), a.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return _interleave(even * cos - odd * sin, even * sin + odd * cos)


@wrong("apply_rope", "sign|direction|clockwise|wrong way|opposite")
def rope_rotates_backwards(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, received D={D}")
    a = _angles(T, D, base)
    cos, sin = a.cos().to(x.dtype), a.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return _interleave(even * cos + odd * sin, -even * sin + odd * cos)


@wrong("apply_rope", "pair|interleav|halves|half|adjacent")
def rope_rotate_half(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, received D={D}")
    a = _angles(T, D, base)
    cos, sin = a.cos().to(x.dtype), a.sin().to(x.dtype)
    lo, hi = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([lo * cos - hi * sin, lo * sin + hi * cos], dim=-1)


@wrong("apply_rope", "position|axis|token|dim -2|second-to-last")
def rope_length_from_first_dim(x, base=10000.0):
    T, D = x.shape[0], x.shape[-1]  # the batch size for a 3-D input
    if D % 2:
        raise ValueError(f"D must be even, received D={D}")
    a = _angles(T, D, base)
    cos, sin = a.cos().to(x.dtype), a.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return _interleave(even * cos - odd * sin, even * sin + odd * cos)


@wrong("apply_rope", "dtype|float")
def rope_returns_float64(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, received D={D}")
    a = _angles(T, D, base)
    even, odd = x[..., 0::2], x[..., 1::2]
    return _interleave(even * a.cos() - odd * a.sin(), even * a.sin() + odd * a.cos())


@wrong("apply_rope", "ValueError|even|odd")
def rope_no_odd_check(x, base=10000.0):
    T, D = x.shape[-2:]
    a = _angles(T, (D // 2) * 2, base)
    cos, sin = a.cos().to(x.dtype), a.sin().to(x.dtype)
    even, odd = x[..., 0 : (D // 2) * 2 : 2], x[..., 1::2]
    return _interleave(even * cos - odd * sin, even * sin + odd * cos)


# ================================================================ written after tuning
@wrong("sinusoidal_encoding", "sin|cos|swap")
def late_pe_cos_in_even(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, received d_model={d_model}")
    a = torch.arange(n_positions, dtype=torch.float64)[:, None] * _theta(d_model, base)
    return _interleave(a.cos(), a.sin()).float()


@wrong("shift_matrix", "cos|sin|swap|diagonal")
def late_shift_sin_on_diagonal(k, d_model, base=10000.0):
    t = _theta(d_model, base)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    c, s = torch.cos(k * t), torch.sin(k * t)
    m[0::2, 0::2], m[0::2, 1::2] = torch.diag(s), torch.diag(-c)
    m[1::2, 0::2], m[1::2, 1::2] = torch.diag(c), torch.diag(s)
    return m.float()


@wrong("offset_dot_product", "c/2|pair|frequenc")
def late_offset_one_frequency_per_channel(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(d_model, dtype=torch.float64) / d_model)  # C frequencies
    return torch.cos(k.double()[..., None] * theta).sum(-1).float()


@wrong("apply_rope", "rotat|add")
def late_rope_adds_the_encoding(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, received D={D}")
    a = _angles(T, D, base)
    return x + _interleave(a.sin(), a.cos()).to(x.dtype)  # absolute, added
