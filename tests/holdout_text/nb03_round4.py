"""Holdout for notebook 03 (fourth round), written from
notebooks/03_positional_encodings/03_positional_encodings.ipynb alone (without reading the checks)."""

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "03")
right = collector(CORRECT, "03")
# Written after rounds 2 and 3 had tuned the checks, and measured once, never tuned on: the
# forecast for a new class. First shot 27 of 27 named, 0 generic, 0 misleading, 0 passed.
NAMED_AT_LEAST = 1.0


def _theta(width, base, dtype=torch.float32):
    """theta_i = base ** (-2i / width), i = 0 .. width/2 - 1 (the correct frequencies)."""
    return base ** (-torch.arange(0, width, 2, dtype=dtype) / width)


def _check_even(width):
    if width % 2:
        raise ValueError(f"the width must be even, got {width}")


# --- Exercise 1: sinusoidal_encoding -----------------------------------------------------


@wrong("sinusoidal_encoding", "2i|exponent|frequenc|theta|even channel")
def sinusoidal_exponent_uses_i_not_2i(n_positions, d_model, base=10000.0):
    _check_even(d_model)
    t = torch.arange(n_positions, dtype=torch.float32)[:, None]
    theta = base ** (-torch.arange(d_model // 2, dtype=torch.float32) / d_model)[None, :]
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(t * theta)
    pe[:, 1::2] = torch.cos(t * theta)
    return pe


@wrong("sinusoidal_encoding", "sin|cos|swap|even|odd")
def sinusoidal_cos_in_even_channels(n_positions, d_model, base=10000.0):
    _check_even(d_model)
    angles = (
        torch.arange(n_positions, dtype=torch.float32)[:, None] * _theta(d_model, base)[None, :]
    )
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.cos(angles)
    pe[:, 1::2] = torch.sin(angles)
    return pe


@wrong("sinusoidal_encoding", "interleav|even|odd|order|permut|concat|first half")
def sinusoidal_sines_then_cosines(n_positions, d_model, base=10000.0):
    _check_even(d_model)
    angles = (
        torch.arange(n_positions, dtype=torch.float32)[:, None] * _theta(d_model, base)[None, :]
    )
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


@wrong("sinusoidal_encoding", "position 0|start|off-by-one|off by one|t = 0|t=0|shift")
def sinusoidal_positions_start_at_one(n_positions, d_model, base=10000.0):
    _check_even(d_model)
    angles = (
        torch.arange(1, n_positions + 1, dtype=torch.float32)[:, None]
        * _theta(d_model, base)[None, :]
    )
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@wrong("sinusoidal_encoding", "float32|dtype|float64|double")
def sinusoidal_returns_float64(n_positions, d_model, base=10000.0):
    _check_even(d_model)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * _theta(
        d_model, base, torch.float64
    )
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@wrong("sinusoidal_encoding", "ValueError|odd|even|raise")
def sinusoidal_silently_accepts_odd_width(n_positions, d_model, base=10000.0):
    angles = (
        torch.arange(n_positions, dtype=torch.float32)[:, None] * _theta(d_model, base)[None, :]
    )
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe


@wrong("sinusoidal_encoding", "base")
def sinusoidal_hard_codes_base(n_positions, d_model, base=10000.0):
    _check_even(d_model)
    angles = (
        torch.arange(n_positions, dtype=torch.float32)[:, None] * _theta(d_model, 10000.0)[None, :]
    )
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@right("sinusoidal_encoding")
def sinusoidal_stack_and_flatten_in_float64(n_positions, d_model, base=10000.0):
    if d_model % 2 != 0:
        raise ValueError(f"d_model={d_model} is odd")
    pos = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)
    freq = torch.exp(-math.log(base) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = pos * freq
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()


# --- Exercise 2: shift_matrix ------------------------------------------------------------


def _shift_from_blocks(cos, sin_top_right, sin_bottom_left, d_model):
    m = torch.zeros(d_model, d_model, dtype=cos.dtype)
    m[0::2, 0::2] = torch.diag(cos)
    m[0::2, 1::2] = torch.diag(sin_top_right)
    m[1::2, 0::2] = torch.diag(sin_bottom_left)
    m[1::2, 1::2] = torch.diag(cos)
    return m


@wrong("shift_matrix", "sign|transpose|direction|-k|negative|backward|row vector|column")
def shift_matrix_column_vector_convention(k, d_model, base=10000.0):
    _check_even(d_model)
    a = k * _theta(d_model, base, torch.float64)
    return _shift_from_blocks(a.cos(), a.sin(), -a.sin(), d_model).float()


@wrong("shift_matrix", "2i|exponent|frequenc|theta|even channel")
def shift_matrix_exponent_uses_i(k, d_model, base=10000.0):
    _check_even(d_model)
    a = k * base ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    return _shift_from_blocks(a.cos(), -a.sin(), a.sin(), d_model).float()


@wrong("shift_matrix", "float32|dtype|float64|double")
def shift_matrix_returns_float64(k, d_model, base=10000.0):
    _check_even(d_model)
    a = k * _theta(d_model, base, torch.float64)
    return _shift_from_blocks(a.cos(), -a.sin(), a.sin(), d_model)


@wrong("shift_matrix", "negative|-k|sign|inverse|backward")
def shift_matrix_power_of_m1_with_abs_k(k, d_model, base=10000.0):
    # builds M_1 and raises it to |k|: right for k >= 0, the wrong direction for k < 0
    _check_even(d_model)
    a = _theta(d_model, base, torch.float64)
    m1 = _shift_from_blocks(a.cos(), -a.sin(), a.sin(), d_model)
    return torch.linalg.matrix_power(m1, abs(int(k))).float()


@wrong("shift_matrix", "interleav|pair|block|adjacent|2i|layout")
def shift_matrix_half_split_blocks(k, d_model, base=10000.0):
    # pairs channel i with i + C/2 (sines-first layout) instead of (2i, 2i+1)
    _check_even(d_model)
    h = d_model // 2
    a = k * _theta(d_model, base, torch.float64)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[:h, :h] = torch.diag(a.cos())
    m[:h, h:] = torch.diag(-a.sin())
    m[h:, :h] = torch.diag(a.sin())
    m[h:, h:] = torch.diag(a.cos())
    return m.float()


@wrong("shift_matrix", "base")
def shift_matrix_hard_codes_base(k, d_model, base=10000.0):
    _check_even(d_model)
    a = k * _theta(d_model, 10000.0, torch.float64)
    return _shift_from_blocks(a.cos(), -a.sin(), a.sin(), d_model).float()


@right("shift_matrix")
def shift_matrix_block_diag_loop(k, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    blocks = []
    for i in range(d_model // 2):
        a = k * base ** (-2 * i / d_model)
        c, s = math.cos(a), math.sin(a)
        blocks.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks).float()


# --- Exercise 3: offset_dot_product ------------------------------------------------------


@wrong("offset_dot_product", "2i|exponent|frequenc|theta|even channel")
def offset_dot_exponent_uses_i(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(d_model // 2, dtype=torch.float32) / d_model)
    return torch.cos(k[..., None] * theta).sum(-1)


@wrong("offset_dot_product", "C/2|pair|half|twice|double|every channel|all channels")
def offset_dot_sums_over_all_channels(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(d_model, dtype=torch.float32) / d_model)
    return torch.cos(k[..., None] * theta).sum(-1)


@wrong("offset_dot_product", "mean|average|normali|divid|C/2|sum")
def offset_dot_normalised_like_the_plot(k, d_model, base=10000.0):
    return torch.cos(k[..., None] * _theta(d_model, base)).mean(-1)


@wrong("offset_dot_product", "float32|dtype|float64|double")
def offset_dot_returns_float64(k, d_model, base=10000.0):
    theta = _theta(d_model, base, torch.float64)
    return torch.cos(k[..., None] * theta).sum(-1)


@wrong("offset_dot_product", "shape|any shape|dim|scalar|0-d|broadcast")
def offset_dot_only_for_1d_offsets(k, d_model, base=10000.0):
    return torch.cos(k[:, None] * _theta(d_model, base)[None, :]).sum(1)


@wrong("offset_dot_product", "shape|sum|dim|axis|scalar|total")
def offset_dot_sums_everything(k, d_model, base=10000.0):
    return torch.cos(k.unsqueeze(-1) * _theta(d_model, base)).sum()


@right("offset_dot_product")
def offset_dot_flatten_and_matmul(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    flat = k.reshape(-1, 1).double()
    return (
        (torch.cos(flat * theta) @ torch.ones(d_model // 2, dtype=torch.float64))
        .reshape(k.shape)
        .float()
    )


# --- Exercise 4: apply_rope --------------------------------------------------------------


def _angles(t_len, d, base, start=0):
    return (
        torch.arange(start, start + t_len, dtype=torch.float32)[:, None] * _theta(d, base)[None, :]
    )


@wrong("apply_rope", "sign|direction|clockwise|transpose|negative|-t|inverse")
def rope_rotates_clockwise(x, base=10000.0):
    _check_even(x.shape[-1])
    a = _angles(x.shape[-2], x.shape[-1], base)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * a.cos() + x1 * a.sin()
    out[..., 1::2] = -x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "2i|exponent|frequenc|theta|even channel")
def rope_exponent_uses_i(x, base=10000.0):
    _check_even(x.shape[-1])
    t_len, d = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(d // 2, dtype=torch.float32) / d)
    a = torch.arange(t_len, dtype=torch.float32)[:, None] * theta
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "position 0|start|off-by-one|off by one|t = 0|t=0|shift|unrotated|not rotated")
def rope_positions_start_at_one(x, base=10000.0):
    _check_even(x.shape[-1])
    a = _angles(x.shape[-2], x.shape[-1], base, start=1)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "interleav|pair|half|adjacent|2i|permut|LLaMA")
def rope_pairs_i_with_i_plus_half(x, base=10000.0):
    _check_even(x.shape[-1])
    h = x.shape[-1] // 2
    a = _angles(x.shape[-2], x.shape[-1], base)
    x0, x1 = x[..., :h], x[..., h:]
    return torch.cat([x0 * a.cos() - x1 * a.sin(), x0 * a.sin() + x1 * a.cos()], dim=-1)


@wrong("apply_rope", "batch|leading|axis|dim|position|T")
def rope_positions_along_first_axis(x, base=10000.0):
    # counts positions along dim 0: right for a (T, D) input, wrong for (B, T, D)
    _check_even(x.shape[-1])
    a = _angles(x.shape[0], x.shape[-1], base)
    a = a.view(x.shape[0], *([1] * (x.dim() - 2)), x.shape[-1] // 2)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * a.cos() - x1 * a.sin(), x0 * a.sin() + x1 * a.cos()], dim=-1).flatten(
        -2
    )


@wrong("apply_rope", "in-place|in place|inplace|modif|overwr|mutat|copy|clone|input")
def rope_overwrites_x_in_place(x, base=10000.0):
    _check_even(x.shape[-1])
    a = _angles(x.shape[-2], x.shape[-1], base)
    x0, x1 = x[..., 0::2], x[..., 1::2]  # views of x
    x[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    x[..., 1::2] = x0 * a.sin() + x1 * a.cos()  # x0 has already been overwritten
    return x


@wrong("apply_rope", "ValueError|odd|even|raise")
def rope_no_check_for_odd_width(x, base=10000.0):
    d = x.shape[-1]
    a = _angles(x.shape[-2], d, base)[:, : d // 2]
    out = x.clone()
    x0, x1 = x[..., 0 : 2 * (d // 2) : 2], x[..., 1::2]
    out[..., 0 : 2 * (d // 2) : 2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "dtype|float64|double|precision")
def rope_always_returns_float32(x, base=10000.0):
    _check_even(x.shape[-1])
    a = _angles(x.shape[-2], x.shape[-1], base)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.zeros(x.shape)
    out[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@right("apply_rope")
def rope_complex_multiplication(x, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head width D={d} is odd")
    t = torch.arange(x.shape[-2], dtype=torch.float64)
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones(len(t), d // 2, dtype=torch.float64), torch.outer(t, theta))
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * rot).reshape(x.shape).to(x.dtype)
