"""The number translation task: words that parse back, disjoint splits, teacher forcing, masks."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_lab.data import (
    IGNORE_INDEX,
    NumberTranslation,
    Vocab,
    number_to_words,
)
from transformer_lab.masks import causal_mask

_WORD_VALUES = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_WORD_VALUES.update(
    {
        w: 10 * (i + 2)
        for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
    }
)


def _parse_words(words: str) -> int:
    """Read English number words back, a different algorithm from the one that wrote them."""
    total, current = 0, 0
    for w in words.split():
        if w == "and":
            continue
        if w == "hundred":
            current *= 100
        elif w == "thousand":
            total, current = total + current * 1000, 0
        else:
            current += _WORD_VALUES[w]
    return total + current


def test_number_to_words_examples():
    # British usage, compound tens as two words.
    assert number_to_words(0) == "zero"
    assert number_to_words(15) == "fifteen"
    assert number_to_words(42) == "forty two"
    assert number_to_words(100) == "one hundred"
    assert number_to_words(101) == "one hundred and one"
    assert number_to_words(1000) == "one thousand"
    assert number_to_words(1015) == "one thousand and fifteen"
    assert number_to_words(4207) == "four thousand two hundred and seven"
    assert number_to_words(9999) == "nine thousand nine hundred and ninety nine"


def test_number_to_words_parses_back_for_every_number():
    for n in range(10_000):
        assert _parse_words(number_to_words(n)) == n
    assert _parse_words(number_to_words(123_456)) == 123_456


@pytest.fixture(scope="module")
def task():
    return NumberTranslation()


def test_translation_splits_are_disjoint_and_deterministic(task):
    train, test = set(task.numbers("train")), set(task.numbers("test"))
    assert len(train) == 9000 and len(test) == 1000
    assert train.isdisjoint(test) and train | test == set(range(10_000))
    assert task.numbers("test") == NumberTranslation().numbers("test")
    assert task.numbers("test") != NumberTranslation(seed=1).numbers("test")
    assert task.pairs("test")[0] == (
        str(task.numbers("test")[0]),
        number_to_words(task.numbers("test")[0]),
    )


def test_translation_vocabularies(task):
    assert task.src_vocab.size == 13 and task.tgt_vocab.size == 34
    for vocab in (task.src_vocab, task.tgt_vocab):
        assert (vocab.pad_id, vocab.bos_id, vocab.eos_id) == (0, 1, 2)
        assert vocab.itos[:3] == ["<pad>", "<bos>", "<eos>"]
    words = {w for n in range(10_000) for w in number_to_words(n).split()}
    assert words == set(task.tgt_vocab.itos[3:])


def test_translation_batch_teacher_forcing(task):
    batch = task.get_batch("train", 32, generator=torch.Generator().manual_seed(0))
    B, S = batch.src.shape
    T = batch.tgt.shape[1]
    assert (B, S) == (32, 4) and batch.targets.shape == (B, T) and T == task.max_tgt_len - 1
    assert (batch.tgt[:, 0] == task.bos_id).all()
    real = batch.targets != IGNORE_INDEX
    # Decoder input at t+1 is the target at t (shifted by one) wherever the input is a word.
    words = batch.tgt[:, 1:] != task.pad_id
    assert torch.equal(batch.tgt[:, 1:][words], batch.targets[:, :-1][words])
    assert (batch.tgt != task.eos_id).all()
    assert ((batch.targets == task.eos_id).sum(1) == 1).all()
    assert ((batch.tgt == task.pad_id) == ~real).all()  # ignored exactly where input is padding
    for src, tgt in zip(batch.src, batch.targets):
        assert task.decode_target(tgt) == number_to_words(int(task.decode_source(src)))


def test_translation_masks(task):
    batch = task.get_batch("test", 8, generator=torch.Generator().manual_seed(2))
    assert torch.equal(batch.src_mask, (batch.src != 0)[:, None, None, :])
    T = batch.tgt.shape[1]
    expected = causal_mask(T)[None, None] & (batch.tgt != 0)[:, None, None, :]
    assert torch.equal(batch.tgt_mask, expected)
    # Cross-entropy with the default ignore index skips the padding.
    logits = torch.randn(*batch.targets.shape, task.tgt_vocab.size)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets.reshape(-1))
    assert math.isfinite(loss.item())


def test_translation_ordered_batches_cover_split(task):
    seen = [int(task.decode_source(s)) for b in task.batches("test", 300) for s in b.src]
    assert seen == list(task.numbers("test"))


def test_translation_errors(task):
    with pytest.raises(ValueError, match=r"whole numbers in 0\.\.9999.*'12345'"):
        task.encode_source(["12345"])
    with pytest.raises(ValueError, match="whole numbers"):
        task.encode_source([-3])
    with pytest.raises(ValueError, match="'train' or 'test'"):
        task.get_batch("val")
    with pytest.raises(ValueError, match="unknown token 'eleventy'"):
        task.tgt_vocab.encode(["eleventy"])
    with pytest.raises(ValueError, match="integer in 0..999999"):
        number_to_words(1_000_000)
    with pytest.raises(ValueError, match="max_number"):
        NumberTranslation(max_number=5)
    with pytest.raises(ValueError, match="distinct tokens"):
        Vocab(["a", "a"])
