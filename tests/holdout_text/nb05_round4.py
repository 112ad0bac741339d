"""Holdout for notebook 05 (fourth round), written from
notebooks/05_transformer_block/05_transformer_block.ipynb alone (without reading the checks)."""

import math

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector
from transformer_lab import causal_mask

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "05")
right = collector(CORRECT, "05")
# Written after rounds 2 and 3 had tuned the checks, and measured once, never tuned on: the
# forecast for a new class. First shot 37 of 37 named, 0 generic, 0 misleading, 0 passed.
NAMED_AT_LEAST = 1.0


# --- Exercise 1: layer_norm(x, gain, bias, eps=1e-5) ----------------------------------------------


@wrong("layer_norm", "unbiased|biased|C - 1|C-1|Bessel|correction")
def layer_norm_unbiased_variance(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)  # default: divides by C - 1
    return gain * (x - mu) / torch.sqrt(var + eps) + bias


@wrong("layer_norm", "eps|epsilon|inside|square root|sqrt")
def layer_norm_eps_added_to_std(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    std = ((x - mu) ** 2).mean(dim=-1, keepdim=True).sqrt()
    return gain * (x - mu) / (std + eps) + bias


@wrong("layer_norm", "last dim|dimension|axis|per token|feature|over the sequence|dim=-1")
def layer_norm_over_tokens_and_features(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=(-2, -1), keepdim=True)
    var = ((x - mu) ** 2).mean(dim=(-2, -1), keepdim=True)
    return gain * (x - mu) / torch.sqrt(var + eps) + bias


@wrong("layer_norm", "last dim|dimension|axis|per token|feature|batch|dim=-1")
def layer_norm_over_batch(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=0, keepdim=True)
    var = x.var(dim=0, unbiased=False, keepdim=True)
    return gain * (x - mu) / torch.sqrt(var + eps) + bias


@wrong("layer_norm", "gain|bias|swap|scale|shift")
def layer_norm_gain_and_bias_swapped(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return bias * (x - mu) / torch.sqrt(var + eps) + gain


@wrong("layer_norm", "eps|epsilon")
def layer_norm_eps_hard_coded(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return gain * (x - mu) / torch.sqrt(var + 1e-5) + bias


@wrong("layer_norm", "in place|in-place|modif|mutat|input|overwr")
def layer_norm_subtracts_mean_in_place(x, gain, bias, eps=1e-5):
    x -= x.mean(dim=-1, keepdim=True)
    var = (x**2).mean(dim=-1, keepdim=True)
    return gain * x / torch.sqrt(var + eps) + bias


@right("layer_norm")
def layer_norm_rsqrt(x, gain, bias, eps=1e-5):
    centred = x - x.mean(dim=-1, keepdim=True)
    var = centred.pow(2).mean(dim=-1, keepdim=True)
    return centred * torch.rsqrt(var + eps) * gain + bias


# --- Exercise 2: mlp(x, w_1, b_1, w_2, b_2) -------------------------------------------------------


@wrong("mlp", "relu|gelu|activation")
def mlp_relu(x, w_1, b_1, w_2, b_2):
    return torch.relu(x @ w_1 + b_1) @ w_2 + b_2


@wrong("mlp", "tanh|approximat|exact|erf")
def mlp_tanh_gelu(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1 + b_1, approximate="tanh") @ w_2 + b_2


@wrong("mlp", "residual|skip|x +|input added|adds the input")
def mlp_adds_residual(x, w_1, b_1, w_2, b_2):
    return x + F.gelu(x @ w_1 + b_1) @ w_2 + b_2


@wrong("mlp", "b_1|bias|before|inside")
def mlp_first_bias_after_gelu(x, w_1, b_1, w_2, b_2):
    return (F.gelu(x @ w_1) + b_1) @ w_2 + b_2


@wrong("mlp", "activation|output|second|twice|after")
def mlp_gelu_on_output_too(x, w_1, b_1, w_2, b_2):
    return F.gelu(F.gelu(x @ w_1 + b_1) @ w_2 + b_2)


@wrong("mlp", "transpos|row vector|x @ w|F.linear|shape|orientation")
def mlp_with_f_linear(x, w_1, b_1, w_2, b_2):
    # F.linear computes x @ w.T: runs only when d_ff == C
    return F.linear(F.gelu(F.linear(x, w_1, b_1)), w_2, b_2)


@wrong("mlp", "shape|dimension|leading|batch|(..., C)|2-d|2d|3-d")
def mlp_only_for_three_dims(x, w_1, b_1, w_2, b_2):
    hidden = F.gelu(torch.einsum("btc,cf->btf", x, w_1) + b_1)
    return torch.einsum("btf,fc->btc", hidden, w_2) + b_2


@right("mlp")
def mlp_erf_by_hand(x, w_1, b_1, w_2, b_2):
    h = torch.matmul(x, w_1) + b_1
    h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
    return torch.matmul(h, w_2) + b_2


# --- Exercise 3: encoder_block(x, layer, norm_first, mask=None) -----------------------------------


@wrong("encoder_block", "pre-norm|post-norm|norm_first|placement|swap")
def encoder_norm_first_inverted(x, layer, norm_first, mask=None):
    if not norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("encoder_block", "key|value|normali|key_value")
def encoder_pre_norm_keys_from_raw_stream(x, layer, norm_first, mask=None):
    if norm_first:
        x = x + layer.self_attn(layer.self_attn_norm(x), x, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("encoder_block", "residual|skip|identity")
def encoder_no_residual_around_mlp(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(layer.mlp(x))


@wrong("encoder_block", "mask|padding")
def encoder_ignores_mask(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("encoder_block", "residual|stream|normalised|normalized|raw|un-normalised")
def encoder_pre_norm_residual_from_normalised(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = h + layer.self_attn(h, h, mask)
        h = layer.mlp_norm(x)
        return h + layer.mlp(h)
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("encoder_block", "mlp_norm|second norm|which norm|same norm|both")
def encoder_one_norm_for_both(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return x + layer.mlp(layer.self_attn_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.self_attn_norm(x + layer.mlp(x))


@wrong("encoder_block", "order|sequential|parallel|mlp input|attention output|after the attention")
def encoder_post_norm_mlp_reads_block_input(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    attended = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(attended + layer.mlp(x))


@right("encoder_block")
def encoder_sublayer_helper(x, layer, norm_first, mask=None):
    def residual(stream, branch, norm):
        return stream + branch(norm(stream)) if norm_first else norm(stream + branch(stream))

    x = residual(x, lambda h: layer.self_attn(h, h, mask), layer.self_attn_norm)
    return residual(x, layer.mlp, layer.mlp_norm)


# --- Exercise 4: decoder_block(x, memory, layer, norm_first, memory_mask=None) --------------------


def _encoder_style(x, layer, norm_first, self_mask):
    """Masked self-attention with residual + norm (shared by the decoder mistakes below)."""
    if norm_first:
        h = layer.self_attn_norm(x)
        return x + layer.self_attn(h, h, self_mask)
    return layer.self_attn_norm(x + layer.self_attn(x, x, self_mask))


def _cross_then_mlp(x, memory, layer, norm_first, memory_mask):
    if norm_first:
        x = x + layer.cross_attn(layer.cross_attn_norm(x), memory, memory_mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, memory, memory_mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("decoder_block", "causal|future|later|peek")
def decoder_without_causal_mask(x, memory, layer, norm_first, memory_mask=None):
    x = _encoder_style(x, layer, norm_first, None)
    return _cross_then_mlp(x, memory, layer, norm_first, memory_mask)


@wrong("decoder_block", "causal|future|triang|invert|later|peek")
def decoder_upper_triangular_mask(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool).triu()
    x = _encoder_style(x, layer, norm_first, mask)
    return _cross_then_mlp(x, memory, layer, norm_first, memory_mask)


@wrong("decoder_block", "memory|encoder|key|value|source")
def decoder_cross_attends_to_itself(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    x = _encoder_style(x, layer, norm_first, causal_mask(T))
    if norm_first:
        h = layer.cross_attn_norm(x)
        x = x + layer.cross_attn(h, h)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, x))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("decoder_block", "memory|normali|encoder")
def decoder_pre_norm_normalises_memory(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    x = _encoder_style(x, layer, norm_first, causal_mask(T))
    if norm_first:
        x = x + layer.cross_attn(
            layer.cross_attn_norm(x), layer.cross_attn_norm(memory), memory_mask
        )
        return x + layer.mlp(layer.mlp_norm(x))
    return _cross_then_mlp(x, memory, layer, norm_first, memory_mask)


@wrong("decoder_block", "memory_mask|padding|source")
def decoder_ignores_memory_mask(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    x = _encoder_style(x, layer, norm_first, causal_mask(T))
    return _cross_then_mlp(x, memory, layer, norm_first, None)


@wrong("decoder_block", "order|first|before|sublayer")
def decoder_cross_attention_first(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    if norm_first:
        x = x + layer.cross_attn(layer.cross_attn_norm(x), memory, memory_mask)
    else:
        x = layer.cross_attn_norm(x + layer.cross_attn(x, memory, memory_mask))
    x = _encoder_style(x, layer, norm_first, causal_mask(T))
    return layer.mlp_norm(x + layer.mlp(x)) if not norm_first else x + layer.mlp(layer.mlp_norm(x))


@wrong("decoder_block", "causal|length|size|shape")
def decoder_causal_mask_sized_by_source(x, memory, layer, norm_first, memory_mask=None):
    S = memory.shape[1]
    x = _encoder_style(x, layer, norm_first, causal_mask(S))
    return _cross_then_mlp(x, memory, layer, norm_first, memory_mask)


@right("decoder_block")
def decoder_table_of_sublayers(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    future_free = torch.arange(T)[None, :] <= torch.arange(T)[:, None]
    steps = [
        (lambda h: layer.self_attn(h, h, future_free), layer.self_attn_norm),
        (lambda h: layer.cross_attn(h, memory, memory_mask), layer.cross_attn_norm),
        (layer.mlp, layer.mlp_norm),
    ]
    for branch, norm in steps:
        x = x + branch(norm(x)) if norm_first else norm(x + branch(x))
    return x


# --- Exercise 5: count_parameters(config) ---------------------------------------------------------


def _tables(config):
    C = config["d_model"]
    return (config["vocab_size"] + config["max_len"] + config["n_segments"]) * C


@wrong("count_parameters", "bias")
def count_attention_without_biases(config):
    C, d_ff = config["d_model"], config["d_ff"]
    block = 4 * C * C + 2 * C * d_ff + d_ff + C + 4 * C
    if config["cross_attention"]:
        block += 4 * C * C + 2 * C
    return _tables(config) + config["n_layers"] * block + 2 * C


@wrong("count_parameters", "head")
def count_per_head(config):
    C, d_ff, H = config["d_model"], config["d_ff"], config["n_heads"]
    block = H * 4 * (C * C + C) + 2 * C * d_ff + d_ff + C + 4 * C
    if config["cross_attention"]:
        block += H * 4 * (C * C + C) + 2 * C
    return _tables(config) + config["n_layers"] * block + 2 * C


@wrong("count_parameters", "final|extra|last|embedding norm|layer norm|2C|2 C")
def count_without_extra_norm(config):
    C, d_ff = config["d_model"], config["d_ff"]
    block = 4 * (C * C + C) + 2 * C * d_ff + d_ff + C + 4 * C
    if config["cross_attention"]:
        block += 4 * (C * C + C) + 2 * C
    return _tables(config) + config["n_layers"] * block


@wrong("count_parameters", "gain|layer norm|norms")
def count_norms_gain_only(config):
    C, d_ff = config["d_model"], config["d_ff"]
    block = 4 * (C * C + C) + 2 * C * d_ff + d_ff + C + 2 * C
    if config["cross_attention"]:
        block += 4 * (C * C + C) + C
    return _tables(config) + config["n_layers"] * block + C


@wrong("count_parameters", "cross")
def count_ignores_cross_attention(config):
    C, d_ff = config["d_model"], config["d_ff"]
    block = 4 * (C * C + C) + 2 * C * d_ff + d_ff + C + 4 * C
    return _tables(config) + config["n_layers"] * block + 2 * C


@wrong("count_parameters", "cross", "norm")
def count_cross_attention_without_its_norm(config):
    C, d_ff = config["d_model"], config["d_ff"]
    block = 4 * (C * C + C) + 2 * C * d_ff + d_ff + C + 4 * C
    if config["cross_attention"]:
        block += 4 * (C * C + C)
    return _tables(config) + config["n_layers"] * block + 2 * C


@wrong("count_parameters", "d_ff|feed-forward|feedforward|mlp|hidden|4C|4 C")
def count_assumes_d_ff_4c(config):
    C = config["d_model"]
    d_ff = 4 * C
    block = 4 * (C * C + C) + 2 * C * d_ff + d_ff + C + 4 * C
    if config["cross_attention"]:
        block += 4 * (C * C + C) + 2 * C
    return _tables(config) + config["n_layers"] * block + 2 * C


@wrong("count_parameters", "segment")
def count_without_segment_table(config):
    C, d_ff = config["d_model"], config["d_ff"]
    block = 4 * (C * C + C) + 2 * C * d_ff + d_ff + C + 4 * C
    if config["cross_attention"]:
        block += 4 * (C * C + C) + 2 * C
    return (config["vocab_size"] + config["max_len"]) * C + config["n_layers"] * block + 2 * C


@wrong("count_parameters", "int|integer|float|type")
def count_with_float_powers(config):
    C, d_ff = config["d_model"], config["d_ff"]
    block = 4 * (math.pow(C, 2) + C) + 2 * C * d_ff + d_ff + C + 4 * C
    if config["cross_attention"]:
        block += 4 * (math.pow(C, 2) + C) + 2 * C
    return _tables(config) + config["n_layers"] * block + 2 * C


@right("count_parameters")
def count_by_listing_shapes(config):
    C, d_ff, V = config["d_model"], config["d_ff"], config["vocab_size"]
    attention = [(C, C), (C,)] * 4
    shapes = attention + [(C, d_ff), (d_ff,), (d_ff, C), (C,)] + [(C,)] * 4
    if config["cross_attention"]:
        shapes += attention + [(C,), (C,)]
    per_block = sum(math.prod(s) for s in shapes)
    tables = [(V, C), (config["max_len"], C), (config["n_segments"], C)]
    return sum(math.prod(s) for s in tables) + config["n_layers"] * per_block + 2 * C
