"""Tiny Shakespeare, a character tokenizer, a 90/10 split and a random-batch sampler.

The text is the "tiny Shakespeare" file from Andrej Karpathy's char-rnn repository
(https://github.com/karpathy/char-rnn, ``data/tinyshakespeare/input.txt``): 1,115,394
characters of Shakespeare's plays, which are in the public domain. It ships inside the package,
so nothing is downloaded at run time.

A character-level language model reads a long stream of token ids. Training samples are
windows of ``block_size + 1`` consecutive ids taken at random places: the first ``block_size``
are the input ``x`` and the last ``block_size`` (the same window shifted by one) are the
targets ``y``, so every position t learns to predict token t + 1 from tokens 0..t.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "load_shakespeare",
    "CharTokenizer",
    "split_data",
    "get_batch",
    "TextData",
    "shakespeare",
]

_SHAKESPEARE_FILE = "tinyshakespeare.txt"


@lru_cache(maxsize=1)
def load_shakespeare() -> str:
    """The tiny Shakespeare text shipped with the package (1,115,394 characters)."""
    return (
        resources.files("transformer_lab.data")
        .joinpath(_SHAKESPEARE_FILE)
        .read_text(encoding="utf-8")
    )


def _code_points(text: str) -> np.ndarray:
    """Unicode code points of ``text`` as an int64 array, without a Python-level loop."""
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)


class CharTokenizer:
    """One token per distinct character, ids in sorted character order.

    Args:
        text: the characters to cover (every distinct character gets an id); defaults to
            tiny Shakespeare, which gives the 65-character vocabulary nanoGPT uses.
    """

    def __init__(self, text: str | None = None) -> None:
        text = load_shakespeare() if text is None else text
        if not isinstance(text, str) or not text:
            raise ValueError(
                f"CharTokenizer needs a non-empty string to build its vocabulary, but received {text!r:.40}."
            )
        self.chars: list[str] = sorted(set(text))
        self.stoi: dict[str, int] = {ch: i for i, ch in enumerate(self.chars)}
        self.itos: dict[int, str] = dict(enumerate(self.chars))
        # Lookup table from code point to id (-1 = unknown), so encoding a long text is one
        # vectorised gather instead of a million dictionary lookups.
        codes = [ord(ch) for ch in self.chars]
        self._table = np.full(max(codes) + 1, -1, dtype=np.int64)
        self._table[codes] = np.arange(len(codes))

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters V."""
        return len(self.chars)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"

    def _encode_array(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, but received {type(text).__name__}.")
        codes = _code_points(text)  # (L,)
        ids = np.full(codes.shape, -1, dtype=np.int64)
        known = codes < len(self._table)
        ids[known] = self._table[codes[known]]
        if (ids < 0).any():
            pos = int(np.flatnonzero(ids < 0)[0])
            unknown = sorted({ch for ch, i in zip(text, ids.tolist()) if i < 0})
            raise ValueError(
                f"encode expects only characters from the tokenizer's {self.vocab_size}-character "
                f"vocabulary, but received unknown character(s) {''.join(unknown)!r} "
                f"(first at position {pos})."
            )
        return ids

    def encode(self, text: str) -> list[int]:
        """Text to a list of ids; raises ValueError naming any character not in the vocabulary."""
        return self._encode_array(text).tolist()

    def encode_tensor(self, text: str) -> Tensor:
        """Text to a (L,) long tensor of ids (fast: the whole of Shakespeare takes milliseconds)."""
        return torch.from_numpy(self._encode_array(text))

    def decode(self, ids: Iterable[int] | Tensor | np.ndarray) -> str:
        """A 1-D sequence of ids (list, tensor or array) back to text."""
        if isinstance(ids, (Tensor, np.ndarray)):
            if ids.ndim != 1:
                raise ValueError(
                    f"decode expects a 1-D sequence of ids, but received shape {tuple(ids.shape)}; "
                    f"decode one row at a time, e.g. tokenizer.decode(ids[0])."
                )
            ids = ids.tolist()
        ids = list(ids)
        bad = [
            i for i in ids if not isinstance(i, (int, np.integer)) or not 0 <= i < self.vocab_size
        ]
        if bad:
            raise ValueError(
                f"decode expects integer ids in 0..{self.vocab_size - 1}, but received {bad[0]!r}."
            )
        return "".join(self.chars[i] for i in ids)


def split_data(data: Tensor, train_fraction: float = 0.9) -> tuple[Tensor, Tensor]:
    """Split a 1-D token stream into its first ``train_fraction`` (train) and the rest (val).

    A contiguous split (not a random one) keeps validation text unseen: random windows of a
    randomly split stream would overlap the training windows.

    Returns:
        (train (L_train,), val (L - L_train,)), views of ``data``.
    """
    if not isinstance(data, Tensor) or data.dim() != 1:
        got = tuple(data.shape) if isinstance(data, Tensor) else type(data).__name__
        raise ValueError(f"split_data expects a 1-D tensor of token ids, but received {got}.")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(
            f"train_fraction must lie strictly between 0 and 1, but received {train_fraction}."
        )
    n = int(train_fraction * len(data))
    return data[:n], data[n:]


def get_batch(
    data: Tensor,
    block_size: int,
    batch_size: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """Sample ``batch_size`` random windows from a token stream for next-token prediction.

    Args:
        data: (L,) token ids.
        block_size: context length T.
        batch_size: number of windows B.
        generator: a seeded ``torch.Generator`` for reproducible batches (default: the global RNG).
        device: where to put the batch (default: ``data``'s device).
    Returns:
        x (B, T) long and y (B, T) long with ``y[:, t] == x[:, t + 1]``: the targets are the
        inputs shifted one step to the left.
    """
    if not isinstance(data, Tensor) or data.dim() != 1:
        got = tuple(data.shape) if isinstance(data, Tensor) else type(data).__name__
        raise ValueError(
            f"get_batch expects data as a 1-D tensor of token ids, but received {got}."
        )
    if block_size < 1 or batch_size < 1:
        raise ValueError(
            f"block_size and batch_size must be positive, but received block_size={block_size} "
            f"and batch_size={batch_size}."
        )
    if len(data) < block_size + 1:
        raise ValueError(
            f"get_batch needs at least block_size + 1 = {block_size + 1} tokens to form one "
            f"(input, target) window, but received data of length {len(data)}."
        )
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    # unfold is a view of all overlapping windows (no copy); indexing copies only B of them.
    windows = data.unfold(0, block_size + 1, 1)[starts.to(data.device)]  # (B, T + 1)
    x = windows[:, :-1].long().contiguous()  # (B, T)
    y = windows[:, 1:].long().contiguous()  # (B, T)
    if device is not None:
        x, y = x.to(device), y.to(device)
    return x, y


@dataclass(frozen=True)
class TextData:
    """A tokenized text split into training and validation streams.

    Attributes:
        tokenizer: the :class:`CharTokenizer`.
        train: (L_train,) long, the first 90% of the text.
        val: (L_val,) long, the last 10%.
    """

    tokenizer: CharTokenizer
    train: Tensor
    val: Tensor

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def get_batch(
        self,
        split: str,
        block_size: int,
        batch_size: int,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
    ) -> tuple[Tensor, Tensor]:
        """:func:`get_batch` from the ``"train"`` or ``"val"`` stream."""
        if split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', but received {split!r}.")
        return get_batch(getattr(self, split), block_size, batch_size, generator, device)

    def __repr__(self) -> str:
        return (
            f"TextData(vocab_size={self.vocab_size}, train={len(self.train):,} tokens, "
            f"val={len(self.val):,} tokens)"
        )


@lru_cache(maxsize=4)
def _shakespeare_cached(train_fraction: float) -> TextData:
    text = load_shakespeare()
    tokenizer = CharTokenizer(text)
    train, val = split_data(tokenizer.encode_tensor(text), train_fraction)
    return TextData(tokenizer, train, val)


def shakespeare(train_fraction: float = 0.9) -> TextData:
    """Tiny Shakespeare, character-tokenized, split into the first 90% (train) and last 10% (val).

    Cached: repeated calls return the same object (treat its tensors as read-only).

    Example:
        >>> data = shakespeare()
        >>> x, y = data.get_batch("train", block_size=64, batch_size=12)
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(
            f"train_fraction must lie strictly between 0 and 1, but received {train_fraction}."
        )
    return _shakespeare_cached(float(train_fraction))
