"""In-context learning in miniature: a two-layer attention-only model learns to copy from its own
context, through an induction head (notebook 07).

    repeated_sequences     (B, 2L) random tokens, the second half a copy of the first
    AttentionOnlyModel     embedding + learned positions, causal attention layers (no MLP)
    train_induction        train on repeated sequences of random lengths; returns the history
    repeat_losses          next-token loss on the first and on the second copy
    induction_score        mean weight a second-copy token puts on the token after its earlier twin

The first copy is random, so its tokens cannot be predicted better than chance (log V). The
second can be: find where the current token occurred before and predict what came next. Two
layers do it: a previous-token head writes "my predecessor was a" into each position, and an
induction head in layer 2 looks for the position whose predecessor equals the current token
(Olsson et al., 2022, "In-context Learning and Induction Heads"). The lengths vary from batch to
batch, so a fixed positional offset cannot do the job.
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "repeated_sequences",
    "AttentionOnlyModel",
    "train_induction",
    "repeat_losses",
    "induction_score",
]


def repeated_sequences(batch_size: int, length: int, vocab_size: int, generator=None) -> Tensor:
    """(batch_size, 2 * length) token ids: random tokens, then the same tokens again."""
    if length < 2:
        raise ValueError(f"length must be at least 2, but received {length}.")
    first = torch.randint(vocab_size, (batch_size, length), generator=generator)  # (B, L)
    return torch.cat([first, first], dim=1)  # (B, 2L)


class AttentionOnlyModel(nn.Module):
    """Token embedding + learned positions, n_layers causal attention layers with residuals,
    a final layer norm and a linear read-out. Attention is torch's nn.MultiheadAttention."""

    def __init__(self, vocab_size: int, d_model: int, max_len: int, n_layers: int = 2) -> None:
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Parameter(torch.randn(max_len, d_model) * 0.1)  # (max_len, C)
        self.layers = nn.ModuleList(
            nn.MultiheadAttention(d_model, 1, bias=False, batch_first=True) for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.read_out = nn.Linear(d_model, vocab_size)

    def forward(self, ids: Tensor) -> tuple[Tensor, list[Tensor]]:
        """(B, T) ids -> (B, T, vocab) logits and one (B, T, T) weight map per layer."""
        T = ids.shape[1]
        if T > self.max_len:
            raise ValueError(f"ids has {T} positions, but the model has max_len={self.max_len}.")
        x = self.embed(ids) + self.positions[:T]  # (B, T, C)
        future = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1)  # True = blocked
        maps = []
        for attention in self.layers:
            out, weights = attention(x, x, x, attn_mask=future, need_weights=True)
            x = x + out  # (B, T, C): the residual stream
            maps.append(weights)  # (B, T, T)
        return self.read_out(self.norm(x)), maps


def _losses_per_half(logits: Tensor, ids: Tensor, length: int) -> tuple[Tensor, Tensor]:
    """Mean loss predicting tokens 1..L-1 (first copy) and L+1..2L-1 (second copy, token L
    excluded: nothing says where the copy starts)."""
    vocab = logits.shape[-1]
    per_token = F.cross_entropy(
        logits[:, :-1].reshape(-1, vocab), ids[:, 1:].reshape(-1), reduction="none"
    ).view(ids.shape[0], -1)  # (B, 2L - 1): entry t scores the prediction of token t + 1
    return per_token[:, : length - 1].mean(), per_token[:, length:].mean()


def train_induction(
    steps: int = 600,
    vocab_size: int = 32,
    d_model: int = 48,
    lengths: tuple[int, int] = (6, 16),
    batch_size: int = 32,
    seed: int = 0,
) -> tuple[AttentionOnlyModel, list[tuple[float, float]]]:
    """Train on repeated random sequences, each batch of a random length in ``lengths``.

    Returns the model and, per step, (loss on the first copy, loss on the second copy).
    """
    low, high = lengths
    if not 2 <= low <= high:
        raise ValueError(
            f"lengths must be (low, high) with 2 <= low <= high, but received {lengths}."
        )
    torch.manual_seed(seed)
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    model = AttentionOnlyModel(vocab_size, d_model, max_len=2 * high)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    history = []
    for _ in range(steps):
        length = rng.randint(low, high)
        ids = repeated_sequences(batch_size, length, vocab_size, generator)  # (B, 2L)
        logits, _ = model(ids)
        first, second = _losses_per_half(logits, ids, length)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab_size), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append((first.item(), second.item()))
    return model, history


@torch.no_grad()
def repeat_losses(
    model: AttentionOnlyModel, length: int, n_sequences: int = 256, seed: int = 1
) -> tuple[float, float]:
    """Mean next-token loss on the first and on the second copy of fresh repeated sequences."""
    generator = torch.Generator().manual_seed(seed)
    ids = repeated_sequences(n_sequences, length, model.embed.num_embeddings, generator)
    logits, _ = model(ids)
    first, second = _losses_per_half(logits, ids, length)
    return first.item(), second.item()


def induction_score(weights: Tensor, length: int) -> Tensor:
    """Mean weight from position t of the second copy (t = L .. 2L-1) to position t - L + 1,
    the token that followed the current token's earlier occurrence.

    Args:
        weights: (B, 2L, 2L) or (2L, 2L) attention weights on repeated sequences.
        length: L, the length of one copy.
    Returns:
        a 0-dim tensor in [0, 1]; 1 for a perfect induction head.
    """
    if weights.shape[-1] != 2 * length or weights.shape[-2] != 2 * length:
        raise ValueError(
            f"weights must be (..., {2 * length}, {2 * length}) for length={length}, "
            f"but received shape {tuple(weights.shape)}."
        )
    queries = torch.arange(length, 2 * length)  # (L,)
    return weights[..., queries, queries - length + 1].mean()
