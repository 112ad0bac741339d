"""Loss per character, the measure that compares language models across tokenizers (notebook 07,
benchmarks/bench_bpe_gpt.py): transformer_lab.lessons.tokens_compare."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lab import bpe
from transformer_lab.data import load_shakespeare, shakespeare
from transformer_lab.lessons.tokens_compare import (
    chars_per_token,
    encode_bpe,
    encode_characters,
    loss_per_char,
    train_tokens_model,
)
from transformer_lab.models import GPT, GPTConfig


class Bigram(nn.Module):
    """Logits that depend on the current token only: row ``x`` of a fixed table."""

    def __init__(self, probs: torch.Tensor) -> None:
        super().__init__()
        self.table = nn.Parameter(probs.log())  # (V, V): log p(next | current)

    def forward(self, ids):
        return self.table[ids]  # (B, T, V)


# p(next | 0) = (1/2, 1/4, 1/4), p(next | 1) = (1/4, 1/4, 1/2), p(next | 2) = (1/4, 1/2, 1/4)
PROBS = torch.tensor([[0.5, 0.25, 0.25], [0.25, 0.25, 0.5], [0.25, 0.5, 0.25]])


@pytest.mark.parametrize("block_size", [1, 2, 3, 5])
def test_loss_per_char_by_hand(block_size):
    ids = torch.tensor([0, 1, 2, 1])  # predicts 1 after 0, 2 after 1, 1 after 2
    counts = torch.tensor([1, 2, 3])  # token 1 covers 2 characters, token 2 covers 3
    # -log p: ln 4 + ln 2 + ln 2 = 4 ln 2 nats over the characters of tokens 1, 2, 1: 2 + 3 + 2
    want = 4 * math.log(2) / 7
    got = loss_per_char(Bigram(PROBS), ids, counts, block_size)
    assert got == pytest.approx(want, abs=1e-6)  # any window length: a bigram needs no context
    per_token = 4 * math.log(2) / 3
    assert got == pytest.approx(per_token * 3 / 7, abs=1e-6)  # per token x tokens / characters


def test_for_characters_loss_per_char_is_the_mean_token_loss():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=11, max_len=8, n_layers=1, d_model=32)).eval()
    ids = torch.randint(0, 11, (8 * 5 + 1,))  # five whole windows of 8
    x, y = ids[:-1].view(5, 8), ids[1:].view(5, 8)
    with torch.no_grad():
        want = F.cross_entropy(model(x).logits.flatten(0, 1), y.flatten()).item()
    got = loss_per_char(model, ids, torch.ones(11, dtype=torch.long), 8, batch_size=2)
    assert got == pytest.approx(want, rel=1e-5)


def test_the_last_shorter_window_is_scored():
    torch.manual_seed(1)
    model = GPT(GPTConfig.tiny(vocab_size=7, max_len=4, n_layers=1, d_model=16)).eval()
    ids = torch.randint(0, 7, (11,))  # 10 predictions: windows of 4, 4 and 2
    pieces = [(ids[0:4], ids[1:5]), (ids[4:8], ids[5:9]), (ids[8:10], ids[9:11])]
    with torch.no_grad():
        total = sum(
            F.cross_entropy(model(x[None]).logits[0], y, reduction="sum").item() for x, y in pieces
        )
    counts = torch.arange(1, 8)  # token i covers i + 1 characters
    got = loss_per_char(model, ids, counts, 4)
    assert got == pytest.approx(total / int(counts[ids[1:]].sum()), rel=1e-5)


def test_character_encoding_is_the_course_split():
    chars = encode_characters(load_shakespeare())
    data = shakespeare()
    assert torch.equal(chars.train, data.train) and torch.equal(chars.val, data.val)
    assert chars.vocab_size == 65 and chars.char_counts.tolist() == [1] * 65
    assert chars.chars(chars.val) == len(chars.val)


TEXT = "the cat sat on the mat; ça coûte 5 €, naïve déjà vu. " * 20


def test_bpe_character_accounting_sums_to_the_text_length():
    encoded = encode_bpe(TEXT, 30, train_fraction=0.8)
    assert len(encoded.merges) == 30 and encoded.vocab_size == 256 + 30
    split = int(0.8 * len(TEXT))
    assert encoded.chars(encoded.train) == split
    assert encoded.chars(encoded.val) == len(TEXT) - split
    merges = list(encoded.merges)
    for text in ["never seen: 日本語 ✓", TEXT, "a"]:  # multi-byte characters, unseen ones too
        ids = torch.tensor(bpe.encode(text, merges))
        assert int(chars_per_token(merges)[ids].sum()) == len(text)
    assert encoded.chars(encoded.val) / len(encoded.val) > 1.5  # the merges shorten the text


def test_a_token_covers_the_characters_that_start_in_it():
    merges = [(0xC3, 0xA9)]  # the two bytes of "é" become token 256
    counts = chars_per_token(merges)
    assert counts[ord("a")] == 1 and counts[0xC3] == 1 and counts[0xA9] == 0 and counts[256] == 1


def test_val_prefix_covers_at_most_the_characters_asked_for():
    encoded = encode_bpe(TEXT, 40, train_fraction=0.5)
    prefix = encoded.val_prefix(100)
    assert torch.equal(prefix, encoded.val[: len(prefix)])
    longest = int(encoded.char_counts.max())
    assert 100 - longest < encoded.chars(prefix) <= 100
    assert torch.equal(encoded.val_prefix(None), encoded.val)


def test_training_reports_loss_per_character():
    chars = encode_characters(TEXT, train_fraction=0.5)
    model, history = train_tokens_model(
        chars, 16, 4, eval_every=2, eval_chars=200, progress=False, seed=3
    )
    assert isinstance(model, GPT) and model.config.vocab_size == chars.vocab_size
    assert history.eval_step == [0, 2, 4] and len(history.eval_loss) == 3
    # untrained, the model guesses about uniformly: log V nats per character
    assert history.eval_loss[0] == pytest.approx(math.log(chars.vocab_size), rel=0.05)
    again = train_tokens_model(chars, 16, 4, eval_every=2, eval_chars=200, progress=False, seed=3)
    assert again[1].eval_loss == history.eval_loss  # seeded: the same run twice


def test_bad_inputs_name_what_was_expected():
    model = Bigram(PROBS)
    with pytest.raises(ValueError, match="1-D tensor of at least 2 token ids"):
        loss_per_char(model, torch.zeros(2, 3, dtype=torch.long), torch.ones(3), 2)
    with pytest.raises(ValueError, match="block_size must be a positive int"):
        loss_per_char(model, torch.tensor([0, 1]), torch.ones(3), 0)
    with pytest.raises(ValueError, match="train_fraction"):
        encode_characters("abc", train_fraction=1.0)
