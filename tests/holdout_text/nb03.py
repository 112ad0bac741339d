"""Holdout for notebook 03, written from notebooks/03_positional_encodings/03_positional_encodings.ipynb
alone (without reading the checks)."""

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "03")
right = collector(CORRECT, "03")
NAMED_AT_LEAST = 1.0  # measured: 36 of 37 named when written; 37 of 37 after the round's check work


def _theta(c, base=10000.0, step=2, dtype=torch.float32):
    """The C/2 frequencies base^(-2i/C); step=1 makes the i/C slip."""
    idx = torch.arange(0, c, 2, dtype=dtype) if step == 2 else torch.arange(c // 2, dtype=dtype)
    return base ** (-idx / c)


def _pe(t, c, theta, first=0, sin_even=True, dtype=torch.float32):
    pos = torch.arange(first, first + t, dtype=dtype)[:, None]  # (T, 1)
    ang = pos * theta[None, :].to(dtype)  # (T, C/2)
    pe = torch.zeros(t, c, dtype=dtype)
    pe[:, 0::2] = torch.sin(ang) if sin_even else torch.cos(ang)
    pe[:, 1::2] = torch.cos(ang) if sin_even else torch.sin(ang)
    return pe


def _odd(c):
    if c % 2:
        raise ValueError(f"d_model must be even, got {c}")


# ---------------------------------------------------------------- sinusoidal_encoding
@wrong("sinusoidal_encoding", "exponent|2i|frequenc|theta|i/c")
def pe_exponent_i_over_c(n_positions, d_model, base=10000.0):
    _odd(d_model)
    return _pe(n_positions, d_model, _theta(d_model, base, step=1))


@wrong("sinusoidal_encoding", "exponent|2i|frequenc|theta")
def pe_exponent_doubled_even_index(n_positions, d_model, base=10000.0):
    _odd(d_model)
    idx = torch.arange(0, d_model, 2, dtype=torch.float32)
    return _pe(n_positions, d_model, base ** (-2 * idx / d_model))


@wrong("sinusoidal_encoding", "sine|sin(|sin |cos|swap|even|odd")
def pe_cos_in_even_channels(n_positions, d_model, base=10000.0):
    _odd(d_model)
    return _pe(n_positions, d_model, _theta(d_model, base), sin_even=False)


@wrong("sinusoidal_encoding", "interleav|half|concat|order|even|odd|permut")
def pe_sines_then_cosines(n_positions, d_model, base=10000.0):
    _odd(d_model)
    ang = torch.arange(n_positions, dtype=torch.float32)[:, None] * _theta(d_model, base)
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=-1)


@wrong("sinusoidal_encoding", "odd|valueerror|raise|even")
def pe_accepts_odd_width(n_positions, d_model, base=10000.0):
    c = d_model + d_model % 2
    return _pe(n_positions, c, _theta(c, base))[:, :d_model]


@wrong("sinusoidal_encoding", "float32|dtype|float64|double")
def pe_in_float64(n_positions, d_model, base=10000.0):
    _odd(d_model)
    return _pe(
        n_positions, d_model, _theta(d_model, base, dtype=torch.float64), dtype=torch.float64
    )


@wrong("sinusoidal_encoding", "position 0|start|off-by-one|off by one|first|shift")
def pe_positions_from_one(n_positions, d_model, base=10000.0):
    _odd(d_model)
    return _pe(n_positions, d_model, _theta(d_model, base), first=1)


@wrong("sinusoidal_encoding", "base")
def pe_ignores_base(n_positions, d_model, base=10000.0):
    _odd(d_model)
    return _pe(n_positions, d_model, _theta(d_model, 10000.0))


@wrong("sinusoidal_encoding", "exponent|sign|negative|frequenc|theta|wavelength")
def pe_positive_exponent(n_positions, d_model, base=10000.0):
    _odd(d_model)
    idx = torch.arange(0, d_model, 2, dtype=torch.float32)
    return _pe(n_positions, d_model, base ** (idx / d_model))


@wrong("sinusoidal_encoding", "2π|2pi|pi|angle|frequenc|turn")
def pe_angles_times_two_pi(n_positions, d_model, base=10000.0):
    _odd(d_model)
    return _pe(n_positions, d_model, 2 * math.pi * _theta(d_model, base))


@wrong("sinusoidal_encoding", "shape|transpose|row|column")
def pe_transposed(n_positions, d_model, base=10000.0):
    _odd(d_model)
    return _pe(n_positions, d_model, _theta(d_model, base)).T.contiguous()


@right("sinusoidal_encoding")
def pe_via_exp_log(n_positions, d_model, base=10000.0):
    if d_model % 2 != 0:
        raise ValueError(f"the width must be even, not {d_model}")
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(base) / d_model))
    ang = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1) * div  # (T, C/2)
    return torch.stack([ang.sin(), ang.cos()], dim=-1).flatten(1).float()  # sin, cos interleaved


@right("sinusoidal_encoding")
def pe_loops(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} is odd")
    pe = torch.empty(n_positions, d_model)
    for i in range(d_model // 2):
        theta = base ** (-2 * i / d_model)
        ang = torch.arange(n_positions, dtype=torch.float64) * theta
        pe[:, 2 * i] = torch.sin(ang).float()
        pe[:, 2 * i + 1] = torch.cos(ang).float()
    return pe


# ---------------------------------------------------------------- shift_matrix
def _shift(k, c, base=10000.0, theta=None, sign=1.0, dtype=torch.float32):
    _odd(c)
    th = (_theta(c, base, dtype=torch.float64) if theta is None else theta).double()
    a = k * th
    m = torch.zeros(c, c, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(torch.cos(a))
    m[0::2, 1::2] = torch.diag(-sign * torch.sin(a))
    m[1::2, 0::2] = torch.diag(sign * torch.sin(a))
    m[1::2, 1::2] = torch.diag(torch.cos(a))
    return m.to(dtype)


@wrong("shift_matrix", "transpose|sign|direction|inverse|-k|revers|rotation")
def shift_rotates_the_wrong_way(k, d_model, base=10000.0):
    return _shift(k, d_model, base, sign=-1.0)


@wrong("shift_matrix", "exponent|frequenc|theta|2i")
def shift_exponent_i_over_c(k, d_model, base=10000.0):
    return _shift(k, d_model, theta=_theta(d_model, base, step=1))


@wrong("shift_matrix", "float32|dtype|float64|double")
def shift_in_float64(k, d_model, base=10000.0):
    return _shift(k, d_model, base, dtype=torch.float64)


@wrong("shift_matrix", "base")
def shift_ignores_base(k, d_model, base=10000.0):
    return _shift(k, d_model)


@wrong("shift_matrix", "offset|angle|shift")
def shift_forgets_k(k, d_model, base=10000.0):
    return _shift(1, d_model, base)


@wrong("shift_matrix", "interleav|pair|channel|block|layout|half")
def shift_blocks_in_halves(k, d_model, base=10000.0):
    _odd(d_model)
    a = k * _theta(d_model, base, dtype=torch.float64)
    h = d_model // 2
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[:h, :h] = torch.diag(torch.cos(a))
    m[:h, h:] = torch.diag(-torch.sin(a))
    m[h:, :h] = torch.diag(torch.sin(a))
    m[h:, h:] = torch.diag(torch.cos(a))
    return m.float()


@wrong("shift_matrix", "sine|sin(|sin |off-diagonal|rotation|orthogonal")
def shift_only_cosines(k, d_model, base=10000.0):
    _odd(d_model)
    a = k * _theta(d_model, base, dtype=torch.float64)
    return torch.diag(torch.cos(a).repeat_interleave(2)).float()


@wrong("shift_matrix", "negative|sign|direction|absolute|abs(")
def shift_uses_abs_offset(k, d_model, base=10000.0):
    return _shift(abs(k), d_model, base)


@right("shift_matrix")
def shift_with_block_diag(k, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    blocks = []
    for i in range(d_model // 2):
        a = k * base ** (-2 * i / d_model)
        c, s = math.cos(a), math.sin(a)
        blocks.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks).float()


# ---------------------------------------------------------------- offset_dot_product
def _offset(k, c, base=10000.0, theta=None):
    th = _theta(c, base, dtype=torch.float64) if theta is None else theta
    return torch.cos(k.unsqueeze(-1).double() * th)


@wrong("offset_dot_product", "exponent|frequenc|theta|2i")
def offset_exponent_i_over_c(k, d_model, base=10000.0):
    th = _theta(d_model, base, step=1, dtype=torch.float64)
    return _offset(k, d_model, theta=th).sum(-1).float()


@wrong("offset_dot_product", "c/2|pair|half|twice|double")
def offset_sums_over_all_channels(k, d_model, base=10000.0):
    return (2 * _offset(k, d_model, base).sum(-1)).float()


@wrong("offset_dot_product", "float32|dtype|float64|double")
def offset_in_float64(k, d_model, base=10000.0):
    return _offset(k, d_model, base).sum(-1)


@wrong("offset_dot_product", "sum|mean|average|c/2|scale")
def offset_mean_over_pairs(k, d_model, base=10000.0):
    return _offset(k, d_model, base).mean(-1).float()


@wrong("offset_dot_product", "cos|sine|sin(|sin ")
def offset_with_sine(k, d_model, base=10000.0):
    th = _theta(d_model, base, dtype=torch.float64)
    return torch.sin(k.unsqueeze(-1).double() * th).sum(-1).float()


@wrong("offset_dot_product", "dim|shape|sum|axis")
def offset_sums_first_axis(k, d_model, base=10000.0):
    th = _theta(d_model, base, dtype=torch.float64)
    return torch.cos(k.unsqueeze(-1).double() * th).sum(0).float()


@wrong("offset_dot_product", "base")
def offset_ignores_base(k, d_model, base=10000.0):
    return _offset(k, d_model).sum(-1).float()


@wrong("offset_dot_product", "shape|flatten|reshape")
def offset_flattens_offsets(k, d_model, base=10000.0):
    return _offset(k.reshape(-1), d_model, base).sum(-1).float()


@right("offset_dot_product")
def offset_by_loop(k, d_model, base=10000.0):
    total = torch.zeros(k.shape, dtype=torch.float64)
    for i in range(d_model // 2):
        total += torch.cos(k.double() * base ** (-2 * i / d_model))
    return total.float()


# ---------------------------------------------------------------- apply_rope
def _rope(x, base=10000.0, theta=None, first=0, sign=1.0, dtype=None):
    d = x.shape[-1]
    _odd(d)
    t = x.shape[-2]
    th = _theta(d, base, dtype=torch.float64) if theta is None else theta
    ang = torch.arange(first, first + t, dtype=torch.float64)[:, None] * th  # (T, D/2)
    cos, sin = torch.cos(ang).to(dtype or x.dtype), torch.sin(ang).to(dtype or x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty(x.shape, dtype=dtype or x.dtype)
    out[..., 0::2] = x1 * cos - sign * x2 * sin
    out[..., 1::2] = sign * x1 * sin + x2 * cos
    return out


@wrong("apply_rope", "direction|sign|clockwise|transpose|revers|angle")
def rope_rotates_the_wrong_way(x, base=10000.0):
    return _rope(x, base, sign=-1.0)


@wrong("apply_rope", "exponent|frequenc|theta|2i")
def rope_exponent_i_over_d(x, base=10000.0):
    return _rope(x, base, theta=_theta(x.shape[-1], base, step=1, dtype=torch.float64))


@wrong("apply_rope", "position 0|start|off-by-one|off by one|first")
def rope_positions_from_one(x, base=10000.0):
    return _rope(x, base, first=1)


@wrong("apply_rope", "interleav|pair|half|channel|llama")
def rope_half_split_pairs(x, base=10000.0):
    d = x.shape[-1]
    _odd(d)
    ang = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * _theta(
        d, base, dtype=torch.float64
    )
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


@wrong("apply_rope", "in place|in-place|modif|input|mutat")
def rope_in_place(x, base=10000.0):
    out = _rope(x, base)
    x.copy_(out)
    return x


@wrong("apply_rope", "odd|valueerror|raise|even")
def rope_accepts_odd_width(x, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 0:
        return _rope(x, base)
    return torch.cat([_rope(x[..., :-1], base), x[..., -1:]], dim=-1)


@wrong("apply_rope", "position|axis|dim|batch|leading")
def rope_positions_along_first_axis(x, base=10000.0):
    d = x.shape[-1]
    _odd(d)
    n = x.shape[0]
    ang = torch.arange(n, dtype=torch.float64)[:, None] * _theta(d, base, dtype=torch.float64)
    shape = (n,) + (1,) * (x.dim() - 2) + (d // 2,)
    cos, sin = torch.cos(ang).view(shape).to(x.dtype), torch.sin(ang).view(shape).to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out


@wrong("apply_rope", "base")
def rope_ignores_base(x, base=10000.0):
    return _rope(x)


@wrong("apply_rope", "interleav|pair|order|channel")
def rope_results_not_interleaved(x, base=10000.0):
    r = _rope(x, base)
    return torch.cat([r[..., 0::2], r[..., 1::2]], dim=-1)


@wrong("apply_rope", "dtype|float32|float64|double")
def rope_returns_float64(x, base=10000.0):
    return _rope(x.double(), base, dtype=torch.float64)


@right("apply_rope")
def rope_complex(x, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * theta  # (T, D/2)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    z = z * torch.polar(torch.ones_like(ang), ang)
    return torch.view_as_real(z).reshape(x.shape).to(x.dtype)


@right("apply_rope")
def rope_stack(x, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"D={d} is odd")
    theta = base ** (-torch.arange(0, d, 2).double() / d)
    ang = torch.arange(x.shape[-2]).double().unsqueeze(-1) * theta
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
