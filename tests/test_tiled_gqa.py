"""Attention at scale, against PyTorch's own: tiled attention with an online softmax, grouped-query
attention, the sliding-window mask and the key/value cache's size."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer_lab import masks
from transformer_lab.gqa import grouped_query_attention, kv_cache_bytes
from transformer_lab.tiled import merge_softmax_stats, tiled_attention


@pytest.mark.parametrize("block_size", [1, 3, 16, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_equals_torch_sdpa(block_size, causal):
    g = torch.Generator().manual_seed(block_size)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g) for n in (37, 37, 37))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    got = tiled_attention(q, k, v, is_causal=causal, block_size=block_size)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_tiled_with_a_padding_mask_and_fully_masked_rows():
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(2, 5, 4, generator=g),
        torch.randn(2, 9, 4, generator=g),
        torch.randn(2, 9, 6, generator=g),
    )
    mask = torch.rand(2, 5, 9, generator=g) > 0.5
    mask[0, 2] = False  # a query with nothing to attend to
    got = tiled_attention(q, k, v, mask=mask, block_size=4)
    assert torch.equal(got[0, 2], torch.zeros(6)), "a fully masked row gives zeros, not NaN"
    keep = mask.any(-1)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(got[keep], expected[keep], atol=1e-5, rtol=1e-5)


def test_tiled_causal_with_a_cache_offset_matches_the_mask():
    g = torch.Generator().manual_seed(1)
    q, k, v = (
        torch.randn(3, 4, generator=g),
        torch.randn(7, 4, generator=g),
        torch.randn(7, 4, generator=g),
    )
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=masks.causal_mask(3, 7))
    torch.testing.assert_close(tiled_attention(q, k, v, is_causal=True, block_size=2), expected)


def test_merging_statistics_is_associative_with_empty_sets():
    g = torch.Generator().manual_seed(2)
    s, v = torch.randn(4, 10, generator=g), torch.randn(10, 3, generator=g)

    def stats(cols):
        m = s[:, cols].amax(-1, keepdim=True)
        p = torch.exp(s[:, cols] - m)
        return m, p.sum(-1, keepdim=True), p @ v[cols]

    empty = (torch.full((4, 1), float("-inf")), torch.zeros(4, 1), torch.zeros(4, 3))
    m, l, o = merge_softmax_stats(*empty, *stats(slice(0, 6)))  # noqa: E741
    m, l, o = merge_softmax_stats(m, l, o, *stats(slice(6, 10)))  # noqa: E741
    torch.testing.assert_close(o / l, torch.softmax(s, -1) @ v)


def test_tiled_rejects_bad_input_in_one_sentence():
    q = torch.randn(3, 4)
    with pytest.raises(ValueError, match="block_size"):
        tiled_attention(q, q, q, block_size=0)
    with pytest.raises(ValueError, match="last dimension"):
        tiled_attention(q, torch.randn(3, 5), q)


@pytest.mark.parametrize("H, H_kv", [(8, 8), (8, 2), (6, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_equals_torch_enable_gqa(H, H_kv, causal):
    g = torch.Generator().manual_seed(H + H_kv)
    q = torch.randn(2, H, 6, 4, generator=g)
    k, v = torch.randn(2, H_kv, 6, 4, generator=g), torch.randn(2, H_kv, 6, 4, generator=g)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(grouped_query_attention(q, k, v, is_causal=causal), expected)


def test_gqa_rejects_head_counts_that_do_not_divide():
    with pytest.raises(ValueError, match="multiple"):
        grouped_query_attention(
            torch.randn(1, 6, 2, 4), torch.randn(1, 4, 2, 4), torch.randn(1, 4, 2, 4)
        )


def test_kv_cache_bytes_llama_like():
    # Llama-2-70B: 80 layers, 8 key/value heads of 128, fp16: 320 KiB per token.
    assert kv_cache_bytes(80, 8, 128, 1) == 327_680
    assert kv_cache_bytes(80, 64, 128, 4096) == 8 * kv_cache_bytes(80, 8, 128, 4096)


def test_sliding_window_mask():
    m = masks.sliding_window_mask(6, 3)
    assert m[5].tolist() == [False, False, False, True, True, True]
    assert torch.equal(masks.sliding_window_mask(6, 6), masks.causal_mask(6))
    with pytest.raises(ValueError, match="window"):
        masks.sliding_window_mask(4, 0)
