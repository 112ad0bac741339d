"""Notebook 05's mistake catalogue (the checks are tuned on it): correct implementations in
several styles (``GOOD``) and realistic wrong ones with the words their check's message must
contain (``CATALOGUE``), as ``CORRECT`` and ``MISTAKES`` in the holdout's format.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tests.holdout._harness import from_table
from transformer_lab import checks


def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


# ---------------------------------------------------------------------------------------------
# Correct implementations, in several styles.
def ln_good(x, gain, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gain + bias


def ln_rsqrt(x, gain, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    return gain * (x - mean) * torch.rsqrt(var + eps) + bias


def ln_moments(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mean * mean  # E[x^2] - E[x]^2
    return (x - mean) / (var + eps).sqrt() * gain + bias


def ln_float64(x, gain, bias, eps=1e-5):
    d = x.double()
    mean = d.mean(-1, keepdim=True)
    y = (d - mean) / torch.sqrt(d.var(-1, unbiased=False, keepdim=True) + eps)
    return (y * gain.double() + bias.double()).to(x.dtype)


def mlp_good(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1 + b_1) @ w_2 + b_2


def mlp_erf(x, w_1, b_1, w_2, b_2):
    h = torch.einsum("...c,cf->...f", x, w_1) + b_1
    h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
    return torch.einsum("...f,fc->...c", h, w_2) + b_2


def mlp_linear(x, w_1, b_1, w_2, b_2):
    return F.linear(nn.GELU()(F.linear(x, w_1.T, b_1)), w_2.T, b_2)


def enc_good(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(x + layer.mlp(x))


def enc_loop(x, layer, norm_first, mask=None):
    branches = [
        (lambda h: layer.self_attn(h, h, mask), layer.self_attn_norm),
        (layer.mlp, layer.mlp_norm),
    ]
    for f, norm in branches:
        x = x + f(norm(x)) if norm_first else norm(x + f(x))
    return x


def enc_keywords(x, layer, norm_first, mask=None):
    """Self-attention called with key_value left out, like MultiHeadAttention.forward."""
    if norm_first:
        x = x + layer.self_attn(layer.self_attn_norm(x), mask=mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, mask=mask))
    return layer.mlp_norm(x + layer.mlp(x))


def dec_good(x, memory, layer, norm_first, memory_mask=None):
    causal = _causal(x.shape[1])
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, causal)
        x = x + layer.cross_attn(layer.cross_attn_norm(x), memory, memory_mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, causal))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, memory, memory_mask))
    return layer.mlp_norm(x + layer.mlp(x))


def dec_helper(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    mask = torch.arange(T)[None, :] <= torch.arange(T)[:, None]

    def residual(x, f, norm):
        return x + f(norm(x)) if norm_first else norm(x + f(x))

    x = residual(x, lambda h: layer.self_attn(h, h, mask), layer.self_attn_norm)
    x = residual(x, lambda h: layer.cross_attn(h, memory, memory_mask), layer.cross_attn_norm)
    return residual(x, layer.mlp, layer.mlp_norm)


def count_good(config):
    C, d_ff = config["d_model"], config["d_ff"]
    attention = 4 * (C * C + C)
    block = attention + 2 * C * d_ff + d_ff + C + 4 * C
    if config["cross_attention"]:
        block += attention + 2 * C
    emb = (config["vocab_size"] + config["max_len"] + config["n_segments"]) * C
    return emb + config["n_layers"] * block + 2 * C


def count_modules(config):
    """Builds the modules on the meta device and counts: a valid style too."""
    C = config["d_model"]
    kind = nn.TransformerDecoderLayer if config["cross_attention"] else nn.TransformerEncoderLayer
    with torch.device("meta"):
        block = kind(C, config["n_heads"], config["d_ff"])
    per_block = sum(p.numel() for p in block.parameters())
    tables = config["vocab_size"] + config["max_len"] + config["n_segments"]
    return int(tables * C + 2 * C + config["n_layers"] * per_block)


GOOD = [
    (checks.check_layer_norm, ln_good),
    (checks.check_layer_norm, ln_rsqrt),
    (checks.check_layer_norm, ln_moments),
    (checks.check_layer_norm, ln_float64),
    (checks.check_mlp, mlp_good),
    (checks.check_mlp, mlp_erf),
    (checks.check_mlp, mlp_linear),
    (checks.check_encoder_block, enc_good),
    (checks.check_encoder_block, enc_loop),
    (checks.check_encoder_block, enc_keywords),
    (checks.check_decoder_block, dec_good),
    (checks.check_decoder_block, dec_helper),
    (checks.check_count_parameters, count_good),
    (checks.check_count_parameters, count_modules),
]


# ---------------------------------------------------------------------------------------------
# The catalogue: (check, wrong implementation, words its message must contain).
def ln_unbiased(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * gain + bias


def ln_over_batch(x, gain, bias, eps=1e-5):
    mean = x.mean(0, keepdim=True)
    var = x.var(0, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gain + bias


def ln_over_tokens(x, gain, bias, eps=1e-5):
    mean = x.mean(-2, keepdim=True)
    var = x.var(-2, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gain + bias


def ln_eps_outside(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / (x.var(-1, unbiased=False, keepdim=True).sqrt() + eps) * gain + bias


def ln_swapped(x, gain, bias, eps=1e-5):
    return ln_good(x, bias, gain, eps)


def ln_no_gain(x, gain, bias, eps=1e-5):
    return ln_good(x, torch.ones_like(gain), bias, eps)


def ln_no_bias(x, gain, bias, eps=1e-5):
    return ln_good(x, gain, torch.zeros_like(bias), eps)


def ln_no_affine(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)


def ln_no_eps(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / x.std(-1, unbiased=False, keepdim=True) * gain + bias


def ln_eps_ignored(x, gain, bias, eps=1e-5):
    return ln_good(x, gain, bias, 1e-5)


def ln_rms(x, gain, bias, eps=1e-5):
    return x / torch.sqrt((x**2).mean(-1, keepdim=True) + eps) * gain + bias


def ln_l2(x, gain, bias, eps=1e-5):
    c = x - x.mean(-1, keepdim=True)
    return c / torch.sqrt((c**2).sum(-1, keepdim=True) + eps) * gain + bias


def ln_global(x, gain, bias, eps=1e-5):
    return (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) * gain + bias


def ln_per_sequence(x, gain, bias, eps=1e-5):
    dims = tuple(range(1, x.dim()))
    mean = x.mean(dims, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(dims, unbiased=False, keepdim=True) + eps) * gain + bias


def mlp_relu(x, w_1, b_1, w_2, b_2):
    return F.relu(x @ w_1 + b_1) @ w_2 + b_2


def mlp_tanh(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1 + b_1, approximate="tanh") @ w_2 + b_2


def mlp_sigmoid_gelu(x, w_1, b_1, w_2, b_2):
    h = x @ w_1 + b_1
    return (h * torch.sigmoid(1.702 * h)) @ w_2 + b_2


def mlp_silu(x, w_1, b_1, w_2, b_2):
    return F.silu(x @ w_1 + b_1) @ w_2 + b_2


def mlp_no_activation(x, w_1, b_1, w_2, b_2):
    return (x @ w_1 + b_1) @ w_2 + b_2


def mlp_activation_at_end(x, w_1, b_1, w_2, b_2):
    return F.gelu(F.gelu(x @ w_1 + b_1) @ w_2 + b_2)


def mlp_activation_first(x, w_1, b_1, w_2, b_2):
    return (F.gelu(x) @ w_1 + b_1) @ w_2 + b_2


def mlp_no_b1(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1) @ w_2 + b_2


def mlp_no_b2(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1 + b_1) @ w_2


def mlp_bias_after(x, w_1, b_1, w_2, b_2):
    return (F.gelu(x @ w_1) + b_1) @ w_2 + b_2


def mlp_residual(x, w_1, b_1, w_2, b_2):
    return x + F.gelu(x @ w_1 + b_1) @ w_2 + b_2


def mlp_transposed(x, w_1, b_1, w_2, b_2):
    return F.gelu(x @ w_1.T + b_1) @ w_2.T + b_2


def enc_add_normed(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = h + layer.self_attn(h, h, mask)
        h = layer.mlp_norm(x)
        return h + layer.mlp(h)
    return enc_good(x, layer, norm_first, mask)


def enc_norm_on_branch(x, layer, norm_first, mask=None):
    if not norm_first:
        x = x + layer.self_attn_norm(layer.self_attn(x, x, mask))
        return x + layer.mlp_norm(layer.mlp(x))
    return enc_good(x, layer, norm_first, mask)


def enc_always_pre(x, layer, norm_first, mask=None):
    return enc_good(x, layer, True, mask)


def enc_always_post(x, layer, norm_first, mask=None):
    return enc_good(x, layer, False, mask)


def enc_inverted(x, layer, norm_first, mask=None):
    return enc_good(x, layer, not norm_first, mask)


def enc_norms_swapped(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.mlp_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return x + layer.mlp(layer.self_attn_norm(x))
    x = layer.mlp_norm(x + layer.self_attn(x, x, mask))
    return layer.self_attn_norm(x + layer.mlp(x))


def enc_one_norm(x, layer, norm_first, mask=None):
    n = layer.self_attn_norm
    if norm_first:
        h = n(x)
        x = x + layer.self_attn(h, h, mask)
        return x + layer.mlp(n(x))
    x = n(x + layer.self_attn(x, x, mask))
    return n(x + layer.mlp(x))


def enc_no_attn_residual(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = layer.self_attn(h, h, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(layer.self_attn(x, x, mask))
    return layer.mlp_norm(x + layer.mlp(x))


def enc_no_mlp_residual(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, h, mask)
        return layer.mlp(layer.mlp_norm(x))
    x = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(layer.mlp(x))


def enc_parallel(x, layer, norm_first, mask=None):
    if norm_first:
        h = layer.self_attn_norm(x)
        return x + layer.self_attn(h, h, mask) + layer.mlp(layer.mlp_norm(x))
    a = layer.self_attn_norm(x + layer.self_attn(x, x, mask))
    return layer.mlp_norm(a + layer.mlp(x))


def enc_kv_raw(x, layer, norm_first, mask=None):
    if norm_first:
        x = x + layer.self_attn(layer.self_attn_norm(x), x, mask)
        return x + layer.mlp(layer.mlp_norm(x))
    return enc_good(x, layer, norm_first, mask)


def enc_no_mask(x, layer, norm_first, mask=None):
    return enc_good(x, layer, norm_first, None)


def enc_extra_norm(x, layer, norm_first, mask=None):
    out = enc_good(x, layer, norm_first, mask)
    return layer.mlp_norm(out) if norm_first else out


def enc_mask_second(x, layer, norm_first, mask=None):
    if norm_first:
        x = x + layer.self_attn(layer.self_attn_norm(x), mask)  # the mask lands in key_value
        return x + layer.mlp(layer.mlp_norm(x))
    return enc_good(x, layer, norm_first, mask)


def enc_returns_tuple(x, layer, norm_first, mask=None):
    return enc_good(x, layer, norm_first, mask), None


def _dec(
    x,
    memory,
    layer,
    norm_first,
    memory_mask,
    self_mask="causal",
    norm_memory=False,
    cross=True,
    cross_residual=True,
    mlp_first=False,
    self_kv_memory=False,
    cross_mask="memory",
    swap_cross_qkv=False,
    norms=("self_attn_norm", "cross_attn_norm", "mlp_norm"),
):
    """How students write the decoder block, with one switch per slip."""
    T = x.shape[1]
    causal = _causal(T)
    sm = {"causal": causal, "none": None, "reversed": ~causal, "strict": causal.tril(-1)}.get(
        self_mask, self_mask
    )
    cm = {"memory": memory_mask, "none": None, "causal": causal}.get(cross_mask, cross_mask)
    n_self, n_cross, n_mlp = (getattr(layer, n) for n in norms)

    def self_part(x):
        h = n_self(x) if norm_first else x
        a = layer.self_attn(h, memory if self_kv_memory else h, sm)
        return x + a if norm_first else n_self(x + a)

    def cross_part(x):
        if not cross:
            return x
        h = n_cross(x) if norm_first else x
        mem = n_cross(memory) if norm_memory else memory
        a = layer.cross_attn(mem, h, cm) if swap_cross_qkv else layer.cross_attn(h, mem, cm)
        if not cross_residual:
            return a if norm_first else n_cross(a)
        return x + a if norm_first else n_cross(x + a)

    def mlp_part(x):
        f = layer.mlp(n_mlp(x) if norm_first else x)
        return x + f if norm_first else n_mlp(x + f)

    x = self_part(x)
    return cross_part(mlp_part(x)) if mlp_first else mlp_part(cross_part(x))


def dec_bug(**slip):
    def impl(x, memory, layer, norm_first, memory_mask=None):
        return _dec(x, memory, layer, norm_first, memory_mask, **slip)

    impl.__name__ = "dec_" + "_".join(f"{k}_{v}" for k, v in slip.items()).replace(" ", "")[:60]
    return impl


def dec_ignores_norm_first(x, memory, layer, norm_first, memory_mask=None):
    return dec_good(x, memory, layer, True, memory_mask)


def count_no_bias(c):
    C, d_ff = c["d_model"], c["d_ff"]
    block = 4 * C * C + 2 * C * d_ff + 2 * C  # no linear biases, and the norms' gains only
    if c["cross_attention"]:
        block += 4 * C * C + C
    emb = (c["vocab_size"] + c["max_len"] + c["n_segments"]) * C
    return emb + c["n_layers"] * block + C


def count_no_norms(c):
    C, d_ff = c["d_model"], c["d_ff"]
    attention = 4 * (C * C + C)
    block = attention + 2 * C * d_ff + d_ff + C
    if c["cross_attention"]:
        block += attention
    return (c["vocab_size"] + c["max_len"] + c["n_segments"]) * C + c["n_layers"] * block


def count_gain_only(c):
    C, d_ff = c["d_model"], c["d_ff"]
    attention = 4 * (C * C + C)
    block = attention + 2 * C * d_ff + d_ff + C + 2 * C
    if c["cross_attention"]:
        block += attention + C
    return (c["vocab_size"] + c["max_len"] + c["n_segments"]) * C + c["n_layers"] * block + C


def count_no_w_o(c):
    C, d_ff = c["d_model"], c["d_ff"]
    attention = 3 * (C * C + C)
    block = attention + 2 * C * d_ff + d_ff + C + 4 * C
    if c["cross_attention"]:
        block += attention + 2 * C
    return (c["vocab_size"] + c["max_len"] + c["n_segments"]) * C + c["n_layers"] * block + 2 * C


def count_per_head(c):
    C, d_ff, H = c["d_model"], c["d_ff"], c["n_heads"]
    attention = H * 4 * (C * C + C)
    block = attention + 2 * C * d_ff + d_ff + C + 4 * C
    if c["cross_attention"]:
        block += attention + 2 * C
    return (c["vocab_size"] + c["max_len"] + c["n_segments"]) * C + c["n_layers"] * block + 2 * C


def count_4c(c):
    return count_good(dict(c, d_ff=4 * c["d_model"]))


def count_one_matrix(c):
    return count_good(c) - c["n_layers"] * (c["d_ff"] * c["d_model"] + c["d_model"])


def count_no_positions(c):
    return count_good(dict(c, max_len=0))


def count_no_segments(c):
    return count_good(dict(c, n_segments=0))


def count_no_final_norm(c):
    return count_good(c) - 2 * c["d_model"]


def count_untied(c):
    return count_good(c) + c["vocab_size"] * c["d_model"]


def count_no_cross(c):
    return count_good(dict(c, cross_attention=False))


def count_no_cross_norm(c):
    return count_good(c) - (2 * c["d_model"] * c["n_layers"] if c["cross_attention"] else 0)


def count_layers_minus_one(c):
    return count_good(dict(c, n_layers=c["n_layers"] - 1))


def count_float(c):
    return float(count_good(c))


def count_one_block(c):
    return count_good(dict(c, n_layers=1))


CATALOGUE = [
    (checks.check_layer_norm, ln_unbiased, "unbiased"),
    (checks.check_layer_norm, ln_over_batch, "dimension 0 (the batch)"),
    (checks.check_layer_norm, ln_over_tokens, "the tokens"),
    (checks.check_layer_norm, ln_eps_outside, "standard deviation"),
    (checks.check_layer_norm, ln_swapped, "swapped"),
    (checks.check_layer_norm, ln_no_gain, "gain is not applied"),
    (checks.check_layer_norm, ln_no_bias, "bias is not added"),
    (checks.check_layer_norm, ln_no_affine, "gain and bias are not applied"),
    (checks.check_layer_norm, ln_no_eps, "eps is missing"),
    (checks.check_layer_norm, ln_eps_ignored, "eps argument is ignored"),
    (checks.check_layer_norm, ln_rms, "RMS norm"),
    (checks.check_layer_norm, ln_l2, "L2 norm"),
    (checks.check_layer_norm, ln_global, "all dimensions"),
    (checks.check_layer_norm, ln_per_sequence, "tokens and the features"),
    (checks.check_mlp, mlp_relu, "ReLU"),
    (checks.check_mlp, mlp_tanh, "tanh approximation"),
    (checks.check_mlp, mlp_sigmoid_gelu, "sigmoid approximation"),
    (checks.check_mlp, mlp_silu, "SiLU"),
    (checks.check_mlp, mlp_no_activation, "no activation"),
    (checks.check_mlp, mlp_activation_at_end, "after the second layer"),
    (checks.check_mlp, mlp_activation_first, "before the first layer"),
    (checks.check_mlp, mlp_no_b1, "b_1 is not added"),
    (checks.check_mlp, mlp_no_b2, "b_2 is not added"),
    (checks.check_mlp, mlp_bias_after, "after the activation"),
    (checks.check_mlp, mlp_residual, "residual connection belongs to the block"),
    (checks.check_mlp, mlp_transposed, "row vectors"),
    (checks.check_encoder_block, enc_add_normed, "adds the normalised x"),
    (checks.check_encoder_block, enc_norm_on_branch, "norm is on the branch"),
    (checks.check_encoder_block, enc_always_pre, "computes pre-norm"),
    (checks.check_encoder_block, enc_always_post, "computes post-norm"),
    (checks.check_encoder_block, enc_inverted, "computes post-norm"),
    (checks.check_encoder_block, enc_norms_swapped, "swapped"),
    (checks.check_encoder_block, enc_one_norm, "used for the MLP as well"),
    (checks.check_encoder_block, enc_no_attn_residual, "around the attention"),
    (checks.check_encoder_block, enc_no_mlp_residual, "around the MLP"),
    (checks.check_encoder_block, enc_parallel, "parallel"),
    (checks.check_encoder_block, enc_kv_raw, "only the queries are normalised"),
    (checks.check_encoder_block, enc_no_mask, "mask is not passed"),
    (checks.check_encoder_block, enc_extra_norm, "norm after the block"),
    (checks.check_encoder_block, enc_returns_tuple, "must be a torch.Tensor"),
    (checks.check_encoder_block, enc_mask_second, "received a boolean tensor"),
    (checks.check_decoder_block, dec_bug(self_mask="none"), "not causal"),
    (checks.check_decoder_block, dec_bug(self_mask="reversed"), "polarity"),
    (checks.check_decoder_block, dec_bug(self_mask="strict"), "excludes the diagonal"),
    (checks.check_decoder_block, dec_bug(norm_memory=True), "memory is normalised"),
    (checks.check_decoder_block, dec_bug(cross=False), "cross-attention is missing"),
    (checks.check_decoder_block, dec_bug(cross_residual=False), "around the cross-attention"),
    (checks.check_decoder_block, dec_bug(cross_mask="none"), "memory_mask is not passed"),
    (checks.check_decoder_block, dec_bug(mlp_first=True), "MLP comes before"),
    (checks.check_decoder_block, dec_bug(self_kv_memory=True), "attends to the memory"),
    (
        checks.check_decoder_block,
        dec_bug(cross_mask="causal"),
        "causal mask instead of memory_mask",
    ),
    (checks.check_decoder_block, dec_bug(swap_cross_qkv=True), "queries come from memory"),
    (
        checks.check_decoder_block,
        dec_bug(norms=("cross_attn_norm", "self_attn_norm", "mlp_norm")),
        "norms are mixed up",
    ),
    (
        checks.check_decoder_block,
        dec_bug(norms=("self_attn_norm", "self_attn_norm", "self_attn_norm")),
        "norms are mixed up",
    ),
    (checks.check_decoder_block, dec_ignores_norm_first, "computes pre-norm"),
    (checks.check_count_parameters, count_no_bias, "biases are missing"),
    (checks.check_count_parameters, count_no_norms, "layer norms are missing"),
    (checks.check_count_parameters, count_gain_only, "gain AND a bias"),
    (checks.check_count_parameters, count_no_w_o, "W_o is missing"),
    (checks.check_count_parameters, count_per_head, "once per head"),
    (checks.check_count_parameters, count_4c, "not always 4C"),
    (checks.check_count_parameters, count_one_matrix, "two matrices"),
    (checks.check_count_parameters, count_no_positions, "position table"),
    (checks.check_count_parameters, count_no_segments, "segment table"),
    (checks.check_count_parameters, count_no_final_norm, "outside the blocks"),
    (checks.check_count_parameters, count_untied, "output head"),
    (checks.check_count_parameters, count_no_cross, "cross_attention=True"),
    (checks.check_count_parameters, count_no_cross_norm, "cross-attention's own layer norm"),
    (checks.check_count_parameters, count_layers_minus_one, "one block too few"),
    (checks.check_count_parameters, count_one_block, "only one block"),
    (checks.check_count_parameters, count_float, "return a Python int"),
]


MISTAKES = from_table("05", CATALOGUE)
CORRECT = from_table("05", GOOD)
NAMED_AT_LEAST = 1.0  # every entry named when converted to this format
