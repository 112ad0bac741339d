"""Notebook 00's lesson helpers (bigram, pre-tokenization, embedding space, associative recall,
why attention), checked against independent references where one exists, and the bigram
explorer. In-process and small: the whole file runs in a few seconds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from transformer_lab import bpe
from transformer_lab.lessons import (
    assoc_recall,
    bigram,
    embedding_space,
    pretokenize,
    why_attention,
)
from transformer_lab.lessons.baselines import (
    AttentionClassifier,
    ConvClassifier,
    RecurrentClassifier,
)

NOTEBOOK = (
    Path(__file__).parent.parent
    / "solutions/00_tokens_and_embeddings/00_tokens_and_embeddings.ipynb"
)

SAMPLES = [
    "It's 2024: we'll pay £1,000,000   for it!\n",
    "I'm sure they'd've said 'no' -- she's   here.\n\n\tTabs\t and\r\nlines",
    "naïve café, Ελληνικά, 日本語 and 🤖 x2 3.14",
    "   leading spaces and trailing   ",
]


# --- pre-tokenization -------------------------------------------------------------------------


@pytest.mark.parametrize("text", SAMPLES)
def test_gpt2_pattern_matches_tokenizers_byte_level(text):
    from tokenizers.pre_tokenizers import ByteLevel

    theirs = ByteLevel(add_prefix_space=False, use_regex=True).pre_tokenize_str(text)
    assert pretokenize.pretokenize(text) == [text[a:b] for _, (a, b) in theirs]


def test_pretokenize_pieces_concatenate_back():
    for text in SAMPLES:
        assert "".join(pretokenize.pretokenize(text)) == text
    assert pretokenize.pretokenize("it's 2024!") == ["it", "'s", " 2024", "!"]


def test_special_tokens_are_one_id_after_the_merges():
    merges = bpe.train_merges("the cat the hat " * 20, 10)
    specials = ["<|endoftext|>", "<|pad|>"]
    doc = "the cat<|endoftext|>the hat<|pad|>"
    assert pretokenize.split_special(doc, specials) == [
        ("the cat", False),
        ("<|endoftext|>", True),
        ("the hat", False),
        ("<|pad|>", True),
    ]
    ids = pretokenize.encode_with_specials(doc, merges, specials)
    first = 256 + len(merges)
    assert ids.count(first) == 1 and ids[-1] == first + 1
    plain = [i for i in ids if i < first]
    assert bpe.decode(plain, merges) == "the catthe hat"
    with pytest.raises(ValueError, match="specials"):
        pretokenize.split_special(doc, [])


def test_token_cost_counts_bytes_for_unseen_scripts():
    merges = bpe.train_merges("to be or not to be " * 50, 20)
    cost = pretokenize.token_cost("日本語", merges)
    assert cost == {"characters": 3, "bytes": 9, "tokens": 9, "chars_per_token": 3 / 9}


def test_notebook_word_counts_example():
    # the example the notebook's step 2 quotes
    assert bpe.word_counts("to be or not to be") == {
        (116, 111): 1,
        (32, 98, 101): 2,
        (32, 111, 114): 1,
        (32, 110, 111, 116): 1,
        (32, 116, 111): 1,
    }


# --- bigram -----------------------------------------------------------------------------------


def _ids(n=5000, V=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    # a Markov chain with a strong preference: next = current + 1 (mod V) most of the time
    ids = [0]
    for _ in range(n - 1):
        jump = torch.rand((), generator=g) < 0.3
        ids.append(int(torch.randint(V, (), generator=g)) if jump else (ids[-1] + 1) % V)
    return torch.tensor(ids)


def test_starting_loss_is_ln_v():
    ids = _ids()
    assert bigram.uniform_loss(12) == pytest.approx(math.log(12))
    assert bigram.bigram_loss(bigram.BigramLM(12), ids) == pytest.approx(math.log(12), abs=1e-5)
    torch.manual_seed(0)
    assert bigram.bigram_loss(bigram.BigramLM(12, init_std=1.0), ids) > math.log(12)


def test_count_loss_is_the_floor_training_approaches():
    ids = _ids()
    floor = bigram.count_bigram_loss(ids, 12)
    # against a direct computation with Counter
    from collections import Counter

    pairs = Counter(zip(ids[:-1].tolist(), ids[1:].tolist()))
    firsts = Counter(ids[:-1].tolist())
    direct = -sum(n * math.log(n / firsts[a]) for (a, _), n in pairs.items()) / (len(ids) - 1)
    assert floor == pytest.approx(direct, rel=1e-9)
    torch.manual_seed(0)
    model = bigram.BigramLM(12)
    bigram.train_bigram(model, ids, steps=150, batch_size=512, lr=0.1)
    trained = bigram.bigram_loss(model, ids)
    assert floor <= trained < floor + 0.05  # approaches the floor from above


def test_rows_moved_sgd_adamw_and_tying():
    V = 20
    x, y = torch.tensor([1, 2, 2, 5]), torch.tensor([2, 5, 1, 7])
    torch.manual_seed(0)
    m = bigram.BigramLM(V, init_std=0.1)
    assert bigram.rows_moved(m, torch.optim.SGD(m.parameters(), lr=0.1), x, y) == [1, 2, 5]
    m = bigram.BigramLM(V, init_std=0.1)
    assert len(bigram.rows_moved(m, torch.optim.AdamW(m.parameters(), lr=0.1), x, y)) == V
    m = bigram.TiedBigramLM(V, width=8)
    assert len(bigram.rows_moved(m, torch.optim.SGD(m.parameters(), lr=0.1), x, y)) == V


def test_tied_bigram_shares_one_matrix():
    m = bigram.TiedBigramLM(30, width=8)
    assert sum(p.numel() for p in m.parameters()) == 30 * 8 + 30
    logits = m(torch.arange(30))  # (V, V)
    assert torch.allclose(logits - m.bias, (logits - m.bias).T, atol=1e-6)


def test_bigram_errors():
    with pytest.raises(ValueError, match="vocab_size"):
        bigram.BigramLM(1)
    with pytest.raises(ValueError, match="ids must lie"):
        bigram.count_bigram_loss(torch.tensor([0, 5]), 3)


# --- embedding space --------------------------------------------------------------------------


def test_cosine_and_nearest_against_torch():
    torch.manual_seed(0)
    table = torch.randn(6, 4)
    sims = embedding_space.cosine_matrix(table)
    ref = torch.nn.functional.cosine_similarity(table[:, None], table[None], dim=-1)
    assert torch.allclose(sims, ref, atol=1e-6)
    labels = list("abcdef")
    near = embedding_space.nearest(table, labels, "c", k=5)
    assert [c for c, _ in near] == [labels[i] for i in ref[2].argsort(descending=True)[1:6]]
    assert embedding_space.mean_similarity(table, labels, ["a"], ["b"]) == pytest.approx(
        float(ref[0, 1]), abs=1e-6
    )
    with pytest.raises(ValueError, match="not among"):
        embedding_space.mean_similarity(table, labels, ["z"], ["a"])


# --- associative recall -----------------------------------------------------------------------


def test_associative_batch_answers_the_query():
    x, y = assoc_recall.associative_batch(200, 5, generator=torch.Generator().manual_seed(0))
    assert x.shape == (200, 6) and y.shape == (200,)
    keys, values = x[:, :5] // 8, x[:, :5] % 8
    query = x[:, 5] - 64
    assert all(len(set(k.tolist())) == 5 for k in keys)  # distinct keys
    hit = keys == query[:, None]  # (B, 5): exactly one pair holds the query key
    assert (hit.sum(1) == 1).all()
    assert torch.equal(values[hit], y)
    assert int(x.max()) < assoc_recall.vocab_size()
    positions = hit.float().argmax(1)
    assert len(set(positions.tolist())) > 1  # the answer's position varies
    with pytest.raises(ValueError, match="n_pairs"):
        assoc_recall.associative_batch(2, 9)


# --- why attention ----------------------------------------------------------------------------


def test_causal_average_three_ways():
    x = torch.randn(2, 7, 3)
    A = why_attention.causal_average_matrix(7)
    assert torch.allclose(why_attention.causal_average_loop(x), A @ x, atol=1e-6)
    assert torch.allclose(why_attention.masked_softmax_weights(torch.zeros(7, 7)), A)
    # the same as PyTorch's causal attention with equal scores
    ref = torch.nn.functional.scaled_dot_product_attention(
        torch.zeros(2, 7, 3), torch.zeros(2, 7, 3), x, is_causal=True
    )
    assert torch.allclose(ref, A @ x, atol=1e-6)


def test_sequential_operations_and_paths():
    gru = [
        why_attention.sequential_operations(RecurrentClassifier(8, 16, "gru"), T, 16)
        for T in (8, 16)
    ]
    attn = [
        why_attention.sequential_operations(AttentionClassifier(8, 16, 32), T, 16) for T in (8, 16)
    ]
    conv = [
        why_attention.sequential_operations(ConvClassifier(8, 16, 2, 3), T, 16) for T in (8, 16)
    ]
    assert gru[1] > gru[0] + 8  # grows with T
    assert attn[0] == attn[1] and conv[0] == conv[1]
    for T in (5, 9, 16):
        assert why_attention.recurrent_path_length(RecurrentClassifier(8, 16, "gru"), T, 16) == T
        layers = next(
            n
            for n in range(1, T)
            if why_attention.reaches_first(ConvClassifier(8, 16, n, 3), T, 16)
        )
        assert layers == math.ceil((T - 1) / 2)
        assert why_attention.reaches_first(AttentionClassifier(8, 16, 32), T, 16)


def test_generation_memory():
    assert why_attention.generation_memory("gru", 5, width=4) == [4] * 5
    assert why_attention.generation_memory("attention", 5, width=4) == [8, 16, 24, 32, 40]
    with pytest.raises(ValueError, match="kind"):
        why_attention.generation_memory("lstm", 3)


# --- the notebook's prose keeps the fixes -----------------------------------------------------


def test_notebook_prose_fixes_hold():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    prose = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    for gone in [
        "add up their counts",
        "nothing is ever unknown",
        "which is the tokenizer you just wrote",
        "moves only the embeddings of the tokens it has seen",
        '"recent inputs dominate"',
        "1209",
        "one held-out word in eight",
        "about 12%",
    ]:
        assert gone not in prose, gone


# --- the bigram explorer ----------------------------------------------------------------------


def test_bigram_explorer(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TLAB_GRADING", raising=False)
    from widget_helpers import changes_picture

    from transformer_lab import widgets

    text = "the cat sat on the mat. " * 200
    ex = widgets.bigram_explorer(text, steps=20, every=5)
    state = ex.state()
    assert state["loss"] == pytest.approx(math.log(len(set(text))))
    assert state["probs"] == pytest.approx([1 / len(set(text))] * len(set(text)))
    changes_picture(ex, "step", 20)
    assert ex.state()["loss"] < state["loss"]
    changes_picture(ex, "after", "c")
    with pytest.raises(ValueError, match="steps"):
        widgets.bigram_explorer(text, steps=5)


def test_bigram_explorer_under_grading(monkeypatch):
    monkeypatch.setenv("TLAB_GRADING", "1")
    from transformer_lab import widgets

    ex = widgets.bigram_explorer("abab", steps=10, every=5)
    assert type(ex).__name__ == "GradingPlaceholder" and not ex.controls
