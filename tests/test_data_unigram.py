"""The unigram baseline against scipy and scikit-learn."""

import numpy as np
import pytest
import torch

from transformer_lab.data import (
    unigram_cross_entropy,
    unigram_entropy,
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
