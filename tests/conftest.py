"""Helpers shared by the test files, as plain functions (``from conftest import randomise``) and
as fixtures of the same names.

- :func:`randomise`: large random weights, so a weight copied to the wrong place shows up (with
  the small initial weights of most models, attention is nearly uniform and hides such mistakes).
- :func:`max_diff`: the largest absolute difference of two tensors, for messages.
- :func:`one_sentence`: an error message is one sentence (the package's rule for bad input).
"""

from collections.abc import Callable

import pytest
import torch
from torch import nn


def randomise(
    module: nn.Module,
    seed: int = 0,
    scale: float = 0.2,
    gain: Callable[[str], bool] | None = None,
) -> nn.Module:
    """Give every parameter N(0, scale^2) values, in place; returns ``module``.

    Args:
        gain: ``gain(name)`` is True for parameters to centre on 1 instead of 0 (norm gains), so
            the norms stay close to their usual scale.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            offset = 1.0 if gain is not None and gain(name) else 0.0
            p.copy_(torch.randn(p.shape, generator=g) * scale + offset)
    return module


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute elementwise difference."""
    return (a - b).abs().max().item()


def one_sentence(message: str) -> None:
    """Assert that ``message`` is one sentence: it ends with a full stop and holds no other."""
    assert message.rstrip("'\"").endswith("."), message
    assert ". " not in message[:-1] and "\n" not in message, message


@pytest.fixture(name="randomise")
def randomise_fixture():
    return randomise


@pytest.fixture(name="max_diff")
def max_diff_fixture():
    return max_diff


@pytest.fixture(name="one_sentence")
def one_sentence_fixture():
    return one_sentence


@pytest.fixture(scope="module")
def one_thread():
    """Small tensors: one thread is much faster than two on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
