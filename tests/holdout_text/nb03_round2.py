"""Holdout for notebook 03 (second round), written from
notebooks/03_positional_encodings/03_positional_encodings.ipynb alone (without reading the checks)."""

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "03")
right = collector(CORRECT, "03")
# First shot, written without reading the checks: 37 of 40 named, 0 generic, 2 misleading,
# 1 passed; 40 of 40 named after the round's check work (29 November).
NAMED_AT_LEAST = 1.0


def _theta(width, base, dtype=torch.float32):
    """theta_i = base ** (-2i / width) for the width/2 channel pairs (correct)."""
    return base ** (-torch.arange(0, width, 2, dtype=dtype) / width)


# =============================================================================================
# Exercise 1 — sinusoidal_encoding
# =============================================================================================


@wrong("sinusoidal_encoding", "2i|exponent|even channel|frequenc")
def sinusoidal_exponent_uses_i(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    t = torch.arange(n_positions, dtype=torch.float32)[:, None]
    theta = base ** (-torch.arange(d_model // 2, dtype=torch.float32) / d_model)  # i, not 2i
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(t * theta)
    pe[:, 1::2] = torch.cos(t * theta)
    return pe


@wrong("sinusoidal_encoding", "swap|exchang|interchang|even channels|odd channels")
def sinusoidal_cos_in_even_channels(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    angles = torch.arange(n_positions, dtype=torch.float32)[:, None] * _theta(d_model, base)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.cos(angles)
    pe[:, 1::2] = torch.sin(angles)
    return pe


@wrong("sinusoidal_encoding", "interleav|half|halves|concat|permut")
def sinusoidal_sines_then_cosines(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    angles = torch.arange(n_positions, dtype=torch.float32)[:, None] * _theta(d_model, base)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


@wrong("sinusoidal_encoding", "position 0|start|off by one|off-by-one|from 0|shifted")
def sinusoidal_positions_from_one(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    t = torch.arange(1, n_positions + 1, dtype=torch.float32)[:, None]
    angles = t * _theta(d_model, base)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@wrong("sinusoidal_encoding", "exponent|sign|negative|frequenc|wavelength")
def sinusoidal_positive_exponent(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    t = torch.arange(n_positions, dtype=torch.float32)[:, None]
    freq = base ** (
        torch.arange(0, d_model, 2, dtype=torch.float32) / d_model
    )  # should be 1 / this
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(t * freq)
    pe[:, 1::2] = torch.cos(t * freq)
    return pe


@wrong("sinusoidal_encoding", "ValueError|odd")
def sinusoidal_accepts_odd_width(n_positions, d_model, base=10000.0):
    t = torch.arange(n_positions, dtype=torch.float32)[:, None]
    angles = t * base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])  # silently drops the last cosine
    return pe


@wrong("sinusoidal_encoding", "message|name|the value")
def sinusoidal_error_without_value(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = torch.arange(n_positions, dtype=torch.float32)[:, None] * _theta(d_model, base)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@wrong("sinusoidal_encoding", "float32|dtype|float64|double")
def sinusoidal_returns_float64(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    t = torch.arange(n_positions, dtype=torch.float64)[:, None]
    angles = t * _theta(d_model, base, torch.float64)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@wrong("sinusoidal_encoding", "integer|//|floor|frequenc")
def sinusoidal_integer_division_in_exponent(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    t = torch.arange(n_positions)[:, None]
    exponent = torch.arange(0, d_model, 2) // d_model  # always 0: every pair gets frequency 1
    angles = t * base ** (-exponent.float())
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@wrong("sinusoidal_encoding", "base")
def sinusoidal_ignores_base(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    angles = torch.arange(n_positions, dtype=torch.float32)[:, None] * _theta(d_model, 10000.0)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@wrong("sinusoidal_encoding", "log|exponent|frequenc")
def sinusoidal_log10_in_exp_form(n_positions, d_model, base=10000.0):
    # the exp/log form with log10 where the natural log belongs
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    t = torch.arange(n_positions, dtype=torch.float32)[:, None]
    div = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log10(base) / d_model)
    )
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(t * div)
    pe[:, 1::2] = torch.cos(t * div)
    return pe


@wrong("sinusoidal_encoding", "exponent|parenthes|precedence|frequenc")
def sinusoidal_operator_precedence(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    i2 = torch.arange(0, d_model, 2, dtype=torch.float32)
    theta = 1 / base**i2 / d_model  # meant 1 / base ** (i2 / d_model)
    angles = torch.arange(n_positions, dtype=torch.float32)[:, None] * theta
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@right("sinusoidal_encoding")
def sinusoidal_exp_log_form(n_positions, d_model, base=10000.0):
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got d_model={d_model}")
    position = torch.arange(n_positions, dtype=torch.float32).unsqueeze(1)
    div_term = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model)
    )
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


@right("sinusoidal_encoding")
def sinusoidal_stack_and_flatten(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"odd d_model: {d_model}")
    theta = 1.0 / base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.outer(torch.arange(n_positions, dtype=torch.float64), theta)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()


# =============================================================================================
# Exercise 2 — shift_matrix
# =============================================================================================


@wrong("shift_matrix", "sign|direction|transpose|backward|-k|minus")
def shift_matrix_rotates_backwards(k, d_model, base=10000.0):
    a = k * _theta(d_model, base, torch.float64)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(torch.cos(a))
    m[0::2, 1::2] = torch.diag(torch.sin(a))  # signs of the sines exchanged: M_{-k}
    m[1::2, 0::2] = torch.diag(-torch.sin(a))
    m[1::2, 1::2] = torch.diag(torch.cos(a))
    return m.float()


@wrong("shift_matrix", "2i|exponent|frequenc")
def shift_matrix_exponent_uses_i(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    a = k * theta
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(torch.cos(a))
    m[0::2, 1::2] = torch.diag(-torch.sin(a))
    m[1::2, 0::2] = torch.diag(torch.sin(a))
    m[1::2, 1::2] = torch.diag(torch.cos(a))
    return m.float()


@wrong("shift_matrix", "float32|dtype|float64|double")
def shift_matrix_returns_float64(k, d_model, base=10000.0):
    a = k * _theta(d_model, base, torch.float64)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(torch.cos(a))
    m[0::2, 1::2] = torch.diag(-torch.sin(a))
    m[1::2, 0::2] = torch.diag(torch.sin(a))
    m[1::2, 1::2] = torch.diag(torch.cos(a))
    return m  # forgot .float()


@wrong("shift_matrix", "diag|block|off-diagonal|outside|zero")
def shift_matrix_vectors_broadcast_without_diag(k, d_model, base=10000.0):
    a = k * _theta(d_model, base)
    m = torch.zeros(d_model, d_model)
    m[0::2, 0::2] = torch.cos(a)  # broadcasts over every row of the strided block
    m[0::2, 1::2] = -torch.sin(a)
    m[1::2, 0::2] = torch.sin(a)
    m[1::2, 1::2] = torch.cos(a)
    return m


@wrong("shift_matrix", "base")
def shift_matrix_ignores_base(k, d_model, base=10000.0):
    a = k * _theta(d_model, 10000.0, torch.float64)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(torch.cos(a))
    m[0::2, 1::2] = torch.diag(-torch.sin(a))
    m[1::2, 0::2] = torch.diag(torch.sin(a))
    m[1::2, 1::2] = torch.diag(torch.cos(a))
    return m.float()


@wrong("shift_matrix", "interleav|adjacent|2i, 2i+1|2i+1|half|halves")
def shift_matrix_pairs_i_with_i_plus_half(k, d_model, base=10000.0):
    h = d_model // 2
    a = k * _theta(d_model, base, torch.float64)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[:h, :h] = torch.diag(torch.cos(a))
    m[:h, h:] = torch.diag(-torch.sin(a))
    m[h:, :h] = torch.diag(torch.sin(a))
    m[h:, h:] = torch.diag(torch.cos(a))
    return m.float()


@wrong("shift_matrix", "sign|minus|orthogonal|rotation")
def shift_matrix_forgets_minus_sign(k, d_model, base=10000.0):
    a = k * _theta(d_model, base, torch.float64)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(torch.cos(a))
    m[0::2, 1::2] = torch.diag(torch.sin(a))
    m[1::2, 0::2] = torch.diag(torch.sin(a))
    m[1::2, 1::2] = torch.diag(torch.cos(a))
    return m.float()


@wrong("shift_matrix", "swap|exchang|interchang|on the diagonal")
def shift_matrix_cos_and_sin_exchanged(k, d_model, base=10000.0):
    # mixes up which entries take cos and which take sin
    a = k * _theta(d_model, base, torch.float64)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(torch.sin(a))
    m[0::2, 1::2] = torch.diag(-torch.cos(a))
    m[1::2, 0::2] = torch.diag(torch.cos(a))
    m[1::2, 1::2] = torch.diag(torch.sin(a))
    return m.float()


@right("shift_matrix")
def shift_matrix_block_diag(k, d_model, base=10000.0):
    blocks = []
    for i in range(d_model // 2):
        angle = k * base ** (-2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        blocks.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks).float()


# =============================================================================================
# Exercise 3 — offset_dot_product
# =============================================================================================


@wrong("offset_dot_product", "axis|dimension|dim=-1|dim -1|last dim|trailing")
def offset_sums_over_offsets(k, d_model, base=10000.0):
    angles = k[:, None].float() * _theta(d_model, base)
    return torch.cos(angles).sum(dim=0)  # sums the offsets away, keeps the frequencies


@wrong(
    "offset_dot_product",
    "any shape|scalar|0-d|2-d|unsqueeze|[..., None]|trailing|higher-dimensional",
)
def offset_only_for_1d_offsets(k, d_model, base=10000.0):
    angles = k[:, None].float() * _theta(d_model, base)  # (N, 1): breaks for scalars and 2-D k
    return torch.cos(angles).sum(dim=1)


@wrong("offset_dot_product", "normali|C/2|divid|mean|average")
def offset_normalised_by_pairs(k, d_model, base=10000.0):
    angles = k[..., None].float() * _theta(d_model, base)
    return torch.cos(angles).mean(dim=-1)  # the plot's p_t . p_s / (C/2), not the dot product


@wrong("offset_dot_product", "2i|exponent|frequenc")
def offset_exponent_uses_i(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(d_model // 2, dtype=torch.float32) / d_model)
    return torch.cos(k[..., None].float() * theta).sum(dim=-1)


@wrong("offset_dot_product", "float32|dtype|float64|double")
def offset_returns_float64(k, d_model, base=10000.0):
    theta = _theta(d_model, base, torch.float64)
    return torch.cos(k[..., None] * theta).sum(dim=-1)


@wrong("offset_dot_product", "C/2|pairs|frequenc|twice|number of terms")
def offset_one_frequency_per_channel(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(d_model, dtype=torch.float32) / d_model)  # C terms, not C/2
    return torch.cos(k[..., None].float() * theta).sum(dim=-1)


@wrong("offset_dot_product", "negative|wrap|index")
def offset_reads_an_encoding_table(k, d_model, base=10000.0):
    # builds encodings although the text says not to; negative offsets wrap around the table
    n = int(k.abs().max()) + 1
    angles = torch.arange(n, dtype=torch.float32)[:, None] * _theta(d_model, base)
    pe = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)
    return (pe[0] * pe[k]).sum(dim=-1)


@wrong("offset_dot_product", "base")
def offset_ignores_base(k, d_model, base=10000.0):
    return torch.cos(k[..., None].float() * _theta(d_model, 10000.0)).sum(dim=-1)


@wrong("offset_dot_product", "sin(|sine term|sin term|only cos|cosines only|sum of cos")
def offset_adds_sine_terms(k, d_model, base=10000.0):
    # expands p_t . p_s as sum of cos + sin of the offset angle
    angles = k[..., None].float() * _theta(d_model, base)
    return (torch.cos(angles) + torch.sin(angles)).sum(dim=-1)


@right("offset_dot_product")
def offset_einsum_with_ones(k, d_model, base=10000.0):
    theta = 1.0 / base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    cosines = torch.cos(k.to(torch.float64).unsqueeze(-1) * theta)
    return torch.einsum("...i,i->...", cosines, torch.ones_like(theta)).to(torch.float32)


# =============================================================================================
# Exercise 4 — apply_rope
# =============================================================================================


def _rope_angles(t, d, base, start=0):
    return torch.arange(start, start + t, dtype=torch.float32)[:, None] * _theta(d, base)


@wrong("apply_rope", "direction|sign|clockwise|counter|transpose|negative")
def rope_rotates_the_other_way(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    a = _rope_angles(t, d, base)
    cos, sin = a.cos(), a.sin()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * cos + x1 * sin  # the column-vector matrix applied to rows
    out[..., 1::2] = -x0 * sin + x1 * cos
    return out


@wrong("apply_rope", "interleav|adjacent|half|halves|2i, 2i+1|2i+1")
def rope_rotate_half_pairing(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    a = _rope_angles(t, d, base)
    cos, sin = a.cos(), a.sin()
    x0, x1 = x[..., : d // 2], x[..., d // 2 :]  # Hugging Face pairing: i with i + D/2
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)


@wrong("apply_rope", "2i|exponent|frequenc")
def rope_exponent_uses_i(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    theta = base ** (-torch.arange(d // 2, dtype=torch.float32) / d)
    a = torch.arange(t, dtype=torch.float32)[:, None] * theta
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "axis|batch|leading|dim -2|dim=-2|second-to-last|second to last")
def rope_positions_along_first_axis(x, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    t = x.shape[0]  # fine for (T, D), wrong once there is a batch or head axis
    a = _rope_angles(t, d, base).view(t, *([1] * (x.dim() - 2)), d // 2)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "in place|in-place|modif|input|argument|new tensor")
def rope_writes_into_the_input(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    a = _rope_angles(t, d, base)
    x0, x1 = x[..., 0::2].clone(), x[..., 1::2].clone()
    x[..., 0::2] = x0 * a.cos() - x1 * a.sin()  # overwrites the caller's queries
    x[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return x


@wrong("apply_rope", "updated|overwrit|original|already rotated|before")
def rope_uses_updated_even_channels(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    a = _rope_angles(t, d, base)
    out = x.clone()
    out[..., 0::2] = out[..., 0::2] * a.cos() - out[..., 1::2] * a.sin()
    out[..., 1::2] = out[..., 0::2] * a.sin() + out[..., 1::2] * a.cos()  # reads the new evens
    return out


@wrong("apply_rope", "ValueError|odd")
def rope_no_check_for_odd_width(x, base=10000.0):
    t, d = x.shape[-2:]
    a = _rope_angles(t, d, base)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "dtype|float64|double|float32")
def rope_casts_to_float32(x, base=10000.0):
    x = x.float()
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    a = _rope_angles(t, d, base)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "position 0|start|off by one|off-by-one|from 0|shifted")
def rope_positions_from_one(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    a = _rope_angles(t, d, base, start=1)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "base")
def rope_ignores_base(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    a = _rope_angles(t, d, 10000.0)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * a.cos() - x1 * a.sin()
    out[..., 1::2] = x0 * a.sin() + x1 * a.cos()
    return out


@wrong("apply_rope", "interleav|concat|order|stack")
def rope_concatenates_even_and_odd_results(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head width must be even, got {d}")
    a = _rope_angles(t, d, base)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    # right numbers, written back as [all evens | all odds] instead of interleaved
    return torch.cat([x0 * a.cos() - x1 * a.sin(), x0 * a.sin() + x1 * a.cos()], dim=-1)


@right("apply_rope")
def rope_complex_multiplication(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"D must be even, got D={d}")
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(t, dtype=torch.float64)[:, None] * theta
    rot = torch.polar(torch.ones_like(angles), angles)  # e^{i t theta}
    z = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * rot).flatten(-2).to(x.dtype)


@right("apply_rope")
def rope_block_rotation_matrices(x, base=10000.0):
    t, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"odd head width {d}")
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    rows = []
    for pos in range(t):
        a = pos * theta
        r = torch.zeros(d, d, dtype=x.dtype)
        r[0::2, 0::2] = torch.diag(torch.cos(a)).to(x.dtype)
        r[0::2, 1::2] = torch.diag(torch.sin(a)).to(x.dtype)
        r[1::2, 0::2] = torch.diag(-torch.sin(a)).to(x.dtype)
        r[1::2, 1::2] = torch.diag(torch.cos(a)).to(x.dtype)
        rows.append(x[..., pos, :] @ r)  # row vector times R_t
    return torch.stack(rows, dim=-2)
