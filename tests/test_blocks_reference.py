"""Layer norm and the encoder/decoder blocks against torch.nn, weights copied across."""

import pytest
import torch
from torch import nn

from transformer_lab import (
    DecoderBlock,
    EncoderBlock,
    LayerNorm,
    causal_mask,
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
    ours = EncoderBlock(C, H, F, activation=activation, norm_first=norm_first).eval()
    theirs = nn.TransformerEncoderLayer(
        C, H, F, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    ).eval()
    _randomise(ours, 3)
    with torch.no_grad():
        _copy_mha(ours.self_attn, theirs.self_attn)
        theirs.linear1.load_state_dict(ours.ffn.fc1.state_dict())
        theirs.linear2.load_state_dict(ours.ffn.fc2.state_dict())
        _copy_norm(ours.norm1, theirs.norm1)
        _copy_norm(ours.norm2, theirs.norm2)
    x = torch.randn(3, 7, C, requires_grad=True)
    mask = padding_mask_from_lengths([7, 4, 6])  # (B, 1, 1, S)
    out_ours = ours(x, mask=mask)
    # torch's fast path is skipped when gradients are needed, so this is its reference math.
    out_theirs = theirs(x, src_key_padding_mask=~mask[:, 0, 0, :])
    torch.testing.assert_close(out_ours, out_theirs, atol=ATOL, rtol=0)
    _assert_grads_match(
        out_ours,
        out_theirs,
        [ours.ffn.fc1.weight, ours.norm2.weight],
        [theirs.linear1.weight, theirs.norm2.weight],
        [x],
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_matches_torch(norm_first):
    torch.manual_seed(0)
    C, H, F = 16, 4, 32
    ours = DecoderBlock(C, H, F, activation="relu", norm_first=norm_first).eval()
    theirs = nn.TransformerDecoderLayer(
        C, H, F, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    _randomise(ours, 4)
    with torch.no_grad():
        _copy_mha(ours.self_attn, theirs.self_attn)
        _copy_mha(ours.cross_attn, theirs.multihead_attn)
        theirs.linear1.load_state_dict(ours.ffn.fc1.state_dict())
        theirs.linear2.load_state_dict(ours.ffn.fc2.state_dict())
        for i in (1, 2, 3):
            _copy_norm(getattr(ours, f"norm{i}"), getattr(theirs, f"norm{i}"))
    T, S = 6, 9
    x = torch.randn(2, T, C, requires_grad=True)
    memory = torch.randn(2, S, C, requires_grad=True)
    memory_mask = padding_mask_from_lengths([9, 5])  # (B, 1, 1, S)
    out_ours = ours(x, memory, self_mask=causal_mask(T), memory_mask=memory_mask)
    out_theirs = theirs(
        x, memory, tgt_mask=~causal_mask(T), memory_key_padding_mask=~memory_mask[:, 0, 0, :]
    )  # torch's boolean masks mean "NOT allowed"
    torch.testing.assert_close(out_ours, out_theirs, atol=ATOL, rtol=0)
    g = torch.randn_like(out_theirs)
    a = torch.autograd.grad(
        out_ours, [x, memory, ours.cross_attn.q_proj.weight, ours.norm3.bias], g
    )
    b = torch.autograd.grad(
        out_theirs, [x, memory, theirs.multihead_attn.in_proj_weight, theirs.norm3.bias], g
    )
    torch.testing.assert_close(a[0], b[0], atol=ATOL, rtol=0)
    torch.testing.assert_close(a[1], b[1], atol=ATOL, rtol=0)
    torch.testing.assert_close(a[2], b[2][:C], atol=ATOL, rtol=0)  # torch packs W_q, W_k, W_v
    torch.testing.assert_close(a[3], b[3], atol=ATOL, rtol=0)


def test_encoder_block_returns_attention_weights_on_request():
    block = EncoderBlock(8, 2, 16).eval()
    x = torch.randn(1, 5, 8)
    out, w = block(x, mask=causal_mask(5), need_weights=True)
    assert out.shape == (1, 5, 8) and w.shape == (1, 2, 5, 5)
    torch.testing.assert_close(out, block(x, mask=causal_mask(5)), atol=0, rtol=0)


def test_fused_layer_norm_and_causal_fast_path_match_the_explicit_path():
    torch.manual_seed(5)
    explicit = DecoderBlock(16, 4, 32, cross_attention=False, fused=False).eval()
    fused = DecoderBlock(16, 4, 32, cross_attention=False, fused=True).eval()
    _randomise(explicit, 6)
    fused.load_state_dict(explicit.state_dict())
    assert fused.norm1.fused and not explicit.norm1.fused
    x = torch.randn(2, 7, 16)
    reference = explicit(x, self_mask=causal_mask(7))
    torch.testing.assert_close(fused(x, self_mask=causal_mask(7)), reference, atol=ATOL, rtol=0)
    torch.testing.assert_close(
        fused(x, self_mask=causal_mask(7), is_causal=True), reference, atol=ATOL, rtol=0
    )
