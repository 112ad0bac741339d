"""Layer norm and the Block (encoder and decoder forms) against torch.nn, weights copied across."""

import pytest
import torch
from torch import nn

from transformer_lab import (
    Block,
    BlockWeights,
    LayerNorm,
    causal_mask,
    combine_masks,
    padding_mask_from_lengths,
)
from transformer_lab.heads import MultiHeadAttention

ATOL = 1e-5  # float32 tolerance for every comparison in this file


def _copy_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    theirs.in_proj_weight.copy_(
        torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
    )
    theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    theirs.out_proj.weight.copy_(ours.out_proj.weight)
    theirs.out_proj.bias.copy_(ours.out_proj.bias)


def _copy_norm(ours: LayerNorm, theirs: nn.LayerNorm) -> None:
    theirs.weight.copy_(ours.weight)
    theirs.bias.copy_(ours.bias)


def _randomise(module: nn.Module, seed: int) -> None:
    """Give every parameter (norm gains and biases too) a random value so copies are tested."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)


def _assert_grads_match(ours_out, theirs_out, ours_params, theirs_params, inputs):
    g = torch.randn_like(theirs_out)
    a = torch.autograd.grad(ours_out, inputs + ours_params, g)
    b = torch.autograd.grad(theirs_out, inputs + theirs_params, g)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, atol=ATOL, rtol=0)


def test_layer_norm_matches_torch():
    torch.manual_seed(0)
    ours, theirs = LayerNorm(10), nn.LayerNorm(10)
    _randomise(ours, 1)
    with torch.no_grad():
        _copy_norm(ours, theirs)
    x = torch.randn(4, 6, 10, requires_grad=True) * 3 + 2
    torch.testing.assert_close(ours(x), theirs(x), atol=ATOL, rtol=0)
    _assert_grads_match(
        ours(x), theirs(x), [ours.weight, ours.bias], [theirs.weight, theirs.bias], [x]
    )


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_matches_torch(norm_first, activation):
    torch.manual_seed(0)
    C, H, F = 16, 4, 40
    ours = Block(C, H, F, activation=activation, norm_first=norm_first).eval()
    theirs = nn.TransformerEncoderLayer(
        C, H, F, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    ).eval()
    _randomise(ours, 3)
    with torch.no_grad():
        _copy_mha(ours.self_attn, theirs.self_attn)
        theirs.linear1.load_state_dict(ours.mlp.fc1.state_dict())
        theirs.linear2.load_state_dict(ours.mlp.fc2.state_dict())
        _copy_norm(ours.self_attn_norm, theirs.norm1)
        _copy_norm(ours.mlp_norm, theirs.norm2)
    x = torch.randn(3, 7, C, requires_grad=True)
    mask = padding_mask_from_lengths([7, 4, 6])  # (B, 1, 1, S)
    out_ours, weights = ours(x, mask=mask)
    assert weights is None  # only on request
    # torch's fast path is skipped when gradients are needed, so this is its reference math.
    out_theirs = theirs(x, src_key_padding_mask=~mask[:, 0, 0, :])
    torch.testing.assert_close(out_ours, out_theirs, atol=ATOL, rtol=0)
    _assert_grads_match(
        out_ours,
        out_theirs,
        [ours.mlp.fc1.weight, ours.mlp_norm.weight],
        [theirs.linear1.weight, theirs.norm2.weight],
        [x],
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_matches_torch(norm_first):
    torch.manual_seed(0)
    C, H, F = 16, 4, 32
    ours = Block(C, H, F, activation="relu", norm_first=norm_first, cross_attention=True).eval()
    theirs = nn.TransformerDecoderLayer(
        C, H, F, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    _randomise(ours, 4)
    with torch.no_grad():
        _copy_mha(ours.self_attn, theirs.self_attn)
        _copy_mha(ours.cross_attn, theirs.multihead_attn)
        theirs.linear1.load_state_dict(ours.mlp.fc1.state_dict())
        theirs.linear2.load_state_dict(ours.mlp.fc2.state_dict())
        _copy_norm(ours.self_attn_norm, theirs.norm1)
        _copy_norm(ours.cross_attn_norm, theirs.norm2)
        _copy_norm(ours.mlp_norm, theirs.norm3)
    T, S = 6, 9
    x = torch.randn(2, T, C, requires_grad=True)
    memory = torch.randn(2, S, C, requires_grad=True)
    memory_mask = padding_mask_from_lengths([9, 5])  # (B, 1, 1, S)
    out_ours, _ = ours(x, is_causal=True, memory=memory, memory_mask=memory_mask)
    out_theirs = theirs(
        x, memory, tgt_mask=~causal_mask(T), memory_key_padding_mask=~memory_mask[:, 0, 0, :]
    )  # torch's boolean masks mean "NOT allowed"
    torch.testing.assert_close(out_ours, out_theirs, atol=ATOL, rtol=0)
    g = torch.randn_like(out_theirs)
    a = torch.autograd.grad(
        out_ours, [x, memory, ours.cross_attn.q_proj.weight, ours.mlp_norm.bias], g
    )
    b = torch.autograd.grad(
        out_theirs, [x, memory, theirs.multihead_attn.in_proj_weight, theirs.norm3.bias], g
    )
    torch.testing.assert_close(a[0], b[0], atol=ATOL, rtol=0)
    torch.testing.assert_close(a[1], b[1], atol=ATOL, rtol=0)
    torch.testing.assert_close(a[2], b[2][:C], atol=ATOL, rtol=0)  # torch packs W_q, W_k, W_v
    torch.testing.assert_close(a[3], b[3], atol=ATOL, rtol=0)


def test_block_returns_attention_weights_on_request():
    block = Block(8, 2, 16).eval()
    x = torch.randn(1, 5, 8)
    out, w = block(x, mask=causal_mask(5), need_weights=True)
    assert isinstance(w, BlockWeights) and w.cross_attn is None
    assert out.shape == (1, 5, 8) and w.self_attn.shape == (1, 2, 5, 5)
    assert (w.self_attn[0, :, 0, 1:] == 0).all()  # the causal mask reached the attention
    torch.testing.assert_close(out, block(x, mask=causal_mask(5))[0], atol=0, rtol=0)


def test_cross_attention_block_returns_both_weights():
    block = Block(8, 2, cross_attention=True).eval()
    x, memory = torch.randn(2, 5, 8), torch.randn(2, 3, 8)
    out, w = block(x, is_causal=True, memory=memory, need_weights=True)
    assert w.self_attn.shape == (2, 2, 5, 5) and w.cross_attn.shape == (2, 2, 5, 3)
    assert block.mlp.fc1.out_features == 32  # d_ff defaults to 4 * d_model


def test_is_causal_equals_the_explicit_causal_mask():
    torch.manual_seed(2)
    block = Block(8, 2).eval()
    _randomise(block, 7)
    x = torch.randn(2, 6, 8)
    padding = padding_mask_from_lengths([6, 4])  # (B, 1, 1, S)
    explicit, _ = block(x, mask=causal_mask(6) & padding)
    torch.testing.assert_close(block(x, mask=padding, is_causal=True)[0], explicit, atol=0, rtol=0)


def test_memory_must_match_the_blocks_kind():
    with pytest.raises(ValueError, match=r"expects an encoder memory.*received memory=None"):
        Block(8, 2, cross_attention=True)(torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match=r"expects no memory.*received memory=\(1, 3, 8\)"):
        Block(8, 2)(torch.randn(1, 3, 8), memory=torch.randn(1, 3, 8))


@pytest.mark.parametrize("mask", [None, "padding"])
def test_fused_layer_norm_and_causal_fast_path_match_the_explicit_path(mask):
    torch.manual_seed(5)
    explicit = Block(16, 4, 32, fused=False).eval()
    fused = Block(16, 4, 32, fused=True).eval()
    _randomise(explicit, 6)
    fused.load_state_dict(explicit.state_dict())
    assert fused.self_attn_norm.fused and not explicit.self_attn_norm.fused
    x = torch.randn(2, 7, 16)
    padding = padding_mask_from_lengths([7, 5]) if mask else None
    reference, _ = explicit(x, mask=combine_masks(causal_mask(7), padding))
    torch.testing.assert_close(
        fused(x, mask=combine_masks(causal_mask(7), padding))[0], reference, atol=ATOL, rtol=0
    )
    torch.testing.assert_close(
        fused(x, mask=padding, is_causal=True)[0], reference, atol=ATOL, rtol=0
    )
