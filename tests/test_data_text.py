"""Tiny Shakespeare: the shipped text, the character tokenizer, the 90/10 split, random windows."""

import numpy as np
import pytest
import torch

from transformer_lab.data import (
    CharTokenizer,
    get_batch,
    load_shakespeare,
    shakespeare,
    split_data,
)

SHAKESPEARE_CHARS = 1_115_394


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


def test_char_tokenizer_round_trip_whole_text():
    """(Its speed is measured by benchmarks/bench_data.py, not asserted here.)"""
    text = load_shakespeare()
    tok = CharTokenizer(text)
    ids = tok.encode_tensor(text)
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
