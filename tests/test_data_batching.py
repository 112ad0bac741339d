"""Batching helpers: padding, random batches, ordered mini-batches."""

import pytest
import torch

from transformer_lab.data import (
    iterate_batches,
    pad_sequences,
    sample_batch,
)


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
