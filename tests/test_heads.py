"""MultiHeadAttention against torch.nn.MultiheadAttention (weights copied across), the key/value
cache, and one mask keyword pair (mask=, is_causal=) validated once per call."""

import pytest
import torch

from transformer_lab import _validate, attention, heads
from transformer_lab.heads import KVCache, MultiHeadAttention
from transformer_lab.masks import causal_mask, padding_mask_from_lengths

ATOL = 1e-5  # float32 tolerance for every comparison against torch in this file


def _leaves(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g).requires_grad_() for s in shapes]


def _copy_into_torch_mha(ours: MultiHeadAttention, theirs: torch.nn.MultiheadAttention) -> None:
    with torch.no_grad():
        if theirs._qkv_same_embed_dim:
            theirs.in_proj_weight.copy_(
                torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
            )
        else:
            theirs.q_proj_weight.copy_(ours.q_proj.weight)
            theirs.k_proj_weight.copy_(ours.k_proj.weight)
            theirs.v_proj_weight.copy_(ours.v_proj.weight)
        if ours.q_proj.bias is not None:
            theirs.in_proj_bias.copy_(
                torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
            )
            theirs.out_proj.bias.copy_(ours.out_proj.bias)
        theirs.out_proj.weight.copy_(ours.out_proj.weight)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("kind", ["self", "cross"])
def test_multihead_matches_torch_module(kind, bias, fused):
    torch.manual_seed(0)
    B, T, S, C, H, kv_dim = 3, 5, 7, 16, 4, 12
    ours = MultiHeadAttention(
        C, H, bias=bias, kv_dim=kv_dim if kind == "cross" else None, fused=fused
    )
    theirs = torch.nn.MultiheadAttention(
        C,
        H,
        bias=bias,
        batch_first=True,
        kdim=kv_dim if kind == "cross" else None,
        vdim=kv_dim if kind == "cross" else None,
    )
    _copy_into_torch_mha(ours, theirs)
    lengths = [S, 3, 5] if kind == "cross" else [T, 2, 4]
    x = torch.randn(B, T, C, requires_grad=True)
    mem = torch.randn(B, S, kv_dim, requires_grad=True) if kind == "cross" else None
    keys = x if mem is None else mem
    ours_mask = padding_mask_from_lengths(lengths, keys.shape[1])  # (B, 1, 1, S), True = attend
    out_ours, w_ours = ours(x, mem, mask=ours_mask, need_weights=not fused)
    out_theirs, w_theirs = theirs(
        x, keys, keys, key_padding_mask=~ours_mask[:, 0, 0, :], average_attn_weights=False
    )
    torch.testing.assert_close(out_ours, out_theirs, atol=ATOL, rtol=0)
    if not fused:
        torch.testing.assert_close(w_ours, w_theirs, atol=ATOL, rtol=0)
    g = torch.randn_like(out_theirs)
    inputs = [x] if mem is None else [x, mem]
    params_ours = [ours.q_proj.weight, ours.out_proj.weight]
    params_theirs = [
        theirs.in_proj_weight if theirs._qkv_same_embed_dim else theirs.q_proj_weight,
        theirs.out_proj.weight,
    ]
    grads_ours = torch.autograd.grad(out_ours, inputs + params_ours, g)
    grads_theirs = torch.autograd.grad(out_theirs, inputs + params_theirs, g)
    for a, b in zip(grads_ours[: len(inputs)], grads_theirs[: len(inputs)]):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    C_ = C
    q_grad_theirs = grads_theirs[len(inputs)][:C_]  # torch packs W_q, W_k, W_v: take W_q's rows
    torch.testing.assert_close(grads_ours[len(inputs)], q_grad_theirs, atol=ATOL, rtol=0)
    torch.testing.assert_close(
        grads_ours[len(inputs) + 1], grads_theirs[len(inputs) + 1], atol=ATOL, rtol=0
    )


def test_multihead_with_causal_mask_matches_torch():
    torch.manual_seed(1)
    ours = MultiHeadAttention(12, 3)
    theirs = torch.nn.MultiheadAttention(12, 3, batch_first=True)
    _copy_into_torch_mha(ours, theirs)
    x = torch.randn(2, 6, 12)
    out_ours, _ = ours(x, mask=causal_mask(6))
    out_theirs, _ = theirs(x, x, x, attn_mask=~causal_mask(6))  # torch: True = NOT allowed
    torch.testing.assert_close(out_ours, out_theirs, atol=ATOL, rtol=0)


def test_kv_cache_gives_the_same_outputs_as_full_recomputation():
    torch.manual_seed(2)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 9, 16)
    full, _ = mha(x, mask=causal_mask(9))
    from transformer_lab import KVCache

    cache, steps = KVCache(), []
    prefix = 4
    out, _ = mha(x[:, :prefix], mask=causal_mask(prefix), cache=cache)
    steps.append(out)
    for t in range(prefix, 9):
        out, _ = mha(x[:, t : t + 1], mask=causal_mask(1, cache.length + 1), cache=cache)
        steps.append(out)
    assert cache.length == 9
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=0)


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
