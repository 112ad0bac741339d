"""``train(threads=N)``: the run uses N intra-op threads, records them, and restores the caller's."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_lab.train import TrainConfig, train


def _batch():
    return torch.randn(4, 3), torch.randint(0, 2, (4,))


def test_a_stated_thread_count_is_used_recorded_and_restored():
    seen = []
    model = nn.Linear(3, 2)

    def loss(m, batch):
        seen.append(torch.get_num_threads())
        return nn.functional.cross_entropy(m(batch[0]), batch[1])

    before = torch.get_num_threads()
    history = train(model, _batch, loss, steps=2, threads=1, progress=False)
    assert seen == [1, 1] and history.threads == 1
    assert torch.get_num_threads() == before


def test_without_threads_the_current_count_is_recorded():
    history = train(nn.Linear(3, 2), _batch, steps=1, progress=False)
    assert history.threads == torch.get_num_threads()


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_threads_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        TrainConfig(threads=bad)
