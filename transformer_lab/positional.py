"""Positional information: attention alone cannot tell token order apart.

- Sinusoidal (Vaswani et al., 2017, sec. 3.5), interleaved columns:
      PE[t, 2i]   = sin(t / base^(2i / C))
      PE[t, 2i+1] = cos(t / base^(2i / C))
  Each pair (2i, 2i+1) is a clock hand turning at its own frequency, so p_{t+k} is a fixed
  rotation of p_t for every t (:func:`sinusoidal_shift_matrix`).
- Learned: one trainable vector per position, up to a fixed ``max_len``.
- Rotary, RoPE (Su et al., 2021): rotate each (2i, 2i+1) pair of queries and keys by the angle
  t * theta_i, so the score q_t . k_s depends only on the offset t - s.
- 2-D sinusoidal for a grid of image patches: half the channels encode the row, half the column.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer_lab._validate import check_tensor

__all__ = [
    "sinusoidal_encoding",
    "sinusoidal_shift_matrix",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "apply_rotary",
    "sinusoidal_encoding_2d",
]


def _check_even(d_model: int, what: str = "d_model") -> None:
    if d_model <= 0 or d_model % 2 != 0:
        raise ValueError(
            f"{what} must be a positive even number so sin and cos come in pairs, but received {what}={d_model}."
        )


def _frequencies(d_model: int, base: float) -> Tensor:
    """theta_i = base^(-2i / C) for i = 0 .. C/2 - 1, shape (C/2,)."""
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_encoding(n_positions: int, d_model: int, base: float = 10000.0) -> Tensor:
    """Fixed sinusoidal encodings, interleaved sin/cos.

    Args:
        n_positions: number of positions T.
        d_model: width C, even.
        base: the wavelength base (10000 in the paper).
    Returns:
        (T, C) float32.
    """
    _check_even(d_model)
    if n_positions <= 0:
        raise ValueError(f"n_positions must be positive, but received n_positions={n_positions}.")
    t = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (T, 1)
    angles = t * _frequencies(d_model, base)[None, :]  # (T, C/2)
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.float()


def sinusoidal_shift_matrix(k: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The fixed (C, C) matrix M with p_{t+k} = p_t M for every position t (row vectors).

    It is block-diagonal: one 2x2 rotation by k * theta_i per (sin, cos) pair.
    """
    _check_even(d_model)
    angle = k * _frequencies(d_model, base)  # (C/2,)
    c, s = torch.cos(angle), torch.sin(angle)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    # [sin(a+b), cos(a+b)] = [sin a, cos a] @ [[cos b, -sin b], [sin b, cos b]]
    m[0::2, 0::2] = torch.diag(c)
    m[0::2, 1::2] = torch.diag(-s)
    m[1::2, 0::2] = torch.diag(s)
    m[1::2, 1::2] = torch.diag(c)
    return m.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Adds fixed sinusoidal encodings to a (B, T, C) input (no parameters)."""

    def __init__(self, d_model: int, max_len: int = 4096, base: float = 10000.0) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (B, T, C) -> x + PE[offset : offset + T]."""
        check_tensor("x", x, dims=3, last_dim=self.d_model, last_dim_name="d_model")
        T = x.shape[1]
        if offset + T > self.max_len:
            raise ValueError(
                f"sequence reaches position {offset + T}, but the encoding table holds "
                f"max_len={self.max_len} positions."
            )
        return x + self.pe[offset : offset + T]


class LearnedPositionalEmbedding(nn.Module):
    """One trainable vector per position 0 .. max_len - 1 (as in GPT-2, BERT, ViT)."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)  # (max_len, C)

    def forward(self, T: int, offset: int = 0) -> Tensor:
        """Embeddings of positions offset .. offset + T - 1, shape (T, C)."""
        if isinstance(T, Tensor) or isinstance(offset, Tensor):
            raise TypeError(
                "a LearnedPositionalEmbedding is called with the number of positions, "
                "pos_emb(T, offset=0), unlike an nn.Embedding, but received a tensor; for given "
                "positions use the table's rows, pos_emb.weight[positions]."
            )
        if offset + T > self.max_len:
            raise ValueError(
                f"a learned position table has no entry past its length: the sequence needs "
                f"{offset + T} positions, but max_len={self.max_len}."
            )
        return self.weight[offset : offset + T]


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each (2i, 2i+1) feature pair of ``x`` by the angles whose cos/sin are given.

    Args:
        x: (..., T, D) queries or keys.
        cos, sin: (T, D/2).
    Returns:
        (..., T, D).
    """
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, D/2) each
    out = torch.empty_like(x)
    out[..., 0::2] = x_even * cos - x_odd * sin
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE) for queries and keys of head width D.

    Call it on q and k (..., T, D) before the dot product; the score between positions t and s
    then depends on t - s only. Values are not rotated.
    """

    def __init__(self, d_head: int, base: float = 10000.0) -> None:
        super().__init__()
        _check_even(d_head, "d_head")
        self.d_head = d_head
        self.register_buffer("inv_freq", _frequencies(d_head, base).float(), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (..., T, D) -> rotated (..., T, D), positions starting at ``offset``."""
        check_tensor("x", x, min_dims=2, last_dim=self.d_head, last_dim_name="d_head")
        T = x.shape[-2]
        t = torch.arange(offset, offset + T, device=x.device, dtype=torch.float32)
        angles = t[:, None] * self.inv_freq[None, :]  # (T, D/2)
        return apply_rotary(x, angles.cos().to(x.dtype), angles.sin().to(x.dtype))


def sinusoidal_encoding_2d(grid_h: int, grid_w: int, d_model: int, base: float = 10000.0) -> Tensor:
    """2-D sinusoidal encodings for a grid of patches, in row-major patch order.

    The first C/2 channels encode the patch's row, the last C/2 its column, each with the
    1-D formula at width C/2.

    Returns:
        (N, C) with N = grid_h * grid_w.
    """
    if d_model % 4 != 0:
        raise ValueError(
            f"2-D sinusoidal encodings need d_model divisible by 4 (half for rows, half for columns, "
            f"each in sin/cos pairs), but received d_model={d_model}."
        )
    rows = sinusoidal_encoding(grid_h, d_model // 2, base)  # (grid_h, C/2)
    cols = sinusoidal_encoding(grid_w, d_model // 2, base)  # (grid_w, C/2)
    grid = torch.cat(
        [
            rows[:, None, :].expand(grid_h, grid_w, d_model // 2),  # (h, w, C/2)
            cols[None, :, :].expand(grid_h, grid_w, d_model // 2),  # (h, w, C/2)
        ],
        dim=-1,
    )  # (h, w, C)
    return grid.reshape(grid_h * grid_w, d_model)  # (N, C)
