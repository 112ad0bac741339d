"""BERT tasks from real text: is this Shakespeare line in its original word order, or shuffled?

A shuffled line holds exactly the same words as the original (the same bag of words), and in
the default form even its punctuation stays in place, so a model that ignores positions cannot
beat chance: the task isolates what positional information buys. Example::

    original   (label 1)  "what authority surfeits on would relieve us : if they"
    shuffled   (label 0)  "relieve authority us on would surfeits if : what they"

The same word-level tokenizer feeds masked-language-model pretraining (:meth:`WordOrderTask.mlm_batch`),
and :func:`unigram_entropy` / :func:`unigram_cross_entropy` give the baseline an MLM has to beat:
the loss of always predicting each token's overall frequency, whatever the context.

Lines come from tiny Shakespeare (see :mod:`transformer_lab.data.text`): speaker tags ("KING
RICHARD III:") and blank lines are dropped, duplicates removed, and the *distinct* lines are
split into train/val/test with a seed, so no line (original or shuffled) appears in two splits.
"""

from __future__ import annotations

import math
import random
from typing import NamedTuple

import torch
from torch import Tensor

from transformer_lab.data.shakespeare_lines import _all_lines, shakespeare_lines
from transformer_lab.data.unigram import unigram_cross_entropy
from transformer_lab.data.word_tokenizer import WordTokenizer

__all__ = ["ClassificationBatch", "MLMBatch", "WordOrderTask", "LABELS"]

LABELS = ("shuffled", "original")  # label 0 = shuffled, label 1 = original order


def _shuffle_words(tokens: list[str], rng: random.Random, keep_punctuation: bool) -> list[str]:
    """A permutation of ``tokens`` different from the original (words only, if ``keep_punctuation``)."""
    slots = (
        [i for i, t in enumerate(tokens) if t[0].isalpha()]
        if keep_punctuation
        else list(range(len(tokens)))
    )
    moved = [tokens[i] for i in slots]
    for _ in range(100):
        rng.shuffle(moved)
        if moved != [tokens[i] for i in slots]:
            break
    out = list(tokens)
    for i, tok in zip(slots, moved):
        out[i] = tok
    return out


class ClassificationBatch(NamedTuple):
    """input_ids (B, L) long, attention_mask (B, L) bool (True at real tokens), labels (B,) long."""

    input_ids: Tensor
    attention_mask: Tensor
    labels: Tensor


class MLMBatch(NamedTuple):
    """input_ids (B, L) long and attention_mask (B, L) bool of original lines, before masking."""

    input_ids: Tensor
    attention_mask: Tensor


class _Split(NamedTuple):
    lines: list[str]  # the source lines (originals)
    texts: list[str]  # what the classifier sees (original or shuffled), token-joined
    input_ids: Tensor  # (N, L)
    labels: Tensor  # (N,)
    mlm_ids: Tensor  # (N, L) the original lines


class WordOrderTask:
    """Original-or-shuffled classification and MLM text over Shakespeare lines.

    Every distinct line with ``min_words``..(``max_len`` - 2 tokens) is used once, either as is
    (label 1) or with its words shuffled (label 0); in each split exactly half (rounded down)
    are shuffled. Lines are split 80/10/10 (``fractions``) before anything else, and the
    vocabulary is built from the training lines only.

    Args:
        max_len: fixed sequence length L, including ``[CLS]`` and ``[SEP]``.
        min_words: shortest line used (short lines have few distinct orders).
        fractions: train/val/test shares of the distinct lines.
        min_freq: words rarer than this in the training lines become ``[UNK]``.
        keep_punctuation: shuffle only the words, leaving punctuation marks in their slots
            (harder: the model must judge the words' order, not spot a misplaced comma).
        seed: seed of the split, the labels and the shuffles.

    Example:
        >>> task = WordOrderTask()
        >>> batch = task.get_batch("train", batch_size=32)        # ClassificationBatch
        >>> mlm = task.mlm_batch("train", batch_size=32)            # MLMBatch
    """

    def __init__(
        self,
        max_len: int = 32,
        min_words: int = 5,
        fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
        min_freq: int = 3,
        keep_punctuation: bool = True,
        seed: int = 0,
    ) -> None:
        if max_len < min_words + 2:
            raise ValueError(
                f"max_len must leave room for [CLS], [SEP] and min_words={min_words} words, "
                f"but received max_len={max_len}."
            )
        if (
            len(fractions) != 3
            or any(f <= 0 for f in fractions)
            or not math.isclose(sum(fractions), 1.0)
        ):
            raise ValueError(
                f"fractions must be three positive shares (train, val, test) summing to 1, but received {fractions}."
            )
        self.max_len, self.min_words, self.seed = max_len, min_words, seed
        self.keep_punctuation = keep_punctuation
        tokens_of = _all_lines()
        lines = [
            line
            for line in shakespeare_lines(min_words, max_len - 2)
            if len({t for t in tokens_of[line] if t[0].isalpha()}) >= 2  # some order to break
        ]
        rng = random.Random(seed)
        rng.shuffle(lines)
        n_train = int(fractions[0] * len(lines))
        n_val = int(fractions[1] * len(lines))
        parts = {
            "train": lines[:n_train],
            "val": lines[n_train : n_train + n_val],
            "test": lines[n_train + n_val :],
        }
        self.tokenizer = WordTokenizer.from_tokens(
            (tokens_of[line] for line in parts["train"]), min_freq
        )
        self._splits = {
            name: self._build(part, random.Random(f"{seed}-{name}")) for name, part in parts.items()
        }

    def _build(self, lines: list[str], rng: random.Random) -> _Split:
        n = len(lines)
        shuffled = set(rng.sample(range(n), n // 2))
        originals, shown = [], []
        tokens_of = _all_lines()
        for i, line in enumerate(lines):
            tokens = list(tokens_of[line])
            originals.append(tokens)
            shown.append(
                _shuffle_words(tokens, rng, self.keep_punctuation) if i in shuffled else tokens
            )
        labels = torch.tensor(
            [0 if i in shuffled else 1 for i in range(n)], dtype=torch.long
        )  # (N,)
        input_ids, _ = self.tokenizer.encode_batch(shown, self.max_len)  # (N, L)
        mlm_ids, _ = self.tokenizer.encode_batch(originals, self.max_len)  # (N, L)
        return _Split(lines, [" ".join(t) for t in shown], input_ids, labels, mlm_ids)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def n_classes(self) -> int:
        return 2

    def _split(self, split: str) -> _Split:
        if split not in self._splits:
            raise ValueError(f"split must be 'train', 'val' or 'test', but received {split!r}.")
        return self._splits[split]

    def lines(self, split: str) -> list[str]:
        """The original source lines of a split (disjoint across splits)."""
        return list(self._split(split).lines)

    def texts(self, split: str) -> list[str]:
        """What the classifier sees for each example (tokens joined by spaces), aligned with labels."""
        return list(self._split(split).texts)

    def tensors(self, split: str) -> ClassificationBatch:
        """The whole split: input_ids (N, L), attention_mask (N, L), labels (N,)."""
        s = self._split(split)
        return ClassificationBatch(s.input_ids, s.input_ids != self.tokenizer.pad_id, s.labels)

    def get_batch(
        self,
        split: str = "train",
        batch_size: int = 32,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
    ) -> ClassificationBatch:
        """A random classification batch from ``"train"``, ``"val"`` or ``"test"``."""
        s = self._split(split)
        idx = self._sample(len(s.labels), batch_size, generator)  # (B,)
        ids = s.input_ids[idx]  # (B, L)
        batch = ClassificationBatch(ids, ids != self.tokenizer.pad_id, s.labels[idx])
        return ClassificationBatch(*(t.to(device) for t in batch)) if device is not None else batch

    def batches(self, split: str = "val", batch_size: int = 256):
        """One ordered pass over a split's classification examples (for evaluation)."""
        full = self.tensors(split)
        for start in range(0, len(full.labels), batch_size):
            yield ClassificationBatch(*(t[start : start + batch_size] for t in full))

    def mlm_batch(
        self,
        split: str = "train",
        batch_size: int = 32,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
    ) -> MLMBatch:
        """A random batch of *original* lines for masked-language-model pretraining.

        Apply BERT's masking (15% chosen; 80% [MASK], 10% random, 10% kept) to ``input_ids``,
        never choosing ``tokenizer.never_mask_ids`` ([PAD], [CLS], [SEP]), e.g. with
        ``transformer_lab.models.apply_bert_masking``.
        """
        s = self._split(split)
        idx = self._sample(len(s.labels), batch_size, generator)  # (B,)
        ids = s.mlm_ids[idx]  # (B, L)
        batch = MLMBatch(ids, ids != self.tokenizer.pad_id)
        return MLMBatch(*(t.to(device) for t in batch)) if device is not None else batch

    def mlm_tensors(self, split: str) -> MLMBatch:
        """All original lines of a split: input_ids (N, L) and attention_mask (N, L)."""
        ids = self._split(split).mlm_ids
        return MLMBatch(ids, ids != self.tokenizer.pad_id)

    def unigram_baseline(self, split: str = "val") -> float:
        """Cross-entropy (nats) of predicting each real token of ``split`` from training frequencies.

        The loss an MLM would get by ignoring the context; [PAD], [CLS] and [SEP] are excluded,
        since BERT's masking never chooses them.
        """
        return unigram_cross_entropy(
            self._split("train").mlm_ids,
            self._split(split).mlm_ids,
            self.vocab_size,
            ignore_ids=self.tokenizer.never_mask_ids,
        )

    @staticmethod
    def _sample(n: int, batch_size: int, generator: torch.Generator | None) -> Tensor:
        if not 1 <= batch_size <= n:
            raise ValueError(f"batch_size must lie in 1..{n}, but received {batch_size}.")
        return torch.randint(n, (batch_size,), generator=generator)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v.labels)}" for k, v in self._splits.items())
        return f"WordOrderTask({sizes}, max_len={self.max_len}, vocab_size={self.vocab_size})"
