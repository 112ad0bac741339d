"""Notebook 0's "why attention" section: the recall task, the three small models, parameter
counts against PyTorch's own modules, receptive fields and gradients measured by autograd."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_lab.data.long_range import recall_batch
from transformer_lab.lessons.baselines import (
    AttentionClassifier,
    ConvClassifier,
    RecurrentClassifier,
    attention_parameters,
    dense_parameters,
    input_gradient_norms,
    train_recall,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("N, D", [(4, 3), (16, 8)])
def test_parameter_counts_match_pytorch_modules(N, D):
    assert dense_parameters(N, D) == _count(nn.Linear(N * D, N * D, bias=False))
    assert dense_parameters(N, D, bias=True) == _count(nn.Linear(N * D, N * D))
    mha = nn.MultiheadAttention(D, 1, bias=False)  # W_q, W_k, W_v (in_proj) and W_o
    assert attention_parameters(D) == _count(mha)
    assert attention_parameters(D, bias=True) == _count(nn.MultiheadAttention(D, 1))


def test_handout_sizes():
    assert dense_parameters(512, 1024) == 1024**2 * 512**2  # D^2 N^2 = 2.7e11 (BERT-large)
    assert attention_parameters(1024) == 4 * 1024**2


def test_recall_batch_labels_the_first_token():
    g = torch.Generator().manual_seed(0)
    x, y = recall_batch(16, 9, 5, g)
    assert x.shape == (16, 10) and x.dtype == torch.long and y.shape == (16,)
    assert torch.equal(y, x[:, 0]) and int(x.max()) < 5
    again, _ = recall_batch(16, 9, 5, torch.Generator().manual_seed(0))
    assert torch.equal(x, again)


@pytest.mark.parametrize("kwargs", [dict(distance=0), dict(n_symbols=1), dict(batch_size=2.0)])
def test_recall_batch_rejects_bad_sizes(kwargs, one_sentence):
    args = dict(batch_size=4, distance=3, n_symbols=8) | kwargs
    with pytest.raises(ValueError) as info:
        recall_batch(**args)
    one_sentence(str(info.value))
    assert next(iter(kwargs)) in str(info.value)


@pytest.mark.parametrize("layers, kernel", [(1, 3), (2, 3), (3, 2)])
def test_conv_receptive_field_measured_by_autograd(layers, kernel):
    torch.manual_seed(0)
    model = ConvClassifier(8, 16, n_layers=layers, kernel_size=kernel)
    x, y = recall_batch(32, 15, 8, torch.Generator().manual_seed(1))
    norms = input_gradient_norms(model, x, y)
    seen = int((norms > 0).sum())
    assert seen == model.receptive_field == 1 + layers * (kernel - 1)
    assert (norms[-seen:] > 0).all()  # causal: the last positions, never the future


def test_sequential_steps():
    assert RecurrentClassifier(8, 8, "rnn").sequential_steps(64) == 64
    assert ConvClassifier(8, 8, n_layers=3).sequential_steps(64) == 3
    assert AttentionClassifier(8, 8).sequential_steps(64) == 1
    with pytest.raises(ValueError, match="lstm"):
        RecurrentClassifier(8, 8, "lstm")


def test_recurrent_gradient_to_the_first_input_vanishes_attention_does_not():
    x, y = recall_batch(32, 63, 8, torch.Generator().manual_seed(0))
    ratios = {}
    for kind, make in [
        ("rnn", lambda: RecurrentClassifier(8, 32, "rnn")),
        ("gru", lambda: RecurrentClassifier(8, 32, "gru")),
        ("attention", lambda: AttentionClassifier(8, 32, max_len=64)),
    ]:
        torch.manual_seed(0)
        norms = input_gradient_norms(make().double(), x, y)
        ratios[kind] = (norms[0] / norms[-1]).item()
    assert ratios["rnn"] < 1e-8 and ratios["gru"] < 1e-6, ratios
    assert ratios["attention"] > 1e-2, ratios


def test_attention_recalls_a_distant_token_the_convolution_cannot():
    torch.manual_seed(0)
    attention = train_recall(AttentionClassifier(8, 32, max_len=32), 16, steps=150, lr=1e-2)
    torch.manual_seed(0)
    conv = train_recall(ConvClassifier(8, 32, n_layers=2, kernel_size=3), 16, steps=150)
    assert attention > 0.95, attention
    assert conv < 0.3, conv  # the first token is outside its 5-token window: guessing (1/8)
