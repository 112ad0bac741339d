"""Notebook 05, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text (LayerNorm, the MLP, encoder and decoder blocks, the parameter count), written without
looking at what the checks detect. ``python -m tests.holdout report 05w``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
# Before the fixes of issue 39: 20/1/0/0 named/generic/misleading/passed; after: 20 of 21 named, 1 generic.
# h16: w_1 and w_2 swapped and transposed named: 21 of 21.
NAMED_AT_LEAST = 1.0
wrong = collector(MISTAKES, "05")


def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


@wrong("layer_norm", "eps", "sqrt")
def ln_eps_added_to_std(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    std = ((x - mean) ** 2).mean(-1, keepdim=True).sqrt()
    return (x - mean) / (std + eps) * gain + bias


@wrong("layer_norm", "variance|std|square")
def ln_divides_by_variance(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / (var + eps) * gain + bias


@wrong("layer_norm", "in place")
def ln_in_place(x, gain, bias, eps=1e-5):
    x -= x.mean(-1, keepdim=True)
    x /= torch.sqrt((x**2).mean(-1, keepdim=True) + eps)
    return x * gain + bias


@wrong("layer_norm", "mean|center|subtract")
def ln_no_centering(x, gain, bias, eps=1e-5):
    var = x.var(-1, unbiased=False, keepdim=True)
    return x / torch.sqrt(var + eps) * gain + bias


@wrong("layer_norm", "dim 0|first|axis|dimension")
def ln_dim0(x, gain, bias, eps=1e-5):
    mean = x.mean(0, keepdim=True)
    var = x.var(0, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gain + bias


@wrong("mlp", "erf|tanh|gelu|approximat")
def mlp_tanh_gelu(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1 + b_1, approximate="tanh") @ w_2 + b_2


@wrong("mlp", "b_1|bias")
def mlp_b1_after_gelu(x, w_1, b_1, w_2, b_2):
    return (F.gelu(x @ w_1) + b_1) @ w_2 + b_2


@wrong("mlp", "swapped")
def mlp_weights_transposed(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_2.T + b_1) @ w_1.T + b_2


@wrong("mlp", "gelu|activation|sqrt")
def mlp_gelu_wrong_constant(x, w_1, b_1, w_2, b_2):
    h = x @ w_1 + b_1
    h = 0.5 * h * (1 + torch.erf(h / 2))
    return h @ w_2 + b_2


@wrong("encoder_block", "norm_first|pre|post")
def enc_norm_first_reversed(x, layer, norm_first, mask=None):
    if not norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("encoder_block", "residual|normalised|norm")
def enc_pre_residual_from_normed(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = h + layer.self_attn(h, h, mask)
        h = layer.mlp_norm(x)
        return h + layer.mlp(h)
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("encoder_block", "mlp_norm|norm|same")
def enc_one_norm_twice(x, layer, norm_first, mask=None):
    if norm_first:
        x = x + layer.self_attn(layer.self_attn_norm(x), layer.self_attn_norm(x), mask)
        return x + layer.mlp(layer.self_attn_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.self_attn_norm(x + layer.mlp(x))


@wrong("encoder_block", "causal|mask")
def enc_causal_always(x, layer, norm_first, mask=None):
    m = _causal(x.shape[1]) if mask is None else mask
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, m)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, m))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("decoder_block", "causal|mask")
def dec_no_causal(x, memory, layer, norm_first, memory_mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, None)
        x = x + layer.cross_attn(layer.cross_attn_norm(x), memory, memory_mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, None))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, memory, memory_mask))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("decoder_block", "memory|cross")
def dec_cross_on_self(x, memory, layer, norm_first, memory_mask=None):
    causal = _causal(x.shape[1])
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, causal)
        h = layer.cross_attn_norm(x)
        x = x + layer.cross_attn(h, h, None)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, causal))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, x, None))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("decoder_block", "memory_mask|mask")
def dec_causal_on_memory(x, memory, layer, norm_first, memory_mask=None):
    causal = _causal(x.shape[1])
    mm = torch.ones(x.shape[1], memory.shape[1], dtype=torch.bool).tril()
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, causal)
        x = x + layer.cross_attn(layer.cross_attn_norm(x), memory, mm)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, causal))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, memory, mm))
    return layer.mlp_norm(x + layer.mlp(x))


@wrong("decoder_block", "order|cross|before")
def dec_cross_first(x, memory, layer, norm_first, memory_mask=None):
    causal = _causal(x.shape[1])
    if norm_first:
        x = x + layer.cross_attn(layer.cross_attn_norm(x), memory, memory_mask)
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, causal)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, memory, memory_mask))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, causal))
    return layer.mlp_norm(x + layer.mlp(x))


def _count(config, attention=None, mlp=None, norms=None, emb=None, final=2):
    C, d_ff = config["d_model"], config["d_ff"]
    att = 4 * (C * C + C) if attention is None else attention
    ff = 2 * C * d_ff + d_ff + C if mlp is None else mlp
    n = 4 * C if norms is None else norms
    block = att + ff + n
    if config["cross_attention"]:
        block += att + 2 * C
    e = (
        (config["vocab_size"] + config["max_len"] + config["n_segments"]) * C
        if emb is None
        else emb
    )
    return e + config["n_layers"] * block + final * C


@wrong("count_parameters", "d_ff|4|MLP|mlp")
def count_d_ff_assumed(config):
    C = config["d_model"]
    return _count(config, mlp=2 * C * 4 * C + 4 * C + C)


@wrong("count_parameters", "head|per head|n_heads")
def count_heads_multiply(config):
    C = config["d_model"]
    return _count(config, attention=4 * (C * C + C) * config["n_heads"])


@wrong("count_parameters", "norm|LayerNorm|gain|bias")
def count_norms_one_per_block(config):
    C = config["d_model"]
    return _count(config, norms=2 * C)


@wrong("count_parameters", "output|unembed|tied|vocab")
def count_output_layer(config):
    C = config["d_model"]
    return _count(config) + config["vocab_size"] * C
