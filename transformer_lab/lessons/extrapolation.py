"""Positions beyond the training length: a one-head model learns "repeat the previous token" on
short sequences and is then read on longer ones (notebook 03).

    PreviousTokenModel     embedding + positions, one causal attention head, a linear read-out
    train_previous_token   train it on random sequences of one length (seconds on a CPU)
    accuracy_by_position   how often position t predicts token t - 1, for t = 1 .. length - 1

Finding the previous token needs positions: the head must put its weight on key t - 1. With a
learned table, the rows past the training length are never trained and stay at their random
start; with sinusoidal positions every row is defined, but the model only ever saw the first
few, and what it learned about them need not carry over to the rest.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab.positional import sinusoidal_encoding

__all__ = ["PreviousTokenModel", "train_previous_token", "accuracy_by_position"]

POSITION_KINDS = ("sinusoidal", "learned")


class PreviousTokenModel(nn.Module):
    """Token embedding plus positions, one causal self-attention head, a linear read-out."""

    def __init__(self, kind: str, vocab_size: int, d_model: int, max_len: int) -> None:
        super().__init__()
        if kind not in POSITION_KINDS:
            raise ValueError(f"kind must be one of {POSITION_KINDS}, but received {kind!r}.")
        self.kind, self.max_len = kind, max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        if kind == "learned":  # one trainable row per position, as in GPT-2
            self.positions = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        else:  # the fixed formula of notebook 03
            self.register_buffer("positions", sinusoidal_encoding(max_len, d_model))
        self.w_q, self.w_k, self.w_v = (nn.Linear(d_model, d_model, bias=False) for _ in range(3))
        self.read_out = nn.Linear(d_model, vocab_size)

    def forward(self, ids: Tensor, return_weights: bool = False):
        """(B, T) token ids -> (B, T, vocab) logits (and the (B, T, T) attention weights)."""
        T = ids.shape[1]
        if T > self.max_len:
            raise ValueError(f"ids has {T} positions, but the model has max_len={self.max_len}.")
        x = self.embed(ids) + self.positions[:T]  # (B, T, C)
        scores = self.w_q(x) @ self.w_k(x).transpose(1, 2) / math.sqrt(x.shape[-1])  # (B, T, T)
        future = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)  # (B, T, T)
        logits = self.read_out(weights @ self.w_v(x))  # (B, T, vocab)
        return (logits, weights) if return_weights else logits


def train_previous_token(
    kind: str,
    train_len: int = 16,
    max_len: int = 64,
    steps: int = 400,
    vocab_size: int = 16,
    d_model: int = 32,
    batch_size: int = 64,
    seed: int = 0,
) -> PreviousTokenModel:
    """Train position t to predict token t - 1 on random sequences of exactly train_len tokens."""
    if not 2 <= train_len <= max_len:
        raise ValueError(f"train_len must lie in 2..max_len={max_len}, but received {train_len}.")
    torch.manual_seed(seed)
    model = PreviousTokenModel(kind, vocab_size, d_model, max_len)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(vocab_size, (batch_size, train_len), generator=generator)  # (B, T)
        logits = model(ids)[:, 1:]  # (B, T - 1, vocab): positions 1 .. T - 1
        loss = F.cross_entropy(logits.reshape(-1, vocab_size), ids[:, :-1].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


@torch.no_grad()
def accuracy_by_position(
    model: PreviousTokenModel, length: int, n_sequences: int = 256, seed: int = 1
) -> Tensor:
    """(length - 1,) share of fresh random sequences where position t predicts token t - 1."""
    generator = torch.Generator().manual_seed(seed)
    vocab_size = model.embed.num_embeddings
    ids = torch.randint(vocab_size, (n_sequences, length), generator=generator)  # (N, length)
    predicted = model(ids)[:, 1:].argmax(dim=-1)  # (N, length - 1)
    return (predicted == ids[:, :-1]).float().mean(dim=0)
