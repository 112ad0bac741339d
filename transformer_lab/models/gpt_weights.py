"""Hugging Face GPT-2 checkpoints in our :class:`~transformer_lab.models.GPT`: the config and the
weight names translated.

GPT-2 keeps its linear layers in ``Conv1D`` modules that store (in, out) matrices, and packs
W_q, W_k, W_v into one ``c_attn``; both are undone here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor

from transformer_lab.models._weights import linear_from_conv1d
from transformer_lab.models.gpt_config import GPTConfig

__all__ = ["config_from_huggingface", "gpt2_weights"]

ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}
"""Hugging Face's activation names -> ours."""


def config_from_huggingface(hf: Any) -> GPTConfig:
    """Translate a Hugging Face ``GPT2Config`` into a :class:`GPTConfig` (dropout off)."""
    if getattr(hf, "model_type", None) != "gpt2":
        raise ValueError(
            f"from_huggingface expects a GPT-2 model, but received "
            f"model_type={getattr(hf, 'model_type', None)!r}."
        )
    if hf.activation_function not in ACTIVATIONS:
        raise ValueError(
            f"GPT supports the activations {sorted(ACTIVATIONS)}, but the model uses "
            f"{hf.activation_function!r}."
        )
    if (
        not hf.scale_attn_weights
        or hf.scale_attn_by_inverse_layer_idx
        or getattr(hf, "add_cross_attention", False)
    ):
        raise ValueError(
            "GPT supports GPT-2's standard attention only (scaled by 1/sqrt(D), no "
            "cross-attention), but the model's config differs."
        )
    return GPTConfig(
        vocab_size=hf.vocab_size,
        max_len=hf.n_positions,
        n_layers=hf.n_layer,
        n_heads=hf.n_head,
        d_model=hf.n_embd,
        d_ff=hf.n_inner or 4 * hf.n_embd,
        eps=hf.layer_norm_epsilon,
        activation=ACTIVATIONS[hf.activation_function],
        dropout=0.0,
        tie_weights=getattr(hf, "tie_word_embeddings", True),
    )


def gpt2_weights(sd: Mapping[str, Tensor], config: GPTConfig) -> dict[str, Tensor]:
    """Rename a Hugging Face GPT-2 state dict to our parameter names; every weight must be used."""
    p = "transformer." if "transformer.wte.weight" in sd else ""
    used = {"lm_head.weight"} if config.tie_weights else set()  # a tied head is wte again

    def take(key: str) -> Tensor:
        used.add(p + key)
        return sd[p + key]

    w = {"tok_emb.weight": take("wte.weight"), "pos_emb.weight": take("wpe.weight")}
    for i in range(config.n_layers):
        w.update(_block_weights(take, f"h.{i}.", f"blocks.{i}.", config.d_model))
    w["norm_f.weight"], w["norm_f.bias"] = take("ln_f.weight"), take("ln_f.bias")
    if not config.tie_weights:
        if "lm_head.weight" not in sd:
            raise ValueError(
                "the Hugging Face model has tie_word_embeddings=False but no lm_head: load a "
                "GPT2LMHeadModel."
            )
        used.add("lm_head.weight")
        w["lm_head.weight"] = sd["lm_head.weight"]
    unused = sorted(
        k for k in sd if k not in used and not k.endswith((".attn.bias", ".attn.masked_bias"))
    )
    if unused:
        raise ValueError(
            f"the Hugging Face model has weights GPT would ignore, starting with {unused[0]!r}."
        )
    return w


def _block_weights(take: Callable[[str], Tensor], h: str, o: str, C: int) -> dict[str, Tensor]:
    """One block: Hugging Face's ``h.{i}.`` weights under our ``blocks.{i}.`` names."""
    w = {}
    qkv_w = linear_from_conv1d(take(h + "attn.c_attn.weight"))  # (C, 3C) -> (3C, C)
    qkv_b = take(h + "attn.c_attn.bias")  # (3C,)
    for name, wt, bs in zip("qkv", qkv_w.split(C, dim=0), qkv_b.split(C)):  # (C, C), (C,)
        w[o + f"self_attn.{name}_proj.weight"], w[o + f"self_attn.{name}_proj.bias"] = wt, bs
    for ours, theirs in (
        ("self_attn.out_proj", "attn.c_proj"),
        ("mlp.fc1", "mlp.c_fc"),
        ("mlp.fc2", "mlp.c_proj"),
    ):
        w[o + ours + ".weight"] = linear_from_conv1d(take(h + theirs + ".weight"))
        w[o + ours + ".bias"] = take(h + theirs + ".bias")
    for ours, theirs in (("self_attn_norm", "ln_1"), ("mlp_norm", "ln_2")):
        w[o + ours + ".weight"] = take(h + theirs + ".weight")
        w[o + ours + ".bias"] = take(h + theirs + ".bias")
    return w
