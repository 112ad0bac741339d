"""Masks: one meaning everywhere (True = may attend), checked against Hugging Face's masks."""

import warnings

import pytest
import torch

from transformer_lab import Block, MultiHeadAttention, scaled_dot_product_attention
from transformer_lab.masks import (
    causal_mask,
    combine_masks,
    padding_mask_from_attention_mask,
    padding_mask_from_ids,
    padding_mask_from_lengths,
)


def test_causal_mask_shape_and_diagonal():
    m = causal_mask(4)
    assert m.dtype == torch.bool and m.shape == (4, 4)
    assert m.diagonal().all() and not m[0, 1] and m[3, 0]
    assert causal_mask(2, 5).tolist() == [[True, True, True, True, False], [True] * 5]


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


@pytest.mark.parametrize("dtype", [torch.long, torch.bool, torch.float32])
def test_padding_mask_from_attention_mask_matches_hugging_face(dtype):
    transformers = pytest.importorskip("transformers")
    del transformers
    from transformers.modeling_attn_mask_utils import _prepare_4d_attention_mask

    attention_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    ours = padding_mask_from_attention_mask(attention_mask.to(dtype))
    assert ours.shape == (3, 1, 1, 5) and ours.dtype == torch.bool
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # HF deprecates the helper, not the math
        additive = _prepare_4d_attention_mask(attention_mask, torch.float32, tgt_len=4)
    # HF adds 0 where a query may attend and the most negative float elsewhere: (B, 1, T, S).
    assert torch.equal(ours.expand(3, 1, 4, 5), additive == 0)


def test_padding_mask_from_attention_mask_rejects_other_values():
    with pytest.raises(
        ValueError, match=r"1 at real tokens and 0 at padding, but received the value 2"
    ):
        padding_mask_from_attention_mask(torch.tensor([[1, 2, 0]]))
    with pytest.raises(ValueError, match=r"must have 2 dimensions, but received shape \(3,\)"):
        padding_mask_from_attention_mask(torch.tensor([1, 1, 0]))
