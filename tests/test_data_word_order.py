"""The word-order task: its corpus of distinct lines, its tokenizer, balanced disjoint splits,
shuffles that keep the bag of words, and MLM text."""

import math
import re
from collections import Counter

import pytest
import torch

from transformer_lab.data import (
    WordOrderTask,
    WordTokenizer,
    shakespeare_lines,
    unigram_entropy,
)


@pytest.fixture(scope="module")
def wo():
    return WordOrderTask()


def test_lines_exclude_speaker_tags_and_blanks():
    lines = shakespeare_lines()
    assert "First Citizen:" not in lines and "KING RICHARD III:" not in lines and "" not in lines
    assert "Before we proceed any further, hear me speak." in lines
    assert "Say no more:" in lines  # ends with a colon but is speech
    assert len(lines) == len(set(lines))


def test_word_order_splits_have_disjoint_source_lines(wo):
    train, val, test = (set(wo.lines(s)) for s in ("train", "val", "test"))
    assert train.isdisjoint(val) and train.isdisjoint(test) and val.isdisjoint(test)
    n = len(train) + len(val) + len(test)
    assert abs(len(train) / n - 0.8) < 0.01 and abs(len(test) / n - 0.1) < 0.01
    assert wo.lines("test") == WordOrderTask().lines("test")  # seeded
    assert wo.lines("test") != WordOrderTask(seed=1).lines("test")


def test_word_order_labels_are_balanced(wo):
    for split in ("train", "val", "test"):
        labels = wo.tensors(split).labels
        assert int((labels == 0).sum()) == len(labels) // 2


def test_shuffled_lines_keep_the_bag_of_words(wo):
    texts, lines, labels = wo.texts("val"), wo.lines("val"), wo.tensors("val").labels
    for text, line, label in zip(texts, lines, labels.tolist()):
        original = WordTokenizer.tokenize(line)
        shown = text.split(" ")
        assert Counter(shown) == Counter(original)
        if label == 1:
            assert shown == original
        else:
            assert shown != original
            # Default: punctuation marks stay in their slots; only words move.
            assert [t for t in shown if not t[0].isalpha()] == [
                t for t in original if not t[0].isalpha()
            ]
            assert all((a[0].isalpha()) == (b[0].isalpha()) for a, b in zip(shown, original))


def test_shuffle_all_tokens_option():
    task = WordOrderTask(keep_punctuation=False, fractions=(0.9, 0.05, 0.05))
    moved = 0
    for text, line, label in zip(
        task.texts("test"), task.lines("test"), task.tensors("test").labels.tolist()
    ):
        original = WordTokenizer.tokenize(line)
        assert Counter(text.split(" ")) == Counter(original)
        if label == 0:
            moved += any(a != b and not a[0].isalpha() for a, b in zip(text.split(" "), original))
    assert moved > 0  # some punctuation marks left their slots


def test_word_order_encoding_layout(wo):
    batch = wo.get_batch("train", 64, generator=torch.Generator().manual_seed(0))
    tok = wo.tokenizer
    assert batch.input_ids.shape == (64, 32) and batch.labels.shape == (64,)
    assert batch.attention_mask.dtype == torch.bool
    assert (batch.input_ids[:, 0] == tok.cls_id).all()
    lengths = batch.attention_mask.sum(1)
    assert (batch.input_ids[torch.arange(64), lengths - 1] == tok.sep_id).all()
    assert torch.equal(batch.attention_mask, batch.input_ids != tok.pad_id)
    # Padding only after the end.
    assert torch.equal(batch.attention_mask, torch.arange(32)[None, :] < lengths[:, None])


def test_word_tokenizer_specials_and_round_trip(wo):
    tok = wo.tokenizer
    assert tok.itos[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    ids = tok.encode("To be, or not to be: that is the question.")
    assert tok.decode(ids) == "to be , or not to be : that is the question ."
    assert tok.decode(tok.encode("zzyzx thou")) == "[UNK] thou"
    assert len(tok.encode("thou art", max_len=8)) == 8
    with pytest.raises(ValueError, match="needs 4 ids.*max_len=3"):
        tok.encode("thou art", max_len=3)
    with pytest.raises(ValueError, match="ids in 0"):
        tok.decode([tok.vocab_size])


def test_word_vocabulary_comes_from_training_lines_only(wo):
    train_counts = Counter(t for line in wo.lines("train") for t in WordTokenizer.tokenize(line))
    expected = {w for w, c in train_counts.items() if c >= 3}
    assert set(wo.tokenizer.itos[5:]) == expected


def test_mlm_batches_hold_original_lines(wo):
    mlm = wo.mlm_tensors("val")
    tok = wo.tokenizer
    for ids, line in list(zip(mlm.input_ids, wo.lines("val")))[:200]:
        expected = [t if t in tok.stoi else "[UNK]" for t in WordTokenizer.tokenize(line)]
        assert tok.decode(ids).split(" ") == expected
    batch = wo.mlm_batch("train", 16, generator=torch.Generator().manual_seed(0))
    assert batch.input_ids.shape == (16, 32) and torch.equal(
        batch.attention_mask, batch.input_ids != 0
    )


def test_word_order_unigram_baseline_is_sensible(wo):
    baseline = wo.unigram_baseline("val")
    ignore = (wo.tokenizer.pad_id, wo.tokenizer.cls_id, wo.tokenizer.sep_id)
    own = unigram_entropy(wo.mlm_tensors("val").input_ids, wo.vocab_size, ignore)
    assert 4.0 < baseline < math.log(wo.vocab_size)
    assert baseline >= own - 1e-9  # cross-entropy is never below the data's own entropy (Gibbs)


def test_word_order_errors(wo):
    with pytest.raises(ValueError, match="'train', 'val' or 'test'"):
        wo.get_batch("dev")
    with pytest.raises(ValueError, match="fractions"):
        WordOrderTask(fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="max_len"):
        WordOrderTask(max_len=4)
    with pytest.raises(ValueError, match=r"batch_size must lie in 1\.\."):
        wo.mlm_batch("val", 0)
    with pytest.raises(ValueError, match="min_freq"):
        WordTokenizer(["a b"], min_freq=0)
    assert re.fullmatch(
        r"WordOrderTask\(train=\d+, val=\d+, test=\d+, max_len=32, vocab_size=\d+\)", repr(wo)
    )


@pytest.mark.slow
def test_word_order_needs_order_and_order_suffices(wo):
    """A bag-of-words classifier is at chance; one that sees word pairs (order) is far above it."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    train_x, test_x = wo.texts("train"), wo.texts("test")
    train_y, test_y = wo.tensors("train").labels.numpy(), wo.tensors("test").labels.numpy()
    scores = {}
    for name, ngrams in (("bag", (1, 1)), ("bigrams", (2, 2))):
        vec = CountVectorizer(ngram_range=ngrams, token_pattern=r"\S+", min_df=2)
        clf = LogisticRegression(max_iter=1000).fit(vec.fit_transform(train_x), train_y)
        scores[name] = clf.score(vec.transform(test_x), test_y)
    assert abs(scores["bag"] - 0.5) < 0.05, scores
    assert scores["bigrams"] > 0.75, scores
