"""Holdout for notebook 05, written from notebooks/05_transformer_block/05_transformer_block.ipynb
alone (without reading the checks)."""

import math

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector
from transformer_lab import causal_mask

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "05")
right = collector(CORRECT, "05")
NAMED_AT_LEAST = 1.0  # measured: 58 of 58 named


# ---------------------------------------------------------------- layer_norm
def _ln(x, gain, bias, eps=1e-5, unbiased=False):
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=unbiased, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gain + bias


@wrong("layer_norm", "biased|unbiased|c-1|c - 1|bessel|variance")
def ln_unbiased_variance(x, gain, bias, eps=1e-5):
    return _ln(x, gain, bias, eps, unbiased=True)


@wrong("layer_norm", "eps|epsilon|sqrt|inside|outside")
def ln_eps_added_to_std(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    std = x.var(dim=-1, unbiased=False, keepdim=True).sqrt()
    return (x - mu) / (std + eps) * gain + bias


@wrong("layer_norm", "dim|axis|last|batch|per token|feature")
def ln_over_batch(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=0, keepdim=True)
    var = x.var(dim=0, unbiased=False, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gain + bias


@wrong("layer_norm", "gain|bias|swap|scale|shift")
def ln_gain_and_bias_swapped(x, gain, bias, eps=1e-5):
    return _ln(x, bias, gain, eps)


@wrong("layer_norm", "gain|bias|affine|scale|shift")
def ln_without_gain_and_bias(x, gain, bias, eps=1e-5):
    return _ln(x, 1.0, 0.0, eps)


@wrong("layer_norm", "sqrt|std|variance|standard deviation")
def ln_divides_by_variance(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return (x - mu) / (var + eps) * gain + bias


@wrong("layer_norm", "mean|center|centre|subtract")
def ln_without_mean(x, gain, bias, eps=1e-5):
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return x / torch.sqrt(var + eps) * gain + bias


@wrong("layer_norm", "eps|epsilon")
def ln_ignores_eps_argument(x, gain, bias, eps=1e-5):
    return _ln(x, gain, bias, 1e-5)


@wrong("layer_norm", "eps|epsilon|constant|nan|zero|divide")
def ln_without_eps(x, gain, bias, eps=1e-5):
    return _ln(x, gain, bias, 0.0)


@wrong("layer_norm", "per token|last|dim|global|whole|every")
def ln_global_statistics(x, gain, bias, eps=1e-5):
    return (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) * gain + bias


@wrong("layer_norm", "in place|in-place|modif|input|mutat")
def ln_in_place(x, gain, bias, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    x.sub_(mu).div_(torch.sqrt(var + eps))
    return x.mul_(gain).add_(bias)


@wrong("layer_norm", "rmsnorm|rms norm|root mean|mean|center|subtract")
def ln_rms_norm(x, gain, bias, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gain + bias


@right("layer_norm")
def ln_from_moments(x, gain, bias, eps=1e-5):
    mean = x.sum(-1, keepdim=True) / x.shape[-1]
    centred = x - mean
    var = (centred * centred).mean(-1, keepdim=True)
    return centred * torch.rsqrt(var + eps) * gain + bias


@right("layer_norm")
def ln_var_mean(x, gain, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return torch.addcmul(bias, (x - mean) / (var + eps).sqrt(), gain)


# ---------------------------------------------------------------- mlp
@wrong("mlp", "gelu|relu|activation")
def mlp_relu(x, w_1, b_1, w_2, b_2):
    return F.relu(x @ w_1 + b_1) @ w_2 + b_2


@wrong("mlp", "gelu|tanh|approx|exact")
def mlp_tanh_gelu(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1 + b_1, approximate="tanh") @ w_2 + b_2


@wrong("mlp", "residual|input|added|adding")
def mlp_with_residual(x, w_1, b_1, w_2, b_2):
    return x + F.gelu(x @ w_1 + b_1) @ w_2 + b_2


@wrong("mlp", "bias|b_2|b2")
def mlp_without_b2(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1 + b_1) @ w_2


@wrong("mlp", "bias|b_1|b1")
def mlp_without_b1(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1) @ w_2 + b_2


@wrong("mlp", "activation|gelu|second|output|twice")
def mlp_gelu_on_output_too(x, w_1, b_1, w_2, b_2):
    return F.gelu(F.gelu(x @ w_1 + b_1) @ w_2 + b_2)


@wrong("mlp", "transpose|shape|row vector|w_1|orient")
def mlp_linear_convention(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1.T + b_1) @ w_2.T + b_2


@wrong("mlp", "activation|order|gelu|before")
def mlp_gelu_before_first_layer(x, w_1, b_1, w_2, b_2):
    return (F.gelu(x) @ w_1 + b_1) @ w_2 + b_2


@wrong("mlp", "gelu|silu|swish|activation|sigmoid")
def mlp_silu(x, w_1, b_1, w_2, b_2):
    return F.silu(x @ w_1 + b_1) @ w_2 + b_2


@wrong("mlp", "bias|b_1|order|activation|after")
def mlp_b1_after_gelu(x, w_1, b_1, w_2, b_2):
    return (F.gelu(x @ w_1) + b_1) @ w_2 + b_2


@wrong("mlp", "activation|gelu|linear|missing")
def mlp_without_activation(x, w_1, b_1, w_2, b_2):
    return (x @ w_1 + b_1) @ w_2 + b_2


@right("mlp")
def mlp_with_erf(x, w_1, b_1, w_2, b_2):
    h = torch.addmm(b_1, x.reshape(-1, x.shape[-1]), w_1)  # (N, d_ff)
    h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))  # exact GELU
    return torch.addmm(b_2, h, w_2).reshape(*x.shape[:-1], w_2.shape[1])


@right("mlp")
def mlp_with_linear(x, w_1, b_1, w_2, b_2):
    return F.linear(F.gelu(F.linear(x, w_1.T, b_1)), w_2.T, b_2)


# ---------------------------------------------------------------- encoder_block
def _enc(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("encoder_block", "norm_first|pre-norm|post-norm|placement|swap")
def enc_placements_swapped(x, layer, norm_first, mask=None):
    return _enc(x, layer, not norm_first, mask)


@wrong("encoder_block", "residual|normali|stream")
def enc_prenorm_adds_normalised_input(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = h + layer.self_attn(h, h, mask)
        h = layer.mlp_norm(x)
        return h + layer.mlp(h)
    return _enc(x, layer, norm_first, mask)


@wrong("encoder_block", "key|value|normali|query")
def enc_prenorm_keys_unnormalised(x, layer, norm_first, mask=None):
    if norm_first:
        x = x + layer.self_attn(layer.self_attn_norm(x), x, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    return _enc(x, layer, norm_first, mask)


@wrong("encoder_block", "residual|mlp")
def enc_mlp_without_residual(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(layer.mlp(x))


@wrong("encoder_block", "residual|attention")
def enc_attention_without_residual(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = layer.self_attn(h, h, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(layer.self_attn(x, x, mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("encoder_block", "mask|padding")
def enc_ignores_mask(x, layer, norm_first, mask=None):
    return _enc(x, layer, norm_first, None)


@wrong("encoder_block", "mask|polarity|invert|true|false")
def enc_mask_inverted(x, layer, norm_first, mask=None):
    return _enc(x, layer, norm_first, None if mask is None else ~mask)


@wrong("encoder_block", "norm|placement|order|post-norm|after|sum")
def enc_postnorm_normalises_branch(x, layer, norm_first, mask=None):
    if norm_first:
        return _enc(x, layer, norm_first, mask)
    x = x + layer.self_attn_norm(layer.self_attn(x, x, mask))
    return x + layer.mlp_norm(layer.mlp(x))


@wrong("encoder_block", "norm|self_attn_norm|mlp_norm|swap|which")
def enc_norms_swapped(x, layer, norm_first, mask=None):
    class Swapped:
        self_attn, mlp = layer.self_attn, layer.mlp
        self_attn_norm, mlp_norm = layer.mlp_norm, layer.self_attn_norm

    return _enc(x, Swapped, norm_first, mask)


@wrong("encoder_block", "final|extra|norm|at the end|the end")
def enc_prenorm_with_final_norm(x, layer, norm_first, mask=None):
    out = _enc(x, layer, norm_first, mask)
    return layer.mlp_norm(out) if norm_first else out


@wrong("encoder_block", "order|mlp|attention|first")
def enc_mlp_before_attention(x, layer, norm_first, mask=None):
    if norm_first:
        x = x + layer.mlp(layer.mlp_norm(x))
        h = layer.self_attn_norm(x)
        return x + layer.self_attn(h, h, mask)
    x = layer.mlp_norm(x + layer.mlp(x))
    return layer.self_attn_norm(x + layer.self_attn(x, x, mask))


@right("encoder_block")
def enc_with_branches(x, layer, norm_first, mask=None):
    def attend(z):
        return layer.self_attn(z, z, mask)

    for branch, norm in ((attend, layer.self_attn_norm), (layer.mlp, layer.mlp_norm)):
        x = x + branch(norm(x)) if norm_first else norm(x + branch(x))
    return x


# ---------------------------------------------------------------- decoder_block
def _dec(x, memory, layer, norm_first, memory_mask=None, causal=True, cross=True, mem_norm=False):
    T = x.shape[1]
    self_mask = causal_mask(T) if causal is True else causal
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, self_mask)
        if cross:
            mem = layer.cross_attn_norm(memory) if mem_norm else memory
            x = x + layer.cross_attn(layer.cross_attn_norm(x), mem, memory_mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, self_mask))
    if cross:
        x = layer.cross_attn_norm(x + layer.cross_attn(x, memory, memory_mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("decoder_block", "causal|mask|future|later")
def dec_without_causal_mask(x, memory, layer, norm_first, memory_mask=None):
    return _dec(x, memory, layer, norm_first, memory_mask, causal=None)


@wrong("decoder_block", "causal|mask|invert|polarity|future")
def dec_causal_mask_inverted(x, memory, layer, norm_first, memory_mask=None):
    return _dec(x, memory, layer, norm_first, memory_mask, causal=~causal_mask(x.shape[1]))


@wrong("decoder_block", "memory|cross|key|encoder|source")
def dec_cross_attends_to_itself(x, memory, layer, norm_first, memory_mask=None):
    return _dec(x, x, layer, norm_first, None)


@wrong("decoder_block", "memory|normali|norm")
def dec_prenorm_normalises_memory(x, memory, layer, norm_first, memory_mask=None):
    return _dec(x, memory, layer, norm_first, memory_mask, mem_norm=True)


@wrong("decoder_block", "memory_mask|padding|mask|source")
def dec_ignores_memory_mask(x, memory, layer, norm_first, memory_mask=None):
    return _dec(x, memory, layer, norm_first, None)


@wrong("decoder_block", "mask|causal|cross|memory_mask|swap|shape")
def dec_masks_swapped(x, memory, layer, norm_first, memory_mask=None):
    future = causal_mask(x.shape[1])
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, memory_mask)
        x = x + layer.cross_attn(layer.cross_attn_norm(x), memory, future)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, memory_mask))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, memory, future))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("decoder_block", "order|cross|self|first")
def dec_cross_before_self(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    if norm_first:
        x = x + layer.cross_attn(layer.cross_attn_norm(x), memory, memory_mask)
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, causal_mask(T))
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, memory, memory_mask))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, causal_mask(T)))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("decoder_block", "cross|memory|encoder")
def dec_without_cross_attention(x, memory, layer, norm_first, memory_mask=None):
    return _dec(x, memory, layer, norm_first, memory_mask, cross=False)


@wrong("decoder_block", "norm_first|pre-norm|post-norm|placement|swap")
def dec_placements_swapped(x, memory, layer, norm_first, memory_mask=None):
    return _dec(x, memory, layer, not norm_first, memory_mask)


@wrong("decoder_block", "norm|cross_attn_norm|swap|which")
def dec_cross_uses_self_attn_norm(x, memory, layer, norm_first, memory_mask=None):
    class Swapped:
        self_attn, cross_attn, mlp = layer.self_attn, layer.cross_attn, layer.mlp
        self_attn_norm, cross_attn_norm = layer.cross_attn_norm, layer.self_attn_norm
        mlp_norm = layer.mlp_norm

    return _dec(x, memory, Swapped, norm_first, memory_mask)


@wrong("decoder_block", "residual|cross")
def dec_cross_without_residual(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, causal_mask(T))
        x = layer.cross_attn(layer.cross_attn_norm(x), memory, memory_mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, causal_mask(T)))
    x = layer.cross_attn_norm(layer.cross_attn(x, memory, memory_mask))
    return layer.mlp_norm(x + layer.mlp(x))


@right("decoder_block")
def dec_with_branches(x, memory, layer, norm_first, memory_mask=None):
    future = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()
    branches = (
        (lambda z: layer.self_attn(z, z, future), layer.self_attn_norm),
        (lambda z: layer.cross_attn(z, memory, memory_mask), layer.cross_attn_norm),
        (layer.mlp, layer.mlp_norm),
    )
    for branch, norm in branches:
        x = x + branch(norm(x)) if norm_first else norm(x + branch(x))
    return x


# ---------------------------------------------------------------- count_parameters
def _count(cfg, attn_bias=True, block_norms=True, final_norm=True, heads=False, mlp_bias=True,
           cross=True, cross_norm=True, segments=True, ln=2, output=False, positions=True, d_ff=None):  # fmt: skip
    C = cfg["d_model"]
    ff = cfg["d_ff"] if d_ff is None else d_ff
    attn = 4 * (C * C + (C if attn_bias else 0)) * (cfg["n_heads"] if heads else 1)
    block = attn + 2 * C * ff + ((ff + C) if mlp_bias else 0) + (2 * ln * C if block_norms else 0)
    if cfg["cross_attention"] and cross:
        block += attn + (ln * C if cross_norm else 0)
    emb = cfg["vocab_size"] * C + (cfg["max_len"] * C if positions else 0)
    emb += cfg["n_segments"] * C if segments else 0
    total = emb + cfg["n_layers"] * block + (ln * C if final_norm else 0)
    return total + (cfg["vocab_size"] * C if output else 0)


@wrong("count_parameters", "bias|attention")
def params_attention_without_biases(config):
    return _count(config, attn_bias=False)


@wrong("count_parameters", "norm|layer norm|layernorm")
def params_without_block_norms(config):
    return _count(config, block_norms=False)


@wrong("count_parameters", "norm|final|extra|layer norm")
def params_without_extra_norm(config):
    return _count(config, final_norm=False)


@wrong("count_parameters", "head|n_heads")
def params_per_head(config):
    return _count(config, heads=True)


@wrong("count_parameters", "bias|mlp|d_ff")
def params_mlp_without_biases(config):
    return _count(config, mlp_bias=False)


@wrong("count_parameters", "cross")
def params_ignore_cross_attention(config):
    return _count(config, cross=False)


@wrong("count_parameters", "cross|norm")
def params_cross_without_norm(config):
    return _count(config, cross_norm=False)


@wrong("count_parameters", "segment")
def params_without_segments(config):
    return _count(config, segments=False)


@wrong("count_parameters", "integer|python int|type|float")
def params_as_float(config):
    return float(_count(config))


@wrong("count_parameters", "norm|bias|gain|2c|layer norm")
def params_norm_gain_only(config):
    return _count(config, ln=1)


@wrong("count_parameters", "output|tied|reuse|vocab|head|untied")
def params_with_output_layer(config):
    return _count(config, output=True)


@wrong("count_parameters", "position|max_len")
def params_without_positions(config):
    return _count(config, positions=False)


@wrong("count_parameters", "d_ff|4c|hidden|mlp")
def params_assume_d_ff_4c(config):
    return _count(config, d_ff=4 * config["d_model"])


@right("count_parameters")
def params_from_table(config):
    C, ff = config["d_model"], config["d_ff"]
    attention = 4 * C * C + 4 * C
    mlp = C * ff + ff + ff * C + C
    norms = 2 * (2 * C)
    block = attention + mlp + norms
    if config["cross_attention"]:
        block += attention + 2 * C
    tables = (config["vocab_size"] + config["max_len"] + config["n_segments"]) * C
    return int(tables + config["n_layers"] * block + 2 * C)
