"""A bigram language model read straight from an embedding table (notebook 00).

The simplest language model predicts the next token from the current one only. Its parameters
can be one (V, V) table: row ``i`` holds the logits of the token that follows token ``i``, so
the model *is* an embedding lookup whose width equals the vocabulary (:class:`BigramLM`).

- **The starting loss.** A model that predicts every token with probability 1/V has
  cross-entropy ln V (:func:`uniform_loss`). A table initialised near zero starts there; one
  initialised as ``nn.Embedding`` does (N(0, 1) entries) starts higher, confidently wrong.
- **The floor.** The best any bigram can do on a text is the loss of its own normalised pair
  counts (:func:`count_bigram_loss`); training with gradient descent approaches it.
- **Weight tying** (Press and Wolf, 2017; used by GPT-2): a narrower model embeds with
  ``W_emb`` (V, C) and reads out with the same matrix transposed, ``logits = W_emb[i] W_emb^T``
  (:class:`TiedBigramLM`): V C parameters instead of 2 V C, and every row of ``W_emb`` now
  receives a gradient from every position, through the softmax over the whole vocabulary.
  :func:`rows_moved` measures which rows of the input table one optimiser step changes.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "BigramLM",
    "TiedBigramLM",
    "uniform_loss",
    "bigram_loss",
    "count_bigram_loss",
    "train_bigram",
    "rows_moved",
]


def _check_ids(ids: torch.Tensor, vocab_size: int) -> None:
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.dim() != 1:
        raise TypeError("ids must be a 1-D torch.long tensor of token ids.")
    if ids.numel() < 2:
        raise ValueError(f"ids must hold at least 2 tokens, but received {ids.numel()}.")
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise ValueError(
            f"ids must lie in [0, {vocab_size}), but range {int(ids.min())}..{int(ids.max())}."
        )


class BigramLM(nn.Module):
    """Next-token logits = row ``x`` of a (V, V) table: an embedding of width V.

    Args:
        vocab_size: V.
        init_std: standard deviation of the table's entries at the start (``nn.Embedding``'s
            default is 1.0; 0.0 gives exactly uniform predictions).
    """

    def __init__(self, vocab_size: int, init_std: float = 0.0) -> None:
        super().__init__()
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, but received {vocab_size}.")
        self.table = nn.Embedding(vocab_size, vocab_size)
        if init_std < 0:
            raise ValueError(f"init_std must be >= 0, but received {init_std}.")
        nn.init.normal_(self.table.weight, std=init_std)  # std 0: all zeros, uniform predictions

    @property
    def input_table(self) -> torch.Tensor:
        """The (V, width) matrix the input ids index."""
        return self.table.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.table(x)  # (..., V)


class TiedBigramLM(nn.Module):
    """Embed with ``W_emb`` (V, C), read out with ``W_emb^T``: one matrix for both ends."""

    def __init__(self, vocab_size: int, width: int = 16, init_std: float = 0.1) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, width)
        nn.init.normal_(self.embed.weight, std=init_std)
        self.bias = nn.Parameter(torch.zeros(vocab_size))  # a per-token prior, as GPT-2 lacks

    @property
    def input_table(self) -> torch.Tensor:
        return self.embed.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)  # (..., C)
        return h @ self.embed.weight.T + self.bias  # (..., V): the same matrix, transposed


def uniform_loss(vocab_size: int) -> float:
    """Cross-entropy of predicting every one of V tokens with probability 1/V: ln V."""
    return math.log(vocab_size)


def bigram_loss(model: nn.Module, ids: torch.Tensor) -> float:
    """Mean cross-entropy of ``model`` predicting ``ids[t + 1]`` from ``ids[t]``, over all t."""
    with torch.no_grad():
        logits = model(ids[:-1])  # (N - 1, V)
        return nn.functional.cross_entropy(logits, ids[1:]).item()


def count_bigram_loss(ids: torch.Tensor, vocab_size: int, smoothing: float = 0.0) -> float:
    """Loss on ``ids`` of the bigram given by ``ids``' own pair counts: the floor of training.

    With ``smoothing`` > 0 every pair gets that many extra counts (add-k smoothing).
    """
    _check_ids(ids, vocab_size)
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    counts.index_put_(
        (ids[:-1], ids[1:]), torch.ones(ids.numel() - 1, dtype=torch.float64), accumulate=True
    )
    counts += smoothing
    log_p = (counts / counts.sum(dim=1, keepdim=True).clamp_min(1e-300)).log()  # (V, V)
    return float(-log_p[ids[:-1], ids[1:]].mean())


def train_bigram(
    model: nn.Module,
    ids: torch.Tensor,
    steps: int = 200,
    batch_size: int = 2048,
    lr: float = 0.1,
    seed: int = 0,
) -> list[float]:
    """Train on random (token, next token) pairs of ``ids`` with Adam; return each step's loss."""
    if steps < 1 or batch_size < 1:
        raise ValueError(
            f"steps and batch_size must be >= 1, but received {steps} and {batch_size}."
        )
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        t = torch.randint(ids.numel() - 1, (batch_size,), generator=g)  # (B,) positions
        loss = nn.functional.cross_entropy(model(ids[t]), ids[t + 1])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def rows_moved(
    model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> list[int]:
    """Rows of ``model.input_table`` that one optimiser step on the batch (x -> y) changes.

    ``optimizer`` must hold ``model``'s parameters; the step is taken (the model changes).
    """
    before = model.input_table.detach().clone()  # (V, width)
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    changed = (model.input_table.detach() != before).any(dim=1)  # (V,)
    return changed.nonzero().flatten().tolist()
