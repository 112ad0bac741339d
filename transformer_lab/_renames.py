"""Names used before the vocabulary was frozen, and how checkpoints written with them load.

Checkpoints saved before the one-``Block`` rename (CHANGELOG, 0.1.0) store config fields
``n_layer``/``n_head``/``block_size`` and block weights under ``norm1``/``norm2``/``norm3`` and
``ffn``. :func:`upgrade_checkpoint` rewrites both to today's names, so old files keep loading.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from torch import Tensor

__all__ = ["CONFIG_RENAMES", "upgrade_config", "upgrade_state_dict", "upgrade_checkpoint"]

CONFIG_RENAMES = {"n_layer": "n_layers", "n_head": "n_heads", "block_size": "max_len"}
"""Old config field -> new config field."""

# "blocks.3.norm2.weight" -> ("blocks.3.", "norm2", ".weight")
_BLOCK_KEY = re.compile(
    r"^(.*?\b(?:blocks|encoder_layers|decoder_layers)\.\d+\.)(norm[123]|ffn)(\..*)$"
)


def upgrade_config(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Rename old config fields; a dict that already uses the new names comes back unchanged."""
    if config is None:
        return None
    return {CONFIG_RENAMES.get(k, k): v for k, v in config.items()}


def upgrade_state_dict(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Rename old block parameters to the :class:`~transformer_lab.blocks.Block` names.

    ``ffn`` becomes ``mlp`` and ``norm1`` becomes ``self_attn_norm``. A block that had a
    ``norm3`` was a decoder block: its ``norm2`` was the cross-attention norm and ``norm3`` the
    MLP norm; in any other block ``norm2`` was the MLP norm.
    """
    decoders = {m.group(1) for k in state if (m := _BLOCK_KEY.match(k)) and m.group(2) == "norm3"}
    out = {}
    for key, value in state.items():
        m = _BLOCK_KEY.match(key)
        if m is None:
            out[key] = value
            continue
        prefix, old, rest = m.groups()
        new = {
            "ffn": "mlp",
            "norm1": "self_attn_norm",
            "norm2": "cross_attn_norm" if prefix in decoders else "mlp_norm",
            "norm3": "mlp_norm",
        }[old]
        out[prefix + new + rest] = value
    return out


def upgrade_checkpoint(ckpt: dict[str, Any]) -> dict[str, Any]:
    """Apply :func:`upgrade_config` and :func:`upgrade_state_dict` to a loaded checkpoint dict."""
    ckpt = dict(ckpt)
    ckpt["model"] = upgrade_state_dict(ckpt["model"])
    if isinstance(ckpt.get("config"), Mapping):
        ckpt["config"] = upgrade_config(ckpt["config"])
    return ckpt
