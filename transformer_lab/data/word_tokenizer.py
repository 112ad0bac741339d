"""A lower-cased word-level tokenizer with BERT's special tokens, for the word-order task.

Words are letters with inner apostrophes ("know't", "ne'er"); every other non-space character
(punctuation, a leading apostrophe) is a token of its own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

__all__ = ["WordTokenizer", "SPECIAL_TOKENS"]

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)

_TOKEN_RE = re.compile(r"[a-z]+(?:'[a-z]+)*|[^\sa-z]")


class WordTokenizer:
    """Lower-cased word-level tokenizer with BERT's special tokens.

    Ids 0..4 are ``[PAD] [UNK] [CLS] [SEP] [MASK]``; then words by decreasing frequency. Words
    seen fewer than ``min_freq`` times map to ``[UNK]``.

    Args:
        texts: the texts to build the vocabulary from.
        min_freq: minimum count for a word to get its own id.
    """

    def __init__(self, texts: Iterable[str], min_freq: int = 3) -> None:
        self._build_vocab((self.tokenize(text) for text in texts), min_freq)

    @classmethod
    def from_tokens(cls, token_lists: Iterable[Sequence[str]], min_freq: int = 3) -> WordTokenizer:
        """Build from already tokenized texts (skips re-tokenizing)."""
        tokenizer = cls.__new__(cls)
        tokenizer._build_vocab(token_lists, min_freq)
        return tokenizer

    def _build_vocab(self, token_lists: Iterable[Sequence[str]], min_freq: int) -> None:
        if min_freq < 1:
            raise ValueError(f"min_freq must be at least 1, but received {min_freq}.")
        counts = Counter(tok for tokens in token_lists for tok in tokens)
        if not counts:
            raise ValueError(
                "WordTokenizer needs texts containing at least one word, but received none."
            )
        # Sort by count, then alphabetically, so the vocabulary never depends on set order.
        words = sorted(
            (w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w)
        )
        self.itos: list[str] = list(SPECIAL_TOKENS) + words
        self.stoi: dict[str, int] = {tok: i for i, tok in enumerate(self.itos)}
        self.min_freq = min_freq
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = range(5)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    @property
    def special_ids(self) -> tuple[int, ...]:
        return (self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id)

    @property
    def never_mask_ids(self) -> tuple[int, ...]:
        """Ids BERT's masking must never choose: [PAD], [CLS], [SEP] (``[UNK]`` stands for a real word)."""
        return (self.pad_id, self.cls_id, self.sep_id)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"WordTokenizer(vocab_size={self.vocab_size}, min_freq={self.min_freq})"

    @staticmethod
    def tokenize(text: str) -> list[str]:
        """Split text into lower-cased words and punctuation marks."""
        if not isinstance(text, str):
            raise TypeError(f"tokenize expects a str, but received {type(text).__name__}.")
        return _TOKEN_RE.findall(text.lower())

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(t, self.unk_id) for t in tokens]

    def encode(self, text: str | Sequence[str], max_len: int | None = None) -> list[int]:
        """``[CLS] tokens [SEP]`` as ids (unknown words -> ``[UNK]``), padded to ``max_len`` if given.

        Args:
            text: a string, or an already tokenized list of tokens.
            max_len: total length L including the specials; longer inputs raise ValueError.
        """
        tokens = self.tokenize(text) if isinstance(text, str) else list(text)
        ids = [self.cls_id] + self.convert_tokens_to_ids(tokens) + [self.sep_id]
        if max_len is not None:
            if len(ids) > max_len:
                raise ValueError(
                    f"the text needs {len(ids)} ids with [CLS] and [SEP], more than max_len={max_len}."
                )
            ids += [self.pad_id] * (max_len - len(ids))
        return ids

    def encode_batch(
        self, texts: Sequence[str | Sequence[str]], max_len: int
    ) -> tuple[Tensor, Tensor]:
        """Encode several texts to fixed length.

        Returns:
            input_ids (B, L) long and attention_mask (B, L) bool (True at real tokens).
        """
        ids = torch.tensor([self.encode(t, max_len) for t in texts], dtype=torch.long)  # (B, L)
        return ids, ids != self.pad_id

    def decode(self, ids: Sequence[int] | Tensor, skip_special: bool = True) -> str:
        """Ids back to text (words joined by spaces); ``[UNK]`` is kept, other specials dropped."""
        ids = ids.tolist() if isinstance(ids, Tensor) else list(ids)
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(
                f"decode expects ids in 0..{self.vocab_size - 1}, but received {bad[0]}."
            )
        drop = {self.pad_id, self.cls_id, self.sep_id} if skip_special else set()
        return " ".join(self.itos[i] for i in ids if i not in drop)
