"""Why attention: a dense layer, a convolution and a recurrent network beside one attention layer.

Notebook 0 measures what the handouts argue (Klami's "Setup: Alternatives"; Kamper's "Issues
with RNNs"):

- a dense layer over all N tokens of width D needs (N D)^2 weights, attention's projections
  only a few D^2, whatever N is (:func:`dense_parameters`, :func:`attention_parameters`);
- a convolution sees ``receptive_field`` tokens, so a distant token needs many stacked layers;
- a recurrent network reads the tokens one after another (T sequential steps), and the
  gradient reaching an early input shrinks with the distance (:func:`input_gradient_norms`).

All three classifiers read a (B, T) sequence of symbols and predict a label from the last
position, as the recall task of :mod:`transformer_lab.data.long_range` asks.
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_lab.attention import scaled_dot_product_attention
from transformer_lab.data.long_range import recall_batch

__all__ = [
    "dense_parameters",
    "attention_parameters",
    "RecurrentClassifier",
    "ConvClassifier",
    "AttentionClassifier",
    "train_recall",
    "input_gradient_norms",
]


def dense_parameters(n_tokens: int, width: int, bias: bool = False) -> int:
    """Weights of one dense layer mapping all N x D inputs to N x D outputs: (N D)^2 (+ N D)."""
    size = n_tokens * width
    return size * size + (size if bias else 0)


def attention_parameters(width: int, bias: bool = False) -> int:
    """Weights of one single-head self-attention layer with W_q, W_k, W_v, W_o (D x D each)."""
    return 4 * width * width + (4 * width if bias else 0)


class RecurrentClassifier(nn.Module):
    """Embedding -> ``nn.RNN`` (tanh) or ``nn.GRU`` -> a linear read-out of the last state.

    ``embed`` is exposed so :func:`input_gradient_norms` can measure gradients per input.
    """

    def __init__(self, n_symbols: int, width: int = 32, kind: str = "gru") -> None:
        super().__init__()
        cells = {"rnn": nn.RNN, "gru": nn.GRU}
        if kind not in cells:
            raise ValueError(f"kind must be 'rnn' or 'gru', but received {kind!r}.")
        self.kind = kind
        self.embed = nn.Embedding(n_symbols, width)
        self.cell = cells[kind](width, width, batch_first=True)
        self.out = nn.Linear(width, n_symbols)

    def sequential_steps(self, T: int) -> int:
        """Steps that must run one after another: one per token."""
        return T

    def forward_embedded(self, e: torch.Tensor) -> torch.Tensor:
        states, _ = self.cell(e)  # (B, T, C): the state after each token
        return self.out(states[:, -1])  # (B, V)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_embedded(self.embed(x))


class ConvClassifier(nn.Module):
    """Embedding -> ``n_layers`` causal 1-D convolutions (GELU) -> read-out at the last position."""

    def __init__(
        self, n_symbols: int, width: int = 32, n_layers: int = 2, kernel_size: int = 3
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.embed = nn.Embedding(n_symbols, width)
        self.convs = nn.ModuleList(nn.Conv1d(width, width, kernel_size) for _ in range(n_layers))
        self.out = nn.Linear(width, n_symbols)

    @property
    def receptive_field(self) -> int:
        """How many tokens the last output can see: 1 + layers (kernel - 1)."""
        return 1 + len(self.convs) * (self.kernel_size - 1)

    def sequential_steps(self, T: int) -> int:
        """Steps that must run one after another: one per layer (each is parallel over T)."""
        return len(self.convs)

    def forward_embedded(self, e: torch.Tensor) -> torch.Tensor:
        h = e.transpose(1, 2)  # (B, C, T)
        for conv in self.convs:
            h = torch.nn.functional.pad(h, (self.kernel_size - 1, 0))  # causal: pad the past
            h = torch.nn.functional.gelu(conv(h))  # (B, C, T)
        return self.out(h[:, :, -1])  # (B, V)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_embedded(self.embed(x))


class AttentionClassifier(nn.Module):
    """Embedding + learned positions -> one attention layer queried by the last token -> read-out."""

    def __init__(self, n_symbols: int, width: int = 32, max_len: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(n_symbols, width)
        self.pos = nn.Parameter(torch.randn(max_len, width) * 0.5)
        self.q = nn.Linear(width, width, bias=False)
        self.k = nn.Linear(width, width, bias=False)
        self.v = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, n_symbols)

    def sequential_steps(self, T: int) -> int:
        """Steps that must run one after another: one, every token is read at once."""
        return 1

    def forward_embedded(self, e: torch.Tensor) -> torch.Tensor:
        h = e + self.pos[: e.shape[1]]  # (B, T, C)
        q = self.q(h[:, -1:])  # (B, 1, C): only the last position asks
        out, _ = scaled_dot_product_attention(q, self.k(h), self.v(h))  # (B, 1, C)
        return self.out(out[:, 0])  # (B, V)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_embedded(self.embed(x))


def train_recall(
    model: nn.Module,
    distance: int,
    steps: int = 300,
    batch_size: int = 64,
    lr: float = 3e-3,
    n_symbols: int = 8,
    seed: int = 0,
    eval_size: int = 512,
) -> float:
    """Train ``model`` on the recall task at ``distance`` with Adam; return held-out accuracy."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        x, y = recall_batch(batch_size, distance, n_symbols, g)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.eval()
    x, y = recall_batch(eval_size, distance, n_symbols, torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        return (model(x).argmax(-1) == y).float().mean().item()


def input_gradient_norms(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """|d loss / d input embedding| at every position, averaged over the batch: (T,).

    ``model`` must have ``embed`` and ``forward_embedded`` (every classifier here does).
    """
    e = model.embed(x).detach().requires_grad_(True)  # (B, T, C)
    loss = nn.functional.cross_entropy(model.forward_embedded(e), y)
    (grad,) = torch.autograd.grad(loss, e)
    norms = grad.norm(dim=-1).mean(dim=0)  # (T,)
    if not torch.isfinite(norms).all():
        raise FloatingPointError("the input gradients are not finite.")
    return norms
