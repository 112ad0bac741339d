"""Hugging Face BERT checkpoints in our :class:`~transformer_lab.models.BERT`: the config and the
weight names translated (shared with :mod:`transformer_lab.pretrained`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from transformer_lab.models.bert_config import BertConfig

__all__ = ["config_from_huggingface", "bert_weights"]


def config_from_huggingface(hf: Any, **overrides: Any) -> BertConfig:
    """Translate a Hugging Face ``BertConfig`` (object or dict from config.json) into ours."""
    get = hf.get if isinstance(hf, Mapping) else (lambda k, d=None: getattr(hf, k, d))
    acts = {
        "gelu": "gelu",
        "gelu_new": "gelu_tanh",
        "gelu_pytorch_tanh": "gelu_tanh",
        "relu": "relu",
    }
    if get("model_type") != "bert":
        raise ValueError(f"expected a BERT model, but received model_type={get('model_type')!r}.")
    if get("hidden_act") not in acts:
        raise ValueError(
            f"BERT supports the activations {sorted(acts)}, but the model uses {get('hidden_act')!r}."
        )
    if get("position_embedding_type", "absolute") != "absolute" or get("is_decoder", False):
        raise ValueError(
            "BERT supports absolute position embeddings in an encoder only, but the model's config differs."
        )
    return BertConfig(
        vocab_size=get("vocab_size"),
        max_len=get("max_position_embeddings"),
        type_vocab_size=get("type_vocab_size"),
        n_layers=get("num_hidden_layers"),
        n_heads=get("num_attention_heads"),
        d_model=get("hidden_size"),
        d_ff=get("intermediate_size"),
        eps=get("layer_norm_eps"),
        activation=acts[get("hidden_act")],
        pad_token_id=get("pad_token_id") or 0,
        dropout=0.0,
        **overrides,
    )


def bert_weights(
    sd: Mapping[str, Tensor], prefix: str = "", strict: bool = True, pooler: bool = True
) -> dict[str, Tensor]:
    """Rename a Hugging Face BERT state dict (keys under ``prefix``) to our :class:`BERT` names.

    With ``strict``, every key under ``prefix`` must be used (``position_ids`` aside), so a
    checkpoint with parts BERT would ignore fails loudly.
    """
    used: set[str] = set()

    def take(key: str) -> Tensor:
        used.add(prefix + key)
        if prefix + key not in sd:
            raise KeyError(f"the BERT weights have no {prefix + key!r}.")
        return sd[prefix + key]

    e = "embeddings."
    w = {
        "tok_emb.weight": take(e + "word_embeddings.weight"),
        "pos_emb.weight": take(e + "position_embeddings.weight"),
        "seg_emb.weight": take(e + "token_type_embeddings.weight"),
        "emb_norm.weight": take(e + "LayerNorm.weight"),
        "emb_norm.bias": take(e + "LayerNorm.bias"),
    }
    n_layer = len(
        {k[len(prefix) :].split(".")[2] for k in sd if k.startswith(prefix + "encoder.layer.")}
    )
    for i in range(n_layer):
        h, o = f"encoder.layer.{i}.", f"blocks.{i}."
        pairs = {
            "self_attn.q_proj": "attention.self.query",
            "self_attn.k_proj": "attention.self.key",
            "self_attn.v_proj": "attention.self.value",
            "self_attn.out_proj": "attention.output.dense",
            "self_attn_norm": "attention.output.LayerNorm",
            "mlp.fc1": "intermediate.dense",
            "mlp.fc2": "output.dense",
            "mlp_norm": "output.LayerNorm",
        }
        for ours, theirs in pairs.items():
            w[o + ours + ".weight"] = take(h + theirs + ".weight")
            w[o + ours + ".bias"] = take(h + theirs + ".bias")
    if pooler:
        w["pooler.weight"], w["pooler.bias"] = (
            take("pooler.dense.weight"),
            take("pooler.dense.bias"),
        )
    if strict:
        unused = sorted(
            k
            for k in sd
            if k.startswith(prefix) and k not in used and not k.endswith("position_ids")
        )
        if unused:
            raise ValueError(
                f"the BERT weights contain parts BERT would ignore, starting with {unused[0]!r}."
            )
    return w


def _prefix(sd: Mapping[str, Tensor]) -> str:
    return "bert." if "bert.embeddings.word_embeddings.weight" in sd else ""
