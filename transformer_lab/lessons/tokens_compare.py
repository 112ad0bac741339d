"""Characters or subwords? One language model on two tokenizations, compared per character
(notebook 07 and ``benchmarks/bench_bpe_gpt.py``).

A loss per token does not compare across tokenizers: a BPE token stands for about two
characters, so predicting it is a harder question than predicting one character, and its loss
is larger for the same quality of model. What both models predict is the same text, so both
are scored by the **total** cross-entropy of the held-out text divided by the number of
characters it covers (nats per character). For characters the two measures are the same number.

    EncodedText          a text's training and held-out token streams, and the characters of each token id
    encode_characters    one token per character (the course's ``CharTokenizer``)
    encode_bpe           byte-level BPE (``transformer_lab.bpe``), merges learned on the training part
    chars_per_token      how many characters each BPE token id covers
    loss_per_char        total cross-entropy over held-out windows / the characters they predict
    train_tokens_model   ``GPTConfig.tiny`` trained on one encoding, evaluated per character

A character is counted in the token that holds its first UTF-8 byte, so the counts of a text's
tokens add up to ``len(text)`` even when a token ends inside a character.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import bpe
from transformer_lab.data.text import CharTokenizer, get_batch
from transformer_lab.models import GPT, GPTConfig
from transformer_lab.train import History, seed_everything, train
from transformer_lab.train.evaluation import EvalMode
from transformer_lab.train.losses import logits_of

__all__ = [
    "EncodedText",
    "encode_characters",
    "encode_bpe",
    "chars_per_token",
    "loss_per_char",
    "train_tokens_model",
]


@dataclass(frozen=True)
class EncodedText:
    """A text cut into training and held-out parts, both as token ids.

    Attributes:
        name: a label for tables and plots ("characters", "BPE, 512 merges").
        train: (N_train,) long ids of the first part of the text.
        val: (N_val,) long ids of the rest.
        char_counts: (V,) long, how many characters token id ``i`` covers.
        merges: the BPE merges (empty for characters).
    """

    name: str
    train: Tensor
    val: Tensor
    char_counts: Tensor
    merges: tuple[tuple[int, int], ...] = ()

    @property
    def vocab_size(self) -> int:
        return len(self.char_counts)

    def chars(self, ids: Tensor) -> int:
        """How many characters the token ids ``ids`` cover."""
        return int(self.char_counts[ids].sum())

    def val_prefix(self, n_chars: int | None) -> Tensor:
        """The held-out tokens from the start that cover at most ``n_chars`` characters
        (``None``: all of them). Two encodings of one text then score the same characters."""
        if n_chars is None:
            return self.val
        covered = self.char_counts[self.val].cumsum(0)  # (N_val,)
        return self.val[: int(torch.searchsorted(covered, n_chars, right=True))]


def _split_point(text: str, train_fraction: float) -> int:
    if not isinstance(text, str) or len(text) < 2:
        raise ValueError(f"expected a str of at least 2 characters, but received {text!r:.40}.")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(
            f"train_fraction must lie strictly between 0 and 1, but received {train_fraction}."
        )
    return int(train_fraction * len(text))  # the split of data.shakespeare()


def encode_characters(text: str, train_fraction: float = 0.9) -> EncodedText:
    """One token per distinct character of ``text``; every token covers one character."""
    split = _split_point(text, train_fraction)
    tokenizer = CharTokenizer(text)
    ids = tokenizer.encode_tensor(text)  # (len(text),)
    ones = torch.ones(tokenizer.vocab_size, dtype=torch.long)
    return EncodedText("characters", ids[:split], ids[split:], ones)


def chars_per_token(merges: Sequence[tuple[int, int]]) -> Tensor:
    """(256 + len(merges),) long: the characters each BPE token covers, i.e. the UTF-8 bytes
    in it that start a character (every byte but the continuation bytes 0b10xxxxxx)."""
    vocab = bpe.token_bytes(merges)
    return torch.tensor([sum(b & 0xC0 != 0x80 for b in token) for token in vocab])


@lru_cache(maxsize=4)
def encode_bpe(
    text: str, n_merges: int, train_fraction: float = 0.9, merge_chars: int | None = None
) -> EncodedText:
    """Byte-level BPE with ``n_merges`` merges learned on the training part of ``text`` (its
    first ``merge_chars`` characters if given, which is faster), both parts encoded with them.

    Cached: a second call with the same arguments returns the same object (treat its tensors
    as read-only), so re-running a notebook cell does not learn the merges again."""
    split = _split_point(text, train_fraction)
    merges = bpe.train_merges(text[:split][:merge_chars], n_merges)
    train = torch.tensor(bpe.encode(text[:split], merges))  # (N_train,)
    val = torch.tensor(bpe.encode(text[split:], merges))  # (N_val,)
    name = f"BPE, {len(merges)} merges"
    return EncodedText(name, train, val, chars_per_token(merges), tuple(map(tuple, merges)))


def loss_per_char(
    model: nn.Module, ids: Tensor, char_counts: Tensor, block_size: int, batch_size: int = 64
) -> float:
    """Nats per character of a held-out token stream: the model reads non-overlapping windows
    of ``block_size`` tokens (the last one shorter) and predicts every token after the first;
    the summed cross-entropy is divided by the characters those predicted tokens cover.

    Args:
        model: a language model, ``model((B, T) ids)`` -> (B, T, V) logits (or ``.logits``).
        ids: (N,) long token ids, N >= 2.
        char_counts: (V,) characters covered by each token id (all ones for characters).
        block_size: the context T of each window.
    Returns:
        total cross-entropy / characters, in nats (for characters: the mean loss per token).
    """
    if not isinstance(ids, Tensor) or ids.dim() != 1 or len(ids) < 2:
        got = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
        raise ValueError(
            f"expected ids as a 1-D tensor of at least 2 token ids, but received {got}."
        )
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, but received {block_size!r}.")
    n = len(ids) - 1  # predicted tokens
    full = n // block_size
    x = ids[: full * block_size].view(full, block_size)  # (W, T)
    y = ids[1 : full * block_size + 1].view(full, block_size)  # (W, T)
    pieces = [(x[i : i + batch_size], y[i : i + batch_size]) for i in range(0, full, batch_size)]
    if n > full * block_size:  # the last, shorter window
        pieces.append((ids[full * block_size : n][None], ids[full * block_size + 1 :][None]))
    total = 0.0
    with EvalMode(model):
        for inputs, targets in pieces:
            logits = logits_of(model(inputs))  # (b, t, V)
            total += F.cross_entropy(
                logits.flatten(0, 1), targets.flatten(), reduction="sum"
            ).item()
    return total / int(char_counts[ids[1:]].sum())


def train_tokens_model(
    encoded: EncodedText,
    block_size: int,
    steps: int,
    *,
    batch_size: int = 12,
    eval_chars: int | None = 8192,
    seed: int = 0,
    **settings: Any,
) -> tuple[nn.Module, History]:
    """``GPT(GPTConfig.tiny(vocab_size=encoded.vocab_size, max_len=block_size))`` trained with
    the course's recipe (``train``'s defaults, lr 1e-3) on random windows of ``encoded.train``.

    Each evaluation is :func:`loss_per_char` on the held-out tokens covering the first
    ``eval_chars`` characters, so ``history.eval_loss`` is in **nats per character**.
    ``settings`` go to ``train`` (``eval_every=``, ``progress=``, ...).
    """
    seed_everything(seed)
    model = GPT(GPTConfig.tiny(vocab_size=encoded.vocab_size, max_len=block_size))
    generator = torch.Generator().manual_seed(seed)
    held_out = encoded.val_prefix(eval_chars)
    history = train(
        model,
        lambda: get_batch(encoded.train, block_size, batch_size, generator=generator),
        eval_fn=lambda m: loss_per_char(m, held_out, encoded.char_counts, block_size),
        steps=steps,
        lr=settings.pop("lr", 1e-3),
        desc=settings.pop("desc", encoded.name),
        **settings,
    )
    return model, history
