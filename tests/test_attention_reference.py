"""Our attention against PyTorch's own implementations, forward and backward."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lab import MultiHeadAttention, causal_mask, padding_mask_from_lengths, softmax
from transformer_lab.attention import scaled_dot_product_attention

ATOL = 1e-5  # float32 tolerance for every comparison in this file


def _leaves(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g).requires_grad_() for s in shapes]


def _assert_same_forward_and_backward(ours, theirs, inputs):
    out_ours, out_theirs = ours(*inputs), theirs(*inputs)
    torch.testing.assert_close(out_ours, out_theirs, atol=ATOL, rtol=0)
    g = torch.randn_like(out_theirs)
    grads_ours = torch.autograd.grad(out_ours, inputs, g)
    grads_theirs = torch.autograd.grad(out_theirs, inputs, g)
    for a, b in zip(grads_ours, grads_theirs):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_softmax_matches_torch_forward_and_backward():
    (x,) = _leaves((4, 7, 9))
    _assert_same_forward_and_backward(
        lambda x: softmax(x, dim=-1), lambda x: torch.softmax(x, -1), [x]
    )
    _assert_same_forward_and_backward(
        lambda x: softmax(x, dim=1), lambda x: torch.softmax(x, 1), [x]
    )


def test_softmax_is_stable_for_huge_inputs():
    x = torch.tensor([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]])
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1), atol=ATOL, rtol=0)


CASES = {
    # name: (q shape, k shape, v shape, mask builder)
    "no_mask_2d": ((5, 8), (6, 8), (6, 3), lambda: None),
    "batched": ((3, 5, 8), (3, 7, 8), (3, 7, 4), lambda: None),
    "multi_head": ((2, 4, 6, 8), (2, 4, 6, 8), (2, 4, 6, 8), lambda: None),
    "causal": ((2, 4, 6, 8), (2, 4, 6, 8), (2, 4, 6, 8), lambda: causal_mask(6)),
    "causal_with_cache_offset": ((2, 3, 8), (2, 7, 8), (2, 7, 8), lambda: causal_mask(3, 7)),
    "padding": (
        (3, 4, 5, 8),
        (3, 4, 6, 8),
        (3, 4, 6, 8),
        lambda: padding_mask_from_lengths([6, 2, 4]),
    ),
    "causal_and_padding": (
        (3, 2, 6, 8),
        (3, 2, 6, 8),
        (3, 2, 6, 8),
        lambda: causal_mask(6) & padding_mask_from_lengths([6, 3, 5]),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_sdpa_matches_torch(name):
    q_shape, k_shape, v_shape, make_mask = CASES[name]
    q, k, v = _leaves(q_shape, k_shape, v_shape)
    mask = make_mask()
    _assert_same_forward_and_backward(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0],
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        [q, k, v],
    )


def test_sdpa_weights_are_probabilities_that_reproduce_the_output():
    q, k, v = _leaves((2, 5, 4), (2, 5, 4), (2, 5, 3))
    out, w = scaled_dot_product_attention(q, k, v, causal_mask(5))
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 5), atol=ATOL, rtol=0)
    assert (w.triu(diagonal=1) == 0).all()
    torch.testing.assert_close(out, w @ v, atol=ATOL, rtol=0)


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
