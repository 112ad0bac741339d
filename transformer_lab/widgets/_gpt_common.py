"""What the GPT explorers share: the trained character model, its prompt, its characters drawn.

Both explorers default to the shipped character model (``load_pretrained("tiny_gpt")``, val
loss 1.86 on tiny Shakespeare). Torch only: no widgets are imported here.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["char_label", "load_gpt", "encode_prompt"]


def char_label(ch: str) -> str:
    """A character as drawn on an axis (newline and space made visible)."""
    return {"\n": "⏎", " ": "␣"}.get(ch, ch)


def load_gpt(model, tokenizer):
    """``(model in eval mode, tokenizer)``; the shipped ``tiny_gpt`` when ``model`` is None."""
    if model is None:
        from transformer_lab.checkpoints import load_pretrained

        model, extras = load_pretrained("tiny_gpt")
        tokenizer = extras["tokenizer"] if tokenizer is None else tokenizer
    if tokenizer is None:
        raise ValueError("give the tokenizer that goes with the model (tokenizer=...).")
    return model.eval(), tokenizer


def encode_prompt(tokenizer, prompt: str, max_len: int) -> Tensor:
    """The last ``max_len`` characters of ``prompt`` as ids (1, T); a clear error if any is unknown."""
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt must be a non-empty string, but received {prompt!r}.")
    unknown = sorted({ch for ch in prompt if ch not in tokenizer.stoi})
    if unknown:
        raise ValueError(f"the prompt has characters outside the vocabulary: {unknown}.")
    return torch.tensor([tokenizer.encode(prompt)[-max_len:]])  # (1, T)
