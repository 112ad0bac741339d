"""Attention (softmax, scaled dot-product, single-head self-attention) against PyTorch's own
functions, forward and backward, and the properties it guarantees."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_lab import (
    Block,
    MultiHeadAttention,
    SelfAttention,
    causal_mask,
    padding_mask_from_lengths,
    softmax,
)
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
