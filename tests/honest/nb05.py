"""Honest alternatives for notebook 05 (the transformer block)."""

from __future__ import annotations

from . import Alternative as A

ALTERNATIVES = {
    "layer_norm_impl": [
        A(
            "torch.var(unbiased=False) and torch.rsqrt",
            """\
def layer_norm(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * gain + bias
""",
        ),
        A(
            "float64 inside, result cast back to x's dtype",
            """\
def layer_norm(x, gain, bias, eps=1e-5):
    z = x.double()
    centred = z - z.mean(dim=-1, keepdim=True)
    var = centred.pow(2).mean(dim=-1, keepdim=True)
    y = centred / (var + eps).sqrt() * gain.double() + bias.double()
    return y.to(x.dtype)
""",
        ),
        A(
            "sums divided by C, torch.var_mean(correction=0), addcmul",
            """\
def layer_norm(x, gain, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
    normed = (x - mean) / torch.sqrt(var + eps)
    return torch.addcmul(bias, normed, gain)
""",
        ),
    ],
    "mlp_impl": [
        A(
            "F.linear with transposed weights",
            """\
def mlp(x, w_1, b_1, w_2, b_2):
    return F.linear(F.gelu(F.linear(x, w_1.T, b_1)), w_2.T, b_2)
""",
        ),
        A(
            "the exact GELU written with erf",
            """\
def mlp(x, w_1, b_1, w_2, b_2):
    h = x @ w_1 + b_1
    h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
    return h @ w_2 + b_2
""",
        ),
        A(
            "einsum and nn.GELU()",
            """\
def mlp(x, w_1, b_1, w_2, b_2):
    act = nn.GELU()
    h = act(torch.einsum("...c,cf->...f", x, w_1) + b_1)
    return torch.einsum("...f,fc->...c", h, w_2) + b_2
""",
        ),
        A(
            "tokens flattened to rows, torch.addmm, reshaped back",
            """\
def mlp(x, w_1, b_1, w_2, b_2):
    rows = x.reshape(-1, x.shape[-1])
    h = F.gelu(torch.addmm(b_1, rows, w_1))
    return torch.addmm(b_2, h, w_2).reshape(*x.shape[:-1], w_2.shape[1])
""",
        ),
    ],
    "encoder_block_impl": [
        A(
            "a loop over the two sublayers, key_value left to default (None = self-attention)",
            """\
def encoder_block(x, layer, norm_first, mask=None):
    sublayers = [(lambda h: layer.self_attn(h, mask=mask), layer.self_attn_norm),
                 (layer.mlp, layer.mlp_norm)]
    for f, norm in sublayers:
        x = x + f(norm(x)) if norm_first else norm(x + f(x))
    return x
""",
        ),
        A(
            "residual written f(x) + x, with named intermediate values",
            """\
def encoder_block(x, layer, norm_first, mask=None):
    if not norm_first:
        attended = layer.self_attn(x, x, mask)
        x = layer.self_attn_norm(attended + x)
        return layer.mlp_norm(layer.mlp(x) + x)
    normed = layer.self_attn_norm(x)
    x = layer.self_attn(normed, normed, mask) + x
    return layer.mlp(layer.mlp_norm(x)) + x
""",
        ),
        A(
            "pre-norm calls the norm twice (once for the query, once for keys/values)",
            """\
def encoder_block(x, layer, norm_first, mask=None):
    if norm_first:
        x = x + layer.self_attn(layer.self_attn_norm(x), layer.self_attn_norm(x), mask=mask)
        x = x + layer.mlp(layer.mlp_norm(x))
    else:
        x = layer.self_attn_norm(x + layer.self_attn(x, x, mask=mask))
        x = layer.mlp_norm(x + layer.mlp(x))
    return x
""",
        ),
    ],
    "decoder_block_impl": [
        A(
            "its own causal mask with torch.tril, a loop over the three sublayers",
            """\
def decoder_block(x, memory, layer, norm_first, memory_mask=None):
    T = x.shape[1]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    steps = [
        (lambda h: layer.self_attn(h, h, causal), layer.self_attn_norm),
        (lambda h: layer.cross_attn(h, memory, memory_mask), layer.cross_attn_norm),
        (layer.mlp, layer.mlp_norm),
    ]
    for f, norm in steps:
        x = x + f(norm(x)) if norm_first else norm(x + f(x))
    return x
""",
        ),
        A(
            "causal mask as (1, 1, T, T) from arange comparisons, keyword arguments",
            """\
def decoder_block(x, memory, layer, norm_first, memory_mask=None):
    t = torch.arange(x.shape[1])
    causal = (t[None, :] <= t[:, None])[None, None]  # (1, 1, T, T)
    if norm_first:
        h = layer.self_attn_norm(x)
        x = x + layer.self_attn(h, key_value=h, mask=causal)
        h = layer.cross_attn_norm(x)
        x = x + layer.cross_attn(h, key_value=memory, mask=memory_mask)
        h = layer.mlp_norm(x)
        return x + layer.mlp(h)
    x = layer.self_attn_norm(x + layer.self_attn(x, key_value=x, mask=causal))
    x = layer.cross_attn_norm(x + layer.cross_attn(x, key_value=memory, mask=memory_mask))
    return layer.mlp_norm(x + layer.mlp(x))
""",
        ),
        A(
            "three calls of one residual helper, causal mask as ~triu(1)",
            """\
def decoder_block(x, memory, layer, norm_first, memory_mask=None):
    def residual(x, f, norm):
        return x + f(norm(x)) if norm_first else norm(x + f(x))

    causal = ~torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
    x = residual(x, lambda h: layer.self_attn(h, h, causal), layer.self_attn_norm)
    x = residual(x, lambda h: layer.cross_attn(h, memory, memory_mask), layer.cross_attn_norm)
    return residual(x, layer.mlp, layer.mlp_norm)
""",
        ),
    ],
    "count_parameters_impl": [
        A(
            "PyTorch's own modules built on the meta device (no memory), numel summed",
            """\
def count_parameters(config):
    C = config["d_model"]
    parts = [nn.Embedding(n, C, device="meta")
             for n in (config["vocab_size"], config["max_len"], config["n_segments"]) if n > 0]
    kind = nn.TransformerDecoderLayer if config["cross_attention"] else nn.TransformerEncoderLayer
    parts += [kind(C, config["n_heads"], config["d_ff"], batch_first=True, device="meta")
              for _ in range(config["n_layers"])]
    parts.append(nn.LayerNorm(C, device="meta"))
    return int(sum(p.numel() for m in parts for p in m.parameters()))
""",
        ),
        A(
            "a helper for a linear layer's weights + biases",
            """\
def count_parameters(config):
    def linear(n_in, n_out):
        return n_in * n_out + n_out

    C = config["d_model"]
    attention = 4 * linear(C, C)
    block = attention + linear(C, config["d_ff"]) + linear(config["d_ff"], C) + 2 * (2 * C)
    if config["cross_attention"]:
        block += attention + 2 * C
    tables = sum(config[k] for k in ("vocab_size", "max_len", "n_segments")) * C
    return tables + config["n_layers"] * block + 2 * C
""",
        ),
        A(
            "a list of parameter shapes per block, summed with math.prod",
            """\
def count_parameters(config):
    C, F_ = config["d_model"], config["d_ff"]
    attn = [(C, C), (C,)] * 4
    shapes = attn + [(C, F_), (F_,), (F_, C), (C,)] + [(C,), (C,)] * 2
    if config["cross_attention"]:
        shapes += attn + [(C,), (C,)]
    per_block = sum(math.prod(s) for s in shapes)
    embeddings = (config["vocab_size"] + config["max_len"] + config["n_segments"]) * C
    return int(embeddings + config["n_layers"] * per_block + 2 * C)
""",
        ),
    ],
}
