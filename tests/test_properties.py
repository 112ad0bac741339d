"""Properties that teach: what attention, masks and positional encodings guarantee."""

import math

import pytest
import torch

from transformer_lab import (
    Block,
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    RotaryEmbedding,
    SelfAttention,
    causal_mask,
    combine_masks,
    padding_mask_from_ids,
    padding_mask_from_lengths,
    scaled_dot_product_attention,
    sinusoidal_encoding,
    sinusoidal_encoding_2d,
    sinusoidal_shift_matrix,
)


def test_worked_example_three_tokens_identity_weights():
    X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    attn = SelfAttention(2)
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
            proj.weight.copy_(torch.eye(2))
    y, w = attn(X, need_weights=True)
    torch.testing.assert_close(w[0], torch.tensor([0.401, 0.198, 0.401]), atol=5e-4, rtol=0)
    torch.testing.assert_close(y[0], torch.tensor([0.802, 0.599]), atol=5e-4, rtol=0)
    # The exact values: scores [1, 0, 1] / sqrt(2).
    e = math.exp(1 / math.sqrt(2))
    torch.testing.assert_close(w[0], torch.tensor([e, 1.0, e]) / (2 * e + 1), atol=1e-6, rtol=0)


@pytest.mark.parametrize("module", ["self_attention", "multi_head", "block"])
def test_without_positions_permuting_inputs_permutes_outputs(module):
    torch.manual_seed(0)
    layer = {
        "self_attention": lambda: SelfAttention(8),
        "multi_head": lambda: MultiHeadAttention(8, 2),
        "block": lambda: Block(8, 2, 16),
    }[module]().eval()

    def run(x):
        out = layer(x)
        return out[0] if isinstance(out, tuple) else out

    x = torch.randn(2, 6, 8)
    perm = torch.randperm(6)
    torch.testing.assert_close(run(x[:, perm]), run(x)[:, perm], atol=1e-5, rtol=0)


def test_causal_mask_future_tokens_do_not_change_earlier_outputs():
    torch.manual_seed(0)
    block = Block(8, 2, 16).eval()
    x = torch.randn(1, 7, 8)
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 3, 8) * 10  # rewrite the future from position 4 on
    mask = causal_mask(7)
    before, after = block(x, mask=mask)[0], block(changed, mask=mask)[0]
    torch.testing.assert_close(before[:, :4], after[:, :4], atol=1e-6, rtol=0)
    assert not torch.allclose(before[:, 4:], after[:, 4:])
    # Without the mask the past does see the future: the test above can fail.
    assert not torch.allclose(block(x)[0][:, :4], block(changed)[0][:, :4])


def test_causal_mask_shape_and_diagonal():
    m = causal_mask(4)
    assert m.dtype == torch.bool and m.shape == (4, 4)
    assert m.diagonal().all() and not m[0, 1] and m[3, 0]
    assert causal_mask(2, 5).tolist() == [[True, True, True, True, False], [True] * 5]


def test_fully_padded_row_gives_no_nan_forward_or_backward():
    q = torch.randn(2, 3, 4, requires_grad=True)
    k = torch.randn(2, 3, 4, requires_grad=True)
    v = torch.randn(2, 3, 4, requires_grad=True)
    mask = padding_mask_from_lengths([3, 0], S=3)[:, 0]  # second sequence: all padding, (B, 1, S)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not w.isnan().any()
    assert (w[1] == 0).all() and (out[1] == 0).all()
    out.sum().backward()
    assert not q.grad.isnan().any() and not k.grad.isnan().any()
    mha = MultiHeadAttention(4, 2, fused=True)
    out, _ = mha(torch.randn(2, 3, 4), mask=padding_mask_from_lengths([3, 0], S=3))
    assert not out.isnan().any()


def test_padding_masks_from_lengths_and_ids_agree_and_combine():
    ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
    from_ids = padding_mask_from_ids(ids, pad_id=0)
    from_lengths = padding_mask_from_lengths([3, 2], S=4)
    assert from_ids.shape == (2, 1, 1, 4) and torch.equal(from_ids, from_lengths)
    both = combine_masks(causal_mask(4), None, from_ids)
    assert both.shape == (2, 1, 4, 4)
    assert both[1, 0, 3].tolist() == [True, True, False, False]
    assert combine_masks(None, None) is None


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
