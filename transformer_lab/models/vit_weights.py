"""Hugging Face ViT checkpoints in our :class:`~transformer_lab.models.ViT`: the config and the
weight names translated (the patch convolution becomes a linear map of flattened patches)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from transformer_lab.models.vit_config import ViTConfig

__all__ = ["config_from_huggingface", "vit_weights"]

ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
}
"""Hugging Face's activation names -> ours."""

# Our block's parameter names -> those of a Hugging Face ViT layer.
_BLOCK_NAMES = {
    "self_attn.q_proj": "attention.q_proj",
    "self_attn.k_proj": "attention.k_proj",
    "self_attn.v_proj": "attention.v_proj",
    "self_attn.out_proj": "attention.o_proj",
    "self_attn_norm": "layernorm_before",
    "mlp_norm": "layernorm_after",
    "mlp.fc1": "mlp.fc1",
    "mlp.fc2": "mlp.fc2",
}


def config_from_huggingface(hf: Any, has_head: bool = True) -> ViTConfig:
    """Translate a Hugging Face ``ViTConfig`` into ours (dropout off; 1000 classes without a head)."""
    if getattr(hf, "model_type", None) != "vit":
        raise ValueError(
            f"from_huggingface expects a ViT model, but received "
            f"model_type={getattr(hf, 'model_type', None)!r}."
        )
    if hf.hidden_act not in ACTIVATIONS or not getattr(hf, "qkv_bias", True):
        raise ValueError(
            f"ViT supports biased q/k/v and the activations {sorted(ACTIVATIONS)}, but the "
            f"model's config differs."
        )
    return ViTConfig(
        image_size=hf.image_size if isinstance(hf.image_size, int) else tuple(hf.image_size),
        patch_size=hf.patch_size if isinstance(hf.patch_size, int) else hf.patch_size[0],
        n_channels=hf.num_channels,
        n_classes=hf.num_labels if has_head else 1000,
        n_layers=hf.num_hidden_layers,
        n_heads=hf.num_attention_heads,
        d_model=hf.hidden_size,
        d_ff=hf.intermediate_size,
        eps=hf.layer_norm_eps,
        activation=ACTIVATIONS[hf.hidden_act],
        dropout=0.0,
    )


def vit_weights(sd: Mapping[str, Tensor], config: ViTConfig) -> dict[str, Tensor]:
    """Rename a Hugging Face ViT state dict to our parameter names; every weight but the pooler's
    must be used."""
    p = "vit." if "vit.embeddings.cls_token" in sd else ""
    used: set[str] = set()

    def take(key: str) -> Tensor:
        used.add(key)
        return sd[key]

    e, C = p + "embeddings.", config.d_model
    w = {
        "cls_token": take(e + "cls_token"),  # (1, 1, C)
        "pos_emb.weight": take(e + "position_embeddings")[0],  # (1, N + 1, C) -> (N + 1, C)
        "patch_emb.proj.weight": take(e + "patch_embeddings.projection.weight").reshape(
            C, -1
        ),  # (C, ch, P, P) -> (C, ch*P*P)
        "patch_emb.proj.bias": take(e + "patch_embeddings.projection.bias"),
    }
    for i in range(config.n_layers):
        for ours, theirs in _BLOCK_NAMES.items():
            for leaf in ("weight", "bias"):
                w[f"blocks.{i}.{ours}.{leaf}"] = take(f"{p}layers.{i}.{theirs}.{leaf}")
    w["norm_f.weight"], w["norm_f.bias"] = take(p + "layernorm.weight"), take(p + "layernorm.bias")
    if "classifier.weight" in sd:
        w["head.weight"], w["head.bias"] = take("classifier.weight"), take("classifier.bias")
    unused = sorted(k for k in sd if k not in used and not k.startswith(p + "pooler."))
    if unused:
        raise ValueError(
            f"the Hugging Face model has weights ViT would ignore, starting with {unused[0]!r}."
        )
    return w
