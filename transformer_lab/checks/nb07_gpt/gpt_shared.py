"""What notebook 07's model checks share (the GPT from blocks in gpt_model.py, greedy decoding in
kv_cache.py): seeded random GPTs to compare with, the references they forbid, and the hint for
a model that returns a tuple.
"""

from __future__ import annotations

import torch

from transformer_lab.checks.engine.core import generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.models import gpt as _gpt

__all__ = ["random_gpt", "forbidden_gpt", "tuple_hint"]


def random_gpt(config: _gpt.GPTConfig, seed: int, scale: float = 0.3) -> _gpt.GPT:
    """The package's GPT with large seeded random weights (GPT-2's tiny initial weights make
    attention nearly uniform and would hide a missing mask or a wrong position)."""
    torch.manual_seed(seed)  # only for the constructor's own init, overwritten below
    model = _gpt.GPT(config).eval()
    g = generator(seed)
    with torch.no_grad():
        for module in model.modules():
            is_norm = "Norm" in type(module).__name__
            for name, p in module.named_parameters(recurse=False):
                offset = 1.0 if is_norm and name == "weight" else 0.0
                p.copy_(torch.randn(p.shape, generator=g) * scale + offset)
    return model


def forbidden_gpt() -> list[Forbidden]:
    items = [Forbidden("the package's GPT.forward", function=_gpt.GPT.forward)]
    generate = _gpt.GPT.generate
    items.append(
        Forbidden("the package's GPT.generate", function=getattr(generate, "__wrapped__", generate))
    )
    if hasattr(_gpt.GPT, "_forward_cached"):
        items.append(Forbidden("the package's cached decoding", function=_gpt.GPT._forward_cached))
    return items


def tuple_hint(exc: BaseException) -> str:
    text = str(exc)
    if "tuple" in text:
        return "Block returns (x, weights): unpack it, x, _ = block(x, ...)"
    if "cannot assign" in text and "list" in text and "child module" in text:
        return (
            "self.blocks must stay an nn.ModuleList: a plain Python list hides the blocks' "
            "parameters from the model (parameters(), state_dict(), .to())"
        )
    if "index out of range" in text or "out of bounds" in text:
        return (
            "an index past the end of a table: the positions run 0..T-1 (torch.arange(T)), and "
            "the position table is indexed with positions, not with token ids"
        )
    return ""
