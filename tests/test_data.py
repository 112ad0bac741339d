"""Datasets: sizes, splits that never overlap, tokenizers that round-trip, clear errors."""

import math
import re
import time
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from transformer_lab.data import (
    IGNORE_INDEX,
    CharTokenizer,
    NumberTranslation,
    Vocab,
    WordOrderTask,
    WordTokenizer,
    get_batch,
    iterate_batches,
    load_digits_data,
    load_shakespeare,
    number_to_words,
    pad_sequences,
    sample_batch,
    shakespeare,
    shakespeare_lines,
    split_data,
    unigram_cross_entropy,
    unigram_entropy,
)
from transformer_lab.masks import causal_mask

SHAKESPEARE_CHARS = 1_115_394


# ----------------------------------------------------------------------------- tiny Shakespeare


def test_shakespeare_ships_with_the_package():
    text = load_shakespeare()
    assert len(text) == SHAKESPEARE_CHARS
    assert text.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")


def test_char_tokenizer_vocabulary_is_the_sorted_characters():
    text = load_shakespeare()
    tok = CharTokenizer(text)
    assert tok.vocab_size == len(tok) == 65  # the vocabulary nanoGPT reports for this file
    assert tok.chars == sorted(set(text))
    assert tok.stoi["\n"] == 0 and tok.stoi["z"] == 64


def test_char_tokenizer_round_trip_whole_text_and_fast():
    text = load_shakespeare()
    tok = CharTokenizer(text)
    start = time.perf_counter()
    ids = tok.encode_tensor(text)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"tokenizing the whole text took {elapsed:.2f} s"
    assert ids.dtype == torch.long and ids.shape == (SHAKESPEARE_CHARS,)
    # Reference: a plain dictionary lookup, character by character.
    stoi = {ch: i for i, ch in enumerate(sorted(set(text)))}
    assert ids[:5000].tolist() == [stoi[ch] for ch in text[:5000]]
    assert tok.decode(ids) == text


def test_char_tokenizer_list_and_tensor_agree():
    tok = CharTokenizer("hello world")
    assert tok.encode("hello") == tok.encode_tensor("hello").tolist()
    assert tok.decode(tok.encode("low hello")) == "low hello"
    assert tok.decode(np.array(tok.encode("he"))) == "he"
    assert tok.encode("") == []


def test_char_tokenizer_unknown_character_is_named():
    tok = CharTokenizer()
    with pytest.raises(ValueError, match=r"unknown character.*'é'.*position 1"):
        tok.encode("héllo")
    with pytest.raises(ValueError, match="unknown character"):
        tok.encode("\u4e2d")  # code point far above the lookup table


def test_char_tokenizer_errors():
    tok = CharTokenizer("abc")
    with pytest.raises(ValueError, match=r"ids in 0\.\.2.*received 3"):
        tok.decode([0, 3])
    with pytest.raises(ValueError, match="1-D sequence"):
        tok.decode(torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(TypeError, match="expects a str"):
        tok.encode(["a"])
    with pytest.raises(ValueError, match="non-empty string"):
        CharTokenizer("")


def test_shakespeare_split_is_first_90_last_10_percent():
    data = shakespeare()
    n = SHAKESPEARE_CHARS
    assert len(data.train) == int(0.9 * n) and len(data.val) == n - int(0.9 * n)
    whole = data.tokenizer.encode_tensor(load_shakespeare())
    assert torch.equal(torch.cat([data.train, data.val]), whole)
    assert data.vocab_size == 65
    assert shakespeare() is data  # cached


def test_split_data_fraction_and_errors():
    train, val = split_data(torch.arange(100), 0.8)
    assert train.tolist() == list(range(80)) and val.tolist() == list(range(80, 100))
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        split_data(torch.arange(10), 1.0)
    with pytest.raises(ValueError, match="1-D tensor"):
        split_data(torch.zeros(2, 5), 0.5)


def test_get_batch_targets_are_inputs_shifted_by_one():
    data = torch.arange(1000)  # so a window starting at s is s, s+1, ...
    x, y = get_batch(data, block_size=16, batch_size=8, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16) and x.dtype == y.dtype == torch.long
    assert torch.equal(y, x + 1)
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert torch.equal(x - x[:, :1], torch.arange(16).expand(8, 16))  # contiguous windows
    assert int(y.max()) <= 999 and int(x.min()) >= 0


def test_get_batch_is_seeded_and_covers_every_window():
    data = torch.arange(20)
    a = get_batch(data, 4, 64, generator=torch.Generator().manual_seed(3))
    b = get_batch(data, 4, 64, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    starts = set()
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        x, _ = get_batch(data, 4, 16, generator=gen)
        starts.update(x[:, 0].tolist())
    assert starts == set(range(16))  # every start 0..L-T-1 occurs, and no start beyond


def test_get_batch_on_shakespeare_decodes_to_real_text():
    data = shakespeare()
    x, y = data.get_batch(
        "val", block_size=64, batch_size=4, generator=torch.Generator().manual_seed(1)
    )
    text = load_shakespeare()
    for row_x, row_y in zip(x, y):
        window = data.tokenizer.decode(row_x)
        assert window in text
        assert data.tokenizer.decode(row_y)[:-1] == window[1:]


def test_get_batch_errors():
    with pytest.raises(ValueError, match=r"at least block_size \+ 1 = 11 tokens.*length 10"):
        get_batch(torch.arange(10), block_size=10, batch_size=2)
    assert get_batch(torch.arange(11), block_size=10, batch_size=2)[0].shape == (2, 10)
    with pytest.raises(ValueError, match="1-D tensor"):
        get_batch(torch.zeros(3, 50, dtype=torch.long), 4, 2)
    with pytest.raises(ValueError, match="must be positive"):
        get_batch(torch.arange(50), 0, 2)
    with pytest.raises(ValueError, match="'train' or 'val'"):
        shakespeare().get_batch("test", 8, 2)


# ----------------------------------------------------------------------------- batching helpers


def test_pad_sequences():
    out = pad_sequences([[1, 2, 3], [4], []], pad_id=0)
    assert out.tolist() == [[1, 2, 3], [4, 0, 0], [0, 0, 0]]
    assert pad_sequences([[5]], pad_id=9, length=3).tolist() == [[5, 9, 9]]
    with pytest.raises(ValueError, match="at most length=2.*3 ids"):
        pad_sequences([[1, 2, 3]], 0, length=2)


def test_sample_and_iterate_batches():
    x, y = torch.arange(10).float()[:, None], torch.arange(10)
    bx, by = sample_batch(x, y, batch_size=6, generator=torch.Generator().manual_seed(0))
    assert torch.equal(bx[:, 0].long(), by)  # rows stay aligned
    seen = torch.cat([b[1] for b in iterate_batches(x, y, batch_size=3, shuffle=True)])
    assert sorted(seen.tolist()) == list(range(10))
    assert [len(b[0]) for b in iterate_batches(x, y, batch_size=4, drop_last=True)] == [4, 4]
    with pytest.raises(ValueError, match="same first dimension"):
        sample_batch(x, y[:5], batch_size=2)
    with pytest.raises(ValueError, match=r"batch_size must lie in 1\.\.10"):
        sample_batch(x, y, batch_size=11)


# ----------------------------------------------------------------------------- digits


@pytest.fixture(scope="module")
def digits():
    return load_digits_data()


def test_digits_shapes_and_range(digits):
    assert digits.x_train.shape == (1437, 1, 8, 8) and digits.x_test.shape == (360, 1, 8, 8)
    assert digits.x_train.dtype == torch.float32 and digits.y_train.dtype == torch.long
    assert float(digits.x_train.min()) == 0.0 and float(digits.x_train.max()) == 1.0
    assert set(digits.y_train.tolist()) == set(range(10))


def test_digits_match_sklearn_and_do_not_overlap(digits):
    from sklearn.datasets import load_digits

    ref = load_digits()
    train_idx, test_idx = digits.train_index.numpy(), digits.test_index.numpy()
    assert set(train_idx).isdisjoint(test_idx)
    assert sorted(np.concatenate([train_idx, test_idx])) == list(range(1797))
    np.testing.assert_allclose(digits.x_train[:, 0].numpy() * 16, ref.images[train_idx], atol=1e-6)
    np.testing.assert_array_equal(digits.y_test.numpy(), ref.target[test_idx])


def test_digits_split_is_stratified_and_seeded(digits):
    train_counts = Counter(digits.y_train.tolist())
    test_counts = Counter(digits.y_test.tolist())
    for c in range(10):
        share = test_counts[c] / (test_counts[c] + train_counts[c])
        assert abs(share - 0.2) < 0.02
    again = load_digits_data()
    assert torch.equal(again.test_index, digits.test_index)
    other = load_digits_data(seed=1)
    assert not torch.equal(other.test_index, digits.test_index)


def test_digits_normalize_uses_training_statistics(digits):
    norm = load_digits_data(normalize=True)
    assert abs(float(norm.x_train.mean())) < 1e-5 and abs(float(norm.x_train.std()) - 1) < 1e-4
    torch.testing.assert_close(norm.unnormalize(norm.x_test), digits.x_test, atol=1e-5, rtol=0)
    x, y = norm.get_batch("train", 16, generator=torch.Generator().manual_seed(0))
    assert x.shape == (16, 1, 8, 8) and y.shape == (16,)
    assert sum(len(b[1]) for b in norm.batches("test", 100)) == 360


def test_digits_errors(digits):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        load_digits_data(test_fraction=0)
    with pytest.raises(ValueError, match="'train' or 'test'"):
        digits.get_batch("val")


# ----------------------------------------------------------------------------- translation


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


# ----------------------------------------------------------------------------- word order (BERT)


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


def test_unigram_entropy_matches_scipy():
    from scipy.stats import entropy

    ids = torch.tensor([[0, 5, 5, 6, 7, 7, 7, 0], [5, 6, 6, 6, 7, 0, 0, 0]])
    counts = np.bincount(ids.flatten().numpy(), minlength=8)
    counts[0] = 0  # padding ignored
    assert unigram_entropy(ids, 8, ignore_ids=[0]) == pytest.approx(entropy(counts), abs=1e-12)
    assert unigram_entropy(torch.tensor([3, 3, 3])) == 0.0
    with pytest.raises(ValueError, match="at least one token"):
        unigram_entropy(torch.tensor([0, 0]), ignore_ids=[0])


def test_unigram_cross_entropy_matches_sklearn_log_loss():
    from sklearn.metrics import log_loss

    train = torch.tensor([1, 1, 2, 3, 3, 3, 0, 0])
    evals = torch.tensor([1, 2, 2, 4, 0])
    V, alpha = 5, 0.5
    counts = np.bincount(train.numpy(), minlength=V).astype(float)[1:] + alpha  # ids 1..4
    p = counts / counts.sum()
    y = evals[evals != 0].numpy()
    ref = log_loss(y, np.tile(p, (len(y), 1)), labels=[1, 2, 3, 4])
    got = unigram_cross_entropy(train, evals, V, ignore_ids=[0], alpha=alpha)
    assert got == pytest.approx(ref, abs=1e-12)
    with pytest.raises(ValueError, match=r"ids must lie in 0\.\.4"):
        unigram_cross_entropy(train, torch.tensor([7]), V)


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
