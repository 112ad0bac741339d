"""The BPE reference (transformer_lab.bpe) against Hugging Face ``tokenizers``' BpeTrainer, on
tiny Shakespeare and on a second corpus (scikit-learn's dataset descriptions, real English prose
with some non-ASCII), plus its stated rules: ties, overlaps, word boundaries, any text round-trips.
"""

from __future__ import annotations

import glob
import os

import pytest

from transformer_lab import bpe
from transformer_lab.data import load_shakespeare

tokenizers = pytest.importorskip("tokenizers")  # the dev extra installs it


def _sklearn_descriptions() -> str:
    import sklearn

    folder = os.path.join(os.path.dirname(sklearn.__file__), "datasets", "descr")
    files = sorted(glob.glob(os.path.join(folder, "*.rst")))
    assert len(files) >= 10, f"expected scikit-learn's dataset descriptions in {folder}"
    return "".join(open(f, encoding="utf-8").read() for f in files)


def _hf_encode(text: str, n_merges: int) -> list[int]:
    """Hugging Face's own encoding of ``text`` after its own training (same configuration)."""
    from tokenizers import Tokenizer, models, trainers

    tokenizer = Tokenizer(models.BPE())
    trainer = trainers.BpeTrainer(
        vocab_size=256 + n_merges,
        initial_alphabet=[chr(b) for b in range(256)],
        min_frequency=0,
        show_progress=False,
    )
    words = [w.encode("utf-8").decode("latin-1") for w in bpe.split_words(text)]
    tokenizer.train_from_iterator(words, trainer)
    return tokenizer.encode(words, is_pretokenized=True).ids


MULTILINGUAL = (
    "naïve café — Ελληνικά λόγια, 日本語のテキスト, emoji 🤖🤖 and ÿÿÿ; aaaa aaa aa a\n"
    "straße über Ünïcödé   spaces\t\ttabs\n\n" * 5
)


@pytest.mark.parametrize(
    "corpus, n_merges",
    [("shakespeare", 1500), ("sklearn", 800), ("multilingual", 60)],
)
def test_merges_equal_huggingface_bpe_trainer(corpus, n_merges):
    text = {
        "shakespeare": load_shakespeare,
        "sklearn": _sklearn_descriptions,
        "multilingual": lambda: MULTILINGUAL,
    }[corpus]()
    ours = bpe.train_merges(text, n_merges)
    theirs = bpe.huggingface_merges(text, n_merges)
    assert len(ours) == n_merges or corpus == "multilingual"
    first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
    assert ours == theirs, f"first difference at merge {first}: {ours[first]} vs {theirs[first]}"


@pytest.mark.parametrize("corpus", ["shakespeare", "sklearn"])
def test_encoding_equals_huggingface(corpus):
    text = load_shakespeare()[:60_000] if corpus == "shakespeare" else _sklearn_descriptions()
    n = 300
    ours = bpe.encode(text, bpe.train_merges(text, n))
    assert ours == _hf_encode(text, n)
    assert bpe.decode(ours, bpe.train_merges(text, n)) == text


def test_ties_go_to_the_smallest_pair_and_huggingface_agrees():
    # every pair occurs once: the first merge is the smallest (left, right)
    text = "zy xw ba"
    assert bpe.best_pair({(5, 9): 3, (4, 200): 3, (4, 100): 3, (1, 1): 2}) == (4, 100)
    assert bpe.train_merges(text, 1) == [(32, 98)]  # " b" < " x" < "ba" < "xw" < "zy"
    assert bpe.huggingface_merges(text, 1) == [(32, 98)]
    # a tie between a merged token and two bytes: ids decide (bytes < 256 <= merged tokens)
    text = "abab cdcd"
    ours = bpe.train_merges(text, 4)
    assert ours == bpe.huggingface_merges(text, 4)
    assert ours[:2] == [(97, 98), (99, 100)]


def test_overlapping_pairs_count_twice_and_merge_left_to_right():
    assert bpe.count_pairs({tuple(b"aaa"): 1}) == {(97, 97): 2}
    assert bpe.merge_pair([97, 97, 97], (97, 97), 256) == [256, 97]
    assert bpe.merge_pair([97, 97, 97, 97], (97, 97), 256) == [256, 256]
    # "aaaaa" -> [aa, aa, a]: (aa, aa) and (aa, a) tie once each; the smaller id pair wins
    assert bpe.train_merges("aaaaa", 3) == [(97, 97), (256, 97), (256, 257)]
    assert bpe.huggingface_merges("aaaaa", 3) == [(97, 97), (256, 97), (256, 257)]


def test_pairs_never_cross_word_boundaries():
    assert bpe.split_words("To be,\nor  not") == ["To", " be,", "\n", "or", " ", " not"]
    assert "".join(bpe.split_words(MULTILINGUAL)) == MULTILINGUAL
    merges = bpe.train_merges("ab ab ab", 10)
    assert (98, 32) not in merges  # "b" then " " never meet inside a word
    assert bpe.encode("e c", [(101, 32)]) == [101, 32, 99]


def test_any_text_round_trips_including_unseen_characters():
    merges = bpe.train_merges(load_shakespeare()[:50_000], 200)
    for text in ["", " ", "\n\n", MULTILINGUAL, "\x00\x7f control \u200b zero width", "🤖" * 3]:
        ids = bpe.encode(text, merges)
        assert all(0 <= i < 256 + len(merges) for i in ids)
        assert bpe.decode(ids, merges) == text
    assert bpe.decode([97, 0xC3], []) == "a\ufffd"  # cut inside a character


def test_merge_i_is_token_256_plus_i_and_vocab_bytes():
    merges = bpe.train_merges("the the the then", 3)
    vocab = bpe.token_bytes(merges)
    assert len(vocab) == 259 and vocab[256] == bytes([merges[0][0]]) + bytes([merges[0][1]])
    assert bpe.token_strings(bpe.encode("the", merges), merges) == ["the"]


def test_stops_when_no_pair_is_left():
    # "hi" and " hi": merge (h, i), then (space, hi); then every word is one token
    assert bpe.train_merges("hi hi", 10) == [(104, 105), (32, 256)]
    assert bpe.train_merges("a\nb\nc", 5) == []  # one-byte words only


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: bpe.train_merges("text", -1), ("n_merges", "-1")),
        (lambda: bpe.train_merges(b"text", 3), ("str", "bytes")),
        (lambda: bpe.decode([300], []), ("255", "300")),
        (lambda: bpe.best_pair({}), ("pair",)),
    ],
)
def test_bad_input_gets_one_clear_sentence(call, words, one_sentence):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    message = str(info.value)
    one_sentence(message)
    assert all(w in message for w in words), message
