"""Positional encodings: the sinusoidal formula, its fixed shift matrix, rotary scores that depend
only on the offset, 2-D encodings for patches, and learned tables."""

import math

import pytest
import torch

from transformer_lab import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    sinusoidal_encoding,
    sinusoidal_encoding_2d,
    sinusoidal_shift_matrix,
)


def test_sinusoidal_values_equal_the_formula():
    expected = torch.tensor(
        [
            [0, 1, 0, 1],
            [0.84, 0.54, 0.10, 1.00],
            [0.91, -0.42, 0.20, 0.98],
            [0.14, -0.99, 0.30, 0.96],
        ]
    )
    torch.testing.assert_close(sinusoidal_encoding(4, 4, base=100.0), expected, atol=0.005, rtol=0)
    pe = sinusoidal_encoding(50, 16)
    t, i = 37, 3
    assert pe[t, 2 * i].item() == pytest.approx(math.sin(t / 10000 ** (2 * i / 16)), abs=1e-6)
    assert pe[t, 2 * i + 1].item() == pytest.approx(math.cos(t / 10000 ** (2 * i / 16)), abs=1e-6)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_one_fixed_matrix_maps_p_t_to_p_t_plus_k_for_every_t(k):
    pe = sinusoidal_encoding(64, 12, base=100.0)
    m = sinusoidal_shift_matrix(k, 12, base=100.0)
    torch.testing.assert_close(pe[:-k] @ m, pe[k:], atol=1e-5, rtol=0)


def test_rotary_score_depends_only_on_the_offset():
    torch.manual_seed(0)
    rope = RotaryEmbedding(8)
    q, k = torch.randn(8), torch.randn(8)

    def score(t, s):
        return (rope(q[None, :], offset=t) @ rope(k[None, :], offset=s).T).item()

    for offset in (0, 3, -2):
        scores = [score(t, t - offset) for t in range(5, 30, 6)]
        assert max(scores) - min(scores) < 1e-4, scores
    assert abs(score(5, 5) - score(5, 8)) > 1e-3  # different offsets do differ
    # Rotation preserves length.
    torch.testing.assert_close(rope(q[None], offset=11).norm(), q.norm(), atol=1e-5, rtol=0)


def test_sinusoidal_2d_rows_and_columns():
    pe = sinusoidal_encoding_2d(3, 4, 8)
    assert pe.shape == (12, 8)
    row_part = sinusoidal_encoding(3, 4)
    col_part = sinusoidal_encoding(4, 4)
    torch.testing.assert_close(pe[1 * 4 + 2], torch.cat([row_part[1], col_part[2]]))


def test_learned_positions_return_the_table_rows():
    emb = LearnedPositionalEmbedding(10, 4)
    torch.testing.assert_close(emb(3, offset=2), emb.weight[2:5])
