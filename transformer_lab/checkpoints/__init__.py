"""Small trained models that ship with the package, so notebooks can skip training.

    tiny_gpt    tiny_gpt_shakespeare.pt   4-layer character GPT trained on tiny Shakespeare
                                          (nanoGPT's CPU recipe, benchmarks/bench_gpt_shakespeare.py)
    vit_digits  vit_digits.pt             tiny ViT trained on scikit-learn's 8x8 digits
                                          (benchmarks/bench_vit_digits.py)
    seq2seq_numbers  seq2seq_numbers.pt   tiny encoder-decoder, numbers in digits -> English
                                          words (benchmarks/bench_seq2seq.py)

``load_pretrained(name)`` returns ``(model, extras)``: the model in eval mode, and a dict with
what goes with it (the GPT's ``tokenizer``; the figures measured when it was saved). The files
were written by :func:`transformer_lab.train.save_checkpoint`; rerun the benchmark with
``--save`` to regenerate them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from torch import nn

__all__ = ["PRETRAINED", "checkpoint_path", "load_pretrained"]

PRETRAINED = {
    "tiny_gpt": "tiny_gpt_shakespeare.pt",
    "vit_digits": "vit_digits.pt",
    "seq2seq_numbers": "seq2seq_numbers.pt",
}
"""Name accepted by :func:`load_pretrained` -> file in this folder."""


def checkpoint_path(name: str) -> Path:
    """The file of a shipped checkpoint (``"tiny_gpt"``, ``"vit_digits"`` or ``"seq2seq_numbers"``)."""
    if name not in PRETRAINED:
        raise ValueError(f"name must be one of {sorted(PRETRAINED)}, but received {name!r}.")
    path = Path(str(resources.files(__name__).joinpath(PRETRAINED[name])))
    if not path.is_file():
        raise FileNotFoundError(
            f"expected the shipped checkpoint {PRETRAINED[name]!r} in {path.parent}, but it is missing; "
            f"regenerate it with the matching benchmark script and --save."
        )
    return path


def load_pretrained(name: str) -> tuple[nn.Module, dict[str, Any]]:
    """Load a shipped model by name.

    Args:
        name: ``"tiny_gpt"`` (a :class:`~transformer_lab.models.GPT`), ``"vit_digits"``
            (a :class:`~transformer_lab.models.ViT`) or ``"seq2seq_numbers"`` (a
            :class:`~transformer_lab.models.Seq2SeqTransformer` for
            :class:`~transformer_lab.data.NumberTranslation`).
    Returns:
        ``(model, extras)``: the model in eval mode on the CPU; extras holds what was saved with
        it (e.g. ``val_loss``, ``test_accuracy``) plus, for ``"tiny_gpt"``, the ``tokenizer``
        (a :class:`~transformer_lab.data.CharTokenizer`).

    Example:
        >>> model, extras = load_pretrained("tiny_gpt")
        >>> tok = extras["tokenizer"]
        >>> print(tok.decode(model.generate(torch.tensor([tok.encode("ROMEO:")]), 100)[0]))
    """
    # Imported here: the models import torch modules that a bare ``import transformer_lab`` avoids.
    from transformer_lab.models import (
        GPT,
        GPTConfig,
        Seq2SeqConfig,
        Seq2SeqTransformer,
        ViT,
        ViTConfig,
    )
    from transformer_lab.train import load_checkpoint

    path = checkpoint_path(name)
    ckpt = load_checkpoint(path)
    extras = dict(ckpt.get("extra") or {})
    extras["step"] = ckpt.get("step")
    if name == "tiny_gpt":
        from transformer_lab.data import CharTokenizer

        model: nn.Module = GPT(GPTConfig(**ckpt["config"]))
        extras["tokenizer"] = CharTokenizer(extras["vocab"])
    elif name == "seq2seq_numbers":
        model = Seq2SeqTransformer(Seq2SeqConfig(**ckpt["config"]))
    else:
        config = dict(ckpt["config"])
        if isinstance(
            config.get("image_size"), list
        ):  # a (height, width) pair comes back as a list
            config["image_size"] = tuple(config["image_size"])
        model = ViT(ViTConfig(**config))
    model.load_state_dict(ckpt["model"])
    return model.eval(), extras
