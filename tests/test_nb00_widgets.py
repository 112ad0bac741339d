"""Notebook 00's explorer: the merges slider changes how the sentence splits, the student's own
encode is drawn beside the reference (marked where it differs, with the check's diagnosis), a
broken encode gives one line, and nothing is built under grading."""

from __future__ import annotations

import pytest
from widget_helpers import changes_picture

from transformer_lab import bpe
from transformer_lab import widgets as tw

TEXT = " ".join(["the cat sat on the mat with the hat"] * 30 + ["naïve café"] * 5)


@pytest.fixture(autouse=True)
def interactive(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TLAB_GRADING", raising=False)


def encode(text, merges):
    out = []
    for word in bpe.split_words(text):
        ids = list(word.encode("utf-8"))
        for i, pair in enumerate(merges):
            out_word, j = [], 0
            while j < len(ids):
                if j + 1 < len(ids) and (ids[j], ids[j + 1]) == tuple(pair):
                    out_word.append(256 + i)
                    j += 2
                else:
                    out_word.append(ids[j])
                    j += 1
            ids = out_word
        out += ids
    return out


def encode_reversed(text, merges):
    order = list(enumerate(merges))[::-1]
    out = []
    for word in bpe.split_words(text):
        ids = list(word.encode("utf-8"))
        for i, pair in order:
            ids = _merge(ids, pair, 256 + i)
        out += ids
    return out


def _merge(ids, pair, new_id):
    out, j = [], 0
    while j < len(ids):
        if j + 1 < len(ids) and (ids[j], ids[j + 1]) == tuple(pair):
            out.append(new_id)
            j += 2
        else:
            out.append(ids[j])
            j += 1
    return out


def test_slider_merges_tokens_and_changes_the_picture():
    ex = tw.bpe_explorer(sentence="the cat sat on the hat", text=TEXT, max_merges=20, merges=0)
    start = ex.state()
    assert start["n_tokens"] == len("the cat sat on the hat") and start["vocab_size"] == 256
    assert start["new_token"] is None
    changes_picture(ex, "merges", 12)
    later = ex.state()
    assert later["n_tokens"] < start["n_tokens"] and later["vocab_size"] == 268
    assert "".join(later["tokens"]) == "the cat sat on the hat"
    learned = bpe.train_merges(TEXT[: len(TEXT) - len(TEXT) // 10], 12)
    assert later["new_token"] == bpe.token_strings([267], learned)[0]
    assert later["chars_per_token"] > 1.0 > start["chars_per_token"]  # bytes of "ï", "é"


def test_students_encode_is_drawn_and_diagnosed():
    good = tw.bpe_explorer(encode, sentence="the cat sat", text=TEXT, max_merges=15, merges=10)
    state = good.state()
    assert state["yours"] == state["tokens"] and not state["differs"]
    assert "matches the reference" in good.readout.value and "✓" in good.footer.value
    bad = tw.bpe_explorer(
        encode_reversed, sentence="the cat sat", text=TEXT, max_merges=15, merges=10
    )
    state = bad.state()
    assert state["differs"] and "differs" in bad.readout.value
    assert "order they were learned" in bad.footer.value
    changes_picture(bad, "merges", 3)


def test_broken_encode_gives_one_line():
    def not_yet(text, merges):
        raise NotImplementedError()

    def returns_tuple(text, merges):
        return tuple(encode(text, merges))

    ex = tw.bpe_explorer(not_yet, text=TEXT, max_merges=10, merges=5)
    assert ex.state()["error"] and "not implemented" in ex.readout.value
    ex = tw.bpe_explorer(returns_tuple, text=TEXT, max_merges=10, merges=5)
    assert "not a list of ints" in ex.state()["error"]


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(max_merges=5), "max_merges"),
        (dict(max_merges=20, merges=30), "merges"),
        (dict(sentence=""), "sentence"),
    ],
)
def test_bad_arguments(kwargs, words, one_sentence):
    with pytest.raises(ValueError) as info:
        tw.bpe_explorer(text=TEXT, **kwargs)
    one_sentence(str(info.value))
    assert words in str(info.value)


def test_nothing_is_built_under_grading(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    placeholder = tw.bpe_explorer(encode)
    assert isinstance(placeholder, tw.GradingPlaceholder) and placeholder.controls == {}
