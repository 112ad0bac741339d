"""The digits: shapes, a stratified seeded split that never overlaps, training statistics."""

from collections import Counter

import numpy as np
import pytest
import torch

from transformer_lab.data import (
    load_digits_data,
)


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
