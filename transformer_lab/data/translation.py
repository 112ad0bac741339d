"""A generated toy translation task for the encoder-decoder: numbers in digits to English words.

    "4207"  ->  "four thousand two hundred and seven"
    "90"    ->  "ninety"
    "1015"  ->  "one thousand and fifteen"

British usage ("and" before the last part). Compound tens are written as two words
("forty two") so the target vocabulary stays at 31 words. The task needs what an
encoder-decoder provides: the source is read whole (the first word depends on how many digits
follow), the target is generated left to right, and the output length differs from the input
length. The source is tokenized per character (one digit per token), the target per word.

Both vocabularies put the special tokens at the same ids: ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2.
The split is a seeded permutation of the numbers, so train and test never share a number.
The module stays whole (about 300 lines) because the words rule, the two vocabularies and the
batches are one small task that reads best top to bottom.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from transformer_lab.data.batching import IGNORE_INDEX, pad_sequences
from transformer_lab.masks import causal_mask, combine_masks, padding_mask_from_ids

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "Vocab",
    "number_to_words",
    "TranslationBatch",
    "NumberTranslation",
]

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def _below_hundred(n: int) -> list[str]:
    if n < 20:
        return [_ONES[n]]
    tens, ones = divmod(n, 10)
    return [_TENS[tens]] + ([_ONES[ones]] if ones else [])


def number_to_words(n: int) -> str:
    """Write 0 <= n <= 999,999 in British English words, e.g. 4207 -> "four thousand two hundred and seven"."""
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 999_999:
        raise ValueError(f"number_to_words expects an integer in 0..999999, but received {n!r}.")
    if n == 0:
        return "zero"
    thousands, rest = divmod(n, 1000)
    hundreds, last = divmod(rest, 100)
    words: list[str] = []
    if thousands:
        words += number_to_words(thousands).split() + ["thousand"]
    if hundreds:
        words += [_ONES[hundreds], "hundred"]
    if last:
        if words:  # "two hundred and seven", "four thousand and seven"
            words.append("and")
        words += _below_hundred(last)
    return " ".join(words)


class Vocab:
    """A fixed token list with ``<pad>``, ``<bos>``, ``<eos>`` at ids 0, 1, 2.

    Args:
        tokens: the ordinary tokens (characters or words), in id order after the specials.
    """

    def __init__(self, tokens: Sequence[str]) -> None:
        self.itos: list[str] = [PAD, BOS, EOS] + list(tokens)
        self.stoi: dict[str, int] = {tok: i for i, tok in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError(
                f"Vocab expects distinct tokens, but received duplicates in {list(tokens)}."
            )
        self.pad_id, self.bos_id, self.eos_id = PAD_ID, BOS_ID, EOS_ID

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def size(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        return f"Vocab(size={self.size}, tokens={self.itos[3:8]}...)"

    def encode(
        self, tokens: Sequence[str], add_bos: bool = False, add_eos: bool = False
    ) -> list[int]:
        """Tokens to ids; raises ValueError naming the first unknown token."""
        unknown = [t for t in tokens if t not in self.stoi]
        if unknown:
            raise ValueError(
                f"every token must be in the vocabulary ({', '.join(self.itos[3:])}), "
                f"but received unknown token {unknown[0]!r}."
            )
        ids = [self.stoi[t] for t in tokens]
        return ([self.bos_id] if add_bos else []) + ids + ([self.eos_id] if add_eos else [])

    def decode(self, ids: Sequence[int] | Tensor) -> list[str]:
        """Ids to tokens, dropping ``<bos>``/``<pad>`` and stopping at the first ``<eos>``."""
        ids = ids.tolist() if isinstance(ids, Tensor) else list(ids)
        out = []
        for i in ids:
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            if not 0 <= i < len(self.itos):
                raise ValueError(
                    f"decode expects ids in 0..{len(self.itos) - 1}, but received {i}."
                )
            out.append(self.itos[i])
        return out


class TranslationBatch(NamedTuple):
    """One padded batch for teacher-forced training of an encoder-decoder.

    Attributes:
        src: (B, S) source ids, right-padded with ``<pad>``.
        tgt: (B, T) decoder input ``<bos> w1 .. wn`` then ``<pad>``.
        targets: (B, T) what each decoder position must predict, ``w1 .. wn <eos>``, then
            -100 (ignored by ``cross_entropy``) exactly where ``tgt`` is padding.

    The field names match ``Seq2SeqTransformer.forward(src, tgt, targets)``, so
    ``model(*batch)`` or ``model(**batch._asdict())`` returns the loss.
    """

    src: Tensor
    tgt: Tensor
    targets: Tensor

    @property
    def src_mask(self) -> Tensor:
        """(B, 1, 1, S) bool, True at real source tokens (for encoder self- and cross-attention)."""
        return padding_mask_from_ids(self.src, PAD_ID)

    @property
    def tgt_mask(self) -> Tensor:
        """(B, 1, T, T) bool: causal AND not padding, for the decoder's self-attention."""
        T = self.tgt.shape[1]
        return combine_masks(
            causal_mask(T, device=self.tgt.device), padding_mask_from_ids(self.tgt, PAD_ID)
        )

    def to(self, device: torch.device | str) -> TranslationBatch:
        return TranslationBatch(*(t.to(device) for t in self))


@dataclass(frozen=True)
class _Split:
    numbers: tuple[int, ...]
    src: Tensor  # (N, S)
    tgt: Tensor  # (N, T + 1): <bos> words <eos> <pad>...


class NumberTranslation:
    """Numbers 0..max_number, digits -> words, with a seeded train/test split.

    Args:
        max_number: the largest number in the task (at most 999,999).
        test_fraction: share of the numbers held out for testing.
        seed: seed of the split; the same seed always gives the same split.

    Example:
        >>> task = NumberTranslation()
        >>> batch = task.get_batch("train", batch_size=64)
        >>> batch.src.shape, batch.tgt.shape, batch.targets.shape   # (64, 4), (64, 8), (64, 8)
        >>> task.decode_target(batch.targets[0])
    """

    def __init__(self, max_number: int = 9999, test_fraction: float = 0.1, seed: int = 0) -> None:
        if not isinstance(max_number, int) or not 10 <= max_number <= 999_999:
            raise ValueError(
                f"max_number must be an integer in 10..999999, but received {max_number!r}."
            )
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(
                f"test_fraction must lie strictly between 0 and 1, but received {test_fraction}."
            )
        self.max_number, self.test_fraction, self.seed = max_number, test_fraction, seed
        self.src_vocab = Vocab(list("0123456789"))
        self.tgt_vocab = Vocab(_ONES + _TENS[2:] + ["hundred", "thousand", "and"])
        self.pad_id, self.bos_id, self.eos_id = PAD_ID, BOS_ID, EOS_ID

        n = max_number + 1
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
        n_test = max(1, round(test_fraction * n))
        test_numbers, train_numbers = sorted(order[:n_test]), sorted(order[n_test:])
        self.max_src_len = len(str(max_number))
        self.max_tgt_len = 2 + max(
            len(number_to_words(k).split()) for k in range(n)
        )  # with <bos>, <eos>
        self._splits = {"train": self._build(train_numbers), "test": self._build(test_numbers)}

    def _build(self, numbers: list[int]) -> _Split:
        src = self.encode_source(numbers)
        tgt = pad_sequences(
            [
                self.tgt_vocab.encode(number_to_words(k).split(), add_bos=True, add_eos=True)
                for k in numbers
            ],
            PAD_ID,
            self.max_tgt_len,
        )
        return _Split(tuple(numbers), src, tgt)

    def numbers(self, split: str) -> tuple[int, ...]:
        """The numbers in ``"train"`` or ``"test"`` (sorted)."""
        return self._split(split).numbers

    def pairs(self, split: str) -> list[tuple[str, str]]:
        """(source, target) strings of a split, e.g. ("4207", "four thousand two hundred and seven")."""
        return [(str(k), number_to_words(k)) for k in self.numbers(split)]

    def encode_source(self, numbers: Sequence[int | str]) -> Tensor:
        """Numbers (ints or digit strings) to padded source ids (B, S) with S = ``max_src_len``."""
        seqs = []
        for k in numbers:
            digits = str(k)
            if not digits.isdigit() or int(digits) > self.max_number:
                raise ValueError(
                    f"sources must be whole numbers in 0..{self.max_number}, but received {k!r}."
                )
            seqs.append(self.src_vocab.encode(list(str(int(digits)))))
        return pad_sequences(seqs, PAD_ID, self.max_src_len)

    def decode_source(self, ids: Sequence[int] | Tensor) -> str:
        """(S,) source ids back to the digit string."""
        return "".join(self.src_vocab.decode(ids))

    def decode_target(self, ids: Sequence[int] | Tensor) -> str:
        """(T,) target ids (or a model's greedy output) back to words, stopping at ``<eos>``.

        -100 entries (ignored targets) are skipped.
        """
        ids = ids.tolist() if isinstance(ids, Tensor) else list(ids)
        return " ".join(self.tgt_vocab.decode([i for i in ids if i != IGNORE_INDEX]))

    def _split(self, split: str) -> _Split:
        if split not in self._splits:
            raise ValueError(f"split must be 'train' or 'test', but received {split!r}.")
        return self._splits[split]

    @staticmethod
    def _make_batch(src: Tensor, full: Tensor, device) -> TranslationBatch:
        """Split ``<bos> w1 .. wn <eos> <pad>..`` (B, T + 1) into decoder inputs and targets."""
        tgt = full[:, :-1].clone()  # (B, T): <bos> w1 .. wn <eos> <pad> ...
        tgt[tgt == EOS_ID] = PAD_ID  # <eos> is only ever a target, never an input
        targets = full[:, 1:].clone()  # (B, T): w1 .. wn <eos> <pad> ...
        targets[targets == PAD_ID] = IGNORE_INDEX
        batch = TranslationBatch(src, tgt, targets)
        return batch.to(device) if device is not None else batch

    def get_batch(
        self,
        split: str = "train",
        batch_size: int = 64,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
    ) -> TranslationBatch:
        """A random batch (with replacement across calls) from ``"train"`` or ``"test"``."""
        data = self._split(split)
        n = len(data.numbers)
        if not 1 <= batch_size <= n:
            raise ValueError(
                f"batch_size must lie in 1..{n} for the {split} split, but received {batch_size}."
            )
        idx = torch.randint(n, (batch_size,), generator=generator)  # (B,)
        return self._make_batch(data.src[idx], data.tgt[idx], device)

    def batches(
        self, split: str = "test", batch_size: int = 256, device: torch.device | str | None = None
    ) -> Iterator[TranslationBatch]:
        """One ordered pass over a split (for evaluation)."""
        data = self._split(split)
        for start in range(0, len(data.numbers), batch_size):
            yield self._make_batch(
                data.src[start : start + batch_size], data.tgt[start : start + batch_size], device
            )

    def __repr__(self) -> str:
        return (
            f"NumberTranslation(0..{self.max_number}, train={len(self.numbers('train'))}, "
            f"test={len(self.numbers('test'))}, src_vocab={self.src_vocab.size}, "
            f"tgt_vocab={self.tgt_vocab.size}, seed={self.seed})"
        )
