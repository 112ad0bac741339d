"""Notebook 05's checks: correct implementations in several styles pass, a catalogue of realistic
wrong implementations (at least eight per exercise) is diagnosed with the right words, the share
named is reported, and "check passes" implies "graded cell passes" (the graded cells are run from
the solution notebook itself).

Each wrong implementation is written the way a student would write it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lab import checks
from transformer_lab.checks.sizes import reference_count

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "05_transformer_block" / "05_transformer_block.ipynb"


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


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


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("check,impl", GOOD, ids=[impl.__name__ for _, impl in GOOD])
def test_correct_implementations_pass(check, impl, hidden, capsys):
    check(impl, hidden=hidden)
    line = capsys.readouterr().out.strip()
    assert line.startswith("✓ ") and "passed" in line


def test_reference_count_matches_huggingface_bert_and_gpt2():
    transformers = pytest.importorskip("transformers")
    bert = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=101,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=40,
            max_position_embeddings=23,
            type_vocab_size=2,
        ),
        add_pooling_layer=False,
    )
    gpt2 = transformers.GPT2Model(
        transformers.GPT2Config(vocab_size=57, n_positions=19, n_embd=12, n_layer=3, n_head=3)
    )
    bert_config = dict(
        vocab_size=101,
        max_len=23,
        n_segments=2,
        n_layers=2,
        n_heads=2,
        d_model=16,
        d_ff=40,
        cross_attention=False,
    )
    gpt2_config = dict(
        vocab_size=57,
        max_len=19,
        n_segments=0,
        n_layers=3,
        n_heads=3,
        d_model=12,
        d_ff=48,
        cross_attention=False,
    )
    assert reference_count(bert_config) == sum(p.numel() for p in bert.parameters())
    assert reference_count(gpt2_config) == sum(p.numel() for p in gpt2.parameters())


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

GENERIC = re.compile(
    r"differs? from the reference by up to|contains NaN or inf|^check_\w+: yours is"
)


def _message(check, impl) -> str | None:
    try:
        check(impl)
    except AssertionError as exc:
        return str(exc)
    return None


def _classify(message: str | None, words: str) -> str:
    if message is None:
        return "passed"
    if words in message:
        return "named"
    return "generic" if GENERIC.search(message) else "misleading"


@pytest.mark.parametrize(
    "check,impl,words", CATALOGUE, ids=[f"{c.__name__}-{i.__name__}" for c, i, _ in CATALOGUE]
)
def test_catalogue_mistake_is_named(check, impl, words):
    message = _message(check, impl)
    assert message is not None, f"{impl.__name__} passed {check.__name__}"
    assert message.startswith(check.__name__ + ":")
    assert words in message, message


def test_catalogue_share_named_and_none_misleading():
    per_check: dict[str, list[int]] = {}
    misleading = []
    for check, impl, words in CATALOGUE:
        verdict = _classify(_message(check, impl), words)
        counts = per_check.setdefault(check.__name__, [0, 0])
        counts[0] += verdict == "named"
        counts[1] += 1
        if verdict in ("misleading", "passed"):
            misleading.append((impl.__name__, verdict))
    named = sum(n for n, _ in per_check.values())
    total = sum(t for _, t in per_check.values())
    print(f"\nnotebook 05 catalogue: {named}/{total} named ({named / total:.0%})")
    for name, (n, t) in per_check.items():
        print(f"  {name:26s} {n}/{t}")
    assert all(t >= 8 for _, t in per_check.values()), per_check
    assert named / total >= 0.95
    assert not misleading, misleading


# ---------------------------------------------------------------------------------------------
# "check passes" implies "graded cell passes", with the graded cells of the solution notebook.
GRADED = {
    checks.check_layer_norm: ("layer_norm", "layer_norm_tests"),
    checks.check_mlp: ("mlp", "mlp_tests"),
    checks.check_encoder_block: ("encoder_block", "encoder_block_tests"),
    checks.check_decoder_block: ("decoder_block", "decoder_block_tests"),
    checks.check_count_parameters: ("count_parameters", "count_parameters_tests"),
}


@pytest.fixture(scope="module")
def notebook_cells():
    nb = nbformat.read(SOLUTION, as_version=4)
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nb.cells}
    setup = next(c.source for c in nb.cells if c.cell_type == "code")
    setup = "\n".join(line for line in setup.splitlines() if not line.startswith("%"))
    return setup, by_id


def _graded_cell_passes(setup: str, source: str, name: str, impl) -> bool:
    namespace: dict = {}
    exec(setup, namespace)  # noqa: S102  (the notebook's own import cell)
    namespace[name] = impl
    try:
        exec(source, namespace)  # noqa: S102
    except Exception:  # AssertionError from an assert or a check, or any error of the impl
        return False
    return True


EXTRA_NEAR_MISSES = [
    (checks.check_layer_norm, lambda x, gain, bias, eps=1e-5: ln_good(x, gain, bias, eps).double()),
    (
        checks.check_mlp,
        lambda x, w_1, b_1, w_2, b_2: mlp_good(x.reshape(-1, x.shape[-1]), w_1, b_1, w_2, b_2),
    ),
    (
        checks.check_encoder_block,
        lambda x, layer, norm_first, mask=None: (
            enc_good(x, layer, norm_first, mask).detach().clone()[:, :]
        ),
    ),
    (checks.check_count_parameters, lambda c: torch.tensor(count_good(c))),
]


@pytest.mark.parametrize(
    "check,impl",
    [(c, i) for c, i, _ in CATALOGUE] + GOOD + EXTRA_NEAR_MISSES,
    ids=lambda v: getattr(v, "__name__", "impl"),
)
def test_check_passing_implies_graded_cell_passing(check, impl, notebook_cells, capsys):
    setup, cells = notebook_cells
    name, grade_id = GRADED[check]
    check_ok = _message(check, impl) is None
    graded_ok = _graded_cell_passes(setup, cells[grade_id], name, impl)
    assert graded_ok or not check_ok, (
        f"{check.__name__} passed but the graded cell {grade_id} failed"
    )
    if check in {c for c, _ in GOOD} and impl in {i for _, i in GOOD}:
        assert graded_ok, f"a correct implementation failed the graded cell {grade_id}"


# ---------------------------------------------------------------------------------------------
# The reference and PyTorch's built-ins are disabled while the student's function runs.
@pytest.mark.parametrize(
    "check,impl,words",
    [
        (
            checks.check_layer_norm,
            lambda x, g, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], g, b, eps),
            "built-in layer norm",
        ),
        (
            checks.check_mlp,
            lambda x, w_1, b_1, w_2, b_2: _feed_forward(x, w_1, b_1, w_2, b_2),
            "FeedForward",
        ),
        (
            checks.check_encoder_block,
            lambda x, layer, norm_first, mask=None: _torch_encoder(x, norm_first),
            "TransformerEncoderLayer",
        ),
    ],
    ids=["F.layer_norm", "FeedForward", "nn.TransformerEncoderLayer"],
)
def test_references_are_disabled(check, impl, words):
    with pytest.raises(AssertionError, match=words):
        check(impl)


def _feed_forward(x, w_1, b_1, w_2, b_2):
    from transformer_lab.blocks import FeedForward

    ff = FeedForward(w_1.shape[0], w_1.shape[1], activation="gelu")
    with torch.no_grad():
        ff.fc1.weight.copy_(w_1.T)
        ff.fc1.bias.copy_(b_1)
        ff.fc2.weight.copy_(w_2.T)
        ff.fc2.bias.copy_(b_2)
    return ff(x)


def _torch_encoder(x, norm_first):
    layer = nn.TransformerEncoderLayer(x.shape[-1], 2, 4 * x.shape[-1], batch_first=True)
    return layer.eval()(x)


def test_untouched_functions_say_not_implemented():
    def untouched(*args, **kwargs):
        raise NotImplementedError()

    for check in GRADED:
        with pytest.raises(AssertionError, match="not implemented yet"):
            check(untouched)


def test_checks_leave_the_global_rng_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    for check, impl in GOOD[:: max(1, len(GOOD) // 5)]:
        check(impl)
    assert torch.equal(torch.rand(3), expected)
