"""Masks: one meaning everywhere (True = may attend), checked against Hugging Face's masks."""

import warnings

import pytest
import torch

from transformer_lab.masks import padding_mask_from_attention_mask


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
