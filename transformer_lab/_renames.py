"""Names used before the vocabulary was frozen, how checkpoints written with them load, and
modules that moved.

Checkpoints saved before the one-``Block`` rename (CHANGELOG, 0.1.0) store config fields
``n_layer``/``n_head``/``block_size`` and block weights under ``norm1``/``norm2``/``norm3`` and
``ffn``. :func:`upgrade_checkpoint` rewrites both to today's names, so old files keep loading.

Modules that moved (:data:`MOVED_MODULES`) still import under their old names, with a
DeprecationWarning: :func:`install_module_aliases` puts a finder on ``sys.meta_path`` that hands
out the module at its new place, so old and new name are one module object.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import re
import sys
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the grading process imports this module without PyTorch
    from torch import Tensor

__all__ = [
    "CONFIG_RENAMES",
    "MOVED_MODULES",
    "install_module_aliases",
    "upgrade_config",
    "upgrade_state_dict",
    "upgrade_checkpoint",
]

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


MOVED_MODULES = {
    f"transformer_lab.{name}": f"transformer_lab.lessons.{name}"
    for name in (
        "baselines",
        "extrapolation",
        "induction",
        "length_batching",
        "readouts",
        "span",
        "tokens_compare",
    )
}
_GRADING_MOVES = {
    "cell_tags": "authoring.tags",
    "authoring": "authoring.author",
    "release": "authoring.release",
    "integrity": "preflight.integrity",
    "notebook_repair": "preflight.repair",
    "nofollow": "preflight.nofollow",
    "execute": "run.execute",
    "sandbox": "run.sandbox",
    "bwrap": "run.bwrap",
    "cpushare": "run.cpushare",
    "lanes": "run.lanes",
    "parallel": "run.parallel",
    "outputs": "run.outputs",
    "judge": "decide.judge",
    "remote": "decide.remote",
    "remote_calls": "decide.calls",
    "plain_data": "decide.plain_data",
    "review": "scan.flags",
    "forbidden": "scan.forbidden",
    "similarity": "scan.similarity",
    "winnowing": "scan.winnowing",
    "source_facts": "scan.source_facts",
    "database": "record.gradebook",
    "decisions": "record.decisions",
    "review_command": "channels.review",
    "roster": "channels.roster",
    "report": "record.report",
    "export": "channels.export",
    "feedback": "channels.feedback",
    "outcome": "record.outcome",
    "formgrader_guard": "channels.formgrader",
}
MOVED_MODULES.update(
    {
        f"transformer_lab.grading.{old}": f"transformer_lab.grading.{new}"
        for old, new in _GRADING_MOVES.items()
    }
)
"""Old module name -> its place now (CHANGELOG.md, Unreleased: the lesson helpers and the grading
steps; an existing course's nbgrader_config.py naming ``transformer_lab.grading.feedback`` keeps
working)."""


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec):  # noqa: ANN001 - importlib's protocol
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:  # noqa: ANN001 - already executed under its new name
        pass


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds an old module name and hands out the module at its new place."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001
        new = MOVED_MODULES.get(fullname)
        if new is None:
            return None
        warnings.warn(
            f"{fullname} moved to {new}; import it from there (the old name will be removed)",
            DeprecationWarning,
            stacklevel=3,
        )
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install_module_aliases() -> None:
    """Let the old names in :data:`MOVED_MODULES` import (once; ``import transformer_lab`` does it)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
