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
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import NamedTuple

import torch
from torch import Tensor

from transformer_lab.data.text import load_shakespeare

__all__ = [
    "WordTokenizer",
    "shakespeare_lines",
    "ClassificationBatch",
    "MLMBatch",
    "WordOrderTask",
    "unigram_entropy",
    "unigram_cross_entropy",
    "LABELS",
]

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
LABELS = ("shuffled", "original")  # label 0 = shuffled, label 1 = original order

# A word is letters with inner apostrophes ("know't", "ne'er"); every other non-space
# character (punctuation, a leading apostrophe) is a token of its own.
_TOKEN_RE = re.compile(r"[a-z]+(?:'[a-z]+)*|[^\sa-z]")
_SPEAKER_RE = re.compile(r"^(?:[A-Z][\w'-]*\s?){1,4}:$")


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


def _is_speaker_tag(line: str) -> bool:
    return bool(_SPEAKER_RE.match(line))


@lru_cache(maxsize=1)
def _all_lines() -> dict[str, tuple[str, ...]]:
    """Distinct non-empty, non-speaker lines of tiny Shakespeare (in order of first appearance),
    each mapped to its tokens; cached because several tasks read them."""
    lines: dict[str, tuple[str, ...]] = {}
    for raw in load_shakespeare().split("\n"):
        line = raw.strip()
        if line and line not in lines and not _is_speaker_tag(line):
            lines[line] = tuple(WordTokenizer.tokenize(line))
    return lines


def shakespeare_lines(min_words: int = 1, max_tokens: int | None = None) -> list[str]:
    """Distinct lines of tiny Shakespeare's speeches (speaker tags and blank lines removed).

    Args:
        min_words: keep lines with at least this many words.
        max_tokens: keep lines of at most this many tokens (words + punctuation).
    """
    out = []
    for line, tokens in _all_lines().items():
        n_words = sum(t[0].isalpha() for t in tokens)
        if n_words >= min_words and (max_tokens is None or len(tokens) <= max_tokens):
            out.append(line)
    return out


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


def _token_counts(ids: Tensor, vocab_size: int, ignore_ids: Sequence[int]) -> Tensor:
    flat = torch.as_tensor(ids).reshape(-1).long()  # (L,)
    if flat.numel() and (flat.min() < 0 or flat.max() >= vocab_size):
        raise ValueError(
            f"token ids must lie in 0..{vocab_size - 1}, but received ids from {int(flat.min())} to {int(flat.max())}."
        )
    counts = torch.bincount(flat, minlength=vocab_size).double()  # (V,)
    counts[list(ignore_ids)] = 0.0
    return counts


def unigram_entropy(
    ids: Tensor, vocab_size: int | None = None, ignore_ids: Sequence[int] = ()
) -> float:
    """Entropy (nats) of the token frequencies in ``ids``: the best loss any context-free predictor
    can reach on this same data.

    Args:
        ids: token ids of any shape.
        vocab_size: V (default: max id + 1).
        ignore_ids: ids left out of both the counts and the average (e.g. padding).
    """
    ids = torch.as_tensor(ids)
    vocab_size = int(ids.max()) + 1 if vocab_size is None else vocab_size
    counts = _token_counts(ids, vocab_size, ignore_ids)
    total = counts.sum()
    if total == 0:
        raise ValueError(
            "unigram_entropy needs at least one token that is not ignored, but received none."
        )
    p = counts[counts > 0] / total
    return float(-(p * p.log()).sum())


def unigram_cross_entropy(
    train_ids: Tensor,
    eval_ids: Tensor,
    vocab_size: int,
    ignore_ids: Sequence[int] = (),
    alpha: float = 1.0,
) -> float:
    """Mean cross-entropy (nats) of ``eval_ids`` under the unigram frequencies of ``train_ids``.

    Frequencies use add-``alpha`` smoothing over the non-ignored vocabulary, so a token never
    seen in training gets a small, finite probability.
    """
    if alpha <= 0:
        raise ValueError(
            f"alpha must be positive so unseen tokens get a finite loss, but received {alpha}."
        )
    counts = _token_counts(train_ids, vocab_size, ignore_ids)
    keep = torch.ones(vocab_size, dtype=torch.bool)
    keep[list(ignore_ids)] = False
    smoothed = torch.where(keep, counts + alpha, torch.zeros_like(counts))  # (V,)
    log_p = (smoothed / smoothed.sum()).log()  # (V,), -inf at ignored ids
    eval_counts = _token_counts(eval_ids, vocab_size, ignore_ids)
    if eval_counts.sum() == 0:
        raise ValueError(
            "unigram_cross_entropy needs at least one evaluation token that is not ignored."
        )
    return float(-(eval_counts[keep] * log_p[keep]).sum() / eval_counts.sum())
