"""MultiHeadAttention: one mask keyword pair (mask=, is_causal=), the mask validated once."""

import pytest
import torch

from transformer_lab import _validate, attention, heads
from transformer_lab.heads import KVCache, MultiHeadAttention
from transformer_lab.masks import causal_mask, padding_mask_from_lengths


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_the_mask_is_validated_once_per_call(monkeypatch, fused, need_weights):
    calls = []

    def counting(mask, shape):
        calls.append(tuple(shape))
        _validate.check_mask(mask, shape)

    monkeypatch.setattr(heads, "check_mask", counting)
    monkeypatch.setattr(attention, "check_mask", counting)
    mha = MultiHeadAttention(8, 2, fused=fused).eval()
    mha(torch.randn(2, 5, 8), mask=causal_mask(5), need_weights=need_weights)
    assert calls == [(2, 2, 5, 5)]


@pytest.mark.parametrize("fused", [False, True])
def test_is_causal_equals_the_causal_mask_with_and_without_padding(fused):
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, fused=fused).eval()
    x = torch.randn(2, 6, 8)
    pad = padding_mask_from_lengths([6, 3])  # (B, 1, 1, S)
    for mask in (None, pad):
        explicit = causal_mask(6) if mask is None else causal_mask(6) & mask
        torch.testing.assert_close(
            mha(x, mask=mask, is_causal=True)[0], mha(x, mask=explicit)[0], atol=1e-6, rtol=0
        )


def test_is_causal_with_a_cache_matches_the_full_sequence():
    torch.manual_seed(1)
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 7, 8)
    full, _ = mha(x, is_causal=True)
    cache = KVCache()
    first, _ = mha(x[:, :4], is_causal=True, cache=cache)  # a 4-token prompt, then one at a time
    rest = [mha(x[:, t : t + 1], is_causal=True, cache=cache)[0] for t in range(4, 7)]
    torch.testing.assert_close(torch.cat([first, *rest], dim=1), full, atol=1e-6, rtol=0)


def test_need_weights_returns_the_weights_and_none_otherwise():
    mha = MultiHeadAttention(8, 2).eval()
    out, w = mha(torch.randn(1, 3, 8), torch.randn(1, 4, 8), need_weights=True)
    assert out.shape == (1, 3, 8) and w.shape == (1, 2, 3, 4)
    assert mha(torch.randn(1, 3, 8))[1] is None
